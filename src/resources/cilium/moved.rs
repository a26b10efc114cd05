//! `moved { from = helm_release.cilium  to = talosboot_cilium.this }`: hashicorp/helm's state (read
//! by [`crate::resources::release::moved`]) mapped onto `talosboot_cilium`, for the `cilium` chart only.

use super::model::Cilium;
use crate::framework::{Diagnostics, MoveRequest};
use crate::resources::private::Private;
use crate::resources::release::moved::read_helm_state;
use crate::resources::release::{ChartResource, ReleaseCommon};

/// The moved state and its private state, or the reason it cannot be moved.
pub fn from_helm_release(req: &MoveRequest, d: &mut Diagnostics) -> Option<(Cilium, Private)> {
    let (h, private) = read_helm_state(req, super::schema::TYPE_NAME, d)?;
    let chart = h.common.chart.as_deref().unwrap_or_default();
    if !(chart.is_empty() || chart == "cilium") {
        d.error(
            "Not a Cilium release",
            format!("The helm_release installs chart {chart:?}; talosboot_cilium manages the `cilium` chart only (use talosboot_helm_release for others)."),
        );
        return None;
    }
    let mut state = Cilium {
        common: ReleaseCommon {
            chart: Some("cilium".into()),
            ..h.common
        },
        ..Default::default()
    }
    .with_defaults();
    // What the release's values say, recorded by the refresh that follows (`readiness::record`).
    state.kube_proxy_replacement = None;
    Some((state, private))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(json: serde_json::Value, address: &str) -> MoveRequest {
        MoveRequest {
            source_provider_address: address.into(),
            source_type_name: "helm_release".into(),
            source_schema_version: 2,
            source_state_json: serde_json::to_vec(&json).expect("json"),
            source_private: Vec::new(),
        }
    }

    #[test]
    fn a_helm_v3_cilium_release_moves_with_its_inputs() {
        let source = serde_json::json!({
            "id": "cilium", "name": "cilium", "namespace": "kube-system", "chart": "cilium",
            "repository": "https://helm.cilium.io", "version": "1.18.4", "values": ["ipam:\n  mode: kubernetes\n"],
            "set": [{"name": "kubeProxyReplacement", "value": "true", "type": "auto"}],
            "set_sensitive": null, "status": "deployed", "wait": true, "timeout": 300,
            "metadata": {"name": "cilium", "revision": 3, "namespace": "kube-system", "chart": "cilium", "version": "1.18.4", "app_version": "1.18.4", "values": "{\"ipam\":{\"mode\":\"kubernetes\"}}"},
        });
        let mut d = Diagnostics::new();
        let (state, _) =
            from_helm_release(&req(source, "registry.terraform.io/hashicorp/helm"), &mut d)
                .expect("moves");
        assert!(d.is_empty());
        assert_eq!(state.common.id.as_deref(), Some("kube-system/cilium"));
        assert_eq!(state.common.revision, Some(3));
        assert_eq!(
            state.common.set.as_ref().map(|s| s[0].kind.clone()),
            Some(None),
            "`auto` is our default"
        );
        assert_eq!(state.common.timeout.as_deref(), Some("10m"));
        assert!(state.common.values_sha256.is_some());
        let metadata = state.common.metadata.expect("metadata moves");
        assert_eq!(
            (metadata.revision, metadata.app_version.as_str()),
            (3, "1.18.4")
        );
    }

    #[test]
    fn a_cilium_chart_moves_whatever_form_helm_release_named_it_in() {
        for (chart, repository) in [
            ("cilium/cilium", Some("https://helm.cilium.io")),
            (
                "https://helm.cilium.io/cilium-1.18.4.tgz",
                Some("https://helm.cilium.io"),
            ),
            (
                "oci://quay.io/cilium/charts/cilium",
                Some("oci://quay.io/cilium/charts"),
            ),
        ] {
            let source = serde_json::json!({
                "name": "cni", "namespace": "network", "chart": chart, "version": "1.18.4",
                "metadata": {"revision": 1, "version": "1.18.4"},
            });
            let mut d = Diagnostics::new();
            let (state, _) =
                from_helm_release(&req(source, "registry.opentofu.org/hashicorp/helm"), &mut d)
                    .unwrap_or_else(|| panic!("{chart} moves: {d:?}"));
            assert_eq!(state.common.chart.as_deref(), Some("cilium"), "{chart}");
            assert_eq!(state.common.repository.as_deref(), repository, "{chart}");
            // Its own name and namespace, not the schema's defaults.
            assert_eq!(state.common.id.as_deref(), Some("network/cni"), "{chart}");
        }
    }

    #[test]
    fn other_charts_and_providers_are_refused_with_the_alternative() {
        let mut d = Diagnostics::new();
        assert!(
            from_helm_release(
                &req(
                    serde_json::json!({"chart": "argo-cd"}),
                    "registry.terraform.io/hashicorp/helm"
                ),
                &mut d
            )
            .is_none()
        );
        assert!(d.has_errors());
        let mut d = Diagnostics::new();
        let mut r = req(
            serde_json::json!({}),
            "registry.terraform.io/hashicorp/kubernetes",
        );
        r.source_type_name = "kubernetes_manifest".into();
        assert!(from_helm_release(&r, &mut d).is_none());
        assert!(
            d.iter()
                .any(|x| x.detail.contains("import `<namespace>/<name>`"))
        );
    }
}
