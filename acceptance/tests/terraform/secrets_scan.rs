//! Secrets, everywhere: roots with marker secrets (`set_sensitive` on `talosboot_cilium`; the
//! Flux bootstrap's `managed_resources` once the provider has `talosboot_flux_bootstrap`) are
//! planned, applied (once successfully, once into a failure with diagnostics) and read back, and
//! everything a user or an attacker could read afterwards is scanned for the markers, plain and
//! base64-encoded: the state (and its backup), the plan file (raw and unzipped) and `show -json`
//! of it, `TF_LOG=trace` output (CLI and provider, via `TF_LOG_PATH` and stderr), every
//! diagnostic printed, and every object the run leaves in the cluster except the intended Secrets
//! (Helm's release records, which hold the release's values by design): ConfigMaps, Jobs, pods
//! and their logs, events, ServiceAccounts, Leases, annotations. A marker found fails the test
//! and names where.
//!
//! What Terraform itself stores is allowed, and only that: `set_sensitive` is an ordinary
//! (sensitive, not write-only) attribute, so the CLI keeps its configured value in the state and
//! in plan files (including the configuration snapshot a plan file carries). The scan therefore
//! removes the `set_sensitive` attribute itself from the state and `show -json` documents and
//! checks that the provider copies the value nowhere else (computed attributes, private state,
//! metadata); the raw plan file is checked for the markers of write-only inputs only
//! (`managed_resources`), which must not be there at all.

use std::path::Path;

use base64::Engine;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Event, Namespace, Pod, Secret, ServiceAccount};
use kube::Api;
use kube::api::{ListParams, LogParams};

use crate::flux_bootstrap::{DEPLOY_KEY_SECRET, FluxCluster, SOURCE, SYNC_PATH};
use crate::harness::{REQUIRED_PROVIDERS, Workspace};

/// Marker secrets: unique per run, each from one input.
struct Markers(Vec<(&'static str, String)>);

/// Inputs Terraform never stores (write-only): their markers must not be in plan files at all.
const WRITE_ONLY: &[&str] = &["managed_resources"];

impl Markers {
    fn new() -> Markers {
        let nonce = format!(
            "{:x}{:x}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.subsec_nanos())
                .unwrap_or_default()
        );
        Markers(vec![
            ("set_sensitive", format!("TbMarkerSetSensitive{nonce}Zq")),
            (
                "set_sensitive (failing run)",
                format!("TbMarkerFailing{nonce}Zq"),
            ),
            ("managed_resources", format!("TbMarkerManaged{nonce}Zq")),
        ])
    }
    fn get(&self, input: &str) -> &str {
        &self.0.iter().find(|(k, _)| *k == input).expect("marker").1
    }
}

/// The marker and its base64 forms at the three alignments (a marker inside a base64 blob).
/// Also used by the examples' scan (`examples::secrets`).
pub(crate) fn forms(marker: &str) -> Vec<String> {
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut out = vec![marker.to_owned()];
    for pad in 0..3usize {
        let prefixed = format!("{}{marker}", "x".repeat(pad));
        let enc = b64.encode(prefixed.as_bytes());
        // Only the 3-byte groups made of marker bytes alone encode the same in any blob.
        let first_group = pad.div_ceil(3);
        let full_groups = (marker.len() - (3 * first_group - pad)) / 3;
        if full_groups >= 3 {
            out.push(enc[4 * first_group..4 * (first_group + full_groups)].to_owned());
        }
    }
    out
}

#[derive(Default)]
struct Findings(Vec<String>);

impl Findings {
    fn scan(&mut self, markers: &Markers, place: &str, text: &str) {
        for (input, marker) in &markers.0 {
            if forms(marker).iter().any(|f| text.contains(f.as_str())) {
                self.0.push(format!("the {input} marker is in {place}"));
            }
        }
    }
    fn scan_bytes(&mut self, markers: &Markers, place: &str, bytes: &[u8]) {
        self.scan(markers, place, &String::from_utf8_lossy(bytes));
    }
    /// A state or `show -json` document, without the `set_sensitive` attribute the CLI stores.
    fn scan_json(&mut self, markers: &Markers, place: &str, text: &str) {
        match serde_json::from_str::<serde_json::Value>(text) {
            Ok(mut v) => {
                drop_key(&mut v, "set_sensitive");
                self.scan(markers, place, &v.to_string());
            }
            Err(_) => self.scan(markers, place, text),
        }
    }
    /// Markers of write-only inputs only.
    fn scan_write_only(&mut self, markers: &Markers, place: &str, bytes: &[u8]) {
        let text = String::from_utf8_lossy(bytes);
        for (input, marker) in markers.0.iter().filter(|(k, _)| WRITE_ONLY.contains(k)) {
            if forms(marker).iter().any(|f| text.contains(f.as_str())) {
                self.0.push(format!("the {input} marker is in {place}"));
            }
        }
    }
}

fn drop_key(v: &mut serde_json::Value, key: &str) {
    match v {
        serde_json::Value::Object(m) => {
            m.remove(key);
            m.values_mut().for_each(|x| drop_key(x, key));
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(|x| drop_key(x, key)),
        _ => {}
    }
}

fn flux_in_schema(ws: &Workspace) -> bool {
    let schema = ws.ok(&["providers", "schema", "-json"]).json();
    schema["provider_schemas"]
        .as_object()
        .into_iter()
        .flat_map(|m| m.values())
        .any(|p| {
            p["resource_schemas"]
                .get("talosboot_flux_bootstrap")
                .is_some()
        })
}

fn cilium(marker: &str, hang: bool) -> String {
    let job = if hang {
        "  timeout = \"30s\"\n  job = { annotations = { \"talos-sim.dev/hang\" = \"true\" } }\n"
    } else {
        ""
    };
    format!(
        r#"resource "talosboot_cilium" "this" {{
  version = "1.18.4"
  values  = [yamlencode({{ hubble = {{ relay = {{ enabled = true }} }} }})]
  set_sensitive = [{{ name = "talosbootScan.token", value = "{marker}" }}]
{job}}}
"#
    )
}

/// The Flux bootstrap with its write-only `managed_resources` fed from an ephemeral variable
/// (`TF_VAR_scan_secret`), as users feed secrets: never in a plan file, not even in the
/// configuration snapshot a plan file carries. Reconciled by the real Flux Operator and
/// controllers from the loopback Git source, with the deploy key (`deploy_key_secret`, an HCL
/// expression) beside the marker's Secret.
fn flux(deploy_key_secret: &str) -> String {
    let root = r#"
variable "scan_secret" {
  type      = string
  sensitive = true
  ephemeral = true
}

resource "talosboot_flux_bootstrap" "this" {
  revision = 1
  gitops_resources = {
    instance_yaml = yamlencode({
      apiVersion = "fluxcd.controlplane.io/v1"
      kind       = "FluxInstance"
      metadata   = { name = "flux", namespace = "flux-system" }
      spec = {
        distribution = { version = "2.9.x", registry = "ghcr.io/fluxcd" }
        components   = ["source-controller", "kustomize-controller"]
        sync         = { kind = "GitRepository", url = "SOURCE", ref = "refs/heads/main", path = "SYNC_PATH", pullSecret = "DEPLOY_KEY_SECRET" }
      }
    })
    operator_chart = { version = "0.59.0" }
  }
  managed_resources = {
    secrets_yaml = join("\n---\n", [DEPLOY_KEY_EXPRESSION, yamlencode({
      apiVersion = "v1"
      kind       = "Secret"
      metadata   = { name = "flux-system" }
      stringData = { password = var.scan_secret }
    })])
  }
  timeout    = "2m"
  depends_on = [talosboot_cilium.this]
}
"#;
    root.replace("DEPLOY_KEY_EXPRESSION", deploy_key_secret)
        .replace("DEPLOY_KEY_SECRET", DEPLOY_KEY_SECRET)
        .replace("SYNC_PATH", SYNC_PATH)
        .replace("SOURCE", SOURCE)
}

/// Runs `args` with `TF_LOG=trace` into `log`; scans its stdout/stderr and the log.
fn traced(ws: &Workspace, args: &[&str], log: &str, markers: &Markers, f: &mut Findings) -> bool {
    let path = ws.path().join(log);
    let out = ws
        .command(args)
        .env("TF_LOG", "trace")
        .env("TF_LOG_PATH", &path)
        .output()
        .expect("run the CLI");
    let what = args.join(" ");
    f.scan_bytes(
        markers,
        &format!("the output (diagnostics) of `{what}`"),
        &out.stdout,
    );
    f.scan_bytes(
        markers,
        &format!("stderr of `{what}` (CLI and provider logs)"),
        &out.stderr,
    );
    f.scan(
        markers,
        &format!("the TF_LOG=trace log of `{what}`"),
        &std::fs::read_to_string(&path).unwrap_or_default(),
    );
    out.status.success()
}

fn scan_plan_file(ws: &Workspace, plan: &Path, markers: &Markers, f: &mut Findings) {
    f.scan_write_only(
        markers,
        "the raw plan file",
        &std::fs::read(plan).unwrap_or_default(),
    );
    // A plan file is a zip archive: scan its entries uncompressed too.
    if let Ok(out) = std::process::Command::new("unzip")
        .arg("-p")
        .arg(plan)
        .output()
    {
        f.scan_write_only(markers, "the plan file's unzipped entries", &out.stdout);
    }
    let show = ws.ok(&["show", "-json", &plan.display().to_string()]);
    f.scan_json(
        markers,
        "`show -json` of the plan file (set_sensitive itself removed)",
        &show.stdout,
    );
    f.scan(
        markers,
        "stderr of `show -json` of the plan file",
        &show.stderr,
    );
}

async fn scan_cluster(client: &kube::Client, markers: &Markers, f: &mut Findings) {
    let lp = ListParams::default();
    macro_rules! scan_all {
        ($kind:ty, $label:literal) => {
            let api: Api<$kind> = Api::all(client.clone());
            for o in api.list(&lp).await.expect($label).items {
                let name = format!(
                    "{} {}/{}",
                    $label,
                    o.metadata.namespace.clone().unwrap_or_default(),
                    o.metadata.name.clone().unwrap_or_default()
                );
                f.scan(
                    markers,
                    &format!("the cluster: {name}"),
                    &serde_json::to_string(&o).unwrap_or_default(),
                );
            }
        };
    }
    scan_all!(ConfigMap, "ConfigMap");
    scan_all!(Job, "Job");
    scan_all!(Pod, "Pod");
    scan_all!(Event, "Event");
    scan_all!(ServiceAccount, "ServiceAccount");
    scan_all!(Lease, "Lease");
    scan_all!(Namespace, "Namespace");
    scan_all!(DaemonSet, "DaemonSet");
    scan_all!(Deployment, "Deployment");
    let secrets: Api<Secret> = Api::all(client.clone());
    for s in secrets.list(&lp).await.expect("secrets").items {
        let intended = s.type_.as_deref() == Some("helm.sh/release.v1")
            || s.metadata.name.as_deref() == Some("flux-system");
        if !intended {
            let name = format!(
                "Secret {}/{}",
                s.metadata.namespace.clone().unwrap_or_default(),
                s.metadata.name.clone().unwrap_or_default()
            );
            f.scan(
                markers,
                &format!("the cluster: {name}"),
                &serde_json::to_string(&s).unwrap_or_default(),
            );
        }
    }
    let pods: Api<Pod> = Api::all(client.clone());
    for p in pods.list(&lp).await.expect("pods").items {
        let ns = p.metadata.namespace.clone().unwrap_or_default();
        let name = p.metadata.name.clone().unwrap_or_default();
        let api: Api<Pod> = Api::namespaced(client.clone(), &ns);
        for c in p.spec.iter().flat_map(|s| s.containers.iter()) {
            let params = LogParams {
                container: Some(c.name.clone()),
                ..LogParams::default()
            };
            if let Ok(log) = api.logs(&name, &params).await {
                f.scan(
                    markers,
                    &format!("the log of pod {ns}/{name} ({})", c.name),
                    &log,
                );
            }
        }
    }
}

on_both_clis!(async marker_secrets_appear_nowhere_a_user_or_attacker_can_read);
async fn marker_secrets_appear_nowhere_a_user_or_attacker_can_read() {
    // (An external cluster has no loopback Git source, and the failing run hangs the installer
    // with the node layer's annotation.)
    let Some(cluster) = FluxCluster::start().await else {
        return;
    };
    let flux_root = flux(&cluster.deploy_key_secret());
    let client = cluster.client().await;
    let markers = Markers::new();
    let mut f = Findings::default();
    let head = format!("{REQUIRED_PROVIDERS}\n{}\n", cluster.provider_block());
    let mut ws = Workspace::new(&format!(
        "{head}{}",
        cilium(markers.get("set_sensitive"), false)
    ));
    ws.set_env("TF_VAR_scan_secret", markers.get("managed_resources"));
    ws.init();
    let with_flux = flux_in_schema(&ws);
    eprintln!(
        "talosboot_flux_bootstrap in the schema: {with_flux} (managed_resources scanned only then)"
    );
    if with_flux {
        ws.write(
            "main.tf",
            &format!(
                "{head}{}{}",
                cilium(markers.get("set_sensitive"), false),
                flux_root
            ),
        );
    }
    // Plan to a file, apply it, plan again (empty), refresh.
    assert!(
        traced(
            &ws,
            &["plan", "-no-color", "-input=false", "-out=first.tfplan"],
            "plan.log",
            &markers,
            &mut f
        ),
        "plan failed"
    );
    scan_plan_file(&ws, &ws.path().join("first.tfplan"), &markers, &mut f);
    assert!(
        traced(
            &ws,
            &["apply", "-no-color", "-input=false", "first.tfplan"],
            "apply.log",
            &markers,
            &mut f
        ),
        "apply failed"
    );
    assert!(
        traced(
            &ws,
            &["plan", "-no-color", "-input=false", "-detailed-exitcode"],
            "replan.log",
            &markers,
            &mut f
        ),
        "second plan not empty"
    );
    traced(
        &ws,
        &[
            "apply",
            "-refresh-only",
            "-auto-approve",
            "-no-color",
            "-input=false",
        ],
        "refresh.log",
        &markers,
        &mut f,
    );
    // A failing upgrade (hung installer, deadline) with another marker: diagnostics with the
    // pod's log tail, a Job kept for `kubectl logs`.
    ws.write(
        "main.tf",
        &format!(
            "{head}{}{}",
            cilium(markers.get("set_sensitive (failing run)"), true),
            if with_flux { flux_root.as_str() } else { "" }
        ),
    );
    assert!(
        traced(
            &ws,
            &["plan", "-no-color", "-input=false", "-out=second.tfplan"],
            "plan2.log",
            &markers,
            &mut f
        ),
        "plan failed"
    );
    scan_plan_file(&ws, &ws.path().join("second.tfplan"), &markers, &mut f);
    let failed = !traced(
        &ws,
        &["apply", "-no-color", "-input=false", "second.tfplan"],
        "apply2.log",
        &markers,
        &mut f,
    );
    assert!(failed, "the hung installer must fail the apply");
    for file in ["terraform.tfstate", "terraform.tfstate.backup"] {
        f.scan_json(
            &markers,
            &format!("the state file {file} (set_sensitive itself removed)"),
            &ws.read(file),
        );
    }
    let show = ws.ok(&["show", "-json"]);
    f.scan_json(
        &markers,
        "`show -json` of the state (set_sensitive itself removed)",
        &show.stdout,
    );
    if with_flux {
        // Positive control: the write-only value did reach the cluster, in the intended Secret.
        let secret = Api::<Secret>::namespaced(client.clone(), "flux-system")
            .get("flux-system")
            .await
            .expect("the managed Secret");
        let text = serde_json::to_string(&secret).unwrap_or_default();
        assert!(
            forms(markers.get("managed_resources"))
                .iter()
                .any(|f| text.contains(f.as_str())),
            "the managed Secret should hold the marker: the scan would be blind"
        );
    }
    // Positive control: the scanner sees what the CLI stores by design (the configured value).
    assert!(
        ws.read("terraform.tfstate")
            .contains(markers.get("set_sensitive (failing run)")),
        "the state should hold the configured set_sensitive value (Terraform stores it): the scan would be blind"
    );
    scan_cluster(&client, &markers, &mut f).await;
    assert!(f.0.is_empty(), "marker secrets found:\n{}", f.0.join("\n"));
}

#[test]
fn base64_forms_find_a_marker_at_any_alignment() {
    let b64 = base64::engine::general_purpose::STANDARD;
    let marker = "TbMarkerSetSensitiveabc123Zq";
    for prefix in ["", "a", "ab", "abc", "password: "] {
        let blob = b64.encode(format!("{prefix}{marker}\n").as_bytes());
        assert!(
            forms(marker)
                .iter()
                .skip(1)
                .any(|f| blob.contains(f.as_str())),
            "{prefix:?}: {blob}"
        );
    }
}
