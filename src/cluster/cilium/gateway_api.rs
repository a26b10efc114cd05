//! Whether the cluster has the Gateway API CRDs a Cilium chart version needs
//! ([`super::versions::gateway_api_requirements`]): one GET of each CRD ([`find_gaps`]), judged
//! by a pure function ([`judge`]). Cilium's operator checks them once, at its start, and turns
//! its Gateway controller off without an error when one is missing: so the provider checks
//! before it installs, where a user can still act.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;

use super::versions::{GatewayApiCrd, GatewayApiRelease};
use crate::cluster::{ClusterError, Kube};

/// What is wrong with one required CRD.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gap {
    /// No such CRD.
    Missing,
    /// The CRD exists but does not serve the required version (an older Gateway API release);
    /// the versions it serves.
    NotServed { served: Vec<String> },
}

/// One required CRD the cluster lacks, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CrdGap {
    pub crd: GatewayApiCrd,
    pub gap: Gap,
}

impl CrdGap {
    /// `TLSRoute (tlsroutes.gateway.networking.k8s.io): serves v1alpha2, not v1`.
    pub fn describe(&self) -> String {
        let name = format!("{} ({})", self.crd.kind, self.crd.name);
        match &self.gap {
            Gap::Missing => format!("{name}: missing"),
            Gap::NotServed { served } => format!(
                "{name}: serves {}, not {}",
                if served.is_empty() {
                    "no version".to_owned()
                } else {
                    served.join(", ")
                },
                self.crd.served.unwrap_or_default()
            ),
        }
    }
}

/// Judges one CRD as found (`None`: not found) against what is required.
pub fn judge(required: &GatewayApiCrd, found: Option<&CustomResourceDefinition>) -> Option<Gap> {
    let Some(found) = found else {
        return Some(Gap::Missing);
    };
    let version = required.served?;
    let served: Vec<String> = found
        .spec
        .versions
        .iter()
        .filter(|v| v.served)
        .map(|v| v.name.clone())
        .collect();
    (!served.iter().any(|v| v == version)).then_some(Gap::NotServed { served })
}

/// Reads each CRD `release` requires (one GET each, concurrently) and returns those the
/// cluster lacks, in the table's order.
///
/// # Errors
/// [`ClusterError`] when the API does not answer (or refuses to list CRDs).
pub async fn find_gaps(
    clients: &Kube,
    release: &GatewayApiRelease,
) -> Result<Vec<CrdGap>, ClusterError> {
    let api: Api<CustomResourceDefinition> = Api::all(clients.client.clone());
    let reads = release.crds.iter().map(|crd| {
        let api = api.clone();
        async move {
            let found = clients
                .retry("get a Gateway API CRD", || api.get_opt(crd.name))
                .await
                .map_err(|e| clients.cluster_error(e))?;
            Ok::<_, ClusterError>(judge(crd, found.as_ref()).map(|gap| CrdGap { crd: *crd, gap }))
        }
    });
    let found = futures::future::try_join_all(reads).await?;
    Ok(found.into_iter().flatten().collect())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn crd_serving(versions: &[(&str, bool)]) -> CustomResourceDefinition {
        serde_json::from_value(json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "tlsroutes.gateway.networking.k8s.io"},
            "spec": {
                "group": "gateway.networking.k8s.io",
                "names": {"kind": "TLSRoute", "plural": "tlsroutes"},
                "scope": "Namespaced",
                "versions": versions.iter().map(|(name, served)| json!({
                    "name": name, "served": served, "storage": *served,
                })).collect::<Vec<_>>(),
            },
        }))
        .expect("crd")
    }

    #[test]
    fn a_crd_is_judged_by_existence_and_the_version_it_must_serve() {
        let tls = GatewayApiCrd {
            name: "tlsroutes.gateway.networking.k8s.io",
            kind: "TLSRoute",
            served: Some("v1"),
        };
        let any = GatewayApiCrd {
            served: None,
            ..tls
        };
        let old = crd_serving(&[("v1alpha2", true), ("v1", false)]);
        let new = crd_serving(&[("v1alpha2", false), ("v1", true)]);
        let table = [
            (tls, None, Some(Gap::Missing)),
            (
                tls,
                Some(&old),
                Some(Gap::NotServed {
                    served: vec!["v1alpha2".into()],
                }),
            ),
            (tls, Some(&new), None),
            (any, Some(&old), None),
            (any, None, Some(Gap::Missing)),
        ];
        for (required, found, want) in table {
            assert_eq!(judge(&required, found), want);
        }
        let gap = CrdGap {
            crd: tls,
            gap: Gap::NotServed {
                served: vec!["v1alpha2".into()],
            },
        };
        assert_eq!(
            gap.describe(),
            "TLSRoute (tlsroutes.gateway.networking.k8s.io): serves v1alpha2, not v1"
        );
    }
}
