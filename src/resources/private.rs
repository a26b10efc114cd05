//! Private state of every talosboot resource, one versioned type through the framework's helper:
//! the per-resource salt of hashes of secret-bearing inputs (so identical values do not hash alike
//! across resources or users), then what each resource remembers: the chart resources who owns
//! the release when it is not us any more and a revision whose readiness failed; the Flux
//! bootstrap the fingerprints of the managed objects it applied and whether its last run failed;
//! both, how an import made the state when the plan has still to read it ([`Imported`]).
//! Fields a resource does not use stay empty and are not stored.

use serde::{Deserialize, Serialize};

use crate::cluster::flux::managed::Tracked;
use crate::framework::private;
use crate::framework::secret_hash::{new_salt, salted_sha256};

const VERSION: u32 = 1;

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Private {
    /// Hex salt of `values_sha256`-style hashes.
    #[serde(default)]
    pub salt: String,
    /// Chart resources: the GitOps tool that owns the release, as seen by the last read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// Chart resources: the revision whose readiness wait failed at the last apply and has not
    /// been seen healthy since: the next plan waits again instead of calling the release
    /// unchanged (a retried CI job must not turn green on a broken CNI).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unready_revision: Option<i64>,
    /// Chart resources: when the newest release record did not finish (`pending-*`, `failed`),
    /// the chart version of the newest `deployed` one as the last read saw it: what may still run,
    /// which Cilium's upgrade path is judged from as well as the newest record's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployed_before: Option<String>,
    /// Chart resources: salted hash of the values the last successful apply installed, so a
    /// later plan can tell a prior state talosboot applied (its inputs are what runs, unless
    /// changed outside) from one a move or import made up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied_values: Option<String>,
    /// Flux bootstrap: the managed objects it applied (names and salted hashes, never values).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tracked: Vec<Tracked>,
    /// Flux bootstrap: the last run failed, so the next refresh reports it as drift and the next
    /// apply runs again.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub last_run_failed: bool,
    /// An import that the plan has still to read through the resource's own target: an import
    /// receives only the ID (no configuration, so no `cluster`), see [`Imported`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub imported: Option<Imported>,
}

/// How an import (ImportResourceState, which carries only the ID) made a state that the plan,
/// which has the configuration and so the resource's `cluster`, must read again.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Imported {
    /// The provider has no usable connection (a fleet's provider block usually connects
    /// nowhere): the state is the ID only; refresh keeps it, and the plan reads it through the
    /// resource's target, an error when the object is not there.
    NotRead,
    /// Read through the provider's connection: the plan reads it again through the resource's
    /// own `cluster` when it has one (which may be another cluster).
    ThroughProvider,
}

impl Private {
    /// Decodes private state; anything unreadable (or of another version, or without a salt)
    /// starts afresh, with a new salt.
    pub fn decode(bytes: &[u8]) -> Private {
        Some(Private::decode_without_new_salt(bytes))
            .filter(|p| !p.salt.is_empty())
            .unwrap_or_else(Private::fresh)
    }

    /// Decodes private state, leaving the salt empty when there is none yet (the Flux bootstrap
    /// plans its hash unknown until its first apply makes the salt); unreadable is empty. Also
    /// reads the unversioned JSON the Flux bootstrap stored before this type was shared.
    pub fn decode_without_new_salt(bytes: &[u8]) -> Private {
        private::get::<Private>(bytes, VERSION)
            .or_else(|| serde_json::from_slice::<Private>(bytes).ok())
            .unwrap_or_default()
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
            ..Private::default()
        }
    }

    /// Generates the salt when there is none yet.
    pub fn ensure_salt(&mut self) {
        if self.salt.is_empty() {
            self.salt = Private::fresh().salt;
        }
    }

    pub fn salt_bytes(&self) -> &[u8] {
        self.salt.as_bytes()
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

    #[test]
    fn a_chart_resources_private_state_is_stored_as_before() {
        let p = Private {
            salt: "ab".into(),
            owner: Some("Flux HelmRelease \"x\"".into()),
            ..Private::default()
        };
        assert_eq!(
            String::from_utf8(p.encode()).unwrap(),
            r#"{"v":1,"data":{"salt":"ab","owner":"Flux HelmRelease \"x\""}}"#
        );
    }

    #[test]
    fn the_flux_bootstraps_unversioned_private_state_is_still_read() {
        let before = br#"{"salt":"ab","tracked":[],"last_run_failed":true}"#;
        let p = Private::decode_without_new_salt(before);
        assert_eq!((p.salt.as_str(), p.last_run_failed), ("ab", true));
        assert_eq!(Private::decode_without_new_salt(&p.encode()), p);
        assert_eq!(Private::decode_without_new_salt(b""), Private::default());
    }
}
