//! Import by the FluxInstance's namespace (`terraform import talosboot_flux_bootstrap.x flux-system`):
//! the FluxInstance must exist; the inputs come from the configuration at the next apply, which
//! adopts what exists (create-if-missing) and honours the module's inventory.

use super::model::{INSTANCE_NAME, set_computed};
use crate::cluster::flux::instance::read_instance;
use crate::framework::{Ctx, Diagnostics, ImportRequest, ImportResponse, ImportedResource};
use crate::resources::cluster_diagnostic;
use crate::values::{Type, Value};

pub async fn import(ctx: &Ctx, req: ImportRequest, ty: &Type) -> ImportResponse {
    let mut diagnostics = Diagnostics::new();
    let namespace = req.id.trim().to_owned();
    let kube = match crate::resources::cluster(ctx).connect().await {
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
                format!("There is no FluxInstance {namespace}/{INSTANCE_NAME}. The import ID is the FluxInstance's namespace, e.g. `flux-system`."),
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
    let mut state = empty_state(ty);
    set_computed(&mut state, Value::from(namespace.as_str()), None);
    ImportResponse {
        imported: vec![ImportedResource {
            state,
            private: Vec::new(),
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
