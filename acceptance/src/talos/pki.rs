//! The cluster's PKI, minted per cluster: the CA, the API server's serving certificate, client
//! certificates for the admin, each control-plane component, each node and the API server's
//! kubelet client, serving certificates for the kubelets and the chart repositories, and the
//! ServiceAccount signing key pair. Written as PEM files the real components read.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};

/// Names the API server's certificate covers: KubePrism's `localhost`/`127.0.0.1` and the
/// in-cluster names, as on Talos (the control plane adds its Service IP).
pub const API_SERVER_SANS: &[&str] = &[
    "localhost",
    "127.0.0.1",
    "::1",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
];

/// A certificate and its key, PEM encoded.
#[derive(Clone)]
pub struct CertPair {
    pub cert_pem: String,
    pub key_pem: String,
}

impl std::fmt::Debug for CertPair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CertPair").finish_non_exhaustive()
    }
}

impl CertPair {
    /// Writes `NAME.crt` and `NAME.key` into `dir` and returns their paths.
    pub fn write(&self, dir: &Path, name: &str) -> std::io::Result<(PathBuf, PathBuf)> {
        let cert = dir.join(format!("{name}.crt"));
        let key = dir.join(format!("{name}.key"));
        std::fs::write(&cert, &self.cert_pem)?;
        write_private(&key, &self.key_pem)?;
        Ok((cert, key))
    }
}

/// What a leaf certificate is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Usage {
    Server,
    Client,
}

/// The cluster CA and the ServiceAccount key pair.
pub struct ClusterPki {
    pub ca_pem: String,
    issuer: Issuer<'static, KeyPair>,
    ca_key_pem: String,
    /// The ServiceAccount token signing key (PKCS#8) and its public key.
    pub service_account_key_pem: String,
    pub service_account_public_pem: String,
}

impl std::fmt::Debug for ClusterPki {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterPki").finish_non_exhaustive()
    }
}

impl ClusterPki {
    pub fn generate() -> Result<ClusterPki, rcgen::Error> {
        let ca_key = KeyPair::generate()?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params
            .distinguished_name
            .push(DnType::CommonName, "talos-sim-ca");
        params
            .distinguished_name
            .push(DnType::OrganizationName, "talos-sim");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca_cert = params.self_signed(&ca_key)?;
        let ca_key_pem = ca_key.serialize_pem();
        let sa_key = KeyPair::generate()?;
        Ok(ClusterPki {
            ca_pem: ca_cert.pem(),
            issuer: Issuer::new(params, ca_key),
            ca_key_pem,
            service_account_key_pem: sa_key.serialize_pem(),
            service_account_public_pem: sa_key.public_key_pem(),
        })
    }

    /// A leaf signed by the CA. `organizations` become the Kubernetes groups of a client
    /// certificate; `sans` are DNS names or IP addresses.
    pub fn leaf(
        &self,
        common_name: &str,
        organizations: &[&str],
        sans: &[&str],
        usage: Usage,
    ) -> Result<CertPair, rcgen::Error> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.subject_alt_names = sans
            .iter()
            .map(|s| match s.parse::<IpAddr>() {
                Ok(ip) => Ok(SanType::IpAddress(ip)),
                Err(_) => Ok(SanType::DnsName((*s).try_into()?)),
            })
            .collect::<Result<_, rcgen::Error>>()?;
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        // rcgen keeps one value per attribute type: a second `O` pushed as `OrganizationName`
        // would replace the first. The same OID (2.5.4.10) as a custom type is a second key.
        assert!(
            organizations.len() <= 2,
            "at most two groups per test certificate (rcgen keeps one value per attribute type)"
        );
        for (i, org) in organizations.iter().enumerate() {
            let attribute = if i == 0 {
                DnType::OrganizationName
            } else {
                DnType::CustomDnType(vec![2, 5, 4, 10])
            };
            params.distinguished_name.push(attribute, *org);
        }
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![match usage {
            Usage::Server => ExtendedKeyUsagePurpose::ServerAuth,
            Usage::Client => ExtendedKeyUsagePurpose::ClientAuth,
        }];
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok(CertPair {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }

    /// Writes `ca.crt`, `ca.key`, `sa.key` and `sa.pub` into `dir`.
    pub fn write(&self, dir: &Path) -> std::io::Result<()> {
        std::fs::write(dir.join("ca.crt"), &self.ca_pem)?;
        write_private(&dir.join("ca.key"), &self.ca_key_pem)?;
        write_private(&dir.join("sa.key"), &self.service_account_key_pem)?;
        std::fs::write(dir.join("sa.pub"), &self.service_account_public_pem)
    }
}

fn write_private(path: &Path, pem: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(pem.as_bytes())
}
