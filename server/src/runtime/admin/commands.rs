//! The AdminServer's commands: ZooKeeper's names and aliases, each
//! answered with the JSON keys and value types ZooKeeper 3.8 gives (read
//! from a Debian ZooKeeper side by side in `client-tests/tests/admin_server.rs`).
//! JVM-only keys (`java.*`, the heap's `os.memory.*`) are left out.

use super::super::four_letter::{fd_counts, version_string, ServerInfo};
use crate::core::{Mode, Node};
use serde_json::{json, Map, Value};

/// One command: its name, its aliases, and whether it answers while the
/// server is not serving (electing, syncing).
pub struct Command {
    pub name: &'static str,
    pub aliases: &'static [&'static str],
    pub always: bool,
}

/// The commands zkd answers, in ZooKeeper's order.
pub const COMMANDS: [Command; 10] = [
    cmd("configuration", &["conf", "config"], true),
    cmd("connection_stat_reset", &["crst"], false),
    cmd("dirs", &[], true),
    cmd("environment", &["env", "envi"], true),
    cmd("is_read_only", &["isro"], false),
    cmd("monitor", &["mntr"], false),
    cmd("ruok", &[], true),
    cmd("server_stats", &["srvr"], false),
    cmd("stat_reset", &["srst"], false),
    cmd("watch_summary", &["wchs"], false),
];

const fn cmd(name: &'static str, aliases: &'static [&'static str], always: bool) -> Command {
    Command {
        name,
        aliases,
        always,
    }
}

/// The command `name` or an alias stands for.
pub fn resolve(name: &str) -> Option<&'static str> {
    COMMANDS
        .iter()
        .find(|c| c.name == name || c.aliases.contains(&name))
        .map(|c| c.name)
}

/// The JSON answer to `command` (a name [`resolve`] gave), `command` and
/// `error` included. `followers` is a leader's (followers, synced ones).
pub fn answer(
    info: &ServerInfo,
    command: &str,
    node: &mut Node,
    followers: Option<(usize, usize)>,
) -> Map<String, Value> {
    let always = COMMANDS.iter().any(|c| c.name == command && c.always);
    let mut json = if node.mode() == Mode::NotServing && !always {
        let mut error = Map::new();
        let why = "This ZooKeeper instance is not currently serving requests";
        error.insert("error".into(), why.into());
        error
    } else {
        match command {
            "configuration" => configuration(info),
            "connection_stat_reset" => {
                node.reset_connection_stats();
                Map::new()
            }
            "dirs" => dirs(info),
            "environment" => environment(),
            "is_read_only" => object(json!({ "read_only": false })),
            "monitor" => monitor(info, node, followers),
            "server_stats" => server_stats(info, node),
            "stat_reset" => {
                node.reset_stats();
                Map::new()
            }
            "watch_summary" => watch_summary(node),
            _ => Map::new(),
        }
    };
    json.insert("command".into(), command.into());
    json
}

fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

fn configuration(info: &ServerInfo) -> Map<String, Value> {
    let c = info.config();
    let dir = |d: &std::path::Path| d.join(zkd_storage::sled::layout::ZKD_DIR);
    object(json!({
        "client_port": c.client_port,
        "data_dir": dir(&c.data_dir).display().to_string(),
        "data_log_dir": dir(&c.data_log_dir).display().to_string(),
        "tick_time": c.tick_time_ms,
        "max_client_cnxns": c.max_client_cnxns,
        "min_session_timeout": c.min_session_timeout_ms,
        "max_session_timeout": c.max_session_timeout_ms,
        "server_id": c.my_id.unwrap_or(0),
        "client_port_listen_backlog": -1,
    }))
}

fn dirs(info: &ServerInfo) -> Map<String, Value> {
    let (data, log) = info.disk_usage();
    object(json!({ "datadir_size": data, "logdir_size": log }))
}

/// ZooKeeper's `environment` without the JVM's keys.
fn environment() -> Map<String, Value> {
    let read = |path: &str| std::fs::read_to_string(path).unwrap_or_default();
    let var = |k: &str| std::env::var(k).unwrap_or_default();
    let dir = std::env::current_dir().map(|d| d.display().to_string());
    object(json!({
        "zookeeper.version": version_string(),
        "host.name": read("/proc/sys/kernel/hostname").trim(),
        "os.name": "Linux",
        "os.arch": if std::env::consts::ARCH == "x86_64" { "amd64" } else { std::env::consts::ARCH },
        "os.version": read("/proc/sys/kernel/osrelease").trim(),
        "user.name": user_name(),
        "user.home": var("HOME"),
        "user.dir": dir.unwrap_or_default(),
    }))
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

fn watch_summary(node: &Node) -> Map<String, Value> {
    let (conns, paths, total) = node.watches().data_summary();
    object(json!({
        "num_connections": conns,
        "num_paths": paths,
        "num_total_watches": total,
    }))
}

/// ZooKeeper's client response sizes, which zkd does not track (-1, as
/// ZooKeeper reports before its first response).
fn client_response() -> Value {
    json!({ "last_buffer_size": -1, "min_buffer_size": -1, "max_buffer_size": -1 })
}

fn server_stats(info: &ServerInfo, node: &Node) -> Map<String, Value> {
    let s = node.stats();
    let (data, log) = info.disk_usage();
    object(json!({
        "version": version_string(),
        "read_only": false,
        "server_stats": {
            "packets_sent": s.packets_sent,
            "packets_received": s.packets_received,
            "fsync_threshold_exceed_count": 0,
            "client_response_stats": client_response(),
            "data_dir_size": data,
            "log_dir_size": log,
            "provider_null": false,
            "server_state": node.mode().name(),
            "last_processed_zxid": node.processed_zxid().0,
            "outstanding_requests": node.outstanding(),
            "avg_latency": s.latency.avg_ms(),
            "max_latency": s.latency.max_ms,
            "min_latency": s.latency.min_ms,
            "num_alive_client_connections": node.connections().len(),
            "uptime": info.uptime_ms(),
            "auth_failed_count": 0,
            "non_mtlsremote_conn_count": 0,
            "non_mtlslocal_conn_count": 0,
        },
        "client_response": client_response(),
        "node_count": node.tree().node_count(),
    }))
}

/// The keys of `mntr` zkd has, as ZooKeeper's `monitor` names and types
/// them. ZooKeeper's further metrics (its `ServerMetrics`) are not here yet.
fn monitor(
    info: &ServerInfo,
    node: &Node,
    followers: Option<(usize, usize)>,
) -> Map<String, Value> {
    let s = node.stats();
    let tree = node.tree();
    let (open_fds, max_fds) = fd_counts();
    let mut json = object(json!({
        "version": version_string(),
        "server_state": node.mode().name(),
        "ephemerals_count": tree.ephemeral_count(),
        "num_alive_connections": node.connections().len(),
        "avg_latency": s.latency.avg_ms(),
        "outstanding_requests": node.outstanding(),
        "znode_count": tree.node_count(),
        "global_sessions": node.sessions().len(),
        "packets_sent": s.packets_sent,
        "packets_received": s.packets_received,
        "connection_drop_probability": 0.0,
        "watch_count": node.watches().count(),
        "auth_failed_count": 0,
        "min_latency": s.latency.min_ms,
        "max_file_descriptor_count": max_fds,
        "approximate_data_size": tree.approximate_data_size(),
        "open_file_descriptor_count": open_fds,
        "local_sessions": 0,
        "uptime": info.uptime_ms(),
        "max_latency": s.latency.max_ms,
    }));
    if let Some((all, synced)) = followers {
        // Only a leader reports these, as ZooKeeper's does.
        json.insert("learners".into(), all.into());
        json.insert("synced_followers".into(), synced.into());
        json.insert("pending_syncs".into(), node.pending_syncs().into());
    }
    json
}
