//! The simulated cluster's PKI: a generated CA, the API server certificate, the admin client
//! certificate (O=system:masters), the admin bearer token, and the rustls server configuration.

use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{
    DigitallySignedStruct, DistinguishedName, RootCertStore, ServerConfig, SignatureScheme,
};

/// Failure to build the PKI.
#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    #[error("failed to generate a certificate: {0}")]
    Rcgen(#[from] rcgen::Error),
    #[error("failed to build the TLS configuration: {0}")]
    Tls(#[from] rustls::Error),
    #[error("failed to build the client verifier: {0}")]
    Verifier(String),
}

/// Certificates and credentials of one simulated cluster.
pub struct Pki {
    pub ca_pem: String,
    pub admin_cert_pem: String,
    pub admin_key_pem: String,
    pub admin_token: String,
    pub tls: Arc<ServerConfig>,
    pub verifier: Arc<dyn ClientCertVerifier>,
}

impl Pki {
    pub fn generate() -> Result<Pki, PkiError> {
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let ca_key = KeyPair::generate()?;
        let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "talos-sim-ca");
        ca_params
            .distinguished_name
            .push(DnType::OrganizationName, "talos-sim");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca_cert = ca_params.self_signed(&ca_key)?;
        let issuer = Issuer::new(ca_params, ca_key);

        let server_key = KeyPair::generate()?;
        let sans: Vec<String> = [
            "localhost",
            "127.0.0.1",
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
            "kubernetes.default.svc.cluster.local",
            "10.96.0.1",
            "::1",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let mut server_params = CertificateParams::new(sans)?;
        server_params
            .distinguished_name
            .push(DnType::CommonName, "kube-apiserver");
        server_params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let server_cert = server_params.signed_by(&server_key, &issuer)?;

        let admin_key = KeyPair::generate()?;
        let mut admin_params = CertificateParams::new(Vec::<String>::new())?;
        admin_params
            .distinguished_name
            .push(DnType::CommonName, "admin");
        admin_params
            .distinguished_name
            .push(DnType::OrganizationName, "system:masters");
        admin_params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let admin_cert = admin_params.signed_by(&admin_key, &issuer)?;

        let mut roots = RootCertStore::empty();
        roots.add(ca_cert.der().clone())?;
        let webpki = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
            .allow_unauthenticated()
            .build()
            .map_err(|e| PkiError::Verifier(e.to_string()))?;
        let verifier: Arc<dyn ClientCertVerifier> = Arc::new(LenientVerifier(webpki.clone()));
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(server_key.serialize_der()));
        let mut tls = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_client_cert_verifier(verifier)
            .with_single_cert(vec![server_cert.der().clone(), ca_cert.der().clone()], key)?;
        tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];

        Ok(Pki {
            ca_pem: ca_cert.pem(),
            admin_cert_pem: admin_cert.pem(),
            admin_key_pem: admin_key.serialize_pem(),
            admin_token: crate::util::hex(&crate::util::random_bytes::<24>()),
            tls: Arc::new(tls),
            verifier: webpki,
        })
    }

    /// Whether a presented client certificate chain is signed by the cluster CA.
    pub fn verify_client(&self, chain: &[CertificateDer<'static>]) -> bool {
        let Some((end, rest)) = chain.split_first() else {
            return false;
        };
        self.verifier
            .verify_client_cert(end, rest, UnixTime::now())
            .is_ok()
    }
}

/// Accepts any client certificate at the TLS layer (handshake signatures are still checked), so
/// that an unknown certificate gets a Kubernetes `401 Unauthorized` like from the real API
/// server, instead of a TLS alert. The chain is verified per request ([`Pki::verify_client`]).
#[derive(Debug)]
struct LenientVerifier(Arc<dyn ClientCertVerifier>);

impl ClientCertVerifier for LenientVerifier {
    fn offer_client_auth(&self) -> bool {
        true
    }
    fn client_auth_mandatory(&self) -> bool {
        false
    }
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.0.root_hint_subjects()
    }
    fn verify_client_cert(
        &self,
        _end: &CertificateDer<'_>,
        _rest: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        Ok(ClientCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}
