//! `zoo.cfg` and `myid`: ZooKeeper's own keys, parsed once and validated with
//! their cross-field rules. Unknown keys are logged, never fatal; an invalid
//! value is an error naming its key.

use crate::secret::Secret;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};

mod dynamic_file;
pub mod jaas;
mod operator;
mod properties;
mod sasl;
mod servers;
mod tls;
pub use dynamic_file::ConfigFiles;
use operator::prometheus;
pub use operator::{AdminConfig, PrometheusConfig, PROMETHEUS_PROVIDER};
pub use properties::{entries, parse_properties, redacted, Entry};
pub use sasl::{QuorumSaslConfig, SaslConfig, JAAS_KEY, SASL_PROVIDER};
pub use servers::ServerSpec;
use tls::{quorum_tls, tls};
pub use tls::{
    ClientAuth, QuorumTlsConfig, StoreKind, StoreSpec, TlsConfig, TlsSettings, X509_PROVIDER,
};

/// A configuration problem, naming the key at fault.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// The offending key (or file).
    pub key: String,
    /// What is wrong with it.
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid configuration: {}: {}", self.key, self.message)
    }
}

impl std::error::Error for ConfigError {}

fn err(key: &str, message: impl Into<String>) -> ConfigError {
    ConfigError {
        key: key.to_owned(),
        message: message.into(),
    }
}

/// Which four-letter words may run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Whitelist {
    /// `*`.
    All,
    /// The listed words.
    Only(BTreeSet<String>),
}

impl Whitelist {
    /// Whether `word` may run.
    pub fn allows(&self, word: &str) -> bool {
        match self {
            Whitelist::All => true,
            Whitelist::Only(words) => words.contains(word),
        }
    }
}

/// A validated server configuration.
#[derive(Clone, Debug)]
pub struct Config {
    pub tick_time_ms: u64,
    pub init_limit: Option<u32>,
    pub sync_limit: Option<u32>,
    pub data_dir: PathBuf,
    pub data_log_dir: PathBuf,
    /// The plaintext client port; None with only `secureClientPort`.
    pub client_port: Option<u16>,
    pub client_port_address: Option<String>,
    pub min_session_timeout_ms: i32,
    pub max_session_timeout_ms: i32,
    /// Connections allowed per client IP; 0 = unlimited.
    pub max_client_cnxns: u32,
    pub snap_count: u64,
    pub autopurge_snap_retain_count: usize,
    pub autopurge_purge_interval_hours: u32,
    pub four_letter_whitelist: Whitelist,
    pub servers: BTreeMap<u64, ServerSpec>,
    /// The membership's version (`version=` in hex, or the dynamic file's
    /// name); 0 when neither gives one.
    pub config_version: u64,
    /// `dynamicConfigFile`: where the `server.N` lines were read from.
    pub dynamic_config_file: Option<PathBuf>,
    /// `reconfigEnabled` (default false, as in ZooKeeper).
    pub reconfig_enabled: bool,
    pub my_id: Option<u64>,
    pub standalone_enabled: bool,
    pub extended_types_enabled: bool,
    /// Whether hard quotas refuse writes (`zookeeper.enforceQuota`, default false).
    pub enforce_quota: bool,
    /// `readonlymode.enabled` (a system property in ZooKeeper): a member
    /// without a quorum serves reads to read-only sessions.
    pub read_only_mode: bool,
    /// `localSessionsEnabled`, which read-only sessions need.
    pub local_sessions_enabled: bool,
    pub super_digest: Option<Secret>,
    /// `skipACL=yes` (`zookeeper.skipACL`): no ACL is checked, as in
    /// ZooKeeper; anyone may then reconfig.
    pub skip_acl: bool,
    pub container_check_interval_ms: u64,
    pub jute_max_buffer: usize,
    /// `zkd.faults.enable`: the member takes fault commands on a control
    /// socket in its dataDir (test ensembles only; off by default).
    pub faults_enabled: bool,
    /// ZooKeeper's AdminServer: HTTP on `admin.serverAddress:admin.serverPort`
    /// under `admin.commandURL`; None with `admin.enableServer=false`.
    pub admin: Option<AdminConfig>,
    /// ZooKeeper's Prometheus provider (`metricsProvider.className`): the
    /// `/metrics` endpoint's address; None with no provider or another.
    pub prometheus: Option<PrometheusConfig>,
    /// TLS on `secureClientPort`; None without one.
    pub tls: Option<TlsConfig>,
    /// TLS between members (`sslQuorum`, `portUnification`); None without.
    pub quorum_tls: Option<QuorumTlsConfig>,
    /// Client SASL (DIGEST-MD5) users from the JAAS file; None without one.
    pub sasl: Option<SaslConfig>,
    /// SASL between members (`quorum.auth.enableSasl`); None without.
    pub quorum_sasl: Option<QuorumSaslConfig>,
    /// `authProvider.*` names ZooKeeper's SASLAuthenticationProvider:
    /// `sasl:` ids are valid in ACLs.
    pub sasl_provider: bool,
    /// Auth schemes a session must hold one of before it is served
    /// (`sessionRequireClientSASLAuth`, `enforce.auth.*`); None: not enforced.
    pub enforced_auth: Option<Vec<String>>,
    /// The zoo.cfg text as read at start with every secret's value
    /// redacted (the AdminServer's `initial_configuration`); None when
    /// built from properties.
    pub redacted_text: Option<String>,
    /// The file it was read from; None when built from properties.
    pub file_path: Option<PathBuf>,
}

impl Config {
    /// Reads `path` and the `myid` file in its dataDir.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| err(&path.display().to_string(), e.to_string()))?;
        let mut props = parse_properties(&text);
        if !props.contains_key("dataDir") {
            return Err(err("dataDir", "is required"));
        }
        let data_dir = PathBuf::from(&props["dataDir"]);
        servers::read_dynamic_file(&mut props)?;
        if !props.contains_key("myid") {
            if let Some(id) = read_myid(&data_dir)? {
                props.insert("myid".into(), id.to_string());
            }
        }
        let config = Config::from_properties(&props)?;
        Ok(Config {
            redacted_text: Some(redacted(&text)),
            file_path: Some(path.to_path_buf()),
            ..config
        })
    }

    /// Builds and validates a configuration from `key=value` pairs.
    pub fn from_properties(props: &BTreeMap<String, String>) -> Result<Config, ConfigError> {
        let mut p = Props {
            props,
            used: BTreeSet::new(),
        };
        let tick = p.num::<u64>("tickTime")?.unwrap_or(3000);
        let data_dir = PathBuf::from(
            p.get("dataDir")
                .ok_or_else(|| err("dataDir", "is required"))?,
        );
        let jaas = sasl::jaas_file(&mut p)?;
        let mut config = Config {
            tick_time_ms: tick,
            init_limit: p.num("initLimit")?,
            sync_limit: p.num("syncLimit")?,
            data_log_dir: p
                .get("dataLogDir")
                .map(PathBuf::from)
                .unwrap_or_else(|| data_dir.clone()),
            data_dir,
            client_port: p.num("clientPort")?,
            client_port_address: p.get("clientPortAddress").map(str::to_owned),
            min_session_timeout_ms: p.num("minSessionTimeout")?.unwrap_or(2 * tick as i32),
            max_session_timeout_ms: p.num("maxSessionTimeout")?.unwrap_or(20 * tick as i32),
            max_client_cnxns: p.num("maxClientCnxns")?.unwrap_or(60),
            snap_count: p.num("snapCount")?.unwrap_or(100_000),
            autopurge_snap_retain_count: p.num("autopurge.snapRetainCount")?.unwrap_or(3),
            autopurge_purge_interval_hours: p.num("autopurge.purgeInterval")?.unwrap_or(0),
            four_letter_whitelist: parse_whitelist(p.get("4lw.commands.whitelist")),
            servers: servers::servers(&mut p)?,
            config_version: servers::version(&mut p)?,
            dynamic_config_file: p.get("dynamicConfigFile").map(PathBuf::from),
            reconfig_enabled: p.num("reconfigEnabled")?.unwrap_or(false),
            my_id: p.num("myid")?,
            standalone_enabled: p.num("standaloneEnabled")?.unwrap_or(true),
            extended_types_enabled: p.num("extendedTypesEnabled")?.unwrap_or(false),
            enforce_quota: p.num("enforceQuota")?.unwrap_or(false),
            read_only_mode: p.num("readonlymode.enabled")?.unwrap_or(false),
            local_sessions_enabled: p.num("localSessionsEnabled")?.unwrap_or(false),
            super_digest: p
                .get("DigestAuthenticationProvider.superDigest")
                .map(Secret::new),
            skip_acl: p.get("skipACL") == Some("yes"),
            container_check_interval_ms: p
                .num("znode.container.checkIntervalMs")?
                .unwrap_or(60_000),
            jute_max_buffer: p
                .num("jute.maxbuffer")?
                .unwrap_or(zkd_protocol::DEFAULT_MAX_BUFFER),
            faults_enabled: p.num("zkd.faults.enable")?.unwrap_or(false),
            admin: operator::admin(&mut p)?,
            prometheus: prometheus(&mut p)?,
            tls: tls(&mut p)?,
            quorum_tls: quorum_tls(&mut p)?,
            sasl: sasl::sasl(&mut p, jaas.as_ref())?,
            quorum_sasl: sasl::quorum_sasl(&mut p, jaas.as_ref())?,
            sasl_provider: auth_providers(&mut p).iter().any(|c| c == SASL_PROVIDER),
            enforced_auth: sasl::enforced_schemes(&mut p)?,
            redacted_text: None,
            file_path: None,
        };
        config.check_peer_type(p.get("peerType"))?;
        p.warn_unknown();
        config.take_client_address()?;
        config.validate()?;
        Ok(config)
    }

    /// Cross-field rules, checked once.
    pub fn validate(&self) -> Result<(), ConfigError> {
        // First, as ZooKeeper's QuorumPeer.start: a member whose dynamic file
        // a reconfig left it out of has no client port either.
        if let Some(id) = self
            .my_id
            .filter(|id| !self.servers.is_empty() && !self.servers.contains_key(id))
        {
            return Err(err(
                "myid",
                format!("My id {id} not in the peer list (no server.{id} line)"),
            ));
        }
        if self.client_port.is_none() && self.tls.as_ref().and_then(|t| t.port).is_none() {
            return Err(err("clientPort", "is required (or secureClientPort)"));
        }
        self.check_roles()?;
        if self.tick_time_ms == 0 {
            return Err(err("tickTime", "must be positive"));
        }
        if self.min_session_timeout_ms > self.max_session_timeout_ms {
            return Err(err(
                "minSessionTimeout",
                "must not exceed maxSessionTimeout",
            ));
        }
        if self.min_session_timeout_ms <= 0 {
            return Err(err("minSessionTimeout", "must be positive"));
        }
        if self.snap_count < 2 {
            return Err(err("snapCount", "must be at least 2"));
        }
        if self.autopurge_snap_retain_count < 3 {
            return Err(err("autopurge.snapRetainCount", "must be at least 3"));
        }
        if self.jute_max_buffer < 1024 {
            return Err(err("jute.maxbuffer", "must be at least 1024"));
        }
        if self.container_check_interval_ms == 0 {
            return Err(err("znode.container.checkIntervalMs", "must be positive"));
        }
        if self.is_quorum() && self.my_id.is_none() {
            return Err(err(
                "myid",
                format!(
                    "missing: an ensemble member needs {}/myid",
                    self.data_dir.display()
                ),
            ));
        }
        if self.is_quorum() && self.my_id.is_some_and(|id| id == 0 || id > 255) {
            // Session ids carry the member's id in their top byte.
            return Err(err("myid", "must be between 1 and 255"));
        }
        if let Some(id) = self.my_id {
            if self.extended_types_enabled && id > 254 {
                return Err(err(
                    "myid",
                    "must be at most 254 when extendedTypesEnabled is on",
                ));
            }
        }
        Ok(())
    }

    /// Whether the config describes a replicated ensemble (more than one participant,
    /// or standaloneEnabled=false), as ZooKeeper decides it.
    pub fn is_quorum(&self) -> bool {
        let participants = self.servers.values().filter(|s| !s.observer).count();
        !self.servers.is_empty() && (!self.standalone_enabled || participants > 1)
    }
}

fn read_myid(data_dir: &Path) -> Result<Option<u64>, ConfigError> {
    match std::fs::read_to_string(data_dir.join("myid")) {
        Ok(text) => {
            let first = text.lines().next().unwrap_or("").trim();
            first
                .parse()
                .map(Some)
                .map_err(|_| err("myid", format!("{first:?} is not a number")))
        }
        Err(_) => Ok(None),
    }
}

fn parse_whitelist(value: Option<&str>) -> Whitelist {
    match value {
        None => Whitelist::Only(BTreeSet::from(["srvr".to_owned()])),
        Some(v) if v.trim() == "*" => Whitelist::All,
        Some(v) => Whitelist::Only(
            v.split(',')
                .map(|w| w.trim().to_owned())
                .filter(|w| !w.is_empty())
                .collect(),
        ),
    }
}

/// Keys ZooKeeper knows that zkd accepts without acting on them.
const ACCEPTED_KEYS: [&str; 8] = [
    // zkd's sessions are global: only read-only ones are local.
    "localSessionsUpgradingEnabled",
    "electionAlg",
    "clientPortListenBacklog",
    "metricsProvider.className",
    "quorumListenOnAllIPs",
    "syncEnabled",
    "forceSync",
    "preAllocSize",
];

/// The classes `authProvider.*` names.
fn auth_providers(p: &mut Props) -> Vec<String> {
    let keys: Vec<String> = p
        .props
        .keys()
        .filter(|k| k.starts_with("authProvider."))
        .cloned()
        .collect();
    keys.iter()
        .filter_map(|k| p.get(k).map(str::to_owned))
        .collect()
}

struct Props<'a> {
    props: &'a BTreeMap<String, String>,
    used: BTreeSet<String>,
}

impl Props<'_> {
    fn get(&mut self, key: &str) -> Option<&str> {
        self.used.insert(key.to_owned());
        self.props.get(key).map(String::as_str)
    }

    fn num<T: std::str::FromStr>(&mut self, key: &str) -> Result<Option<T>, ConfigError> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v
                .parse()
                .map(Some)
                .map_err(|_| err(key, format!("{v:?} is not a valid value"))),
        }
    }

    fn warn_unknown(&self) {
        for key in self.props.keys() {
            if !self.used.contains(key) && !ACCEPTED_KEYS.contains(&key.as_str()) {
                tracing::warn!(key, "unknown configuration key ignored");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(text: &str) -> BTreeMap<String, String> {
        parse_properties(text)
    }

    #[test]
    fn defaults_follow_zookeeper() {
        let c = Config::from_properties(&props("tickTime=2000\ndataDir=/tmp/x\nclientPort=2181\n"))
            .unwrap();
        assert_eq!(c.min_session_timeout_ms, 4000);
        assert_eq!(c.max_session_timeout_ms, 40000);
        assert_eq!(c.max_client_cnxns, 60);
        assert_eq!(c.data_log_dir, PathBuf::from("/tmp/x"));
        assert!(c.four_letter_whitelist.allows("srvr"));
        assert!(!c.four_letter_whitelist.allows("ruok"));
        assert!(!c.is_quorum());
    }

    #[test]
    fn system_property_keys_are_accepted_with_or_without_prefix() {
        let c = Config::from_properties(&props(
            "dataDir=/d\nclientPort=1\nzookeeper.extendedTypesEnabled=true\nDigestAuthenticationProvider.superDigest=super:abc\njute.maxbuffer=4096\n4lw.commands.whitelist=*\nzookeeper.skipACL=yes",
        ))
        .unwrap();
        assert!(c.skip_acl);
        assert!(c.extended_types_enabled);
        assert_eq!(
            c.super_digest.as_ref().map(Secret::expose),
            Some("super:abc")
        );
        assert_eq!(c.jute_max_buffer, 4096);
        assert_eq!(c.four_letter_whitelist, Whitelist::All);
    }

    #[test]
    fn invalid_values_name_their_key() {
        let e =
            Config::from_properties(&props("dataDir=/d\nclientPort=1\ntickTime=abc")).unwrap_err();
        assert_eq!(e.key, "tickTime");
        let e = Config::from_properties(&props(
            "dataDir=/d\nclientPort=1\nminSessionTimeout=9000\nmaxSessionTimeout=100",
        ))
        .unwrap_err();
        assert_eq!(e.key, "minSessionTimeout");
    }

    #[test]
    fn server_lines_parse() {
        let c = Config::from_properties(&props(
            "dataDir=/d\nclientPort=2182\nmyid=2\nserver.1=127.0.0.1:2888:3888\nserver.2=127.0.0.1:2889:3889:participant;127.0.0.1:2182\n",
        ))
        .unwrap();
        assert_eq!(c.servers.len(), 2);
        assert_eq!(
            c.servers[&2].client_address.as_deref(),
            Some("127.0.0.1:2182")
        );
        assert!(c.is_quorum());
        assert_eq!(
            c.quorum_config_text(),
            "server.1=127.0.0.1:2888:3888:participant\n\
             server.2=127.0.0.1:2889:3889:participant;127.0.0.1:2182\nversion=0"
        );
        let e = Config::from_properties(&props("dataDir=/d\nclientPort=1\nserver.1=h:1:1"))
            .unwrap_err();
        assert_eq!(e.key, "server.1");
    }
}
