//! What the cluster must offer before Cilium installs, checked at plan when the cluster is
//! reachable (never an error when it is not) and at apply before any Job runs ([`check`]):
//! - one Service dataplane. Talos runs kube-proxy unless the machine config disables it
//!   (`cluster.proxy.disabled: true`, or Talos 1.14's `KubeProxyConfig` document), and its Cilium
//!   guide has a variant for each case; `kube_proxy_replacement` picks the variant. kube-proxy
//!   deployed with the replacement on is a warning (both would handle Services), no kube-proxy
//!   with the replacement off is an error (no Service IP would ever route);
//! - with `gatewayAPI.enabled`, the Gateway API CRDs the chart version's operator needs
//!   ([`crate::cluster::cilium::gateway_api`]): a missing one is an error naming it and the
//!   Gateway API release to install (the operator would turn its Gateway controller off without
//!   a word);
//! - against a Cilium that runs already (its ConfigMap `cilium-config`, whatever installed it:
//!   Talos inline manifests for an adoption, the release itself for an upgrade), every setting the
//!   install would change ([`crate::cluster::cilium::running_config`]): a warning listing them
//!   (old -> new), and an error for one that needs a migration (`kubeProxyReplacement`, `ipam.mode`,
//!   `routingMode`, `tunnelProtocol`, `k8sServiceHost`/`Port`, `cluster.name`/`id`) unless
//!   `accept_running_config_changes` names it.

use super::model::Cilium;
use super::versions::{gateway_api_on, origin};
use crate::cluster::ClusterError;
use crate::cluster::Kube;
use crate::cluster::cilium::gateway_api::{CrdGap, find_gaps};
use crate::cluster::cilium::running_config;
use crate::cluster::cilium::versions::{GatewayApiRelease, Minor, gateway_api_requirements};
use crate::cluster::helm::chart_version::ChartVersion;
use crate::cluster::kube_proxy::{self, Mismatch, Patience};
use crate::cluster::talos;
use crate::framework::{Diagnostic, Diagnostics};
use crate::resources::release::CheckAt;
use crate::values::AttributePath;

/// Where the configuration's choice comes from, for the message.
fn source(from_input: bool, on: bool) -> String {
    match from_input {
        true => format!("`kube_proxy_replacement` is {on}"),
        false => format!(
            "Cilium's `kubeProxyReplacement` is {on} (set by the values, or `talos_defaults = false`, over `kube_proxy_replacement`)"
        ),
    }
}

/// The diagnostic for a mismatch, on `kube_proxy_replacement` when the input decides it.
pub fn mismatch_diagnostic(mismatch: Mismatch, from_input: bool, at: CheckAt) -> Diagnostic {
    let mut d = match mismatch {
        Mismatch::BothHandleServices => Diagnostic::warning(
            "kube-proxy and Cilium would both handle Services",
            format!(
                concat!(
                    "DaemonSet {}/{} exists (Talos runs kube-proxy unless the machine config disables it), and {}: Cilium's kube-proxy replacement and kube-proxy would both program Service routing on every node. Choose one: keep kube-proxy and set `kube_proxy_replacement = false` (Talos' Cilium values for clusters with kube-proxy), or keep the replacement and disable kube-proxy in the Talos machine config (",
                    talos::kube_proxy_disabled!(),
                    "), then delete the DaemonSet if it is still there (`kubectl -n {} delete daemonset {}`)."
                ),
                kube_proxy::NAMESPACE,
                kube_proxy::NAME,
                source(from_input, true),
                kube_proxy::NAMESPACE,
                kube_proxy::NAME,
            ),
        ),
        Mismatch::NothingRoutesServices => Diagnostic::error(
            "Nothing would route Service IPs",
            format!(
                concat!(
                    "{}, but kube-proxy is not deployed (no DaemonSet {}/{}; the Talos machine config disables it: ",
                    talos::kube_proxy_disabled!(),
                    "). With neither, no Service IP ever routes: not the `kubernetes` Service the Cilium agents would use, not CoreDNS, not any other Service. Set `kube_proxy_replacement = true` (Cilium replaces kube-proxy and reaches the API at `api_endpoint`), or enable kube-proxy in the Talos machine config (",
                    talos::kube_proxy_enabled!(),
                    ").{}"
                ),
                source(from_input, false),
                kube_proxy::NAMESPACE,
                kube_proxy::NAME,
                match at {
                    CheckAt::Plan => "",
                    CheckAt::Apply => " Nothing was installed: no Job ran.",
                },
            ),
        ),
    };
    if from_input {
        d = d.at(AttributePath::attr("kube_proxy_replacement"));
    }
    d
}

/// Every check of the module docs, in order.
///
/// # Errors
/// [`ClusterError`] when the cluster cannot be read (at plan the caller ignores it).
pub async fn check(
    cilium: &Cilium,
    clients: &Kube,
    prior: Option<&Cilium>,
    at: CheckAt,
) -> Result<Diagnostics, ClusterError> {
    let mut diagnostics = check_kube_proxy(cilium, clients, at).await?;
    diagnostics.extend(check_gateway_api(cilium, clients, at).await?);
    diagnostics.extend(check_running_config(cilium, clients, prior, at).await?);
    diagnostics.extend(check_adopted_version(cilium, clients).await?);
    Ok(diagnostics)
}

/// An adoption (`adopt_existing`) of a Cilium without a Helm record follows the upgrade path too:
/// the version that runs is the agent image's tag (`quay.io/cilium/cilium:v1.18.4@sha256:...`).
async fn check_adopted_version(
    cilium: &Cilium,
    clients: &Kube,
) -> Result<Diagnostics, ClusterError> {
    if cilium.common.adopt_existing != Some(true) {
        return Ok(Diagnostics::new());
    }
    let Some(wanted) = cilium
        .common
        .version
        .as_deref()
        .and_then(ChartVersion::parse)
    else {
        return Ok(Diagnostics::new());
    };
    let namespace = cilium.common.release_namespace();
    let ds = kube::Api::<k8s_openapi::api::apps::v1::DaemonSet>::namespaced(
        clients.client.clone(),
        namespace,
    )
    .get_opt("cilium")
    .await
    .map_err(|e| ClusterError::from_kube(e, &clients.endpoint))?;
    let running = ds
        .and_then(|ds| ds.spec)
        .and_then(|s| s.template.spec)
        .and_then(|p| p.containers.into_iter().find(|c| c.name == "cilium-agent"))
        .and_then(|c| c.image)
        .and_then(|image| image_version(&image));
    Ok(match running {
        Some(running) => {
            super::upgrade::path_diagnostics(&running, &wanted, &[], cilium.upgrade_path_check())
        }
        None => Diagnostics::new(),
    })
}

/// The version an image reference's tag names (`repo/cilium:v1.18.4@sha256:...` -> 1.18.4).
fn image_version(image: &str) -> Option<ChartVersion> {
    let without_digest = image.split('@').next()?;
    let (_, tag) = without_digest.rsplit_once(':')?;
    (!tag.contains('/'))
        .then(|| ChartVersion::parse(tag))
        .flatten()
}

/// The running `cilium-config` against the planned values (see the module docs). Nothing when no
/// Cilium runs yet, or the values do not merge (their own check says so).
async fn check_running_config(
    cilium: &Cilium,
    clients: &Kube,
    prior: Option<&Cilium>,
    at: CheckAt,
) -> Result<Diagnostics, ClusterError> {
    let mut diagnostics = Diagnostics::new();
    let Ok(values) = cilium.merged_values() else {
        return Ok(diagnostics);
    };
    let namespace = cilium.common.release_namespace();
    let api: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::namespaced(clients.client.clone(), namespace);
    let Some(config) = api
        .get_opt(running_config::CONFIG_MAP)
        .await
        .map_err(|e| ClusterError::from_kube(e, &clients.endpoint))?
    else {
        return Ok(diagnostics);
    };
    let changes = running_config::changes(&config.data.unwrap_or_default(), &values);
    if changes.is_empty() {
        return Ok(diagnostics);
    }
    let accepted = cilium
        .accept_running_config_changes
        .clone()
        .unwrap_or_default();
    // What the last apply installed: a change back to it repairs drift made outside talosboot
    // (the warning lists it); it is not this configuration flipping the running CNI.
    let applied = prior.and_then(|p| p.merged_values().ok());
    let restores = |c: &running_config::SettingChange| {
        applied
            .as_ref()
            .is_some_and(|a| running_config::changes_from(a, &values, c.setting).is_none())
    };
    let (refused, allowed): (Vec<_>, Vec<_>) = changes.iter().partition(|c| {
        c.setting.critical && !accepted.iter().any(|a| a == c.setting.value_path) && !restores(c)
    });
    let list = |changes: &[&running_config::SettingChange]| {
        changes
            .iter()
            .map(|c| format!("  - {}", c.describe()))
            .collect::<Vec<_>>()
            .join("\n")
    };
    if !refused.is_empty() {
        let paths: Vec<String> = refused
            .iter()
            .map(|c| format!("\"{}\"", c.setting.value_path))
            .collect();
        diagnostics.push(Diagnostic::error(
            "The install would change settings of the running Cilium",
            format!(
                "Cilium runs in this cluster ({namespace}/{}), and this configuration would change settings that need a migration on a running CNI:\n{}\nA flip of these takes the pod network or the agents' API access down until every node is migrated. Make the values match what runs (`kubectl -n {namespace} get configmap {} -o yaml`), or, if you planned the migration, accept each change with `accept_running_config_changes = [{}]`.{}",
                running_config::CONFIG_MAP,
                list(&refused),
                running_config::CONFIG_MAP,
                paths.join(", "),
                match at {
                    CheckAt::Plan => "",
                    CheckAt::Apply => " Nothing was installed: no Job ran.",
                },
            ),
        ).at(AttributePath::attr("accept_running_config_changes")));
    }
    if !allowed.is_empty() {
        diagnostics.warning(
            "The install changes settings of the running Cilium",
            format!(
                "Cilium runs in this cluster, and the apply changes these of its settings (running -> planned, ConfigMap {namespace}/{}):\n{}",
                running_config::CONFIG_MAP,
                list(&allowed),
            ),
        );
    }
    Ok(diagnostics)
}

/// The error for Gateway API CRDs the cluster lacks.
pub fn gateway_api_diagnostic(
    version: &str,
    release: &GatewayApiRelease,
    gaps: &[CrdGap],
    at: CheckAt,
) -> Diagnostic {
    let list = gaps
        .iter()
        .map(|g| format!("  - {}", g.describe()))
        .collect::<Vec<_>>()
        .join("\n");
    Diagnostic::error(
        "Gateway API CRDs missing",
        format!(
            "`gatewayAPI.enabled` is true, and the operator of Cilium {version} needs the Gateway API {release} CRDs when it starts: without them it turns its Gateway controller off without an error, and no Gateway is ever programmed. The cluster lacks:\n{list}\nInstall the standard channel of Gateway API {release} first (`{command}`; clusters that still hold TLSRoute v1alpha2 objects: its experimental channel), then apply again.{nothing}",
            release = release.release,
            command = release.install_command(),
            nothing = match at {
                CheckAt::Plan => "",
                CheckAt::Apply => " Nothing was installed: no Job ran.",
            },
        ),
    )
}

/// With `gatewayAPI.enabled`, checks the CRDs the chart version needs (see the module docs).
/// Credentials that may not read CRDs get a warning, not a refusal.
///
/// # Errors
/// [`ClusterError`] when the cluster cannot be read.
pub async fn check_gateway_api(
    cilium: &Cilium,
    clients: &Kube,
    at: CheckAt,
) -> Result<Diagnostics, ClusterError> {
    let mut diagnostics = Diagnostics::new();
    let Ok(values) = cilium.merged_values() else {
        return Ok(diagnostics);
    };
    let version = cilium.common.version.clone().unwrap_or_default();
    let release = Minor::parse(&version).and_then(gateway_api_requirements);
    let (true, Some(release)) = (gateway_api_on(&values), release) else {
        return Ok(diagnostics);
    };
    let on = origin(cilium, "gatewayAPI.enabled");
    let gaps = match find_gaps(clients, release).await {
        Ok(gaps) => gaps,
        Err(ClusterError::Rejected {
            code: 403, message, ..
        }) => {
            diagnostics.warning(
                "Gateway API CRDs not checked",
                format!("The provider's credentials may not read CustomResourceDefinitions ({message}), so talosboot cannot tell whether the Gateway API {} CRDs Cilium {version} needs exist. Without them Cilium's operator turns its Gateway controller off without an error.", release.release),
            );
            return Ok(diagnostics);
        }
        Err(e) => return Err(e),
    };
    if !gaps.is_empty() {
        let d = gateway_api_diagnostic(&version, release, &gaps, at);
        diagnostics.push(match on {
            Some(path) => d.at(path),
            None => d,
        });
    }
    Ok(diagnostics)
}

/// Looks kube-proxy up and judges the configuration's choice against it (see the module docs).
///
/// # Errors
/// [`ClusterError`] when the cluster cannot be read (at plan the caller ignores it).
pub async fn check_kube_proxy(
    cilium: &Cilium,
    clients: &Kube,
    at: CheckAt,
) -> Result<Diagnostics, ClusterError> {
    let mut diagnostics = Diagnostics::new();
    // Values that do not merge are reported on their attribute by validation and apply.
    let Ok(choice) = cilium.replacement_choice() else {
        return Ok(diagnostics);
    };
    let patience = match at {
        CheckAt::Plan => Patience::Once,
        CheckAt::Apply => Patience::Retried,
    };
    let found = kube_proxy::find(clients, patience).await?;
    if let Some(mismatch) = kube_proxy::judge(choice.on, found) {
        diagnostics.push(mismatch_diagnostic(mismatch, choice.from_input, at));
    }
    Ok(diagnostics)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_agent_image_names_the_version_that_runs() {
        let v = |i| image_version(i).map(|v| v.to_string());
        assert_eq!(
            v("quay.io/cilium/cilium:v1.18.4@sha256:abc"),
            Some("1.18.4".into())
        );
        assert_eq!(
            v("mirror.example:5000/cilium/cilium:v1.19.7"),
            Some("1.19.7".into())
        );
        assert_eq!(v("mirror.example:5000/cilium/cilium"), None);
        assert_eq!(v("quay.io/cilium/cilium:latest"), None);
    }
    use crate::framework::Severity;

    #[test]
    fn missing_gateway_api_crds_are_named_with_the_release_to_install() {
        use crate::cluster::cilium::gateway_api::Gap;
        let release = gateway_api_requirements(Minor::new(1, 20)).expect("1.20");
        let gaps = [CrdGap {
            crd: release.crds[5],
            gap: Gap::Missing,
        }];
        let d = gateway_api_diagnostic("1.20.2", release, &gaps, CheckAt::Apply);
        assert_eq!(d.severity, Severity::Error);
        assert!(
            d.detail.contains(
                "BackendTLSPolicy (backendtlspolicies.gateway.networking.k8s.io): missing"
            ),
            "{}",
            d.detail
        );
        assert!(d.detail.contains("Gateway API v1.6.1"), "{}", d.detail);
        assert!(
            d.detail.contains("/v1.6.1/standard-install.yaml"),
            "{}",
            d.detail
        );
        assert!(d.detail.contains("no Job ran"), "{}", d.detail);
    }

    #[test]
    fn a_mismatch_names_the_input_that_decides_it() {
        let both = mismatch_diagnostic(Mismatch::BothHandleServices, true, CheckAt::Plan);
        assert_eq!(both.severity, Severity::Warning);
        assert_eq!(
            both.attribute.as_ref().map(|p| p.describe()).as_deref(),
            Some("kube_proxy_replacement")
        );
        let none = mismatch_diagnostic(Mismatch::NothingRoutesServices, true, CheckAt::Apply);
        assert_eq!(none.severity, Severity::Error);
        assert!(none.detail.contains("no Job ran"), "{}", none.detail);
        // Both say how to turn kube-proxy off or on in each machine-config form: the v1alpha1
        // field up to Talos 1.13, the KubeProxyConfig document from 1.14.
        for (d, forms) in [
            (
                &both,
                [
                    "cluster.proxy.disabled: true",
                    "`KubeProxyConfig` document with `enabled: false` (Talos 1.14+)",
                ],
            ),
            (
                &none,
                [
                    "remove `cluster.proxy.disabled: true` (Talos 1.13 and earlier)",
                    "`enabled: true` in the `KubeProxyConfig` document (Talos 1.14+)",
                ],
            ),
        ] {
            for form in forms {
                assert!(d.detail.contains(form), "{form}: {}", d.detail);
            }
        }
        let from_values =
            mismatch_diagnostic(Mismatch::NothingRoutesServices, false, CheckAt::Plan);
        assert!(from_values.attribute.is_none());
        assert!(
            from_values
                .detail
                .contains("`kubeProxyReplacement` is false"),
            "{}",
            from_values.detail
        );
    }
}
