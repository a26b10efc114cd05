//! Provider-defined functions, one module each: `provider::talosboot::<name>(...)` in
//! configuration (Terraform 1.8+, OpenTofu 1.7+).

use std::sync::Arc;

use crate::framework::Function;

pub mod cilium_talos_values;
pub mod cilium_talos_values_with_kube_proxy;

/// The functions the provider offers.
pub fn functions() -> Vec<Arc<dyn Function>> {
    vec![
        Arc::new(cilium_talos_values::CiliumTalosValues),
        Arc::new(cilium_talos_values_with_kube_proxy::CiliumTalosValuesWithKubeProxy),
    ]
}
