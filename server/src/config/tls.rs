//! TLS settings with ZooKeeper's keys: the client port's (`secureClientPort`,
//! `ssl.*`, the x509 `authProvider`) and the quorum's (`sslQuorum`,
//! `portUnification`, `ssl.quorum.*`). Both read the same set of keys
//! under their own prefix, as ZooKeeper's ClientX509Util and
//! QuorumX509Util do.

use super::{err, ConfigError, Props};
use crate::secret::Secret;
use std::path::PathBuf;

/// How a TLS peer must show a certificate (`ssl.clientAuth`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientAuth {
    Need,
    Want,
    None,
}

/// What a key or trust store file is (`ssl.*Store.type`, else its extension).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreKind {
    Pkcs12,
    Pem,
    Jks,
}

/// A key or trust store: its file, password and kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreSpec {
    pub location: PathBuf,
    pub password: Secret,
    pub kind: StoreKind,
}

/// One prefix's TLS keys (`ssl.` or `ssl.quorum.`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsSettings {
    /// The keys' prefix, for errors that name them.
    pub prefix: &'static str,
    pub key_store: StoreSpec,
    pub trust_store: Option<StoreSpec>,
    pub client_auth: ClientAuth,
    pub protocol: Option<String>,
    pub enabled_protocols: Option<Vec<String>>,
    pub cipher_suites: Option<Vec<String>>,
    /// `hostnameVerification` (default true): the peer's certificate must
    /// name the address it connects from or to. Only the quorum checks
    /// both ends; ZooKeeper's client port never checks a client's.
    pub hostname_verification: bool,
}

/// TLS for clients, with ZooKeeper's `ssl.*` keys: on the secure port, or
/// on the client port beside plaintext (`client.portUnification`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsConfig {
    /// `secureClientPort`, if set.
    pub port: Option<u16>,
    pub address: Option<String>,
    /// `client.portUnification`: the client port takes TLS too.
    pub unified: bool,
    pub settings: TlsSettings,
    /// `authProvider.*` names ZooKeeper's X509AuthenticationProvider.
    pub x509_auth: bool,
}

/// TLS between members, with ZooKeeper's `sslQuorum`, `portUnification`
/// and `ssl.quorum.*` keys.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuorumTlsConfig {
    /// `sslQuorum`: dial other members with TLS, and (without
    /// `portUnification`) take nothing else.
    pub dial_tls: bool,
    /// `portUnification`: the election and quorum ports take TLS and
    /// plaintext both, for a rolling switch.
    pub unified: bool,
    pub settings: TlsSettings,
}

/// ZooKeeper's x509 authentication provider class.
pub const X509_PROVIDER: &str = "org.apache.zookeeper.server.auth.X509AuthenticationProvider";

/// `secureClientPort`, `client.portUnification` and the `ssl.*` keys;
/// None with neither.
pub(super) fn tls(p: &mut Props) -> Result<Option<TlsConfig>, ConfigError> {
    let x509_auth = super::auth_providers(p).iter().any(|c| c == X509_PROVIDER);
    let _ = p.get("serverCnxnFactory"); // ZooKeeper needs Netty for TLS; zkd has one.
    let port = p.num::<u16>("secureClientPort")?;
    let unified = p.num("client.portUnification")?.unwrap_or(false);
    let why = match (port, unified) {
        (None, false) => return Ok(None),
        (Some(_), _) => "secureClientPort",
        (None, true) => "client.portUnification",
    };
    Ok(Some(TlsConfig {
        port,
        address: p.get("secureClientPortAddress").map(str::to_owned),
        unified,
        settings: settings(p, "ssl.", why)?,
        x509_auth,
    }))
}

/// `sslQuorum`, `portUnification` and the `ssl.quorum.*` keys; None with
/// neither switch on.
pub(super) fn quorum_tls(p: &mut Props) -> Result<Option<QuorumTlsConfig>, ConfigError> {
    let dial_tls = p.num("sslQuorum")?.unwrap_or(false);
    let unified = p.num("portUnification")?.unwrap_or(false);
    if p.num("sslQuorumReloadCertFiles")?.unwrap_or(false) {
        tracing::warn!("sslQuorumReloadCertFiles: zkd reads its stores at start only");
    }
    if !dial_tls && !unified {
        return Ok(None);
    }
    let why = if dial_tls {
        "sslQuorum"
    } else {
        "portUnification"
    };
    let settings = settings(p, "ssl.quorum.", why)?;
    if settings.trust_store.is_none() {
        // A member checks every other member's certificate.
        return Err(err(
            "ssl.quorum.trustStore.location",
            format!("is required with {why}"),
        ));
    }
    Ok(Some(QuorumTlsConfig {
        dial_tls,
        unified,
        settings,
    }))
}

/// The keys under `prefix`; `why` names the switch that needs a key store.
fn settings(p: &mut Props, prefix: &'static str, why: &str) -> Result<TlsSettings, ConfigError> {
    let key = |name: &str| format!("{prefix}{name}");
    let key_store = store(p, &key("keyStore"))?
        .ok_or_else(|| err(&key("keyStore.location"), format!("is required with {why}")))?;
    let list = |v: Option<&str>| v.map(|v| v.split(',').map(|s| s.trim().to_owned()).collect());
    let client_auth = match p.get(&key("clientAuth")).map(str::to_ascii_lowercase) {
        None => ClientAuth::Need,
        Some(v) => match v.as_str() {
            "need" | "" => ClientAuth::Need,
            "want" => ClientAuth::Want,
            "none" => ClientAuth::None,
            other => {
                let why = format!("{other:?} is not need, want or none");
                return Err(err(&key("clientAuth"), why));
            }
        },
    };
    Ok(TlsSettings {
        prefix,
        key_store,
        trust_store: store(p, &key("trustStore"))?,
        client_auth,
        protocol: p.get(&key("protocol")).map(str::to_owned),
        enabled_protocols: list(p.get(&key("enabledProtocols"))),
        cipher_suites: list(p.get(&key("ciphersuites"))),
        hostname_verification: p.num(&key("hostnameVerification"))?.unwrap_or(true),
    })
}

/// The store `prefix.location` names, with its password (`.password`, or
/// the file `.passwordPath` names, which wins as in ZooKeeper) and kind.
fn store(p: &mut Props, prefix: &str) -> Result<Option<StoreSpec>, ConfigError> {
    let Some(location) = p.get(&format!("{prefix}.location")).map(PathBuf::from) else {
        return Ok(None);
    };
    let password = match p.get(&format!("{prefix}.passwordPath")) {
        Some(path) => read_secret(path).map_err(|e| err(&format!("{prefix}.passwordPath"), e))?,
        None => p
            .get(&format!("{prefix}.password"))
            .unwrap_or_default()
            .to_owned(),
    };
    let by_name = location
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    let kind = match p
        .get(&format!("{prefix}.type"))
        .map(str::to_ascii_uppercase)
    {
        Some(t) => t,
        None => match by_name.as_deref() {
            Some("pem") => "PEM".into(),
            Some("p12") | Some("pfx") => "PKCS12".into(),
            _ => "JKS".into(),
        },
    };
    let kind = match kind.as_str() {
        "PKCS12" => StoreKind::Pkcs12,
        "PEM" => StoreKind::Pem,
        "JKS" => StoreKind::Jks,
        other => {
            return Err(err(
                &format!("{prefix}.type"),
                format!("{other} is not PKCS12, PEM or JKS"),
            ))
        }
    };
    Ok(Some(StoreSpec {
        location,
        password: Secret::new(password),
        kind,
    }))
}

/// A password file's text, less one trailing line break (ZooKeeper's
/// SecretUtils).
fn read_secret(path: &str) -> Result<String, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {path}: {e}"))?;
    Ok(text.strip_suffix('\n').unwrap_or(&text).to_owned())
}
