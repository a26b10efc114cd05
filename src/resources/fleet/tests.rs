//! Tests of the per-resource `cluster`: bad settings, destroys without it, and when the plan reads the cluster (states, removals, imports).

use super::*;
use crate::cluster::{ClusterHandle, ConfigSource, ProviderConfig};

fn applied_to(server: &str) -> Value {
    Value::object([(
        IDENTITY,
        Value::object([
            ("api_server", Value::from(server)),
            ("ca_sha256", Value::from("x")),
        ]),
    )])
}

fn source() -> ConfigSource {
    ConfigSource::Direct {
        host: "https://a:6443".into(),
        ca_pem: None,
        client_cert_pem: None,
        client_key_pem: None,
        token: None,
    }
}

fn own() -> Target {
    let source = source();
    Target::Own {
        handle: ClusterHandle::new(ProviderConfig::Known(source.clone())),
        source,
    }
}

#[test]
fn bad_cluster_settings_are_errors_on_their_paths_without_a_cluster() {
    let config = |block: Value| Value::object([(CLUSTER, block)]);
    let mut diagnostics = Diagnostics::new();
    validate_cluster(
        &config(Value::object([
            (connection::HOST, Value::from("10.0.0.10:6443")),
            (connection::TOKEN, Value::from("t0k3n")),
        ])),
        &mut diagnostics,
    );
    let d = diagnostics.iter().next().expect("an error");
    assert_eq!(d.severity, Severity::Error);
    assert_eq!(
        d.attribute,
        Some(AttributePath::attr(CLUSTER).then_attr(connection::HOST))
    );
    assert!(!d.detail.contains("t0k3n"));
    assert!(d.detail.starts_with("`cluster.host`: "), "{}", d.detail);
    for fine in [Value::Null, Value::unknown()] {
        let mut none = Diagnostics::new();
        validate_cluster(&config(fine), &mut none);
        assert!(none.is_empty());
    }
}

#[test]
fn a_destroy_without_its_cluster_forgets_only_what_the_policy_keeps() {
    let prior = applied_to("https://a:6443");
    match without_its_cluster("Flux bootstrap flux-system", &prior, Some("namespace x")) {
        UnreachableDestroy::Forget(d) => {
            assert_eq!(d.severity, Severity::Warning);
            assert!(
                d.detail.contains("namespace x stays on https://a:6443"),
                "{}",
                d.detail
            );
        }
        other => panic!("kept: {other:?}"),
    }
    match without_its_cluster("Flux bootstrap flux-system", &prior, None) {
        UnreachableDestroy::Refuse(d) => {
            assert_eq!(d.severity, Severity::Error);
            assert!(d.detail.contains("https://a:6443"), "{}", d.detail);
        }
        other => panic!("forgotten: {other:?}"),
    }
}

#[tokio::test]
async fn only_a_resource_with_its_own_cluster_that_is_the_stored_one_is_read_at_plan() {
    let mut private = Private::default();
    private.ensure_salt();
    let id = crate::cluster::identity(&source())
        .await
        .expect("an identity without I/O");
    let stored = Value::object([(IDENTITY, connection::identity_value(&id, Some(&private)))]);
    let req = |prior: &Value, proposed: &Value| PlanRequest {
        prior_state: prior.clone(),
        proposed_new_state: proposed.clone(),
        config: proposed.clone(),
        prior_private: private.encode(),
        client_capabilities: Default::default(),
    };
    assert!(reads_at_plan(&own(), &req(&stored, &stored)).await);
    let via_provider = Value::object([(IDENTITY, Value::Null)]);
    assert!(
        reads_at_plan(&own(), &req(&via_provider, &via_provider)).await,
        "applied through the provider: `cluster` is where it goes now"
    );
    let elsewhere = applied_to("https://b:6443");
    assert!(
        !reads_at_plan(&own(), &req(&elsewhere, &elsewhere)).await,
        "another cluster: a replacement"
    );
    assert!(
        !reads_at_plan(&own(), &req(&Value::Null, &stored)).await,
        "a create"
    );
    assert!(
        !reads_at_plan(&own(), &req(&stored, &Value::Null)).await,
        "a destroy"
    );
    assert!(!reads_at_plan(&Target::Unknown, &req(&stored, &stored)).await);
    let provider = Target::Provider(ClusterHandle::unconfigured());
    assert!(!reads_at_plan(&provider, &req(&stored, &stored)).await);
}

/// A plan of `cluster` removed from a state applied to `https://a:6443` through it, with the
/// provider's connection `provider`.
async fn without_cluster(provider: ProviderConfig) -> PlanResponse {
    let mut private = Private::default();
    private.ensure_salt();
    let id = crate::cluster::identity(&source())
        .await
        .expect("an identity without I/O");
    let stored = Value::object([(IDENTITY, connection::identity_value(&id, Some(&private)))]);
    let mut resp = PlanResponse {
        planned_state: stored.clone(),
        ..Default::default()
    };
    let target = Target::Provider(ClusterHandle::new(provider));
    plan_identity(&target, &stored, &private.encode(), &mut resp).await;
    resp
}

fn direct(host: &str) -> ProviderConfig {
    ProviderConfig::Known(ConfigSource::Direct {
        host: host.into(),
        ca_pem: None,
        client_cert_pem: None,
        client_key_pem: None,
        token: None,
    })
}

#[tokio::test]
async fn removing_cluster_keeps_a_resource_only_where_the_provider_reaches_the_same_cluster() {
    let same = without_cluster(direct("https://a:6443")).await;
    assert!(same.diagnostics.is_empty(), "{:?}", same.diagnostics);
    assert!(same.requires_replace.is_empty());
    assert_eq!(
        same.planned_state.attr(IDENTITY),
        Some(&Value::Null),
        "managed through the provider from now on"
    );

    let other = without_cluster(direct("https://b:6443")).await;
    assert_eq!(other.requires_replace, vec![AttributePath::attr(IDENTITY)]);
    let why = other.diagnostics.iter().next().expect("the reason");
    assert_eq!(why.severity, Severity::Warning);
    assert!(
        why.detail.contains("applied to https://a:6443")
            && why.detail.contains("reaches https://b:6443"),
        "{}",
        why.detail
    );

    for provider in [ProviderConfig::Missing, ProviderConfig::Unknown] {
        let unknown = without_cluster(provider).await;
        let d = unknown.diagnostics.iter().next().expect("an error");
        assert_eq!(d.severity, Severity::Error);
        assert_eq!(d.attribute, Some(AttributePath::attr(CLUSTER)));
        assert!(
            d.detail.contains("Put `cluster` back")
                && d.detail
                    .contains("point the provider block at https://a:6443"),
            "{}",
            d.detail
        );
        assert!(unknown.requires_replace.is_empty());
    }
}

#[tokio::test]
async fn a_state_whose_cluster_was_removed_is_read_at_plan_only_through_the_same_cluster() {
    let mut private = Private::default();
    private.ensure_salt();
    let id = crate::cluster::identity(&source()).await.expect("identity");
    let stored = Value::object([(IDENTITY, connection::identity_value(&id, Some(&private)))]);
    let req = PlanRequest {
        prior_state: stored.clone(),
        proposed_new_state: stored.clone(),
        config: stored,
        prior_private: private.encode(),
        client_capabilities: Default::default(),
    };
    let provider = |c| Target::Provider(ClusterHandle::new(c));
    assert!(reads_at_plan(&provider(direct("https://a:6443")), &req).await);
    assert!(!reads_at_plan(&provider(direct("https://b:6443")), &req).await);
    assert!(!reads_at_plan(&provider(ProviderConfig::Missing), &req).await);
}

#[test]
fn an_import_is_read_at_plan_unless_it_was_read_through_the_target_itself() {
    let marked = |imported| {
        Private {
            imported,
            ..Private::default()
        }
        .encode()
    };
    let provider = Target::Provider(ClusterHandle::unconfigured());
    for target in [&own(), &provider, &Target::Unknown] {
        assert!(reads_import(target, &marked(Some(Imported::NotRead))));
        assert!(!reads_import(target, &marked(None)));
    }
    assert!(reads_import(
        &own(),
        &marked(Some(Imported::ThroughProvider))
    ));
    assert!(!reads_import(
        &provider,
        &marked(Some(Imported::ThroughProvider))
    ));
}

#[tokio::test]
async fn an_import_that_cannot_be_read_at_plan_is_an_error_saying_what_to_do() {
    let never = |_: Kube| async { Ok::<(), Diagnostic>(()) };
    let unknown = read_import(&Target::Unknown, "release kube-system/cilium", never)
        .await
        .expect_err("not known until apply");
    assert_eq!(unknown.attribute, Some(AttributePath::attr(CLUSTER)));
    assert!(unknown.detail.contains("later run"), "{}", unknown.detail);
    let nowhere = Target::Provider(ClusterHandle::unconfigured());
    let missing = read_import(&nowhere, "release kube-system/cilium", never)
        .await
        .expect_err("no connection");
    assert_eq!(
        missing.summary,
        "Cannot read the imported release kube-system/cilium"
    );
    assert!(
        missing.detail.contains("Set `cluster`"),
        "{}",
        missing.detail
    );
    let gone = not_there_to_import("Helm release kube-system/cilium", "https://a:6443");
    assert!(gone.summary.contains("https://a:6443") && gone.detail.contains("never creates"));
}

#[test]
fn errors_of_an_own_cluster_name_its_api_server_once() {
    let mut diagnostics = Diagnostics::new();
    diagnostics.error("Failed", "it broke");
    diagnostics.error("Failed", "https://a:6443 refused");
    diagnostics.warning("Slow", "it took long");
    let named: Vec<_> = name_cluster(diagnostics.clone(), &own(), "https://a:6443")
        .into_iter()
        .collect();
    assert!(
        named[0]
            .detail
            .ends_with("Cluster: https://a:6443 (this resource's `cluster`).")
    );
    assert_eq!(named[1].detail, "https://a:6443 refused", "already named");
    assert_eq!(named[2].detail, "it took long", "warnings as they are");
    let provider = Target::Provider(ClusterHandle::unconfigured());
    let plain: Vec<_> = name_cluster(diagnostics, &provider, "https://a:6443")
        .into_iter()
        .collect();
    assert_eq!(plain[0].detail, "it broke");
}
