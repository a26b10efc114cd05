//! What the real Flux Operator and source-controller report when a FluxInstance does not become
//! Ready, and what the user does about it. Pure: the conditions are read by
//! [`super::instance`]; the resource's report adds these lines to its diagnostic.
//!
//! How the operator (v0.53 to v0.59) reports, read in its `fluxinstance_controller.go`:
//! - `Ready=Unknown Progressing` while it applies the distribution and waits for every object it
//!   applied to be healthy: up to its health-check timeout, 5 minutes unless the FluxInstance's
//!   annotation `fluxcd.controlplane.io/reconcileTimeout` says otherwise (no wait with
//!   `spec.wait: false`). Nothing final is said before that.
//! - `Ready=False ReconciliationFailed` after that wait, the message naming each Flux object
//!   that is not Ready (`GitRepository/flux-system/flux-system status: <its message>`): an
//!   unreachable or refused Git source ends here, never in `ArtifactFailed`.
//! - `Ready=False ArtifactFailed`: only a failed pull of the distribution artifact
//!   (`spec.distribution.artifact`).
//! - `Ready=False BuildFailed` with `Stalled=True BuildFailed`: the distribution cannot be built
//!   (no embedded Flux matches `spec.distribution.version`, an unsupported container OS, an
//!   invalid `spec.sync` or patch). Terminal: the operator does not retry the same spec.
//! - `Ready=False HealthCheckCanceled`: a newer change of the FluxInstance interrupted the wait
//!   (progress, not a failure).
//!
//! Messages can quote source URLs: [`redact`] removes credentials before they reach a diagnostic.

use std::fmt;
use std::time::Duration;

use serde_json::Value as Json;

/// The operator's health-check timeout when the FluxInstance sets none.
pub const OPERATOR_HEALTH_CHECK_TIMEOUT: Duration = Duration::from_secs(300);
/// The FluxInstance annotation that sets the operator's health-check timeout (a Go duration).
pub const RECONCILE_TIMEOUT_ANNOTATION: &str = "fluxcd.controlplane.io/reconcileTimeout";

/// The Flux kinds whose `Kind/namespace/name` the operator's messages name.
const FLUX_KINDS: [&str; 5] = [
    "GitRepository",
    "OCIRepository",
    "Bucket",
    "Kustomization",
    "HelmRelease",
];

/// Why a FluxInstance failed, by the operator's reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InstanceFailure {
    /// `ArtifactFailed`: the distribution artifact could not be pulled.
    Artifact,
    /// `BuildFailed` (or `Stalled`): the distribution cannot be built from the spec.
    Build,
    /// `ReconciliationFailed`: applied, but something it applied is not healthy (or the apply
    /// itself was refused).
    Reconciliation,
    /// Any other reason (a newer operator's).
    Other,
}

impl InstanceFailure {
    pub fn of(reason: &str) -> Self {
        match reason {
            "ArtifactFailed" => InstanceFailure::Artifact,
            "BuildFailed" => InstanceFailure::Build,
            "ReconciliationFailed" => InstanceFailure::Reconciliation,
            _ => InstanceFailure::Other,
        }
    }
}

/// `Type=Status` condition of a Flux object, as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Condition {
    pub status: String,
    pub reason: String,
    /// Redacted ([`redact`]).
    pub message: String,
}

/// The sync source (or the sync Kustomization) the FluxInstance's `spec.sync` makes, and its
/// `Ready` condition when it exists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceState {
    pub kind: String,
    pub namespace: String,
    pub name: String,
    /// `None`: the object does not exist (yet), or has no `Ready` condition.
    pub ready: Option<Condition>,
    /// source-controller's `FetchFailed=True`, which it keeps while it retries a failed fetch,
    /// when `Ready` still reads `Unknown (Progressing)`: the failure, seen mid-retry.
    pub fetch_failed: Option<Condition>,
    /// False: it does not exist (the operator has not applied it, or its kind is not served).
    pub exists: bool,
}

impl fmt::Display for SourceState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}/{}", self.kind, self.namespace, self.name)?;
        match (&self.ready, self.exists) {
            (_, false) => f.write_str(" does not exist (the operator had not applied it)"),
            (None, true) => f.write_str(" has no Ready condition yet"),
            (Some(c), true) if c.message.is_empty() => {
                write!(f, " is Ready={} ({})", c.status, c.reason)
            }
            (Some(c), true) => write!(f, " is Ready={} ({}): {}", c.status, c.reason, c.message),
        }?;
        match &self.fetch_failed {
            Some(c) if self.exists && !self.failing() => write!(
                f,
                "; its last fetch failed and source-controller retries (FetchFailed, {}): {}",
                c.reason, c.message
            ),
            _ => Ok(()),
        }
    }
}

impl SourceState {
    /// Ready=False (a failure the user must fix, as opposed to still progressing).
    pub fn failing(&self) -> bool {
        self.ready
            .as_ref()
            .is_some_and(|c| c.status == "False" && c.reason != "Progressing")
    }

    /// The condition that says why it does not sync: `Ready=False`, else a `FetchFailed=True`
    /// kept while source-controller retries.
    pub fn failure(&self) -> Option<&Condition> {
        match self.failing() {
            true => self.ready.as_ref(),
            false => self.fetch_failed.as_ref(),
        }
    }
}

/// What `spec.sync` says, for naming the objects it makes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sync {
    pub kind: String,
    /// `spec.sync.name`, else the FluxInstance's namespace (as the operator names them).
    pub name: String,
    pub namespace: String,
    pub pull_secret: Option<String>,
}

/// The FluxInstance's `spec.sync`, `None` without one.
pub fn sync_of(instance: &Json) -> Option<Sync> {
    let sync = instance.pointer("/spec/sync")?.as_object()?;
    let field = |k: &str| sync.get(k).and_then(Json::as_str).filter(|s| !s.is_empty());
    let namespace = instance
        .pointer("/metadata/namespace")
        .and_then(Json::as_str)
        .unwrap_or_default()
        .to_owned();
    Some(Sync {
        kind: field("kind").unwrap_or("GitRepository").to_owned(),
        name: field("name").unwrap_or(&namespace).to_owned(),
        namespace,
        pull_secret: field("pullSecret").map(str::to_owned),
    })
}

/// The operator's health-check wait for a FluxInstance, as it is configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OperatorWait {
    /// `spec.wait: false`: no health check, Ready right after the apply.
    Off,
    /// 5 minutes.
    Default,
    /// The annotation's value, as written.
    Annotated(String),
}

/// A sentence on when the operator reports: what a timed-out wait can still expect of it.
impl fmt::Display for OperatorWait {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OperatorWait::Off => f.write_str(
                "The FluxInstance sets no health-check wait (`spec.wait: false`): the Flux Operator reports Ready as soon as it has applied, so it has not finished applying",
            ),
            OperatorWait::Default => write!(
                f,
                "The Flux Operator reports a failure only after its health-check wait ({}s by default; the annotation `{RECONCILE_TIMEOUT_ANNOTATION}` sets it)",
                OPERATOR_HEALTH_CHECK_TIMEOUT.as_secs()
            ),
            OperatorWait::Annotated(t) => write!(
                f,
                "The Flux Operator reports a failure only after its health-check wait (`{RECONCILE_TIMEOUT_ANNOTATION}: {t}`)"
            ),
        }
    }
}

/// The operator's health-check wait for this FluxInstance.
pub fn operator_wait(instance: &Json) -> OperatorWait {
    if instance.pointer("/spec/wait").and_then(Json::as_bool) == Some(false) {
        return OperatorWait::Off;
    }
    match instance
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(RECONCILE_TIMEOUT_ANNOTATION))
        .and_then(Json::as_str)
    {
        Some(t) => OperatorWait::Annotated(t.to_owned()),
        None => OperatorWait::Default,
    }
}

/// Removes credentials from URLs in `text` (`scheme://user:password@host` becomes
/// `scheme://***@host`); SSH user names alone (`ssh://git@host`) are kept.
pub fn redact(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let (head, tail) = rest.split_at(at + 3);
        out.push_str(head);
        let end = tail
            .find(|c: char| c.is_whitespace() || matches!(c, '/' | '\'' | '"' | ']' | ')'))
            .unwrap_or(tail.len());
        let authority = &tail[..end];
        match authority.rfind('@') {
            Some(i) if authority[..i].contains(':') => {
                out.push_str("***");
                out.push_str(&authority[i..]);
            }
            _ => out.push_str(authority),
        }
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

/// The Flux objects (`Kind/namespace/name`) a `ReconciliationFailed` message names, in order,
/// each once.
pub fn named_objects(message: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for word in message.split(|c: char| c.is_whitespace() || matches!(c, '[' | ']' | ',' | '\'')) {
        let mut parts = word.split('/');
        let (Some(kind), Some(ns), Some(name), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        if FLUX_KINDS.contains(&kind) && !ns.is_empty() && !name.is_empty() {
            let name = name.trim_end_matches(':');
            let object = format!("{kind}/{ns}/{name}");
            if !out.contains(&object) {
                out.push(object);
            }
        }
    }
    out
}

/// What to do about a FluxInstance failure with this reason and message.
pub fn instance_hint(reason: &str, message: &str) -> String {
    match InstanceFailure::of(reason) {
        InstanceFailure::Artifact => "The operator could not pull the distribution artifact (`spec.distribution.artifact`): check its URL and `spec.distribution.artifactPullSecret`, or remove `artifact` to use the manifests in the operator's image.".to_owned(),
        InstanceFailure::Build => {
            let lower = message.to_lowercase();
            if lower.contains("container os") || lower.contains("flux-images") {
                "The operator's image failed its own checks (its container OS or its embedded Flux manifests): use the upstream operator image (`operator_chart.values_yaml` `image`).".to_owned()
            } else if lower.contains("semver") || lower.contains("version") {
                "The operator cannot build this Flux version: `spec.distribution.version` must match a Flux version embedded in the operator's image (a newer `operator_chart.version` embeds newer Flux). The operator does not retry the same spec: fix it and apply.".to_owned()
            } else {
                "The operator cannot build the distribution from `spec` (the message says which field): fix `instance_yaml` (or `sync`) and apply; the operator does not retry the same spec.".to_owned()
            }
        }
        InstanceFailure::Reconciliation => {
            let objects = named_objects(message);
            if objects.is_empty() {
                "The operator applied the distribution but a Flux object did not become healthy within its health-check wait; the message names it.".to_owned()
            } else {
                format!(
                    "The operator waited for {} to become Ready and gave up after its health-check wait (5 minutes unless the annotation `{RECONCILE_TIMEOUT_ANNOTATION}` says otherwise). {}",
                    objects.join(", "),
                    object_hint(
                        objects
                            .first()
                            .and_then(|o| o.split('/').next())
                            .unwrap_or_default(),
                        "",
                        message
                    )
                )
            }
        }
        InstanceFailure::Other => String::new(),
    }
}

/// What to do about a sync object of `kind` (a source or the Kustomization) that is not Ready
/// with this reason and message.
pub fn object_hint(kind: &str, reason: &str, message: &str) -> String {
    match kind {
        "GitRepository" | "OCIRepository" | "Bucket" => source_hint(kind, reason, message),
        "Kustomization" => {
            "Check that `spec.sync.path` (or `sync.path`) exists in the source at `spec.sync.ref`, and that the manifests there build.".to_owned()
        }
        _ => String::new(),
    }
}

/// What to do about a sync source (`kind`) that is not Ready with this reason and message.
/// Names the settings, never their values.
pub fn source_hint(kind: &str, reason: &str, message: &str) -> String {
    let lower = message.to_lowercase();
    let has = |needles: &[&str]| needles.iter().any(|n| lower.contains(n));
    if kind != "GitRepository" {
        return format!(
            "Check `spec.sync.url`, `spec.sync.ref` and the pull secret (`spec.sync.pullSecret`) of the {kind}."
        );
    }
    if reason == "AuthenticationFailed" || (lower.contains("secret") && lower.contains("not found"))
    {
        return "The pull secret is missing or incomplete: `spec.sync.pullSecret` (or `sync.pull_secret`) must name a Secret in the FluxInstance's namespace, listed in `managed_resources.secrets_yaml`, with `identity` and `known_hosts` for an SSH URL, or `username` and `password` for HTTPS.".to_owned();
    }
    if has(&["knownhosts", "known_hosts", "host key", "key mismatch"]) {
        return "The Git host's key is not the one in `known_hosts`: put the host's current public key line (`ssh-keyscan <host>`) in the pull secret's `known_hosts` (`managed_resources.secrets_yaml`).".to_owned();
    }
    if has(&[
        "unable to authenticate",
        "permission denied",
        "publickey",
        "authentication required",
        "authorization failed",
        "403",
        "401",
    ]) {
        return "The Git host refused the credentials: register the deploy key's public half (read access) on the repository, or check that `identity` in the pull secret is the private key of that deploy key (HTTPS: `username`/`password`).".to_owned();
    }
    if has(&[
        "no such host",
        "connection refused",
        "i/o timeout",
        "dial tcp",
        "network is unreachable",
        "connection reset",
        "timeout",
    ]) {
        return "The Git host cannot be reached from the cluster: check `spec.sync.url` (or `sync.url`) and that the cluster's DNS and egress reach it.".to_owned();
    }
    if has(&[
        "reference not found",
        "couldn't find remote ref",
        "unable to resolve",
    ]) {
        return "The branch or tag does not exist: check `spec.sync.ref` (or `sync.ref`), e.g. `refs/heads/main`.".to_owned();
    }
    if has(&["repository not found", "not found"]) {
        return "The repository does not exist at that URL (or the deploy key cannot see it): check `spec.sync.url` (or `sync.url`).".to_owned();
    }
    "Check `spec.sync.url` and `spec.sync.ref`, the deploy key (registered on the repository with read access) and the pull secret's `identity` and `known_hosts` (HTTPS: `username` and `password`).".to_owned()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn credentials_in_urls_never_reach_a_diagnostic() {
        let cases = [
            (
                "unable to clone 'https://user:s3cret@github.com/org/repo': 403",
                "unable to clone 'https://***@github.com/org/repo': 403",
            ),
            (
                "unable to clone 'ssh://git@github.com/org/repo.git'",
                "unable to clone 'ssh://git@github.com/org/repo.git'",
            ),
            (
                "https://a:b@x and http://c:d@y/z",
                "https://***@x and http://***@y/z",
            ),
            ("no url here", "no url here"),
        ];
        for (text, want) in cases {
            assert_eq!(redact(text), want, "{text}");
        }
    }

    #[test]
    fn the_objects_a_reconciliation_failure_names() {
        let message = "reconciliation failed: timeout waiting for: [GitRepository/flux-system/flux-system status: 'Failed', Kustomization/flux-system/flux-system status: 'InProgress']\nGitRepository/flux-system/flux-system status: failed to checkout and determine revision: unable to clone 'ssh://git@github.com/org/repo.git': dial tcp: lookup github.com: no such host";
        assert_eq!(
            named_objects(message),
            vec![
                "GitRepository/flux-system/flux-system".to_owned(),
                "Kustomization/flux-system/flux-system".to_owned()
            ]
        );
        assert!(named_objects("apply failed: Deployment/flux-system/x").is_empty());
    }

    /// A case: the operator's reason, its message, words the hint must hold.
    type Case<'a> = (&'a str, &'a str, &'a [&'a str]);

    #[test]
    fn each_operator_reason_says_what_to_do() {
        let cases: &[Case] = &[
            (
                "ReconciliationFailed",
                "reconciliation failed: timeout waiting for: [GitRepository/flux-system/flux-system status: 'Failed']\nGitRepository/flux-system/flux-system status: unable to clone: dial tcp: lookup github.com: no such host",
                &[
                    "GitRepository/flux-system/flux-system",
                    "cannot be reached",
                    "sync.url",
                ],
            ),
            (
                "ReconciliationFailed",
                "reconciliation failed: timeout waiting for: [GitRepository/flux-system/flux-system status: 'Failed']\nGitRepository/flux-system/flux-system status: ssh: handshake failed: knownhosts: key mismatch",
                &["known_hosts"],
            ),
            (
                "ReconciliationFailed",
                "reconciliation failed: timeout waiting for: [GitRepository/flux-system/flux-system status: 'Failed']\nGitRepository/flux-system/flux-system status: ssh: handshake failed: ssh: unable to authenticate, attempted methods [none publickey]",
                &["deploy key", "read access"],
            ),
            (
                "ReconciliationFailed",
                "reconciliation failed: timeout waiting for: [Kustomization/flux-system/flux-system status: 'Failed']\nKustomization/flux-system/flux-system status: kustomization path not found",
                &["sync.path"],
            ),
            (
                "BuildFailed",
                "build failed: no match found for semver: 2.99.x",
                &["spec.distribution.version", "operator_chart.version"],
            ),
            (
                "BuildFailed",
                "unsupported container OS: alpine 3",
                &["upstream operator image"],
            ),
            (
                "ArtifactFailed",
                "fetch failed: GET https://ghcr.io/v2/...: 401",
                &["spec.distribution.artifact"],
            ),
        ];
        for (reason, message, words) in cases {
            let hint = instance_hint(reason, message);
            for word in *words {
                assert!(hint.contains(word), "{reason}: {word:?} in {hint}");
            }
        }
        assert_eq!(instance_hint("SomethingNew", "x"), "");
    }

    #[test]
    fn a_missing_pull_secret_names_the_settings_not_the_values() {
        let hint = source_hint(
            "GitRepository",
            "AuthenticationFailed",
            "failed to get secret 'flux-system/flux-system': secrets \"flux-system\" not found",
        );
        assert!(hint.contains("managed_resources.secrets_yaml") && hint.contains("identity"));
        let refused = source_hint("GitRepository", "GitOperationFailed", "reference not found");
        assert!(refused.contains("sync.ref"), "{refused}");
    }

    #[test]
    fn the_sync_objects_and_the_operator_wait_come_from_the_instance() {
        let fi = json!({
            "metadata": {"name": "flux", "namespace": "flux-system"},
            "spec": {"sync": {"kind": "GitRepository", "url": "ssh://git@github.com/o/r", "ref": "refs/heads/main", "path": "p", "pullSecret": "flux-system"}}
        });
        let sync = sync_of(&fi).expect("sync");
        assert_eq!(
            (
                sync.kind.as_str(),
                sync.namespace.as_str(),
                sync.name.as_str()
            ),
            ("GitRepository", "flux-system", "flux-system")
        );
        assert_eq!(operator_wait(&fi), OperatorWait::Default);
        let named = json!({"metadata": {"namespace": "flux-system", "annotations": {RECONCILE_TIMEOUT_ANNOTATION: "10m"}}, "spec": {"sync": {"name": "infra"}}});
        assert_eq!(sync_of(&named).map(|s| s.name), Some("infra".into()));
        assert_eq!(operator_wait(&named), OperatorWait::Annotated("10m".into()));
        let no_wait = json!({"spec": {"wait": false}});
        assert_eq!(operator_wait(&no_wait), OperatorWait::Off);
        assert_eq!(sync_of(&no_wait), None);
    }

    #[test]
    fn a_source_state_reads_as_users_see_it() {
        let state = SourceState {
            kind: "GitRepository".into(),
            namespace: "flux-system".into(),
            name: "flux-system".into(),
            ready: Some(Condition {
                status: "False".into(),
                reason: "GitOperationFailed".into(),
                message: "unable to clone".into(),
            }),
            fetch_failed: None,
            exists: true,
        };
        assert_eq!(
            state.to_string(),
            "GitRepository/flux-system/flux-system is Ready=False (GitOperationFailed): unable to clone"
        );
        assert!(state.failing());
        let absent = SourceState {
            ready: None,
            exists: false,
            ..state
        };
        assert!(!absent.failing());
        assert!(
            absent
                .to_string()
                .ends_with("does not exist (the operator had not applied it)")
        );
        // Mid-retry: Ready says only that it is progressing; the refusal is in FetchFailed.
        let retrying = SourceState {
            ready: Some(Condition {
                status: "Unknown".into(),
                reason: "Progressing".into(),
                message: "building artifact".into(),
            }),
            fetch_failed: Some(Condition {
                status: "True".into(),
                reason: "GitOperationFailed".into(),
                message: "ssh: unable to authenticate".into(),
            }),
            exists: true,
            ..absent
        };
        assert!(!retrying.failing());
        assert_eq!(
            retrying.failure().map(|c| c.reason.as_str()),
            Some("GitOperationFailed")
        );
        assert!(
            retrying.to_string().ends_with(
                "is Ready=Unknown (Progressing): building artifact; its last fetch failed and source-controller retries (FetchFailed, GitOperationFailed): ssh: unable to authenticate"
            ),
            "{retrying}"
        );
    }
}
