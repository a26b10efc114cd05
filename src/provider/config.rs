//! The provider block: how users point talosboot at a cluster, validated without I/O, and decoded
//! into the cluster layer's plain [`ProviderConfig`].
//!
//! Three ways, matching how Talos outputs get wired: a raw kubeconfig (`talos_cluster_kubeconfig`'s
//! `kubeconfig_raw`), a kubeconfig file (`config_path`, or `KUBE_CONFIG_PATH`), or the endpoint and
//! credentials one by one (`host` + CA + client cert/key or token). Any of them may be unknown at plan
//! time: the cluster is contacted lazily, only by operations that need it.

use crate::cluster::ProviderConfig;
use crate::framework::{Attribute, Block, Diagnostics, Schema};
use crate::resources::connection::{
    self, CA, CERT, CONTEXT, HOST, KEY, PATH, RAW, RETRY, Scope, TOKEN,
};
use crate::values::{Type, Value};

/// The schema of the `provider "talosboot"` block.
pub fn schema() -> Schema {
    Schema::new(
        0,
        Block::new(
            "Connects to the Kubernetes API of a Talos cluster. Set **one** of `kubeconfig_raw`, `config_path` (or the `KUBE_CONFIG_PATH` environment variable), or `host` with credentials. Values may be ephemeral (e.g. `ephemeral.talos_cluster_kubeconfig.this.kubeconfig_raw`, which no state or plan file holds) and may come from resources that do not exist yet: the provider only connects when an operation needs the cluster, so `plan` works before the cluster is reachable.",
            vec![
                Attribute::optional(RAW, Type::String, "A whole kubeconfig document, e.g. `ephemeral.talos_cluster_kubeconfig.this.kubeconfig_raw` (ephemeral: in no state or plan file) or `talos_cluster_kubeconfig.this.kubeconfig_raw`.").sensitive(),
                Attribute::optional(PATH, Type::String, "Path to a kubeconfig file. Defaults to the first path in `KUBE_CONFIG_PATH` when no other connection setting is given."),
                Attribute::optional(CONTEXT, Type::String, "Context to use from the kubeconfig (`kubeconfig_raw` or `config_path`). Defaults to its current context."),
                Attribute::optional(HOST, Type::String, "API server URL, e.g. `https://10.0.0.10:6443`."),
                Attribute::optional(CA, Type::String, "PEM-encoded CA certificate of the API server (with `host`)."),
                Attribute::optional(CERT, Type::String, "PEM-encoded client certificate (with `host` and `client_key`)."),
                Attribute::optional(KEY, Type::String, "PEM-encoded client private key (with `host` and `client_certificate`).").sensitive(),
                Attribute::optional(TOKEN, Type::String, "Bearer token (with `host`).").sensitive(),
                Attribute::optional(RETRY, Type::String, "How long each call to the Kubernetes API keeps retrying while the API does not answer (connection refused or reset, timeouts, 429, 5xx) before it reports the error: seconds (`30`) or a Go duration (`5m`). Default `30s`. A root that creates the cluster in the same run (e.g. `talos_cluster_kubeconfig` feeding this block) can raise it so reads wait for the API to come up; lower it to fail fast. The first retry of a call is logged at `WARN` (`TF_LOG=warn`) with the cause and the budget. It is the default of every `cluster` attribute's connection too; a `cluster` may set its own `api_retry_timeout`."),
            ],
        ),
    )
}

/// The `api_retry_timeout` of the block, when known and valid (the default budget of every
/// connection: see [`connection::retry_budget`]).
pub fn retry_budget(config: &Value) -> Option<std::time::Duration> {
    connection::retry_budget(config)
}

/// Validates the provider block and resolves it ([`connection::resolve`], the one resolver the
/// resources' `cluster` attribute shares). Unknown values are accepted; problems with known
/// values are diagnostics on the attribute that has them.
pub fn from_value(config: &Value) -> (ProviderConfig, Diagnostics) {
    let env_path = std::env::var("KUBE_CONFIG_PATH").ok();
    resolve(config, env_path.as_deref())
}

fn resolve(config: &Value, env_path: Option<&str>) -> (ProviderConfig, Diagnostics) {
    connection::resolve(config, Scope::Provider { env_path })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::cluster::ConfigSource;
    use crate::values::AttributePath;

    fn block(pairs: &[(&str, Value)]) -> Value {
        let mut attrs: BTreeMap<String, Value> = [RAW, PATH, CONTEXT, HOST, CA, CERT, KEY, TOKEN]
            .iter()
            .map(|n| ((*n).to_owned(), Value::Null))
            .collect();
        for (k, v) in pairs {
            attrs.insert((*k).to_owned(), v.clone());
        }
        Value::Object(attrs)
    }

    #[test]
    fn unknown_kubeconfig_is_accepted_at_plan() {
        let (config, diags) = resolve(&block(&[(RAW, Value::unknown())]), None);
        assert!(diags.is_empty());
        assert_eq!(config, ProviderConfig::Unknown);
    }

    #[test]
    fn the_retry_timeout_takes_seconds_or_a_duration_and_names_a_bad_one() {
        let at = |t: &str| block(&[(HOST, "https://h:6443".into()), (RETRY, t.into())]);
        assert_eq!(
            retry_budget(&at("5m")),
            Some(std::time::Duration::from_secs(300))
        );
        assert_eq!(
            retry_budget(&at("45")),
            Some(std::time::Duration::from_secs(45))
        );
        assert_eq!(retry_budget(&block(&[])), None);
        let (_, diags) = resolve(&at("soon"), None);
        let d = diags.iter().next().expect("a diagnostic");
        assert_eq!(d.summary, "Invalid retry timeout");
        assert_eq!(
            d.attribute.as_ref().map(|p| p.describe()).as_deref(),
            Some(RETRY)
        );
    }

    #[test]
    fn two_connection_methods_conflict_with_the_attribute_path() {
        let (_, diags) = resolve(
            &block(&[(PATH, "/k".into()), (HOST, "https://h:6443".into())]),
            None,
        );
        let d = diags.iter().next().expect("a diagnostic");
        assert_eq!(d.attribute, Some(AttributePath::attr(HOST)));
        assert!(
            d.detail.contains("`config_path` and `host`"),
            "{}",
            d.detail
        );
    }

    #[test]
    fn client_key_without_certificate_is_reported_on_the_missing_one() {
        let key = "-----BEGIN PRIVATE KEY-----\nabc\n-----END PRIVATE KEY-----";
        let (_, diags) = resolve(
            &block(&[(HOST, "https://h:6443".into()), (KEY, key.into())]),
            None,
        );
        assert!(
            diags
                .iter()
                .any(|d| d.attribute == Some(AttributePath::attr(CERT)))
        );
    }

    #[test]
    fn base64_instead_of_pem_is_explained_and_the_value_not_echoed() {
        let (_, diags) = resolve(
            &block(&[(HOST, "https://h:6443".into()), (CA, "TUlJQ0FURQ==".into())]),
            None,
        );
        let d = diags.iter().next().expect("a diagnostic");
        assert!(d.detail.contains("base64decode"));
        assert!(!d.detail.contains("TUlJQ0FURQ"));
    }

    #[test]
    fn a_broken_kubeconfig_is_reported_without_its_content() {
        let yaml = "apiVersion: v1\nusers:\n- name: a\n  user:\n    token: TOPSECRET-abcdef123456\n  : [\n";
        let (_, diags) = resolve(&block(&[(RAW, yaml.into())]), None);
        let d = diags.iter().next().expect("a diagnostic");
        assert_eq!(d.attribute, Some(AttributePath::attr(RAW)));
        assert!(d.detail.contains("line"), "{}", d.detail);
        assert!(!d.detail.contains("TOPSECRET"), "{}", d.detail);
    }

    #[test]
    fn unknown_connection_settings_do_not_conflict() {
        let (config, diags) = resolve(
            &block(&[(RAW, Value::unknown()), (PATH, "/kc".into())]),
            None,
        );
        assert!(diags.is_empty(), "{diags:?}");
        assert_eq!(config, ProviderConfig::Unknown);
    }

    #[test]
    fn kube_config_path_is_the_fallback() {
        let (config, _) = resolve(&block(&[]), Some(":/a/kc:/b/kc"));
        assert_eq!(
            config,
            ProviderConfig::Known(ConfigSource::KubeconfigFile {
                path: "/a/kc".into(),
                context: None
            })
        );
        let (config, _) = resolve(&block(&[]), None);
        assert_eq!(config, ProviderConfig::Missing);
    }

    #[test]
    fn a_host_with_user_info_is_refused_and_never_echoed() {
        for host in [
            "https://admin:MARKER-pw@10.0.0.1:6443",
            "ftp://admin:MARKER-pw@x",
            "admin:MARKER-pw@10.0.0.1:6443",
        ] {
            let (config, diags) = resolve(&block(&[(HOST, host.into())]), None);
            assert_eq!(config, ProviderConfig::Missing);
            let d = diags.iter().next().expect("a diagnostic");
            assert_eq!(d.attribute, Some(AttributePath::attr(HOST)));
            assert!(
                !format!("{} {}", d.summary, d.detail).contains("MARKER"),
                "{d:?}"
            );
        }
    }
}
