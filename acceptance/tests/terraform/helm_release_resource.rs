//! `talosboot_helm_release` (the resource) with the real OpenTofu CLI against the embedded Talos cluster:
//! the seed 003 root (Argo CD right after Cilium) applies and plans empty; a chart whose pods cannot
//! start reports why and stays in state, tainted; a release left `pending-upgrade` is repaired;
//! `rbac = "minimal"` installs, upgrades and uninstalls with only what the chart renders.

use std::io::{Read, Write};

use base64::Engine;

use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams};
use serde_json::json;

use crate::harness::{REQUIRED_PROVIDERS, TestCluster, Workspace, cli, history};

const CILIUM: &str = "resource \"talosboot_cilium\" \"this\" {\n  version = \"1.18.4\"\n}\n";

const ARGOCD: &str = r#"
resource "talosboot_helm_release" "argocd" {
  name             = "argocd"
  repository       = "https://argoproj.github.io/argo-helm"
  chart            = "argo-cd"
  version          = "9.4.15"
  namespace        = "argocd"
  create_namespace = true
  depends_on       = [talosboot_cilium.this]

  values = [yamlencode({
    global = {
      domain = "argocd.example.com"
    }
    configs = {
      params = {
        "server.insecure" = true
      }
    }
  })]
}
"#;

fn workspace(cluster: &TestCluster, body: &str) -> Workspace {
    let ws = Workspace::new(&format!(
        "{REQUIRED_PROVIDERS}\n{}\n{body}",
        cluster.provider_block()
    ));
    ws.init();
    ws
}

on_both_clis!(async argocd_right_after_cilium_applies_and_the_next_plan_is_empty);
async fn argocd_right_after_cilium_applies_and_the_next_plan_is_empty() {
    let cluster = TestCluster::start().await;
    let client = cluster.client().await;
    let ws = workspace(&cluster, &format!("{CILIUM}{ARGOCD}"));
    ws.apply();
    assert_eq!(
        history(&client, "argocd", "argocd")
            .await
            .values()
            .last()
            .map(String::as_str),
        Some("deployed")
    );
    assert!(!ws.plan_has_changes(), "second plan is empty");
}

/// talosboot's own ClusterRoles, ClusterRoleBindings and Jobs still in the cluster.
async fn talosboot_leftovers(client: &kube::Client) -> Vec<String> {
    use k8s_openapi::api::batch::v1::Job;
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
    let params = ListParams::default().labels("app.kubernetes.io/managed-by=talosboot");
    let mut out = Vec::new();
    for r in Api::<ClusterRole>::all(client.clone())
        .list_metadata(&params)
        .await
        .expect("roles")
    {
        out.push(format!(
            "ClusterRole/{}",
            r.metadata.name.unwrap_or_default()
        ));
    }
    for b in Api::<ClusterRoleBinding>::all(client.clone())
        .list_metadata(&params)
        .await
        .expect("bindings")
    {
        out.push(format!(
            "ClusterRoleBinding/{}",
            b.metadata.name.unwrap_or_default()
        ));
    }
    for j in Api::<Job>::all(client.clone())
        .list_metadata(&params)
        .await
        .expect("jobs")
    {
        out.push(format!("Job/{}", j.metadata.name.unwrap_or_default()));
    }
    out
}

on_both_clis!(async minimal_rbac_installs_upgrades_and_uninstalls_a_chart);
async fn minimal_rbac_installs_upgrades_and_uninstalls_a_chart() {
    let cluster = TestCluster::start().await;
    let client = cluster.client().await;
    // Both Helm majors (harness::runs_helm3): Helm 4 also applies the namespace server-side.
    let minimal = ARGOCD.replace(
        "  create_namespace = true\n",
        &format!(
            "  create_namespace = true\n  rbac             = \"minimal\"\n{}",
            crate::harness::installer_job(cli())
        ),
    );
    let ws = workspace(&cluster, &format!("{CILIUM}{minimal}"));
    ws.apply();
    assert_eq!(
        history(&client, "argocd", "argocd")
            .await
            .values()
            .last()
            .map(String::as_str),
        Some("deployed")
    );
    assert_eq!(talosboot_leftovers(&client).await, Vec::<String>::new());
    assert!(!ws.plan_has_changes(), "second plan is empty");
    // An upgrade: its render run and install run get the rules of the new revision and the old.
    ws.write(
        "main.tf",
        &format!(
            "{REQUIRED_PROVIDERS}\n{}\n{CILIUM}{}",
            cluster.provider_block(),
            minimal.replace("argocd.example.com", "cd.example.com")
        ),
    );
    ws.apply();
    let revisions = history(&client, "argocd", "argocd").await;
    assert_eq!(
        revisions.get(&2).map(String::as_str),
        Some("deployed"),
        "{revisions:?}"
    );
    assert_eq!(talosboot_leftovers(&client).await, Vec::<String>::new());
    let destroyed = ws.run(&["destroy", "-auto-approve", "-no-color"]);
    assert!(destroyed.success, "{}", destroyed.text());
    assert!(
        history(&client, "argocd", "argocd").await.is_empty(),
        "uninstalled"
    );
    assert_eq!(talosboot_leftovers(&client).await, Vec::<String>::new());
}

on_both_clis!(async a_chart_whose_pods_cannot_start_says_why_and_stays_in_state_tainted);
/// The flux-operator chart before any CNI: its pod is never scheduled, so no operator runs. (Chart
/// 0.33.0's operator would be the emulated one, `talos_sim::talos::emulated`; it never starts here.)
async fn a_chart_whose_pods_cannot_start_says_why_and_stays_in_state_tainted() {
    let cluster = TestCluster::start().await;
    if !cluster.nodes_are_emulated() {
        return; // needs a cluster without a CNI
    }
    // No Cilium yet: the operator's pods need the pod network.
    let ws = workspace(
        &cluster,
        r#"
resource "talosboot_helm_release" "operator" {
  name             = "flux-operator"
  chart            = "oci://ghcr.io/controlplaneio-fluxcd/charts/flux-operator"
  version          = "0.33.0"
  namespace        = "flux-system"
  create_namespace = true
  timeout          = "5m"
}
"#,
    );
    let out = ws.run(&["apply", "-auto-approve", "-no-color"]);
    assert!(!out.success);
    let text = out.flat();
    assert!(
        text.contains("Deployment flux-system/flux-operator"),
        "names the workload: {text}"
    );
    // The real scheduler names the taint when every node has the same one, and says
    // "untolerated taint(s)" when they differ (a control plane has its role taint too).
    assert!(
        text.contains("untolerated taint {node.kubernetes.io/not-ready")
            || text.contains("had untolerated taint(s)"),
        "says why: {text}"
    );
    assert!(text.contains("Diagnosis: no node is Ready"), "{text}");
    assert!(text.contains("depends_on"), "names the fix: {text}");
    assert!(
        ws.state_text().contains("\"status\": \"tainted\""),
        "kept, tainted:\n{}",
        ws.state_text()
    );
}

on_both_clis!(async a_release_left_pending_upgrade_is_planned_and_repaired);
async fn a_release_left_pending_upgrade_is_planned_and_repaired() {
    let cluster = TestCluster::start().await;
    let client = cluster.client().await;
    // Both Helm majors (harness::runs_helm3); with Helm 4, the unlocked record keeps its
    // `apply_method`, so the repair applies server-side as the release did.
    let helm3 = crate::harness::runs_helm3(cli());
    let argocd = ARGOCD.replace(
        "  create_namespace = true\n",
        &format!(
            "  create_namespace = true\n{}",
            crate::harness::installer_job(cli())
        ),
    );
    let ws = workspace(&cluster, &format!("{CILIUM}{argocd}"));
    ws.apply();
    // An upgrade killed half-way: the newest record says pending-upgrade.
    let records = history(&client, "argocd", "argocd").await;
    let (newest, _) = records.iter().last().expect("a record");
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "argocd");
    let name = format!("sh.helm.release.v1.argocd.v{newest}");
    let secret = secrets.get(&name).await.expect("record");
    let field = secret.data.expect("data")["release"].0.clone();
    let b64 = base64::engine::general_purpose::STANDARD;
    let gz = b64.decode(field.trim_ascii()).expect("base64");
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(gz.as_slice())
        .read_to_end(&mut raw)
        .expect("gunzip");
    let mut record: serde_json::Value = serde_json::from_slice(&raw).expect("json");
    record["info"]["status"] = json!("pending-upgrade");
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(record.to_string().as_bytes()).expect("gzip");
    let field = b64.encode(enc.finish().expect("gzip"));
    let patch = json!({"metadata": {"labels": {"status": "pending-upgrade"}}, "data": {"release": b64.encode(field)}});
    secrets
        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("mark pending");
    let plan = ws.ok(&["plan", "-no-color"]);
    assert!(
        plan.stdout.contains("will be updated in-place"),
        "{}",
        plan.text()
    );
    let out = ws.apply();
    assert!(
        out.flat().contains("pending-upgrade"),
        "says what it repaired: {}",
        out.text()
    );
    assert_eq!(
        history(&client, "argocd", "argocd")
            .await
            .values()
            .last()
            .map(String::as_str),
        Some("deployed")
    );
    let methods = crate::harness::apply_methods(&client, "argocd", "argocd").await;
    let expected = if helm3 { None } else { Some("ssa".to_owned()) };
    assert!(
        methods.len() >= 2 && methods.values().all(|m| *m == expected),
        "the unlocked record and the repair: {methods:?}"
    );
    assert!(!ws.plan_has_changes());
}

on_both_clis!(async a_local_chart_directory_is_shipped_to_the_job_and_an_oversized_one_refused);
async fn a_local_chart_directory_is_shipped_to_the_job_and_an_oversized_one_refused() {
    let cluster = TestCluster::start().await;
    let client = cluster.client().await;
    let body = format!(
        "{CILIUM}\nresource \"talosboot_helm_release\" \"hello\" {{\n  name       = \"hello\"\n  chart      = \"./charts/hello\"\n  version    = \"0.1.0\"\n  namespace  = \"default\"\n  values     = [yamlencode({{ greeting = \"hi\" }})]\n  depends_on = [talosboot_cilium.this]\n}}\n"
    );
    let ws = workspace(&cluster, &body);
    std::fs::create_dir_all(ws.path().join("charts/hello/templates")).expect("chart dir");
    ws.write(
        "charts/hello/Chart.yaml",
        "apiVersion: v2\nname: hello\nversion: 0.1.0\n",
    );
    ws.write("charts/hello/templates/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: hello\ndata:\n  greeting: {{ .Values.greeting }}\n");
    ws.apply();
    let state = ws.state_text();
    assert!(state.contains("\"chart_version\": \"0.1.0\""), "{state}");
    assert_eq!(
        history(&client, "default", "hello")
            .await
            .values()
            .last()
            .map(String::as_str),
        Some("deployed")
    );
    assert!(!ws.plan_has_changes());
    // A template edited without a version bump: the chart digest plans an upgrade.
    ws.write("charts/hello/templates/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: hello\ndata:\n  greeting: {{ .Values.greeting }}\n  edited: \"yes\"\n");
    let plan = ws.ok(&["plan", "-no-color"]);
    assert!(
        plan.stdout.contains("chart_sha256") && plan.stdout.contains("1 to change"),
        "{}",
        plan.text()
    );
    ws.apply();
    assert_eq!(
        history(&client, "default", "hello")
            .await
            .get(&2)
            .map(String::as_str),
        Some("deployed"),
        "the edit was installed as revision 2"
    );
    assert!(!ws.plan_has_changes());
    // A chart far beyond what a ConfigMap holds is refused with the way out, before any Job runs.
    // Incompressible text (a linear congruential generator): about 2 MiB once gzipped.
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let noise: String = (0..3_000_000)
        .map(|_| {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            char::from(b'!' + ((x >> 33) % 90) as u8)
        })
        .collect();
    ws.write("charts/hello/templates/big.txt", &noise);
    ws.write(
        "charts/hello/Chart.yaml",
        "apiVersion: v2\nname: hello\nversion: 0.2.0\n",
    );
    ws.write(
        "main.tf",
        &format!(
            "{REQUIRED_PROVIDERS}\n{}\n{}",
            cluster.provider_block(),
            body.replace("\"0.1.0\"", "\"0.2.0\"")
        ),
    );
    let out = ws.run(&["apply", "-auto-approve", "-no-color"]);
    assert!(!out.success);
    assert!(
        out.flat()
            .contains("publish the chart to an OCI registry or a chart repository"),
        "{}",
        out.text()
    );
}

on_both_clis!(async an_unpinned_chart_records_the_version_it_installed);
async fn an_unpinned_chart_records_the_version_it_installed() {
    let cluster = TestCluster::start().await;
    let ws = workspace(
        &cluster,
        &format!(
            "{CILIUM}\nresource \"talosboot_helm_release\" \"podinfo\" {{\n  name       = \"podinfo\"\n  repository = \"oci://ghcr.io/stefanprodan/charts\"\n  chart      = \"podinfo\"\n  namespace  = \"default\"\n  depends_on = [talosboot_cilium.this]\n}}\n"
        ),
    );
    ws.apply();
    let state: serde_json::Value = serde_json::from_str(&ws.state_text()).expect("state json");
    let podinfo = state["resources"]
        .as_array()
        .and_then(|r| r.iter().find(|r| r["name"] == "podinfo"))
        .map(|r| r["instances"][0]["attributes"].clone())
        .expect("podinfo in state");
    let installed = podinfo["chart_version"].as_str().unwrap_or_default();
    assert!(!installed.is_empty(), "{podinfo}");
    assert_eq!(podinfo["version"], installed, "the version Helm resolved");
    assert!(!ws.plan_has_changes());
}

/// Rewrites the stored state of every `resource_type` instance in `ws` as talosboot 0.1.0 wrote
/// it: schema version 0 and that resource's own `job` shape (the chart resources: `image` and
/// `pull_policy` strings, typed tolerations with every field; the Flux bootstrap: the module's
/// `job` without `node_selector`, `annotations` and `apply_method`). The provider's state upgrade then has to turn it back into what the
/// configuration plans.
pub(crate) fn as_written_by_0_1_0(ws: &Workspace, resource_type: &str) {
    let mut state: serde_json::Value =
        serde_json::from_str(&ws.state_text()).expect("state is JSON");
    let resources = state["resources"].as_array_mut().expect("resources");
    let mut rewritten = 0;
    for r in resources.iter_mut().filter(|r| r["type"] == resource_type) {
        for instance in r["instances"].as_array_mut().expect("instances") {
            assert_eq!(instance["schema_version"], 1, "{instance}");
            instance["schema_version"] = json!(0);
            let job = &mut instance["attributes"]["job"];
            let Some(fields) = job.as_object_mut() else {
                continue;
            };
            for added in ["node_selector", "annotations", "apply_method"] {
                if resource_type == "talosboot_flux_bootstrap" {
                    fields.remove(added);
                }
            }
            if resource_type != "talosboot_flux_bootstrap" {
                let image = fields.remove("image").unwrap_or(json!(null));
                fields.insert("image".into(), image["repository"].clone());
                fields.insert("pull_policy".into(), image["pull_policy"].clone());
                fields.remove("affinity");
                fields.remove("host_network");
                fields.insert("apply_method".into(), json!(null));
                let typed: Vec<serde_json::Value> = fields["tolerations"]["value"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|t| {
                        let field = |k: &str| t.get(k).cloned().unwrap_or(json!(null));
                        json!({"key": field("key"), "operator": field("operator"), "value": field("value"), "effect": field("effect")})
                    })
                    .collect();
                if !fields["tolerations"].is_null() {
                    fields.insert("tolerations".into(), json!(typed));
                }
            }
            rewritten += 1;
        }
    }
    assert!(rewritten > 0, "no {resource_type} with a job in the state");
    ws.write(
        "terraform.tfstate",
        &serde_json::to_string_pretty(&state).expect("state"),
    );
}

on_both_clis!(async a_0_1_0_state_with_the_old_job_shape_upgrades_to_an_empty_plan);
/// The one `job` shape (schema version 1): states talosboot 0.1.0 wrote with the chart
/// resources' own `job` (`image` a string) are upgraded in place, and the same inputs, now written
/// `image = { repository = ... }`, plan nothing.
async fn a_0_1_0_state_with_the_old_job_shape_upgrades_to_an_empty_plan() {
    let cluster = TestCluster::start().await;
    let image = talosboot::cluster::helm::install::DEFAULT_HELM_IMAGE;
    let job = format!(
        "  job = {{\n    image       = {{ repository = \"{image}\", pull_policy = \"IfNotPresent\" }}\n    tolerations = [{{ key = \"dedicated\", operator = \"Exists\", effect = \"NoSchedule\" }}]\n    annotations = {{ \"example.com/owner\" = \"platform\" }}\n  }}\n"
    );
    let body = format!(
        "resource \"talosboot_cilium\" \"this\" {{\n  version = \"1.18.4\"\n{job}}}\nresource \"talosboot_helm_release\" \"hello\" {{\n  name       = \"hello\"\n  chart      = \"./charts/hello\"\n  namespace  = \"default\"\n  job        = {{ image = {{ repository = \"{image}\" }} }}\n  depends_on = [talosboot_cilium.this]\n}}\n"
    );
    let ws = workspace(&cluster, &body);
    std::fs::create_dir_all(ws.path().join("charts/hello/templates")).expect("chart dir");
    ws.write(
        "charts/hello/Chart.yaml",
        "apiVersion: v2\nname: hello\nversion: 0.1.0\n",
    );
    ws.write(
        "charts/hello/templates/cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: hello\n",
    );
    let plan = ws.ok(&["plan", "-no-color"]);
    assert!(
        plan.flat().contains("host_network = true")
            && plan.flat().contains("apply_method = \"auto\""),
        "the defaults of a configured job are in the plan:\n{}",
        plan.text()
    );
    ws.apply();
    let empty = |when: &str| {
        let plan = ws.run(&["plan", "-no-color", "-input=false", "-detailed-exitcode"]);
        assert_eq!(plan.code, Some(0), "{when}:\n{}", plan.text());
    };
    empty("after the apply");
    for resource_type in ["talosboot_cilium", "talosboot_helm_release"] {
        as_written_by_0_1_0(&ws, resource_type);
    }
    assert!(
        ws.state_text().contains(&format!("\"image\": \"{image}\"")),
        "the old shape is in the state"
    );
    empty("the upgraded state plans nothing");
    ws.ok(&["apply", "-refresh-only", "-auto-approve", "-no-color"]);
    let state: serde_json::Value = serde_json::from_str(&ws.state_text()).expect("state");
    for r in state["resources"].as_array().expect("resources") {
        let instance = &r["instances"][0];
        assert_eq!(instance["schema_version"], 1, "{r}");
        assert_eq!(
            instance["attributes"]["job"]["image"]["repository"], image,
            "{r}"
        );
    }
    assert!(!ws.plan_has_changes());
}
