//! The one error type of the plugin runtime.

use std::io;

/// Why the plugin runtime could not start or keep serving.
///
/// Every message reads "failed to <step>: <cause>" so it can be printed to stderr
/// as is; the cause is kept as the error source where there is one.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `PLUGIN_PROTOCOL_VERSIONS` does not offer protocol 6.
    #[error(
        "failed to negotiate the plugin protocol: the client offers protocol version(s) \
         {offered:?} but this provider speaks only protocol 6 (Terraform >= 1.0 or OpenTofu)"
    )]
    UnsupportedProtocol {
        /// The raw value of `PLUGIN_PROTOCOL_VERSIONS`.
        offered: String,
    },

    /// An environment variable set by the client has a value we cannot use.
    #[error("failed to read {name}: {reason}")]
    InvalidEnv {
        /// Name of the variable.
        name: &'static str,
        /// What is wrong with its value.
        reason: String,
    },

    /// No port in the allowed range could be bound.
    #[error("failed to listen on 127.0.0.1 (ports {min}..={max}): {source}")]
    Bind {
        /// Lowest port tried.
        min: u16,
        /// Highest port tried.
        max: u16,
        /// The last bind error.
        #[source]
        source: io::Error,
    },

    /// The AutoMTLS server certificate could not be generated.
    #[error("failed to generate the server certificate: {0}")]
    CertificateGeneration(#[source] rcgen::Error),

    /// The rustls server configuration was rejected.
    #[error("failed to build the TLS configuration: {0}")]
    TlsConfig(#[source] rustls::Error),

    /// The async runtime could not be created.
    #[error("failed to start the async runtime: {0}")]
    Runtime(#[source] io::Error),

    /// Writing the handshake line (or the debug banner) to stdout failed.
    #[error("failed to write the handshake to stdout: {0}")]
    Stdout(#[source] io::Error),

    /// Installing a signal handler failed.
    #[error("failed to install a signal handler: {0}")]
    Signal(#[source] io::Error),

    /// The gRPC server stopped with an error.
    #[error("failed to serve gRPC: {0}")]
    Serve(#[source] tonic::transport::Error),
}
