//! AutoMTLS, the way go-plugin does it.
//!
//! Terraform passes its own client certificate in `PLUGIN_CLIENT_CERT` (PEM; ECDSA
//! P-521, self-signed, CA bit set). The plugin generates a fresh server certificate of
//! the same kind per run, announces it in the handshake line, and accepts only TLS
//! clients that present exactly Terraform's certificate.
//!
//! Two details matter:
//! - rustls uses aws-lc-rs here: `ring` cannot verify P-521 signatures, and a Go
//!   client then silently sends no certificate at all.
//! - webpki path validation rejects a CA certificate used as an end-entity
//!   certificate, so [`PinnedClientCertVerifier`] pins the certificate byte for byte
//!   and only checks the handshake signature with it.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose, PKCS_ECDSA_P521_SHA512,
};
use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::{CryptoProvider, aws_lc_rs};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{CertificateError, DigitallySignedStruct, ServerConfig, SignatureScheme};

use super::Error;
use super::clock::Utc;

/// go-plugin makes its certificates valid for 262,980 hours (30 years).
const VALIDITY_YEARS: i64 = 30;

/// The plugin's per-run server certificate and its private key.
pub(crate) struct ServerIdentity {
    pub cert: CertificateDer<'static>,
    key: PrivatePkcs8KeyDer<'static>,
}

impl std::fmt::Debug for ServerIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerIdentity")
            .field("cert_len", &self.cert.len())
            .finish_non_exhaustive()
    }
}

/// The crypto provider used for both ends: aws-lc-rs (P-521 capable).
pub(crate) fn crypto_provider() -> Arc<CryptoProvider> {
    Arc::new(aws_lc_rs::default_provider())
}

/// Generates a self-signed ECDSA P-521 CA certificate for `localhost`, with the key
/// usages and extended key usages go-plugin gives its own (serverAuth + clientAuth).
///
/// # Errors
/// [`Error::CertificateGeneration`] if key generation or signing fails.
pub(crate) fn generate_server_identity() -> Result<ServerIdentity, Error> {
    let key_pair =
        KeyPair::generate_for(&PKCS_ECDSA_P521_SHA512).map_err(Error::CertificateGeneration)?;
    let mut params = CertificateParams::new(vec!["localhost".to_owned()])
        .map_err(Error::CertificateGeneration)?;

    let mut subject = DistinguishedName::new();
    subject.push(DnType::CommonName, "localhost");
    subject.push(DnType::OrganizationName, "talosboot");
    params.distinguished_name = subject;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
        KeyUsagePurpose::KeyCertSign,
    ];
    params.extended_key_usages = vec![
        ExtendedKeyUsagePurpose::ClientAuth,
        ExtendedKeyUsagePurpose::ServerAuth,
    ];
    // serial_number stays None: rcgen then derives it from the (fresh) public key.

    // Start a day early to be robust against clock skew (go-plugin: 30 s).
    let start = Utc::at(SystemTime::now() - Duration::from_secs(86_400));
    params.not_before = rcgen::date_time_ymd(year_i32(start.year), start.month, start.day);
    params.not_after = rcgen::date_time_ymd(
        year_i32(start.year + VALIDITY_YEARS),
        start.month,
        start.day.min(28),
    );

    let cert = params
        .self_signed(&key_pair)
        .map_err(Error::CertificateGeneration)?;
    Ok(ServerIdentity {
        cert: cert.der().clone(),
        key: PrivatePkcs8KeyDer::from(key_pair.serialize_der()),
    })
}

fn year_i32(year: i64) -> i32 {
    i32::try_from(year).unwrap_or(9999)
}

/// Parses `PLUGIN_CLIENT_CERT`: every certificate in the PEM text is accepted.
///
/// # Errors
/// [`Error::InvalidEnv`] if the PEM is malformed or holds no certificate.
pub(crate) fn parse_client_certs(pem: &str) -> Result<Vec<CertificateDer<'static>>, Error> {
    let invalid = |reason: String| Error::InvalidEnv {
        name: "PLUGIN_CLIENT_CERT",
        reason,
    };
    let certs = CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| invalid(format!("not valid PEM: {e}")))?;
    if certs.is_empty() {
        return Err(invalid("no CERTIFICATE block in the PEM text".to_owned()));
    }
    Ok(certs)
}

/// The rustls server configuration: TLS 1.2 and 1.3, ALPN `h2` (grpc-go clients
/// require it), and a mandatory client certificate pinned to `client_certs`.
///
/// # Errors
/// [`Error::TlsConfig`] if rustls rejects the key or the protocol versions.
pub(crate) fn server_config(
    identity: &ServerIdentity,
    client_certs: Vec<CertificateDer<'static>>,
) -> Result<Arc<ServerConfig>, Error> {
    let provider = crypto_provider();
    let verifier = PinnedClientCertVerifier::new(client_certs, provider.clone());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(Error::TlsConfig)?
        .with_client_cert_verifier(Arc::new(verifier))
        .with_single_cert(
            vec![identity.cert.clone()],
            PrivateKeyDer::Pkcs8(identity.key.clone_key()),
        )
        .map_err(Error::TlsConfig)?;
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(Arc::new(config))
}

/// Accepts exactly the certificates Terraform announced (byte-for-byte), then
/// checks that the peer owns the key by verifying its handshake signature.
#[derive(Debug)]
pub(crate) struct PinnedClientCertVerifier {
    allowed: Vec<CertificateDer<'static>>,
    provider: Arc<CryptoProvider>,
}

impl PinnedClientCertVerifier {
    pub(crate) fn new(
        allowed: Vec<CertificateDer<'static>>,
        provider: Arc<CryptoProvider>,
    ) -> Self {
        Self { allowed, provider }
    }
}

impl ClientCertVerifier for PinnedClientCertVerifier {
    fn root_hint_subjects(&self) -> &[rustls::DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        if self
            .allowed
            .iter()
            .any(|c| c.as_ref() == end_entity.as_ref())
        {
            Ok(ClientCertVerified::assertion())
        } else {
            tracing::warn!("refused a TLS client: its certificate is not PLUGIN_CLIENT_CERT");
            Err(rustls::Error::InvalidCertificate(
                CertificateError::ApplicationVerificationFailure,
            ))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generates_a_usable_p521_identity() {
        let identity = generate_server_identity().expect("generate");
        assert!(identity.cert.len() > 300);
        let config = server_config(&identity, vec![identity.cert.clone()]).expect("config");
        assert_eq!(config.alpn_protocols, vec![b"h2".to_vec()]);
        // Two runs never share a certificate.
        let other = generate_server_identity().expect("generate");
        assert_ne!(identity.cert, other.cert);
    }

    #[test]
    fn verifier_pins_byte_for_byte() {
        let a = generate_server_identity().expect("a").cert;
        let b = generate_server_identity().expect("b").cert;
        let verifier = PinnedClientCertVerifier::new(vec![a.clone()], crypto_provider());
        assert!(
            verifier
                .verify_client_cert(&a, &[], UnixTime::now())
                .is_ok()
        );
        assert!(
            verifier
                .verify_client_cert(&b, &[], UnixTime::now())
                .is_err()
        );
        assert!(verifier.client_auth_mandatory());
        assert!(
            verifier
                .supported_verify_schemes()
                .contains(&SignatureScheme::ECDSA_NISTP521_SHA512)
        );
    }

    #[test]
    fn parses_client_cert_pem() {
        let pem = "-----BEGIN CERTIFICATE-----\nMAMCAQA=\n-----END CERTIFICATE-----\n";
        assert_eq!(parse_client_certs(pem).expect("pem").len(), 1);
        assert!(parse_client_certs("garbage").is_err());
    }
}
