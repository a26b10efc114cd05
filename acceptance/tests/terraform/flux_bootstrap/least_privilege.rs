//! `rbac = "minimal"` on the Flux bootstrap: the operator chart is installed (and uninstalled)
//! with only what it renders granted, under the simulator's RBAC enforcement, and no role,
//! binding or Job of talosboot is left behind.

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::api::ListParams;

use super::*;

const MANAGED: &str = "app.kubernetes.io/managed-by=talosboot";

async fn talosboot_rbac(client: &kube::Client) -> Vec<String> {
    let params = ListParams::default().labels(MANAGED);
    let roles = Api::<ClusterRole>::all(client.clone())
        .list_metadata(&params)
        .await
        .expect("roles");
    let bindings = Api::<ClusterRoleBinding>::all(client.clone())
        .list_metadata(&params)
        .await
        .expect("bindings");
    let names = roles.items.into_iter().filter_map(|o| o.metadata.name);
    names
        .chain(bindings.items.into_iter().filter_map(|o| o.metadata.name))
        .collect()
}

on_both_clis!(async minimal_rbac_bootstraps_flux_and_uninstalls_it);
async fn minimal_rbac_bootstraps_flux_and_uninstalls_it() {
    let Some(cluster) = FluxCluster::start().await else {
        return;
    };
    let client = cluster.client().await;
    install_cilium(&client).await;
    let ws = Workspace::new(&root(
        &cluster,
        "  rbac = \"minimal\"\n  deletion_policy = \"uninstall\"\n  timeout = \"2m\"\n",
    ));
    ws.init();
    let applied = ws.run(APPLY);
    assert!(applied.success, "{}", applied.text());
    assert!(get(&instances(&client), "flux").await.is_some());
    let operator = api(&client, DEPLOYMENT, "deployments", Some("flux-system"));
    assert!(get(&operator, "flux-operator").await.is_some());
    assert_eq!(talosboot_rbac(&client).await, Vec::<String>::new());
    let jobs = Api::<Job>::all(client.clone())
        .list_metadata(&ListParams::default().labels(MANAGED))
        .await
        .expect("jobs");
    assert!(jobs.items.is_empty(), "render and install Jobs are gone");
    assert_no_changes(&ws);
    let destroyed = ws.run(&["destroy", "-auto-approve", "-no-color", "-input=false"]);
    assert!(destroyed.success, "{}", destroyed.text());
    wait_for("the operator to go", Duration::from_secs(30), || async {
        get(&operator, "flux-operator")
            .await
            .is_none()
            .then_some(())
    })
    .await;
    assert_eq!(talosboot_rbac(&client).await, Vec::<String>::new());
}
