//! CRUD, Status bodies, conflicts, generation, selectors, paging, discovery.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, Secret};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::common::{cm, start, status};

#[tokio::test]
async fn configmap_crud_round_trip() {
    let (_sim, client) = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let created = api
        .create(&PostParams::default(), &cm("app", json!({"k": "v"})))
        .await
        .unwrap();
    let meta = &created.metadata;
    assert!(meta.uid.as_deref().is_some_and(|u| u.len() == 36));
    assert!(meta.creation_timestamp.is_some());
    let rv: u64 = meta.resource_version.as_deref().unwrap().parse().unwrap();
    assert!(rv > 0);
    let got = api.get("app").await.unwrap();
    assert_eq!(got.data.unwrap()["k"], "v");
    let mut changed = created.clone();
    changed.data = Some([("k".to_string(), "w".to_string())].into());
    let updated = api
        .replace("app", &PostParams::default(), &changed)
        .await
        .unwrap();
    let rv2: u64 = updated
        .metadata
        .resource_version
        .as_deref()
        .unwrap()
        .parse()
        .unwrap();
    assert!(rv2 > rv);
    let list = api.list(&ListParams::default()).await.unwrap();
    assert!(
        list.items
            .iter()
            .any(|c| c.metadata.name.as_deref() == Some("app"))
    );
    api.delete("app", &DeleteParams::default()).await.unwrap();
    let e = status(api.get("app").await.unwrap_err());
    assert_eq!(e.code, 404);
}

#[tokio::test]
async fn errors_are_kubernetes_status_bodies() {
    let (_sim, client) = start().await;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    let e = status(secrets.get("x").await.unwrap_err());
    assert_eq!(
        (e.code, e.reason.as_str(), e.message.as_str()),
        (404, "NotFound", "secrets \"x\" not found")
    );
    let d = e.details.unwrap();
    assert_eq!((d.name.as_str(), d.kind.as_str()), ("x", "secrets"));

    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    cms.create(&PostParams::default(), &cm("dup", json!({})))
        .await
        .unwrap();
    let e = status(
        cms.create(&PostParams::default(), &cm("dup", json!({})))
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (e.code, e.reason.as_str(), e.message.as_str()),
        (409, "AlreadyExists", "configmaps \"dup\" already exists")
    );

    let e = status(
        cms.create(&PostParams::default(), &cm("Bad_Name", json!({})))
            .await
            .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));
    assert!(e.message.starts_with("ConfigMap \"Bad_Name\" is invalid: metadata.name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain"), "{}", e.message);

    let missing: Api<ConfigMap> = Api::namespaced(client.clone(), "nope");
    let e = status(
        missing
            .create(&PostParams::default(), &cm("a", json!({})))
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (e.code, e.message.as_str()),
        (404, "namespaces \"nope\" not found")
    );

    let jobs: Api<k8s_openapi::api::batch::v1::Job> = Api::namespaced(client, "default");
    let e = status(jobs.get("j").await.unwrap_err());
    assert_eq!(e.message, "jobs.batch \"j\" not found");
    assert_eq!(e.details.unwrap().group, "batch");
}

#[tokio::test]
async fn stale_resource_version_conflicts() {
    let (_sim, client) = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let first = api
        .create(&PostParams::default(), &cm("x", json!({"a": "1"})))
        .await
        .unwrap();
    let mut a = first.clone();
    a.data = Some([("a".to_string(), "2".to_string())].into());
    api.replace("x", &PostParams::default(), &a).await.unwrap();
    let mut b = first;
    b.data = Some([("a".to_string(), "3".to_string())].into());
    let e = status(
        api.replace("x", &PostParams::default(), &b)
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 409);
    assert_eq!(e.reason, "Conflict");
    assert_eq!(
        e.message,
        "Operation cannot be fulfilled on configmaps \"x\": the object has been modified; please apply your changes to the latest version and try again"
    );
}

#[tokio::test]
async fn noop_update_keeps_resource_version() {
    let (_sim, client) = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let c = api
        .create(&PostParams::default(), &cm("same", json!({"a": "1"})))
        .await
        .unwrap();
    let again = api
        .replace("same", &PostParams::default(), &c)
        .await
        .unwrap();
    assert_eq!(again.metadata.resource_version, c.metadata.resource_version);
}

fn deployment(name: &str, image: &str) -> Deployment {
    serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {"selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "app", "image": image}]}}}
    }))
    .unwrap()
}

#[tokio::test]
async fn generation_tracks_spec_changes_only() {
    let (_sim, client) = start().await;
    let api: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let d = api
        .create(&PostParams::default(), &deployment("web", "nginx:1"))
        .await
        .unwrap();
    assert_eq!(d.metadata.generation, Some(1));
    assert_eq!(d.spec.as_ref().unwrap().replicas, Some(1), "defaulted");
    let pp = PatchParams::default();
    let d = api
        .patch(
            "web",
            &pp,
            &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}})),
        )
        .await
        .unwrap();
    assert_eq!(d.metadata.generation, Some(1));
    let d = api
        .patch("web", &pp, &Patch::Merge(json!({"spec": {"replicas": 3}})))
        .await
        .unwrap();
    assert_eq!(d.metadata.generation, Some(2));

    // Status rules on a kind no controller touches (a CRD with a status subresource).
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> = Api::all(client.clone());
    let crd = serde_json::from_value(json!({
        "metadata": {"name": "widgets.test.talos-sim.dev"},
        "spec": {"group": "test.talos-sim.dev", "scope": "Namespaced", "names": {"kind": "Widget", "plural": "widgets"},
                 "versions": [{"name": "v1", "served": true, "storage": true, "subresources": {"status": {}},
                               "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}})).unwrap();
    crds.create(&PostParams::default(), &crd).await.unwrap();
    let ar = kube::api::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(
        "test.talos-sim.dev",
        "v1",
        "Widget",
    ));
    let widgets: Api<kube::api::DynamicObject> = Api::namespaced_with(client, "default", &ar);
    let w = crate::common::eventually(5, || async {
        let obj = json!({"apiVersion": "test.talos-sim.dev/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 1}, "status": {"x": 1}});
        widgets.create(&PostParams::default(), &serde_json::from_value(obj).unwrap()).await.ok()
    })
    .await;
    assert_eq!(w.metadata.generation, Some(1));
    assert!(
        w.data.get("status").is_none(),
        "status is dropped on create"
    );
    let w = widgets
        .patch("w", &pp, &Patch::Merge(json!({"status": {"ready": true}})))
        .await
        .unwrap();
    assert!(
        w.data.get("status").is_none(),
        "the main resource ignores status"
    );
    let w = widgets
        .patch("w", &pp, &Patch::Merge(json!({"spec": {"size": 2}})))
        .await
        .unwrap();
    assert_eq!(w.metadata.generation, Some(2));
    let w = widgets
        .patch_status(
            "w",
            &pp,
            &Patch::Merge(json!({"status": {"observedGeneration": 2}, "spec": {"size": 9}})),
        )
        .await
        .unwrap();
    assert_eq!(
        w.metadata.generation,
        Some(2),
        "status writes keep the generation"
    );
    assert_eq!(w.data["status"]["observedGeneration"], 2);
    assert_eq!(w.data["spec"]["size"], 2, "/status ignores spec");
}

#[tokio::test]
async fn label_and_field_selectors() {
    let (_sim, client) = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    for (name, labels) in [
        ("a", json!({"app": "web", "tier": "fe"})),
        ("b", json!({"app": "db"})),
        ("c", json!({"app": "web", "legacy": "1"})),
    ] {
        let mut c = cm(name, json!({}));
        c.metadata.labels = serde_json::from_value(labels).unwrap();
        api.create(&PostParams::default(), &c).await.unwrap();
    }
    let names = |l: kube::core::ObjectList<ConfigMap>| -> Vec<String> {
        l.items
            .into_iter()
            .filter_map(|c| c.metadata.name)
            .collect()
    };
    let q = |s: &str| ListParams::default().labels(s);
    assert_eq!(names(api.list(&q("app=web")).await.unwrap()), ["a", "c"]);
    assert_eq!(
        names(api.list(&q("app==web,!legacy")).await.unwrap()),
        ["a"]
    );
    assert_eq!(names(api.list(&q("app!=web")).await.unwrap()), ["b"]);
    assert_eq!(
        names(api.list(&q("app in (db,cache)")).await.unwrap()),
        ["b"]
    );
    assert_eq!(
        names(api.list(&q("app notin (db),tier")).await.unwrap()),
        ["a"]
    );
    assert_eq!(names(api.list(&q("legacy")).await.unwrap()), ["c"]);
    assert_eq!(
        names(
            api.list(&ListParams::default().fields("metadata.name=b"))
                .await
                .unwrap()
        ),
        ["b"]
    );
    assert_eq!(
        names(
            api.list(
                &ListParams::default()
                    .fields("metadata.name!=b")
                    .labels("app")
            )
            .await
            .unwrap()
        ),
        ["a", "c"]
    );
    let e = status(
        api.list(&ListParams::default().fields("spec.nope=1"))
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (e.code, e.message.as_str()),
        (400, "field label not supported: spec.nope")
    );

    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    let s: Secret = serde_json::from_value(json!({"metadata": {"name": "tls"}, "type": "kubernetes.io/tls", "stringData": {"tls.crt": "c", "tls.key": "k"}})).unwrap();
    secrets.create(&PostParams::default(), &s).await.unwrap();
    let opaque: Secret =
        serde_json::from_value(json!({"metadata": {"name": "plain"}, "stringData": {"a": "b"}}))
            .unwrap();
    let created = secrets
        .create(&PostParams::default(), &opaque)
        .await
        .unwrap();
    assert_eq!(created.type_.as_deref(), Some("Opaque"));
    assert_eq!(created.data.unwrap()["a"].0, b"b");
    let l = secrets
        .list(&ListParams::default().fields("type=kubernetes.io/tls"))
        .await
        .unwrap();
    assert_eq!(l.items.len(), 1);

    // cross-namespace list and cluster-scoped nodes
    let all: Api<Namespace> = Api::all(client.clone());
    let ns = all
        .list(&ListParams::default().labels("kubernetes.io/metadata.name=kube-system"))
        .await
        .unwrap();
    assert_eq!(ns.items.len(), 1);
    let nodes: Api<Node> = Api::all(client);
    let cps = nodes
        .list(&ListParams::default().labels("node-role.kubernetes.io/control-plane"))
        .await
        .unwrap();
    assert_eq!(cps.items.len(), 1);
}

#[tokio::test]
async fn paging_with_limit_and_continue() {
    let (_sim, client) = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    for i in 0..5 {
        api.create(&PostParams::default(), &cm(&format!("p{i}"), json!({})))
            .await
            .unwrap();
    }
    let first = api.list(&ListParams::default().limit(2)).await.unwrap();
    assert_eq!(first.items.len(), 2);
    let token = first.metadata.continue_.clone().expect("continue token");
    assert_eq!(first.metadata.remaining_item_count, Some(3));
    let second = api
        .list(&ListParams::default().limit(10).continue_token(&token))
        .await
        .unwrap();
    assert_eq!(second.items.len(), 3);
    assert!(second.metadata.continue_.is_none());
}

#[tokio::test]
async fn discovery_lists_resources_and_subresources() {
    let (_sim, client) = start().await;
    let discovery = kube::discovery::Discovery::new(client.clone())
        .run()
        .await
        .unwrap();
    let groups: Vec<String> = discovery.groups().map(|g| g.name().to_string()).collect();
    for g in [
        "",
        "apps",
        "batch",
        "rbac.authorization.k8s.io",
        "coordination.k8s.io",
        "apiextensions.k8s.io",
    ] {
        assert!(
            groups.iter().any(|x| x == g),
            "group {g:?} missing from {groups:?}"
        );
    }
    let req = http::Request::get("/api/v1").body(Vec::new()).unwrap();
    let v: serde_json::Value = client.request(req).await.unwrap();
    let names: Vec<&str> = v["resources"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["name"].as_str())
        .collect();
    for n in [
        "pods",
        "pods/log",
        "pods/status",
        "secrets",
        "configmaps",
        "namespaces",
        "nodes",
        "services",
        "serviceaccounts",
        "events",
    ] {
        assert!(names.contains(&n), "{n} missing");
    }
    let pods = v["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "pods")
        .unwrap();
    assert_eq!(pods["shortNames"], json!(["po"]));
    assert_eq!(pods["namespaced"], json!(true));
    let version = client.apiserver_version().await.unwrap();
    assert_eq!(version.major, "1");
}

#[tokio::test]
async fn malformed_requests_get_status_answers_not_panics() {
    let (_sim, client) = start().await;
    let cases: Vec<(&str, &str, &str, &str, u16)> = vec![
        (
            "POST",
            "/api/v1/namespaces/default/configmaps",
            "application/json",
            "{not json",
            400,
        ),
        (
            "POST",
            "/api/v1/namespaces/default/configmaps",
            "application/json",
            "[1,2]",
            400,
        ),
        (
            "POST",
            "/api/v1/namespaces/default/configmaps",
            "application/json",
            "",
            400,
        ),
        (
            "PUT",
            "/api/v1/namespaces/default/configmaps/x",
            "application/json",
            "null",
            400,
        ),
        ("GET", "/api/v1/nonexistent", "", "", 404),
        ("GET", "/apis/foo.example/v1/bars", "", "", 404),
        (
            "GET",
            "/api/v1/namespaces/default/configmaps/a/b/c/d",
            "",
            "",
            404,
        ),
        ("GET", "/%ff%fe/..", "", "", 404),
        (
            "PATCH",
            "/api/v1/namespaces/default/configmaps/x",
            "text/plain",
            "{}",
            415,
        ),
        (
            "PATCH",
            "/api/v1/namespaces/default/services/kubernetes",
            "application/merge-patch+json",
            "5",
            400,
        ),
        (
            "PATCH",
            "/api/v1/namespaces/default/services/kubernetes",
            "application/json-patch+json",
            "{\"op\":1}",
            400,
        ),
        (
            "PATCH",
            "/api/v1/namespaces/default/configmaps/y?fieldManager=m",
            "application/apply-patch+yaml",
            "a: [unclosed",
            400,
        ),
        (
            "POST",
            "/apis/batch/v1/namespaces/default/jobs",
            "application/json",
            r#"{"metadata":{"name":"j"},"spec":{"template":{"metadata":"x","spec":7}}}"#,
            422,
        ),
        (
            "POST",
            "/apis/batch/v1/namespaces/default/jobs",
            "application/json",
            r#"{"metadata":{"name":"k"},"spec":"x"}"#,
            422,
        ),
        (
            "POST",
            "/api/v1/namespaces/default/configmaps",
            "application/json",
            r#"{"kind":"Secret","metadata":{"name":"z"}}"#,
            400,
        ),
        (
            "GET",
            "/api/v1/namespaces/default/configmaps?watch=1&resourceVersion=abc",
            "",
            "",
            400,
        ),
        (
            "GET",
            "/api/v1/namespaces/default/configmaps?labelSelector=a%20in%20b",
            "",
            "",
            400,
        ),
        (
            "GET",
            "/api/v1/namespaces/default/configmaps?limit=-1",
            "",
            "",
            400,
        ),
        (
            "GET",
            "/api/v1/namespaces/default/configmaps?continue=%%%",
            "",
            "",
            400,
        ),
        (
            "DELETE",
            "/api/v1/namespaces/default/configmaps/x",
            "application/json",
            "{bad",
            400,
        ),
        (
            "PUT",
            "/api/v1/namespaces/default/pods/nope/log",
            "application/json",
            "{}",
            404,
        ),
        ("OPTIONS", "/api/v1/namespaces", "", "", 405),
    ];
    for (method, path, ct, body, code) in cases {
        let mut req = http::Request::builder().method(method).uri(path);
        if !ct.is_empty() {
            req = req.header("Content-Type", ct);
        }
        let resp = client
            .send(
                req.body(kube::client::Body::from(body.as_bytes().to_vec()))
                    .unwrap(),
            )
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), code, "{method} {path} {body}");
        let bytes = http_body_util::BodyExt::collect(resp.into_body())
            .await
            .unwrap()
            .to_bytes();
        let v: serde_json::Value = serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| panic!("Status body for {method} {path}: {bytes:?}"));
        assert_eq!(
            (v["kind"].as_str(), v["code"].as_u64()),
            (Some("Status"), Some(code as u64)),
            "{method} {path}: {v}"
        );
    }
    // the server is still healthy
    client.apiserver_version().await.unwrap();
}

#[tokio::test]
async fn tables_for_kubectl_style_accept_headers() {
    let (_sim, client) = start().await;
    let req = http::Request::get("/api/v1/nodes")
        .header(
            "Accept",
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
        )
        .body(Vec::new())
        .unwrap();
    let t: serde_json::Value = client.request(req).await.unwrap();
    assert_eq!(t["kind"], "Table");
    let cols: Vec<&str> = t["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(cols, ["Name", "Status", "Roles", "Age", "Version"]);
    assert_eq!(t["rows"][0]["cells"][1], "NotReady");
    assert_eq!(t["rows"][0]["object"]["kind"], "PartialObjectMetadata");
}

#[tokio::test]
async fn create_over_an_object_being_deleted_or_with_a_resource_version() {
    let (_sim, client) = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let mut held = cm("held", json!({}));
    held.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    api.create(&PostParams::default(), &held).await.unwrap();
    api.delete("held", &DeleteParams::default()).await.unwrap();
    let e = status(
        api.create(&PostParams::default(), &cm("held", json!({})))
            .await
            .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (409, "AlreadyExists"));
    assert_eq!(
        e.message,
        "object is being deleted: configmaps \"held\" already exists"
    );
    let mut with_rv = cm("rv", json!({}));
    with_rv.metadata.resource_version = Some("5".into());
    let e = status(
        api.create(&PostParams::default(), &with_rv)
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 500);
    assert_eq!(
        e.message,
        "resourceVersion should not be set on objects to be created"
    );
}

#[tokio::test]
async fn configmaps_and_secrets_hold_at_most_one_mebibyte() {
    let (_sim, client) = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    // Exactly 1 MiB (key + value) is fine, one byte more is not.
    let ok = "x".repeat(1024 * 1024 - 1);
    api.create(&PostParams::default(), &cm("fits", json!({"k": ok})))
        .await
        .unwrap();
    let too_big = "x".repeat(1024 * 1024);
    let e = status(
        api.create(&PostParams::default(), &cm("big", json!({"k": too_big})))
            .await
            .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));
    assert_eq!(
        e.message,
        "ConfigMap \"big\" is invalid: []: Too long: must have at most 1048576 bytes"
    );
    let secrets: Api<Secret> = Api::namespaced(client, "default");
    let s: Secret =
        serde_json::from_value(json!({"metadata": {"name": "big"}, "stringData": {"k": too_big}}))
            .unwrap();
    let e = status(
        secrets
            .create(&PostParams::default(), &s)
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 422);
    assert_eq!(
        e.message,
        "Secret \"big\" is invalid: data: Too long: must have at most 1048576 bytes"
    );
}
