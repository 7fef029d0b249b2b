//! TLS for the PostgreSQL store: rustls with ring, and libpq's certificate policies, which
//! tokio-postgres leaves to the TLS connector (its own `sslmode` only knows whether to ask
//! for TLS):
//!
//! - `require`, `prefer`, `allow` with no root certificates: any certificate is accepted
//!   (libpq's meaning: encryption without authentication);
//! - the same with root certificates (`sslrootcert`, `~/.postgresql/root.crt`), and
//!   `verify-ca`: the chain must lead to one of them; the host name is not checked;
//! - `verify-full`: the chain and the host name (rustls's own verifier).
//!
//! The handshake's signatures are always verified with the certificate presented.

use std::io::Read;
use std::path::Path;
use std::sync::Arc;

use postgres::Socket;
use postgres::tls::MakeTlsConnect;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{WebPkiServerVerifier, verify_server_cert_signed_by_trust_anchor};
use rustls::crypto::{CryptoProvider, verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::ParsedCertificate;
use rustls::{DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::error::PgSettingsError;
use crate::pg::conninfo::{Roots, SslMode};

/// A root certificate file larger than this is refused (Mozilla's whole bundle is ~220 KiB).
const MAX_ROOTS_SIZE: u64 = 16 << 20;

/// The TLS connector of a store: rustls, with the verifier `sslmode` and the roots call for.
#[derive(Clone)]
pub(crate) struct PgTls(MakeRustlsConnect);

impl std::fmt::Debug for PgTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PgTls")
    }
}

impl MakeTlsConnect<Socket> for PgTls {
    type Stream = <MakeRustlsConnect as MakeTlsConnect<Socket>>::Stream;
    type TlsConnect = <MakeRustlsConnect as MakeTlsConnect<Socket>>::TlsConnect;
    type Error = <MakeRustlsConnect as MakeTlsConnect<Socket>>::Error;

    fn make_tls_connect(&mut self, domain: &str) -> Result<Self::TlsConnect, Self::Error> {
        // tokio-postgres asks for a connector before every connection, also over a Unix
        // socket, where it passes no host name (""), which is no valid server name: that
        // failed every socket connection with "error performing TLS handshake", even with
        // `sslmode=disable`. PostgreSQL never speaks TLS on a socket (it answers "no" to the
        // TLS request), so the name given here is never used.
        let domain = if domain.is_empty() {
            "localhost"
        } else {
            domain
        };
        MakeTlsConnect::<Socket>::make_tls_connect(&mut self.0, domain)
    }
}

/// The connector for `ssl` and `roots`.
pub(crate) fn connector(ssl: SslMode, roots: &Roots) -> Result<PgTls, PgSettingsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier: Arc<dyn ServerCertVerifier> = match roots {
        Roots::None => Arc::new(AnyCertificate(provider.clone())),
        Roots::File(path) => chosen(ssl, load(path)?, &provider)?,
        Roots::System => chosen(
            ssl,
            RootCertStore {
                roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
            },
            &provider,
        )?,
    };
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    Ok(PgTls(MakeRustlsConnect::new(config)))
}

/// `verify-full` checks the host name; every other mode given roots checks the chain only.
fn chosen(
    ssl: SslMode,
    roots: RootCertStore,
    provider: &Arc<CryptoProvider>,
) -> Result<Arc<dyn ServerCertVerifier>, PgSettingsError> {
    let roots = Arc::new(roots);
    if ssl == SslMode::VerifyFull {
        let verifier = WebPkiServerVerifier::builder_with_provider(roots, provider.clone())
            .build()
            .map_err(|e| PgSettingsError::Tls(rustls::Error::General(e.to_string())))?;
        return Ok(verifier);
    }
    Ok(Arc::new(ChainOnly {
        roots,
        provider: provider.clone(),
    }))
}

/// The CA certificates of a PEM file.
fn load(path: &Path) -> Result<RootCertStore, PgSettingsError> {
    let problem = |message: String| PgSettingsError::RootCert {
        path: path.to_path_buf(),
        message,
    };
    let mut pem = Vec::new();
    std::fs::File::open(path)
        .and_then(|file| file.take(MAX_ROOTS_SIZE).read_to_end(&mut pem))
        .map_err(|e| problem(e.to_string()))?;
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&pem) {
        let cert = cert.map_err(|e| problem(format!("not PEM certificates: {e}")))?;
        roots
            .add(cert)
            .map_err(|e| problem(format!("unusable certificate: {e}")))?;
    }
    if roots.is_empty() {
        return Err(problem("holds no certificate".into()));
    }
    Ok(roots)
}

/// Accepts any certificate (libpq's `require` without root certificates); the handshake's
/// signatures are still checked against it.
#[derive(Debug)]
struct AnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// Verifies that the certificate chain leads to one of `roots` (validity dates, signatures,
/// key usage for a server), not that it names the host: libpq's `verify-ca`.
#[derive(Debug)]
struct ChainOnly {
    roots: Arc<RootCertStore>,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let cert = ParsedCertificate::try_from(end_entity)?;
        verify_server_cert_signed_by_trust_anchor(
            &cert,
            &self.roots,
            intermediates,
            now,
            self.provider.signature_verification_algorithms.all,
        )?;
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
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
        verify_tls13_signature(
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

/// Whether a failed connection failed in the TLS handshake (what `prefer` falls back from).
pub(crate) fn is_handshake_failure(error: &postgres::Error) -> bool {
    let mut source = std::error::Error::source(error);
    while let Some(e) = source {
        if e.is::<rustls::Error>() {
            return true;
        }
        if let Some(io) = e.downcast_ref::<std::io::Error>()
            && io
                .get_ref()
                .is_some_and(|inner| inner.is::<rustls::Error>())
        {
            return true;
        }
        source = e.source();
    }
    false
}
