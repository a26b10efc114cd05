//! Salted hashes of secret-bearing inputs kept in state.
//!
//! A plain SHA-256 of a deploy key or a values document is the same for every user who has the same
//! secret, so state would tell who shares one (and invites dictionary attacks on weak ones). Store
//! `salted_sha256(salt, secret)` instead, with a salt made once per resource by [`new_salt`] and kept
//! beside the hash (in private state via [`super::private`], or in state).
//!
//! Format: `hmac-sha256:<64 lower-case hex digits>`, the HMAC-SHA256 (RFC 2104) of `data` keyed with
//! `salt`. The prefix says what the digest is, so a later change of scheme is recognisable.

use sha2::{Digest, Sha256};

/// The prefix of every [`salted_sha256`] result.
pub const PREFIX: &str = "hmac-sha256:";

const BLOCK: usize = 64;

/// `hmac-sha256:<hex>` of `data` keyed with `salt` (see the module docs).
pub fn salted_sha256(salt: &[u8], data: &[u8]) -> String {
    let mut key = [0u8; BLOCK];
    if salt.len() > BLOCK {
        key[..32].copy_from_slice(&Sha256::digest(salt));
    } else {
        key[..salt.len()].copy_from_slice(salt);
    }
    let pad = |byte: u8| key.map(|k| k ^ byte);
    let inner = Sha256::new()
        .chain_update(pad(0x36))
        .chain_update(data)
        .finalize();
    let outer = Sha256::new()
        .chain_update(pad(0x5c))
        .chain_update(inner)
        .finalize();
    let mut out = String::with_capacity(PREFIX.len() + 64);
    out.push_str(PREFIX);
    for b in outer {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

/// A fresh random salt: 16 bytes from the operating system's CSPRNG (through aws-lc, as TLS uses
/// it), as 32 lower-case hex digits. Pass `salt.as_bytes()` to [`salted_sha256`].
///
/// # Errors
/// When the system has no usable random source (then no hash should be stored).
pub fn new_salt() -> Result<String, std::io::Error> {
    let mut bytes = [0u8; 16];
    rustls::crypto::aws_lc_rs::default_provider()
        .secure_random
        .fill(&mut bytes)
        .map_err(|_| std::io::Error::other("the system's secure random source failed"))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 4231 test case 2.
    #[test]
    fn matches_the_hmac_sha256_test_vector() {
        assert_eq!(
            salted_sha256(b"Jefe", b"what do ya want for nothing?"),
            "hmac-sha256:5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    /// RFC 4231 test case 6 (a key longer than the block is hashed first).
    #[test]
    fn long_salts_are_hashed_first() {
        assert_eq!(
            salted_sha256(
                &[0xaa; 131],
                b"Test Using Larger Than Block-Size Key - Hash Key First"
            ),
            "hmac-sha256:60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        );
    }

    #[test]
    fn different_salts_give_different_hashes_of_the_same_secret() {
        let (a, b) = (new_salt().expect("salt"), new_salt().expect("salt"));
        assert_eq!(a.len(), 32);
        assert_ne!(a, b);
        assert_ne!(
            salted_sha256(a.as_bytes(), b"deploy key"),
            salted_sha256(b.as_bytes(), b"deploy key")
        );
        assert_eq!(
            salted_sha256(a.as_bytes(), b"deploy key"),
            salted_sha256(a.as_bytes(), b"deploy key")
        );
    }
}
