//! `talosboot_cilium` with the real OpenTofu CLI against the embedded Talos cluster (the real
//! control plane) (or a real one: `TALOSBOOT_TEST_KUBECONFIG`), observed only through the
//! Kubernetes API. This module holds what the Cilium tests share (roots, release records,
//! leftovers, node readiness, Helm by hand); the tests are in its submodules:
//! - `install`: a fresh install then an empty plan; destroy with both policies; `rbac = "minimal"`.
//! - `values`: out-of-band drift planned and repaired; write-only values; `talos_defaults = false`;
//!   bookkeeping edits; `timeout` forms.
//! - `failures`: SYS_MODULE restored (capabilities diagnosis, tainted); a broken upgrade; the
//!   Service IP forced (i/o timeout diagnosis); a stuck `pending-install` release repaired.
//! - `adoption`: inline manifests adopted keeping every uid; import; `moved` from `helm_release`.
//! - `talos_prune`: the inline-manifest adoption on Talos 1.13 and 1.14 survives `upgrade-k8s`'
//!   prune (the plan names the inventory edit, the apply makes it); without talosboot's step
//!   (a plain `helm --take-ownership`, the annotation removed by hand) the same prune deletes Cilium.
//! - `interruptions`: a Lease held by another client; API faults and a dropped watch; a hung
//!   installer (deadline diagnosis); an interrupt during apply.
//!
//! Beside them: `cilium_components` (every component waited for), `cilium_kube_proxy`, and
//! `migrating_cilium` (the migration guide replayed).

mod adoption;
mod failures;
mod install;
mod interruptions;
mod talos_prune;
mod upgrades;
mod values;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Secret, ServiceAccount};
use kube::Api;
use kube::api::{ListParams, PostParams};
use serde_json::json;

use crate::harness::{Cli, REQUIRED_PROVIDERS, TestCluster, Workspace};

pub(crate) const NS: &str = "kube-system";

/// The current Cilium chart, which the tests of a fresh install use.
pub(crate) const CURRENT: &str = "1.20.2";

pub(crate) const MANAGED: &str = "app.kubernetes.io/managed-by=talosboot";

/// A `set` restoring SYS_MODULE to the agent, which Talos refuses: the agents crash, so the
/// release is installed but never becomes ready.
pub(crate) const RESTORES_SYS_MODULE: &str = r#"  set = [{ name = "securityContext.capabilities.ciliumAgent", value = "{CHOWN,KILL,NET_ADMIN,NET_RAW,IPC_LOCK,SYS_ADMIN,SYS_RESOURCE,DAC_OVERRIDE,FOWNER,SETGID,SETUID,SYS_MODULE}" }]"#;

pub(crate) fn root(cluster: &TestCluster, body: &str) -> String {
    format!(
        "{REQUIRED_PROVIDERS}\n{}\n{body}\n",
        cluster.provider_block()
    )
}

pub(crate) fn cilium(extra: &str) -> String {
    format!("resource \"talosboot_cilium\" \"this\" {{\n  version = \"{CURRENT}\"\n{extra}\n}}\n")
}

pub(crate) fn workspace(cluster: &TestCluster, body: &str) -> Workspace {
    let ws = Workspace::new(&root(cluster, body));
    ws.init();
    ws
}

/// Status labels of the release's records, by revision.
pub(crate) async fn release_history(client: &kube::Client, name: &str) -> BTreeMap<i64, String> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NS);
    let list = secrets
        .list_metadata(&ListParams::default().labels(&format!("owner=helm,name={name}")))
        .await
        .expect("list release records");
    list.items
        .into_iter()
        .filter_map(|s| {
            let labels = s.metadata.labels?;
            Some((
                labels.get("version")?.parse().ok()?,
                labels.get("status")?.clone(),
            ))
        })
        .collect()
}

pub(crate) async fn current_status(client: &kube::Client) -> Option<String> {
    release_history(client, "cilium").await.into_values().last()
}

/// Bootstrap objects and Leases talosboot left behind in kube-system.
pub(crate) async fn leftovers(client: &kube::Client) -> Vec<String> {
    let mut out = managed_names::<Job>(client, "Job").await;
    out.extend(managed_names::<ServiceAccount>(client, "ServiceAccount").await);
    out.extend(managed_names::<ConfigMap>(client, "ConfigMap").await);
    out.extend(managed_names::<Lease>(client, "Lease").await);
    out
}

/// `Kind/name` of each object of one kind in kube-system labelled as talosboot's.
async fn managed_names<K>(client: &kube::Client, kind: &str) -> Vec<String>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let objects: Api<K> = Api::namespaced(client.clone(), NS);
    objects
        .list_metadata(&ListParams::default().labels(MANAGED))
        .await
        .unwrap_or_else(|e| panic!("list {kind}s: {e}"))
        .items
        .into_iter()
        .map(|m| format!("{kind}/{}", m.metadata.name.unwrap_or_default()))
        .collect()
}

/// Every node takes pods: `Ready` and without the `not-ready:NoSchedule` taint. Its `NoExecute`
/// twin may outlive the apply by up to one node health pass of the controller-manager (5 s), as on
/// a real cluster: every pod tolerates it for 300 s.
pub(crate) async fn nodes_ready(client: &kube::Client) -> bool {
    let nodes: Api<Node> = Api::all(client.clone());
    let list = nodes.list(&ListParams::default()).await.expect("nodes");
    !list.items.is_empty()
        && list.items.iter().all(|n| {
            let tainted = n
                .spec
                .as_ref()
                .and_then(|s| s.taints.as_ref())
                .is_some_and(|t| {
                    t.iter().any(|t| {
                        t.key == "node.kubernetes.io/not-ready" && t.effect == "NoSchedule"
                    })
                });
            let ready = n
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
            ready && !tainted
        })
}

/// Leftovers go in the background (Job deletion propagates); wait for them to be gone.
pub(crate) async fn assert_no_leftovers(client: &kube::Client) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let left = leftovers(client).await;
        if left.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "bootstrap objects left behind: {left:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Runs `helm ARGS` the way an operator would by hand: a Job on the host network via KubePrism.
pub(crate) async fn helm_by_hand(client: &kube::Client, args: &[&str]) {
    let jobs: Api<Job> = Api::namespaced(client.clone(), NS);
    // One Job per call: a test may run Helm by hand more than once.
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let name = format!("by-hand-{}-{call}", std::process::id());
    // As on a real cluster, the operator's pod needs RBAC: a ServiceAccount bound to cluster-admin.
    let sa: ServiceAccount =
        serde_json::from_value(json!({"metadata": {"name": name}})).expect("sa");
    let _ = Api::<ServiceAccount>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &sa)
        .await;
    let binding: k8s_openapi::api::rbac::v1::ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": NS}],
    }))
    .expect("binding");
    let _ = Api::<k8s_openapi::api::rbac::v1::ClusterRoleBinding>::all(client.clone())
        .create(&PostParams::default(), &binding)
        .await;
    let mut command = vec!["helm"];
    command.extend(args);
    let job: Job = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"backoffLimit": 0, "template": {"spec": {
            "restartPolicy": "Never", "hostNetwork": true, "dnsPolicy": "Default",
            "serviceAccountName": name, "tolerations": [{"operator": "Exists"}],
            "containers": [{"name": "helm", "image": "alpine/helm:3.18.4", "command": command,
                "env": [{"name": "KUBERNETES_SERVICE_HOST", "value": "localhost"}, {"name": "KUBERNETES_SERVICE_PORT", "value": "7445"}]}]}}},
    }))
    .expect("job");
    jobs.create(&PostParams::default(), &job)
        .await
        .expect("create job");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let j = jobs.get(&name).await.expect("get job");
        let done = j.status.and_then(|s| s.conditions).unwrap_or_default();
        if done
            .iter()
            .any(|c| c.type_ == "Complete" && c.status == "True")
        {
            return;
        }
        assert!(
            !done
                .iter()
                .any(|c| c.type_ == "Failed" && c.status == "True"),
            "helm by hand failed"
        );
        assert!(Instant::now() < deadline, "helm by hand did not finish");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `helm_release.cilium` as hashicorp/helm v3 writes it (schema version 2: `set`/`set_sensitive`
/// lists of `{name, value, type}`, `metadata` an object with the release's values as JSON), made
/// from the state of a one-resource root (so its envelope is the CLI's own), with the root's
/// `values` and `set_sensitive`.
pub(crate) fn helm_release_state(
    cli: Cli,
    tfstate: &str,
    values: serde_json::Value,
    set_sensitive: serde_json::Value,
) -> String {
    let mut s: serde_json::Value = serde_json::from_str(tfstate).expect("state json");
    let resource = &mut s["resources"][0];
    resource["type"] = json!("helm_release");
    resource["name"] = json!("cilium");
    resource["provider"] = json!(format!(
        "provider[\"{}/hashicorp/helm\"]",
        cli.registry_host()
    ));
    let instance = &mut resource["instances"][0];
    instance["schema_version"] = json!(2);
    instance
        .as_object_mut()
        .expect("instance")
        .remove("private");
    instance["attributes"] = json!({
        "id": "cilium", "name": "cilium", "namespace": NS, "chart": "cilium",
        "repository": "https://helm.cilium.io", "version": "1.18.4", "values": values, "set": [],
        "set_list": [], "set_sensitive": set_sensitive, "status": "deployed", "wait": true, "timeout": 300,
        "atomic": false, "create_namespace": false, "max_history": 0,
        "metadata": {"name": "cilium", "revision": 1, "namespace": NS, "chart": "cilium", "version": "1.18.4",
                     "app_version": "1.18.4", "values": "{}", "first_deployed": 0, "last_deployed": 0, "notes": ""},
    });
    s.to_string()
}

/// hashicorp/helm cannot be installed here (no registry): a cross-type move needs the source
/// provider present, not its schema, so the Go null provider's binary stands in for it.
pub(crate) fn stand_in_helm_provider(ws: &Workspace) {
    let stand_in = crate::harness::repo_root().join(
        ".tools/mirror/registry.terraform.io/hashicorp/null/2.1.2/linux_amd64/terraform-provider-null_v2.1.2_x4",
    );
    let host = ws.cli().registry_host();
    let dir = ws
        .path()
        .join(format!("mirror/{host}/hashicorp/helm/3.0.2/linux_amd64"));
    std::fs::create_dir_all(&dir).expect("mirror dir");
    std::fs::copy(&stand_in, dir.join("terraform-provider-helm_v3.0.2")).expect("stand-in");
    let rc = ws.read("cli.tfrc").replacen(
        "include = [",
        &format!("include = [\"{host}/hashicorp/helm\", "),
        1,
    );
    ws.write("cli.tfrc", &rc);
}
