//! Private state of `talosboot_flux_bootstrap`: the salt of every hash it stores, and the fingerprints of the
//! managed objects it applied (names and salted hashes only, never values).

use serde::{Deserialize, Serialize};

use crate::cluster::flux::managed::Tracked;
use crate::cluster::helm::release::sha256_hex;
use crate::framework::model::to_plain_json;
use crate::values::Value;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Private {
    /// Hex; empty until the first apply generates it.
    #[serde(default)]
    pub salt: String,
    #[serde(default)]
    pub tracked: Vec<Tracked>,
    /// The last run failed: the next refresh reports it as drift, so the next apply runs again.
    #[serde(default)]
    pub last_run_failed: bool,
}

impl Private {
    /// Decodes private state; anything unreadable (e.g. empty on import) starts afresh.
    pub fn decode(bytes: &[u8]) -> Private {
        serde_json::from_slice(bytes).unwrap_or_default()
    }
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }
    /// Generates the salt when there is none yet (the same generator as every talosboot salt).
    pub fn ensure_salt(&mut self) {
        if self.salt.is_empty() {
            self.salt = crate::resources::private::Private::fresh().salt;
        }
    }
    pub fn salt_bytes(&self) -> &[u8] {
        self.salt.as_bytes()
    }
}

/// The salted hash of the write-only `managed_resources` value: `None` while it is not known (or
/// no salt exists yet, i.e. before the first apply), null when it is unset.
pub fn managed_hash(salt: &str, managed: Option<&Value>) -> Option<Value> {
    let managed = managed.unwrap_or(&Value::Null);
    if managed.is_null() {
        return Some(Value::Null);
    }
    if !managed.is_wholly_known() || salt.is_empty() {
        return None;
    }
    let canonical = to_plain_json(managed).to_string();
    Some(Value::String(sha256_hex(
        format!("{salt}\n{canonical}").as_bytes(),
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn salts_are_generated_once_and_hashes_depend_on_them() {
        let mut p = Private::default();
        p.ensure_salt();
        let salt = p.salt.clone();
        p.ensure_salt();
        assert_eq!(p.salt, salt);
        assert_eq!(Private::decode(&p.encode()), p);
        let v = Value::Object([("secrets_yaml".to_string(), Value::from("s3cr3t"))].into());
        let a = managed_hash("a", Some(&v));
        assert_ne!(a, managed_hash("b", Some(&v)));
        assert!(!format!("{a:?}").contains("s3cr3t"));
        assert_eq!(managed_hash("", Some(&v)), None);
        assert_eq!(managed_hash("a", None), Some(Value::Null));
        assert_eq!(managed_hash("a", Some(&Value::unknown())), None);
    }
}
