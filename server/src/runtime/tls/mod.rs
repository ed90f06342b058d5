//! TLS with rustls, as ZooKeeper offers it: on the client port
//! (`secureClientPort`, as its Netty server does) and between members
//! (`sslQuorum`, [`quorum`]). The key store, the trust store that checks
//! the other end's certificate (`clientAuth`: need, want or none), the
//! protocols and cipher suites allowed, and a client's x509 identity.

mod host_check;
mod identity;
pub mod quorum;
mod stores;

use crate::config::{ClientAuth, TlsConfig, TlsSettings};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig, SupportedProtocolVersion};
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

pub use identity::subject;
pub use quorum::QuorumTls;

/// TLS for clients, loaded: the secure port, bound if configured, and
/// whether the plaintext client port takes TLS too.
pub struct ClientTls {
    /// The bound `secureClientPort`.
    pub secure_listener: Option<TcpListener>,
    pub acceptor: TlsAcceptor,
    /// Whether a client certificate authenticates as `x509:` + its subject
    /// (`authProvider.*` names ZooKeeper's X509AuthenticationProvider).
    pub x509_auth: bool,
    /// `client.portUnification`.
    pub unified: bool,
}

impl ClientTls {
    /// Loads `config`'s stores and binds its port: a clear error for either.
    pub async fn load(config: &TlsConfig) -> Result<ClientTls, String> {
        let acceptor = acceptor(&config.settings)?;
        let host = config.address.as_deref().unwrap_or("0.0.0.0");
        let secure_listener =
            match config.port {
                None => None,
                Some(port) => Some(TcpListener::bind((host, port)).await.map_err(|e| {
                    format!("cannot listen on secureClientPort {host}:{port}: {e}")
                })?),
            };
        Ok(ClientTls {
            secure_listener,
            acceptor,
            x509_auth: config.x509_auth,
            unified: config.unified,
        })
    }
}

/// The first byte of a TLS handshake record; no plaintext client's first
/// byte (a frame length's top byte, or a four-letter word) is 22.
pub const HANDSHAKE_RECORD: u8 = 22;

/// The TLS handshake on an accepted socket, within `limit`: the stream and
/// the subject its certificate authenticates it as. None when the
/// handshake fails, or (as in ZooKeeper) when a client shows a certificate
/// and no x509 provider is configured to take it.
pub async fn handshake(
    stream: tokio::net::TcpStream,
    acceptor: &TlsAcceptor,
    x509_auth: bool,
    limit: std::time::Duration,
) -> Option<(
    tokio_rustls::server::TlsStream<tokio::net::TcpStream>,
    Option<String>,
)> {
    let tls = match tokio::time::timeout(limit, acceptor.accept(stream)).await {
        Ok(Ok(tls)) => tls,
        Ok(Err(e)) => {
            tracing::warn!("unsuccessful TLS handshake: {e}");
            return None;
        }
        Err(_) => return None,
    };
    let certificate = tls.get_ref().1.peer_certificates().and_then(|c| c.first());
    let subject = match (certificate, x509_auth) {
        (None, _) => None,
        (Some(cert), true) => Some(subject(cert)?),
        (Some(_), false) => {
            tracing::warn!("a client certificate, and no x509 auth provider (authProvider.x509) to take it: closing");
            return None;
        }
    };
    Some((tls, subject))
}

/// The accepting side of `config`, loaded: a clear error for a store that
/// cannot be read (a wrong password, a missing file, JKS) or a protocol or
/// cipher suite rustls has not.
pub fn acceptor(config: &TlsSettings) -> Result<TlsAcceptor, String> {
    let prefix = config.prefix;
    let provider = Arc::new(provider(config)?);
    let versions = versions(config)?;
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)
        .map_err(|e| format!("{prefix}enabledProtocols: {e}"))?;
    let builder = match (&config.trust_store, config.client_auth) {
        (_, ClientAuth::None) => builder.with_no_client_auth(),
        (None, _) => {
            let why = format!("{prefix}clientAuth=need or want needs {prefix}trustStore.location");
            return Err(why);
        }
        (Some(trust), auth) => {
            let roots = roots(trust)?;
            let verifier = WebPkiClientVerifier::builder_with_provider(roots, provider);
            let verifier = match auth {
                ClientAuth::Want => verifier.allow_unauthenticated(),
                _ => verifier,
            };
            builder.with_client_cert_verifier(verifier.build().map_err(|e| e.to_string())?)
        }
    };
    let identity = stores::identity(&config.key_store)?;
    let server = builder
        .with_single_cert(identity.chain, identity.key)
        .map_err(|e| format!("{}: {e}", config.key_store.location.display()))?;
    Ok(TlsAcceptor::from(Arc::new(server)))
}

/// The certificates `trust` holds, as rustls' roots.
fn roots(trust: &crate::config::StoreSpec) -> Result<Arc<RootCertStore>, String> {
    let mut roots = RootCertStore::empty();
    for cert in stores::trusted(trust)? {
        roots
            .add(cert)
            .map_err(|e| format!("{}: {e}", trust.location.display()))?;
    }
    Ok(Arc::new(roots))
}

/// ring's suites, only those `ciphersuites` names when it is set, by
/// their IANA names, which Java uses too (`TLS_AES_128_GCM_SHA256` for
/// TLS 1.3). A name zkd has no suite for is logged and skipped.
fn provider(config: &TlsSettings) -> Result<rustls::crypto::CryptoProvider, String> {
    let mut provider = rustls::crypto::ring::default_provider();
    if let Some(wanted) = &config.cipher_suites {
        let ours: Vec<String> = provider.cipher_suites.iter().map(iana_name).collect();
        for name in wanted.iter().filter(|w| !ours.contains(w)) {
            tracing::warn!(
                "{}ciphersuites: {name} is not a suite zkd has; skipped",
                config.prefix
            );
        }
        provider
            .cipher_suites
            .retain(|s| wanted.contains(&iana_name(s)));
        if provider.cipher_suites.is_empty() {
            let prefix = config.prefix;
            return Err(format!(
                "{prefix}ciphersuites: none of {wanted:?} is a suite zkd has"
            ));
        }
    }
    Ok(provider)
}

/// A suite's IANA name: rustls says `TLS13_` where the IANA (and Java)
/// say `TLS_` for TLS 1.3's suites; TLS 1.2's names are the same.
fn iana_name(suite: &rustls::SupportedCipherSuite) -> String {
    let name = format!("{:?}", suite.suite());
    match name.strip_prefix("TLS13_") {
        Some(rest) => format!("TLS_{rest}"),
        None => name,
    }
}

/// The protocol versions `enabledProtocols` (else `protocol`,
/// TLSv1.3 by default as in ZooKeeper 3.8 on Java 11+) allows. `TLSv1.2`
/// and `TLSv1.3` only: rustls has no older version.
fn versions(config: &TlsSettings) -> Result<Vec<&'static SupportedProtocolVersion>, String> {
    let names: Vec<&str> = match &config.enabled_protocols {
        Some(list) => list.iter().map(String::as_str).collect(),
        None => match config.protocol.as_deref() {
            // "TLS" (Java's name for the newest) and TLSv1.3 allow both, as Java's
            // context does for a TLSv1.2 client.
            None | Some("TLS") | Some("TLSv1.3") => vec!["TLSv1.3", "TLSv1.2"],
            Some(one) => vec![one],
        },
    };
    names
        .iter()
        .map(|n| match *n {
            "TLSv1.3" => Ok(&rustls::version::TLS13),
            "TLSv1.2" => Ok(&rustls::version::TLS12),
            other => Err(format!(
                "{other} is not a protocol zkd has (TLSv1.2, TLSv1.3)"
            )),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{ClientAuth, StoreKind, StoreSpec};

    fn settings(suites: &[&str]) -> TlsSettings {
        TlsSettings {
            prefix: "ssl.",
            key_store: StoreSpec {
                location: "/nonexistent.pem".into(),
                password: Default::default(),
                kind: StoreKind::Pem,
            },
            trust_store: None,
            client_auth: ClientAuth::None,
            protocol: None,
            enabled_protocols: None,
            cipher_suites: Some(suites.iter().map(|s| s.to_string()).collect()),
            hostname_verification: false,
        }
    }

    fn kept(suites: &[&str]) -> Result<Vec<String>, String> {
        let provider = provider(&settings(suites))?;
        Ok(provider.cipher_suites.iter().map(iana_name).collect())
    }

    #[test]
    fn cipher_suites_are_taken_by_their_iana_and_java_names() {
        let tls13 = ["TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"];
        assert_eq!(kept(&tls13).unwrap(), tls13);
        let mixed = [
            "TLS_AES_128_GCM_SHA256",
            "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
            "TLS_RSA_WITH_AES_128_CBC_SHA",
        ];
        // Both versions' suites stay; the one zkd has not is skipped.
        assert_eq!(kept(&mixed).unwrap(), &mixed[..2]);
        assert!(kept(&["TLS_RSA_WITH_AES_128_CBC_SHA"]).is_err());
    }
}
