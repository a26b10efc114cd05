//! Helm chart installs through the bootstrap engine: `helm upgrade --install` in a pre-CNI Job,
//! with the release prepared natively first, under the target's Lease (a `pending-*` release left
//! by a killed run is unlocked the way Helm users do it by hand: its newest record is marked
//! `failed`, from which Helm upgrades), and uninstalls the same way. Readiness of what the chart runs is judged
//! natively by the caller, not by `helm --wait`, so a failure names the workload and why.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::time::{Duration, Instant};

use base64::Engine;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::major::{self, ApplyMethodChoice, Before, HelmMajor, MajorInputs};
use super::rbac;
use super::release::{HelmRelease, ReleaseStatus, current_release, release_from_revision};
use super::{PREPARE_RELEASE, READ_RELEASE};
use crate::cluster::engine::objects::{INPUTS_DIR, SECRETS_DIR};
use crate::cluster::engine::rbac::RbacPolicy;
use crate::cluster::engine::{
    self, BootstrapNamespace, EngineError, JobSettings, Rbac, RunOutcome, RunSpec, Step,
};
use crate::cluster::{ClusterError, Kube};

/// Helm's cache, configuration and data directories, under the pod's writable `/tmp` (the
/// installer image's root filesystem may be read-only): the environment of every Helm run.
pub fn helm_env() -> BTreeMap<String, String> {
    [
        ("HELM_CACHE_HOME", "/tmp/helm/cache"),
        ("HELM_CONFIG_HOME", "/tmp/helm/config"),
        ("HELM_DATA_HOME", "/tmp/helm/data"),
    ]
    .into_iter()
    .map(|(name, value)| (name.to_owned(), value.to_owned()))
    .collect()
}

/// The installer image: Helm 4.3 (pinned; air-gapped users point `job.image` at a mirror of it).
/// The Job asks the binary for its major, so Helm 3 images (3.17+, for `--take-ownership`) work
/// too, until Helm 3's security fixes end (2027-02-10).
pub const DEFAULT_HELM_IMAGE: &str = "alpine/helm:4.3.2";

/// The Helm 3 image talosboot last defaulted to, still supported: what the docs and tests name
/// for Helm 3.
pub const HELM3_IMAGE: &str = "alpine/helm:3.18.4";

/// A chart to install or upgrade.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ChartInstall {
    pub release: String,
    pub namespace: String,
    /// A repository URL (`https://helm.cilium.io`) or an OCI registry path (`oci://host/charts`);
    /// `None`: `chart` is a full reference (`oci://.../flux-operator`).
    pub repository: Option<String>,
    pub chart: String,
    pub version: String,
    /// Values documents, merged in order (later wins).
    pub values_yaml: Vec<String>,
    /// Merged after `values_yaml`; travel in a Secret, never in the ConfigMap.
    pub sensitive_values_yaml: Vec<String>,
    pub create_namespace: bool,
    /// Adopt objects that exist without Helm's ownership metadata, in place.
    pub take_ownership: bool,
    pub description: Option<String>,
    /// `helm --atomic` (Helm 4: `--rollback-on-failure`): a failed install is uninstalled, a
    /// failed upgrade rolled back (Helm waits).
    pub atomic: bool,
    /// Server-side or client-side apply (`job.apply_method`); `Auto` lets Helm 4 follow the
    /// newest record and refuses Helm 3 on a release applied server-side.
    pub apply_method: ApplyMethodChoice,
    /// Revisions Helm keeps; `None`: 10.
    pub history_max: Option<u32>,
    /// A local chart, packaged (`.tgz`), shipped to the Job; then `chart` is its file name.
    pub chart_archive: Option<Vec<u8>>,
}

/// A Helm run's argv, its input files and its sensitive input files (mounted from a Secret).
pub type Program = (
    Vec<String>,
    BTreeMap<String, String>,
    BTreeMap<String, String>,
);

impl ChartInstall {
    /// `helm_argv` followed by the release, the chart (in the run's inputs for a local chart, under
    /// the registry for OCI, with `--repo` for a classic repository), `--version` when pinned and
    /// `--namespace`: what `helm upgrade --install` and `helm template` share.
    pub(crate) fn release_args(&self, helm_argv: &[&str]) -> Vec<String> {
        let (chart, repo) = match &self.repository {
            _ if self.chart_archive.is_some() => (format!("{INPUTS_DIR}/{}", self.chart), None),
            Some(repo) if repo.starts_with("oci://") => (
                format!("{}/{}", repo.trim_end_matches('/'), self.chart),
                None,
            ),
            Some(repo) => (self.chart.clone(), Some(repo.clone())),
            None => (self.chart.clone(), None),
        };
        let mut args: Vec<String> = helm_argv.iter().map(|s| (*s).to_owned()).collect();
        args.extend([self.release.clone(), chart]);
        if let Some(repo) = repo {
            args.extend(["--repo".into(), repo]);
        }
        if !self.version.is_empty() {
            args.extend(["--version".into(), self.version.clone()]);
        }
        args.extend(["--namespace".into(), self.namespace.clone()]);
        args
    }

    /// The `--values` flags, in merge order (sensitive documents last, from the Secret), and the
    /// input files they name.
    pub(crate) fn values_args(&self) -> Program {
        let mut args = Vec::new();
        let mut files = BTreeMap::new();
        for (i, doc) in self.values_yaml.iter().enumerate() {
            let name = format!("values-{i}.yaml");
            args.extend(["--values".into(), format!("{INPUTS_DIR}/{name}")]);
            files.insert(name, doc.clone());
        }
        let mut secret_files = BTreeMap::new();
        for (i, doc) in self.sensitive_values_yaml.iter().enumerate() {
            let name = format!("sensitive-values-{i}.yaml");
            args.extend(["--values".into(), format!("{SECRETS_DIR}/{name}")]);
            secret_files.insert(name, doc.clone());
        }
        (args, files, secret_files)
    }

    /// The Lease key of every run on this release (render, install, uninstall).
    pub fn target(&self) -> String {
        release_target(&self.namespace, &self.release)
    }

    /// The packaged local chart, as the run's binary input file.
    pub fn binary_files(&self) -> BTreeMap<String, Vec<u8>> {
        self.chart_archive
            .iter()
            .map(|a| (self.chart.clone(), a.clone()))
            .collect()
    }

    /// The `helm upgrade --install` words both majors share, and the input files.
    fn shared_command(&self, timeout: Duration) -> Program {
        let mut argv = self.release_args(&["helm", "upgrade", "--install"]);
        argv.extend([
            "--timeout".into(),
            format!("{}s", helm_timeout(timeout).as_secs()),
            "--history-max".into(),
            self.history_max.unwrap_or(10).to_string(),
        ]);
        let (values_args, files, secret_files) = self.values_args();
        argv.extend(values_args);
        if self.create_namespace {
            argv.push("--create-namespace".into());
        }
        if let Some(d) = &self.description {
            argv.extend(["--description".into(), d.clone()]);
        }
        (argv, files, secret_files)
    }

    /// The installer's argv (a script that asks the binary for its Helm major, then runs that
    /// major's `helm upgrade --install`, see [`major::install_script`]) and input files. `current`
    /// is the release's newest record as this run finds it (`None`: none, or uninstalled);
    /// `image` names the installer in a refusal.
    pub fn command(
        &self,
        timeout: Duration,
        current: Option<&HelmRelease>,
        image: &str,
    ) -> Program {
        let before = before(current);
        let (common, files, secret_files) = self.shared_command(timeout);
        let inputs = MajorInputs {
            atomic: self.atomic,
            take_ownership: self.take_ownership,
            choice: self.apply_method,
        };
        let revision = current.map(|r| r.revision);
        let flags = |m| {
            major::install_flags(m, inputs, before)
                .map_err(|r| r.message(image, &self.target_name(), revision))
        };
        let script = major::install_script(&common, flags(HelmMajor::V3), flags(HelmMajor::V4));
        (vec!["sh".into(), "-c".into(), script], files, secret_files)
    }

    /// `namespace/release`, for messages.
    fn target_name(&self) -> String {
        format!("{}/{}", self.namespace, self.release)
    }
}

/// Helm's own `--timeout`, a little under the Job's deadline (`deadline`): Helm then says what it
/// still waited for (which resource, which pod) in the log the diagnostic relays, before the Job
/// controller ends the pod with nothing said.
pub(crate) fn helm_timeout(deadline: Duration) -> Duration {
    let margin = (deadline / 10).clamp(Duration::from_secs(5), Duration::from_secs(30));
    deadline.saturating_sub(margin).max(Duration::from_secs(1))
}

/// The release as an install finds it, for [`major::install_flags`].
pub fn before(current: Option<&HelmRelease>) -> Before {
    match current.filter(|r| r.status != ReleaseStatus::Uninstalled) {
        Some(r) => Before::Record(r.apply_method),
        None => Before::Nothing,
    }
}

/// The Lease key of the runs on release `namespace/name`.
pub fn release_target(namespace: &str, name: &str) -> String {
    format!("helm/{namespace}/{name}")
}

/// The current record of a release, or `None`.
pub async fn release(
    clients: &Kube,
    namespace: &str,
    name: &str,
) -> Result<Option<HelmRelease>, EngineError> {
    release_after(clients, namespace, name, None).await
}

/// Like [`release`]; with the revision the caller last saw, a refresh that finds it still newest
/// costs two concurrent GETs.
pub async fn release_after(
    clients: &Kube,
    namespace: &str,
    name: &str,
    known_revision: Option<i64>,
) -> Result<Option<HelmRelease>, EngineError> {
    let read = || async {
        match known_revision {
            Some(r) => {
                release_from_revision(
                    clients.client.clone(),
                    &clients.endpoint,
                    namespace,
                    name,
                    r,
                )
                .await
            }
            None => {
                current_release(clients.client.clone(), &clients.endpoint, namespace, name).await
            }
        }
    };
    clients
        .retry_if("read the release", ClusterError::is_transient, read)
        .await
        .map_err(|e| EngineError::api(READ_RELEASE, e))
}

/// Unlocks a release whose newest record is `pending-*` (an install or upgrade that was killed):
/// marks that record `failed`, so Helm upgrades from it. Returns the status it had.
pub async fn unlock_pending(
    clients: &Kube,
    namespace: &str,
    name: &str,
) -> Result<Option<String>, EngineError> {
    let secrets: Api<Secret> = Api::namespaced(clients.client.clone(), namespace);
    let params = ListParams::default().labels(&format!("owner=helm,name={name}"));
    let list = clients
        .retry("list release records", || secrets.list_metadata(&params))
        .await
        .map_err(|e| clients.api_error(PREPARE_RELEASE, e))?;
    let newest = list
        .items
        .into_iter()
        .filter_map(|m| {
            let labels = m.metadata.labels.clone().unwrap_or_default();
            let version: i64 = labels.get("version")?.parse().ok()?;
            Some((
                version,
                labels.get("status").cloned().unwrap_or_default(),
                m.metadata.name?,
            ))
        })
        .max_by_key(|(v, _, _)| *v);
    let Some((_, status, secret_name)) = newest else {
        return Ok(None);
    };
    if !ReleaseStatus::from(status.as_str()).is_pending() {
        return Ok(None);
    }
    let secret = clients
        .retry("get release record", || secrets.get(&secret_name))
        .await
        .map_err(|e| clients.api_error(PREPARE_RELEASE, e))?;
    let field = secret
        .data
        .as_ref()
        .and_then(|d| d.get("release"))
        .map(|b| b.0.clone())
        .ok_or_else(|| {
            EngineError::new(
                PREPARE_RELEASE,
                format!("the Helm record {namespace}/{secret_name} has no release data"),
            )
        })?;
    let rewritten = mark_failed(&field).map_err(|m| {
        EngineError::new(
            PREPARE_RELEASE,
            format!("the Helm record {namespace}/{secret_name} cannot be unlocked: {m}"),
        )
    })?;
    let patch = json!({
        "metadata": {"labels": {"status": "failed"}},
        "data": {"release": base64::engine::general_purpose::STANDARD.encode(rewritten)},
    });
    let params = PatchParams::default();
    let merge = Patch::Merge(&patch);
    clients
        .retry("unlock release", || {
            secrets.patch(&secret_name, &params, &merge)
        })
        .await
        .map_err(|e| clients.api_error(PREPARE_RELEASE, e))?;
    tracing::info!(release = %format!("{namespace}/{name}"), %status, "unlocked a release left pending");
    Ok(Some(status))
}

/// What the inputs ConfigMap may hold (the API server's limit is 1 MiB, keys and metadata included).
const MAX_INPUTS: usize = 1024 * 1024 - 16 * 1024;

/// Helm refuses records over 1 MiB; a record inflating past this is not Helm's.
const MAX_RECORD: u64 = 32 * 1024 * 1024;

/// Rewrites a record's `info.status` to `failed`, keeping its encoding (base64, gzip).
fn mark_failed(field: &[u8]) -> Result<Vec<u8>, &'static str> {
    let b64 = base64::engine::general_purpose::STANDARD;
    let raw = b64.decode(field.trim_ascii()).map_err(|_| "not base64")?;
    let gzipped = raw.starts_with(&[0x1f, 0x8b, 0x08]);
    let json_bytes = if gzipped {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(raw.as_slice())
            .take(MAX_RECORD)
            .read_to_end(&mut out)
            .map_err(|_| "not gzip")?;
        out
    } else {
        raw
    };
    let mut record: serde_json::Value =
        serde_json::from_slice(&json_bytes).map_err(|_| "not JSON")?;
    let info = record
        .get_mut("info")
        .and_then(|i| i.as_object_mut())
        .ok_or("no info")?;
    info.insert("status".into(), json!("failed"));
    info.insert(
        "description".into(),
        json!("Marked failed by talosboot: the operation that left it pending never finished"),
    );
    let json_bytes = serde_json::to_vec(&record).map_err(|_| "cannot encode")?;
    let encoded = if gzipped {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(&json_bytes).map_err(|_| "cannot compress")?;
        gz.finish().map_err(|_| "cannot compress")?
    } else {
        json_bytes
    };
    Ok(b64.encode(encoded).into_bytes())
}

/// What an install did.
#[derive(Debug)]
pub struct Installed {
    pub run: RunOutcome,
    /// The status a stuck release had before it was unlocked.
    pub unlocked: Option<String>,
    pub release: Option<HelmRelease>,
}

/// `helm upgrade --install` of `chart` in a bootstrap Job, after unlocking a stuck release. The
/// current release is read first: `rbac = "minimal"` needs its kinds, every install its
/// `apply_method`.
pub async fn install_or_upgrade(
    clients: &Kube,
    bootstrap_ns: &BootstrapNamespace,
    job: &JobSettings,
    chart: &ChartInstall,
    timeout: Duration,
    cancel: &CancellationToken,
) -> Result<Installed, EngineError> {
    // Read whatever the RBAC policy: the record's `apply_method` decides the Helm 4 flags and
    // whether a Helm 3 image may run.
    let current = release(clients, &chart.namespace, &chart.release).await?;
    let current = current.filter(|r| r.status != ReleaseStatus::Uninstalled);
    install_or_upgrade_from(
        clients,
        bootstrap_ns,
        job,
        chart,
        current.as_ref(),
        timeout,
        cancel,
    )
    .await
}

/// [`install_or_upgrade`] for a caller that has just read the release (`current`: its record,
/// `None` when there is none or it is uninstalled).
pub async fn install_or_upgrade_from(
    clients: &Kube,
    bootstrap_ns: &BootstrapNamespace,
    job: &JobSettings,
    chart: &ChartInstall,
    current: Option<&HelmRelease>,
    timeout: Duration,
    cancel: &CancellationToken,
) -> Result<Installed, EngineError> {
    if let Some(archive) = &chart.chart_archive {
        let size: usize =
            archive.len() * 4 / 3 + chart.values_yaml.iter().map(String::len).sum::<usize>();
        if size > MAX_INPUTS {
            return Err(EngineError::new(
                Step::Objects,
                format!(
                    "the packaged local chart and values take {} KiB, more than a ConfigMap holds (1 MiB): publish the chart to an OCI registry or a chart repository and set `repository`",
                    size / 1024
                ),
            ));
        }
    }
    let deadline = Instant::now() + timeout;
    let rbac = match job.rbac {
        RbacPolicy::ClusterAdmin => Rbac::ClusterAdmin,
        RbacPolicy::Minimal => {
            rbac::ensure_release_namespace(clients, chart).await?;
            let rules =
                rbac::install_rules(clients, bootstrap_ns, job, chart, current, deadline, cancel)
                    .await?;
            Rbac::Minimal(rules)
        }
    };
    // What the render run left of the timeout.
    let timeout = deadline
        .saturating_duration_since(Instant::now())
        .max(Duration::from_secs(1));
    let (command, files, secret_files) = chart.command(timeout, current, &job.image);
    let spec = RunSpec {
        purpose: format!(
            "install chart {} {} as {}/{}",
            chart.chart, chart.version, chart.namespace, chart.release
        ),
        target: chart.target(),
        namespace: bootstrap_ns.clone(),
        job: job.clone(),
        command,
        env: helm_env(),
        files,
        binary_files: chart.binary_files(),
        secret_files,
        timeout,
        rbac,
        capture_output: false,
    };
    // Under the target's Lease: a release is `pending-*` either because a run was killed or
    // because another run's installer is writing it right now; holding the Lease rules the
    // second out.
    let (run, unlocked) = engine::run_with(clients, &spec, cancel, || {
        unlock_pending(clients, &chart.namespace, &chart.release)
    })
    .await?;
    let release = release(clients, &chart.namespace, &chart.release).await?;
    Ok(Installed {
        run,
        unlocked,
        release,
    })
}

/// `helm uninstall` of a release in a bootstrap Job.
pub async fn uninstall(
    clients: &Kube,
    bootstrap_ns: &BootstrapNamespace,
    job: &JobSettings,
    namespace: &str,
    release_name: &str,
    timeout: Duration,
    cancel: &CancellationToken,
) -> Result<RunOutcome, EngineError> {
    let on = super::recovery::ReleaseRun {
        bootstrap_ns,
        job,
        namespace,
        release_name,
        timeout,
    };
    let args = [
        "uninstall",
        release_name,
        "--namespace",
        namespace,
        "--wait",
    ];
    on.run(
        clients,
        &args,
        format!("uninstall release {namespace}/{release_name}"),
        cancel,
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::super::major::ApplyMethod;
    use super::*;

    #[test]
    fn helm_gives_up_before_the_job_deadline_to_say_what_it_waited_for() {
        let secs = |s| helm_timeout(Duration::from_secs(s)).as_secs();
        assert_eq!(secs(120), 108);
        assert_eq!(secs(900), 870);
        assert_eq!(secs(30), 25);
        assert_eq!(secs(3), 1);
    }

    fn chart() -> ChartInstall {
        ChartInstall {
            release: "cilium".into(),
            namespace: "kube-system".into(),
            repository: Some("https://helm.cilium.io".into()),
            chart: "cilium".into(),
            version: "1.18.4".into(),
            values_yaml: vec!["a: 1".into(), "b: 2".into()],
            sensitive_values_yaml: vec!["token: x".into()],
            create_namespace: false,
            take_ownership: true,
            description: None,
            ..Default::default()
        }
    }

    /// The `helm upgrade --install` of the Helm 4 branch, unquoted.
    fn helm4_words(script: &str) -> String {
        let start = script.find("v4.*) exec ").expect("a Helm 4 branch") + "v4.*) exec ".len();
        let end = start + script[start..].find(";;").expect("branch end");
        script[start..end].replace("'\\''", "'").replace('\'', "")
    }

    #[test]
    fn values_are_passed_in_order_and_sensitive_ones_from_the_secret() {
        let (argv, files, secrets) = chart().command(Duration::from_secs(600), None, "img");
        assert_eq!(argv[..2], ["sh", "-c"]);
        let joined = helm4_words(&argv[2]);
        assert!(joined.starts_with("helm upgrade --install cilium cilium --repo https://helm.cilium.io --version 1.18.4"), "{joined}");
        let v0 = joined
            .find("/talosboot/inputs/values-0.yaml")
            .expect("first values");
        let v1 = joined
            .find("/talosboot/inputs/values-1.yaml")
            .expect("second values");
        let s0 = joined
            .find("/talosboot/secrets/sensitive-values-0.yaml")
            .expect("sensitive values");
        assert!(
            v0 < v1 && v1 < s0,
            "later files win in Helm: sensitive last"
        );
        assert!(joined.contains("--take-ownership"));
        assert_eq!(files.len(), 2);
        assert_eq!(secrets["sensitive-values-0.yaml"], "token: x");
        assert!(!files.values().any(|f| f.contains("token")));
    }

    #[test]
    fn oci_repositories_become_part_of_the_chart_reference() {
        let mut c = chart();
        c.repository = Some("oci://registry.example/charts/".into());
        let (argv, _, _) = c.command(Duration::from_secs(60), None, "img");
        let words = helm4_words(&argv[2]);
        assert!(words.contains(" oci://registry.example/charts/cilium "));
        assert!(!words.contains("--repo"));
    }

    fn record(revision: i64, method: Option<ApplyMethod>) -> HelmRelease {
        HelmRelease {
            name: "cilium".into(),
            namespace: "kube-system".into(),
            revision,
            status: ReleaseStatus::Deployed,
            chart: "cilium".into(),
            chart_version: "1.18.4".into(),
            app_version: String::new(),
            last_deployed: String::new(),
            first_deployed: String::new(),
            description: String::new(),
            notes: String::new(),
            values_sha256: String::new(),
            workloads: Vec::new(),
            kinds: Vec::new(),
            objects: Vec::new(),
            apply_method: method,
            upgrade_compatibility: None,
            kube_proxy_replacement: None,
        }
    }

    #[test]
    fn the_record_decides_the_helm_4_flags_and_whether_helm_3_may_run() {
        let mut c = chart();
        c.atomic = true;
        // Adopting on a fresh install: Helm 4 applies server-side and takes others' fields.
        let (argv, _, _) = c.command(Duration::from_secs(60), None, "img");
        let v4 = helm4_words(&argv[2]);
        assert!(
            v4.ends_with(
                "--server-side=auto --take-ownership --force-conflicts --rollback-on-failure"
            ),
            "{v4}"
        );
        assert!(
            argv[2].contains("'--take-ownership' '--atomic'"),
            "Helm 3's names: {}",
            argv[2]
        );
        // A Helm 3 record: Helm 4 upgrades client-side, where --force-conflicts is refused.
        let helm3 = record(2, None);
        let (argv, _, _) = c.command(Duration::from_secs(60), Some(&helm3), "img");
        assert!(!argv[2].contains("--force-conflicts"), "{}", argv[2]);
        // A server-side record: Helm 3 refuses, naming the image and the record.
        let ssa = record(4, Some(ApplyMethod::Ssa));
        let (argv, _, _) = c.command(Duration::from_secs(60), Some(&ssa), "alpine/helm:3.18.4");
        assert!(argv[2].contains("v3.*) echo 'talosboot refused the install: the installer image alpine/helm:3.18.4 carries Helm 3, and the newest record of release kube-system/cilium (revision 4) says apply_method: ssa."), "{}", argv[2]);
        // Unless client-side apply is asked for.
        c.apply_method = ApplyMethodChoice::Csa;
        let (argv, _, _) = c.command(Duration::from_secs(60), Some(&ssa), "img");
        assert!(!argv[2].contains("refused"), "{}", argv[2]);
        assert!(
            helm4_words(&argv[2])
                .contains("--server-side=false --take-ownership --rollback-on-failure")
        );
        // An uninstalled record counts as none.
        let mut gone = record(5, Some(ApplyMethod::Ssa));
        gone.status = ReleaseStatus::Uninstalled;
        assert_eq!(before(Some(&gone)), Before::Nothing);
    }

    #[test]
    fn a_pending_record_is_rewritten_as_failed_in_its_own_encoding() {
        // `apply_method` (Helm 4) and fields talosboot does not know survive the rewrite.
        let record = json!({"name": "cilium", "version": 2, "info": {"status": "pending-upgrade"}, "apply_method": "ssa", "labels": {"x": "y"}, "future_field": [1]});
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(record.to_string().as_bytes()).expect("gzip");
        let field = base64::engine::general_purpose::STANDARD.encode(gz.finish().expect("gzip"));
        let out = mark_failed(field.as_bytes()).expect("rewritten");
        let decoded = super::super::release::decode_release(&out).expect("still a Helm record");
        assert_eq!(decoded.status, "failed");
        assert_eq!(decoded.revision, 2);
        assert_eq!(decoded.apply_method, Some(ApplyMethod::Ssa));
        let raw: serde_json::Value =
            serde_json::from_slice(&super::super::release::record_json(&out).expect("json"))
                .expect("json");
        assert_eq!(raw["labels"], json!({"x": "y"}));
        assert_eq!(raw["future_field"], json!([1]));
    }
}
