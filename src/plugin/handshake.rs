//! The go-plugin handshake: what Terraform/OpenTofu tell the plugin through the
//! environment, and the single stdout line the plugin answers with.
//!
//! Everything here is pure (no I/O) so it can be unit tested: [`Env`] is a snapshot
//! of the variables, taken once at startup.

use std::net::SocketAddr;

use base64::Engine as _;

use super::Error;

/// go-plugin's core protocol version (first field of the handshake line).
pub(crate) const CORE_PROTOCOL_VERSION: u32 = 1;
/// The only application protocol we speak: tfplugin6.
pub(crate) const APP_PROTOCOL_VERSION: u32 = 6;
/// Name of the magic cookie variable Terraform and OpenTofu set.
pub(crate) const MAGIC_COOKIE_KEY: &str = "TF_PLUGIN_MAGIC_COOKIE";
/// Its value: the same for every Terraform provider.
pub(crate) const MAGIC_COOKIE_VALUE: &str =
    "d602bf8f470bc67ca7faa0386276bbdd4330efaf76d1a219cb4d6991ca9872b2";

/// The handshake-relevant environment, read once.
#[derive(Debug, Clone, Default)]
pub(crate) struct Env {
    pub magic_cookie: Option<String>,
    pub protocol_versions: Option<String>,
    pub min_port: Option<String>,
    pub max_port: Option<String>,
    /// PEM; not a secret (it is the client's public certificate).
    pub client_cert: Option<String>,
}

impl Env {
    /// Snapshot of the process environment. Values that are not UTF-8 count as unset.
    pub(crate) fn from_process() -> Self {
        let var = |name: &str| std::env::var(name).ok();
        Self {
            magic_cookie: var(MAGIC_COOKIE_KEY),
            protocol_versions: var("PLUGIN_PROTOCOL_VERSIONS"),
            min_port: var("PLUGIN_MIN_PORT"),
            max_port: var("PLUGIN_MAX_PORT"),
            client_cert: var("PLUGIN_CLIENT_CERT").filter(|pem| !pem.trim().is_empty()),
        }
    }

    /// Whether we were started by Terraform/OpenTofu (the cookie matches).
    pub(crate) fn has_magic_cookie(&self) -> bool {
        self.magic_cookie.as_deref() == Some(MAGIC_COOKIE_VALUE)
    }

    /// Picks protocol 6 from `PLUGIN_PROTOCOL_VERSIONS`.
    ///
    /// Like go-plugin, an unset or empty variable means "the default version" (6) and
    /// entries that are not numbers are skipped.
    ///
    /// # Errors
    /// [`Error::UnsupportedProtocol`] when the list is non-empty and does not offer 6.
    pub(crate) fn negotiate_protocol(&self) -> Result<u32, Error> {
        let Some(offered) = self.protocol_versions.as_deref().map(str::trim) else {
            return Ok(APP_PROTOCOL_VERSION);
        };
        if offered.is_empty() {
            return Ok(APP_PROTOCOL_VERSION);
        }
        let speaks_6 = offered
            .split(',')
            .filter_map(|v| v.trim().parse::<u32>().ok())
            .any(|v| v == APP_PROTOCOL_VERSION);
        if speaks_6 {
            Ok(APP_PROTOCOL_VERSION)
        } else {
            Err(Error::UnsupportedProtocol {
                offered: offered.to_owned(),
            })
        }
    }

    /// The inclusive port range to listen in; `(0, 0)` means "any free port".
    ///
    /// Both variables unset: any port. Only one set: the other end defaults to
    /// 1024 / 65535.
    ///
    /// # Errors
    /// [`Error::InvalidEnv`] for a non-numeric or out-of-range port, or min > max.
    pub(crate) fn port_range(&self) -> Result<(u16, u16), Error> {
        fn parse(name: &'static str, value: Option<&str>) -> Result<Option<u16>, Error> {
            match value.map(str::trim).filter(|v| !v.is_empty()) {
                None => Ok(None),
                Some(v) => v.parse::<u16>().map(Some).map_err(|e| Error::InvalidEnv {
                    name,
                    reason: format!("{v:?} is not a port number: {e}"),
                }),
            }
        }
        let min = parse("PLUGIN_MIN_PORT", self.min_port.as_deref())?;
        let max = parse("PLUGIN_MAX_PORT", self.max_port.as_deref())?;
        let range = match (min, max) {
            (None, None) => (0, 0),
            (min, max) => (min.unwrap_or(1024), max.unwrap_or(u16::MAX)),
        };
        if range.0 > range.1 {
            return Err(Error::InvalidEnv {
                name: "PLUGIN_MIN_PORT",
                reason: format!("{} is greater than PLUGIN_MAX_PORT {}", range.0, range.1),
            });
        }
        Ok(range)
    }
}

/// The line go-plugin's client waits for on stdout (without the newline):
/// `CORE|APP|tcp|ADDR|grpc|CERT`, CERT being the server certificate DER in
/// unpadded standard base64, or empty without AutoMTLS (go-plugin prints the
/// trailing separator in that case too).
pub(crate) fn handshake_line(
    protocol: u32,
    addr: SocketAddr,
    server_cert_der: Option<&[u8]>,
) -> String {
    let cert = server_cert_der
        .map(|der| base64::engine::general_purpose::STANDARD_NO_PAD.encode(der))
        .unwrap_or_default();
    format!("{CORE_PROTOCOL_VERSION}|{protocol}|tcp|{addr}|grpc|{cert}")
}

/// Printed to stderr when the binary is run by hand (no magic cookie).
pub(crate) fn not_a_plugin_message(binary: &str) -> String {
    format!(
        "This binary is a plugin for Terraform and OpenTofu (the talosboot provider). It is not \
         meant to be run directly: Terraform/OpenTofu start it themselves during `init`, `plan` \
         and `apply`. To use it, declare `talosboot/talosboot` in your configuration's \
         `required_providers` and let `terraform init` / `tofu init` install it from the \
         registry, or install this binary locally via a filesystem mirror (copy it to \
         <mirror>/registry.terraform.io/talosboot/talosboot/<version>/<os>_<arch>/ and point a \
         `provider_installation {{ filesystem_mirror {{ ... }} }}` block in your CLI config at \
         <mirror>) or, while developing, via `dev_overrides` in that same block pointing at the \
         directory that contains this binary. To debug it, run `{binary} --debug`: it then \
         serves without Terraform's handshake and prints a TF_REATTACH_PROVIDERS value to \
         export in the shell where you run terraform/tofu."
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_with_versions(v: &str) -> Env {
        Env {
            protocol_versions: Some(v.to_owned()),
            ..Env::default()
        }
    }

    #[test]
    fn cookie_must_match_exactly() {
        let mut env = Env::default();
        assert!(!env.has_magic_cookie());
        env.magic_cookie = Some("nope".into());
        assert!(!env.has_magic_cookie());
        env.magic_cookie = Some(MAGIC_COOKIE_VALUE.into());
        assert!(env.has_magic_cookie());
    }

    #[test]
    fn negotiates_6_from_a_list() {
        assert_eq!(env_with_versions("5,6").negotiate_protocol().ok(), Some(6));
        assert_eq!(env_with_versions(" 6 ").negotiate_protocol().ok(), Some(6));
        assert_eq!(env_with_versions("x,6").negotiate_protocol().ok(), Some(6));
        assert_eq!(Env::default().negotiate_protocol().ok(), Some(6));
        assert_eq!(env_with_versions("").negotiate_protocol().ok(), Some(6));
    }

    #[test]
    fn refuses_a_list_without_6() {
        let err = env_with_versions("4,5").negotiate_protocol().unwrap_err();
        assert!(err.to_string().starts_with("failed to negotiate"), "{err}");
        assert!(err.to_string().contains("\"4,5\""), "{err}");
    }

    #[test]
    fn port_ranges() {
        let range = |min: Option<&str>, max: Option<&str>| {
            Env {
                min_port: min.map(Into::into),
                max_port: max.map(Into::into),
                ..Env::default()
            }
            .port_range()
        };
        assert_eq!(range(None, None).ok(), Some((0, 0)));
        assert_eq!(
            range(Some("10000"), Some("25000")).ok(),
            Some((10000, 25000))
        );
        assert_eq!(range(Some("10000"), None).ok(), Some((10000, 65535)));
        assert_eq!(range(None, Some("2000")).ok(), Some((1024, 2000)));
        assert!(range(Some("abc"), None).is_err());
        assert!(range(Some("70000"), None).is_err());
        assert!(range(Some("3000"), Some("2000")).is_err());
    }

    #[test]
    fn handshake_line_shape() {
        let addr: SocketAddr = "127.0.0.1:4567".parse().unwrap();
        assert_eq!(
            handshake_line(6, addr, None),
            "1|6|tcp|127.0.0.1:4567|grpc|"
        );
        // 0xfb 0xff encodes to "+/8" with padding; unpadded must drop the '='.
        assert_eq!(
            handshake_line(6, addr, Some(&[0xfb, 0xff])),
            "1|6|tcp|127.0.0.1:4567|grpc|+/8"
        );
    }
}
