//! Commands about the server itself: its configuration, directories,
//! environment, system properties, last snapshot and trace mask.
//! JVM-only keys (`java.*`, `sun.*`, `jdk.*`, the heap's `os.memory.*`, the
//! JVM's locale settings) are left out.

use super::commands::{error, object};
use crate::config::parse_properties;
use crate::runtime::server_info::{version_string, ServerInfo};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// zoo.cfg keys ZooKeeper's `QuorumPeerConfig` reads itself; it makes
/// every other key a system property named `zookeeper.` + the key.
const PARSED_KEYS: [&str; 34] = [
    "dataDir",
    "dataLogDir",
    "clientPort",
    "localSessionsEnabled",
    "localSessionsUpgradingEnabled",
    "clientPortAddress",
    "secureClientPort",
    "secureClientPortAddress",
    "observerMasterPort",
    "clientPortListenBacklog",
    "tickTime",
    "maxClientCnxns",
    "minSessionTimeout",
    "maxSessionTimeout",
    "initLimit",
    "syncLimit",
    "connectToLearnerMasterLimit",
    "electionAlg",
    "quorumListenOnAllIPs",
    "peerType",
    "syncEnabled",
    "dynamicConfigFile",
    "autopurge.snapRetainCount",
    "autopurge.purgeInterval",
    "standaloneEnabled",
    "reconfigEnabled",
    "sslQuorum",
    "portUnification",
    "sslQuorumReloadCertFiles",
    "quorum.cnxn.threads.size",
    "multiAddress.enabled",
    "multiAddress.reachabilityCheckTimeoutMs",
    "multiAddress.reachabilityCheckEnabled",
    "oraclePath",
];

/// Key prefixes ZooKeeper's `QuorumPeerConfig` reads itself.
const PARSED_PREFIXES: [&str; 4] = ["server.", "group", "weight", "metricsProvider."];

pub(super) fn configuration(info: &ServerInfo) -> Map<String, Value> {
    let c = info.config();
    let dir = |d: &std::path::Path| d.join(zkd_storage::disk::layout::ZKD_DIR);
    object([
        // -1 with no plaintext port, as ZooKeeper's.
        ("client_port", c.client_port.map_or(-1, i32::from).into()),
        ("data_dir", dir(&c.data_dir).display().to_string().into()),
        (
            "data_log_dir",
            dir(&c.data_log_dir).display().to_string().into(),
        ),
        ("tick_time", c.tick_time_ms.into()),
        ("max_client_cnxns", c.max_client_cnxns.into()),
        ("min_session_timeout", c.min_session_timeout_ms.into()),
        ("max_session_timeout", c.max_session_timeout_ms.into()),
        ("server_id", c.my_id.unwrap_or(0).into()),
        ("client_port_listen_backlog", (-1).into()),
    ])
}

pub(super) fn dirs(info: &ServerInfo) -> Map<String, Value> {
    let (data, log) = info.disk_usage();
    object([("datadir_size", data.into()), ("logdir_size", log.into())])
}

/// ZooKeeper's `environment` without the JVM's keys.
pub(super) fn environment() -> Map<String, Value> {
    let mut json = object([("zookeeper.version", version_string().into())]);
    json.insert("host.name".into(), read("/proc/sys/kernel/hostname").into());
    json.extend(os_and_user());
    json
}

/// The operating system's and the user's keys, as the JVM names them.
fn os_and_user() -> Map<String, Value> {
    let var = |k: &str| std::env::var(k).unwrap_or_default();
    let dir = std::env::current_dir().map(|d| d.display().to_string());
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        other => other,
    };
    object([
        ("os.name", "Linux".into()),
        ("os.arch", arch.into()),
        ("os.version", read("/proc/sys/kernel/osrelease").into()),
        ("user.name", user_name().into()),
        ("user.home", var("HOME").into()),
        ("user.dir", dir.unwrap_or_default().into()),
    ])
}

fn read(path: &str) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.trim().to_owned()
}

/// This process's user, as `/etc/passwd` names its uid.
fn user_name() -> String {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let uid = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_default()
        .to_owned();
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    passwd
        .lines()
        .map(|l| l.split(':').collect::<Vec<_>>())
        .find(|f| f.len() > 2 && f[2] == uid)
        .map_or(uid.clone(), |f| f[0].to_owned())
}

/// ZooKeeper's system properties that mean something outside a JVM: the
/// separators, the OS and user keys, and `zookeeper.KEY` for each zoo.cfg
/// key ZooKeeper would have made a system property.
pub(super) fn system_properties(info: &ServerInfo) -> Map<String, Value> {
    let mut json = object([
        ("file.separator", "/".into()),
        ("line.separator", "\n".into()),
        ("path.separator", ":".into()),
    ]);
    json.extend(os_and_user());
    let text = info.config().redacted_text.as_deref().unwrap_or_default();
    for (key, value) in parse_properties(text) {
        let parsed = PARSED_KEYS.contains(&key.as_str())
            || PARSED_PREFIXES.iter().any(|p| key.starts_with(p));
        if !parsed {
            json.insert(format!("zookeeper.{key}"), value.into());
        }
    }
    json
}

/// The zoo.cfg text as read at start.
pub(super) fn initial_configuration(info: &ServerInfo) -> Map<String, Value> {
    let text = info.config().redacted_text.clone();
    object([(
        "initial_configuration",
        text.map_or(Value::Null, Value::from),
    )])
}

/// The newest snapshot's zxid (hex, no `0x`) and Unix second; with none,
/// -1 for both, as ZooKeeper shows.
pub(super) fn last_snapshot(info: &ServerInfo) -> Map<String, Value> {
    let (zxid, at) = match info.last_snapshot() {
        Some((zxid, at)) => (format!("{:x}", zxid.0), at as i64),
        None => (format!("{:x}", -1i64), -1),
    };
    object([("zxid", zxid.into()), ("timestamp", at.into())])
}

pub(super) fn trace_mask(info: &ServerInfo) -> Map<String, Value> {
    object([("tracemask", info.trace_mask().into())])
}

/// Sets the mask from the `traceMask` parameter, with ZooKeeper's errors.
pub(super) fn set_trace_mask(
    info: &mut ServerInfo,
    args: &BTreeMap<String, String>,
) -> Map<String, Value> {
    let Some(given) = args.get("traceMask") else {
        return error("setTraceMask requires long traceMask argument");
    };
    match given.parse::<i64>() {
        Ok(mask) => {
            info.set_trace_mask(mask);
            trace_mask(info)
        }
        Err(_) => error(format!(
            "setTraceMask requires long traceMask argument, got {given}"
        )),
    }
}
