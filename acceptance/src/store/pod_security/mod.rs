//! Pod Security admission with Talos' default configuration: `enforce: baseline`,
//! `warn: restricted` (and `audit: restricted`, not modelled), namespace `kube-system` exempt.
//! A namespace label `pod-security.kubernetes.io/enforce` (or `warn`) = `privileged` |
//! `baseline` | `restricted` wins over the default; `-version` labels are accepted (`latest` or
//! `v1.N`) and only change the wording (`"baseline:v1.33"`), not the checks.
//!
//! The checks, their order (baseline checks by ID, then restricted checks by ID, restricted ones
//! replacing `capabilities_baseline`, `hostPathVolumes` and `seccompProfile_baseline`) and their
//! messages are the `k8s.io/pod-security-admission` ones, e.g.
//! `violates PodSecurity "baseline:latest": host namespaces (hostNetwork=true), privileged (container "c" must not set securityContext.privileged=true)`.
//! Not modelled: `seLinuxOptions`, `sysctls`, AppArmor, Windows and user-namespace relaxations,
//! the `audit` mode, exemptions by user or runtime class.

use serde_json::Value;

use super::error::{ApiError, Cause, invalid_value};
use super::types::GroupResource;

/// Namespaces Talos exempts (`exemptions.namespaces` of its admission configuration).
pub const EXEMPT_NAMESPACES: &[&str] = &["kube-system"];

const ENFORCE: &str = "pod-security.kubernetes.io/enforce";
const WARN: &str = "pod-security.kubernetes.io/warn";

/// A Pod Security Standards level.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Privileged,
    Baseline,
    Restricted,
}

impl Level {
    fn parse(s: &str) -> Option<Level> {
        match s {
            "privileged" => Some(Level::Privileged),
            "baseline" => Some(Level::Baseline),
            "restricted" => Some(Level::Restricted),
            _ => None,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Level::Privileged => "privileged",
            Level::Baseline => "baseline",
            Level::Restricted => "restricted",
        }
    }
}

/// A level with the version it is shown with (`baseline:latest`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LevelVersion {
    pub level: Level,
    pub version: String,
}

impl std::fmt::Display for LevelVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.level.as_str(), self.version)
    }
}

fn label<'a>(ns: &'a Value, key: &str) -> Option<&'a str> {
    ns.pointer("/metadata/labels")?.get(key)?.as_str()
}

fn mode(ns: &Value, key: &str, default: Level) -> LevelVersion {
    let level = label(ns, key).and_then(Level::parse).unwrap_or(default);
    let version = label(ns, &format!("{key}-version"))
        .filter(|v| valid_version(v))
        .unwrap_or("latest")
        .to_string();
    LevelVersion { level, version }
}

fn valid_version(v: &str) -> bool {
    v == "latest"
        || v.strip_prefix("v1.")
            .is_some_and(|m| !m.is_empty() && m.bytes().all(|b| b.is_ascii_digit()))
}

/// The `enforce` and `warn` levels for pods in namespace object `ns`; `None` when exempt.
pub fn policy(ns: &Value) -> Option<(LevelVersion, LevelVersion)> {
    let name = ns
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    if EXEMPT_NAMESPACES.contains(&name) {
        return None;
    }
    Some((
        mode(ns, ENFORCE, Level::Baseline),
        mode(ns, WARN, Level::Restricted),
    ))
}

/// Namespace admission: the level and version labels must be valid (422 otherwise).
pub fn validate_namespace_labels(ns: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    for m in ["enforce", "audit", "warn"] {
        let key = format!("pod-security.kubernetes.io/{m}");
        if let Some(v) = label(ns, &key).filter(|v| Level::parse(v).is_none()) {
            causes.push(invalid_value(
                &format!("metadata.labels[{key}]"),
                &Value::String(v.into()),
                "must be one of privileged, baseline, restricted",
            ));
        }
        let vkey = format!("{key}-version");
        if let Some(v) = label(ns, &vkey).filter(|v| !valid_version(v)) {
            causes.push(invalid_value(
                &format!("metadata.labels[{vkey}]"),
                &Value::String(v.into()),
                "must be \"latest\" or \"v1.x\"",
            ));
        }
    }
    causes
}

/// Pod admission: 403 `pods "x" is forbidden: violates PodSecurity "baseline:latest": ...` when
/// `pod` violates the enforced level of its namespace `ns`.
pub fn admit_pod(gr: &GroupResource, name: &str, ns: &Value, pod: &Value) -> Result<(), ApiError> {
    let Some((enforce, _)) = policy(ns) else {
        return Ok(());
    };
    let spec = pod.get("spec").unwrap_or(&Value::Null);
    let meta = pod.get("metadata").unwrap_or(&Value::Null);
    match forbidden_detail(enforce.level, meta, spec) {
        Some(detail) => Err(ApiError::forbidden(
            gr,
            name,
            &format!("violates PodSecurity \"{enforce}\": {detail}"),
        )),
        None => Ok(()),
    }
}

/// The `warn` mode: `would violate PodSecurity "restricted:latest": ...` for a pod, or a
/// workload's pod template (`template` = the object holding `metadata`/`spec` of the pod).
pub fn warning(ns: &Value, template: &Value) -> Option<String> {
    let (_, warn) = policy(ns)?;
    let spec = template.get("spec").unwrap_or(&Value::Null);
    let meta = template.get("metadata").unwrap_or(&Value::Null);
    forbidden_detail(warn.level, meta, spec)
        .map(|d| format!("would violate PodSecurity \"{warn}\": {d}"))
}

/// The pod template of a workload kind (Deployment, Job, CronJob, ...), if it has one.
pub fn template_of<'a>(gr: &GroupResource, obj: &'a Value) -> Option<&'a Value> {
    match (gr.group.as_str(), gr.resource.as_str()) {
        ("", "pods") => Some(obj),
        ("apps", "deployments" | "daemonsets" | "replicasets" | "statefulsets")
        | ("batch", "jobs")
        | ("", "replicationcontrollers") => obj.pointer("/spec/template"),
        ("batch", "cronjobs") => obj.pointer("/spec/jobTemplate/spec/template"),
        _ => None,
    }
}

/// All failed checks of `level`, as the real `ForbiddenDetail()`: `reason (detail), ...`.
pub fn forbidden_detail(level: Level, meta: &Value, spec: &Value) -> Option<String> {
    let results = evaluate(level, meta, spec);
    if results.is_empty() {
        return None;
    }
    Some(
        results
            .iter()
            .map(|(reason, detail)| match detail.as_str() {
                "" => reason.to_string(),
                d => format!("{reason} ({d})"),
            })
            .collect::<Vec<_>>()
            .join(", "),
    )
}

mod checks;

use checks::*;

type Check = fn(&Value, &Value) -> Option<(&'static str, String)>;

/// Failed checks of `level` in the real evaluation order: (reason, detail).
pub fn evaluate(level: Level, meta: &Value, spec: &Value) -> Vec<(&'static str, String)> {
    let baseline: &[Check] = &[
        capabilities_baseline,
        host_namespaces,
        host_path_volumes,
        host_ports,
        privileged,
        proc_mount,
        seccomp_baseline,
    ];
    let baseline_in_restricted: &[Check] = &[host_namespaces, host_ports, privileged, proc_mount];
    let restricted: &[Check] = &[
        allow_privilege_escalation,
        capabilities_restricted,
        restricted_volumes,
        run_as_non_root,
        run_as_user,
        seccomp_restricted,
    ];
    let checks: Vec<Check> = match level {
        Level::Privileged => return Vec::new(),
        Level::Baseline => baseline.to_vec(),
        Level::Restricted => baseline_in_restricted
            .iter()
            .chain(restricted)
            .copied()
            .collect(),
    };
    checks.iter().filter_map(|c| c(meta, spec)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn detail(level: Level, spec: Value) -> Option<String> {
        forbidden_detail(level, &json!({}), &spec)
    }

    #[test]
    fn baseline_messages_are_the_real_ones() {
        let spec = json!({"hostNetwork": true, "hostPID": true,
            "volumes": [{"name": "root", "hostPath": {"path": "/"}}, {"name": "cm", "configMap": {"name": "x"}}],
            "containers": [{"name": "c", "securityContext": {"privileged": true, "capabilities": {"add": ["SYS_ADMIN", "CHOWN", "NET_ADMIN"]}},
                "ports": [{"containerPort": 80, "hostPort": 8080}]}]});
        assert_eq!(
            detail(Level::Baseline, spec).unwrap(),
            "non-default capabilities (container \"c\" must not include \"NET_ADMIN\", \"SYS_ADMIN\" in securityContext.capabilities.add), \
             host namespaces (hostNetwork=true, hostPID=true), hostPath volumes (volume \"root\"), \
             hostPort (container \"c\" uses hostPort 8080), privileged (container \"c\" must not set securityContext.privileged=true)"
        );
        assert_eq!(
            detail(
                Level::Baseline,
                json!({"containers": [{"name": "c", "image": "busybox"}]})
            ),
            None
        );
        assert_eq!(
            detail(Level::Privileged, json!({"hostNetwork": true})),
            None
        );
    }

    #[test]
    fn restricted_messages_are_the_real_ones() {
        let plain = json!({"containers": [{"name": "c"}]});
        assert_eq!(
            detail(Level::Restricted, plain).unwrap(),
            "allowPrivilegeEscalation != false (container \"c\" must set securityContext.allowPrivilegeEscalation=false), \
             unrestricted capabilities (container \"c\" must set securityContext.capabilities.drop=[\"ALL\"]), \
             runAsNonRoot != true (pod or container \"c\" must set securityContext.runAsNonRoot=true), \
             seccompProfile (pod or container \"c\" must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\")"
        );
        let hardened = json!({"securityContext": {"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{"name": "c", "securityContext": {"runAsUser": 65532, "allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}}}]});
        assert_eq!(detail(Level::Restricted, hardened.clone()), None);
        let mut host = hardened;
        host["hostNetwork"] = json!(true);
        host["volumes"] = json!([{"name": "h", "hostPath": {"path": "/"}}]);
        assert_eq!(
            detail(Level::Restricted, host).unwrap(),
            "host namespaces (hostNetwork=true), restricted volume types (volume \"h\" uses restricted volume type \"hostPath\")"
        );
        let root = json!({"securityContext": {"runAsNonRoot": false, "runAsUser": 0, "seccompProfile": {"type": "Unconfined"}},
            "containers": [{"name": "a", "securityContext": {"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"], "add": ["SYS_ADMIN"]}}}]});
        assert_eq!(
            detail(Level::Restricted, root.clone()).unwrap(),
            "unrestricted capabilities (container \"a\" must not include \"SYS_ADMIN\" in securityContext.capabilities.add), \
             runAsNonRoot != true (pod must not set securityContext.runAsNonRoot=false), runAsUser=0 (pod must not set runAsUser=0), \
             seccompProfile (pod must not set securityContext.seccompProfile.type to \"Unconfined\")"
        );
        assert_eq!(
            detail(Level::Baseline, root).unwrap(),
            "non-default capabilities (container \"a\" must not include \"SYS_ADMIN\" in securityContext.capabilities.add), \
             seccompProfile (pod must not set securityContext.seccompProfile.type to \"Unconfined\")"
        );
    }

    #[test]
    fn namespace_labels_choose_the_level() {
        let ns = |labels: Value| json!({"metadata": {"name": "apps", "labels": labels}});
        let (enforce, warn) = policy(&ns(json!({}))).unwrap();
        assert_eq!(enforce.to_string(), "baseline:latest");
        assert_eq!(warn.to_string(), "restricted:latest");
        let (enforce, _) = policy(&ns(json!({ENFORCE: "privileged"}))).unwrap();
        assert_eq!(enforce.level, Level::Privileged);
        let (enforce, _) = policy(&ns(
            json!({ENFORCE: "restricted", "pod-security.kubernetes.io/enforce-version": "v1.33"}),
        ))
        .unwrap();
        assert_eq!(enforce.to_string(), "restricted:v1.33");
        assert!(policy(&json!({"metadata": {"name": "kube-system"}})).is_none());
        assert_eq!(
            validate_namespace_labels(&ns(json!({ENFORCE: "nope"})))[0].field,
            "metadata.labels[pod-security.kubernetes.io/enforce]"
        );
    }
}
