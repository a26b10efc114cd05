//! Import by the FluxInstance's namespace (`terraform import talosboot_flux_bootstrap.x flux-system`):
//! the FluxInstance must exist; the inputs come from the configuration at the next apply, which
//! adopts what exists (create-if-missing) and honours the module's inventory.
//!
//! An import receives only the ID: no configuration, so no `cluster`. With the provider's
//! connection the FluxInstance is checked through it; without one (a fleet's provider block
//! usually connects nowhere) the state is the namespace only. Either way the private state marks
//! the import, and the plan checks the FluxInstance through the resource's own target
//! ([`super::fleet::read_at_plan`]).

use super::model::{INSTANCE_NAME, set_computed};
use crate::cluster::ProviderConfig;
use crate::cluster::flux::instance::read_instance;
use crate::framework::{Ctx, Diagnostics, ImportRequest, ImportResponse, ImportedResource};
use crate::resources::cluster_diagnostic;
use crate::resources::private::{Imported, Private};
use crate::values::{Type, Value};

pub async fn import(ctx: &Ctx, req: ImportRequest, ty: &Type) -> ImportResponse {
    let mut diagnostics = Diagnostics::new();
    let namespace = req.id.trim().to_owned();
    let mut private = Private::fresh();
    let provider = crate::resources::cluster(ctx);
    if !matches!(provider.config(), ProviderConfig::Known(_)) {
        private.imported = Some(Imported::NotRead);
        return imported(ty, &namespace, &private, diagnostics);
    }
    let kube = match provider.connect().await {
        Ok(c) => c,
        Err(e) => {
            diagnostics.push(cluster_diagnostic("import the Flux bootstrap", &e));
            return ImportResponse {
                imported: Vec::new(),
                diagnostics,
            };
        }
    };
    match read_instance(&kube, &namespace, INSTANCE_NAME).await {
        Ok(Some(_)) => {}
        Ok(None) => {
            diagnostics.error(
                "No FluxInstance to import",
                format!("There is no FluxInstance {namespace}/{INSTANCE_NAME} on {}, the provider's connection. The import ID is the FluxInstance's namespace, e.g. `flux-system`. An import receives no configuration, so it cannot use this resource's `cluster`: to import from the cluster `cluster` names, leave the provider block without a connection (as a fleet's usually is), and the plan checks it through `cluster`.", kube.endpoint),
            );
            return ImportResponse {
                imported: Vec::new(),
                diagnostics,
            };
        }
        Err(e) => {
            diagnostics.error("Failed to import the Flux bootstrap", format!("{e}."));
            return ImportResponse {
                imported: Vec::new(),
                diagnostics,
            };
        }
    }
    // The configuration may name another cluster in `cluster`: the plan checks it there.
    private.imported = Some(Imported::ThroughProvider);
    imported(ty, &namespace, &private, diagnostics)
}

/// The imported state: the namespace, every other attribute null (the inputs come from the
/// configuration).
fn imported(
    ty: &Type,
    namespace: &str,
    private: &Private,
    diagnostics: Diagnostics,
) -> ImportResponse {
    let mut state = empty_state(ty);
    set_computed(&mut state, Value::from(namespace), None);
    ImportResponse {
        imported: vec![ImportedResource {
            state,
            private: private.encode(),
        }],
        diagnostics,
    }
}

/// An object of the schema's type with every attribute null.
fn empty_state(ty: &Type) -> Value {
    match ty {
        Type::Object { attributes, .. } => Value::Object(
            attributes
                .keys()
                .map(|k| (k.clone(), Value::Null))
                .collect(),
        ),
        _ => Value::Null,
    }
}
