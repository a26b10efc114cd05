//! CustomResourceDefinitions: establishment and serving the new kind.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use kube::discovery::Discovery;
use serde_json::json;

use crate::common::{eventually, start, status};

fn flux_crd() -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "fluxinstances.fluxcd.controlplane.io"},
        "spec": {"group": "fluxcd.controlplane.io", "scope": "Namespaced",
            "names": {"kind": "FluxInstance", "listKind": "FluxInstanceList", "plural": "fluxinstances", "singular": "fluxinstance"},
            "versions": [{"name": "v1", "served": true, "storage": true, "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
    }))
    .unwrap()
}

#[tokio::test]
async fn crd_is_established_and_its_kind_served() {
    let (_sim, client) = start().await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &flux_crd())
        .await
        .unwrap();
    let established = eventually(5, || async {
        let c = crds
            .get("fluxinstances.fluxcd.controlplane.io")
            .await
            .unwrap();
        let conds = c.status?.conditions?;
        let ok = |t: &str| conds.iter().any(|c| c.type_ == t && c.status == "True");
        (ok("Established") && ok("NamesAccepted")).then_some(())
    })
    .await;
    let _: () = established;
    let discovery = Discovery::new(client.clone()).run().await.unwrap();
    let (ar, caps) = discovery
        .resolve_gvk(&GroupVersionKind::gvk(
            "fluxcd.controlplane.io",
            "v1",
            "FluxInstance",
        ))
        .expect("FluxInstance discovered");
    assert_eq!(ar.plural, "fluxinstances");
    assert!(
        caps.subresources
            .iter()
            .any(|(s, _)| s.plural == "fluxinstances/status")
            || caps.scope == kube::discovery::Scope::Namespaced
    );
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
    let instance = json!({"apiVersion": "fluxcd.controlplane.io/v1", "kind": "FluxInstance", "metadata": {"name": "flux"},
        "spec": {"distribution": {"version": "2.x", "registry": "ghcr.io/fluxcd"}, "sync": {"kind": "GitRepository", "url": "https://example.com/repo", "ref": "refs/heads/main", "path": "clusters/staging"}}});
    let created = api
        .patch(
            "flux",
            &PatchParams::apply("talosboot"),
            &Patch::Apply(&instance),
        )
        .await
        .unwrap();
    assert_eq!(created.metadata.generation, Some(1));
    let st = api
        .patch_status("flux", &PatchParams::default(), &Patch::Merge(json!({"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "ReconciliationSucceeded"}]}})))
        .await
        .unwrap();
    assert_eq!(
        st.data["status"]["conditions"][0]["reason"],
        "ReconciliationSucceeded"
    );
    assert_eq!(st.metadata.generation, Some(1));
    // strategic merge patch is not supported for custom resources
    let e = status(
        api.patch(
            "flux",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {}})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(e.code, 415);
    // deleting the CRD removes the kind
    crds.delete(
        "fluxinstances.fluxcd.controlplane.io",
        &DeleteParams::default(),
    )
    .await
    .unwrap();
    let e = status(api.get("flux").await.unwrap_err());
    assert_eq!(e.code, 404);
    let unknown = ApiResource::from_gvk(&GroupVersionKind::gvk(
        "fluxcd.controlplane.io",
        "v1",
        "FluxInstance",
    ));
    let api: Api<DynamicObject> = Api::namespaced_with(client, "default", &unknown);
    assert_eq!(
        status(api.list(&Default::default()).await.unwrap_err()).code,
        404
    );
}

#[tokio::test]
async fn crd_name_must_match_plural_and_group() {
    let (_sim, client) = start().await;
    let crds: Api<CustomResourceDefinition> = Api::all(client);
    let mut bad = flux_crd();
    bad.metadata.name = Some("wrong.fluxcd.controlplane.io".into());
    let e = status(crds.create(&PostParams::default(), &bad).await.unwrap_err());
    assert_eq!(e.code, 422);
    assert!(
        e.message
            .contains("must be spec.names.plural+\".\"+spec.group"),
        "{}",
        e.message
    );
}

#[tokio::test]
async fn custom_resource_update_needs_a_resource_version() {
    let (_sim, client) = start().await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &flux_crd())
        .await
        .unwrap();
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("fluxcd.controlplane.io", "v1", "FluxInstance"),
        "fluxinstances",
    );
    let api: Api<DynamicObject> = Api::namespaced_with(client, "default", &ar);
    let obj: DynamicObject =
        serde_json::from_value(json!({"apiVersion": "fluxcd.controlplane.io/v1",
        "kind": "FluxInstance", "metadata": {"name": "f"}, "spec": {"a": 1}}))
        .unwrap();
    // No create on update for custom resources.
    assert_eq!(
        status(
            api.replace("f", &PostParams::default(), &obj)
                .await
                .unwrap_err()
        )
        .code,
        404
    );
    let created = api.create(&PostParams::default(), &obj).await.unwrap();
    let e = status(
        api.replace("f", &PostParams::default(), &obj)
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 422);
    assert_eq!(
        e.message,
        "FluxInstance.fluxcd.controlplane.io \"f\" is invalid: metadata.resourceVersion: Invalid value: 0x0: must be specified for an update"
    );
    let mut next = obj.clone();
    next.metadata.resource_version = created.metadata.resource_version;
    next.data["spec"]["a"] = json!(2);
    let updated = api
        .replace("f", &PostParams::default(), &next)
        .await
        .unwrap();
    assert_eq!(updated.data["spec"]["a"], 2);
}
