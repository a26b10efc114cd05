//! Certificates and rustls client configurations, as Terraform's go-plugin client
//! makes them: an ECDSA P-521, self-signed CA certificate presented as the client
//! certificate, and the server pinned to the certificate from the handshake line.

use std::sync::Arc;

use anyhow::Context as _;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose, PKCS_ECDSA_P521_SHA512,
};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, SignatureScheme};

/// A client certificate and its key, like the one Terraform generates per run.
pub struct ClientIdentity {
    pub cert_der: CertificateDer<'static>,
    /// What goes into `PLUGIN_CLIENT_CERT`.
    pub cert_pem: String,
    key: PrivatePkcs8KeyDer<'static>,
}

impl std::fmt::Debug for ClientIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientIdentity").finish_non_exhaustive()
    }
}

impl ClientIdentity {
    /// A fresh ECDSA P-521 self-signed CA certificate for `localhost` (what go-plugin's
    /// `generateCert` produces on the Terraform side).
    pub fn generate() -> anyhow::Result<Self> {
        let key = KeyPair::generate_for(&PKCS_ECDSA_P521_SHA512).context("generate P-521 key")?;
        let mut params = CertificateParams::new(vec!["localhost".to_owned()])?;
        params
            .distinguished_name
            .push(DnType::CommonName, "localhost");
        params
            .distinguished_name
            .push(DnType::OrganizationName, "HashiCorp");
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
        let cert = params
            .self_signed(&key)
            .context("self-sign client certificate")?;
        Ok(Self {
            cert_der: cert.der().clone(),
            cert_pem: cert.pem(),
            key: PrivatePkcs8KeyDer::from(key.serialize_der()),
        })
    }
}

/// The crypto provider for the test client (aws-lc-rs: P-521 capable).
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}

/// A rustls client configuration that pins `server_cert`, presents `identity` (or no
/// certificate at all), and offers ALPN `h2`.
pub fn client_config(
    server_cert: CertificateDer<'static>,
    identity: Option<&ClientIdentity>,
) -> anyhow::Result<Arc<ClientConfig>> {
    let provider = provider();
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(PinnedServerCert {
            cert: server_cert,
            provider,
        }));
    let mut config = match identity {
        Some(identity) => builder.with_client_auth_cert(
            vec![identity.cert_der.clone()],
            PrivateKeyDer::Pkcs8(identity.key.clone_key()),
        )?,
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(Arc::new(config))
}

/// Accepts exactly the certificate announced in the handshake line (the go-plugin
/// client puts it alone in its root pool), checking handshake signatures with it.
#[derive(Debug)]
pub struct PinnedServerCert {
    cert: CertificateDer<'static>,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for PinnedServerCert {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if end_entity.as_ref() == self.cert.as_ref() {
            Ok(ServerCertVerified::assertion())
        } else {
            Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::ApplicationVerificationFailure,
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
