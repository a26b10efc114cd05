//! UpgradeResourceState and MoveResourceState: stored state decoded at the current version (or
//! upgraded by the resource), moved state from another type, write-only values nulled.

use super::*;

impl Dispatcher {
    pub async fn upgrade(&self, type_name: &str, req: UpgradeRequest) -> UpgradeResponse {
        tracing::debug!(type_name, "upgrade state");
        let r = match self.resource(type_name) {
            Ok(r) => r,
            Err(diagnostics) => return UpgradeResponse::from(diagnostics),
        };
        let mut resp = guarded_response(
            type_name,
            "state upgrade",
            r.implementation.upgrade_state(&self.ctx(), req),
        )
        .await;
        null_write_only(&r.schema().block, &mut resp.upgraded_state);
        resp
    }

    pub async fn move_state(&self, type_name: &str, req: MoveRequest) -> MoveResponse {
        tracing::debug!(type_name, "move state");
        let r = match self.resource(type_name) {
            Ok(r) => r,
            Err(diagnostics) => return MoveResponse::from(diagnostics),
        };
        let mut resp = guarded_response(
            type_name,
            "move",
            r.implementation.move_state(&self.ctx(), req),
        )
        .await;
        null_write_only(&r.schema().block, &mut resp.target_state);
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
