//! Resource identity around every operation: the identity of each state the provider returns,
//! derived from the resource's declaration ([`IdentitySchema::of_state`]), and the checks
//! terraform-plugin-framework makes: an identity that was known never changes on plan, read or
//! update ("Unexpected Identity Change", a provider bug); import by identity stands for the import
//! ID it names; stored identities are upgraded.
//!
//! Each method answers `None` for a resource without identity: the response then carries none.

use super::*;
use crate::framework::identity::{IdentityCheck, is_unset, unexpected_change};

impl Dispatcher {
    /// Every resource's identity, by type name (GetResourceIdentitySchemas).
    pub fn identity_schemas(&self) -> impl Iterator<Item = (&str, &IdentitySchema)> {
        self.identities.iter().map(|(k, (s, _))| (k.as_str(), s))
    }

    fn identity(&self, type_name: &str) -> Option<&IdentitySchema> {
        self.identities.get(type_name).map(|(s, _)| s)
    }

    /// The type of `type_name`'s identity values, `None` without identity.
    pub fn identity_type(&self, type_name: &str) -> Option<&Type> {
        self.identities.get(type_name).map(|(_, t)| t)
    }

    /// The identity of `state` (move, list, import).
    pub fn identity_of(&self, type_name: &str, state: &Value) -> Option<Value> {
        let identity = self.identity(type_name)?.of_state(state);
        Some(identity).filter(|i| !i.is_null())
    }

    /// ReadResource: the identity of the refreshed state. An identity Terraform had that the
    /// refreshed state contradicts is a provider bug (the object is the same object); none stored
    /// (a state from before identity, or from another client) is simply filled in.
    pub fn read_identity(
        &self,
        type_name: &str,
        current: &Value,
        resp: &mut ReadResponse,
    ) -> Option<Value> {
        let new = self.identity_of(type_name, &resp.new_state)?;
        if !is_unset(current) && *current != new {
            resp.diagnostics
                .push(unexpected_change(IdentityCheck::Read, current, &new));
        }
        Some(new)
    }

    /// PlanResourceChange: a create plans the identity of the planned state (unknown parts are
    /// allowed until apply); a replacement may change it; any other plan keeps the prior identity
    /// (or the prior state's, when none was stored), and a planned state that contradicts it
    /// without a replacement is a provider bug. A destroy keeps the prior identity.
    pub fn plan_identity(
        &self,
        type_name: &str,
        prior_state: &Value,
        prior_identity: &Value,
        resp: &mut PlanResponse,
    ) -> Option<Value> {
        let schema = self.identity(type_name)?;
        if resp.planned_state.is_null() {
            return Some(prior_identity.clone()).filter(|i| !is_unset(i));
        }
        let planned = schema.of_state(&resp.planned_state);
        if prior_state.is_null() {
            return Some(planned);
        }
        let prior = match is_unset(prior_identity) {
            true => schema.of_state(prior_state),
            false => prior_identity.clone(),
        };
        if planned == prior {
            return Some(prior);
        }
        if !resp.requires_replace.is_empty() {
            return Some(planned);
        }
        if !resp.diagnostics.has_errors() {
            resp.diagnostics
                .push(unexpected_change(IdentityCheck::Plan, &prior, &planned));
        }
        Some(prior)
    }

    /// ApplyResourceChange: the identity of the new state; one that contradicts a wholly known
    /// planned identity is a provider bug (a create plans parts of it unknown; those may be
    /// anything).
    pub fn apply_identity(
        &self,
        type_name: &str,
        planned_identity: &Value,
        resp: &mut ApplyResponse,
    ) -> Option<Value> {
        let new = self.identity_of(type_name, &resp.new_state)?;
        let planned_known = !is_unset(planned_identity) && planned_identity.is_wholly_known();
        if planned_known && *planned_identity != new && !resp.diagnostics.has_errors() {
            resp.diagnostics.push(unexpected_change(
                IdentityCheck::Apply,
                planned_identity,
                &new,
            ));
        }
        Some(new)
    }

    /// `import { identity = {...} }`: the import ID the identity stands for.
    ///
    /// # Errors
    /// The resource has no identity, or the identity misses a required attribute.
    pub fn import_id(&self, type_name: &str, identity: &Value) -> Result<String, Diagnostics> {
        match self.identity(type_name) {
            Some(schema) => schema.import_id(identity),
            None => {
                let mut diagnostics = Diagnostics::new();
                diagnostics.error(
                    "Import by identity is not supported",
                    format!("{type_name} has no resource identity: import it by ID instead."),
                );
                Err(diagnostics)
            }
        }
    }

    /// The identity of an imported state; when the import gave one (`given`, non-null), every
    /// attribute it set must be the object's.
    pub fn imported_identity(
        &self,
        type_name: &str,
        given: &Value,
        resp: &mut ImportResponse,
    ) -> Vec<Option<Value>> {
        let Some(schema) = self.identity(type_name) else {
            return resp.imported.iter().map(|_| None).collect();
        };
        let mut identities = Vec::new();
        for imported in &resp.imported {
            let identity = schema.of_state(&imported.state);
            if !is_unset(given) {
                resp.diagnostics
                    .extend(schema.check_imported(given, &identity));
            }
            identities.push(Some(identity).filter(|i| !i.is_null()));
        }
        identities
    }

    /// UpgradeResourceIdentity.
    ///
    /// # Errors
    /// No identity for the type, another version, or JSON that is not an identity.
    pub fn upgrade_identity(
        &self,
        type_name: &str,
        version: i64,
        json: &[u8],
    ) -> Result<Value, Diagnostics> {
        let schema = self
            .identity(type_name)
            .ok_or_else(|| unknown_type("resource with identity", type_name))?;
        schema
            .upgrade(type_name, version, json)
            .map_err(Diagnostics::from)
    }

    /// GenerateResourceConfig: the resource's configuration for `state`, write-only values null.
    pub fn generate_config(&self, type_name: &str, state: &Value) -> GeneratedConfig {
        let r = match self.resource(type_name) {
            Ok(r) => r,
            Err(diagnostics) => {
                return GeneratedConfig {
                    config: Value::Null,
                    diagnostics,
                };
            }
        };
        let generated =
            std::panic::catch_unwind(AssertUnwindSafe(|| r.implementation.generate_config(state)));
        match generated {
            Ok(generated) => generated,
            Err(_) => GeneratedConfig {
                config: Value::Null,
                diagnostics: panicked(type_name, "generate config"),
            },
        }
    }
}
