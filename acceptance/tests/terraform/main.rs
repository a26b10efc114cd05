//! Acceptance tests: real CLIs drive the built provider, installed from a filesystem mirror,
//! against the embedded Talos cluster (the real control plane) (or a real one, see `harness`).
//! Every test that drives a CLI runs on OpenTofu 1.12.6 and on Terraform 1.16.4 (declared with
//! `on_both_clis!`, named `<test>::opentofu` and `<test>::terraform`); where the two CLIs differ by
//! design, the test names the difference and asserts what each does. Terraform 1.0.3, the protocol
//! floor, runs the tests marked (floor) (`<test>::terraform_1_0_3`).
//!
//! Index:
//! - `install_and_schema` (floor): init writes the lock file; `providers schema -json` shows our schema.
//! - `plan_without_cluster` (floor): provider settings unknown at plan (fed from another resource) → plan works.
//! - `validation`: bad configuration fails at validate/plan with the attribute's source line.
//! - `helm_release` (floor): the data source reads a Helm release record; values never reach state.
//! - `connection_errors`: unreachable endpoint / wrong CA produce errors that name the cause.
//! - `provider_retry`: `api_retry_timeout`: a refresh against an API that does not answer logs the
//!   wait and its budget, and stops there; a resource's `cluster` with its own retries for that
//!   one, not the provider block's.
//! - `lifecycle` (floor): a managed resource is created, updated and destroyed.
//! - `write_only`: a write-only value reaches the provider and no state, plan or log; Terraform 1.0.3 refuses it.
//! - `unknown_provider_config` (floor): provider settings unknown at plan still plan and apply in one run.
//! - `ephemeral_kubeconfig`: the provider configured from an ephemeral kubeconfig (as
//!   `ephemeral "talos_cluster_kubeconfig"` gives it): a saved plan applied, the next plan empty,
//!   the credential in no state or plan file.
//! - `checks`: `check` blocks and preconditions reading `data.talosboot_helm_release`.
//! - `import_and_removed`: `import` blocks (and generated config), `removed` without destroy.
//! - `query` (Terraform 1.16 only): `terraform query` lists Helm releases installed outside
//!   talosboot and the generated configuration adopts them without a new revision; import by
//!   identity; identities stable across plans.
//! - `functions`: `provider::talosboot::cilium_talos_values` and `cilium_talos_values_with_kube_proxy`.
//! - `cilium_components`: every component of the release waited for and watched (a broken
//!   `cilium-envoy` fails the apply and warns on refresh, naming it; Hubble relay waited for).
//! - `cilium_kube_proxy`: `kube_proxy_replacement` on clusters with and without kube-proxy (the
//!   warning, the error at plan and before any Job, the Service-IP diagnosis).
//! - `cilium::talos_prune`: the guide's inline-manifest adoption on Talos 1.13 and 1.14 replayed to
//!   `talosctl upgrade-k8s`' prune: Cilium survives; the negative control loses it.
//! - `cilium_versions`: chart versions: Cilium 1.20.2 with Gateway API refused at plan and before
//!   any Job while its CRDs are missing (named), installed once they exist; a removed value key
//!   warned with its replacement; node-port features without the replacement on 1.19 refused; a
//!   Flux Operator chart too old for Flux 2.9 refused naming the minimum chart.
//! - `migrating_cilium`: the Cilium migration guide replayed: a Cilium installed by Helm with
//!   non-Talos values, moved from a `helm_release` state; the plan names each value path
//!   (secrets as `(sensitive)`), the running values kept, the next plan empty.
//! - `mixed_history`: one release written in turn by talosboot with a Helm 3 image, the real Helm 4
//!   by hand, talosboot with the default Helm 4 image, a Helm 3 image again, Helm 4 server-side by
//!   hand; a Helm 3 image on that release warned at plan and refused at apply, the deliberate
//!   switch (`job.apply_method = "csa"`): records (`apply_method`), data source, value diff,
//!   `helm history` and `helm get values` at every step.
//! - `managed_by`: a release Argo CD (3's tracking annotation, the instance label), Flux's
//!   helm-controller, a Flux Kustomization or the Flux Operator took over is never upgraded, even
//!   by `apply -refresh=false`, and the plan names the tool.
//! - `concurrent`: two applies at once from two roots: different targets converge side by side;
//!   one target is serialized by its Lease.
//! - `chaos`: seeded random faults during repeated applies; state stays truthful, applies converge
//!   (`TALOSBOOT_CHAOS_SEED`, `TALOSBOOT_CHAOS_LONG=1`).
//! - `fleet`: one root, `for_each` over three clusters, each instance through its own write-only
//!   `cluster`: applied and planned empty; no credential in state, plan or trace log; drift on one
//!   cluster planned on that instance only and repaired; one unreachable cluster fails its instance
//!   (naming its API server) while the others apply, and nothing leaves the state.
//! - `fleet_reads`: the data source reads a release on a second cluster through its `cluster`
//!   (a kubeconfig file), the provider pointing at the first; a credential in a read's `cluster`
//!   is refused at validation, naming it; `terraform query` (Terraform 1.16 only) lists a second
//!   cluster's releases the same way; no credential or `cluster` setting in state, plan JSON or
//!   the query's JSON output.
//! - `fleet_import`: `import` blocks with `for_each` and `cluster` per instance, the provider
//!   connecting nowhere: two imports read from each instance's own cluster, no install, no new
//!   revision, the next plan empty; an import ID not on its cluster fails at plan naming it;
//!   the `import` command stores the ID only; a provider pointed at one cluster never leaves its
//!   release in another instance's plan; a bad `cluster` fails `validate` on its path;
//!   `cluster` removed never silently moves a resource (an error without a provider connection,
//!   a replacement naming both API servers when the provider reaches another cluster).
//! - `secrets_scan`: marker secrets never appear in state, plans, logs, diagnostics or the cluster.
//! - `flux_bootstrap`: `talosboot_flux_bootstrap` (index in the module), reconciled by the real
//!   Flux Operator and controllers from a Git source served on loopback; `flux_bootstrap::fleet`,
//!   a bootstrap per cluster through `cluster` from one root.
//! - `examples`: every HCL file under `examples/` is formatted, validated, and the full roots planned.
//! - `release` (floor): `scripts/release` output installs from a packed filesystem mirror; lock hash.

#[macro_use]
mod harness;

mod chaos;
mod checks;
mod cilium;
mod cilium_components;
mod cilium_kube_proxy;
mod cilium_versions;
mod concurrent;
mod ephemeral_kubeconfig;
mod examples;
mod fleet;
mod fleet_import;
mod fleet_reads;
mod flux_bootstrap;
mod functions;
mod helm_release_resource;
mod import_and_removed;
mod lifecycle;
mod managed_by;
mod migrating_cilium;
mod mixed_history;
mod provider_retry;
mod query;
mod release;
mod secrets_scan;
mod unknown_provider_config;
mod write_only;

use std::io::Write;

use base64::Engine;
use harness::{REQUIRED_PROVIDERS, TestCluster, Workspace};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};

fn unique(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or_default();
    format!("{prefix}-{:x}{:x}", std::process::id(), nanos)
}

on_both_clis!(install_and_schema, floor);
fn install_and_schema() {
    let ws = Workspace::new(&format!(
        "{REQUIRED_PROVIDERS}\nprovider \"talosboot\" {{}}\n"
    ));
    let cli = ws.cli();
    let init = ws.init();
    assert!(
        init.stdout.contains("talosboot/talosboot v0.2.0"),
        "init should install our provider from the mirror:\n{}",
        init.text()
    );
    let lock = std::fs::read_to_string(ws.path().join(".terraform.lock.hcl")).expect("lock file");
    assert!(lock.contains(&cli.provider_address()), "{lock}");
    assert!(lock.contains("h1:"), "lock file records a hash: {lock}");

    let schema = ws.ok(&["providers", "schema", "-json"]);
    let json: serde_json::Value = serde_json::from_str(&schema.stdout).expect("schema json");
    let ours = &json["provider_schemas"][cli.provider_address()];
    let provider_attrs = &ours["provider"]["block"]["attributes"];
    assert_eq!(provider_attrs["kubeconfig_raw"]["sensitive"], true);
    assert_eq!(provider_attrs["client_key"]["sensitive"], true);
    let ds = &ours["data_source_schemas"]["talosboot_helm_release"]["block"]["attributes"];
    assert_eq!(ds["name"]["required"], true);
    assert_eq!(ds["values_sha256"]["computed"], true);
    assert!(
        ds.get("values").is_none(),
        "release values must not be exposed"
    );
    assert_eq!(ds["status"]["description_kind"], "markdown");
}

on_both_clis!(plan_without_cluster, floor);
fn plan_without_cluster() {
    // The kubeconfig comes from a resource that does not exist yet, as with talos_cluster_kubeconfig.
    let ws = Workspace::new(&format!(
        r#"{REQUIRED_PROVIDERS}
resource "null_resource" "cluster" {{}}

provider "talosboot" {{
  host                   = "https://${{null_resource.cluster.id}}.cluster.invalid:6443"
  cluster_ca_certificate = "-----BEGIN CERTIFICATE-----\n${{null_resource.cluster.id}}\n-----END CERTIFICATE-----"
  token                  = null_resource.cluster.id
}}

data "talosboot_helm_release" "cilium" {{
  name       = "cilium"
  namespace  = "kube-system"
  depends_on = [null_resource.cluster]
}}

output "cilium_status" {{
  value = data.talosboot_helm_release.cilium.status
}}
"#
    ));
    ws.init();
    let plan = ws.run(&["plan", "-no-color", "-input=false"]);
    assert!(
        plan.success,
        "plan must not need the cluster:\n{}",
        plan.text()
    );
    assert!(
        plan.stdout
            .contains("data.talosboot_helm_release.cilium will be read during apply"),
        "{}",
        plan.text()
    );
}

on_both_clis!(validation);
fn validation() {
    // Terraform stops at provider errors, so the provider block and the data source are checked apart.
    let provider = Workspace::new(&format!(
        r#"{REQUIRED_PROVIDERS}
provider "talosboot" {{
  config_path = "/nonexistent/kubeconfig"
  host        = "https://10.5.0.2:6443"
}}

data "talosboot_helm_release" "cilium" {{
  name = "cilium"
}}
"#
    ));
    provider.init();
    let out = provider.run(&["validate", "-no-color"]);
    assert!(!out.success, "validate must fail:\n{}", out.text());
    let text = out.text();
    assert!(text.contains("Conflicting connection settings"), "{text}");
    // Terraform prints the offending source line when the diagnostic carries the attribute path.
    assert!(
        text.contains(r#"host        = "https://10.5.0.2:6443""#),
        "{text}"
    );
    let plan = provider.run(&["plan", "-no-color", "-input=false"]);
    assert!(!plan.success);
    assert!(plan.text().contains("Conflicting connection settings"));

    let data_source = Workspace::new(&format!(
        r#"{REQUIRED_PROVIDERS}
provider "talosboot" {{}}

data "talosboot_helm_release" "bad" {{
  name = "Cilium_1"
}}
"#
    ));
    data_source.init();
    let out = data_source.run(&["validate", "-no-color"]);
    assert!(!out.success, "validate must fail:\n{}", out.text());
    let text = out.text();
    assert!(text.contains("Invalid release name"), "{text}");
    assert!(text.contains(r#"name = "Cilium_1""#), "{text}");
}

/// A release record as Helm writes it; `gzip: false` as very old Helm 3 versions did.
fn release_secret(
    name: &str,
    namespace: &str,
    revision: i64,
    status: &str,
    gzip: bool,
    values: serde_json::Value,
) -> Secret {
    chart_release_secret("cilium", name, namespace, revision, status, gzip, values)
}

/// [`release_secret`] of another chart than Cilium's (version 1.18.4 all the same).
fn chart_release_secret(
    chart: &str,
    name: &str,
    namespace: &str,
    revision: i64,
    status: &str,
    gzip: bool,
    values: serde_json::Value,
) -> Secret {
    let record = serde_json::json!({
        "name": name, "namespace": namespace, "version": revision,
        "info": {"status": status, "last_deployed": "2026-11-29T10:00:00Z", "description": "Install complete"},
        "chart": {"metadata": {"name": chart, "version": "1.18.4", "appVersion": "1.18.4"}},
        "config": values,
        "manifest": "---\n"
    });
    let json = serde_json::to_vec(&record).expect("json");
    let payload = if gzip {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(&json).expect("gzip");
        gz.finish().expect("gzip")
    } else {
        json
    };
    let encoded = base64::engine::general_purpose::STANDARD.encode(payload);
    Secret {
        metadata: ObjectMeta {
            name: Some(format!("sh.helm.release.v1.{name}.v{revision}")),
            namespace: Some(namespace.into()),
            labels: Some(
                [
                    ("owner", "helm"),
                    ("name", name),
                    ("status", status),
                    ("version", &revision.to_string()),
                ]
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
            ),
            ..Default::default()
        },
        type_: Some("helm.sh/release.v1".into()),
        data: Some([("release".to_owned(), ByteString(encoded.into_bytes()))].into()),
        ..Default::default()
    }
}

on_both_clis!(async helm_release, floor);
async fn helm_release() {
    let cluster = TestCluster::shared().await;
    let client = cluster.client().await;
    let namespace = unique("tb-helm");
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &Namespace {
                metadata: ObjectMeta {
                    name: Some(namespace.clone()),
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .await
        .expect("create namespace");
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &namespace);
    let secret_value = "hunter2-must-not-leak";
    // Revision 10 sorts before 2 as text: the current record is the numerically highest one, here a
    // pending upgrade (what a killed `helm upgrade` leaves), stored without gzip.
    for (revision, status, gzip) in [
        (1, "superseded", true),
        (2, "deployed", true),
        (10, "pending-upgrade", false),
    ] {
        let values =
            serde_json::json!({"k8sServicePort": 7445, "token": secret_value, "rev": revision});
        secrets
            .create(
                &PostParams::default(),
                &release_secret("cilium", &namespace, revision, status, gzip, values),
            )
            .await
            .expect("seed release record");
    }

    let ws = Workspace::new(&format!(
        r#"{REQUIRED_PROVIDERS}
{provider}
data "talosboot_helm_release" "cilium" {{
  name      = "cilium"
  namespace = "{namespace}"
}}

data "talosboot_helm_release" "absent" {{
  name      = "flux-operator"
  namespace = "{namespace}"
}}

output "status"   {{ value = data.talosboot_helm_release.cilium.status }}
output "revision" {{ value = data.talosboot_helm_release.cilium.revision }}
output "chart"    {{ value = "${{data.talosboot_helm_release.cilium.chart}}-${{data.talosboot_helm_release.cilium.chart_version}}" }}
output "absent"   {{ value = data.talosboot_helm_release.absent.exists }}
output "hash"     {{ value = data.talosboot_helm_release.cilium.values_sha256 }}
"#,
        provider = cluster.provider_block()
    ));
    ws.init();
    let apply = ws.ok(&["apply", "-auto-approve", "-no-color", "-input=false"]);
    let outputs: serde_json::Value =
        serde_json::from_str(&ws.ok(&["output", "-json"]).stdout).expect("outputs json");
    assert_eq!(
        outputs["status"]["value"],
        "pending-upgrade",
        "{}",
        apply.text()
    );
    assert_eq!(outputs["revision"]["value"], 10);
    assert_eq!(outputs["chart"]["value"], "cilium-1.18.4");
    assert_eq!(outputs["absent"]["value"], false);
    let hash = outputs["hash"]["value"].as_str().unwrap_or_default();
    assert!(
        hash.starts_with("hmac-sha256:") && hash.len() == "hmac-sha256:".len() + 64,
        "{hash}"
    );
    // Keyed by the cluster's identity: the plain digest of the values (which an attacker holding
    // the state could test guesses of the token against) is not what is stored.
    let plain = talosboot::cluster::helm::release::values_digest(Some(&serde_json::json!(
        {"k8sServicePort": 7445, "token": secret_value, "rev": 10}
    )));
    assert!(!hash.contains(&plain), "the values hash is keyed");
    assert!(
        !ws.state_text().contains(secret_value),
        "release values leaked into state"
    );
    assert!(
        !apply.text().contains(secret_value),
        "release values leaked into output"
    );

    let _ = namespaces
        .delete(&namespace, &DeleteParams::default())
        .await;
}

// Terraform runs as a blocking child process while the simulator serves from this runtime:
// enough workers that one blocked thread never starves the server, whatever the core count.
on_both_clis!(async connection_errors);
async fn connection_errors() {
    // A port nothing listens on: the error names the endpoint and "connection refused".
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    drop(listener);
    let ws = Workspace::new(&format!(
        r#"{REQUIRED_PROVIDERS}
provider "talosboot" {{
  host  = "https://127.0.0.1:{port}"
  token = "abc"
}}
data "talosboot_helm_release" "cilium" {{
  name      = "cilium"
  namespace = "kube-system"
}}
"#
    ));
    ws.init();
    let plan = ws.run(&["plan", "-no-color", "-input=false"]);
    assert!(!plan.success);
    let text = plan.flat();
    assert!(
        text.contains(&format!(
            "cannot reach the Kubernetes API at https://127.0.0.1:{port}: connection refused"
        )),
        "{text}"
    );
    assert!(!text.contains("deadline exceeded"), "{text}");

    // The right endpoint with a CA that did not sign its certificate: the simulator's, or the real
    // cluster's API server from its kubeconfig (TLS fails before the token is ever sent).
    fn current_server(path: &std::path::Path) -> String {
        let kubeconfig = kube::config::Kubeconfig::read_from(path).expect("read kubeconfig");
        let context = kubeconfig
            .current_context
            .clone()
            .expect("a current context");
        let cluster = kubeconfig
            .contexts
            .iter()
            .find(|c| c.name == context)
            .and_then(|c| c.context.as_ref())
            .map(|c| c.cluster.clone())
            .expect("the current context names a cluster");
        kubeconfig
            .clusters
            .iter()
            .find(|c| c.name == cluster)
            .and_then(|c| c.cluster.as_ref())
            .and_then(|c| c.server.clone())
            .expect("the current cluster has a server URL")
    }
    let cluster = TestCluster::shared().await;
    let (url, token) = (
        current_server(&cluster.kubeconfig_path),
        "talosboot-acceptance-token-never-sent".to_owned(),
    );
    let other_ca = rcgen_ca_pem();
    let ws = Workspace::new(&format!(
        r#"{REQUIRED_PROVIDERS}
provider "talosboot" {{
  host                   = "{url}"
  cluster_ca_certificate = <<-EOT
{other_ca}
EOT
  token                  = "{token}"
}}
data "talosboot_helm_release" "cilium" {{
  name      = "cilium"
  namespace = "kube-system"
}}
"#,
    ));
    ws.init();
    let plan = ws.run(&["plan", "-no-color", "-input=false"]);
    assert!(!plan.success);
    assert!(
        plan.flat()
            .contains("certificate signed by unknown authority"),
        "{}",
        plan.text()
    );
    assert!(!plan.text().contains(&token), "token leaked into output");
}

/// A CA certificate that did not sign anything the simulator serves.
fn rcgen_ca_pem() -> String {
    let key = rcgen::KeyPair::generate().expect("key");
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params.self_signed(&key).expect("self-signed").pem()
}
