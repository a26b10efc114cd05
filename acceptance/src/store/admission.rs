//! Admission: defaulting and validation per kind, on create and on update, with the real server's
//! field paths and messages for the cases clients depend on (names, Job immutability, ...).

use base64::Engine;
use serde_json::{Value, json};

use super::error::{ApiError, Cause, invalid_value, required};
use super::types::ResourceType;

const SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const DNS1035_MSG: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";

fn is_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

fn is_subdomain(s: &str) -> bool {
    !s.is_empty() && s.len() <= 253 && s.split('.').all(is_label)
}

/// Checks `metadata.name` for the resource's naming rule.
pub fn validate_name(ty: &ResourceType, name: &str) -> Option<Cause> {
    let v = json!(name);
    match ty.resource.as_str() {
        "namespaces" if !is_label(name) => Some(invalid_value("metadata.name", &v, LABEL_MSG)),
        "services" if !(is_label(name) && name.starts_with(|c: char| c.is_ascii_lowercase())) => {
            Some(invalid_value("metadata.name", &v, DNS1035_MSG))
        }
        _ if ty.group == "rbac.authorization.k8s.io" => {
            if name.contains('/') || name.contains('%') || name == "." || name == ".." {
                Some(invalid_value(
                    "metadata.name",
                    &v,
                    "may not contain '/' or '%'",
                ))
            } else {
                None
            }
        }
        "namespaces" | "services" => None,
        _ if !is_subdomain(name) => Some(invalid_value("metadata.name", &v, SUBDOMAIN_MSG)),
        _ => None,
    }
}

/// Types whose PUT creates a missing object (the real server's `AllowCreateOnUpdate`).
pub fn allows_create_on_update(ty: &ResourceType) -> bool {
    matches!(
        (ty.group.as_str(), ty.resource.as_str()),
        ("coordination.k8s.io", "leases")
            | ("", "endpoints")
            | ("", "events")
            | ("events.k8s.io", "events")
            | ("rbac.authorization.k8s.io", _)
    )
}

/// Whether a PUT may omit `metadata.resourceVersion` (`AllowUnconditionalUpdate`): not for
/// Leases and custom resources, like the real server.
pub fn allows_unconditional_update(ty: &ResourceType) -> bool {
    !(ty.custom || (ty.group == "coordination.k8s.io" && ty.resource == "leases"))
}

fn invalid(ty: &ResourceType, obj: &Value, causes: Vec<Cause>) -> Result<(), ApiError> {
    if causes.is_empty() {
        return Ok(());
    }
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    Err(ApiError::invalid(
        &ty.kind,
        &ty.group_resource(),
        name,
        causes,
    ))
}

fn set_default(obj: &mut Value, pointer: &str, value: Value) {
    if obj.pointer(pointer).is_some_and(|v| !v.is_null()) {
        return;
    }
    let mut cur = obj;
    for seg in pointer.trim_start_matches('/').split('/') {
        if !cur.is_object() {
            *cur = json!({});
        }
        cur = cur
            .as_object_mut()
            .map(|m| m.entry(seg.to_string()).or_insert(Value::Null))
            .expect("just made an object");
    }
    *cur = value;
}

/// Defaulting and validation on create. `metadata.uid` is already set.
pub fn on_create(ty: &ResourceType, obj: &mut Value) -> Result<(), ApiError> {
    default_and_validate(ty, obj, true)
}

/// Defaulting and validation on update, plus immutability rules against `old`.
pub fn on_update(ty: &ResourceType, old: &Value, new: &mut Value) -> Result<(), ApiError> {
    default_and_validate(ty, new, false)?;
    let mut causes = Vec::new();
    let immutable = |path: &str, causes: &mut Vec<Cause>| {
        let (o, n) = (old.pointer(path), new.pointer(path));
        if o != n {
            let field = path.trim_start_matches('/').replace('/', ".");
            causes.push(invalid_value(
                &field,
                n.unwrap_or(&Value::Null),
                "field is immutable",
            ));
        }
    };
    match (ty.group.as_str(), ty.resource.as_str()) {
        ("batch", "jobs") => {
            immutable("/spec/template", &mut causes);
            immutable("/spec/selector", &mut causes);
            immutable("/spec/completions", &mut causes);
        }
        ("", "secrets") | ("", "configmaps") => {
            if old.get("immutable") == Some(&json!(true)) {
                immutable("/data", &mut causes);
                immutable("/binaryData", &mut causes);
            }
            if ty.resource == "secrets" {
                immutable("/type", &mut causes);
            }
        }
        ("", "services") => immutable("/spec/clusterIP", &mut causes),
        ("rbac.authorization.k8s.io", "rolebindings" | "clusterrolebindings")
            if old.get("roleRef") != new.get("roleRef") =>
        {
            causes.push(invalid_value(
                "roleRef",
                &json!(go_role_ref(new.get("roleRef"))),
                "cannot change roleRef",
            ));
        }
        ("", "pods") => {
            let strip = |v: &Value| {
                let mut s = v.get("spec").cloned().unwrap_or(Value::Null);
                for c in s
                    .get_mut("containers")
                    .and_then(Value::as_array_mut)
                    .into_iter()
                    .flatten()
                {
                    if let Some(m) = c.as_object_mut() {
                        m.remove("image");
                    }
                }
                if let Some(m) = s.as_object_mut() {
                    m.remove("activeDeadlineSeconds");
                    m.remove("tolerations");
                    if old.pointer("/spec/nodeName").is_none() {
                        m.remove("nodeName");
                    }
                }
                s
            };
            if strip(old) != strip(new) {
                causes.push(Cause {
                    reason: "FieldValueForbidden".into(),
                    message: "Forbidden: pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)".into(),
                    field: "spec".into(),
                });
            }
        }
        _ => {}
    }
    invalid(ty, new, causes)
}

fn default_and_validate(
    ty: &ResourceType,
    obj: &mut Value,
    creating: bool,
) -> Result<(), ApiError> {
    let mut causes = metadata_causes(obj);
    match (ty.group.as_str(), ty.resource.as_str()) {
        ("", "namespaces") => {
            set_default(obj, "/spec/finalizers", json!(["kubernetes"]));
            if creating {
                set_default(obj, "/status/phase", json!("Active"));
            }
            let name = obj
                .pointer("/metadata/name")
                .cloned()
                .unwrap_or(Value::Null);
            set_default(
                obj,
                "/metadata/labels/kubernetes.io~1metadata.name",
                name.clone(),
            );
            if let Some(l) = obj
                .pointer_mut("/metadata/labels")
                .and_then(Value::as_object_mut)
            {
                l.remove("kubernetes.io~1metadata.name");
                l.insert("kubernetes.io/metadata.name".into(), name);
            }
        }
        ("", "secrets") => {
            data_key_causes(obj, &["data", "stringData"], &mut causes);
            secret(obj, &mut causes);
            if data_size(obj, &[], &["data"]) > MAX_DATA_BYTES {
                causes.push(too_long("data"));
            }
        }
        ("", "configmaps") => {
            data_key_causes(obj, &["data", "binaryData"], &mut causes);
            if data_size(obj, &["data"], &["binaryData"]) > MAX_DATA_BYTES {
                causes.push(too_long("[]"));
            }
        }
        ("coordination.k8s.io", "leases") => lease(obj, &mut causes)?,
        ("rbac.authorization.k8s.io", "rolebindings" | "clusterrolebindings") => {
            role_binding(ty, obj, &mut causes)
        }
        ("", "pods") => {
            pod_spec(obj, "/spec", "spec", &mut causes);
            if creating {
                set_default(obj, "/status/phase", json!("Pending"));
                set_default(obj, "/status/qosClass", json!("BestEffort"));
            }
        }
        ("", "services") => {
            set_default(obj, "/spec/type", json!("ClusterIP"));
            set_default(obj, "/spec/sessionAffinity", json!("None"));
            if creating && obj.pointer("/spec/type") != Some(&json!("ExternalName")) {
                let ip = obj
                    .pointer("/spec/clusterIP")
                    .and_then(Value::as_str)
                    .filter(|ip| !ip.is_empty())
                    .map(String::from)
                    .unwrap_or_else(|| cluster_ip(obj));
                set_default(obj, "/spec/clusterIP", json!(ip));
                set_default(obj, "/spec/clusterIPs", json!([ip]));
            }
            for p in obj
                .pointer_mut("/spec/ports")
                .and_then(Value::as_array_mut)
                .into_iter()
                .flatten()
            {
                set_default(p, "/protocol", json!("TCP"));
                let port = p.get("port").cloned().unwrap_or(Value::Null);
                set_default(p, "/targetPort", port);
            }
        }
        ("batch", "jobs") => job(obj, &mut causes),
        ("apps", "deployments")
        | ("apps", "daemonsets")
        | ("apps", "replicasets")
        | ("apps", "statefulsets") => workload(ty, obj, &mut causes),
        ("apiextensions.k8s.io", "customresourcedefinitions") => crd(obj, &mut causes),
        _ => {}
    }
    invalid(ty, obj, causes)
}

/// A ClusterIP in 10.96.0.0/16 derived from namespace/name (FNV-1a), never `.0`/`.1`/`.255`.
/// Collisions are possible and not checked: addresses are only printed, never routed.
fn cluster_ip(obj: &Value) -> String {
    let key = format!(
        "{}/{}",
        obj.pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or(""),
        obj.pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("")
    );
    let h = key.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    format!("10.96.{}.{}", (h >> 8) % 256, 2 + (h % 252))
}

const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
const NAME_PART_MSG: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const CONFIG_KEY_MSG: &str = "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')";

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`, at most 63 characters.
fn is_qualified_part(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && s.starts_with(|c: char| c.is_ascii_alphanumeric())
        && s.ends_with(|c: char| c.is_ascii_alphanumeric())
}

/// A label or annotation key: `[prefix/]name`, prefix a DNS subdomain.
fn key_cause(field: &str, key: &str) -> Option<Cause> {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    let v = json!(key);
    if !is_qualified_part(name) {
        return Some(invalid_value(field, &v, NAME_PART_MSG));
    }
    if prefix.is_some_and(|p| !is_subdomain(p)) {
        return Some(invalid_value(
            field,
            &v,
            &format!("prefix part {SUBDOMAIN_MSG}"),
        ));
    }
    None
}

/// Label keys and values, annotation keys (all kinds).
fn metadata_causes(obj: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    for (k, v) in obj
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        causes.extend(key_cause("metadata.labels", k));
        match v.as_str() {
            Some(val) if val.is_empty() || is_qualified_part(val) => {}
            _ => causes.push(invalid_value("metadata.labels", v, LABEL_VALUE_MSG)),
        }
    }
    for (k, v) in obj
        .pointer("/metadata/annotations")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        causes.extend(key_cause("metadata.annotations", k));
        if !v.is_string() {
            causes.push(invalid_value(
                "metadata.annotations",
                v,
                "annotation values must be strings",
            ));
        }
    }
    causes
}

/// ConfigMap and Secret data keys.
fn data_key_causes(obj: &Value, fields: &[&str], causes: &mut Vec<Cause>) {
    for field in fields {
        for k in obj
            .get(*field)
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .map(|(k, _)| k)
        {
            let ok = !k.is_empty()
                && k.len() <= 253
                && k.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
                && k != "."
                && k != "..";
            if !ok {
                causes.push(invalid_value(
                    &format!("{field}[{k}]"),
                    &json!(k),
                    CONFIG_KEY_MSG,
                ));
            }
        }
    }
}

/// The most data a ConfigMap or Secret may hold (keys plus values), like the real server.
const MAX_DATA_BYTES: usize = 1024 * 1024;

fn too_long(field: &str) -> Cause {
    Cause {
        reason: "FieldValueTooLong".into(),
        message: format!("Too long: must have at most {MAX_DATA_BYTES} bytes"),
        field: field.into(),
    }
}

/// Total size of keys and values: `text` maps count their strings, `base64` maps their decoded
/// bytes.
fn data_size(obj: &Value, text: &[&str], base64: &[&str]) -> usize {
    let engine = base64::engine::general_purpose::STANDARD;
    let entries = |field: &&str| {
        obj.get(*field)
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
    };
    let text_size: usize = text
        .iter()
        .flat_map(entries)
        .map(|(k, v)| k.len() + v.as_str().map_or(0, str::len))
        .sum();
    let binary_size: usize = base64
        .iter()
        .flat_map(entries)
        .map(|(k, v)| {
            let s = v.as_str().unwrap_or("");
            k.len() + engine.decode(s).map_or(s.len() / 4 * 3, |d| d.len())
        })
        .sum();
    text_size + binary_size
}

/// A Lease: `leaseDurationSeconds > 0`, `leaseTransitions >= 0`, and MicroTime timestamps
/// (`2006-01-02T15:04:05.000000Z07:00`), whose decoding errors are a 400 like the real server's.
fn lease(obj: &Value, causes: &mut Vec<Cause>) -> Result<(), ApiError> {
    for field in ["acquireTime", "renewTime"] {
        match obj.pointer(&format!("/spec/{field}")) {
            None | Some(Value::Null) => {}
            Some(Value::String(t)) => {
                if let Err(why) = parse_micro_time(t) {
                    return Err(ApiError::bad_request(format!(
                        "Lease in version \"v1\" cannot be handled as a Lease: {why}"
                    )));
                }
            }
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                    "Lease in version \"v1\" cannot be handled as a Lease: json: cannot unmarshal {} into Go struct field LeaseSpec.spec.{field} of type string",
                    json_type(other)
                )));
            }
        }
    }
    let num = |f: &str| obj.pointer(&format!("/spec/{f}")).filter(|v| !v.is_null());
    if let Some(v) = num("leaseDurationSeconds") {
        if v.as_i64().is_none_or(|d| d <= 0) {
            causes.push(invalid_value(
                "spec.leaseDurationSeconds",
                v,
                "must be greater than 0",
            ));
        }
    }
    if let Some(v) = num("leaseTransitions") {
        if v.as_i64().is_none_or(|d| d < 0) {
            causes.push(invalid_value(
                "spec.leaseTransitions",
                v,
                "must be greater than or equal to 0",
            ));
        }
    }
    Ok(())
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
        Value::String(_) => "string",
        Value::Null => "null",
    }
}

/// Go's `time.Parse` with `metav1.RFC3339Micro`, with its error wording for the usual mistakes
/// (e.g. a timestamp without microseconds: `cannot parse "Z" as ".000000"`).
fn parse_micro_time(value: &str) -> Result<(), String> {
    const LAYOUT: &str = "2006-01-02T15:04:05.000000Z07:00";
    let err = |rest: &str, elem: &str| {
        Err(format!(
            "parsing time {value:?} as {LAYOUT:?}: cannot parse {rest:?} as {elem:?}"
        ))
    };
    let digits =
        |s: &str, n: usize| s.len() >= n && s.as_bytes()[..n].iter().all(u8::is_ascii_digit);
    let mut rest = value;
    for (elem, n) in [
        ("2006", 4),
        ("-", 0),
        ("01", 2),
        ("-", 0),
        ("02", 2),
        ("T", 0),
        ("15", 2),
        (":", 0),
        ("04", 2),
        (":", 0),
        ("05", 2),
    ] {
        if n == 0 {
            match rest.strip_prefix(elem) {
                Some(r) => rest = r,
                None => return err(rest, elem),
            }
        } else if digits(rest, n) {
            rest = &rest[n..];
        } else {
            return err(rest, elem);
        }
    }
    match rest.strip_prefix('.') {
        Some(r) if digits(r, 6) => rest = &r[6..],
        _ => return err(rest, ".000000"),
    }
    if let Some(r) = rest.strip_prefix('Z') {
        rest = r;
    } else {
        let b = rest.as_bytes();
        let ok = b.len() >= 6
            && (b[0] == b'+' || b[0] == b'-')
            && digits(&rest[1..], 2)
            && b[3] == b':'
            && digits(&rest[4..], 2);
        if !ok {
            return err(rest, "Z07:00");
        }
        rest = &rest[6..];
    }
    if !rest.is_empty() {
        return Err(format!("parsing time {value:?}: extra text: {rest:?}"));
    }
    Ok(())
}

/// A roleRef as the real server prints it in `cannot change roleRef`.
fn go_role_ref(r: Option<&Value>) -> String {
    let f = |k: &str| {
        r.and_then(|r| r.get(k))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    format!(
        "rbac.RoleRef{{APIGroup:{:?}, Kind:{:?}, Name:{:?}}}",
        f("apiGroup"),
        f("kind"),
        f("name")
    )
}

/// RoleBinding / ClusterRoleBinding: `roleRef` defaulted and required, subjects defaulted.
fn role_binding(ty: &ResourceType, obj: &mut Value, causes: &mut Vec<Cause>) {
    const GROUP: &str = "rbac.authorization.k8s.io";
    if obj.get("roleRef").is_some_and(Value::is_object) {
        set_default(obj, "/roleRef/apiGroup", json!(GROUP));
        if obj.pointer("/roleRef/apiGroup") == Some(&json!("")) {
            obj["roleRef"]["apiGroup"] = json!(GROUP);
        }
    }
    for s in obj
        .get_mut("subjects")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        let group = match s.get("kind").and_then(Value::as_str) {
            Some("ServiceAccount") => "",
            Some("User") | Some("Group") => GROUP,
            _ => continue,
        };
        set_default(s, "/apiGroup", json!(group));
    }
    let s = |p: &str| obj.pointer(p).and_then(Value::as_str).unwrap_or("");
    if s("/roleRef/apiGroup") != GROUP {
        causes.push(Cause {
            reason: "FieldValueNotSupported".into(),
            message: format!(
                "Unsupported value: {:?}: supported values: \"{GROUP}\"",
                s("/roleRef/apiGroup")
            ),
            field: "roleRef.apiGroup".into(),
        });
    }
    let kinds: &[&str] = if ty.resource == "clusterrolebindings" {
        &["ClusterRole"]
    } else {
        &["Role", "ClusterRole"]
    };
    let kind = s("/roleRef/kind");
    if !kinds.contains(&kind) {
        let supported: Vec<String> = kinds.iter().map(|k| format!("{k:?}")).collect();
        causes.push(Cause {
            reason: "FieldValueNotSupported".into(),
            message: format!(
                "Unsupported value: {kind:?}: supported values: {}",
                supported.join(", ")
            ),
            field: "roleRef.kind".into(),
        });
    }
    let name = s("/roleRef/name");
    if name.is_empty() {
        causes.push(required("roleRef.name", ""));
    } else if name.contains('/') || name.contains('%') || name == "." || name == ".." {
        causes.push(invalid_value(
            "roleRef.name",
            &json!(name),
            "may not contain '/' or '%'",
        ));
    }
}

fn secret(obj: &mut Value, causes: &mut Vec<Cause>) {
    set_default(obj, "/type", json!("Opaque"));
    let engine = base64::engine::general_purpose::STANDARD;
    if let Some(Value::Object(sd)) = obj.as_object_mut().and_then(|m| m.remove("stringData")) {
        for (k, v) in sd {
            let text = v.as_str().unwrap_or("").to_string();
            set_default(obj, "/data", json!({}));
            if let Some(d) = obj.get_mut("data").and_then(Value::as_object_mut) {
                d.insert(k, json!(engine.encode(text)));
            }
        }
    }
    for (k, v) in obj
        .get("data")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        if v.as_str().is_none_or(|s| engine.decode(s).is_err()) {
            causes.push(invalid_value(
                &format!("data[{k}]"),
                v,
                "illegal base64 data",
            ));
        }
    }
}

fn pod_spec(obj: &mut Value, at: &str, field: &str, causes: &mut Vec<Cause>) {
    let Some(spec) = obj.pointer_mut(at) else {
        causes.push(required(&format!("{field}.containers"), ""));
        return;
    };
    set_default(spec, "/restartPolicy", json!("Always"));
    set_default(spec, "/dnsPolicy", json!("ClusterFirst"));
    set_default(spec, "/schedulerName", json!("default-scheduler"));
    set_default(spec, "/terminationGracePeriodSeconds", json!(30));
    set_default(spec, "/securityContext", json!({}));
    match spec.get_mut("containers").and_then(Value::as_array_mut) {
        Some(cs) if !cs.is_empty() => {
            for (i, c) in cs.iter_mut().enumerate() {
                if c.get("name")
                    .and_then(Value::as_str)
                    .is_none_or(str::is_empty)
                {
                    causes.push(required(&format!("{field}.containers[{i}].name"), ""));
                }
                match c.get("image").and_then(Value::as_str) {
                    Some(img) if !img.is_empty() => {
                        let tagged = img
                            .rsplit('/')
                            .next()
                            .is_some_and(|l| l.contains(':') || l.contains('@'));
                        let policy = if !tagged || img.ends_with(":latest") {
                            "Always"
                        } else {
                            "IfNotPresent"
                        };
                        set_default(c, "/imagePullPolicy", json!(policy));
                    }
                    _ => causes.push(required(&format!("{field}.containers[{i}].image"), "")),
                }
                set_default(c, "/terminationMessagePath", json!("/dev/termination-log"));
                set_default(c, "/terminationMessagePolicy", json!("File"));
            }
        }
        _ => causes.push(required(&format!("{field}.containers"), "")),
    }
}

fn job(obj: &mut Value, causes: &mut Vec<Cause>) {
    let uid = obj.pointer("/metadata/uid").cloned().unwrap_or(Value::Null);
    let name = obj
        .pointer("/metadata/name")
        .cloned()
        .unwrap_or(Value::Null);
    set_default(obj, "/spec/backoffLimit", json!(6));
    set_default(obj, "/spec/completions", json!(1));
    set_default(obj, "/spec/parallelism", json!(1));
    set_default(obj, "/spec/completionMode", json!("NonIndexed"));
    set_default(obj, "/spec/suspend", json!(false));
    set_default(
        obj,
        "/spec/podReplacementPolicy",
        json!("TerminatingOrFailed"),
    );
    if obj.pointer("/spec/manualSelector") != Some(&json!(true)) {
        set_default(
            obj,
            "/spec/selector",
            json!({"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}),
        );
        if obj.pointer("/spec/template").is_some_and(Value::is_object) {
            set_default(obj, "/spec/template/metadata/labels", json!({}));
            if let Some(labels) = obj
                .pointer_mut("/spec/template/metadata/labels")
                .and_then(Value::as_object_mut)
            {
                labels.insert("batch.kubernetes.io/controller-uid".into(), uid.clone());
                labels.insert("controller-uid".into(), uid);
                labels.insert("batch.kubernetes.io/job-name".into(), name.clone());
                labels.insert("job-name".into(), name);
            }
        }
    }
    if obj.pointer("/spec/template").is_none() {
        causes.push(required("spec.template", ""));
        return;
    }
    let rp = obj.pointer("/spec/template/spec/restartPolicy").cloned();
    pod_spec(obj, "/spec/template/spec", "spec.template.spec", causes);
    match rp.as_ref().and_then(Value::as_str) {
        Some("Never") | Some("OnFailure") => {}
        Some(other) => causes.push(Cause {
            reason: "FieldValueNotSupported".into(),
            message: format!(
                "Unsupported value: \"{other}\": supported values: \"OnFailure\", \"Never\""
            ),
            field: "spec.template.spec.restartPolicy".into(),
        }),
        None => causes.push(required(
            "spec.template.spec.restartPolicy",
            "valid values: \"OnFailure\", \"Never\"",
        )),
    }
}

fn workload(ty: &ResourceType, obj: &mut Value, causes: &mut Vec<Cause>) {
    if ty.resource == "deployments" || ty.resource == "replicasets" || ty.resource == "statefulsets"
    {
        set_default(obj, "/spec/replicas", json!(1));
    }
    set_default(obj, "/spec/revisionHistoryLimit", json!(10));
    match ty.resource.as_str() {
        "deployments" => {
            set_default(obj, "/spec/progressDeadlineSeconds", json!(600));
            set_default(
                obj,
                "/spec/strategy",
                json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}}),
            );
        }
        "daemonsets" => {
            set_default(
                obj,
                "/spec/updateStrategy",
                json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}),
            );
        }
        _ => {}
    }
    let Some(match_labels) = obj.pointer("/spec/selector").cloned() else {
        causes.push(required("spec.selector", ""));
        return;
    };
    pod_spec(obj, "/spec/template/spec", "spec.template.spec", causes);
    let labels = obj
        .pointer("/spec/template/metadata/labels")
        .cloned()
        .unwrap_or(json!({}));
    let matches = match_labels
        .get("matchLabels")
        .and_then(Value::as_object)
        .is_none_or(|m| m.iter().all(|(k, v)| labels.get(k) == Some(v)));
    if !matches {
        causes.push(invalid_value(
            "spec.template.metadata.labels",
            &labels,
            "`selector` does not match template `labels`",
        ));
    }
}

fn crd(obj: &mut Value, causes: &mut Vec<Cause>) {
    let group = obj
        .pointer("/spec/group")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let plural = obj
        .pointer("/spec/names/plural")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let name = obj
        .pointer("/metadata/name")
        .cloned()
        .unwrap_or(Value::Null);
    if group.is_empty() {
        causes.push(required("spec.group", ""));
    }
    if plural.is_empty() {
        causes.push(required("spec.names.plural", ""));
    }
    if obj
        .pointer("/spec/names/kind")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        causes.push(required("spec.names.kind", ""));
    }
    if name.as_str() != Some(format!("{plural}.{group}").as_str()) {
        causes.push(invalid_value(
            "metadata.name",
            &name,
            "must be spec.names.plural+\".\"+spec.group",
        ));
    }
    let versions = obj
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if versions.is_empty() {
        causes.push(required(
            "spec.versions",
            "must have exactly one version marked as storage version",
        ));
    }
    if let Some(names) = obj.pointer("/spec/names").cloned() {
        let mut accepted = names;
        let kind = accepted
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        set_default(&mut accepted, "/singular", json!(kind.to_lowercase()));
        set_default(&mut accepted, "/listKind", json!(format!("{kind}List")));
        set_default(obj, "/spec/names/singular", accepted["singular"].clone());
        set_default(obj, "/spec/names/listKind", accepted["listKind"].clone());
        let stored: Vec<Value> = versions
            .iter()
            .filter(|v| v.get("storage") == Some(&json!(true)))
            .filter_map(|v| v.get("name").cloned())
            .collect();
        let now = crate::util::now_rfc3339();
        obj["status"] = json!({
            "acceptedNames": accepted,
            "storedVersions": stored,
            "conditions": [
                {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts", "message": "no conflicts found", "lastTransitionTime": now},
                {"type": "Established", "status": "True", "reason": "InitialNamesAccepted", "message": "the initial names have been accepted", "lastTransitionTime": now},
            ],
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::types::GroupResource;
    use crate::store::types::Registry;

    fn ty(g: &str, r: &str) -> ResourceType {
        Registry::builtin()
            .get(&GroupResource::new(g, r))
            .cloned()
            .unwrap()
    }

    #[test]
    fn names_follow_the_resource_rule() {
        assert!(validate_name(&ty("", "configmaps"), "a.b-c").is_none());
        let c = validate_name(&ty("", "configmaps"), "Bad_Name").unwrap();
        assert!(
            c.message
                .starts_with("Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain")
        );
        assert!(validate_name(&ty("", "namespaces"), "a.b").is_some());
        assert!(
            validate_name(&ty("rbac.authorization.k8s.io", "clusterroles"), "system:x").is_none()
        );
    }

    #[test]
    fn labels_annotations_and_data_keys_are_checked() {
        let cm = ty("", "configmaps");
        let mut ok = json!({"metadata": {"name": "c", "labels": {"app.kubernetes.io/name": "x", "empty": ""},
            "annotations": {"meta.helm.sh/release-name": "cilium"}}, "data": {"a.b_C-1": "v"}});
        on_create(&cm, &mut ok).unwrap();
        let mut bad = json!({"metadata": {"name": "c", "labels": {"app": "has space"}}});
        let e = on_create(&cm, &mut bad).unwrap_err();
        assert!(e.message.starts_with("ConfigMap \"c\" is invalid: metadata.labels: Invalid value: \"has space\": a valid label must be"), "{}", e.message);
        let mut bad = json!({"metadata": {"name": "c"}, "data": {"bad key": "v"}});
        let e = on_create(&cm, &mut bad).unwrap_err();
        assert!(
            e.message
                .contains("data[bad key]: Invalid value: \"bad key\": a valid config key"),
            "{}",
            e.message
        );
        let mut bad = json!({"metadata": {"name": "c", "annotations": {"-x": "v"}}});
        assert!(on_create(&cm, &mut bad).is_err());
    }

    #[test]
    fn job_template_is_immutable_and_defaulted() {
        let t = ty("batch", "jobs");
        let mut job = json!({"metadata": {"name": "j", "uid": "u1"},
            "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox:1"}]}}}});
        on_create(&t, &mut job).unwrap();
        assert_eq!(
            job.pointer("/spec/template/metadata/labels/job-name"),
            Some(&json!("j"))
        );
        assert_eq!(
            job.pointer("/spec/selector/matchLabels/batch.kubernetes.io~1controller-uid"),
            Some(&json!("u1"))
        );
        let mut changed = job.clone();
        changed["spec"]["template"]["spec"]["containers"][0]["image"] = json!("busybox:2");
        let e = on_update(&t, &job, &mut changed).unwrap_err();
        assert_eq!(e.code, 422);
        assert!(
            e.message
                .starts_with("Job.batch \"j\" is invalid: spec.template: Invalid value: "),
            "{}",
            e.message
        );
        assert!(e.message.ends_with("field is immutable"));
    }
}
