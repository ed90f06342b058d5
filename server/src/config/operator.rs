//! The settings of an operator's surfaces, with ZooKeeper's keys: the
//! AdminServer (`admin.*`) and the Prometheus endpoint (`metricsProvider.*`).

use super::{err, ConfigError, Props};

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

/// The AdminServer `admin.*` asks for; None with `admin.enableServer=false`.
pub(super) fn admin(p: &mut Props) -> Result<Option<AdminConfig>, ConfigError> {
    if !p.num("admin.enableServer")?.unwrap_or(true) {
        return Ok(None);
    }
    Ok(Some(AdminConfig {
        address: p.get("admin.serverAddress").unwrap_or("0.0.0.0").to_owned(),
        port: p.num("admin.serverPort")?.unwrap_or(8080),
        command_url: p.get("admin.commandURL").unwrap_or("/commands").to_owned(),
    }))
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
