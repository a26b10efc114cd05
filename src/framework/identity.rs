//! Resource identity (protocol 6.9+, Terraform 1.12+): a small, versioned object naming the remote
//! object a resource manages, kept by Terraform beside the state, given by `import { identity =
//! {...} }` and reported by `terraform query`.
//!
//! A resource only declares its identity ([`IdentitySchema`]): which attributes, each taken from an
//! attribute of the state or fixed. Everything else lives here and in the dispatcher: the identity
//! of every state the provider returns (read, plan, apply, import, move, list), the import ID an
//! identity stands for, and the provider-bug check terraform-plugin-framework makes: once known,
//! an identity never changes without a replacement.

use super::{Diagnostic, Diagnostics};
use crate::values::{AttributePath, Type, Value, from_json};

/// Whether `import { identity = {...} }` must give an attribute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ForImport {
    Required,
    /// May be given; the provider knows it otherwise.
    Optional,
}

/// Where an identity attribute's value comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdentitySource {
    /// The top-level string attribute of this name in the resource's state.
    State(&'static str),
    /// Always this value (the object's name is fixed by the resource).
    Fixed(&'static str),
}

/// One identity attribute. Identity attributes are strings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdentityAttribute {
    pub name: &'static str,
    pub description: &'static str,
    pub for_import: ForImport,
    pub source: IdentitySource,
}

impl IdentityAttribute {
    /// An attribute import must give, copied from the state attribute of the same name.
    pub fn required(name: &'static str, description: &'static str) -> Self {
        Self {
            name,
            description,
            for_import: ForImport::Required,
            source: IdentitySource::State(name),
        }
    }

    /// An attribute whose value is always `value`; import may give it (it must then be `value`).
    pub fn fixed(name: &'static str, value: &'static str, description: &'static str) -> Self {
        Self {
            name,
            description,
            for_import: ForImport::Optional,
            source: IdentitySource::Fixed(value),
        }
    }
}

/// A resource type's identity: its version (bumped when the attributes change) and attributes.
/// The import ID an identity stands for is its required attributes joined by `/`, in declaration
/// order: the resources' import IDs are written that way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdentitySchema {
    pub version: i64,
    pub attributes: Vec<IdentityAttribute>,
}

impl IdentitySchema {
    pub fn new(version: i64, attributes: Vec<IdentityAttribute>) -> Self {
        Self {
            version,
            attributes,
        }
    }

    /// The identity of a namespaced Kubernetes object (version 0): its namespace, then its
    /// `name` attribute (required, or fixed where the type allows one name only); the import ID
    /// is `<namespace>/<name>`, or the namespace alone when the name is fixed.
    pub fn namespaced(namespace_doc: &'static str, name: IdentityAttribute) -> Self {
        Self::new(
            0,
            vec![
                IdentityAttribute::required("namespace", namespace_doc),
                name,
            ],
        )
    }

    /// The object type identity values have.
    pub fn value_type(&self) -> Type {
        Type::object(self.attributes.iter().map(|a| (a.name, Type::String)))
    }

    /// The identity of the object `state` describes: null for a null state; an attribute whose
    /// state attribute is unknown (a create before apply) is unknown.
    pub fn of_state(&self, state: &Value) -> Value {
        if state.is_null() {
            return Value::Null;
        }
        Value::Object(
            self.attributes
                .iter()
                .map(|a| {
                    let v = match a.source {
                        IdentitySource::State(attr) => {
                            state.attr(attr).cloned().unwrap_or(Value::Null)
                        }
                        IdentitySource::Fixed(v) => Value::string(v),
                    };
                    (a.name.to_owned(), v)
                })
                .collect(),
        )
    }

    /// The import ID `identity` (from `import { identity = {...} }`) stands for.
    ///
    /// # Errors
    /// A required attribute is missing or empty, or a fixed one is given another value: each an
    /// error at `identity.<attribute>`.
    pub fn import_id(&self, identity: &Value) -> Result<String, Diagnostics> {
        let mut diagnostics = Diagnostics::new();
        let mut parts = Vec::new();
        for a in &self.attributes {
            let given = identity.attr(a.name).and_then(Value::as_str);
            let at = AttributePath::attr("identity").then_attr(a.name);
            match (a.for_import, a.source, given) {
                (ForImport::Required, _, Some(v)) if !v.is_empty() => parts.push(v.to_owned()),
                (ForImport::Required, _, _) => diagnostics.error_at(
                    at,
                    "Missing identity attribute",
                    format!(
                        "Importing by identity needs `{}`: {}",
                        a.name, a.description
                    ),
                ),
                (ForImport::Optional, IdentitySource::Fixed(fixed), Some(v)) if v != fixed => {
                    diagnostics.error_at(
                        at,
                        "Invalid identity attribute",
                        format!(
                            "`{}` is always {fixed:?} for this resource, not {v:?}.",
                            a.name
                        ),
                    )
                }
                (ForImport::Optional, _, _) => {}
            }
        }
        match diagnostics.has_errors() {
            true => Err(diagnostics),
            false => Ok(parts.join("/")),
        }
    }

    /// Errors for every attribute `given` (an import's identity) sets that `imported` (the
    /// identity of the imported state) does not have.
    pub fn check_imported(&self, given: &Value, imported: &Value) -> Diagnostics {
        let mut diagnostics = Diagnostics::new();
        for a in &self.attributes {
            let (want, got) = (given.attr(a.name), imported.attr(a.name));
            if let Some(want) = want.filter(|v| !v.is_null()) {
                if Some(want) != got {
                    diagnostics.error_at(
                        AttributePath::attr("identity").then_attr(a.name),
                        "Imported object has another identity",
                        format!(
                            "The import asked for {} {}, the object found has {}.",
                            a.name,
                            show(Some(want)),
                            show(got)
                        ),
                    );
                }
            }
        }
        diagnostics
    }

    /// UpgradeResourceIdentity: an identity stored at `version`, as JSON, decoded at the current
    /// version (the only one so far); a newer version is refused, naming both.
    ///
    /// # Errors
    /// Another version, or JSON that is not an identity of this type.
    pub fn upgrade(&self, type_name: &str, version: i64, json: &[u8]) -> Result<Value, Diagnostic> {
        if version != self.version {
            return Err(Diagnostic::error(
                "Unsupported identity version",
                format!(
                    "The identity of this {type_name} was stored with identity version {version}; this provider has version {}. {}",
                    self.version,
                    match version > self.version {
                        true => "Upgrade the provider.",
                        false => "This is a bug in the provider; please report it.",
                    }
                ),
            ));
        }
        from_json(json, &self.value_type()).map_err(|e| {
            Diagnostic::error(
                "Stored identity could not be decoded",
                format!("The identity of this {type_name} in state is not one: {e}."),
            )
        })
    }
}

/// A value shown in a diagnostic (identities hold names, never secrets).
fn show(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => format!("{s:?}"),
        Some(v) if v.is_unknown() => "(known after apply)".into(),
        _ => "(none)".into(),
    }
}

/// An identity as `{a = "x", b = "y"}` for a diagnostic.
fn shown(identity: &Value) -> String {
    match identity {
        Value::Object(attrs) => {
            let parts: Vec<String> = attrs
                .iter()
                .map(|(k, v)| format!("{k} = {}", show(Some(v))))
                .collect();
            format!("{{{}}}", parts.join(", "))
        }
        _ => "(none)".into(),
    }
}

/// The operation that produced an identity, for the provider-bug diagnostic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdentityCheck {
    Plan,
    Read,
    Apply,
}

impl IdentityCheck {
    fn operation(self) -> &'static str {
        match self {
            IdentityCheck::Plan => "planning",
            IdentityCheck::Read => "read",
            IdentityCheck::Apply => "update",
        }
    }
}

/// terraform-plugin-framework's "Unexpected Identity Change": an identity that was known changed
/// without a replacement. Always a provider bug.
pub fn unexpected_change(check: IdentityCheck, before: &Value, after: &Value) -> Diagnostic {
    Diagnostic::error(
        "Unexpected Identity Change",
        format!(
            "During the {} operation, the provider unexpectedly returned a different identity than the previously stored one.\n\nThis is always a problem with the provider; please report it.\n\nPrevious identity: {}\n\nNew identity: {}",
            check.operation(),
            shown(before),
            shown(after)
        ),
    )
}

/// Whether an identity is absent or has no attribute set (Terraform sends such one for a state
/// written before the resource had identity).
pub fn is_unset(identity: &Value) -> bool {
    match identity {
        Value::Object(attrs) => attrs.values().all(Value::is_null),
        v => v.is_null(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn release() -> IdentitySchema {
        IdentitySchema::new(
            0,
            vec![
                IdentityAttribute::required("namespace", "The namespace."),
                IdentityAttribute::required("name", "The name."),
            ],
        )
    }

    fn flux() -> IdentitySchema {
        IdentitySchema::new(
            0,
            vec![
                IdentityAttribute::required("namespace", "The namespace."),
                IdentityAttribute::fixed("name", "flux", "Always `flux`."),
            ],
        )
    }

    fn identity(pairs: &[(&str, &str)]) -> Value {
        Value::object(pairs.iter().map(|(k, v)| (*k, Value::string(*v))))
    }

    #[test]
    fn identity_comes_from_the_state_and_fixed_values() {
        let state = Value::object([
            ("namespace", Value::string("flux-system")),
            ("other", Value::string("x")),
        ]);
        assert_eq!(
            flux().of_state(&state),
            identity(&[("namespace", "flux-system"), ("name", "flux")])
        );
        assert_eq!(release().of_state(&Value::Null), Value::Null);
        let planned = Value::object([
            ("namespace", Value::unknown()),
            ("name", Value::string("a")),
        ]);
        assert!(
            release()
                .of_state(&planned)
                .attr("namespace")
                .unwrap()
                .is_unknown()
        );
    }

    #[test]
    fn the_import_id_joins_the_required_attributes() {
        let id = release().import_id(&identity(&[("namespace", "apps"), ("name", "podinfo")]));
        assert_eq!(id.unwrap(), "apps/podinfo");
        let flux_id = flux().import_id(&identity(&[("namespace", "flux-system")]));
        assert_eq!(flux_id.unwrap(), "flux-system");
    }

    #[test]
    fn a_missing_or_contradicting_attribute_is_an_error_at_its_path() {
        let missing = release()
            .import_id(&Value::object([
                ("namespace", Value::string("apps")),
                ("name", Value::Null),
            ]))
            .unwrap_err();
        let d: Vec<_> = missing.into_iter().collect();
        assert_eq!(d.len(), 1);
        assert_eq!(
            d[0].attribute,
            Some(AttributePath::attr("identity").then_attr("name"))
        );
        let wrong = flux()
            .import_id(&identity(&[
                ("namespace", "flux-system"),
                ("name", "other"),
            ]))
            .unwrap_err();
        assert!(wrong.iter().any(|d| d.detail.contains("always \"flux\"")));
    }

    #[test]
    fn an_imported_object_with_another_identity_is_refused() {
        let given = identity(&[("namespace", "apps"), ("name", "a")]);
        assert!(!release().check_imported(&given, &given).has_errors());
        let other = identity(&[("namespace", "apps"), ("name", "b")]);
        assert!(release().check_imported(&given, &other).has_errors());
    }

    #[test]
    fn stored_identities_upgrade_at_the_current_version_only() {
        let json = br#"{"namespace":"apps","name":"a"}"#;
        assert_eq!(
            release()
                .upgrade("talosboot_helm_release", 0, json)
                .unwrap(),
            identity(&[("namespace", "apps"), ("name", "a")])
        );
        let newer = release()
            .upgrade("talosboot_helm_release", 1, json)
            .unwrap_err();
        assert!(newer.detail.contains("Upgrade the provider"));
    }

    #[test]
    fn the_provider_bug_names_both_identities() {
        let d = unexpected_change(
            IdentityCheck::Read,
            &identity(&[("name", "a")]),
            &identity(&[("name", "b")]),
        );
        assert_eq!(d.summary, "Unexpected Identity Change");
        assert!(d.detail.contains("name = \"a\"") && d.detail.contains("name = \"b\""));
    }
}
