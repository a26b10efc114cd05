//! ServiceAccounts: `default` in every namespace, pods need their ServiceAccount.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Pod, ServiceAccount};
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;

use crate::common::{eventually, start, status};

fn pod(name: &str, sa: Option<&str>) -> Pod {
    let mut spec = json!({"containers": [{"name": "c", "image": "busybox:1"}]});
    if let Some(sa) = sa {
        spec["serviceAccountName"] = json!(sa);
    }
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap()
}

#[tokio::test]
async fn every_namespace_gets_a_default_service_account() {
    let (_sim, client) = start().await;
    for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), ns);
        sas.get("default").await.unwrap();
    }
    let nss: Api<Namespace> = Api::all(client.clone());
    nss.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "fresh"}})).unwrap(),
    )
    .await
    .unwrap();
    // At once: a pod can be created right after its namespace.
    let pods: Api<Pod> = Api::namespaced(client.clone(), "fresh");
    let created = pods
        .create(&PostParams::default(), &pod("p", None))
        .await
        .unwrap();
    let spec = created.spec.unwrap();
    assert_eq!(spec.service_account_name.as_deref(), Some("default"));
    assert_eq!(spec.service_account.as_deref(), Some("default"));
    // The controller brings a deleted `default` back.
    let sas: Api<ServiceAccount> = Api::namespaced(client, "fresh");
    sas.delete("default", &DeleteParams::default())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(10)).await;
    eventually(5, || async { sas.get_opt("default").await.unwrap() }).await;
}

#[tokio::test]
async fn pod_with_a_missing_service_account_is_forbidden() {
    let (_sim, client) = start().await;
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let e = status(
        pods.create(&PostParams::default(), &pod("x", Some("nope")))
            .await
            .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (403, "Forbidden"));
    assert_eq!(
        e.message,
        "pods \"x\" is forbidden: error looking up service account default/nope: serviceaccount \"nope\" not found"
    );
}
