//! `provider::talosboot::cilium_talos_values_with_kube_proxy()`: the Cilium Helm values Talos
//! needs on a cluster that runs kube-proxy (Talos' default; its Cilium guide's "with kube-proxy"
//! variant): Kubernetes IPAM, cgroup v2 already mounted by Talos, no SYS_MODULE capability, and
//! no kube-proxy replacement, hence no `k8sServiceHost`/`k8sServicePort` (kube-proxy routes the
//! `kubernetes` Service the agents use).
//!
//! A function of its own rather than an optional argument of `cilium_talos_values`: provider
//! functions have fixed parameters (only a trailing variadic one), so a second parameter would
//! break every existing call. The values live once, in [`crate::cluster::talos`].

use super::cilium_talos_values::{talos_values_type, values_of};
use crate::framework::{Function, FunctionError, Signature};
use crate::values::{Type, Value};

pub use crate::cluster::talos::talos_cilium_values_with_kube_proxy;

/// The cty type of [`talos_cilium_values_with_kube_proxy`], as the function declares it.
pub fn values_type() -> Type {
    talos_values_type(false)
}

pub struct CiliumTalosValuesWithKubeProxy;

impl Function for CiliumTalosValuesWithKubeProxy {
    fn name(&self) -> &'static str {
        "cilium_talos_values_with_kube_proxy"
    }

    fn signature(&self) -> Signature {
        Signature::new(
            Vec::new(),
            values_type(),
            "Cilium Helm values for Talos clusters that run kube-proxy",
            "Returns the Cilium Helm values Talos needs when kube-proxy runs (Talos' default: no `cluster.proxy.disabled: true`, or on Talos 1.14+ `KubeProxyConfig` `enabled: true`), as an object: `ipam.mode = \"kubernetes\"`, `kubeProxyReplacement = false`, `cgroup.autoMount.enabled = false` with `cgroup.hostRoot = \"/sys/fs/cgroup\"`, and the `securityContext.capabilities` for `ciliumAgent` and `cleanCiliumState` without `SYS_MODULE`. No `k8sServiceHost`/`k8sServicePort`: kube-proxy routes the `kubernetes` Service the agents use. For clusters without kube-proxy use `cilium_talos_values(api_endpoint)`.\n\nUse it with `helm_release` as `values = [yamlencode(provider::talosboot::cilium_talos_values_with_kube_proxy())]`, or merge your own settings on top.",
        )
    }

    fn call(&self, _args: &[Value]) -> Result<Value, FunctionError> {
        values_of(&talos_cilium_values_with_kube_proxy(), &values_type())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::function::call_checked;

    #[test]
    fn the_function_returns_the_kube_proxy_variant_of_its_declared_type() {
        let out = call_checked(&CiliumTalosValuesWithKubeProxy, &[]).expect("call succeeds");
        assert_eq!(out.implied_type(), values_type());
        assert_eq!(out.attr("kubeProxyReplacement"), Some(&Value::from(false)));
        assert_eq!(out.attr("k8sServiceHost"), None);
        let caps = out
            .attr("securityContext")
            .and_then(|v| v.attr("capabilities"))
            .expect("capabilities");
        assert!(!format!("{caps:?}").contains("SYS_MODULE"));
    }
}
