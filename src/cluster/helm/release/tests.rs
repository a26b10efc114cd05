//! Record decoding, values hashing, the reads of the newest revision (against hand-made records
//! and a racing API), the workloads and the objects of a manifest.

use super::*;

fn record() -> serde_json::Value {
    serde_json::json!({
        "name": "cilium", "namespace": "kube-system", "version": 3,
        "info": {"status": "deployed", "last_deployed": "2026-11-29T10:00:00Z", "description": "Upgrade complete"},
        "chart": {"metadata": {"name": "cilium", "version": "1.18.4", "appVersion": "1.18.4"}},
        "config": {"k8sServicePort": 7445, "ipam": {"mode": "kubernetes"}},
        "manifest": "---\n"
    })
}

#[test]
fn gzip_record_decodes_with_chart_and_status() {
    let release = decode_release(&encode_release_for_tests(&record())).expect("decodes");
    assert_eq!(release.revision, 3);
    assert_eq!(release.status, "deployed");
    assert_eq!(release.chart_version, "1.18.4");
    assert_eq!(release.values_sha256.len(), 64);
}

#[test]
fn the_kube_proxy_replacement_value_is_read_from_the_values() {
    let decoded = |config: serde_json::Value| {
        let mut r = record();
        r["config"] = config;
        decode_release(&encode_release_for_tests(&r))
            .expect("decodes")
            .kube_proxy_replacement
    };
    assert_eq!(
        decoded(serde_json::json!({"kubeProxyReplacement": "true"})),
        Some(serde_json::json!("true"))
    );
    assert_eq!(
        decoded(serde_json::json!({})),
        None,
        "unset: the chart's default"
    );
}

#[test]
fn record_without_gzip_decodes_too() {
    let plain = base64::engine::general_purpose::STANDARD
        .encode(serde_json::to_vec(&record()).expect("json"));
    let release = decode_release(plain.as_bytes()).expect("decodes");
    assert_eq!(release.name, "cilium");
}

#[test]
fn values_hash_ignores_key_order_but_not_content() {
    let a = values_digest(Some(&serde_json::json!({"a": 1, "b": {"c": true}})));
    let b = values_digest(Some(&serde_json::json!({"b": {"c": true}, "a": 1})));
    let c = values_digest(Some(&serde_json::json!({"a": 2, "b": {"c": true}})));
    assert_eq!(a, b);
    assert_ne!(a, c);
    assert_eq!(
        values_digest(None),
        values_digest(Some(&serde_json::json!({})))
    );
}

#[test]
fn decode_errors_never_quote_the_record() {
    let json = br#"{"name": "cilium", "version": "hunter2"}"#;
    let encoded = base64::engine::general_purpose::STANDARD.encode(json);
    let err = decode_release(encoded.as_bytes()).expect_err("version is not a number");
    assert!(!err.to_string().contains("hunter2"), "{err}");
}

#[test]
fn a_gzip_bomb_is_refused() {
    use std::io::Write;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    let zeros = vec![b' '; 1 << 20];
    for _ in 0..40 {
        gz.write_all(&zeros).expect("gzip");
    }
    let encoded = base64::engine::general_purpose::STANDARD.encode(gz.finish().expect("gzip"));
    assert!(matches!(
        decode_release(encoded.as_bytes()),
        Err(HelmDecodeError::TooLarge)
    ));
}

#[test]
fn garbage_is_an_error_not_a_panic() {
    assert!(decode_release(b"not base64 !!").is_err());
    let not_json = base64::engine::general_purpose::STANDARD.encode(b"\x1f\x8b\x08garbage");
    assert!(decode_release(not_json.as_bytes()).is_err());
}

mod against_an_api {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;
    use crate::cluster::client::test_server::{Reply, handle, serve};

    fn metadata_list(revisions: &[i64]) -> serde_json::Value {
        let items: Vec<_> = revisions
            .iter()
            .map(|r| {
                serde_json::json!({
                    "apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata",
                    "metadata": {"name": format!("sh.helm.release.v1.cilium.v{r}"),
                                 "namespace": "kube-system",
                                 "labels": {"owner": "helm", "name": "cilium", "version": r.to_string()}}
                })
            })
            .collect();
        serde_json::json!({"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadataList",
                           "metadata": {"resourceVersion": "1"}, "items": items})
    }

    fn secret(revision: i64) -> serde_json::Value {
        let mut record = record();
        record["version"] = revision.into();
        let field = encode_release_for_tests(&record);
        serde_json::json!({
            "apiVersion": "v1", "kind": "Secret", "type": "helm.sh/release.v1",
            "metadata": {"name": format!("sh.helm.release.v1.cilium.v{revision}"), "namespace": "kube-system"},
            "data": {"release": base64::engine::general_purpose::STANDARD.encode(field)}
        })
    }

    /// Lists show revisions 1..=n where n grows on every list; a get of a revision older than
    /// the newest listed so far answers 404 (Helm pruned or replaced it meanwhile), until
    /// `stable_after` lists have happened.
    async fn racing_api(stable_after: usize) -> (String, Arc<AtomicUsize>) {
        let lists = Arc::new(AtomicUsize::new(0));
        let seen = lists.clone();
        let url = serve(move |_, target| {
            if target.contains("labelSelector") {
                let n = seen.fetch_add(1, Ordering::SeqCst) + 1;
                return Reply::json(200, metadata_list(&(1..=n as i64 + 1).collect::<Vec<_>>()));
            }
            let n = seen.load(Ordering::SeqCst);
            let revision: i64 = target
                .rsplit(".v")
                .next()
                .and_then(|r| r.parse().ok())
                .unwrap_or(0);
            if n < stable_after {
                Reply::not_found(&format!("sh.helm.release.v1.cilium.v{revision}"))
            } else {
                Reply::json(200, secret(revision))
            }
        })
        .await;
        (url, lists)
    }

    #[tokio::test]
    async fn a_revision_pruned_between_list_and_get_is_listed_again() {
        let (url, lists) = racing_api(3).await;
        let kube = handle(&url, Duration::from_secs(10))
            .connect()
            .await
            .expect("connected");
        let release = current_release(kube.client, &kube.endpoint, "kube-system", "cilium")
            .await
            .expect("a 404 on the newest revision is a retry, not an error")
            .expect("a release");
        assert_eq!(lists.load(Ordering::SeqCst), 3, "one list per attempt");
        assert_eq!(release.revision, 4, "the newest revision of the last list");
    }

    #[tokio::test]
    async fn retries_are_bounded() {
        let (url, lists) = racing_api(usize::MAX).await;
        let kube = handle(&url, Duration::from_secs(10))
            .connect()
            .await
            .expect("connected");
        let err = current_release(kube.client, &kube.endpoint, "kube-system", "cilium")
            .await
            .expect_err("a revision that never appears is reported");
        assert!(
            matches!(err, ClusterError::Rejected { code: 404, .. }),
            "{err}"
        );
        assert_eq!(lists.load(Ordering::SeqCst), GET_ATTEMPTS);
    }
}

#[test]
fn workloads_are_read_from_the_manifest_and_the_rest_ignored() {
    let manifest = "---\n# Source: argo-cd/templates/sa.yaml\napiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: argocd\n---\n# Source: argo-cd/templates/server.yaml\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: argocd-server\n  namespace: argocd\n---\napiVersion: apps/v1\nkind: StatefulSet\nmetadata:\n  name: argocd-application-controller\n---\n: not yaml [\n";
    let w = manifest_workloads(manifest);
    assert_eq!(w.len(), 2, "{w:?}");
    assert_eq!(w[0].kind, "Deployment");
    assert_eq!(w[0].namespace.as_deref(), Some("argocd"));
    assert_eq!(w[1].name, "argocd-application-controller");
    assert_eq!(w[1].namespace, None);
}

#[test]
fn every_object_of_the_manifest_is_listed_and_broken_documents_skipped() {
    let manifest = "---\n# Source: cilium/templates/sa.yaml\napiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: cilium\n  namespace: kube-system\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: cilium\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cilium-config\n---\nkind: ConfigMap\nmetadata:\n  name: no-api-version\n---\n: not yaml [\n";
    let objects = manifest_objects(manifest);
    let listed: Vec<(&str, &str, Option<&str>, &str)> = objects
        .iter()
        .map(|o| {
            (
                o.api_version.as_str(),
                o.kind.as_str(),
                o.namespace.as_deref(),
                o.name.as_str(),
            )
        })
        .collect();
    assert_eq!(
        listed,
        [
            ("v1", "ServiceAccount", Some("kube-system"), "cilium"),
            (
                "rbac.authorization.k8s.io/v1",
                "ClusterRole",
                None,
                "cilium"
            ),
            ("v1", "ConfigMap", None, "cilium-config"),
        ]
    );
}
