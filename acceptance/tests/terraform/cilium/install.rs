//! Installing and removing Cilium: a fresh install that makes every node Ready and plans empty
//! next; `-replace` with `keep` refused at plan (its destroy would only forget the release), with
//! `uninstall` a tainted one warned (its destroy uninstalls first), a forgotten import refused;
//! destroy with `keep` and `uninstall`; `rbac = "minimal"` leaving no Role behind.

use k8s_openapi::api::apps::v1::DaemonSet;
use kube::Api;
use kube::api::ListParams;

use crate::harness::TestCluster;

use super::*;

on_both_clis!(async fresh_cluster_gets_cilium_ready_and_the_next_plan_is_empty);
async fn fresh_cluster_gets_cilium_ready_and_the_next_plan_is_empty() {
    let cluster = TestCluster::start().await;
    let client = cluster.client().await;
    let ws = workspace(
        &cluster,
        &format!(
            "{}\noutput \"agents\" {{ value = talosboot_cilium.this.agents }}\noutput \"status\" {{ value = talosboot_cilium.this.status }}",
            cilium("")
        ),
    );
    let plan = ws.ok(&["plan", "-no-color"]);
    assert!(
        plan.stdout
            .contains("talosboot_cilium.this will be created"),
        "{}",
        plan.text()
    );
    ws.apply();
    assert!(
        nodes_ready(&client).await,
        "every node is Ready without the not-ready:NoSchedule taint"
    );
    assert_eq!(current_status(&client).await.as_deref(), Some("deployed"));
    let outputs = ws.outputs();
    assert_eq!(outputs["status"]["value"], "deployed");
    assert_eq!(
        outputs["agents"]["value"]["ready"],
        outputs["agents"]["value"]["desired"]
    );
    assert_no_leftovers(&client).await;
    assert!(!ws.plan_has_changes(), "second plan is empty");
}

on_both_clis!(async destroy_keeps_cilium_with_keep_and_uninstalls_by_default);
async fn destroy_keeps_cilium_with_keep_and_uninstalls_by_default() {
    let cluster = TestCluster::start().await;
    let client = cluster.client().await;
    let ws = workspace(&cluster, &cilium("  deletion_policy = \"keep\""));
    ws.apply();
    // `-replace` with `keep` would forget the release, then refuse to create it over the one
    // running: refused at plan, before anything runs, and the state keeps it.
    let before = release_history(&client, "cilium").await;
    let replace = ws.run(&[
        "apply",
        "-auto-approve",
        "-no-color",
        "-replace=talosboot_cilium.this",
    ]);
    assert!(
        !replace.success
            && replace.flat().contains("Release already exists")
            && replace.flat().contains("only forgets the release")
            && !replace.flat().contains("Destroying"),
        "{}",
        replace.text()
    );
    assert!(
        ws.state_text().contains("\"talosboot_cilium\""),
        "still in state"
    );
    assert_eq!(
        release_history(&client, "cilium").await,
        before,
        "nothing ran"
    );
    assert!(!ws.plan_has_changes());
    let out = ws.ok(&["destroy", "-auto-approve", "-no-color"]);
    assert!(
        out.flat().contains("(kube-system/cilium) left running"),
        "{}",
        out.text()
    );
    assert_eq!(current_status(&client).await.as_deref(), Some("deployed"));
    let ds: Api<DaemonSet> = Api::namespaced(client.clone(), NS);
    assert!(ds.get_opt("cilium").await.expect("get").is_some());

    let import = format!(
        "import {{\n  to = talosboot_cilium.this\n  id = \"kube-system/cilium\"\n}}\n{}",
        cilium("")
    );
    let ws = workspace(&cluster, &import);
    ws.apply();
    // With `uninstall`, a create over the running release is either a tainted object's
    // replacement (its destroy uninstalls first) or a root that forgot to import it: the plan
    // says both, and a root that forgot is refused at apply with nothing changed.
    ws.ok(&["taint", "-no-color", "talosboot_cilium.this"]);
    let replace = ws.ok(&["plan", "-no-color"]);
    assert!(
        replace
            .flat()
            .contains("Release kube-system/cilium already runs")
            && replace
                .flat()
                .contains("its destroy uninstalls the release first"),
        "{}",
        replace.text()
    );
    ws.ok(&["untaint", "-no-color", "talosboot_cilium.this"]);
    let before = release_history(&client, "cilium").await;
    let forgot = workspace(&cluster, &cilium(""));
    let plan = forgot.ok(&["plan", "-no-color"]);
    assert!(
        plan.flat().contains("already runs") && plan.flat().contains("import {"),
        "{}",
        plan.text()
    );
    let refused = forgot.run(&["apply", "-auto-approve", "-no-color"]);
    assert!(
        !refused.success && refused.flat().contains("Release already exists"),
        "{}",
        refused.text()
    );
    assert_eq!(
        release_history(&client, "cilium").await,
        before,
        "nothing ran"
    );
    ws.ok(&["destroy", "-auto-approve", "-no-color"]);
    assert!(
        release_history(&client, "cilium").await.is_empty(),
        "release records gone"
    );
    assert!(
        ds.get_opt("cilium").await.expect("get").is_none(),
        "agents uninstalled"
    );
    assert_no_leftovers(&client).await;
}

on_both_clis!(async least_privilege_installs_cilium_and_leaves_no_role_behind);
async fn least_privilege_installs_cilium_and_leaves_no_role_behind() {
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
    let cluster = TestCluster::start().await;
    let client = cluster.client().await;
    let ws = workspace(&cluster, &cilium("  rbac = \"minimal\""));
    ws.apply();
    assert_eq!(current_status(&client).await.as_deref(), Some("deployed"));
    assert!(!ws.plan_has_changes());
    let params = ListParams::default().labels(MANAGED);
    let roles = Api::<ClusterRole>::all(client.clone())
        .list_metadata(&params)
        .await
        .expect("roles");
    let bindings = Api::<ClusterRoleBinding>::all(client.clone())
        .list_metadata(&params)
        .await
        .expect("bindings");
    assert!(
        roles.items.is_empty() && bindings.items.is_empty(),
        "the run's RBAC is gone"
    );
    assert_no_leftovers(&client).await;
}
