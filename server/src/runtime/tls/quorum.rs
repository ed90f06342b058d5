//! Quorum TLS (`sslQuorum`, `portUnification`, `ssl.quorum.*`): what a
//! member does with a socket to or from another member before the
//! election or Zab protocol speaks on it. Both ends show a certificate
//! from the quorum's trust store (`ssl.quorum.clientAuth`, need by
//! default) and, with `ssl.quorum.hostnameVerification`, one that names
//! the other end's address. With `portUnification` a port takes TLS and
//! plaintext both, told apart by the first byte (a TLS record starts with
//! 22, a handshake), so an ensemble can switch one member at a time.

use super::host_check::names_address;
use crate::config::QuorumTlsConfig;
use crate::runtime::peer::PeerStream;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, SignatureScheme};
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::TcpStream;
use tokio_rustls::{TlsAcceptor, TlsConnector, TlsStream};

/// A member's quorum TLS, loaded.
pub struct QuorumTls {
    acceptor: TlsAcceptor,
    connector: TlsConnector,
    dial_tls: bool,
    unified: bool,
    verify_hosts: bool,
}

impl std::fmt::Debug for QuorumTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QuorumTls")
            .field("dial_tls", &self.dial_tls)
            .field("unified", &self.unified)
            .field("verify_hosts", &self.verify_hosts)
            .finish_non_exhaustive()
    }
}

impl QuorumTls {
    /// Loads `config`'s stores: a clear error for one that cannot be read.
    pub fn load(config: &QuorumTlsConfig) -> Result<QuorumTls, String> {
        Ok(QuorumTls {
            acceptor: super::acceptor(&config.settings)?,
            connector: connector(config)?,
            dial_tls: config.dial_tls,
            unified: config.unified,
            verify_hosts: config.settings.hostname_verification,
        })
    }

    /// A connection accepted on the election or quorum port, secured as
    /// this member's settings ask; an error closes it.
    pub async fn accept(&self, stream: TcpStream, remote: SocketAddr) -> io::Result<PeerStream> {
        if self.unified && !starts_tls(&stream).await? {
            return Ok(PeerStream::Plain(stream));
        }
        let tls = self.acceptor.accept(stream).await?;
        self.check_host(TlsStream::Server(tls), remote).await
    }

    /// A connection this member opened to `host`, secured as its settings ask.
    pub async fn connect(&self, stream: TcpStream, host: &str) -> io::Result<PeerStream> {
        if !self.dial_tls {
            return Ok(PeerStream::Plain(stream));
        }
        let remote = stream.peer_addr()?;
        let name = ServerName::try_from(host.to_owned())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let tls = self.connector.connect(name, stream).await?;
        self.check_host(TlsStream::Client(tls), remote).await
    }

    /// The stream, if the other end's certificate names `remote` (or
    /// hostname verification is off).
    async fn check_host(
        &self,
        tls: TlsStream<TcpStream>,
        remote: SocketAddr,
    ) -> io::Result<PeerStream> {
        if self.verify_hosts {
            let cert = tls.get_ref().1.peer_certificates().and_then(|c| c.first());
            let Some(cert) = cert else {
                return Err(io::Error::other("no certificate"));
            };
            names_address(cert, remote.ip())
                .await
                .map_err(io::Error::other)?;
        }
        Ok(PeerStream::Tls(Box::new(tls)))
    }
}

/// Whether the peer's first byte opens a TLS handshake (waits for it).
async fn starts_tls(stream: &TcpStream) -> io::Result<bool> {
    let mut first = [0u8; 1];
    match stream.peek(&mut first).await? {
        0 => Err(io::ErrorKind::UnexpectedEof.into()),
        _ => Ok(first[0] == super::HANDSHAKE_RECORD),
    }
}

/// The dialing side: this member's certificate, and the quorum's trust
/// store for the other's. The name check is [`QuorumTls::check_host`]'s,
/// by address as ZooKeeper's, not rustls' by the name dialed.
fn connector(config: &QuorumTlsConfig) -> Result<TlsConnector, String> {
    let settings = &config.settings;
    let prefix = settings.prefix;
    let trust = settings
        .trust_store
        .as_ref()
        .ok_or_else(|| format!("{prefix}trustStore.location is required"))?;
    let provider = Arc::new(super::provider(settings)?);
    let chain = WebPkiServerVerifier::builder_with_provider(super::roots(trust)?, provider.clone())
        .build()
        .map_err(|e| e.to_string())?;
    let identity = super::stores::identity(&settings.key_store)?;
    let client = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&super::versions(settings)?)
        .map_err(|e| format!("{prefix}enabledProtocols: {e}"))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(ChainOnly(chain)))
        .with_client_auth_cert(identity.chain, identity.key)
        .map_err(|e| format!("{}: {e}", settings.key_store.location.display()))?;
    Ok(TlsConnector::from(Arc::new(client)))
}

/// rustls' verifier less its check of the name dialed: the chain, dates
/// and signatures are checked as ever.
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let verified =
            self.0
                .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now);
        match verified {
            // webpki checks the name last, after the chain.
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}
