//! The inputs of one run, resolved from the model without I/O: defaults applied, runtime variables
//! substituted (as the module's `flux envsubst --strict`, see [`parse_substituted`]), the `sync`
//! override merged into the FluxInstance, chart installs and the Job settings for the engine.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Value as Json, json};

use super::model::{
    AdoptionCheck, Config, DEFAULT_BOOTSTRAP_NAMESPACE, DEFAULT_OPERATOR_REPOSITORY,
    DEFAULT_TIMEOUT, Sync, oci_reference, parse_instance_with, parse_secrets, parse_timeout,
};
use crate::cluster::engine::objects::mark_privileged;
use crate::cluster::engine::{BootstrapNamespace, JobSettings};
use crate::cluster::flux::OPERATOR_RELEASE;
use crate::cluster::flux::managed::runtime_info_configmap;
use crate::cluster::flux::manifest::{
    Manifest, parse_documents, parse_documents_substituted, parse_substituted,
};
use crate::cluster::helm::install::ChartInstall;
use crate::cluster::helm::major::ApplyMethodChoice;
use crate::resources::job::{self, Flavor, JobDefaults, JobInput};
use crate::resources::rbac::Rbac;

/// A prerequisite chart and the module's rule for it.
pub struct PrerequisiteChart {
    pub install: ChartInstall,
    pub adoption: Option<(String, String, String, String)>,
}

/// No `Debug` of the values: chart values and managed objects may carry runtime secrets.
pub struct Inputs {
    pub bootstrap: BootstrapNamespace,
    pub common_labels: BTreeMap<String, String>,
    pub common_annotations: BTreeMap<String, String>,
    pub instance: Manifest,
    pub namespace: String,
    pub prerequisites: Vec<Manifest>,
    pub charts: Vec<PrerequisiteChart>,
    pub operator: ChartInstall,
    /// Managed Secrets, then the runtime-info ConfigMap (when there is runtime info).
    pub managed: Vec<Manifest>,
    pub job: JobSettings,
    pub timeout: Duration,
    pub debug: bool,
}

impl std::fmt::Debug for Inputs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inputs")
            .field("namespace", &self.namespace)
            .field("bootstrap", &self.bootstrap.name)
            .finish_non_exhaustive()
    }
}

/// The runtime variables: `runtime_info.data`, then the `sync` and `suspend_applications` exports.
/// `None` when there is no runtime info at all (then nothing is substituted, as in the module).
pub fn runtime_variables(config: &Config) -> Option<BTreeMap<String, String>> {
    let info = config
        .managed_resources
        .as_ref()
        .and_then(|m| m.runtime_info.as_ref());
    if info.is_none() && config.sync.is_none() && config.suspend_applications.is_none() {
        return None;
    }
    let mut vars = info.map(|i| i.data.clone()).unwrap_or_default();
    if let Some(sync) = &config.sync {
        let fields = [
            (
                "FLUX_SYNC_KIND",
                Some(sync.kind.clone().unwrap_or_else(|| "GitRepository".into())),
            ),
            ("FLUX_SYNC_URL", sync.url.clone()),
            ("FLUX_SYNC_REF", sync.r#ref.clone()),
            ("FLUX_SYNC_PATH", sync.path.clone()),
            ("FLUX_SYNC_PULL_SECRET", sync.pull_secret.clone()),
        ];
        for (name, value) in fields {
            vars.insert(name.into(), value.unwrap_or_default());
        }
    }
    if let Some(suspend) = config.suspend_applications {
        vars.insert("FLUX_SUSPEND_APPLICATIONS".into(), suspend.to_string());
    }
    Some(vars)
}

/// Sets the given `sync` fields on the FluxInstance's `spec.sync`.
pub(super) fn apply_sync(instance: &mut Manifest, sync: &Sync) {
    let Some(object) = instance.object.as_object_mut() else {
        return;
    };
    let spec = object.entry("spec").or_insert_with(|| json!({}));
    let Some(spec) = spec.as_object_mut() else {
        return;
    };
    let target = spec.entry("sync").or_insert_with(|| json!({}));
    let Some(target) = target.as_object_mut() else {
        return;
    };
    let fields = [
        ("kind", &sync.kind),
        ("url", &sync.url),
        ("ref", &sync.r#ref),
        ("path", &sync.path),
        ("pullSecret", &sync.pull_secret),
    ];
    for (key, value) in fields {
        if let Some(v) = value {
            target.insert(key.into(), Json::String(v.clone()));
        }
    }
    target
        .entry("kind")
        .or_insert_with(|| Json::String("GitRepository".into()));
}

/// Values YAML with variables substituted (re-serialized as JSON, which is YAML).
fn values(
    text: &str,
    vars: Option<&BTreeMap<String, String>>,
    what: &str,
) -> Result<String, String> {
    let Some(vars) = vars else {
        return Ok(text.to_owned());
    };
    if text.trim().is_empty() {
        return Ok(String::new());
    }
    let docs = parse_substituted(text, vars, what).map_err(|e| e.to_string())?;
    match docs.as_slice() {
        [] => Ok(String::new()),
        [doc] => Ok(doc.to_string()),
        _ => Err(format!("{what} must be one YAML document")),
    }
}

fn chart_install(
    release: &str,
    namespace: &str,
    repository: &str,
    version: Option<&str>,
    values_yaml: String,
    secret_values: bool,
    apply_method: ApplyMethodChoice,
) -> Result<ChartInstall, String> {
    let values = if values_yaml.trim().is_empty() {
        Vec::new()
    } else {
        vec![values_yaml]
    };
    let (values_yaml, sensitive_values_yaml) = if secret_values {
        (Vec::new(), values)
    } else {
        (values, Vec::new())
    };
    Ok(ChartInstall {
        release: release.to_owned(),
        namespace: namespace.to_owned(),
        repository: None,
        chart: oci_reference(repository)?,
        version: version.unwrap_or_default().to_owned(),
        values_yaml,
        sensitive_values_yaml,
        create_namespace: false,
        take_ownership: false,
        description: Some("talosboot_flux_bootstrap".into()),
        atomic: false,
        history_max: None,
        chart_archive: None,
        apply_method,
    })
}

/// The Job settings: the Talos defaults unless `job` is set, else the module's (as written), see
/// [`job::resolve`]; and what the chart installs may do (`rbac`).
pub fn job_settings(
    job: Option<&JobInput>,
    rbac: Option<&Rbac>,
    defaults: &JobDefaults,
) -> JobSettings {
    JobSettings {
        rbac: crate::resources::rbac::policy(rbac),
        ..job::resolve(job, defaults, Flavor::Module, &job::kubeprism())
    }
}

pub fn bootstrap_namespace(config: &Config) -> BootstrapNamespace {
    let name = config
        .bootstrap_namespace
        .as_deref()
        .unwrap_or(DEFAULT_BOOTSTRAP_NAMESPACE);
    let mut ns = BootstrapNamespace::named(name);
    ns.labels = config.common_metadata.labels.clone();
    mark_privileged(&mut ns.labels);
    ns.annotations = config.common_metadata.annotations.clone();
    ns
}

pub fn timeout(config: &Config) -> Duration {
    parse_timeout(config.timeout.as_deref().unwrap_or(DEFAULT_TIMEOUT))
        .unwrap_or(Duration::from_secs(600))
}

fn adoption(check: &AdoptionCheck) -> Option<(String, String, String, String)> {
    Some((
        check.resource.clone()?,
        check.api_group.clone().unwrap_or_default(),
        check.name.clone()?,
        check.namespace.clone()?,
    ))
}

impl Inputs {
    /// Resolves a configuration that validation accepted; errors name what is wrong.
    pub fn resolve(config: &Config, defaults: &JobDefaults) -> Result<Inputs, String> {
        let vars = runtime_variables(config);
        let apply_method = JobInput::apply_method(config.job.as_ref());
        let gitops = &config.gitops_resources;
        let text = gitops
            .instance_yaml
            .known()
            .ok_or("gitops_resources.instance_yaml is not known")?;
        let mut instance = parse_instance_with(text, vars.as_ref())?;
        if let Some(sync) = &config.sync {
            apply_sync(&mut instance, sync);
        }
        let namespace = instance.namespace().to_owned();
        let mut prerequisites = Vec::new();
        for (i, yaml) in gitops.prerequisites.yamls.iter().enumerate() {
            let what = format!("gitops_resources.prerequisites.yamls[{i}]");
            let text = yaml.as_deref().unwrap_or_default();
            let docs = match &vars {
                Some(vars) => parse_documents_substituted(text, vars, &what),
                None => parse_documents(text, &what),
            };
            prerequisites.extend(docs.map_err(|e| e.to_string())?);
        }
        let secret_values = vars.is_some();
        let mut charts = Vec::new();
        for (i, c) in gitops.prerequisites.charts.iter().enumerate() {
            let what = format!("gitops_resources.prerequisites.charts[{i}].values_yaml");
            let values_yaml = values(
                c.values_yaml.as_deref().unwrap_or_default(),
                vars.as_ref(),
                &what,
            )?;
            let name = c.name.as_deref().unwrap_or_default();
            let ns = c.namespace.as_deref().unwrap_or_default();
            let mut install = chart_install(
                name,
                ns,
                c.repository.as_deref().unwrap_or_default(),
                c.version.as_deref(),
                values_yaml,
                secret_values,
                apply_method,
            )?;
            install.create_namespace = c.create_namespace.unwrap_or(true);
            charts.push(PrerequisiteChart {
                install,
                adoption: c.flux_adoption_check.as_ref().and_then(adoption),
            });
        }
        let op = &gitops.operator_chart;
        let op_values = values(
            op.values_yaml.as_deref().unwrap_or_default(),
            vars.as_ref(),
            "gitops_resources.operator_chart.values_yaml",
        )?;
        let operator = chart_install(
            OPERATOR_RELEASE,
            &namespace,
            op.repository
                .as_deref()
                .unwrap_or(DEFAULT_OPERATOR_REPOSITORY),
            op.version.as_deref(),
            op_values,
            secret_values,
            apply_method,
        )?;
        let managed = managed_objects(config, &namespace, vars.as_ref())?;
        Ok(Inputs {
            bootstrap: bootstrap_namespace(config),
            common_labels: config.common_metadata.labels.clone(),
            common_annotations: config.common_metadata.annotations.clone(),
            instance,
            namespace,
            prerequisites,
            charts,
            operator,
            managed,
            job: job_settings(config.job.as_ref(), config.rbac.as_ref(), defaults),
            timeout: timeout(config),
            debug: config.debug_on_failure.unwrap_or(false),
        })
    }
}

fn managed_objects(
    config: &Config,
    namespace: &str,
    vars: Option<&BTreeMap<String, String>>,
) -> Result<Vec<Manifest>, String> {
    let managed = config.managed_resources.as_ref();
    let mut out = match managed.and_then(|m| m.secrets_yaml.as_deref()) {
        Some(text) => parse_secrets(text, namespace)?,
        None => Vec::new(),
    };
    if let Some(vars) = vars {
        let info = managed.and_then(|m| m.runtime_info.as_ref());
        let empty = BTreeMap::new();
        let labels = info.map_or(&empty, |i| &i.labels);
        let annotations = info.map_or(&empty, |i| &i.annotations);
        out.push(runtime_info_configmap(namespace, vars, labels, annotations));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::engine::objects::{PSA_ENFORCE, PSA_PRIVILEGED};
    use crate::framework::model::Maybe;
    use crate::resources::flux_bootstrap::model::{ManagedResources, RuntimeInfo};
    use crate::resources::job::{Image, pre_cni_needs};

    fn defaults() -> JobDefaults {
        JobDefaults::default()
    }

    const INSTANCE: &str = "apiVersion: fluxcd.controlplane.io/v1\nkind: FluxInstance\nmetadata:\n  name: flux\n  namespace: flux-system\nspec:\n  cluster:\n    domain: ${CLUSTER_DOMAIN}\n  sync:\n    kind: GitRepository\n    url: https://github.com/org/repo\n    path: clusters/staging\n";

    fn config() -> Config {
        let mut c = Config::default();
        c.gitops_resources.instance_yaml = Maybe::Known(INSTANCE.into());
        c
    }

    #[test]
    fn talos_defaults_unless_job_is_set() {
        let c = config();
        let inputs = Inputs::resolve(&c, &defaults()).expect("resolve");
        assert!(inputs.job.host_network);
        assert_eq!(
            inputs
                .job
                .api_endpoint
                .as_ref()
                .map(|e| e.to_string())
                .as_deref(),
            Some("localhost:7445")
        );
        assert_eq!(inputs.bootstrap.name, "flux-operator-bootstrap");
        assert_eq!(inputs.bootstrap.labels[PSA_ENFORCE], PSA_PRIVILEGED);
        assert_eq!(
            inputs.operator.chart,
            "oci://ghcr.io/controlplaneio-fluxcd/charts/flux-operator"
        );
        assert_eq!(inputs.operator.namespace, "flux-system");
        assert!(inputs.managed.is_empty(), "no runtime info: no ConfigMap");
        let explicit = job_settings(Some(&JobInput::default()), None, &defaults());
        assert!(!explicit.host_network && explicit.api_endpoint.is_none());
    }

    #[test]
    fn runtime_info_and_sync_are_substituted_and_exported() {
        let mut c = config();
        c.managed_resources = Some(ManagedResources {
            secrets_yaml: None,
            runtime_info: Some(RuntimeInfo {
                data: [("CLUSTER_DOMAIN".to_string(), "a \"b\" $c".to_string())].into(),
                ..Default::default()
            }),
        });
        c.sync = Some(Sync {
            url: Some("https://backup.example/repo".into()),
            path: Some("kubernetes/clusters/prod".into()),
            ..Default::default()
        });
        c.suspend_applications = Some(true);
        let inputs = Inputs::resolve(&c, &defaults()).expect("resolve");
        assert_eq!(
            inputs.instance.object["spec"]["cluster"]["domain"],
            "a \"b\" $c"
        );
        assert_eq!(
            inputs.instance.object["spec"]["sync"]["url"],
            "https://backup.example/repo"
        );
        assert_eq!(
            inputs.instance.object["spec"]["sync"]["kind"],
            "GitRepository"
        );
        let cm = inputs.managed.last().expect("runtime info ConfigMap");
        assert_eq!(cm.name(), "flux-runtime-info");
        assert_eq!(
            cm.object["data"]["FLUX_SYNC_PATH"],
            "kubernetes/clusters/prod"
        );
        assert_eq!(cm.object["data"]["FLUX_SUSPEND_APPLICATIONS"], "true");
    }

    #[test]
    fn a_partial_job_block_needs_what_only_exists_after_the_cni() {
        assert_eq!(
            pre_cni_needs(&job_settings(None, None, &defaults())),
            None,
            "talosboot's defaults"
        );
        let mirror = JobInput {
            image: Some(Image {
                repository: Some("mirror.example/helm".into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(
            pre_cni_needs(&job_settings(Some(&mirror), None, &defaults())),
            Some("the pod network and the `kubernetes` Service IP"),
            "a job block turns host networking off, as in the module"
        );
        let host_only = JobInput {
            host_network: Some(true),
            ..Default::default()
        };
        assert_eq!(
            pre_cni_needs(&job_settings(Some(&host_only), None, &defaults())),
            Some("the `kubernetes` Service IP")
        );
        let seed = JobInput {
            host_network: Some(true),
            env: Some(
                [
                    ("KUBERNETES_SERVICE_HOST".to_owned(), "localhost".to_owned()),
                    ("KUBERNETES_SERVICE_PORT".to_owned(), "7445".to_owned()),
                ]
                .into(),
            ),
            ..Default::default()
        };
        assert_eq!(
            pre_cni_needs(&job_settings(Some(&seed), None, &defaults())),
            None
        );
    }

    #[test]
    fn a_missing_variable_is_an_error() {
        let mut c = config();
        c.suspend_applications = Some(false);
        let err = Inputs::resolve(&c, &defaults()).expect_err("CLUSTER_DOMAIN is not set");
        assert!(err.contains("CLUSTER_DOMAIN"), "{err}");
    }
}
