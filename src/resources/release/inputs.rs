//! Inputs every Helm-release resource shares, in schema: `set`/`set_sensitive` entries
//! (`helm_release`'s `{name, value, type}`), `set_wo` and the `metadata` output. The bootstrap
//! pod's `job` is every resource's: [`crate::resources::job`].

use crate::framework::{Attribute, Nesting};
use crate::values::Type;

/// The attributes of one `set` / `set_sensitive` entry.
pub fn set_item(sensitive: bool) -> Vec<Attribute> {
    let value = Attribute::required("value", Type::String, "The value.");
    vec![
        Attribute::required(
            "name",
            Type::String,
            "Dotted path of the value, e.g. `hubble.relay.enabled` (escape literal dots as `\\\\.`).",
        ),
        if sensitive { value.sensitive() } else { value },
        Attribute::optional(
            "type",
            Type::String,
            "`auto` (default: `true`, `12`, `null` and `{a,b}` lists are typed as in `helm --set`) or `string` (always a string, as `--set-string`).",
        ),
    ]
}

/// `set_wo`: like `set_sensitive`, write-only (OpenTofu/Terraform 1.11+): never stored in state or
/// plan files. Its values count in `values_sha256`, so changing one plans an update.
pub fn set_wo_attribute() -> Attribute {
    // The client wants write-only on the leaf that holds the secret: `value`.
    let items = set_item(true)
        .into_iter()
        .map(|a| if a.name == "value" { a.write_only() } else { a })
        .collect();
    Attribute::optional(
        "set_wo",
        Type::Dynamic,
        "Like `set_sensitive`, with a write-only `value` (OpenTofu/Terraform 1.11+): the values reach the installer through a Secret and are never stored in state or plan files (names are). They count in `values_sha256` (salted), so changing one plans an update; older clients are refused with a message.",
    )
    .nested(Nesting::List, items)
}

/// `values_wo` and `values_wo_version`: values documents that are write-only (OpenTofu/Terraform
/// 1.11+), as Terraform's write-only convention has them, with a version to roll a change.
pub fn values_wo_attributes() -> [Attribute; 2] {
    [
        Attribute::optional(
            "values_wo",
            Type::list(Type::String),
            "Values documents (YAML) that are write-only (OpenTofu/Terraform 1.11+): merged after `values` and `set` with the same rules (maps merge, anything else is replaced; later documents win), passed to the installer through a Secret, and never stored in state or plan files nor logged, e.g. `[yamlencode({ hubble = { tls = { ca = { key = ephemeral.vault_kv_secret_v2.ca.data.key } } } })]`. They count in `values_sha256` (salted), so changing one plans an update, and drift of their keys in the cluster shows as well; the plan's list of changed value paths names their keys `(write-only)`, never their values. Bump `values_wo_version` to roll a change on purpose.",
        )
        .sensitive()
        .write_only(),
        Attribute::optional(
            "values_wo_version",
            Type::Number,
            "Any number: changing it upgrades the release with the current `values_wo` (Terraform's convention for write-only values, like `set_wo_revision`).",
        )
        .updates(),
    ]
}

/// The description of the computed `metadata` object (type: [`super::common::ReleaseMetadata`]).
pub const METADATA_DOC: &str = "hashicorp/helm's `metadata` output for the current revision, so references such as `helm_release.x.metadata.app_version` keep working after a `moved` (with the new address): `name`, `revision`, `namespace`, `chart`, `version` (the chart version), `app_version`, `first_deployed` and `last_deployed` (Unix seconds), `notes`. Unlike `helm_release`, without `values` (they can hold secrets; `values_sha256` stands for them).";
