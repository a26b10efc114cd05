//! The Kubernetes and Helm name rules every resource checks its inputs against, without I/O.

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

/// The rule both follow, for messages.
pub const NAME_RULE: &str =
    "lower-case letters, digits and '-', starting and ending with a letter or digit";

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
