//! Private state as typed, versioned JSON: `{"v": <version>, "data": <T as JSON>}`.
//!
//! Terraform stores a resource's private bytes opaquely and hands them back on the next plan, apply
//! and read. A blob this build cannot read (empty, not JSON, another version, another shape) is
//! treated as absent, with a debug log: private state is a cache of what the provider knows, never
//! a reason to fail an operation. Bump the version when the shape of `T` changes incompatibly.
//!
//! ```
//! use talosboot::framework::private;
//! #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
//! struct Salt { salt: String }
//! let bytes = private::set(&Salt { salt: "ab12".into() }, 1);
//! assert_eq!(private::get::<Salt>(&bytes, 1), Some(Salt { salt: "ab12".into() }));
//! assert_eq!(private::get::<Salt>(&bytes, 2), None);
//! ```

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

#[derive(Serialize)]
struct Envelope<'a, T> {
    v: u32,
    data: &'a T,
}

/// The version was checked first (`VersionOnly`); unknown fields are ignored.
#[derive(Deserialize)]
struct Stored<T> {
    data: T,
}

#[derive(Deserialize)]
struct VersionOnly {
    v: u32,
}

/// The private data stored at `version`, or `None` when there is none this build can read.
pub fn get<T: DeserializeOwned>(bytes: &[u8], version: u32) -> Option<T> {
    if bytes.is_empty() {
        return None;
    }
    match serde_json::from_slice::<VersionOnly>(bytes) {
        Ok(stored) if stored.v == version => {}
        Ok(stored) => {
            tracing::debug!(
                stored = stored.v,
                expected = version,
                "private state of another version; treated as empty"
            );
            return None;
        }
        Err(e) => {
            // Only the position: the blob may hold secrets.
            tracing::debug!(
                line = e.line(),
                column = e.column(),
                "private state is not versioned JSON; treated as empty"
            );
            return None;
        }
    }
    match serde_json::from_slice::<Stored<T>>(bytes) {
        Ok(stored) => Some(stored.data),
        Err(e) => {
            tracing::debug!(
                version,
                line = e.line(),
                column = e.column(),
                "private state does not have the expected shape; treated as empty"
            );
            None
        }
    }
}

/// `data` encoded for `PlanResponse::private` and the like, at `version`. (Serialization of plain
/// structs cannot fail; if a custom `Serialize` does, the error is logged and the result is empty,
/// which [`get`] reads as absent.)
pub fn set<T: Serialize>(data: &T, version: u32) -> Vec<u8> {
    serde_json::to_vec(&Envelope { v: version, data }).unwrap_or_else(|e| {
        tracing::error!(
            kind = ?e.classify(),
            "private state could not be encoded; storing none"
        );
        Vec::new()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize, Deserialize, PartialEq, Debug)]
    struct Data {
        salt: String,
        revision: i64,
    }

    #[test]
    fn round_trips_at_its_version() {
        let data = Data {
            salt: "s".into(),
            revision: 3,
        };
        let bytes = set(&data, 2);
        assert_eq!(get::<Data>(&bytes, 2), Some(data));
        assert_eq!(
            std::str::from_utf8(&bytes).ok(),
            Some(r#"{"v":2,"data":{"salt":"s","revision":3}}"#)
        );
    }

    #[test]
    fn unreadable_blobs_are_absent_not_errors() {
        let data = Data {
            salt: "s".into(),
            revision: 3,
        };
        assert_eq!(get::<Data>(&set(&data, 1), 2), None, "another version");
        assert_eq!(get::<Data>(b"", 1), None, "empty");
        assert_eq!(
            get::<Data>(b"planned", 1),
            None,
            "not JSON (older builds wrote bytes)"
        );
        assert_eq!(
            get::<Data>(br#"{"v":1,"data":{"salt":1}}"#, 1),
            None,
            "other shape"
        );
        assert_eq!(get::<Data>(br#"{"data":{}}"#, 1), None, "no version");
    }
}
