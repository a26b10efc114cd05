//! Where a resource's cluster is: the provider's connection, or its own `cluster` attribute (a
//! fleet in one root: one provider, a `for_each` over clusters). One resolver turns either the
//! provider block or a `cluster` attribute into the cluster layer's [`ProviderConfig`]
//! ([`resolve`]), with the same names, the same checks and the same messages.
//!
//! The `cluster` attribute's every leaf is write-only: no state or plan file holds a credential.
//! What state keeps instead is [`IDENTITY`], the API server URL and a keyed hash of its CA
//! ([`planned_identity`]), so that a resource pointed at another cluster plans a replacement and
//! says why. Refresh (ReadResource) carries no configuration, so it cannot reach a cluster only
//! the configuration names: such a state is kept as it is by refresh, and plan, which has the
//! configuration, reads the cluster instead (`crate::resources::release::resource`).
//!
//! The data source and the list resources take a `cluster` block too ([`read_cluster_block`]),
//! resolved in [`Scope::NonSecret`]: a kubeconfig file on disk (`config_path`, `config_context`)
//! and `api_retry_timeout`, never a credential. What the CLIs do with the configuration of a read,
//! observed on OpenTofu 1.12.6 and Terraform 1.16.4 (`docs/guides/fleet.md`, "Reading through
//! `cluster`"):
//! - both accept write-only attributes in a data source's and a list resource's schema, and pass
//!   an ephemeral value to them (one in a data source's ordinary argument is refused by both:
//!   "Ephemeral value used in non-ephemeral context", "Invalid use of ephemeral value");
//! - neither nulls a write-only value in what a data source's read returns: state keeps whatever
//!   the provider returns, so the data source returns its write-only values null;
//! - a data source whose read waits for apply (an argument unknown at plan): both write its
//!   write-only arguments into the plan file (`show -json` prints them); OpenTofu its ephemeral
//!   ones too, where Terraform fails the plan ("cannot serialize value marked as ... Ephemeral");
//! - `terraform query -json` prints a list block's whole `config` as `input_config`, write-only,
//!   sensitive and ephemeral values included (OpenTofu 1.12 has no `query`, opentofu#3787).
//!
//! So a credential in a read's `cluster` would reach a plan file or the query's output whatever
//! the schema says: the scope refuses one at validation, on its attribute path, before anything
//! is read or written.
//!
//! Each connection carries its own retry budget: a `cluster`'s `api_retry_timeout`, else the
//! provider block's ([`retry_budget`]).

use std::sync::Arc;

use crate::cluster::{
    ClientCache, ClusterHandle, ConfigSource, ProviderConfig, RetryBudget, kubeconfig_error,
    redact_user_info,
};
use crate::framework::{Attribute, Block, Ctx, Diagnostics, NestedBlock, Nesting};
use crate::resources::duration::parse_timeout;
use crate::values::{AttributePath, Type, Value};

mod identity;

pub use identity::{
    IdentityState, applied_identity, applied_through_own_cluster, destroy_handle, identity_value,
    moved_to_another_cluster, planned_identity, stored_api_server, unreachable_on_destroy,
};

pub const RAW: &str = "kubeconfig_raw";
pub const PATH: &str = "config_path";
pub const CONTEXT: &str = "config_context";
pub const HOST: &str = "host";
pub const CA: &str = "cluster_ca_certificate";
pub const CERT: &str = "client_certificate";
pub const KEY: &str = "client_key";
pub const TOKEN: &str = "token";
/// The retry budget of a connection: the provider block's, or a `cluster`'s own.
pub const RETRY: &str = "api_retry_timeout";

/// The per-resource connection attribute.
pub const CLUSTER: &str = "cluster";
/// The computed identity of the cluster a resource was applied to.
pub const IDENTITY: &str = "cluster_identity";

/// Which settings [`resolve`] reads.
#[derive(Debug, Clone, Copy)]
pub enum Scope<'a> {
    /// The provider block: `KUBE_CONFIG_PATH` (`env_path`) is the fallback.
    Provider { env_path: Option<&'a str> },
    /// A resource's `cluster` attribute: paths start at `cluster`; no environment fallback (an
    /// empty `cluster = {}` is a mistake, not "use the environment").
    Block,
    /// The `cluster` of a data source or a list resource: like [`Scope::Block`], but only the
    /// settings that are not secret (`config_path`, `config_context`, `api_retry_timeout`); any
    /// other one set (even unknown) is an error on its path (see the module docs for why).
    NonSecret,
}

impl Scope<'_> {
    fn path(self, name: &str) -> AttributePath {
        match self {
            Scope::Provider { .. } => AttributePath::attr(name),
            Scope::Block | Scope::NonSecret => AttributePath::attr(CLUSTER).then_attr(name),
        }
    }
    fn noun(self) -> &'static str {
        match self {
            Scope::Provider { .. } => "this provider block",
            Scope::Block | Scope::NonSecret => "this `cluster`",
        }
    }
}

/// The settings a read's `cluster` accepts ([`Scope::NonSecret`]).
const NON_SECRET: [&str; 3] = [PATH, CONTEXT, RETRY];

/// The leaves of every `cluster` attribute, all write-only: `refused` describes the ones a read's
/// `cluster` refuses (`None` on a resource, where each is accepted).
fn cluster_leaves(refused: Option<&str>) -> Vec<Attribute> {
    let leaf = |name: &str, doc: &str| {
        let doc = match refused {
            Some(why) if !NON_SECRET.contains(&name) => format!("{doc} {why}"),
            _ => doc.to_owned(),
        };
        Attribute::optional(name, Type::String, &doc).write_only()
    };
    vec![
        leaf(RAW, "A whole kubeconfig document, e.g. `ephemeral.talos_cluster_kubeconfig.this.kubeconfig_raw`.").sensitive(),
        leaf(PATH, "Path to a kubeconfig file."),
        leaf(CONTEXT, "Context to use from the kubeconfig (`kubeconfig_raw` or `config_path`). Defaults to its current context."),
        leaf(HOST, "API server URL, e.g. `https://10.0.0.10:6443`."),
        leaf(CA, "PEM-encoded CA certificate of the API server (with `host`)."),
        leaf(CERT, "PEM-encoded client certificate (with `host` and `client_key`)."),
        leaf(KEY, "PEM-encoded client private key (with `host` and `client_certificate`).").sensitive(),
        leaf(TOKEN, "Bearer token (with `host`).").sensitive(),
        leaf(RETRY, match refused {
            None => "How long each call to this cluster's API keeps retrying while it does not answer, as the provider block's `api_retry_timeout` (seconds, or a Go duration such as `5m`). Defaults to the provider block's. Not a secret: write-only so that changing it plans no update.",
            Some(_) => "How long each call to this cluster's API keeps retrying while it does not answer, as the provider block's `api_retry_timeout` (seconds, or a Go duration such as `5m`). Defaults to the provider block's.",
        }),
    ]
}

/// The `cluster` attribute of every resource.
pub fn cluster_attribute() -> Attribute {
    Attribute::optional(
        CLUSTER,
        Type::Dynamic,
        "The cluster this resource works on, instead of the provider's connection: the provider block's connection settings, with the same names and rules (set **one** of `kubeconfig_raw`, `config_path`, or `host` with credentials). Every one is write-only (OpenTofu/Terraform 1.11+), so no state or plan file holds them, and they may be ephemeral, e.g. `ephemeral.talos_cluster_kubeconfig.this[each.key].kubeconfig_raw`: one provider then serves a `for_each` over a fleet, on both CLIs. State keeps only `cluster_identity`. Refresh receives no configuration, so it keeps the state of a resource with `cluster` as it is; `plan` reads the cluster instead and shows drift there (`-refresh-only` shows none for such resources). A destroy receives no configuration either: it uses the provider's connection when that reaches the same cluster, else it fails unless `deletion_policy = \"keep\"`. Unset: the provider's connection. `api_retry_timeout` sets this connection's own retry budget (default: the provider block's).",
    )
    .nested(Nesting::Single, cluster_leaves(None))
}

/// The `cluster` block of the data source and the list resources ([`Scope::NonSecret`]): a
/// nested block, `cluster { ... }`, where the resources have an attribute, `cluster = { ... }`.
/// Terraform 1.0.3, the protocol floor, crashes planning a data source read that waits for apply
/// when its schema has a nested attribute (`objchange.proposedNewNestedType` on a null object,
/// hashicorp/terraform#29388, fixed by #29701 in a later 1.0.x); a nested block it handles, so the
/// data source keeps working there.
pub fn read_cluster_block() -> NestedBlock {
    NestedBlock::new(
        CLUSTER,
        Nesting::Single,
        Block::new(
            "The cluster to read, instead of the provider's connection: a kubeconfig file on disk, `config_path` (with `config_context` to pick one of its contexts), and optionally `api_retry_timeout`. A block (`cluster { ... }`), where the resources' `cluster` is an attribute: Terraform 1.0 crashes on a nested attribute here. A read's configuration is not protected as a resource's write-only arguments are (both CLIs write a data source's write-only arguments into the plan file when its read waits for apply; `terraform query -json` prints a list's `config`), so no credential is accepted here: `kubeconfig_raw`, `host` and the credentials are refused at validation, naming the attribute. To reach a cluster whose kubeconfig exists only in memory (an ephemeral `talos_cluster_kubeconfig`), use a resource's write-only `cluster`, whose `status` and `revision` tell what a read would. Every setting is write-only, so the state keeps none of them. Absent: the provider's connection.",
            cluster_leaves(Some(
                "Refused here: a read's `cluster` takes only `config_path`, `config_context` and `api_retry_timeout`.",
            )),
        ),
    )
}

/// The computed `cluster_identity` of the resources with a state.
pub fn identity_attribute() -> Attribute {
    Attribute::computed(
        IDENTITY,
        Type::object([("api_server", Type::String), ("ca_sha256", Type::String)]),
        "The cluster the resource was applied to through its `cluster` attribute (null when it uses the provider's connection): `api_server`, the API server URL, and `ca_sha256`, a salted hash of the CA it trusts (no credential). A `cluster` that reaches another cluster plans a replacement, and the plan says which.",
    )
}

pub fn resolve(config: &Value, scope: Scope<'_>) -> (ProviderConfig, Diagnostics) {
    let env_path = match scope {
        Scope::Provider { env_path } => env_path,
        Scope::Block | Scope::NonSecret => None,
    };
    let at = |name: &str| scope.path(name);
    let this = scope.noun();
    let mut diags = Diagnostics::new();
    let get = |name: &str| config.attr(name).cloned().unwrap_or(Value::Null);
    let (raw, path, context, host) = (get(RAW), get(PATH), get(CONTEXT), get(HOST));
    let (ca, cert, key, token) = (get(CA), get(CERT), get(KEY), get(TOKEN));
    let set = |v: &Value| !v.is_null();

    if let Scope::NonSecret = scope {
        refuse_secret_settings(config, &mut diags);
        if diags.has_errors() {
            return (ProviderConfig::Missing, diags);
        }
    }

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
            at(chosen[1]),
            "Conflicting connection settings",
            format!(
                "Set only one of `{RAW}`, `{PATH}` or `{HOST}`; {this} sets {}.",
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
                    at(name),
                    "Credential without host",
                    format!("`{name}` is only used together with `{HOST}`. Set `{HOST}`, or put the credential in the kubeconfig."),
                );
            }
        }
    }
    if set(&host) && set(&context) {
        diags.error_at(
            at(CONTEXT),
            "Context without kubeconfig",
            format!(
                "`{CONTEXT}` selects a context of a kubeconfig; it has no meaning with `{HOST}`."
            ),
        );
    }
    if set(&cert) != set(&key) && !cert.is_unknown() && !key.is_unknown() {
        let missing = if set(&cert) { KEY } else { CERT };
        diags.error_at(
            at(missing),
            "Incomplete client certificate",
            format!("`{CERT}` and `{KEY}` must be set together."),
        );
    }
    if let Some(h) = host.as_str() {
        if !(h.starts_with("https://") || h.starts_with("http://")) || h.len() < 9 {
            diags.error_at(
                at(HOST),
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
                at(HOST),
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
                    at(name),
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
        diags.error_at(at(RETRY), "Invalid retry timeout", e);
    }
    if let Some(yaml) = raw.as_str() {
        if let Err(e) = kube::config::Kubeconfig::from_yaml(yaml) {
            diags.error_at(
                at(RAW),
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

/// The errors of a read's `cluster` ([`Scope::NonSecret`]) that sets anything but a kubeconfig
/// file: set counts even when unknown (validation sees variables unknown), since a value that
/// turns out known would be written where the module docs say.
fn refuse_secret_settings(config: &Value, diags: &mut Diagnostics) {
    let Value::Object(settings) = config else {
        return;
    };
    for (name, value) in settings {
        if value.is_null() || NON_SECRET.contains(&name.as_str()) {
            continue;
        }
        diags.error_at(
            Scope::NonSecret.path(name),
            "Connection setting not accepted by a read",
            format!(
                "`{CLUSTER}.{name}` is refused here: the `{CLUSTER}` of a data source or a list takes only a kubeconfig file on disk (`{PATH}`, with `{CONTEXT}`) and `{RETRY}`. The CLIs do not protect a read's configuration as they protect a resource's write-only arguments: both write a data source's write-only arguments into the plan file when its read waits for apply, and `terraform query -json` prints a list block's `config`. Point `{CLUSTER}.{PATH}` at a kubeconfig file of this cluster, or work with the release through a resource (`talosboot_helm_release`, `talosboot_cilium`), whose write-only `{CLUSTER}` takes `{name}`."
            ),
        );
    }
}

/// The `api_retry_timeout` of a provider block or a `cluster`, when set, known and valid (an
/// invalid one is an error of [`resolve`]).
pub fn retry_budget(config: &Value) -> Option<std::time::Duration> {
    config
        .attr(RETRY)
        .and_then(Value::as_str)
        .and_then(|t| parse_timeout(t).ok())
}

/// `~/.kube/config` as users write it in HCL; Terraform does not expand `~` for providers.
fn expand_home(path: &str) -> String {
    match (path.strip_prefix("~/"), std::env::var("HOME")) {
        (Some(rest), Ok(home)) => format!("{}/{rest}", home.trim_end_matches('/')),
        _ => path.to_owned(),
    }
}

/// Where one operation of a resource goes.
#[derive(Clone)]
pub enum Target {
    /// No `cluster`: the provider's connection.
    Provider(ClusterHandle),
    /// The resource's own `cluster`, every setting known.
    Own {
        handle: ClusterHandle,
        source: ConfigSource,
    },
    /// The resource's own `cluster`, some setting not known yet (a cluster created in this run).
    Unknown,
}

impl Target {
    /// The handle operations connect through (one that answers "not known yet" for
    /// [`Target::Unknown`]).
    pub fn handle(&self) -> ClusterHandle {
        match self {
            Target::Provider(handle) | Target::Own { handle, .. } => handle.clone(),
            Target::Unknown => ClusterHandle::new(ProviderConfig::Unknown),
        }
    }

    /// Whether the resource names its own cluster.
    pub fn is_own(&self) -> bool {
        !matches!(self, Target::Provider(_))
    }
}

/// The process's cache of connections (the provider data's, or a fresh one before
/// ConfigureProvider, when nothing connects).
fn cache(ctx: &Ctx) -> Arc<ClientCache> {
    ctx.provider_data::<crate::resources::ProviderData>()
        .map(|d| d.clients.clone())
        .unwrap_or_default()
}

/// Where the operation with this configuration (or planned state with its write-only values
/// put back) goes: `cluster` when set, else the provider's connection.
///
/// # Errors
/// The `cluster` settings do not resolve (the diagnostics of [`resolve`], on `cluster.<name>`).
pub fn target(ctx: &Ctx, config: &Value) -> Result<Target, Diagnostics> {
    target_in(ctx, config, Scope::Block)
}

/// Where the read of a data source or a list resource with this configuration goes: its
/// `cluster` in [`Scope::NonSecret`] when set, else the provider's connection.
///
/// # Errors
/// The `cluster` sets a setting a read refuses, or does not resolve (on `cluster.<name>`).
pub fn read_target(ctx: &Ctx, config: &Value) -> Result<Target, Diagnostics> {
    target_in(ctx, config, Scope::NonSecret)
}

/// The validation of a read's `cluster` (none when unset or unknown as a whole): the settings a
/// read refuses, and every check the resources' `cluster` has, on their paths.
pub fn validate_read_cluster(config: &Value, diagnostics: &mut Diagnostics) {
    match config.attr(CLUSTER) {
        None | Some(Value::Null) => {}
        Some(v) if v.is_unknown() => {}
        Some(block) => diagnostics.extend(resolve(block, Scope::NonSecret).1),
    }
}

fn target_in(ctx: &Ctx, config: &Value, scope: Scope<'_>) -> Result<Target, Diagnostics> {
    let provider = crate::resources::cluster(ctx);
    let block = match config.attr(CLUSTER) {
        None | Some(Value::Null) => return Ok(Target::Provider(provider)),
        Some(v) if v.is_unknown() => return Ok(Target::Unknown),
        Some(v) => v,
    };
    let (resolved, diagnostics) = resolve(block, scope);
    if diagnostics.has_errors() {
        return Err(diagnostics);
    }
    // The `cluster`'s own budget, else the provider block's (the default of every connection).
    let budget = retry_budget(block)
        .map(RetryBudget::new)
        .unwrap_or_else(|| provider.retry_budget());
    match resolved {
        ProviderConfig::Known(source) => Ok(Target::Own {
            handle: cache(ctx).handle(&source, budget),
            source,
        }),
        ProviderConfig::Unknown => Ok(Target::Unknown),
        ProviderConfig::Missing => {
            let set = match scope {
                Scope::NonSecret => format!("`{PATH}`"),
                _ => format!("one of `{RAW}`, `{PATH}` or `{HOST}`"),
            };
            let mut d = Diagnostics::new();
            d.error_at(
                AttributePath::attr(CLUSTER),
                "Empty cluster connection",
                format!("Set {set} in `{CLUSTER}`, or remove `{CLUSTER}` to use the provider's connection."),
            );
            Err(d)
        }
    }
}

/// The `cluster` attribute as a model holds it, so that state keeps its shape (every leaf null:
/// the dispatcher nulls write-only values before state is stored). Never printed.
#[derive(Clone, Default, PartialEq, serde::Deserialize, serde::Serialize)]
pub struct ClusterSettings {
    pub kubeconfig_raw: Option<String>,
    pub config_path: Option<String>,
    pub config_context: Option<String>,
    pub host: Option<String>,
    pub cluster_ca_certificate: Option<String>,
    pub client_certificate: Option<String>,
    pub client_key: Option<String>,
    pub token: Option<String>,
    pub api_retry_timeout: Option<String>,
}

impl std::fmt::Debug for ClusterSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClusterSettings(..)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cluster_block_is_checked_on_its_own_paths_without_the_environment() {
        let block = Value::object([
            (PATH, Value::from("/kc")),
            (HOST, Value::from("https://h:6443")),
        ]);
        let (_, diags) = resolve(&block, Scope::Block);
        let d = diags.iter().next().expect("a diagnostic");
        assert_eq!(
            d.attribute,
            Some(AttributePath::attr(CLUSTER).then_attr(HOST))
        );
        assert!(d.detail.contains("this `cluster` sets"), "{}", d.detail);
        let (config, _) = resolve(&Value::object([(PATH, Value::Null)]), Scope::Block);
        assert_eq!(
            config,
            ProviderConfig::Missing,
            "no KUBE_CONFIG_PATH fallback"
        );
    }

    #[test]
    fn a_read_refuses_every_credential_on_its_path_even_unknown_and_never_echoes_it() {
        let block = Value::object([
            (RAW, Value::from("apiVersion: v1\n# MARKER-raw")),
            (TOKEN, Value::unknown()),
            (PATH, Value::from("/kc")),
        ]);
        let (config, diags) = resolve(&block, Scope::NonSecret);
        assert_eq!(config, ProviderConfig::Missing);
        let paths: Vec<_> = diags.iter().map(|d| d.attribute.clone()).collect();
        assert_eq!(
            paths,
            [RAW, TOKEN].map(|n| Some(AttributePath::attr(CLUSTER).then_attr(n))),
            "one error per refused setting, none for `config_path`"
        );
        for d in diags.iter() {
            assert!(d.detail.contains("`cluster.config_path`"), "{}", d.detail);
            assert!(d.detail.contains("write-only `cluster`"), "{}", d.detail);
            assert!(!d.detail.contains("MARKER"), "{}", d.detail);
        }
        // The resources' scope takes the same settings.
        let (_, diags) = resolve(
            &Value::object([(RAW, Value::from("apiVersion: v1\n"))]),
            Scope::Block,
        );
        assert!(!diags.has_errors(), "{diags:?}");
    }

    #[test]
    fn a_read_takes_a_kubeconfig_file_with_its_context_and_no_environment_fallback() {
        let block = Value::object([
            (PATH, Value::from("/fleet/b.yaml")),
            (CONTEXT, Value::from("admin@b")),
            (RETRY, Value::from("2m")),
        ]);
        let (config, diags) = resolve(&block, Scope::NonSecret);
        assert!(diags.is_empty(), "{diags:?}");
        assert_eq!(
            config,
            ProviderConfig::Known(ConfigSource::KubeconfigFile {
                path: "/fleet/b.yaml".into(),
                context: Some("admin@b".into())
            })
        );
        let (config, diags) = resolve(
            &Value::object([(CONTEXT, Value::from("x"))]),
            Scope::NonSecret,
        );
        assert!(diags.is_empty());
        assert_eq!(config, ProviderConfig::Missing);
        let (_, diags) = resolve(
            &Value::object([(PATH, Value::from("/kc")), (RETRY, Value::from("soon"))]),
            Scope::NonSecret,
        );
        let d = diags.iter().next().expect("a diagnostic");
        assert_eq!(
            d.attribute,
            Some(AttributePath::attr(CLUSTER).then_attr(RETRY))
        );
    }

    #[test]
    fn a_cluster_retries_for_its_own_budget_and_else_for_the_providers() {
        use crate::cluster::RetryBudget;
        use std::time::Duration;

        let provider = ClusterHandle::with_retry_budget(
            ProviderConfig::Missing,
            RetryBudget::new(Duration::from_secs(7)),
        );
        let ctx = Ctx::new(
            Arc::new(crate::resources::ProviderData::new(provider)),
            Default::default(),
        );
        let config = |retry: Value| {
            Value::object([(
                CLUSTER,
                Value::object([(PATH, Value::from("/kc")), (RETRY, retry)]),
            )])
        };
        let budget = |t: Result<Target, Diagnostics>| match t {
            Ok(Target::Own { handle, .. }) => handle.retry_budget().duration(),
            _ => panic!("the resource's own cluster"),
        };
        assert_eq!(
            budget(target(&ctx, &config(Value::Null))),
            Duration::from_secs(7)
        );
        assert_eq!(
            budget(target(&ctx, &config(Value::from("2m")))),
            Duration::from_secs(120)
        );
        assert_eq!(
            budget(read_target(&ctx, &config(Value::from("5")))),
            Duration::from_secs(5)
        );
    }

    #[test]
    fn an_empty_read_cluster_names_config_path() {
        let ctx = Ctx::new(Arc::new("unconfigured"), Default::default());
        let config = Value::object([(CLUSTER, Value::object([(PATH, Value::Null)]))]);
        let Err(diags) = read_target(&ctx, &config) else {
            panic!("an error");
        };
        let d = diags.iter().next().expect("a diagnostic");
        assert!(
            d.detail.starts_with("Set `config_path` in `cluster`"),
            "{}",
            d.detail
        );
    }
}
