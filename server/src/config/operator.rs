//! The settings of an operator's surfaces, with ZooKeeper's keys: the
//! AdminServer (`admin.*`), the Prometheus endpoint (`metricsProvider.*`)
//! and TLS on the client port (`secureClientPort`, `ssl.*`, the x509
//! `authProvider`).

use super::{err, ConfigError, Props};
use std::path::PathBuf;

/// How a TLS client must show a certificate (`ssl.clientAuth`).
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
    pub password: String,
    pub kind: StoreKind,
}

/// TLS on the client port, with ZooKeeper's `ssl.*` keys.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsConfig {
    pub port: u16,
    pub address: Option<String>,
    pub key_store: StoreSpec,
    pub trust_store: Option<StoreSpec>,
    pub client_auth: ClientAuth,
    pub protocol: Option<String>,
    pub enabled_protocols: Option<Vec<String>>,
    pub cipher_suites: Option<Vec<String>>,
    /// `authProvider.*` names ZooKeeper's X509AuthenticationProvider.
    pub x509_auth: bool,
}

/// ZooKeeper's x509 authentication provider class.
pub const X509_PROVIDER: &str = "org.apache.zookeeper.server.auth.X509AuthenticationProvider";

/// Where the Prometheus endpoint listens (ZooKeeper's defaults: every
/// address, port 7000).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PrometheusConfig {
    pub host: String,
    pub port: u16,
}

/// ZooKeeper's Prometheus provider, as `metricsProvider.className` names it.
pub const PROMETHEUS_PROVIDER: &str =
    "org.apache.zookeeper.metrics.prometheus.PrometheusMetricsProvider";

/// Providers that export nothing over HTTP: ZooKeeper's default (whose
/// values `mntr` shows, as zkd's always does) and its null provider.
const QUIET_PROVIDERS: [&str; 2] = [
    "org.apache.zookeeper.metrics.impl.DefaultMetricsProvider",
    "org.apache.zookeeper.metrics.impl.NullMetricsProvider",
];

/// Where the AdminServer listens (ZooKeeper's defaults: every address,
/// port 8080, `/commands`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AdminConfig {
    pub address: String,
    pub port: u16,
    pub command_url: String,
}

/// The Prometheus endpoint `metricsProvider.*` asks for. ZooKeeper fails
/// to start on a provider class it cannot load; zkd on one it has not.
pub(super) fn prometheus(p: &mut Props) -> Result<Option<PrometheusConfig>, ConfigError> {
    const KEY: &str = "metricsProvider.className";
    // Its other settings (exportJvmInfo, the worker threads) have no
    // meaning here: read, so they are not reported unknown.
    let settings: Vec<String> = p
        .props
        .keys()
        .filter(|k| k.starts_with("metricsProvider."))
        .cloned()
        .collect();
    for key in &settings {
        p.get(key);
    }
    match p.get(KEY) {
        None => Ok(None),
        Some(c) if QUIET_PROVIDERS.contains(&c) => Ok(None),
        Some(PROMETHEUS_PROVIDER) => Ok(Some(PrometheusConfig {
            host: p
                .get("metricsProvider.httpHost")
                .unwrap_or("0.0.0.0")
                .to_owned(),
            port: p.num("metricsProvider.httpPort")?.unwrap_or(7000),
        })),
        Some(other) => Err(err(
            KEY,
            format!("{other} is not a metrics provider zkd has (it has {PROMETHEUS_PROVIDER})"),
        )),
    }
}

/// `secureClientPort` and the `ssl.*` keys; None without the port.
pub(super) fn tls(p: &mut Props) -> Result<Option<TlsConfig>, ConfigError> {
    let providers: Vec<String> = p
        .props
        .keys()
        .filter(|k| k.starts_with("authProvider."))
        .cloned()
        .collect();
    let x509_auth = providers.iter().any(|k| p.get(k) == Some(X509_PROVIDER));
    let _ = p.get("serverCnxnFactory"); // ZooKeeper needs Netty for TLS; zkd has one.
    let Some(port) = p.num::<u16>("secureClientPort")? else {
        return Ok(None);
    };
    let key_store = store(p, "ssl.keyStore")?
        .ok_or_else(|| err("ssl.keyStore.location", "is required with secureClientPort"))?;
    let list = |v: Option<&str>| v.map(|v| v.split(',').map(|s| s.trim().to_owned()).collect());
    Ok(Some(TlsConfig {
        port,
        address: p.get("secureClientPortAddress").map(str::to_owned),
        key_store,
        trust_store: store(p, "ssl.trustStore")?,
        client_auth: match p
            .get("ssl.clientAuth")
            .map(str::to_ascii_lowercase)
            .as_deref()
        {
            None | Some("need") => ClientAuth::Need,
            Some("want") => ClientAuth::Want,
            Some("none") => ClientAuth::None,
            Some(other) => {
                return Err(err(
                    "ssl.clientAuth",
                    format!("{other:?} is not need, want or none"),
                ))
            }
        },
        protocol: p.get("ssl.protocol").map(str::to_owned),
        enabled_protocols: list(p.get("ssl.enabledProtocols")),
        cipher_suites: list(p.get("ssl.ciphersuites")),
        x509_auth,
    }))
}

/// The store `prefix.location` names, with its password and kind.
fn store(p: &mut Props, prefix: &str) -> Result<Option<StoreSpec>, ConfigError> {
    let Some(location) = p.get(&format!("{prefix}.location")).map(PathBuf::from) else {
        return Ok(None);
    };
    let password = p
        .get(&format!("{prefix}.password"))
        .unwrap_or_default()
        .to_owned();
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
        password,
        kind,
    }))
}
