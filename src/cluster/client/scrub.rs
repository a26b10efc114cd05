//! Keeping secrets out of messages that come from the cluster or the kubeconfig.
//!
//! kube-apiserver echoes rejected values in its messages (`data[token]: Invalid value: "...": ...`),
//! and a server URL may carry credentials (`https://user:pass@host`). Whatever reaches a diagnostic
//! or a log goes through these first.

/// Field error kinds after which kube-apiserver prints the offending value (`field.Error`).
const VALUE_ECHOES: [&str; 4] = [
    "Invalid value: ",
    "Unsupported value: ",
    "Duplicate value: ",
    "Not found: ",
];

const REDACTED: &str = "<redacted>";

/// An API error message without the values it echoes: `Invalid value: "s3cr3t": must be ...`
/// becomes `Invalid value: <redacted>: must be ...` (also for unquoted values, and for
/// `Unsupported value`, `Duplicate value`, `Not found`), and URLs lose their user info.
pub fn scrub_api_message(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some((at, marker)) = VALUE_ECHOES
        .iter()
        .filter_map(|m| rest.find(m).map(|at| (at, *m)))
        .min_by_key(|(at, _)| *at)
    {
        out.push_str(&rest[..at + marker.len()]);
        out.push_str(REDACTED);
        rest = skip_value(&rest[at + marker.len()..]);
    }
    out.push_str(rest);
    redact_user_info(&out)
}

/// What follows an echoed value: after a Go-quoted string, or (unquoted values) at the next `": "`,
/// or nothing.
fn skip_value(text: &str) -> &str {
    if let Some(quoted) = text.strip_prefix('"') {
        let mut escaped = false;
        for (i, c) in quoted.char_indices() {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => return &quoted[i + 1..],
                _ => {}
            }
        }
        return "";
    }
    match text.find(": ") {
        Some(at) => &text[at..],
        None => match text.find(", ") {
            Some(at) => &text[at..],
            None => "",
        },
    }
}

/// Every `scheme://user:pass@host` in `text` as `scheme://<redacted>@host`.
pub fn redact_user_info(text: &str) -> String {
    replace_user_info(text, concat!("<redacted>", "@"))
}

/// `scheme://user:pass@host/...` as `scheme://host/...`: Kubernetes never uses credentials in
/// the server URL, and the HTTP stack would log them with every request.
pub(crate) fn strip_user_info(url: &str) -> String {
    replace_user_info(url, "")
}

fn replace_user_info(text: &str, replacement: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let (head, tail) = rest.split_at(at + 3);
        out.push_str(head);
        let authority_end = tail
            .find(|c: char| c == '/' || c == '?' || c == '#' || c.is_whitespace() || c == '"')
            .unwrap_or(tail.len());
        match tail[..authority_end].rfind('@') {
            Some(user_end) => {
                out.push_str(replacement);
                rest = &tail[user_end + 1..];
            }
            None => rest = tail,
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn echoed_values_are_redacted_and_the_explanation_kept() {
        let message = r#"Secret "deploy" is invalid: [data[id_ed25519]: Invalid value: "-----BEGIN OPENSSH \"PRIVATE\" KEY-----": a valid config key must consist of alphanumeric characters, metadata.labels: Invalid value: hunter2: must be no more than 63 characters, spec.mode: Unsupported value: "s3cr3t": supported values: "a", "b"]"#;
        let scrubbed = scrub_api_message(message);
        for secret in ["OPENSSH", "hunter2", "s3cr3t"] {
            assert!(!scrubbed.contains(secret), "{scrubbed}");
        }
        assert!(
            scrubbed.contains("a valid config key must consist"),
            "{scrubbed}"
        );
        assert!(
            scrubbed.contains("must be no more than 63 characters"),
            "{scrubbed}"
        );
        assert!(
            scrubbed.starts_with(r#"Secret "deploy" is invalid"#),
            "{scrubbed}"
        );
    }

    #[test]
    fn a_message_without_values_is_unchanged() {
        let message = r#"secrets "sh.helm.release.v1.cilium.v3" not found"#;
        assert_eq!(scrub_api_message(message), message);
    }

    #[test]
    fn user_info_in_urls_is_redacted() {
        assert_eq!(
            redact_user_info("dial https://admin:pa55@10.0.0.1:6443/api failed; see http://h/x"),
            "dial https://<redacted>@10.0.0.1:6443/api failed; see http://h/x"
        );
        assert_eq!(
            redact_user_info("https://10.0.0.1:6443"),
            "https://10.0.0.1:6443"
        );
        assert_eq!(redact_user_info("https://u:p@h"), "https://<redacted>@h");
        assert_eq!(strip_user_info("https://u:p@h:6443/x"), "https://h:6443/x");
    }
}
