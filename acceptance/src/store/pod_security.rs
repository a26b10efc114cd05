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

// --- helpers, after the real `pluralize` / `joinQuote` ---

fn pluralize<'a>(one: &'a str, many: &'a str, n: usize) -> &'a str {
    if n == 1 { one } else { many }
}

fn join_quote<S: AsRef<str>>(items: &[S]) -> String {
    items
        .iter()
        .map(|s| format!("{:?}", s.as_ref()))
        .collect::<Vec<_>>()
        .join(", ")
}

fn containers(spec: &Value) -> impl Iterator<Item = &Value> {
    ["initContainers", "containers", "ephemeralContainers"]
        .into_iter()
        .filter_map(|k| spec.get(k).and_then(Value::as_array))
        .flatten()
}

fn name(c: &Value) -> String {
    c.get("name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

fn sc<'a>(c: &'a Value, path: &str) -> Option<&'a Value> {
    c.pointer(&format!("/securityContext{path}"))
        .filter(|v| !v.is_null())
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|s| s.as_str().map(String::from))
        .collect()
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v.dedup();
    v
}

fn containers_where(spec: &Value, bad: impl Fn(&Value) -> bool) -> Vec<String> {
    containers(spec).filter(|c| bad(c)).map(name).collect()
}

// --- baseline ---

const BASELINE_CAPS: &[&str] = &[
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
];

fn capabilities_baseline(_: &Value, spec: &Value) -> Option<(&'static str, String)> {
    let mut bad = Vec::new();
    let mut caps = Vec::new();
    for c in containers(spec) {
        let extra: Vec<String> = strings(sc(c, "/capabilities/add"))
            .into_iter()
            .filter(|cap| !BASELINE_CAPS.contains(&cap.as_str()))
            .collect();
        if !extra.is_empty() {
            bad.push(name(c));
            caps.extend(extra);
        }
    }
    (!bad.is_empty()).then(|| {
        (
            "non-default capabilities",
            format!(
                "{} {} must not include {} in securityContext.capabilities.add",
                pluralize("container", "containers", bad.len()),
                join_quote(&bad),
                join_quote(&sorted(caps))
            ),
        )
    })
}

fn host_namespaces(_: &Value, spec: &Value) -> Option<(&'static str, String)> {
    let set: Vec<&str> = [
        ("hostNetwork", "hostNetwork=true"),
        ("hostPID", "hostPID=true"),
        ("hostIPC", "hostIPC=true"),
    ]
    .into_iter()
    .filter(|(k, _)| spec.get(*k) == Some(&Value::Bool(true)))
    .map(|(_, s)| s)
    .collect();
    (!set.is_empty()).then(|| ("host namespaces", set.join(", ")))
}

fn volumes(spec: &Value) -> impl Iterator<Item = &Value> {
    spec.get("volumes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

fn host_path_volumes(_: &Value, spec: &Value) -> Option<(&'static str, String)> {
    let bad: Vec<String> = volumes(spec)
        .filter(|v| v.get("hostPath").is_some_and(|h| !h.is_null()))
        .map(name)
        .collect();
    (!bad.is_empty()).then(|| {
        (
            "hostPath volumes",
            format!(
                "{} {}",
                pluralize("volume", "volumes", bad.len()),
                join_quote(&bad)
            ),
        )
    })
}

fn host_ports(_: &Value, spec: &Value) -> Option<(&'static str, String)> {
    let mut bad = Vec::new();
    let mut ports = Vec::new();
    for c in containers(spec) {
        let used: Vec<String> = c
            .get("ports")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|p| p.get("hostPort").and_then(Value::as_i64))
            .filter(|p| *p != 0)
            .map(|p| p.to_string())
            .collect();
        if !used.is_empty() {
            bad.push(name(c));
            ports.extend(used);
        }
    }
    let ports = sorted(ports);
    (!bad.is_empty()).then(|| {
        (
            "hostPort",
            format!(
                "{} {} {} {} {}",
                pluralize("container", "containers", bad.len()),
                join_quote(&bad),
                pluralize("uses", "use", bad.len()),
                pluralize("hostPort", "hostPorts", ports.len()),
                ports.join(", ")
            ),
        )
    })
}

fn privileged(_: &Value, spec: &Value) -> Option<(&'static str, String)> {
    let bad = containers_where(spec, |c| sc(c, "/privileged") == Some(&Value::Bool(true)));
    (!bad.is_empty()).then(|| {
        (
            "privileged",
            format!(
                "{} {} must not set securityContext.privileged=true",
                pluralize("container", "containers", bad.len()),
                join_quote(&bad)
            ),
        )
    })
}

fn proc_mount(_: &Value, spec: &Value) -> Option<(&'static str, String)> {
    let mut bad = Vec::new();
    let mut values = Vec::new();
    for c in containers(spec) {
        if let Some(m) = sc(c, "/procMount")
            .and_then(Value::as_str)
            .filter(|m| *m != "Default")
        {
            bad.push(name(c));
            values.push(m.to_string());
        }
    }
    (!bad.is_empty()).then(|| {
        (
            "procMount",
            format!(
                "{} {} must not set securityContext.procMount to {}",
                pluralize("container", "containers", bad.len()),
                join_quote(&bad),
                join_quote(&sorted(values))
            ),
        )
    })
}

fn valid_seccomp(t: &str) -> bool {
    t == "RuntimeDefault" || t == "Localhost"
}

/// Pod and containers that set a seccomp type other than RuntimeDefault/Localhost, the bad
/// values, and the containers that set none.
fn seccomp_setters(spec: &Value) -> (Vec<String>, Vec<String>, Vec<String>, bool) {
    let mut setters = Vec::new();
    let mut values = Vec::new();
    let pod_type = spec
        .pointer("/securityContext/seccompProfile/type")
        .and_then(Value::as_str);
    let pod_ok = match pod_type {
        Some(t) if valid_seccomp(t) => true,
        Some(t) => {
            setters.push("pod".to_string());
            values.push(t.to_string());
            false
        }
        None => false,
    };
    let mut explicit = Vec::new();
    let mut implicit = Vec::new();
    for c in containers(spec) {
        match sc(c, "/seccompProfile/type").and_then(Value::as_str) {
            Some(t) if valid_seccomp(t) => {}
            Some(t) => {
                explicit.push(name(c));
                values.push(t.to_string());
            }
            None if !pod_ok => implicit.push(name(c)),
            None => {}
        }
    }
    if !explicit.is_empty() {
        setters.push(format!(
            "{} {}",
            pluralize("container", "containers", explicit.len()),
            join_quote(&explicit)
        ));
    }
    (setters, sorted(values), implicit, pod_ok)
}

fn seccomp_bad_setters(setters: &[String], values: &[String]) -> (&'static str, String) {
    (
        "seccompProfile",
        format!(
            "{} must not set securityContext.seccompProfile.type to {}",
            setters.join(" and "),
            join_quote(values)
        ),
    )
}

fn seccomp_baseline(_: &Value, spec: &Value) -> Option<(&'static str, String)> {
    // Baseline only forbids `Unconfined` (an unset profile is fine).
    let (setters, values, _, _) = seccomp_setters(spec);
    let unconfined: Vec<String> = values.into_iter().filter(|v| v == "Unconfined").collect();
    (!unconfined.is_empty()).then(|| seccomp_bad_setters(&setters, &unconfined))
}

// --- restricted ---

fn allow_privilege_escalation(_: &Value, spec: &Value) -> Option<(&'static str, String)> {
    let bad = containers_where(spec, |c| {
        sc(c, "/allowPrivilegeEscalation") != Some(&Value::Bool(false))
    });
    (!bad.is_empty()).then(|| {
        (
            "allowPrivilegeEscalation != false",
            format!(
                "{} {} must set securityContext.allowPrivilegeEscalation=false",
                pluralize("container", "containers", bad.len()),
                join_quote(&bad)
            ),
        )
    })
}

fn capabilities_restricted(_: &Value, spec: &Value) -> Option<(&'static str, String)> {
    let mut missing_drop = Vec::new();
    let mut adding = Vec::new();
    let mut caps = Vec::new();
    for c in containers(spec) {
        if sc(c, "/capabilities").is_none() {
            missing_drop.push(name(c));
            continue;
        }
        if !strings(sc(c, "/capabilities/drop"))
            .iter()
            .any(|d| d == "ALL")
        {
            missing_drop.push(name(c));
        }
        let extra: Vec<String> = strings(sc(c, "/capabilities/add"))
            .into_iter()
            .filter(|cap| cap != "NET_BIND_SERVICE")
            .collect();
        if !extra.is_empty() {
            adding.push(name(c));
            caps.extend(extra);
        }
    }
    let mut details = Vec::new();
    if !missing_drop.is_empty() {
        details.push(format!(
            "{} {} must set securityContext.capabilities.drop=[\"ALL\"]",
            pluralize("container", "containers", missing_drop.len()),
            join_quote(&missing_drop)
        ));
    }
    if !adding.is_empty() {
        details.push(format!(
            "{} {} must not include {} in securityContext.capabilities.add",
            pluralize("container", "containers", adding.len()),
            join_quote(&adding),
            join_quote(&sorted(caps))
        ));
    }
    (!details.is_empty()).then(|| ("unrestricted capabilities", details.join("; ")))
}

const ALLOWED_VOLUME_TYPES: &[&str] = &[
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "persistentVolumeClaim",
    "projected",
    "secret",
];

fn restricted_volumes(_: &Value, spec: &Value) -> Option<(&'static str, String)> {
    let mut bad = Vec::new();
    let mut types = Vec::new();
    for v in volumes(spec) {
        let source = v
            .as_object()
            .into_iter()
            .flatten()
            .find(|(k, val)| k.as_str() != "name" && !val.is_null())
            .map(|(k, _)| k.as_str());
        match source {
            None => {} // an empty source is defaulted to emptyDir by the API server
            Some(t) if ALLOWED_VOLUME_TYPES.contains(&t) => {}
            Some(t) => {
                bad.push(name(v));
                types.push(t.to_string());
            }
        }
    }
    let types = sorted(types);
    (!bad.is_empty()).then(|| {
        (
            "restricted volume types",
            format!(
                "{} {} {} {} {}",
                pluralize("volume", "volumes", bad.len()),
                join_quote(&bad),
                pluralize("uses", "use", bad.len()),
                pluralize(
                    "restricted volume type",
                    "restricted volume types",
                    types.len()
                ),
                join_quote(&types)
            ),
        )
    })
}

fn run_as_non_root(_: &Value, spec: &Value) -> Option<(&'static str, String)> {
    let mut setters = Vec::new();
    let pod_ok = match spec
        .pointer("/securityContext/runAsNonRoot")
        .and_then(Value::as_bool)
    {
        Some(false) => {
            setters.push("pod".to_string());
            false
        }
        Some(true) => true,
        None => false,
    };
    let mut explicit = Vec::new();
    let mut implicit = Vec::new();
    for c in containers(spec) {
        match sc(c, "/runAsNonRoot").and_then(Value::as_bool) {
            Some(false) => explicit.push(name(c)),
            Some(true) => {}
            None if !pod_ok => implicit.push(name(c)),
            None => {}
        }
    }
    if !explicit.is_empty() {
        setters.push(format!(
            "{} {}",
            pluralize("container", "containers", explicit.len()),
            join_quote(&explicit)
        ));
    }
    if !setters.is_empty() {
        return Some((
            "runAsNonRoot != true",
            format!(
                "{} must not set securityContext.runAsNonRoot=false",
                setters.join(" and ")
            ),
        ));
    }
    (!implicit.is_empty()).then(|| {
        (
            "runAsNonRoot != true",
            format!(
                "pod or {} {} must set securityContext.runAsNonRoot=true",
                pluralize("container", "containers", implicit.len()),
                join_quote(&implicit)
            ),
        )
    })
}

fn run_as_user(_: &Value, spec: &Value) -> Option<(&'static str, String)> {
    let mut setters = Vec::new();
    if spec
        .pointer("/securityContext/runAsUser")
        .and_then(Value::as_i64)
        == Some(0)
    {
        setters.push("pod".to_string());
    }
    let bad = containers_where(spec, |c| {
        sc(c, "/runAsUser").and_then(Value::as_i64) == Some(0)
    });
    if !bad.is_empty() {
        setters.push(format!(
            "{} {}",
            pluralize("container", "containers", bad.len()),
            join_quote(&bad)
        ));
    }
    (!setters.is_empty()).then(|| {
        (
            "runAsUser=0",
            format!("{} must not set runAsUser=0", setters.join(" and ")),
        )
    })
}

fn seccomp_restricted(_: &Value, spec: &Value) -> Option<(&'static str, String)> {
    let (setters, values, implicit, _) = seccomp_setters(spec);
    if !setters.is_empty() {
        return Some(seccomp_bad_setters(&setters, &values));
    }
    (!implicit.is_empty()).then(|| {
        (
            "seccompProfile",
            format!(
                "pod or {} {} must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\"",
                pluralize("container", "containers", implicit.len()),
                join_quote(&implicit)
            ),
        )
    })
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
