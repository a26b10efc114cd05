//! ValidateResourceConfig and ValidateDataResourceConfig: deprecation warnings, the resource's
//! checks (a panic is a diagnostic), and attribute paths cut to where clients can place them.

use super::*;

impl Dispatcher {
    /// `write_only_allowed`: the client announced write-only support (ClientCapabilities).
    pub fn validate_resource(
        &self,
        type_name: &str,
        config: &Value,
        write_only_allowed: bool,
    ) -> Diagnostics {
        let r = match self.resource(type_name) {
            Ok(r) => r,
            Err(d) => return d,
        };
        let mut diagnostics = deprecation_warnings(r.schema(), config);
        if !write_only_allowed {
            for path in write_only_set(&r.schema().block, config) {
                diagnostics.error_at(
                    path.clone(),
                    "Write-only attribute needs OpenTofu/Terraform 1.11+",
                    format!("`{path}` is write-only: it is never stored in state, which needs OpenTofu 1.11+ or Terraform 1.11+, and this client does not support write-only attributes. Upgrade it, or leave the attribute unset."),
                );
            }
        }
        let mut diagnostics = validate_guarded(type_name, || {
            r.implementation.validate(config, &mut diagnostics)
        })
        .map_or_else(|d| d, |()| diagnostics);
        locatable_paths(&mut diagnostics, &r.schema().block);
        diagnostics
    }

    pub fn validate_data_source(&self, type_name: &str, config: &Value) -> Diagnostics {
        let d = match self.data_source(type_name) {
            Ok(d) => d,
            Err(diags) => return diags,
        };
        let mut diagnostics = deprecation_warnings(d.schema(), config);
        validate_guarded(type_name, || {
            d.implementation.validate(config, &mut diagnostics)
        })
        .map_or_else(|d| d, |()| diagnostics)
    }
}

/// Terraform does not warn about deprecated attributes by itself: the provider does, at validate,
/// for every deprecated attribute or block the configuration sets, at any depth.
pub(super) fn deprecation_warnings(schema: &Schema, config: &Value) -> Diagnostics {
    let mut diagnostics = Diagnostics::new();
    for (path, message) in deprecated_set(&schema.block, config) {
        diagnostics
            .push(crate::framework::Diagnostic::warning("Deprecated attribute", message).at(path));
    }
    diagnostics
}

/// OpenTofu and Terraform place a diagnostic at its attribute path only as far as the path names
/// attributes and blocks of the resource's body: a path into a nested attribute's object
/// (`job.pull_policy`, `set[1].name`) lands on the `resource` line. So such a path is cut after
/// the nested attribute (the diagnostic points at `job = { ... }`) and the detail starts with the
/// whole path, which the location no longer shows.
pub(super) fn locatable_paths(diagnostics: &mut Diagnostics, block: &crate::framework::Block) {
    for d in diagnostics.iter_mut() {
        let Some(path) = &d.attribute else { continue };
        let Some(keep) = nested_attribute_depth(&path.steps, block) else {
            continue;
        };
        if keep >= path.steps.len() {
            continue;
        }
        let full = path.to_string();
        let mut cut = path.clone();
        cut.steps.truncate(keep);
        d.attribute = Some(cut);
        if !d.detail.contains(&full) {
            d.detail = format!("`{full}`: {}", d.detail);
        }
    }
}

/// Whether a nested attribute holds a sensitive or write-only attribute at any depth.
fn nested_secret(a: &crate::framework::Attribute) -> bool {
    match &a.ty {
        crate::framework::AttributeType::Nested { attributes, .. } => attributes
            .iter()
            .any(|n| n.sensitive || n.write_only || nested_secret(n)),
        crate::framework::AttributeType::Type(_) => false,
    }
}

/// How many steps of `steps` reach the first nested attribute (through nested blocks), if any.
fn nested_attribute_depth(
    steps: &[crate::values::PathStep],
    block: &crate::framework::Block,
) -> Option<usize> {
    use crate::framework::AttributeType;
    use crate::values::PathStep;
    let mut block = block;
    let mut i = 0;
    while let Some(PathStep::Attribute(name)) = steps.get(i) {
        if let Some(a) = block.attributes.iter().find(|a| &a.name == name) {
            // The client prints the source lines of the range it points at: never those of a
            // secret (a literal key in the configuration would be shown).
            let secret = a.sensitive || a.write_only || nested_secret(a);
            return (matches!(a.ty, AttributeType::Nested { .. }) && !secret).then_some(i + 1);
        }
        let nested = block.blocks.iter().find(|b| &b.type_name == name)?;
        block = &nested.block;
        i += 1;
        // A list or set block's element key.
        if matches!(
            steps.get(i),
            Some(PathStep::ElementKeyInt(_) | PathStep::ElementKeyString(_))
        ) {
            i += 1;
        }
    }
    None
}
