//! Attribute paths, so that a diagnostic points at the exact attribute, element or key.

use std::fmt;

use super::MAX_DEPTH;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum PathStep {
    Attribute(String),
    ElementKeyString(String),
    ElementKeyInt(i64),
}

impl PathStep {
    /// The step to `key` of an object (an attribute) or of a map (an element).
    pub(crate) fn key(key: &str, is_object: bool) -> Self {
        if is_object {
            PathStep::Attribute(key.to_owned())
        } else {
            PathStep::ElementKeyString(key.to_owned())
        }
    }
}

/// Where a codec stands in the value it walks, in either direction: the path its errors name,
/// and the nesting depth, bounded by [`MAX_DEPTH`].
#[derive(Default)]
pub(crate) struct Position {
    pub(crate) path: AttributePath,
    depth: usize,
}

impl Position {
    /// One level deeper, or why not (the reason for the codec's error).
    pub(crate) fn enter(&mut self) -> Result<(), String> {
        if self.depth >= MAX_DEPTH {
            return Err(format!("nested deeper than {MAX_DEPTH} levels"));
        }
        self.depth += 1;
        Ok(())
    }

    pub(crate) fn leave(&mut self) {
        self.depth -= 1;
    }
}

/// A path from the root of a config/state object, e.g. `job.env["KUBERNETES_SERVICE_HOST"]`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct AttributePath {
    pub steps: Vec<PathStep>,
}

impl AttributePath {
    pub fn root() -> Self {
        Self::default()
    }
    /// A path to a top-level attribute.
    pub fn attr(name: impl Into<String>) -> Self {
        Self::root().then_attr(name)
    }
    pub fn then_attr(mut self, name: impl Into<String>) -> Self {
        self.steps.push(PathStep::Attribute(name.into()));
        self
    }
    pub fn then_key(mut self, key: impl Into<String>) -> Self {
        self.steps.push(PathStep::ElementKeyString(key.into()));
        self
    }
    pub fn then_index(mut self, index: i64) -> Self {
        self.steps.push(PathStep::ElementKeyInt(index));
        self
    }
}

/// Renders the path the way Terraform users write it: `a.b[0]["k"]`.
impl fmt::Display for AttributePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, step) in self.steps.iter().enumerate() {
            match step {
                PathStep::Attribute(name) if i == 0 => write!(f, "{name}")?,
                PathStep::Attribute(name) => write!(f, ".{name}")?,
                PathStep::ElementKeyString(key) => write!(f, "[{key:?}]")?,
                PathStep::ElementKeyInt(index) => write!(f, "[{index}]")?,
            }
        }
        Ok(())
    }
}

impl AttributePath {
    /// True for the path of the whole value.
    pub fn is_root(&self) -> bool {
        self.steps.is_empty()
    }
    /// The path as text for messages, `(root)` for the whole value.
    pub fn describe(&self) -> String {
        if self.is_root() {
            "(root)".to_owned()
        } else {
            self.to_string()
        }
    }
    pub(crate) fn push(&mut self, step: PathStep) {
        self.steps.push(step);
    }
    pub(crate) fn pop(&mut self) {
        self.steps.pop();
    }
}
