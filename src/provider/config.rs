//! The provider block: how users point talosboot at a cluster, validated without I/O, and decoded
//! into the cluster layer's plain [`ProviderConfig`].
//!
//! Three ways, matching how Talos outputs get wired: a raw kubeconfig (`talos_cluster_kubeconfig`'s
//! `kubeconfig_raw`), a kubeconfig file (`config_path`, or `KUBE_CONFIG_PATH`), or the endpoint and
//! credentials one by one (`host` + CA + client cert/key or token). Any of them may be unknown at plan
//! time: the cluster is contacted lazily, only by operations that need it.

use crate::cluster::{ConfigSource, ProviderConfig, kubeconfig_error, redact_user_info};
use crate::framework::{Attribute, Block, Diagnostics, Schema};
use crate::resources::duration::parse_timeout;
use crate::values::{AttributePath, Type, Value};

const RAW: &str = "kubeconfig_raw";
const PATH: &str = "config_path";
const CONTEXT: &str = "config_context";
const HOST: &str = "host";
const CA: &str = "cluster_ca_certificate";
const CERT: &str = "client_certificate";
const KEY: &str = "client_key";
const TOKEN: &str = "token";
const RETRY: &str = "api_retry_timeout";

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
                Attribute::optional(RETRY, Type::String, "How long each call to the Kubernetes API keeps retrying while the API does not answer (connection refused or reset, timeouts, 429, 5xx) before it reports the error: seconds (`30`) or a Go duration (`5m`). Default `30s`. A root that creates the cluster in the same run (e.g. `talos_cluster_kubeconfig` feeding this block) can raise it so reads wait for the API to come up; lower it to fail fast. The first retry of a call is logged at `WARN` (`TF_LOG=warn`) with the cause and the budget."),
            ],
        ),
    )
}

/// The `api_retry_timeout` of the block, when known and valid.
pub fn retry_budget(config: &Value) -> Option<std::time::Duration> {
    config
        .attr(RETRY)
        .and_then(Value::as_str)
        .and_then(|t| parse_timeout(t).ok())
}

/// Validates the provider block and resolves it. Unknown values are accepted; problems with
/// known values are diagnostics on the attribute that has them.
pub fn from_value(config: &Value) -> (ProviderConfig, Diagnostics) {
    let env_path = std::env::var("KUBE_CONFIG_PATH").ok();
    resolve(config, env_path.as_deref())
}

fn resolve(config: &Value, env_path: Option<&str>) -> (ProviderConfig, Diagnostics) {
    let mut diags = Diagnostics::new();
    let get = |name: &str| config.attr(name).cloned().unwrap_or(Value::Null);
    let (raw, path, context, host) = (get(RAW), get(PATH), get(CONTEXT), get(HOST));
    let (ca, cert, key, token) = (get(CA), get(CERT), get(KEY), get(TOKEN));
    let set = |v: &Value| !v.is_null();

    // Only known values can conflict: `cond ? x : null` is unknown until apply.
    let known_set = |v: &Value| set(v) && !v.is_unknown();
    let groups = [
        (RAW, known_set(&raw)),
        (PATH, known_set(&path)),
        (HOST, known_set(&host)),
    ];
    let chosen: Vec<&str> = groups.iter().filter(|(_, s)| *s).map(|(n, _)| *n).collect();
    if chosen.len() > 1 {
        diags.error_at(
            AttributePath::attr(chosen[1]),
            "Conflicting connection settings",
            format!(
                "Set only one of `{RAW}`, `{PATH}` or `{HOST}`; this provider block sets {}.",
                chosen
                    .iter()
                    .map(|n| format!("`{n}`"))
                    .collect::<Vec<_>>()
                    .join(" and ")
            ),
        );
    }
    if !set(&host) {
        for (name, v) in [(CA, &ca), (CERT, &cert), (KEY, &key), (TOKEN, &token)] {
            if set(v) {
                diags.error_at(
                    AttributePath::attr(name),
                    "Credential without host",
                    format!("`{name}` is only used together with `{HOST}`. Set `{HOST}`, or put the credential in the kubeconfig."),
                );
            }
        }
    }
    if set(&host) && set(&context) {
        diags.error_at(
            AttributePath::attr(CONTEXT),
            "Context without kubeconfig",
            format!(
                "`{CONTEXT}` selects a context of a kubeconfig; it has no meaning with `{HOST}`."
            ),
        );
    }
    if set(&cert) != set(&key) && !cert.is_unknown() && !key.is_unknown() {
        let missing = if set(&cert) { KEY } else { CERT };
        diags.error_at(
            AttributePath::attr(missing),
            "Incomplete client certificate",
            format!("`{CERT}` and `{KEY}` must be set together."),
        );
    }
    if let Some(h) = host.as_str() {
        if !(h.starts_with("https://") || h.starts_with("http://")) || h.len() < 9 {
            diags.error_at(
                AttributePath::attr(HOST),
                "Invalid API server URL",
                format!(
                    "`{HOST}` must be a URL such as `https://10.0.0.10:6443`, got {}.",
                    // Never a value that may carry credentials (`user:pass@host`).
                    if h.contains('@') {
                        "a value with user info".to_owned()
                    } else {
                        format!("{h:?}")
                    }
                ),
            );
        } else if redact_user_info(h) != h {
            diags.error_at(
                AttributePath::attr(HOST),
                "Credentials in the API server URL",
                format!("`{HOST}` must not carry a user name or password (`https://user:pass@...`): Kubernetes does not use them. Set `{TOKEN}` or `{CERT}` and `{KEY}` instead."),
            );
        }
    }
    for (name, v, marker) in [
        (CA, &ca, "CERTIFICATE"),
        (CERT, &cert, "CERTIFICATE"),
        (KEY, &key, "PRIVATE KEY"),
    ] {
        if let Some(pem) = v.as_str() {
            if !pem.contains("-----BEGIN") || !pem.contains(marker) {
                diags.error_at(
                    AttributePath::attr(name),
                    "Not a PEM block",
                    format!("`{name}` must be PEM text starting with `-----BEGIN ...{marker}-----`. If you have base64, wrap it in `base64decode()`."),
                );
            }
        }
    }
    if let Some(Err(e)) = config
        .attr(RETRY)
        .and_then(Value::as_str)
        .map(parse_timeout)
    {
        diags.error_at(AttributePath::attr(RETRY), "Invalid retry timeout", e);
    }
    if let Some(yaml) = raw.as_str() {
        if let Err(e) = kube::config::Kubeconfig::from_yaml(yaml) {
            diags.error_at(
                AttributePath::attr(RAW),
                "Invalid kubeconfig",
                format!("{}.", kubeconfig_error(&format!("`{RAW}`"), &e)),
            );
        }
    }
    if diags.has_errors() {
        return (ProviderConfig::Missing, diags);
    }

    let any_unknown = [&raw, &path, &context, &host, &ca, &cert, &key, &token]
        .iter()
        .any(|v| !v.is_wholly_known());
    if any_unknown {
        return (ProviderConfig::Unknown, diags);
    }
    let text = |v: &Value| v.as_str().map(str::to_owned);
    let path = text(&path).map(|p| expand_home(&p));
    let source = if let Some(yaml) = text(&raw) {
        ConfigSource::KubeconfigRaw {
            yaml,
            context: text(&context),
        }
    } else if let Some(path) = path {
        ConfigSource::KubeconfigFile {
            path,
            context: text(&context),
        }
    } else if let Some(host) = text(&host) {
        ConfigSource::Direct {
            host,
            ca_pem: text(&ca),
            client_cert_pem: text(&cert),
            client_key_pem: text(&key),
            token: text(&token),
        }
    } else if let Some(first) = env_path.and_then(|p| p.split(':').find(|s| !s.is_empty())) {
        ConfigSource::KubeconfigFile {
            path: expand_home(first),
            context: text(&context),
        }
    } else {
        return (ProviderConfig::Missing, diags);
    };
    (ProviderConfig::Known(source), diags)
}

/// `~/.kube/config` as users write it in HCL; Terraform does not expand `~` for providers.
fn expand_home(path: &str) -> String {
    match (path.strip_prefix("~/"), std::env::var("HOME")) {
        (Some(rest), Ok(home)) => format!("{}/{rest}", home.trim_end_matches('/')),
        _ => path.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

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
