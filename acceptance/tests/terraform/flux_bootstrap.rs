//! `talosboot_flux_bootstrap` with the real CLI against the embedded Talos cluster, through the
//! Kubernetes API only. Every bootstrap that runs is reconciled by the real Flux Operator v0.59.0
//! and source-/kustomize-controller v1.9.5 from a Git source served on loopback
//! ([`source`]); none runs on the emulated operator.
//!
//! Index:
//! - `bootstrap_repairs_drift_and_never_fights_flux`: Cilium first, apply → FluxInstance Ready
//!   (the real operator's finalizer, the source cloned, the awkward sync path applied), second
//!   plan empty; runtime info edited or the FluxInstance deleted → the plan names it → apply
//!   repairs; a Flux-adopted object is never drift; awkward `sync` values survive substitution;
//!   destroy with `keep` leaves Flux running.
//! - `bad_inputs_are_rejected_at_plan_with_paths`: no cluster needed (a bad `cluster` too, on
//!   `cluster.host`).
//! - `plan_needs_no_cluster`: unknown provider settings at plan.
//! - `failures::pre_cni_order_mistake_is_diagnosed`: no CNI → "depends_on the talosboot_cilium".
//! - `failures::a_partial_job_block_before_the_cni_is_warned_at_plan_and_fails_fast`: a `job`
//!   with only an image mirror (pod network, Service IP) before Cilium: plan warning, fast failure.
//! - `failures::operator_install_failure_is_relayed_with_diagnosis`: KubePrism off → the Job's error and
//!   the diagnosis reach the apply's diagnostic.
//! - `uninstall_policy_removes_flux`: `deletion_policy = "uninstall"`, with seed 000's own `job`
//!   (host network, KubePrism env) as existing roots write it; its state rewritten as 0.1.0
//!   wrote it (schema version 0) upgrades to an empty plan, and destroys.
//! - `adoption::module_leftovers_are_adopted_without_restart`: the module's inventory is honoured (a
//!   retired Secret is deleted), nothing restarts.
//! - `failures::api_faults_during_apply_fail_cleanly_and_the_next_apply_converges`.
//! - `adoption::import_by_the_flux_instance_namespace`: import, then an in-place update that recreates nothing.
//! - `failures::a_failing_flux_instance_names_its_reason`: a Git host that does not answer:
//!   the real operator's `Ready=False` (`ReconciliationFailed`, naming the GitRepository) after
//!   its health-check wait (`reconcileTimeout`, 20 s there).
//! - `adoption::runtime_variables_are_typed_as_the_module_substitutes_them`: `port: ${port}` is
//!   a number, as with the module's `flux envsubst`.
//! - `adoption::prerequisites_are_applied_until_flux_adopts_them`: manifests and a chart, `common_metadata`
//!   on every namespace created, re-applied until adopted.
//! - `least_privilege::minimal_rbac_bootstraps_flux_and_uninstalls_it`: `rbac = "minimal"` under
//!   enforced RBAC, install and uninstall, nothing of talosboot's RBAC left.
//! - `a_module_namespace_without_the_pod_security_label_is_labelled_before_any_job`: plan warns,
//!   apply labels it `privileged` and completes.
//! - `an_operator_values_change_names_each_value_path_in_the_plan`: `path: running -> planned`.
//! - `fleet::a_flux_bootstrap_per_cluster_in_one_root_converges_and_repairs_drift_on_its_own_cluster`:
//!   `for_each` over two clusters through the write-only `cluster`, the provider pointing at
//!   neither: both bootstrap, the next plan is empty, no credential in state/plan/trace log, a
//!   Secret deleted on one cluster planned on that instance only (at plan: refresh has no
//!   configuration) and repaired; `import` blocks per instance checked through `cluster` (a wrong
//!   ID names the cluster); a destroy with the provider at one cluster goes through it there
//!   and forgets the other instance, naming its API server.
//! - `secrets::write_only_secrets_never_leak`: needs a client with write-only support (1.11+; the
//!   default OpenTofu has it); older ones test the refusal. Protocol-level tests: beside the resource.

use std::time::Duration;

use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use serde_json::{Value as Json, json};

use crate::harness::{REQUIRED_PROVIDERS, TfOutput, Workspace};

mod adoption;
mod failures;
mod fleet;
mod least_privilege;
mod secrets;
mod source;

pub(crate) use source::{
    AWKWARD_PATH, DEPLOY_KEY_SECRET, FluxCluster, SOURCE, SYNC_PATH, deploy_key,
};

/// The CLI's version as (major, minor).
pub(super) fn client_version(ws: &Workspace) -> (u32, u32) {
    let version = ws.run(&["version", "-json"]);
    let v: Json = serde_json::from_str(&version.stdout).unwrap_or_default();
    let text = v["terraform_version"].as_str().unwrap_or("0.0");
    let mut parts = text.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0))
}

pub(super) const INSTANCE: &str = r#"apiVersion: fluxcd.controlplane.io/v1
kind: FluxInstance
metadata:
  name: flux
  namespace: flux-system
spec:
  distribution:
    version: "2.9.x"
    registry: ghcr.io/fluxcd
  components: [source-controller, kustomize-controller]
  sync:
    kind: GitRepository
    url: ssh://git@github.com/example/infra.git
    ref: refs/heads/main
    path: ${FLUX_SYNC_PATH}
    pullSecret: flux-git
"#;

/// The operator chart of the roots: the version whose operator runs as the real program.
pub(super) const OPERATOR_CHART: &str = "operator_chart = { version = \"0.59.0\" }";

pub(super) fn resource(kind: (&str, &str, &str), plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(kind.0, kind.1, kind.2), plural)
}

pub(super) fn api(
    client: &kube::Client,
    kind: (&str, &str, &str),
    plural: &str,
    ns: Option<&str>,
) -> Api<DynamicObject> {
    let ar = resource(kind, plural);
    match ns {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
        None => Api::all_with(client.clone(), &ar),
    }
}

pub(super) const FLUX_INSTANCE: (&str, &str, &str) =
    ("fluxcd.controlplane.io", "v1", "FluxInstance");
pub(super) const CONFIGMAP: (&str, &str, &str) = ("", "v1", "ConfigMap");
pub(super) const SECRET: (&str, &str, &str) = ("", "v1", "Secret");
pub(super) const NAMESPACE: (&str, &str, &str) = ("", "v1", "Namespace");
pub(super) const DEPLOYMENT: (&str, &str, &str) = ("apps", "v1", "Deployment");

pub(super) fn instances(c: &kube::Client) -> Api<DynamicObject> {
    api(c, FLUX_INSTANCE, "fluxinstances", Some("flux-system"))
}
pub(super) fn configmaps(c: &kube::Client, ns: &str) -> Api<DynamicObject> {
    api(c, CONFIGMAP, "configmaps", Some(ns))
}

pub(super) async fn get(api: &Api<DynamicObject>, name: &str) -> Option<Json> {
    match api.get_opt(name).await {
        Ok(object) => object.map(|o| serde_json::to_value(o).expect("json")),
        // The real apiserver's bare `404 page not found` once the kind's CRD is gone.
        Err(kube::Error::Api(status)) if status.code == 404 => None,
        Err(e) => panic!("get {name}: {e}"),
    }
}

/// The pre-CNI Cilium install of the quickstart (a bootstrap Job over KubePrism), which the tests
/// use to give the cluster a pod network before the Flux bootstrap runs.
const CILIUM_BOOTSTRAP_JOB: &str = r#"apiVersion: v1
kind: ServiceAccount
metadata:
  name: cilium-bootstrap
  namespace: kube-system
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: cilium-bootstrap
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: cluster-admin
subjects:
  - kind: ServiceAccount
    name: cilium-bootstrap
    namespace: kube-system
---
apiVersion: batch/v1
kind: Job
metadata:
  name: cilium-bootstrap
  namespace: kube-system
spec:
  backoffLimit: 0
  activeDeadlineSeconds: 600
  template:
    spec:
      serviceAccountName: cilium-bootstrap
      restartPolicy: Never
      # No pod network exists yet, and the Service IP routes nowhere without kube-proxy:
      # host networking plus KubePrism (localhost:7445 on every Talos node).
      hostNetwork: true
      dnsPolicy: Default
      tolerations:
        - operator: Exists
      containers:
        - name: cilium-install
          image: quay.io/cilium/cilium-cli:v0.18.7
          env:
            - name: KUBERNETES_SERVICE_HOST
              value: localhost
            - name: KUBERNETES_SERVICE_PORT
              value: "7445"
          command:
            - cilium
            - install
            - --version=1.18.4
            - --set=ipam.mode=kubernetes
            - --set=kubeProxyReplacement=true
            - --set=k8sServiceHost=localhost
            - --set=k8sServicePort=7445
            - --set=cgroup.autoMount.enabled=false
            - --set=cgroup.hostRoot=/sys/fs/cgroup
            - --set=securityContext.capabilities.ciliumAgent={CHOWN,KILL,NET_ADMIN,NET_RAW,IPC_LOCK,SYS_ADMIN,SYS_RESOURCE,DAC_OVERRIDE,FOWNER,SETGID,SETUID}
            - --set=securityContext.capabilities.cleanCiliumState={NET_ADMIN,SYS_ADMIN,SYS_RESOURCE}
"#;

/// Cilium installed the way today's bootstrap Job does it, through the Kubernetes API, then every
/// node Ready.
pub(super) async fn install_cilium(client: &kube::Client) {
    let docs: Vec<Json> = serde_saphyr::from_multiple(CILIUM_BOOTSTRAP_JOB).expect("yaml");
    for doc in docs.into_iter().filter(|d| d.is_object()) {
        let (kind, plural, group, version) = match doc["kind"].as_str() {
            Some("ServiceAccount") => ("ServiceAccount", "serviceaccounts", "", "v1"),
            Some("ClusterRoleBinding") => (
                "ClusterRoleBinding",
                "clusterrolebindings",
                "rbac.authorization.k8s.io",
                "v1",
            ),
            Some("Job") => ("Job", "jobs", "batch", "v1"),
            other => panic!("unexpected kind {other:?}"),
        };
        let ns = doc.pointer("/metadata/namespace").and_then(Json::as_str);
        let api = api(client, (group, version, kind), plural, ns);
        let object: DynamicObject = serde_json::from_value(doc).expect("object");
        api.create(&PostParams::default(), &object)
            .await
            .expect("create cilium bootstrap object");
    }
    wait_for("every node Ready", Duration::from_secs(90), || async {
        let nodes = api(client, ("", "v1", "Node"), "nodes", None)
            .list(&Default::default())
            .await
            .ok()?;
        let ready = nodes.items.iter().all(|n| {
            n.data["status"]["conditions"].as_array().is_some_and(|cs| {
                cs.iter()
                    .any(|c| c["type"] == "Ready" && c["status"] == "True")
            })
        });
        (ready && !nodes.items.is_empty()).then_some(())
    })
    .await;
}

pub(super) async fn wait_for<T, F, Fut>(what: &str, limit: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

pub(super) fn condition(object: &Json, type_: &str) -> Option<String> {
    object["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
        .and_then(|c| c["status"].as_str().map(str::to_owned))
}

/// A root with the resource; `extra` goes inside the resource block. Unless `extra` sets them,
/// the sync is [`SOURCE`] at [`SYNC_PATH`] with the deploy key's Secret, and
/// `managed_resources` holds that Secret.
pub(super) fn root(flux: &FluxCluster, extra: &str) -> String {
    let mut extra = extra.to_owned();
    if !extra.contains("  sync = ") {
        extra.push_str(&format!(
            "  sync = {{ url = \"{SOURCE}\", path = \"{SYNC_PATH}\", pull_secret = \"{DEPLOY_KEY_SECRET}\" }}\n"
        ));
    }
    if !extra.contains("managed_resources") {
        extra.push_str(&format!(
            "  managed_resources = {{ secrets_yaml = {} }}\n",
            flux.deploy_key_secret()
        ));
    }
    root_with_provider(&flux.provider_block(), &extra)
}

pub(super) fn root_with_provider(provider: &str, extra: &str) -> String {
    root_with_instance(provider, INSTANCE, extra)
}

/// [`root_with_provider`] with another FluxInstance.
pub(super) fn root_with_instance(provider: &str, instance: &str, extra: &str) -> String {
    format!(
        r#"{REQUIRED_PROVIDERS}
{provider}
resource "talosboot_flux_bootstrap" "flux_operator_bootstrap" {{
  revision = 1
  gitops_resources = {{
    instance_yaml  = <<-EOT
{instance}
    EOT
    {OPERATOR_CHART}
  }}
{extra}
}}

output "namespace" {{ value = talosboot_flux_bootstrap.flux_operator_bootstrap.namespace }}
"#,
        instance = instance
            .lines()
            .map(|l| format!("      {l}"))
            .collect::<Vec<_>>()
            .join("\n")
            .replace("${", "$${"),
    )
}

/// What only the real programs do, after a bootstrap the provider reported Ready: the operator's
/// finalizer on `instance`, the sync source Ready with the commit it cloned over SSH with the
/// deploy key, and the ConfigMap at `path` applied by kustomize-controller.
pub(super) async fn assert_real_flux_synced(client: &kube::Client, instance: &Json, path: &str) {
    assert!(
        instance["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|f| f.iter().any(|f| f == "fluxcd.controlplane.io/finalizer")),
        "the real operator reconciled it: {instance}"
    );
    let sources = api(
        client,
        ("source.toolkit.fluxcd.io", "v1", "GitRepository"),
        "gitrepositories",
        Some("flux-system"),
    );
    let source = get(&sources, "flux-system").await.expect("GitRepository");
    assert_eq!(
        condition(&source, "Ready").as_deref(),
        Some("True"),
        "{source}"
    );
    assert!(
        source["status"]["artifact"]["revision"]
            .as_str()
            .is_some_and(|r| r.starts_with("refs/heads/main@sha1:")),
        "source-controller cloned main: {source}"
    );
    let synced = wait_for("the synced ConfigMap", Duration::from_secs(60), || async {
        get(&configmaps(client, "default"), "synced").await
    })
    .await;
    assert_eq!(
        synced["data"]["path"], path,
        "kustomize-controller applied {path:?}"
    );
}

pub(super) const APPLY: &[&str] = &["apply", "-auto-approve", "-no-color", "-input=false"];
pub(super) const PLAN: &[&str] = &["plan", "-no-color", "-input=false", "-detailed-exitcode"];

/// `plan -detailed-exitcode` exits 0 for no changes, 2 for changes.
pub(super) fn assert_no_changes(ws: &Workspace) {
    let plan = ws.run(PLAN);
    assert!(plan.success, "expected an empty plan:\n{}", plan.text());
}

pub(super) fn assert_plans(ws: &Workspace, needle: &str) -> TfOutput {
    let plan = ws.run(&["plan", "-no-color", "-input=false"]);
    assert!(
        plan.stdout.contains(needle) && plan.stdout.contains("1 to change"),
        "plan should name {needle:?}:\n{}",
        plan.text()
    );
    plan
}

on_both_clis!(async bootstrap_repairs_drift_and_never_fights_flux);
async fn bootstrap_repairs_drift_and_never_fights_flux() {
    let Some(cluster) = FluxCluster::start().await else {
        return;
    };
    let client = cluster.client().await;
    install_cilium(&client).await;
    let awkward = AWKWARD_PATH;
    let ws = Workspace::new(&root(
        &cluster,
        &format!(
            "  sync = {{ url = \"{SOURCE}\", path = {path}, pull_secret = \"{DEPLOY_KEY_SECRET}\" }}\n  suspend_applications = true\n  timeout = \"2m\"\n",
            path = serde_json::to_string(awkward)
                .expect("quote")
                .replace("${", "$${"),
        ),
    ));
    ws.init();
    let apply = ws.ok(APPLY);
    assert!(
        apply.stdout.contains("namespace = \"flux-system\""),
        "{}",
        apply.text()
    );

    let fi = get(&instances(&client), "flux")
        .await
        .expect("FluxInstance");
    assert_eq!(condition(&fi, "Ready").as_deref(), Some("True"), "{fi}");
    assert_eq!(
        fi["spec"]["sync"]["path"], awkward,
        "the awkward value survives substitution"
    );
    // The real operator said Ready: its finalizer is on the FluxInstance, and kustomize-controller
    // applied the awkward path of the commit source-controller cloned with the deploy key.
    assert_real_flux_synced(&client, &fi, awkward).await;
    let cm = get(&configmaps(&client, "flux-system"), "flux-runtime-info")
        .await
        .expect("runtime info");
    assert_eq!(cm["data"]["FLUX_SYNC_PATH"], awkward);
    assert_eq!(cm["data"]["FLUX_SUSPEND_APPLICATIONS"], "true");
    let bootstrap_ns = get(
        &api(&client, NAMESPACE, "namespaces", None),
        "flux-operator-bootstrap",
    )
    .await
    .expect("bootstrap ns");
    assert_eq!(
        bootstrap_ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"],
        "privileged"
    );
    let flux_ns = get(&api(&client, NAMESPACE, "namespaces", None), "flux-system")
        .await
        .expect("flux-system");
    assert!(
        flux_ns["metadata"]["labels"]
            .get("pod-security.kubernetes.io/enforce")
            .is_none(),
        "never the FluxInstance's namespace"
    );
    let inventory = get(&configmaps(&client, "flux-operator-bootstrap"), "inventory")
        .await
        .expect("inventory");
    assert_eq!(
        inventory["data"]["entries"],
        format!(
            "- ConfigMap/flux-system/flux-runtime-info\n- Secret/flux-system/{DEPLOY_KEY_SECRET}\n"
        )
    );

    assert_no_changes(&ws);

    // Edited runtime info: drift named on plan, repaired by apply.
    let patch = json!({"data": {"FLUX_SYNC_PATH": "edited"}});
    configmaps(&client, "flux-system")
        .patch(
            "flux-runtime-info",
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
        .expect("edit");
    assert_plans(&ws, "ConfigMap/flux-system/flux-runtime-info: changed");
    ws.ok(APPLY);
    let cm = get(&configmaps(&client, "flux-system"), "flux-runtime-info")
        .await
        .expect("runtime info");
    assert_eq!(cm["data"]["FLUX_SYNC_PATH"], awkward);
    assert_no_changes(&ws);

    // Deleted FluxInstance: same, once the operator's finalizer has removed what it installed
    // (as `kubectl delete` returns).
    instances(&client)
        .delete("flux", &DeleteParams::default())
        .await
        .expect("delete FluxInstance");
    wait_for(
        "the FluxInstance's finalizer to finish",
        Duration::from_secs(120),
        || async {
            get(&instances(&client), "flux")
                .await
                .is_none()
                .then_some(())
        },
    )
    .await;
    let plan = assert_plans(&ws, "FluxInstance/flux-system/flux: deleted");
    assert!(
        plan.flat().contains("Apply repairs what drifted")
            && plan
                .flat()
                .contains("FluxInstance/flux-system/flux: creates it again"),
        "the plan says what apply does, not only a removal from `drift`:\n{}",
        plan.text()
    );
    ws.ok(APPLY);
    let fi = get(&instances(&client), "flux")
        .await
        .expect("FluxInstance back");
    assert_eq!(condition(&fi, "Ready").as_deref(), Some("True"));
    assert_real_flux_synced(&client, &fi, awkward).await;
    assert_no_changes(&ws);

    // Adopted by Flux: an edit is Flux's business, never drift, never reverted.
    let adopt = json!({"metadata": {"labels": {"kustomize.toolkit.fluxcd.io/name": "flux-system"}}, "data": {"FLUX_SYNC_PATH": "from-git"}});
    configmaps(&client, "flux-system")
        .patch(
            "flux-runtime-info",
            &PatchParams::default(),
            &Patch::Merge(&adopt),
        )
        .await
        .expect("adopt");
    let fi_adopt =
        json!({"metadata": {"labels": {"kustomize.toolkit.fluxcd.io/name": "flux-system"}}});
    instances(&client)
        .patch("flux", &PatchParams::default(), &Patch::Merge(&fi_adopt))
        .await
        .expect("adopt instance");
    assert_no_changes(&ws);
    let bumped = std::fs::read_to_string(ws.path().join("main.tf"))
        .expect("main.tf")
        .replace("revision = 1", "revision = 2");
    ws.write("main.tf", &bumped);
    ws.ok(APPLY);
    let cm = get(&configmaps(&client, "flux-system"), "flux-runtime-info")
        .await
        .expect("runtime info");
    assert_eq!(
        cm["data"]["FLUX_SYNC_PATH"], "from-git",
        "a Flux-adopted object is never touched, even on a revision bump"
    );

    // Destroy with `keep`: the bootstrap namespace goes, Flux stays.
    ws.ok(&["destroy", "-auto-approve", "-no-color", "-input=false"]);
    wait_for(
        "the bootstrap namespace to go",
        Duration::from_secs(30),
        || async {
            get(
                &api(&client, NAMESPACE, "namespaces", None),
                "flux-operator-bootstrap",
            )
            .await
            .is_none()
            .then_some(())
        },
    )
    .await;
    assert!(
        get(&instances(&client), "flux").await.is_some(),
        "keep leaves the FluxInstance"
    );
    let operator = api(&client, DEPLOYMENT, "deployments", Some("flux-system"));
    assert!(
        get(&operator, "flux-operator").await.is_some(),
        "keep leaves the operator"
    );
}

on_both_clis!(bad_inputs_are_rejected_at_plan_with_paths);
fn bad_inputs_are_rejected_at_plan_with_paths() {
    let provider = "provider \"talosboot\" {}\n";
    let cases = [
        (
            "instance_yaml",
            INSTANCE.replace("name: flux\n", "name: main\n"),
            "",
            "must be named `flux`",
        ),
        (
            "kind",
            INSTANCE.replace("kind: FluxInstance", "kind: Kustomization"),
            "",
            "FluxInstance",
        ),
        (
            "timeout",
            INSTANCE.to_owned(),
            "  timeout = \"ten minutes\"\n",
            "is not a duration",
        ),
        (
            "policy",
            INSTANCE.to_owned(),
            "  deletion_policy = \"purge\"\n",
            "\"purge\": use `keep` or `uninstall`",
        ),
        (
            "job",
            INSTANCE.to_owned(),
            "  job = { apply_method = \"kubectl\" }\n",
            "`job.apply_method`: \"kubectl\": use `auto`, `csa`",
        ),
        (
            "bootstrap ns",
            INSTANCE.to_owned(),
            "  bootstrap_namespace = \"flux-system\"\n",
            "Bootstrap namespace is the FluxInstance's namespace",
        ),
        (
            // No cluster is reachable: the settings are checked on their own path (the CLI
            // quotes the source line, so the literal token is shown there, by the CLI).
            "cluster",
            INSTANCE.to_owned(),
            "  cluster = { host = \"10.0.0.10:6443\", token = \"fleet-t0ken\" }\n",
            "`cluster.host`: `host` must be a URL such as `https://10.0.0.10:6443`",
        ),
    ];
    for (name, instance, extra, expected) in cases {
        let text = root_with_provider(provider, extra).replace(
            &INSTANCE
                .lines()
                .map(|l| format!("      {l}"))
                .collect::<Vec<_>>()
                .join("\n")
                .replace("${", "$${"),
            &instance
                .lines()
                .map(|l| format!("      {l}"))
                .collect::<Vec<_>>()
                .join("\n")
                .replace("${", "$${"),
        );
        let ws = Workspace::new(&text);
        ws.init();
        let out = ws.run(&["validate", "-no-color"]);
        assert!(!out.success, "{name}: validate must fail:\n{}", out.text());
        assert!(
            out.flat().contains(expected),
            "{name}: expected {expected:?}:\n{}",
            out.text()
        );
    }
    // A chart repository that is not an OCI path, with the attribute's source line.
    let text = root_with_provider(provider, "").replace(
        OPERATOR_CHART,
        "operator_chart = { repository = \"https://charts.example.com\" }",
    );
    let ws = Workspace::new(&text);
    ws.init();
    let out = ws.run(&["validate", "-no-color"]);
    assert!(
        !out.success && out.flat().contains("is not an OCI chart path"),
        "{}",
        out.text()
    );
    assert!(
        out.flat()
            .contains("`gitops_resources.operator_chart.repository`:"),
        "the diagnostic names the attribute:\n{}",
        out.text()
    );
}

on_both_clis!(plan_needs_no_cluster);
fn plan_needs_no_cluster() {
    let provider = r#"resource "null_resource" "cluster" {}
provider "talosboot" {
  host  = "https://${null_resource.cluster.id}.cluster.invalid:6443"
  token = null_resource.cluster.id
}
"#;
    let ws = Workspace::new(&root_with_provider(provider, ""));
    ws.init();
    let plan = ws.ok(&["plan", "-no-color", "-input=false"]);
    assert!(
        plan.stdout
            .contains("talosboot_flux_bootstrap.flux_operator_bootstrap will be created"),
        "{}",
        plan.text()
    );
    assert!(
        plan.flat().contains("+ namespace = \"flux-system\""),
        "the namespace is known at plan:\n{}",
        plan.text()
    );
}

on_both_clis!(async uninstall_policy_removes_flux);
async fn uninstall_policy_removes_flux() {
    let Some(cluster) = FluxCluster::start().await else {
        return;
    };
    let client = cluster.client().await;
    install_cilium(&client).await;
    let ws = Workspace::new(&root(
        &cluster,
        "  deletion_policy = \"uninstall\"\n  job = { host_network = true, env = { KUBERNETES_SERVICE_HOST = \"localhost\", KUBERNETES_SERVICE_PORT = \"7445\" }, tolerations = [{ key = \"dedicated\", operator = \"Exists\" }] }\n  timeout = \"2m\"\n",
    ));
    ws.init();
    ws.ok(APPLY);
    assert!(get(&instances(&client), "flux").await.is_some());
    // The state as talosboot 0.1.0 wrote it (schema version 0, the module's `job` alone): the
    // state upgrade gives back what the unchanged configuration plans, and destroy reads it.
    crate::helm_release_resource::as_written_by_0_1_0(&ws, "talosboot_flux_bootstrap");
    assert!(
        !ws.plan_has_changes(),
        "the upgraded 0.1.0 state plans nothing"
    );
    ws.ok(&["destroy", "-auto-approve", "-no-color", "-input=false"]);
    assert!(
        get(&instances(&client), "flux").await.is_none(),
        "uninstall removes the FluxInstance"
    );
    let operator = api(&client, DEPLOYMENT, "deployments", Some("flux-system"));
    wait_for("the operator to go", Duration::from_secs(30), || async {
        get(&operator, "flux-operator")
            .await
            .is_none()
            .then_some(())
    })
    .await;
    assert!(
        get(&configmaps(&client, "flux-system"), "flux-runtime-info")
            .await
            .is_none(),
        "managed objects go too"
    );
}

on_both_clis!(async a_module_namespace_without_the_pod_security_label_is_labelled_before_any_job);
/// The module made its bootstrap namespace without the Pod Security label: the plan says apply
/// labels it, apply does so before its host-network Job (on Talos' `baseline` the Job would be
/// refused), and the bootstrap completes.
async fn a_module_namespace_without_the_pod_security_label_is_labelled_before_any_job() {
    let Some(cluster) = FluxCluster::start().await else {
        return;
    };
    let client = cluster.client().await;
    install_cilium(&client).await;
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let bare = serde_json::from_value(json!({"metadata": {"name": "flux-operator-bootstrap"}}))
        .expect("namespace");
    namespaces
        .create(&PostParams::default(), &bare)
        .await
        .expect("the module's namespace");
    let ws = Workspace::new(&root(&cluster, "  timeout = \"2m\"\n"));
    ws.init();
    let plan = ws.ok(&["plan", "-no-color", "-input=false"]);
    assert!(
        plan.flat()
            .contains("Bootstrap namespace without a Pod Security label")
            && plan
                .flat()
                .contains("apply labels it `pod-security.kubernetes.io/enforce=privileged`"),
        "{}",
        plan.text()
    );
    let apply = ws.ok(APPLY);
    assert!(
        apply.flat().contains("Labelled the bootstrap namespace"),
        "{}",
        apply.text()
    );
    let labels = namespaces
        .get("flux-operator-bootstrap")
        .await
        .expect("namespace")
        .metadata
        .labels
        .unwrap_or_default();
    assert_eq!(
        labels
            .get("pod-security.kubernetes.io/enforce")
            .map(String::as_str),
        Some("privileged")
    );
    assert!(get(&instances(&client), "flux").await.is_some());
    assert!(!ws.plan_has_changes(), "the next plan is empty");
}

on_both_clis!(async an_operator_values_change_names_each_value_path_in_the_plan);
/// A change of `operator_chart.values_yaml` upgrades the running operator: the plan names each
/// value path, from the running value to the planned one, not only that the input changed.
async fn an_operator_values_change_names_each_value_path_in_the_plan() {
    let Some(cluster) = FluxCluster::start().await else {
        return;
    };
    let client = cluster.client().await;
    install_cilium(&client).await;
    let with = |level: &str| {
        root(&cluster, "  timeout = \"2m\"\n").replace(
            OPERATOR_CHART,
            &format!(
                "operator_chart = {{ version = \"0.59.0\", values_yaml = \"logLevel: {level}\" }}"
            ),
        )
    };
    let ws = Workspace::new(&with("info"));
    ws.init();
    ws.ok(APPLY);
    ws.write("main.tf", &with("debug"));
    let plan = ws.ok(&["plan", "-no-color", "-input=false"]);
    assert!(
        plan.flat()
            .contains("Flux Operator values differ from the configuration")
            && plan.flat().contains(r#"logLevel: "info" -> "debug""#),
        "{}",
        plan.text()
    );
}
