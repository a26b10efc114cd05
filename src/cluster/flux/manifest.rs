//! Manifests as users write them (`instance_yaml`, `prerequisites.yamls`, `secrets_yaml`): multi-document
//! YAML parsing that never echoes the input, object identity (`Kind/namespace/name`, the module's
//! inventory line format) and strict `${var}` substitution of runtime info.
//!
//! Substitution works as the module's `flux envsubst --strict` does, over the text before parsing
//! ([`parse_substituted`]), so `replicas: ${n}` becomes a number and `${list}` can be a flow list.
//! `$${x}` writes a literal `${x}`; `$x` is left alone; a placeholder without a value (and
//! without `${x:-default}`) is an error, in comments too. One safety is kept where it changes no
//! result a module root can rely on: when a value would change the YAML around its placeholder (a
//! newline, a `: ` or `#` in a plain scalar, a quote inside a quoted one: invalid YAML or other
//! objects under `flux envsubst`), the document is substituted inside its parsed scalars instead,
//! so each value is the string it says.

use std::collections::BTreeMap;
use std::fmt;

use serde_json::Value as Json;

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ManifestError {
    /// Never quotes the document: it may hold secret material.
    #[error("{what} is not valid YAML (line {line}, column {column})")]
    Yaml {
        what: String,
        line: usize,
        column: usize,
    },
    #[error("{what} is not valid YAML")]
    YamlNoLocation { what: String },
    #[error(
        "document {index} of {what} is not a Kubernetes object (a mapping with apiVersion and kind)"
    )]
    NotAnObject { what: String, index: usize },
    #[error("document {index} of {what} has no metadata.name")]
    NoName { what: String, index: usize },
    #[error("{what} uses ${{{name}}}, but no runtime variable {name:?} is set")]
    MissingVariable { what: String, name: String },
    #[error("{what} has an unterminated `${{` placeholder")]
    Unterminated { what: String },
}

/// One Kubernetes object from a manifest.
#[derive(Clone, PartialEq)]
pub struct Manifest {
    pub object: Json,
}

/// Objects may be Secrets: never print their content.
impl fmt::Debug for Manifest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Manifest({})", self.reference())
    }
}

impl Manifest {
    fn field(&self, pointer: &str) -> &str {
        self.object
            .pointer(pointer)
            .and_then(Json::as_str)
            .unwrap_or_default()
    }
    pub fn api_version(&self) -> &str {
        self.field("/apiVersion")
    }
    pub fn kind(&self) -> &str {
        self.field("/kind")
    }
    pub fn name(&self) -> &str {
        self.field("/metadata/name")
    }
    /// Empty for cluster-scoped objects or when the manifest leaves it to the default.
    pub fn namespace(&self) -> &str {
        self.field("/metadata/namespace")
    }
    /// The API group (`""` for core).
    pub fn group(&self) -> &str {
        self.api_version()
            .rsplit_once('/')
            .map_or("", |(group, _)| group)
    }
    pub fn version(&self) -> &str {
        self.api_version()
            .rsplit_once('/')
            .map_or(self.api_version(), |(_, version)| version)
    }
    pub fn reference(&self) -> ObjectRef {
        ObjectRef::new(self.kind(), self.namespace(), self.name())
    }
    /// Sets `metadata.namespace`.
    pub fn set_namespace(&mut self, namespace: &str) {
        if let Some(meta) = self
            .object
            .get_mut("metadata")
            .and_then(Json::as_object_mut)
        {
            meta.insert("namespace".into(), Json::String(namespace.to_owned()));
        }
    }
}

/// `Kind/namespace/name`, as in the module's inventory ConfigMap (namespace empty when cluster-scoped).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectRef {
    pub kind: String,
    pub namespace: String,
    pub name: String,
}

impl ObjectRef {
    pub fn new(kind: &str, namespace: &str, name: &str) -> Self {
        Self {
            kind: kind.to_owned(),
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        }
    }
    /// Parses `Kind/namespace/name` (the inventory line without its `- `).
    pub fn parse(line: &str) -> Option<Self> {
        let mut parts = line.trim().splitn(3, '/');
        let (kind, namespace, name) = (parts.next()?, parts.next()?, parts.next()?);
        (!kind.is_empty() && !name.is_empty()).then(|| Self::new(kind, namespace, name))
    }
}

impl fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}/{}", self.kind, self.namespace, self.name)
    }
}

/// Parses every non-empty document of `text` into an object with `apiVersion`, `kind` and a name.
/// `what` names the input in errors (e.g. `gitops_resources.instance_yaml`).
pub fn parse_documents(text: &str, what: &str) -> Result<Vec<Manifest>, ManifestError> {
    objects(parse_yaml_documents(text, what)?, what)
}

/// [`parse_documents`] of `text` with its placeholders substituted ([`parse_substituted`]).
///
/// # Errors
/// As both.
pub fn parse_documents_substituted(
    text: &str,
    vars: &BTreeMap<String, String>,
    what: &str,
) -> Result<Vec<Manifest>, ManifestError> {
    objects(parse_substituted(text, vars, what)?, what)
}

/// Documents as Kubernetes objects: each with `apiVersion`, `kind` and a name.
fn objects(docs: Vec<Json>, what: &str) -> Result<Vec<Manifest>, ManifestError> {
    docs.into_iter()
        .enumerate()
        .map(|(i, object)| {
            let index = i + 1;
            let manifest = Manifest { object };
            if !manifest.object.is_object()
                || manifest.api_version().is_empty()
                || manifest.kind().is_empty()
            {
                return Err(ManifestError::NotAnObject {
                    what: what.to_owned(),
                    index,
                });
            }
            if manifest.name().is_empty() {
                return Err(ManifestError::NoName {
                    what: what.to_owned(),
                    index,
                });
            }
            Ok(manifest)
        })
        .collect()
}

/// The documents of `text` with its `${var}` placeholders substituted as `flux envsubst --strict`
/// does (over the text), unless a value would change the YAML around its placeholder: then with
/// each placeholder substituted inside its parsed scalar (see the module header). Errors never
/// quote the text or a value.
///
/// # Errors
/// A missing variable, an unterminated placeholder, YAML that does not parse either way.
pub fn parse_substituted(
    text: &str,
    vars: &BTreeMap<String, String>,
    what: &str,
) -> Result<Vec<Json>, ManifestError> {
    let textual = substitute_str(text, vars, what)?;
    let safe = parse_yaml_documents(text, what).and_then(|mut docs| {
        for doc in &mut docs {
            substitute(doc, vars, what)?;
        }
        Ok(docs)
    });
    let Ok(safe) = safe else {
        // The template itself is no YAML until substituted (e.g. a placeholder as a whole block).
        return parse_yaml_documents(&textual, what);
    };
    match parse_yaml_documents(&textual, what) {
        Ok(docs)
            if docs.len() == safe.len()
                && docs.iter().zip(&safe).all(|(t, s)| same_but_typed(t, s)) =>
        {
            Ok(docs)
        }
        _ => Ok(safe),
    }
}

/// The non-empty documents of a YAML stream.
fn parse_yaml_documents(text: &str, what: &str) -> Result<Vec<Json>, ManifestError> {
    let docs: Vec<Json> = serde_saphyr::from_multiple(text).map_err(|e| match e.location() {
        Some(at) => ManifestError::Yaml {
            what: what.to_owned(),
            line: at.line() as usize,
            column: at.column() as usize,
        },
        None => ManifestError::YamlNoLocation {
            what: what.to_owned(),
        },
    })?;
    Ok(docs.into_iter().filter(|d| !d.is_null()).collect())
}

/// Whether `textual` (substituted over the text) is `safe` (substituted inside scalars) up to the
/// typing of whole scalars: a string of `safe` may be, in `textual`, what that string reads as in
/// YAML (`3`, `true`, `[a, b]`); the structure around it must be the same.
fn same_but_typed(textual: &Json, safe: &Json) -> bool {
    match (textual, safe) {
        (t, s) if t == s => true,
        (Json::Object(t), Json::Object(s)) => {
            t.len() == s.len()
                && t.iter()
                    .all(|(k, v)| s.get(k).is_some_and(|sv| same_but_typed(v, sv)))
        }
        (Json::Array(t), Json::Array(s)) => {
            t.len() == s.len() && t.iter().zip(s).all(|(a, b)| same_but_typed(a, b))
        }
        (t, Json::String(s)) if s.trim().is_empty() => t.is_null(),
        (t, Json::String(s)) => serde_saphyr::from_str::<Json>(s).is_ok_and(|typed| typed == *t),
        _ => false,
    }
}

/// Substitutes `${name}` (and `${name:-default}` / `${name:=default}`) in every string and key of
/// `value`. `what` names the input in errors.
pub fn substitute(
    value: &mut Json,
    vars: &BTreeMap<String, String>,
    what: &str,
) -> Result<(), ManifestError> {
    match value {
        Json::String(s) => *s = substitute_str(s, vars, what)?,
        Json::Array(items) => {
            for item in items {
                substitute(item, vars, what)?;
            }
        }
        Json::Object(map) => {
            let entries = std::mem::take(map);
            for (key, mut item) in entries {
                substitute(&mut item, vars, what)?;
                map.insert(substitute_str(&key, vars, what)?, item);
            }
        }
        _ => {}
    }
    Ok(())
}

/// Substitutes the placeholders of one string.
pub fn substitute_str(
    text: &str,
    vars: &BTreeMap<String, String>,
    what: &str,
) -> Result<String, ManifestError> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        if let Some(after) = tail.strip_prefix("$${") {
            out.push_str("${");
            rest = after;
        } else if let Some(body) = tail.strip_prefix("${") {
            let end = body.find('}').ok_or_else(|| ManifestError::Unterminated {
                what: what.to_owned(),
            })?;
            out.push_str(&resolve(&body[..end], vars, what)?);
            rest = &body[end + 1..];
        } else {
            out.push('$');
            rest = &tail[1..];
        }
    }
    out.push_str(rest);
    Ok(out)
}

fn resolve(
    expr: &str,
    vars: &BTreeMap<String, String>,
    what: &str,
) -> Result<String, ManifestError> {
    let (name, default) = match expr.split_once(":-").or_else(|| expr.split_once(":=")) {
        Some((name, default)) => (name, Some(default)),
        None => (expr, None),
    };
    // As envsubst: the default stands for an unset or empty variable.
    match (
        vars.get(name)
            .filter(|v| !v.is_empty() || default.is_none()),
        default,
    ) {
        (Some(value), _) => Ok(value.clone()),
        (None, Some(default)) => Ok(default.to_owned()),
        (None, None) => Err(ManifestError::MissingVariable {
            what: what.to_owned(),
            name: name.to_owned(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn documents_are_parsed_and_empty_ones_skipped() {
        let text = "---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: a\n---\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: b, namespace: x}\n";
        let docs = parse_documents(text, "secrets_yaml").expect("parse");
        assert_eq!(docs.len(), 2);
        assert_eq!(docs[1].reference().to_string(), "Secret/x/b");
        assert_eq!(docs[0].group(), "");
        assert_eq!(docs[0].version(), "v1");
        assert!(parse_documents("", "x").expect("empty").is_empty());
    }

    #[test]
    fn yaml_errors_never_quote_the_input() {
        let err = parse_documents("stringData:\n  password: \"hunter2\n", "secrets_yaml")
            .expect_err("invalid");
        let text = err.to_string();
        assert!(!text.contains("hunter2"), "{text}");
        assert!(text.starts_with("secrets_yaml is not valid YAML"), "{text}");
    }

    #[test]
    fn objects_need_kind_and_name() {
        assert_eq!(
            parse_documents("a: b\n", "x"),
            Err(ManifestError::NotAnObject {
                what: "x".into(),
                index: 1
            })
        );
        assert_eq!(
            parse_documents("apiVersion: v1\nkind: Secret\n", "x"),
            Err(ManifestError::NoName {
                what: "x".into(),
                index: 1
            })
        );
    }

    #[test]
    fn substitution_keeps_awkward_values_intact() {
        let v = vars(&[("A", "it's a \"quoted\" value: $HOME ${NOT}"), ("B", "x")]);
        let mut doc: Json =
            serde_json::json!({"data": {"k": "pre ${A} post", "${B}": ["${B}${B}"]}});
        substitute(&mut doc, &v, "instance_yaml").expect("substitute");
        assert_eq!(
            doc["data"]["k"],
            "pre it's a \"quoted\" value: $HOME ${NOT} post"
        );
        assert_eq!(doc["data"]["x"][0], "xx");
    }

    #[test]
    fn substitution_is_strict_with_defaults_and_escapes() {
        let v = vars(&[]);
        assert_eq!(
            substitute_str("${MISSING}", &v, "instance_yaml"),
            Err(ManifestError::MissingVariable {
                what: "instance_yaml".into(),
                name: "MISSING".into()
            })
        );
        assert_eq!(
            substitute_str("${X:-dflt} $${Y} $Z", &v, "w").as_deref(),
            Ok("dflt ${Y} $Z")
        );
        assert!(matches!(
            substitute_str("${X", &v, "w"),
            Err(ManifestError::Unterminated { .. })
        ));
    }

    /// The module's documented use: `runtime_info.data` (`cluster_name = "staging"`,
    /// `cluster_region = "eu-west-2"`) substituted into the FluxInstance and the prerequisites.
    #[test]
    fn placeholders_are_substituted_over_the_text_as_flux_envsubst_does() {
        let v = vars(&[
            ("cluster_name", "staging"),
            ("cluster_region", "eu-west-2"),
            ("multitenant", "true"),
            ("replicas", "3"),
            ("zones", "[eu-west-2a, eu-west-2b]"),
        ]);
        let instance = "apiVersion: fluxcd.controlplane.io/v1\nkind: FluxInstance\nmetadata:\n  name: flux\n  namespace: flux-system\n  # staging is ${cluster_name}\nspec:\n  cluster:\n    multitenant: ${multitenant}\n    domain: \"${cluster_name}.local\"\n  sync:\n    kind: GitRepository\n    path: clusters/${cluster_name}\n";
        let docs = parse_documents_substituted(instance, &v, "instance_yaml").expect("parse");
        let spec = &docs[0].object["spec"];
        assert_eq!(spec["cluster"]["multitenant"], serde_json::json!(true));
        assert_eq!(spec["cluster"]["domain"], "staging.local");
        assert_eq!(spec["sync"]["path"], "clusters/staging");
        let nodes = "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata:\n  name: ${cluster_name}-${cluster_region}\nspec:\n  replicas: ${replicas}\n  quoted: \"${replicas}\"\n  zones: ${zones}\n  literal: $${cluster_name} $HOME\n";
        let docs = parse_documents_substituted(nodes, &v, "prerequisites.yamls[0]").expect("parse");
        let o = &docs[0].object;
        assert_eq!(docs[0].name(), "staging-eu-west-2");
        assert_eq!(
            o["spec"]["replicas"],
            serde_json::json!(3),
            "a number, as the module makes it"
        );
        assert_eq!(o["spec"]["quoted"], "3", "quoted stays a string");
        assert_eq!(
            o["spec"]["zones"],
            serde_json::json!(["eu-west-2a", "eu-west-2b"])
        );
        assert_eq!(o["spec"]["literal"], "${cluster_name} $HOME");
    }

    #[test]
    fn a_value_that_would_change_the_yaml_around_it_stays_the_string_it_says() {
        let v = vars(&[
            ("n", "3"),
            ("desc", "a: b"),
            ("inject", "x\nevil: 1"),
            ("quote", "say \"hi\""),
        ]);
        for (text, key, expected) in [
            ("desc: ${desc}\nn: ${n}\n", "desc", "a: b"),
            ("desc: ${inject}\nn: ${n}\n", "desc", "x\nevil: 1"),
            ("desc: \"${quote}\"\nn: ${n}\n", "desc", "say \"hi\""),
        ] {
            let docs = parse_substituted(text, &v, "values_yaml").expect("parse");
            assert_eq!(docs[0][key], expected, "{text}");
            assert!(docs[0].get("evil").is_none(), "{text}");
        }
    }

    #[test]
    fn placeholders_in_comments_are_strict_and_defaults_cover_empty_values() {
        let v = vars(&[("EMPTY", "")]);
        assert_eq!(
            parse_substituted("a: 1 # ${MISSING}\n", &v, "values_yaml"),
            Err(ManifestError::MissingVariable {
                what: "values_yaml".into(),
                name: "MISSING".into()
            })
        );
        let docs =
            parse_substituted("a: ${EMPTY:-fallback}\nb: ${EMPTY}x\n", &v, "w").expect("parse");
        assert_eq!(docs[0]["a"], "fallback");
        assert_eq!(docs[0]["b"], "x");
    }

    #[test]
    fn inventory_lines_round_trip() {
        let r = ObjectRef::parse("Secret/flux-system/flux-system").expect("parse");
        assert_eq!(r, ObjectRef::new("Secret", "flux-system", "flux-system"));
        assert_eq!(r.to_string(), "Secret/flux-system/flux-system");
        assert_eq!(ObjectRef::parse("garbage"), None);
    }
}
