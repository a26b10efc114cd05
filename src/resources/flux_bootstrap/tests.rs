//! Protocol-level tests through the dispatcher (the real-CLI tests need a client with write-only
//! support): the write-only `managed_resources` refused from old clients with the versions that
//! have it, never in a planned state, hashed with the resource's salt; and the write-only
//! `cluster` (a fleet in one root), with no cluster reachable: bad settings on their paths, a
//! move to another cluster planned as a replacement, refresh keeping such a state, and a destroy
//! the provider's connection cannot make.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::private::Private;
use crate::cluster::ClusterHandle;
use crate::framework::{
    ApplyRequest, ClientCapabilities, Dispatcher, FixedProvider, PlanRequest, PlanResponse,
    ReadRequest, Severity,
};
use crate::resources::connection::{CLUSTER, HOST, IDENTITY, TOKEN};
use crate::values::AttributePath;
use crate::values::{Type, Value};

const TYPE: &str = "talosboot_flux_bootstrap";
const SECRET: &str = "hunter2-deploy-key";
const INSTANCE: &str = "apiVersion: fluxcd.controlplane.io/v1\nkind: FluxInstance\nmetadata:\n  name: flux\n  namespace: flux-system\n";

fn dispatcher() -> Dispatcher {
    Dispatcher::new(
        // A provider block without settings: these tests never reach a cluster.
        Arc::new(FixedProvider(Arc::new(
            crate::resources::ProviderData::new(ClusterHandle::unconfigured()),
        ))),
        vec![Arc::new(super::FluxBootstrap)],
        Vec::new(),
        Default::default(),
    )
}

/// A config object: every attribute null but the given ones.
fn config(d: &Dispatcher, secret: &str) -> Value {
    let Ok(Type::Object { attributes, .. }) = d.resource_type(TYPE).cloned() else {
        panic!("object type");
    };
    let mut attrs: BTreeMap<String, Value> = attributes
        .keys()
        .map(|k| (k.clone(), Value::Null))
        .collect();
    let object = |pairs: &[(&str, Value)]| {
        Value::Object(
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), v.clone()))
                .collect(),
        )
    };
    attrs.insert("revision".into(), Value::int(1));
    attrs.insert(
        "gitops_resources".into(),
        object(&[
            ("instance_yaml", Value::from(INSTANCE)),
            ("prerequisites", Value::Null),
            ("operator_chart", Value::Null),
        ]),
    );
    let secrets = format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: flux-system\nstringData:\n  identity: {secret}\n"
    );
    attrs.insert(
        "managed_resources".into(),
        object(&[
            ("secrets_yaml", Value::from(secrets)),
            ("runtime_info", Value::Null),
        ]),
    );
    Value::Object(attrs)
}

#[test]
fn old_clients_are_refused_naming_the_versions() {
    let d = dispatcher();
    let diagnostics = d.validate_resource(TYPE, &config(&d, SECRET), false);
    let text = format!("{diagnostics:?}");
    assert!(diagnostics.has_errors() && text.contains("1.11"), "{text}");
    assert!(!text.contains(SECRET));
    assert!(
        !d.validate_resource(TYPE, &config(&d, SECRET), true)
            .has_errors()
    );
}

#[tokio::test]
async fn write_only_values_never_reach_a_plan_and_changes_plan_an_update() {
    let d = dispatcher();
    let plan = |config: Value, prior: Value, private: Vec<u8>| {
        d.plan(
            TYPE,
            PlanRequest {
                prior_state: prior,
                proposed_new_state: config.clone(),
                config,
                prior_private: private,
                client_capabilities: ClientCapabilities {
                    deferral_allowed: false,
                    write_only_attributes_allowed: true,
                },
            },
        )
    };
    let create = plan(config(&d, SECRET), Value::Null, Vec::new()).await;
    assert!(!create.diagnostics.has_errors(), "{:?}", create.diagnostics);
    let planned = &create.planned_state;
    assert_eq!(planned.attr("managed_resources"), Some(&Value::Null));
    assert!(
        planned
            .attr("managed_resources_hash")
            .is_some_and(Value::is_unknown),
        "no salt before the first apply"
    );
    assert_eq!(planned.attr("namespace"), Some(&Value::from("flux-system")));
    assert!(!format!("{planned:?}").contains(SECRET));

    let mut private = Private::default();
    private.ensure_salt();
    let salted = |secret: &str| {
        let cfg = config(&d, secret);
        let mut prior = cfg.clone();
        if let Some(a) = prior.attrs_mut() {
            a.insert("managed_resources".into(), Value::Null);
        }
        plan(cfg, prior, private.encode())
    };
    let a = salted(SECRET).await.planned_state;
    let b = salted("rotated-key").await.planned_state;
    let hash = |v: &Value| {
        v.attr("managed_resources_hash")
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    assert!(
        hash(&a).is_some() && hash(&a) != hash(&b),
        "a changed secret changes the hash"
    );
    assert!(!format!("{a:?}").contains(SECRET));
    // The create half of a replacement comes with the replaced object's private state; planned
    // again at apply it comes without (the object is gone). Both plans must agree: unknown.
    let replacing = plan(config(&d, SECRET), Value::Null, private.encode()).await;
    assert!(
        replacing
            .planned_state
            .attr("managed_resources_hash")
            .is_some_and(Value::is_unknown),
        "a create has no salt, whatever private state comes with it"
    );
}

const TOKEN_VALUE: &str = "fleet-t0ken-never-shown";

/// [`config`] with `cluster = { host = <host>, token = ... }`.
fn with_cluster(d: &Dispatcher, host: &str) -> Value {
    let mut cfg = config(d, SECRET);
    let mut block: BTreeMap<String, Value> = [
        "kubeconfig_raw",
        "config_path",
        "config_context",
        "host",
        "cluster_ca_certificate",
        "client_certificate",
        "client_key",
        "token",
    ]
    .iter()
    .map(|k| ((*k).to_owned(), Value::Null))
    .collect();
    block.insert(HOST.into(), Value::from(host));
    block.insert(TOKEN.into(), Value::from(TOKEN_VALUE));
    if let Some(a) = cfg.attrs_mut() {
        a.insert(CLUSTER.into(), Value::Object(block));
    }
    cfg
}

/// A state applied to `server` through its own `cluster` (what the dispatcher stores: the
/// write-only values null).
fn applied_to(d: &Dispatcher, server: &str, ca_sha256: &str, policy: &str) -> Value {
    let mut state = config(d, SECRET);
    if let Some(a) = state.attrs_mut() {
        a.insert("managed_resources".into(), Value::Null);
        a.insert("namespace".into(), Value::from("flux-system"));
        a.insert("id".into(), Value::from("flux-system"));
        a.insert("deletion_policy".into(), Value::from(policy));
        a.insert("drift".into(), Value::List(Vec::new()));
        a.insert(
            IDENTITY.into(),
            Value::object([
                ("api_server", Value::from(server)),
                ("ca_sha256", Value::from(ca_sha256)),
            ]),
        );
    }
    state
}

async fn plan(d: &Dispatcher, config: Value, prior: Value, private: Vec<u8>) -> PlanResponse {
    d.plan(
        TYPE,
        PlanRequest {
            prior_state: prior,
            proposed_new_state: config.clone(),
            config,
            prior_private: private,
            client_capabilities: ClientCapabilities {
                deferral_allowed: false,
                write_only_attributes_allowed: true,
            },
        },
    )
    .await
}

#[tokio::test]
async fn bad_cluster_settings_fail_at_validate_and_plan_on_their_paths_without_a_cluster() {
    let d = dispatcher();
    let bad = with_cluster(&d, "10.0.0.10:6443");
    let diagnostics = d.validate_resource(TYPE, &bad, true);
    let error = diagnostics
        .iter()
        .find(|x| x.severity == Severity::Error)
        .expect("an error");
    assert_eq!(
        error.attribute,
        Some(AttributePath::attr(CLUSTER).then_attr(HOST)),
        "{error:?}"
    );
    assert!(
        error.detail.contains("https://10.0.0.10:6443"),
        "{}",
        error.detail
    );
    let planned = plan(&d, bad, Value::Null, Vec::new()).await;
    assert!(planned.diagnostics.has_errors());
    assert!(!format!("{:?}", planned.diagnostics).contains(TOKEN_VALUE));
}

#[tokio::test]
async fn a_cluster_that_reaches_another_api_server_plans_a_replacement_saying_why() {
    let d = dispatcher();
    let mut private = Private::default();
    private.ensure_salt();
    let prior = applied_to(&d, "https://a.example:6443", "hmac-sha256:old", "keep");
    // Only its identity is taken from the settings: nothing connects (nothing is read at plan on
    // a cluster the state was not applied to).
    let planned = plan(
        &d,
        with_cluster(&d, "https://b.example:6443"),
        prior,
        private.encode(),
    )
    .await;
    assert!(
        !planned.diagnostics.has_errors(),
        "{:?}",
        planned.diagnostics
    );
    assert!(
        planned
            .requires_replace
            .contains(&AttributePath::attr(IDENTITY))
    );
    let why = planned
        .diagnostics
        .iter()
        .find(|x| x.summary == "Resource moves to another cluster")
        .expect("the reason");
    assert!(
        why.detail.contains("https://a.example:6443")
            && why.detail.contains("https://b.example:6443")
    );
    assert_eq!(
        planned
            .planned_state
            .attr(IDENTITY)
            .and_then(|i| i.attr("api_server")),
        Some(&Value::from("https://b.example:6443"))
    );
    let text = format!("{:?} {:?}", planned.planned_state, planned.diagnostics);
    assert!(!text.contains(TOKEN_VALUE), "no credential in the plan");
}

#[tokio::test]
async fn refresh_keeps_a_state_applied_through_its_own_cluster_as_it_is() {
    let d = dispatcher();
    let state = applied_to(&d, "https://a.example:6443", "hmac-sha256:x", "keep");
    let read = d
        .read(
            TYPE,
            ReadRequest {
                current_state: state.clone(),
                private: Vec::new(),
                client_capabilities: ClientCapabilities::default(),
            },
        )
        .await;
    assert!(read.diagnostics.is_empty(), "{:?}", read.diagnostics);
    assert_eq!(read.new_state, state, "never removed nor changed");
}

#[tokio::test]
async fn a_destroy_the_provider_cannot_reach_forgets_a_kept_bootstrap_and_refuses_an_uninstall() {
    let d = dispatcher();
    let destroy = |prior: Value| {
        d.apply(
            TYPE,
            ApplyRequest {
                prior_state: prior,
                planned_state: Value::Null,
                config: Value::Null,
                planned_private: Vec::new(),
            },
        )
    };
    let kept = destroy(applied_to(&d, "https://a.example:6443", "x", "keep")).await;
    assert!(!kept.diagnostics.has_errors(), "{:?}", kept.diagnostics);
    assert!(kept.new_state.is_null(), "forgotten");
    let warning = kept.diagnostics.iter().next().expect("a warning");
    assert!(
        warning
            .detail
            .contains("flux-operator-bootstrap stays on https://a.example:6443"),
        "{}",
        warning.detail
    );
    let prior = applied_to(&d, "https://a.example:6443", "x", "uninstall");
    let refused = destroy(prior.clone()).await;
    assert!(refused.diagnostics.has_errors());
    assert!(
        format!("{:?}", refused.diagnostics).contains("https://a.example:6443"),
        "names the API server"
    );
    assert_eq!(refused.new_state, prior, "kept in state");
}

#[tokio::test]
async fn an_import_without_a_provider_connection_is_the_namespace_only_and_read_at_plan() {
    let d = dispatcher();
    let imported = d
        .import(
            TYPE,
            crate::framework::ImportRequest {
                id: "flux-system".into(),
                client_capabilities: ClientCapabilities::default(),
            },
        )
        .await;
    assert!(
        !imported.diagnostics.has_errors(),
        "{:?}",
        imported.diagnostics
    );
    let one = imported.imported.first().expect("one imported state");
    assert_eq!(
        one.state.attr("namespace"),
        Some(&Value::from("flux-system"))
    );
    let private = Private::decode_without_new_salt(&one.private);
    assert_eq!(
        private.imported,
        Some(crate::resources::private::Imported::NotRead)
    );
    let read = d
        .read(
            TYPE,
            ReadRequest {
                current_state: one.state.clone(),
                private: one.private.clone(),
                client_capabilities: ClientCapabilities::default(),
            },
        )
        .await;
    assert!(read.diagnostics.is_empty(), "{:?}", read.diagnostics);
    assert_eq!(read.new_state, one.state, "kept, never removed");
    // No `cluster` and no provider connection: the plan cannot check the import, and says so.
    let planned = plan(
        &d,
        config(&d, SECRET),
        one.state.clone(),
        one.private.clone(),
    )
    .await;
    let error = planned
        .diagnostics
        .iter()
        .find(|x| x.severity == Severity::Error)
        .expect("an error");
    assert_eq!(error.attribute, Some(AttributePath::attr(CLUSTER)));
    assert!(error.detail.contains("Set `cluster`"), "{}", error.detail);
}

#[tokio::test]
async fn removing_cluster_without_a_provider_connection_is_an_error_naming_the_cluster() {
    let d = dispatcher();
    let mut private = Private::default();
    private.ensure_salt();
    let prior = applied_to(&d, "https://a.example:6443", "hmac-sha256:x", "keep");
    let planned = plan(&d, config(&d, SECRET), prior, private.encode()).await;
    let error = planned
        .diagnostics
        .iter()
        .find(|x| x.severity == Severity::Error)
        .expect("an error");
    assert_eq!(error.attribute, Some(AttributePath::attr(CLUSTER)));
    assert!(
        error
            .detail
            .contains("point the provider block at https://a.example:6443"),
        "{}",
        error.detail
    );
    assert!(planned.requires_replace.is_empty(), "never a silent move");
}
