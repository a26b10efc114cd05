//! Private state of `talosboot_flux_bootstrap` is the provider's one [`Private`] (the salt of every
//! hash it stores, the fingerprints of the managed objects it applied, whether the last run
//! failed); here, the hash of the write-only `managed_resources` it plans and stores.

use crate::cluster::helm::release::sha256_hex;
use crate::framework::model::to_plain_json;
use crate::values::Value;

pub use crate::resources::private::Private;

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
        assert_eq!(Private::decode_without_new_salt(&p.encode()), p);
        let v = Value::Object([("secrets_yaml".to_string(), Value::from("s3cr3t"))].into());
        let a = managed_hash("a", Some(&v));
        assert_ne!(a, managed_hash("b", Some(&v)));
        assert!(!format!("{a:?}").contains("s3cr3t"));
        assert_eq!(managed_hash("", Some(&v)), None);
        assert_eq!(managed_hash("a", None), Some(Value::Null));
        assert_eq!(managed_hash("a", Some(&Value::unknown())), None);
    }
}
