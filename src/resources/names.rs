//! The Kubernetes and Helm name rules every resource checks its inputs against, without I/O,
//! and the one diagnostic for each rule broken.

use crate::framework::Diagnostics;
use crate::values::AttributePath;

/// RFC 1123 label, as Kubernetes requires of namespace names: lower-case letters, digits and
/// `-`, starting and ending with a letter or digit, at most 63 characters.
pub fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// Helm's release name rule: dot-separated RFC 1123 labels, at most 53 characters.
pub fn is_release_name(s: &str) -> bool {
    s.len() <= 53 && s.split('.').all(is_dns_label)
}

/// The rule of a label, for messages.
const LABEL_RULE: &str =
    "lower-case letters, digits and '-', starting and ending with a letter or digit";

/// Adds the error at `path` when `name` is no Helm release name; true when it is one.
pub fn check_release_name(name: &str, path: AttributePath, d: &mut Diagnostics) -> bool {
    check(
        is_release_name(name),
        path,
        d,
        "Invalid release name",
        || {
            format!(
                "{name:?} is not a valid Helm release name: lower-case letters, digits, '-' and '.', starting and ending with a letter or digit, at most 53 characters."
            )
        },
    )
}

/// Adds the error at `path` when `namespace` is no namespace name; true when it is one.
pub fn check_namespace(namespace: &str, path: AttributePath, d: &mut Diagnostics) -> bool {
    check(
        is_dns_label(namespace),
        path,
        d,
        "Invalid namespace",
        || {
            format!(
                "{namespace:?} is not a valid namespace name: {LABEL_RULE}, at most 63 characters."
            )
        },
    )
}

fn check(
    valid: bool,
    path: AttributePath,
    d: &mut Diagnostics,
    summary: &str,
    detail: impl FnOnce() -> String,
) -> bool {
    if !valid {
        d.error_at(path, summary, detail());
    }
    valid
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn release_names_are_dotted_labels_of_at_most_53_characters() {
        assert!(is_release_name("cilium"));
        assert!(is_release_name("flux.operator-1"));
        assert!(!is_release_name(&"a".repeat(54)));
        assert!(is_dns_label("kube-system"));
        assert!(!is_dns_label("kube.system"), "namespaces have no dots");
        assert!(!is_dns_label("-x"));
        assert!(!is_dns_label(&"a".repeat(64)));
    }
}
