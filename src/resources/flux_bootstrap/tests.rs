//! Protocol-level tests of the write-only `managed_resources` through the dispatcher (the real-CLI
//! test needs a client with write-only support): refused from old clients with the versions that
//! have it, never in a planned state, hashed with the resource's salt.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::private::Private;
use crate::cluster::ClusterHandle;
use crate::framework::{ClientCapabilities, Dispatcher, FixedProvider, PlanRequest};
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
}
