//! Read: what the bootstrap owns, compared with what it applied, concurrently. Drift goes into the
//! computed `drift` list (so the next plan is an update that names it); a failed API call is an
//! error and the state stays as it is (never "gone").

use super::private::Private;
use crate::cluster::flux::{FluxError, Kube, drift};
use crate::framework::{Ctx, ReadRequest, ReadResponse};
use crate::resources::cluster_diagnostic;
use crate::values::Value;

use super::model::INSTANCE_NAME;

pub async fn read(ctx: &Ctx, req: ReadRequest) -> ReadResponse {
    let mut state = req.current_state;
    let private = Private::decode_without_new_salt(&req.private);
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
            if let Some(attrs) = state.attrs_mut() {
                attrs.insert(
                    "drift".into(),
                    Value::List(entries.into_iter().map(Value::from).collect()),
                );
            }
            ReadResponse {
                new_state: state,
                ..Default::default()
            }
        }
        Err(e) => {
            let diagnostic = match e.cluster_error() {
                Some(c) => cluster_diagnostic("read the Flux bootstrap", c),
                None => crate::framework::Diagnostic::error(
                    "Failed to read the Flux bootstrap",
                    format!("{e}."),
                ),
            };
            ReadResponse {
                new_state: state,
                diagnostics: diagnostic.into(),
                ..Default::default()
            }
        }
    }
}

async fn drifted(
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
