//! Leases (coordination.k8s.io): unconditional updates refused, create on update, spec checks.

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, PostParams};
use serde_json::json;

use crate::common::{start, status};

fn lease(name: &str, spec: serde_json::Value) -> Lease {
    serde_json::from_value(
        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": name}, "spec": spec}),
    )
    .unwrap()
}

#[tokio::test]
async fn lease_update_needs_a_resource_version_and_put_creates() {
    let (_sim, client) = start().await;
    let api: Api<Lease> = Api::namespaced(client.clone(), "default");
    // PUT on a missing Lease creates it (201), like the real server.
    let body = serde_json::to_vec(&lease("l", json!({"holderIdentity": "a"}))).unwrap();
    let req = http::Request::put("/apis/coordination.k8s.io/v1/namespaces/default/leases/l")
        .header("Content-Type", "application/json")
        .body(kube::client::Body::from(body))
        .unwrap();
    let resp = client.send(req).await.unwrap();
    assert_eq!(resp.status(), 201);
    let got = api.get("l").await.unwrap();
    assert_eq!(
        got.spec.as_ref().unwrap().holder_identity.as_deref(),
        Some("a")
    );
    // An update without resourceVersion is refused.
    let e = status(
        api.replace(
            "l",
            &PostParams::default(),
            &lease("l", json!({"holderIdentity": "b"})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(e.code, 422);
    assert_eq!(
        e.message,
        "Lease.coordination.k8s.io \"l\" is invalid: metadata.resourceVersion: Invalid value: 0x0: must be specified for an update"
    );
    // With it, fine.
    let mut next = lease("l", json!({"holderIdentity": "b"}));
    next.metadata.resource_version = got.metadata.resource_version.clone();
    let updated = api
        .replace("l", &PostParams::default(), &next)
        .await
        .unwrap();
    assert_eq!(updated.spec.unwrap().holder_identity.as_deref(), Some("b"));
}

#[tokio::test]
async fn lease_spec_is_validated() {
    let (_sim, client) = start().await;
    let api: Api<Lease> = Api::namespaced(client.clone(), "default");
    let e = status(
        api.create(
            &PostParams::default(),
            &lease(
                "d",
                json!({"leaseDurationSeconds": 0, "leaseTransitions": -1}),
            ),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(e.code, 422);
    assert_eq!(
        e.message,
        "Lease.coordination.k8s.io \"d\" is invalid: [spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0, spec.leaseTransitions: Invalid value: -1: must be greater than or equal to 0]"
    );
    // MicroTime needs microseconds (the real server fails to decode the body: 400).
    let body = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "t"}, "spec": {"renewTime": "2025-01-01T00:00:00Z"}});
    let req = http::Request::post("/apis/coordination.k8s.io/v1/namespaces/default/leases")
        .header("Content-Type", "application/json")
        .body(serde_json::to_vec(&body).unwrap())
        .unwrap();
    let e = status(client.request::<serde_json::Value>(req).await.unwrap_err());
    assert_eq!(e.code, 400);
    assert_eq!(
        e.message,
        "Lease in version \"v1\" cannot be handled as a Lease: parsing time \"2025-01-01T00:00:00Z\" as \"2006-01-02T15:04:05.000000Z07:00\": cannot parse \"Z\" as \".000000\""
    );
    // What kube sends (microseconds) is accepted.
    let ok = lease(
        "ok",
        json!({"leaseDurationSeconds": 15, "leaseTransitions": 0,
               "renewTime": "2025-01-01T00:00:00.123456Z", "acquireTime": "2025-01-01T00:00:00.000000+02:00"}),
    );
    api.create(&PostParams::default(), &ok).await.unwrap();
}
