//! Private state of talosboot's release resources, through the framework's versioned helper: the
//! per-resource salt of hashes of secret-bearing inputs (so identical values do not hash alike
//! across resources or users), and who owns the release when it is not us any more.

use serde::{Deserialize, Serialize};

use crate::framework::private;
use crate::framework::secret_hash::{new_salt, salted_sha256};

const VERSION: u32 = 1;

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Private {
    /// Hex salt of `values_sha256`-style hashes.
    pub salt: String,
    /// The GitOps tool that owns the release, as seen by the last read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// The revision whose readiness wait failed at the last apply and has not been seen healthy
    /// since: the next plan waits again instead of calling the release unchanged (a retried CI
    /// job must not turn green on a broken CNI).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unready_revision: Option<i64>,
}

impl Private {
    /// Decodes private state; anything unreadable (or of another version) starts afresh.
    pub fn decode(bytes: &[u8]) -> Private {
        private::get::<Private>(bytes, VERSION)
            .filter(|p| !p.salt.is_empty())
            .unwrap_or_else(Private::fresh)
    }

    pub fn fresh() -> Private {
        Private {
            // Without a random source the salt is per process and time: still differs between users.
            salt: new_salt().unwrap_or_else(|_| {
                let nanos = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_nanos())
                    .unwrap_or_default();
                format!("{nanos:x}{:x}", std::process::id())
            }),
            owner: None,
            unready_revision: None,
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        private::set(self, VERSION)
    }

    /// The salted hash of `digest` (itself a hash of the secret-bearing input).
    pub fn salted(&self, digest: &str) -> String {
        salted_sha256(self.salt.as_bytes(), digest.as_bytes())
    }
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
        assert!(!Private::decode(b"garbage").salt.is_empty());
    }
}
