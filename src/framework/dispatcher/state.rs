//! UpgradeResourceState and MoveResourceState: stored state decoded at the current version (or
//! upgraded by the resource), moved state from another type, write-only values nulled.

use super::*;

impl Dispatcher {
    pub async fn upgrade(&self, type_name: &str, req: UpgradeRequest) -> UpgradeResponse {
        tracing::debug!(type_name, "upgrade state");
        let ctx = self.ctx();
        self.state_operation(
            type_name,
            "state upgrade",
            |r| r.upgrade_state(&ctx, req),
            |resp| &mut resp.upgraded_state,
        )
        .await
    }

    pub async fn move_state(&self, type_name: &str, req: MoveRequest) -> MoveResponse {
        tracing::debug!(type_name, "move state");
        let ctx = self.ctx();
        self.state_operation(
            type_name,
            "move",
            |r| r.move_state(&ctx, req),
            |resp| &mut resp.target_state,
        )
        .await
    }

    /// Runs `operation` on resource `type_name` under the panic guard, then nulls the write-only
    /// values of the state it returns (`state`): the safety nets of upgrade and move.
    async fn state_operation<'a, R, F>(
        &'a self,
        type_name: &str,
        operation: &str,
        run: impl FnOnce(&'a dyn Resource) -> F,
        state: fn(&mut R) -> &mut Value,
    ) -> R
    where
        R: From<Diagnostics>,
        F: Future<Output = R>,
    {
        let r = match self.resource(type_name) {
            Ok(r) => r,
            Err(diagnostics) => return R::from(diagnostics),
        };
        let mut resp = guarded_response(type_name, operation, run(&*r.implementation)).await;
        null_write_only(&r.schema().block, state(&mut resp));
        resp
    }
}

/// The default state upgrade: decode JSON stored at the current version; refuse any other version
/// with a message that names both, instead of guessing.
pub(crate) fn upgrade_same_version(
    schema: &Schema,
    type_name: &str,
    req: UpgradeRequest,
) -> UpgradeResponse {
    let mut diagnostics = Diagnostics::new();
    if req.version > schema.version {
        diagnostics.error(
            "State was written by a newer provider",
            format!(
                "The state of this {type_name} has schema version {}, but this provider only knows version {}. Upgrade the provider.",
                req.version, schema.version
            ),
        );
        return UpgradeResponse::from(diagnostics);
    }
    if req.version < schema.version {
        diagnostics.error(
            "Unsupported state version",
            format!(
                "The state of this {type_name} has schema version {}, which this provider cannot upgrade to version {}.",
                req.version, schema.version
            ),
        );
        return UpgradeResponse::from(diagnostics);
    }
    // Like terraform-plugin-framework: attributes a newer build removed at the same version are dropped.
    let options = JsonDecodeOptions {
        ignore_undefined_attributes: true,
    };
    match from_json_with(&req.raw_json, &schema.value_type(), options) {
        Ok(upgraded_state) => UpgradeResponse {
            upgraded_state,
            diagnostics,
        },
        Err(e) => {
            diagnostics.error("Stored state could not be decoded", e.to_string());
            UpgradeResponse::from(diagnostics)
        }
    }
}
