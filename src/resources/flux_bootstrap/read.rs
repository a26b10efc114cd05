//! Read: what the bootstrap owns, compared with what it applied, concurrently. Drift goes into the
//! computed `drift` list (so the next plan is an update that names it); a failed API call is an
//! error and the state stays as it is (never "gone"). A state applied through its own `cluster`
//! is kept as it is (refresh has no configuration to reach that cluster): the plan makes this
//! read there instead ([`super::fleet`]), as it does for an import not read yet.

use super::private::Private;
use crate::cluster::flux::{FluxError, Kube, drift};
use crate::framework::{Ctx, Diagnostic, ReadRequest, ReadResponse};
use crate::resources::private::Imported;
use crate::resources::{cluster_diagnostic, connection};
use crate::values::Value;

use super::model::INSTANCE_NAME;

pub async fn read(ctx: &Ctx, req: ReadRequest) -> ReadResponse {
    let mut state = req.current_state;
    let private = Private::decode_without_new_salt(&req.private);
    if private.imported == Some(Imported::NotRead) {
        // The namespace only (an import without a provider connection): the plan checks it
        // through the resource's target.
        tracing::debug!("refresh keeps an imported state the plan has still to read");
        return ReadResponse {
            new_state: state,
            ..Default::default()
        };
    }
    if connection::applied_through_own_cluster(&state) {
        tracing::debug!("refresh keeps a state applied through its own `cluster`");
        return ReadResponse {
            new_state: state,
            ..Default::default()
        };
    }
    let Some(namespace) = state
        .attr("namespace")
        .and_then(Value::as_str)
        .map(str::to_owned)
    else {
        return ReadResponse {
            new_state: state,
            ..Default::default()
        };
    };
    let kube = match crate::resources::cluster(ctx).connect().await {
        Ok(c) => c,
        Err(e) => {
            return ReadResponse {
                new_state: state,
                diagnostics: cluster_diagnostic("read the Flux bootstrap", &e).into(),
                ..Default::default()
            };
        }
    };
    match drifted(&kube, &namespace, &private).await {
        Ok(entries) => {
            super::fleet::set_drift(&mut state, entries);
            ReadResponse {
                new_state: state,
                ..Default::default()
            }
        }
        Err(e) => ReadResponse {
            new_state: state,
            diagnostics: diagnostic(&e).into(),
            ..Default::default()
        },
    }
}

/// The error of a drift read that failed.
pub(super) fn diagnostic(e: &FluxError) -> Diagnostic {
    match e.cluster_error() {
        Some(c) => cluster_diagnostic("read the Flux bootstrap", c),
        None => Diagnostic::error("Failed to read the Flux bootstrap", format!("{e}.")),
    }
}

/// The drift entries of what the bootstrap owns in `namespace`, sorted.
pub(super) async fn drifted(
    kube: &Kube,
    namespace: &str,
    private: &Private,
) -> Result<Vec<String>, FluxError> {
    let (managed, instance, operator) = futures::join!(
        drift::managed(kube, &private.tracked, private.salt_bytes()),
        drift::flux_instance(kube, namespace, INSTANCE_NAME),
        drift::operator(kube, namespace),
    );
    let mut entries = managed?;
    entries.extend(instance?);
    entries.extend(operator?);
    if private.last_run_failed {
        entries.push(drift::Drift::run_failed());
    }
    let mut entries: Vec<String> = entries.iter().map(ToString::to_string).collect();
    entries.sort();
    Ok(entries)
}
