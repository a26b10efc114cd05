//! One [`ClusterHandle`] per connection for the life of the provider process, so that every
//! resource pointed at one cluster (a `for_each` over a fleet) shares its clients, and a plan's
//! many round trips to one cluster reuse one TLS session pool.
//!
//! Keyed by a digest of the whole connection (endpoint *and* credentials) and its retry budget:
//! two resources that reach one cluster with different credentials must never share a client, and
//! each handle carries its own budget (a `cluster` may set its own `api_retry_timeout`). The key is
//! a hash so the map's keys hold no credential (the handles do, as the provider's own does).

use std::collections::HashMap;
use std::sync::Mutex;

use sha2::{Digest, Sha256};

use super::{ClusterHandle, ConfigSource, ProviderConfig, RetryBudget};

/// The process's handles by connection (see the module docs). Cheap to share behind an `Arc`.
#[derive(Default)]
pub struct ClientCache {
    handles: Mutex<HashMap<[u8; 32], ClusterHandle>>,
}

impl ClientCache {
    /// The handle of `source` retrying for `retry_budget`: the one made earlier for the same
    /// settings, or a new one (which connects on first use, as the provider's does).
    pub fn handle(&self, source: &ConfigSource, retry_budget: RetryBudget) -> ClusterHandle {
        let key = key(source, retry_budget);
        let mut handles = self
            .handles
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        handles
            .entry(key)
            .or_insert_with(|| {
                ClusterHandle::with_retry_budget(
                    ProviderConfig::Known(source.clone()),
                    retry_budget,
                )
            })
            .clone()
    }

    /// How many connections the process holds.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.handles
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .len()
    }
}

fn key(source: &ConfigSource, retry_budget: RetryBudget) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(retry_budget.duration().as_millis().to_le_bytes());
    // Every field, length-prefixed, so no two settings run together into one key.
    let mut field = |tag: &str, value: Option<&str>| {
        h.update(tag.as_bytes());
        match value {
            Some(v) => {
                h.update((v.len() as u64).to_le_bytes());
                h.update(v.as_bytes());
            }
            None => h.update(u64::MAX.to_le_bytes()),
        }
    };
    match source {
        ConfigSource::KubeconfigRaw { yaml, context } => {
            field("raw", Some(yaml));
            field("context", context.as_deref());
        }
        ConfigSource::KubeconfigFile { path, context } => {
            field("file", Some(path));
            field("context", context.as_deref());
        }
        ConfigSource::Direct {
            host,
            ca_pem,
            client_cert_pem,
            client_key_pem,
            token,
        } => {
            field("host", Some(host));
            field("ca", ca_pem.as_deref());
            field("cert", client_cert_pem.as_deref());
            field("key", client_key_pem.as_deref());
            field("token", token.as_deref());
        }
    }
    h.finalize().into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn direct(host: &str, token: &str) -> ConfigSource {
        ConfigSource::Direct {
            host: host.into(),
            ca_pem: None,
            client_cert_pem: None,
            client_key_pem: None,
            token: Some(token.into()),
        }
    }

    #[test]
    fn one_handle_per_connection_and_none_shared_across_credentials() {
        let cache = ClientCache::default();
        let budget = RetryBudget::default();
        let a = cache.handle(&direct("https://a:6443", "t1"), budget);
        let again = cache.handle(&direct("https://a:6443", "t1"), budget);
        assert!(a.same_as(&again), "the same settings share one handle");
        let _ = cache.handle(&direct("https://a:6443", "t2"), budget);
        let _ = cache.handle(&direct("https://b:6443", "t1"), budget);
        assert_eq!(cache.len(), 3);
        let patient = RetryBudget::new(std::time::Duration::from_secs(300));
        let other = cache.handle(&direct("https://a:6443", "t1"), patient);
        assert!(!other.same_as(&a), "another budget, another handle");
        assert_eq!((other.retry_budget(), a.retry_budget()), (patient, budget));
    }
}
