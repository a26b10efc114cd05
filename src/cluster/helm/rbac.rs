//! `rbac = "minimal"` for chart installs: the rules a `helm upgrade --install` or `helm uninstall`
//! needs, learnt from what the chart renders in this cluster instead of from a list kept by hand.
//!
//! Before a minimal install, a *render run* of the engine runs `helm template` with the same
//! chart, values and the cluster's capabilities (`--kube-version`, `--api-versions` from
//! discovery, `--is-upgrade` when the release exists), piped through `sed` so that the pod log
//! only ever carries the `apiVersion:` and `kind:` lines of each document: no value, no Secret.
//! The render run's ServiceAccount is bound to nothing (`helm template` does not call the API).
//!
//! The rendered kinds, together with those of the release's current manifest and hooks (an
//! upgrade deletes what the new revision drops, an uninstall deletes everything and runs the
//! delete hooks), are resolved to resources through discovery, and
//! [`helm_install_rules`] turns them into rules. A
//! kind the cluster does not serve yet (the custom resources of a CRD the chart itself installs)
//! gets its conventional plural, as kubectl and kube-rs guess it.
//!
//! Limits, also in the guides: `lookup` in a template finds nothing under `helm template`, so a
//! chart that looks up kinds it does not render needs them granted some other way (or
//! `cluster-admin`); a document written as a one-line JSON object is not seen by the filter. Both
//! fail the install with the missing permission named, never silently.
//!
//! [`helm_install_rules`] grants read and write on each kind, Helm's release records (Secrets in
//! the release namespace only), and — when the chart renders Roles, ClusterRoles or bindings —
//! `escalate` and `bind` on them. The API server refuses to let anyone create a role granting
//! permissions they do not hold, or bind a role whose permissions they do not hold, unless they
//! have `escalate` / `bind`; a chart that ships RBAC (Cilium does) therefore needs them, and a
//! ServiceAccount with `escalate` and `bind` can in principle grant itself anything. `minimal`
//! narrows what a run can touch by mistake; it is not a sandbox for an untrusted chart.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use futures::future::join_all;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::{ApiResource, GroupVersionKind};
use tokio_util::sync::CancellationToken;

use super::RENDER;
use super::install::{ChartInstall, Program};
use super::release::{HelmRelease, ReleaseStatus, manifest_kinds};
use crate::cluster::Kube;
use crate::cluster::engine::rbac::{RBAC_GROUP, Rule};
use crate::cluster::engine::{self, BootstrapNamespace, EngineError, JobSettings, Rbac, RunSpec};

/// A kind a chart renders, by API group and plural resource (`("apps", "daemonsets")`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Kind {
    pub group: String,
    pub resource: String,
}

impl Kind {
    pub fn new(group: &str, resource: &str) -> Kind {
        Kind {
            group: group.to_owned(),
            resource: resource.to_owned(),
        }
    }
}

/// The verbs Helm uses on the objects of a release: look up (ownership check), create,
/// three-way-merge patch or update, delete what a new revision drops, watch for `--wait`.
pub const HELM_OBJECT_VERBS: &[&str] = &[
    "get", "list", "watch", "create", "update", "patch", "delete",
];

const RBAC_KINDS: &[&str] = &[
    "roles",
    "clusterroles",
    "rolebindings",
    "clusterrolebindings",
];

/// The rules a `helm upgrade --install` (and `helm uninstall`) of a chart rendering `kinds` into
/// `release_namespace` needs: [`HELM_OBJECT_VERBS`] on every kind (cluster-wide: charts put
/// objects in other namespaces and cluster-scoped ones), the release records (Secrets in
/// `release_namespace`: list, get, create, update, patch, delete), and `escalate`/`bind` on
/// ClusterRoles and Roles when the chart renders any RBAC kind (see the module docs).
pub fn helm_install_rules(release_namespace: &str, kinds: &[Kind]) -> Vec<Rule> {
    let mut by_group: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for k in kinds {
        let resources = by_group.entry(k.group.as_str()).or_default();
        if !resources.contains(&k.resource.as_str()) {
            resources.push(k.resource.as_str());
        }
    }
    let mut rules: Vec<Rule> = by_group
        .iter()
        .map(|(group, resources)| Rule::new(&[group], resources, HELM_OBJECT_VERBS))
        .collect();
    let chart_writes_secrets = kinds
        .iter()
        .any(|k| k.group.is_empty() && k.resource == "secrets");
    if !chart_writes_secrets {
        rules.push(
            Rule::new(
                &[""],
                &["secrets"],
                &[
                    "get", "list", "watch", "create", "update", "patch", "delete",
                ],
            )
            .in_namespace(release_namespace),
        );
    }
    let ships_rbac = kinds
        .iter()
        .any(|k| k.group == RBAC_GROUP && RBAC_KINDS.contains(&k.resource.as_str()));
    if ships_rbac {
        rules.push(Rule::new(
            &[RBAC_GROUP],
            &["clusterroles", "roles"],
            &["escalate", "bind"],
        ));
    }
    rules
}

/// What `helm template` is told about the cluster, so that it renders what an install would.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Capabilities {
    /// `v1.33.2`, from `/version`.
    pub kube_version: String,
    /// `apps/v1` and `apps/v1/Deployment`, as Helm's `.Capabilities.APIVersions` lists them.
    pub api_versions: Vec<String>,
}

/// The cluster's kinds, by group, version and kind, and its capabilities.
#[derive(Debug, Clone, Default)]
pub struct ApiMap {
    plurals: BTreeMap<(String, String, String), String>,
    pub capabilities: Capabilities,
}

impl ApiMap {
    /// The resource an object of `api_version`/`kind` is written through.
    pub fn resource(&self, api_version: &str, kind: &str) -> Kind {
        let (group, version) = match api_version.split_once('/') {
            Some((g, v)) => (g, v),
            None => ("", api_version),
        };
        let key = (group.to_owned(), version.to_owned(), kind.to_owned());
        let plural = match self.plurals.get(&key) {
            Some(p) => p.clone(),
            None => ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, kind)).plural,
        };
        Kind::new(group, &plural)
    }

    /// Test and benchmark maps: `(api_version, kind, plural)`.
    pub fn from_entries(entries: &[(&str, &str, &str)]) -> ApiMap {
        let mut map = ApiMap::default();
        for (api_version, kind, plural) in entries {
            let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
            map.plurals.insert(
                (group.to_owned(), version.to_owned(), (*kind).to_owned()),
                (*plural).to_owned(),
            );
        }
        map
    }
}

/// Discovery as Helm does it: the group list must answer, a group version whose resource list
/// does not (an aggregated API whose pods cannot run before the CNI) is left out of the kinds,
/// as `kubectl` and Helm leave it out, instead of failing the run.
pub async fn discover(clients: &Kube) -> Result<ApiMap, EngineError> {
    let c = &clients.client;
    let fail = |e| clients.api_error(RENDER, e);
    let version = clients
        .retry("read the server version", || c.apiserver_version())
        .await
        .map_err(fail)?;
    let core = clients
        .retry("list the core API versions", || c.list_core_api_versions())
        .await
        .map_err(fail)?;
    let groups = clients
        .retry("list the API groups", || c.list_api_groups())
        .await
        .map_err(fail)?;
    let mut group_versions: Vec<(String, String)> = core
        .versions
        .iter()
        .map(|v| (String::new(), v.clone()))
        .collect();
    for g in &groups.groups {
        for v in &g.versions {
            group_versions.push((g.name.clone(), v.version.clone()));
        }
    }
    let lists = join_all(group_versions.iter().map(|(g, v)| async move {
        if g.is_empty() {
            c.list_core_api_resources(v).await
        } else {
            c.list_api_group_resources(&format!("{g}/{v}")).await
        }
    }))
    .await;
    let mut map = ApiMap {
        capabilities: Capabilities {
            kube_version: version.git_version,
            api_versions: Vec::new(),
        },
        ..ApiMap::default()
    };
    for ((group, version), list) in group_versions.iter().zip(lists) {
        let gv = if group.is_empty() {
            version.clone()
        } else {
            format!("{group}/{version}")
        };
        map.capabilities.api_versions.push(gv.clone());
        let Ok(list) = list else {
            tracing::warn!(group_version = %gv, "discovery of a group version failed; its kinds get conventional plurals");
            continue;
        };
        for r in list.resources.iter().filter(|r| !r.name.contains('/')) {
            map.capabilities
                .api_versions
                .push(format!("{gv}/{}", r.kind));
            map.plurals.insert(
                (group.clone(), version.clone(), r.kind.clone()),
                r.name.clone(),
            );
        }
    }
    Ok(map)
}

/// One shell word, single-quoted.
fn sh_quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}

/// Keeps the lines that say what each document is and nothing of what it holds.
const KIND_FILTER: &str = "sed -n -E '/^(---|apiVersion:|kind:)/p'";

/// The render run's argv and input files: `helm template` of `chart` as an install in this
/// cluster would render it, filtered to the kinds.
pub fn render_command(chart: &ChartInstall, capabilities: &Capabilities, upgrade: bool) -> Program {
    let mut args = chart.release_args(&["template"]);
    args.push("--include-crds".into());
    if !capabilities.kube_version.is_empty() {
        args.extend(["--kube-version".into(), capabilities.kube_version.clone()]);
    }
    for v in &capabilities.api_versions {
        args.extend(["--api-versions".into(), v.clone()]);
    }
    if upgrade {
        args.push("--is-upgrade".into());
    }
    let (values_args, files, secret_files) = chart.values_args();
    args.extend(values_args);
    let helm: Vec<String> = args.iter().map(|a| sh_quote(a)).collect();
    let script = format!("set -o pipefail; helm {} | {KIND_FILTER}", helm.join(" "));
    (vec!["sh".into(), "-c".into(), script], files, secret_files)
}

/// With `minimal`, Helm's release records are granted by a Role in the release namespace, which
/// must exist when the run starts: with `create_namespace`, the provider creates it first, bare, as
/// `helm --create-namespace` would (Helm still gets `create` on namespaces: it asks to create
/// the namespace anyway and ignores only "already exists").
pub async fn ensure_release_namespace(
    clients: &Kube,
    chart: &ChartInstall,
) -> Result<(), EngineError> {
    if !chart.create_namespace {
        return Ok(());
    }
    let namespace = Namespace {
        metadata: ObjectMeta {
            name: Some(chart.namespace.clone()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    clients
        .ensure_namespace(&namespace)
        .await
        .map(|_| ())
        .map_err(|e| EngineError::api(RENDER, e))
}

/// Whether `release` is one an install upgrades (Helm's `--is-upgrade`).
fn is_upgrade(release: Option<&HelmRelease>) -> bool {
    release.is_some_and(|r| r.status != ReleaseStatus::Uninstalled)
}

/// The rules a minimal `helm upgrade --install` of `chart` needs: a render run (see the module
/// docs), then [`rules_for`] its kinds and the current release's.
#[allow(clippy::too_many_arguments)]
pub async fn install_rules(
    clients: &Kube,
    bootstrap_ns: &BootstrapNamespace,
    job: &JobSettings,
    chart: &ChartInstall,
    current: Option<&HelmRelease>,
    deadline: Instant,
    cancel: &CancellationToken,
) -> Result<Vec<Rule>, EngineError> {
    let api = discover(clients).await?;
    let (command, files, secret_files) =
        render_command(chart, &api.capabilities, is_upgrade(current));
    let spec = RunSpec {
        purpose: format!(
            "render chart {} {} to learn what it creates (rbac = \"minimal\")",
            chart.chart, chart.version
        ),
        target: chart.target(),
        namespace: bootstrap_ns.clone(),
        job: job.clone(),
        command,
        env: super::install::helm_env(),
        files,
        binary_files: chart.binary_files(),
        secret_files,
        timeout: deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_secs(1)),
        rbac: Rbac::Minimal(Vec::new()),
        capture_output: true,
    };
    let run = engine::run(clients, &spec, cancel).await?;
    let rendered = manifest_kinds(run.output.as_deref().unwrap_or_default());
    if rendered.is_empty() {
        return Err(EngineError::new(
            RENDER,
            format!(
                "`helm template` of chart {} {} rendered no object, so no permission can be derived from it",
                chart.chart, chart.version
            ),
        ));
    }
    let previous = current.map(|r| r.kinds.clone()).unwrap_or_default();
    Ok(rules_for(
        &api,
        &chart.namespace,
        rendered.iter().chain(&previous),
        chart.create_namespace,
        chart.atomic,
    ))
}

/// The rules a minimal `helm uninstall` of `release` needs: its manifest's and hooks' kinds.
pub async fn uninstall_rules(
    clients: &Kube,
    release: &HelmRelease,
) -> Result<Vec<Rule>, EngineError> {
    let api = discover(clients).await?;
    Ok(rules_for(
        &api,
        &release.namespace,
        release.kinds.iter(),
        false,
        false,
    ))
}

/// [`helm_install_rules`] of the resources of `kinds` (`(apiVersion, kind)`), and what Helm does
/// beside the chart's objects: create the namespace (`--create-namespace`; Helm 4 also applies it
/// server-side, a `patch` of that namespace only), and for `--atomic`'s
/// wait, read the pods and ReplicaSets of the chart's workloads.
pub fn rules_for<'a>(
    api: &ApiMap,
    release_namespace: &str,
    kinds: impl Iterator<Item = &'a (String, String)>,
    create_namespace: bool,
    waits: bool,
) -> Vec<Rule> {
    let resources: BTreeSet<Kind> = kinds.map(|(v, k)| api.resource(v, k)).collect();
    let resources: Vec<Kind> = resources.into_iter().collect();
    let mut rules = helm_install_rules(release_namespace, &resources);
    if create_namespace {
        rules.push(Rule::new(&[""], &["namespaces"], &["get", "create"]));
        // Helm 4 applies the namespace server-side (a PATCH) even when it exists: only that one.
        rules.push(Rule::new(&[""], &["namespaces"], &["patch"]).named(&[release_namespace]));
    }
    if waits {
        rules.push(Rule::new(&[""], &["pods"], &["get", "list", "watch"]));
        rules.push(Rule::new(
            &["apps"],
            &["replicasets"],
            &["get", "list", "watch"],
        ));
    }
    rules
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chart_without_rbac_gets_its_kinds_and_its_release_records_only() {
        let rules = helm_install_rules(
            "apps-ns",
            &[
                Kind::new("", "configmaps"),
                Kind::new("apps", "deployments"),
            ],
        );
        assert_eq!(rules.len(), 3, "{rules:?}");
        let secrets = rules
            .iter()
            .find(|r| r.resources == ["secrets"])
            .expect("records");
        assert_eq!(secrets.namespace.as_deref(), Some("apps-ns"));
        assert!(
            !rules
                .iter()
                .any(|r| r.verbs.contains(&"escalate".to_owned()))
        );
        let deployments = rules
            .iter()
            .find(|r| r.api_groups == ["apps"])
            .expect("apps");
        assert_eq!(deployments.verbs, HELM_OBJECT_VERBS);
    }

    #[test]
    fn a_chart_shipping_rbac_needs_escalate_and_bind() {
        // What the Cilium chart renders with the Talos values.
        let kinds: Vec<Kind> = [
            ("", "serviceaccounts"),
            ("", "secrets"),
            ("", "configmaps"),
            ("", "services"),
            (RBAC_GROUP, "clusterroles"),
            (RBAC_GROUP, "clusterrolebindings"),
            ("apps", "daemonsets"),
            ("apps", "deployments"),
        ]
        .iter()
        .map(|(g, r)| Kind::new(g, r))
        .collect();
        let rules = helm_install_rules("kube-system", &kinds);
        let special = rules
            .iter()
            .find(|r| r.verbs == ["escalate", "bind"])
            .expect("escalate/bind");
        assert_eq!(special.resources, ["clusterroles", "roles"]);
        assert!(
            rules.iter().all(|r| r.namespace.is_none()),
            "secrets are a chart kind: granted like the others"
        );
        let core = rules.iter().find(|r| r.api_groups == [""]).expect("core");
        for r in ["secrets", "serviceaccounts", "configmaps", "services"] {
            assert!(core.resources.contains(&r.to_owned()), "{r}");
        }
        assert!(!core.resources.contains(&"namespaces".to_owned()));
    }

    fn chart() -> ChartInstall {
        ChartInstall {
            release: "it's".into(),
            namespace: "apps".into(),
            repository: Some("https://charts.example".into()),
            chart: "app".into(),
            version: "1.2.3".into(),
            values_yaml: vec!["a: 1".into()],
            sensitive_values_yaml: vec!["token: s3cret".into()],
            ..Default::default()
        }
    }

    #[test]
    fn the_render_command_quotes_every_word_and_keeps_values_out_of_the_script() {
        let caps = Capabilities {
            kube_version: "v1.33.2".into(),
            api_versions: vec!["apps/v1".into(), "apps/v1/Deployment".into()],
        };
        let (argv, files, secrets) = render_command(&chart(), &caps, true);
        assert_eq!(argv[..2], ["sh", "-c"]);
        let script = &argv[2];
        assert!(script.starts_with("set -o pipefail; helm 'template' 'it'\\''s' 'app' '--repo' 'https://charts.example'"), "{script}");
        assert!(script.contains("'--kube-version' 'v1.33.2'"), "{script}");
        assert!(
            script.contains("'--api-versions' 'apps/v1/Deployment'"),
            "{script}"
        );
        assert!(script.contains("'--is-upgrade'"));
        assert!(script.contains("'--include-crds'"));
        assert!(
            script.ends_with("| sed -n -E '/^(---|apiVersion:|kind:)/p'"),
            "{script}"
        );
        assert!(script.contains("/talosboot/secrets/sensitive-values-0.yaml"));
        assert!(!script.contains("s3cret") && !script.contains("a: 1"));
        assert_eq!(files.len(), 1);
        assert_eq!(secrets.len(), 1);
        let (fresh, _, _) = render_command(&chart(), &caps, false);
        assert!(!fresh[2].contains("--is-upgrade"));
    }

    #[test]
    fn kinds_resolve_through_discovery_and_unknown_ones_by_convention() {
        let api = ApiMap::from_entries(&[
            ("apps/v1", "Deployment", "deployments"),
            ("v1", "Endpoints", "endpoints"),
        ]);
        assert_eq!(
            api.resource("apps/v1", "Deployment"),
            Kind::new("apps", "deployments")
        );
        assert_eq!(api.resource("v1", "Endpoints"), Kind::new("", "endpoints"));
        assert_eq!(
            api.resource("fluxcd.controlplane.io/v1", "FluxInstance"),
            Kind::new("fluxcd.controlplane.io", "fluxinstances")
        );
        assert_eq!(
            api.resource("networking.k8s.io/v1", "NetworkPolicy"),
            Kind::new("networking.k8s.io", "networkpolicies")
        );
    }

    #[test]
    fn rules_cover_the_new_and_the_old_kinds_and_what_helm_does_beside_them() {
        let api = ApiMap::from_entries(&[("apps/v1", "Deployment", "deployments")]);
        let kinds = [
            ("apps/v1".to_owned(), "Deployment".to_owned()),
            ("v1".to_owned(), "ConfigMap".to_owned()),
            ("batch/v1".to_owned(), "CronJob".to_owned()),
        ];
        let rules = rules_for(&api, "apps", kinds.iter(), true, true);
        let has = |group: &str, resource: &str, verb: &str| {
            rules.iter().any(|r| {
                r.api_groups == [group]
                    && r.resources.iter().any(|x| x == resource)
                    && r.verbs.iter().any(|v| v == verb)
            })
        };
        assert!(has("apps", "deployments", "patch"));
        assert!(
            has("batch", "cronjobs", "delete"),
            "the old revision's kind"
        );
        assert!(has("", "configmaps", "create"));
        assert!(has("", "namespaces", "create"));
        assert!(has("", "pods", "watch") && has("apps", "replicasets", "list"));
        assert!(!has("", "namespaces", "delete"));
        let patch = rules
            .iter()
            .find(|r| r.resources == ["namespaces"] && r.verbs == ["patch"])
            .expect("Helm 4's server-side apply of the namespace");
        assert_eq!(patch.resource_names, ["apps"], "the release namespace only");
        assert!(
            !rules
                .iter()
                .any(|r| r.verbs.iter().any(|v| v == "escalate"))
        );
        let plain = rules_for(&api, "apps", kinds.iter(), false, false);
        assert!(
            !plain
                .iter()
                .any(|r| r.resources.iter().any(|x| x == "namespaces" || x == "pods"))
        );
    }
}
