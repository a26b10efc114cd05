//! `provider::talosboot::cilium_talos_values(api_endpoint)`: the Cilium Helm values Talos needs
//! on a cluster without kube-proxy (Talos docs, "Deploying Cilium CNI", without kube-proxy:
//! KubePrism as the API endpoint, kube-proxy replacement, Kubernetes IPAM, cgroup v2 already
//! mounted by Talos, no SYS_MODULE capability), so that even a root that keeps `helm_release`
//! gets them right. Clusters that run kube-proxy use `cilium_talos_values_with_kube_proxy()`.
//!
//! The values themselves live once, in [`crate::cluster::talos`], shared with `talosboot_cilium`.

use crate::framework::{Arguments, Function, FunctionError, Parameter, Signature};
use crate::values::{Type, Value, from_json};

pub use crate::cluster::talos::{
    CILIUM_AGENT_CAPABILITIES, CLEAN_CILIUM_STATE_CAPABILITIES, KUBEPRISM_HOST, KUBEPRISM_PORT,
    talos_cilium_values,
};

/// The cty type of [`talos_cilium_values`], as the function declares its return value.
pub fn values_type() -> Type {
    talos_values_type(true)
}

/// The cty type of the Talos values, with `k8sServiceHost`/`k8sServicePort` (no kube-proxy) or
/// without them (kube-proxy routes the `kubernetes` Service).
pub(super) fn talos_values_type(with_service_endpoint: bool) -> Type {
    let strings = || Type::list(Type::String);
    let mut attributes = vec![
        ("ipam", Type::object([("mode", Type::String)])),
        ("kubeProxyReplacement", Type::Bool),
    ];
    if with_service_endpoint {
        attributes.extend([
            ("k8sServiceHost", Type::String),
            ("k8sServicePort", Type::Number),
        ]);
    }
    attributes.extend([
        (
            "cgroup",
            Type::object([
                ("autoMount", Type::object([("enabled", Type::Bool)])),
                ("hostRoot", Type::String),
            ]),
        ),
        (
            "securityContext",
            Type::object([(
                "capabilities",
                Type::object([("ciliumAgent", strings()), ("cleanCiliumState", strings())]),
            )]),
        ),
    ]);
    Type::object(attributes)
}

/// `values` (the JSON the cluster layer builds) as a value of type `ty`.
pub(super) fn values_of(values: &serde_json::Value, ty: &Type) -> Result<Value, FunctionError> {
    let json = serde_json::to_vec(values)
        .map_err(|e| FunctionError::new(format!("failed to encode the values: {e}")))?;
    from_json(&json, ty).map_err(|e| FunctionError::new(format!("failed to build the values: {e}")))
}

pub use crate::cluster::endpoint::EndpointError;

/// `host:port`, `https://host:port`, `https://host` (port 443) or `[v6]:port` as host and port
/// ([`ApiEndpoint::parse`](crate::cluster::endpoint::ApiEndpoint::parse)); empty means
/// KubePrism, `localhost:7445`.
///
/// # Errors
/// [`EndpointError`] for another scheme, a path, a missing host or port, or a bad port.
pub fn split_endpoint(endpoint: &str) -> Result<(String, u16), EndpointError> {
    if endpoint.trim().is_empty() {
        return Ok((KUBEPRISM_HOST.to_owned(), KUBEPRISM_PORT));
    }
    crate::cluster::endpoint::ApiEndpoint::parse(endpoint).map(|e| (e.host, e.port))
}

pub struct CiliumTalosValues;

impl Function for CiliumTalosValues {
    fn name(&self) -> &'static str {
        "cilium_talos_values"
    }

    fn signature(&self) -> Signature {
        Signature::new(
            vec![
                Parameter::new(
                    "api_endpoint",
                    Type::String,
                    "The Kubernetes API endpoint Cilium talks to before its own Service routing works: `host:port` or `https://host:port`. Null or empty means KubePrism, `localhost:7445` (Talos 1.6+).",
                )
                .allow_null(),
            ],
            values_type(),
            "Cilium Helm values for Talos",
            "Returns the Cilium Helm values Talos needs on a cluster without kube-proxy (`cluster.proxy.disabled: true`, or on Talos 1.14+ a `KubeProxyConfig` document with `enabled: false`), as an object: `ipam.mode = \"kubernetes\"`, `kubeProxyReplacement = true`, `k8sServiceHost`/`k8sServicePort` from `api_endpoint`, `cgroup.autoMount.enabled = false` with `cgroup.hostRoot = \"/sys/fs/cgroup\"`, and the `securityContext.capabilities` for `ciliumAgent` and `cleanCiliumState` without `SYS_MODULE`.\n\nUse it with `helm_release` as `values = [yamlencode(provider::talosboot::cilium_talos_values(\"localhost:7445\"))]`, or merge your own settings on top. Clusters that run kube-proxy (Talos' default) take `cilium_talos_values_with_kube_proxy()` instead.",
        )
    }

    fn call(&self, args: &[Value]) -> Result<Value, FunctionError> {
        let args = Arguments(args);
        let endpoint = args.optional_string(0)?.unwrap_or_default();
        let (host, port) =
            split_endpoint(endpoint).map_err(|e| FunctionError::argument(0, e.to_string()))?;
        values_of(&talos_cilium_values(&host, port), &values_type())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::function::call_checked;

    #[test]
    fn endpoints_split_into_host_and_port() {
        let ok = |s: &str, host: &str, port: u16| {
            assert_eq!(split_endpoint(s), Ok((host.to_owned(), port)), "{s}");
        };
        ok("", "localhost", 7445);
        ok("localhost:7445", "localhost", 7445);
        ok("10.5.0.2:6443", "10.5.0.2", 6443);
        ok("https://10.5.0.2:6443", "10.5.0.2", 6443);
        ok("HTTPS://api.example.com/", "api.example.com", 443);
        ok("[fd00::1]:6443", "fd00::1", 6443);
        ok("https://[fd00::1]", "fd00::1", 443);
    }

    #[test]
    fn bad_endpoints_say_what_is_expected() {
        let err = |s: &str| split_endpoint(s).expect_err(s);
        assert!(matches!(err("10.5.0.2"), EndpointError::Shape(_)));
        assert!(matches!(
            err("http://10.5.0.2:6443"),
            EndpointError::Scheme(_)
        ));
        assert!(matches!(err("10.5.0.2:0"), EndpointError::Port(_)));
        assert!(matches!(err("10.5.0.2:99999"), EndpointError::Port(_)));
        assert!(matches!(err(":6443"), EndpointError::Shape(_)));
        assert!(matches!(err("fd00::1:6443"), EndpointError::Shape(_)));
        assert!(matches!(
            err("https://host:6443/api"),
            EndpointError::Shape(_)
        ));
        assert!(err("10.5.0.2").to_string().contains("expected host:port"));
    }

    #[test]
    fn values_are_the_talos_defaults() {
        let v = talos_cilium_values("localhost", 7445);
        assert_eq!(v["ipam"]["mode"], "kubernetes");
        assert_eq!(v["kubeProxyReplacement"], true);
        assert_eq!(v["k8sServiceHost"], "localhost");
        assert_eq!(v["k8sServicePort"], 7445);
        assert_eq!(v["cgroup"]["autoMount"]["enabled"], false);
        assert_eq!(v["cgroup"]["hostRoot"], "/sys/fs/cgroup");
        let caps = &v["securityContext"]["capabilities"];
        assert_eq!(caps["ciliumAgent"].as_array().map(Vec::len), Some(11));
        assert!(!caps["ciliumAgent"].to_string().contains("SYS_MODULE"));
        assert_eq!(
            caps["cleanCiliumState"],
            serde_json::json!(["NET_ADMIN", "SYS_ADMIN", "SYS_RESOURCE"])
        );
    }

    #[test]
    fn the_function_returns_its_declared_type() {
        let out = call_checked(&CiliumTalosValues, &["https://10.5.0.2:6443".into()])
            .expect("call succeeds");
        assert_eq!(out.implied_type(), values_type());
        assert_eq!(out.attr("k8sServiceHost"), Some(&Value::from("10.5.0.2")));
        assert_eq!(out.attr("k8sServicePort"), Some(&Value::int(6443)));
        let default = call_checked(&CiliumTalosValues, &[Value::Null]).expect("null is KubePrism");
        assert_eq!(default.attr("k8sServicePort"), Some(&Value::int(7445)));
    }

    #[test]
    fn a_bad_endpoint_blames_the_argument() {
        let err = call_checked(&CiliumTalosValues, &["10.5.0.2".into()]).expect_err("no port");
        assert_eq!(err.argument, Some(0));
        assert!(err.text.contains("expected host:port"), "{err}");
    }
}
