//! The Pod Security Standards checks, one function per check of
//! `k8s.io/pod-security-admission/policy` (baseline, then restricted), each returning the
//! real `(ForbiddenReason, ForbiddenDetail)` when the pod fails it.

use serde_json::Value;

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

pub(super) fn capabilities_baseline(_: &Value, spec: &Value) -> Option<(&'static str, String)> {
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

pub(super) fn host_namespaces(_: &Value, spec: &Value) -> Option<(&'static str, String)> {
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

pub(super) fn host_path_volumes(_: &Value, spec: &Value) -> Option<(&'static str, String)> {
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

pub(super) fn host_ports(_: &Value, spec: &Value) -> Option<(&'static str, String)> {
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

pub(super) fn privileged(_: &Value, spec: &Value) -> Option<(&'static str, String)> {
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

pub(super) fn proc_mount(_: &Value, spec: &Value) -> Option<(&'static str, String)> {
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

pub(super) fn seccomp_baseline(_: &Value, spec: &Value) -> Option<(&'static str, String)> {
    // Baseline only forbids `Unconfined` (an unset profile is fine).
    let (setters, values, _, _) = seccomp_setters(spec);
    let unconfined: Vec<String> = values.into_iter().filter(|v| v == "Unconfined").collect();
    (!unconfined.is_empty()).then(|| seccomp_bad_setters(&setters, &unconfined))
}

// --- restricted ---

pub(super) fn allow_privilege_escalation(
    _: &Value,
    spec: &Value,
) -> Option<(&'static str, String)> {
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

pub(super) fn capabilities_restricted(_: &Value, spec: &Value) -> Option<(&'static str, String)> {
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

pub(super) fn restricted_volumes(_: &Value, spec: &Value) -> Option<(&'static str, String)> {
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

pub(super) fn run_as_non_root(_: &Value, spec: &Value) -> Option<(&'static str, String)> {
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

pub(super) fn run_as_user(_: &Value, spec: &Value) -> Option<(&'static str, String)> {
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

pub(super) fn seccomp_restricted(_: &Value, spec: &Value) -> Option<(&'static str, String)> {
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
