//! Private state of talosboot resources: versioned JSON that Terraform stores beside the state
//! and hands back unchanged. It holds the per-resource salt of hashes of secret-bearing inputs, so
//! identical values do not hash identically across resources or users.

use std::io::Read;

use serde::{Deserialize, Serialize};

use crate::cluster::helm_release::sha256_hex;

const VERSION: u32 = 1;

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Private {
    pub v: u32,
    /// Hex salt of `values_sha256`-style hashes.
    pub salt: String,
    /// Who owns the release when it is not us any more (a GitOps tool), as seen by the last read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
}

impl Private {
    /// Decodes private state; anything unreadable (or of another version) starts afresh.
    pub fn decode(bytes: &[u8]) -> Private {
        serde_json::from_slice::<Private>(bytes)
            .ok()
            .filter(|p| p.v == VERSION && !p.salt.is_empty())
            .unwrap_or_else(Private::fresh)
    }

    pub fn fresh() -> Private {
        Private {
            v: VERSION,
            salt: new_salt(),
            owner: None,
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// `sha256:<hex>` of the salt and `digest` (itself a hash of the secret-bearing input).
    pub fn salted(&self, digest: &str) -> String {
        format!(
            "sha256:{}",
            sha256_hex(format!("{}:{digest}", self.salt).as_bytes())
        )
    }
}

fn new_salt() -> String {
    let mut bytes = [0u8; 16];
    let random = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes));
    if random.is_err() {
        // No urandom (unusual): time and process still make salts differ between resources.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        return sha256_hex(format!("{nanos}/{}", std::process::id()).as_bytes())[..32].to_owned();
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn salts_differ_and_survive_a_round_trip() {
        let a = Private::fresh();
        let b = Private::fresh();
        assert_ne!(a.salt, b.salt);
        assert_ne!(
            a.salted("x"),
            b.salted("x"),
            "same input, different resources"
        );
        assert_eq!(Private::decode(&a.encode()), a);
        assert_eq!(Private::decode(b"garbage").v, VERSION);
    }
}
