//! Diagnostics: how every user-facing problem reaches Terraform (severity, summary, detail, attribute).
//!
//! User errors are diagnostics, never gRPC errors: a gRPC `Status` is only for a broken protocol
//! invariant. Diagnostics must never carry secret values; callers describe, they do not echo.

use crate::values::AttributePath;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    Error,
    Warning,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Diagnostic {
    pub severity: Severity,
    pub summary: String,
    pub detail: String,
    pub attribute: Option<AttributePath>,
}

impl Diagnostic {
    pub fn error(summary: impl Into<String>, detail: impl Into<String>) -> Self {
        Self {
            severity: Severity::Error,
            summary: summary.into(),
            detail: detail.into(),
            attribute: None,
        }
    }
    pub fn warning(summary: impl Into<String>, detail: impl Into<String>) -> Self {
        Self {
            severity: Severity::Warning,
            ..Self::error(summary, detail)
        }
    }
    pub fn at(mut self, path: AttributePath) -> Self {
        self.attribute = Some(path);
        self
    }
}

/// An ordered collection of diagnostics; every operation's response carries one.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Diagnostics(Vec<Diagnostic>);

impl Diagnostics {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn push(&mut self, diagnostic: Diagnostic) {
        self.0.push(diagnostic);
    }
    pub fn error(&mut self, summary: impl Into<String>, detail: impl Into<String>) {
        self.push(Diagnostic::error(summary, detail));
    }
    pub fn error_at(
        &mut self,
        path: AttributePath,
        summary: impl Into<String>,
        detail: impl Into<String>,
    ) {
        self.push(Diagnostic::error(summary, detail).at(path));
    }
    pub fn warning(&mut self, summary: impl Into<String>, detail: impl Into<String>) {
        self.push(Diagnostic::warning(summary, detail));
    }
    pub fn extend(&mut self, other: Diagnostics) {
        self.0.extend(other.0);
    }
    pub fn has_errors(&self) -> bool {
        self.0.iter().any(|d| d.severity == Severity::Error)
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut Diagnostic> {
        self.0.iter_mut()
    }
    pub fn iter(&self) -> impl Iterator<Item = &Diagnostic> {
        self.0.iter()
    }
    pub fn into_vec(self) -> Vec<Diagnostic> {
        self.0
    }
}

impl From<Diagnostic> for Diagnostics {
    fn from(d: Diagnostic) -> Self {
        Self(vec![d])
    }
}

impl IntoIterator for Diagnostics {
    type Item = Diagnostic;
    type IntoIter = std::vec::IntoIter<Diagnostic>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}
