//! The AdminServer's commands: ZooKeeper 3.8's names and aliases, whether
//! each needs a serving server, and the dispatch to the module that answers
//! it. Each answer has the JSON keys and value types ZooKeeper gives, read
//! from a Debian ZooKeeper side by side in `client-tests/tests/admin_server.rs`.

use super::{about_server, quorum, sessions, stats};
use crate::core::member::MemberView;
use crate::core::{Mode, Node};
use crate::runtime::server_info::ServerInfo;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// One command: its name, its aliases, and whether it needs a serving
/// server (ZooKeeper's `serverRequired`: while electing or syncing it
/// answers only with an error).
pub struct Command {
    pub name: &'static str,
    pub aliases: &'static [&'static str],
    pub needs_serving: bool,
}

/// The commands zkd answers, in ZooKeeper's order: every one 3.8 lists.
/// 3.9's `snapshot` and `restore` (which need its AdminServer auth) are not here.
pub const COMMANDS: [Command; 26] = [
    cmd("configuration", &["conf", "config"], true),
    cmd("connection_stat_reset", &["crst"], true),
    cmd("connections", &["cons"], true),
    cmd("dirs", &[], true),
    cmd("dump", &[], true),
    cmd("environment", &["env", "envi"], false),
    cmd("get_trace_mask", &["gtmk"], false),
    cmd("hash", &[], true),
    cmd("initial_configuration", &["icfg"], true),
    cmd("is_read_only", &["isro"], true),
    cmd("last_snapshot", &["lsnp"], true),
    cmd("leader", &["lead"], true),
    cmd("monitor", &["mntr"], false),
    cmd("observer_connection_stat_reset", &["orst"], true),
    cmd("observers", &["obsr"], true),
    cmd("ruok", &[], true),
    cmd("server_stats", &["srvr"], true),
    cmd("set_trace_mask", &["stmk"], false),
    cmd("stat_reset", &["srst"], true),
    cmd("stats", &["stat"], true),
    cmd("system_properties", &["sysp"], false),
    cmd("voting_view", &[], true),
    cmd("watch_summary", &["wchs"], true),
    cmd("watches", &["wchc"], true),
    cmd("watches_by_path", &["wchp"], true),
    cmd("zabstate", &[], false),
];

const fn cmd(name: &'static str, aliases: &'static [&'static str], needs: bool) -> Command {
    Command {
        name,
        aliases,
        needs_serving: needs,
    }
}

/// The command `name` or an alias stands for.
pub fn resolve(name: &str) -> Option<&'static str> {
    COMMANDS
        .iter()
        .find(|c| c.name == name || c.aliases.contains(&name))
        .map(|c| c.name)
}

/// What a command answers from: the node loop's state.
pub struct Context<'a> {
    pub info: &'a mut ServerInfo,
    pub node: &'a mut Node,
    /// An ensemble member's place in it; None standalone.
    pub member: Option<MemberView>,
}

/// The JSON answer to `command` (a name [`resolve`] gave) with the
/// request's query parameters `args`, `command` included.
pub fn answer(
    cx: Context<'_>,
    command: &str,
    args: &BTreeMap<String, String>,
) -> Map<String, Value> {
    let needs_serving = COMMANDS
        .iter()
        .any(|c| c.name == command && c.needs_serving);
    let mut json = if needs_serving && cx.node.mode() == crate::core::Mode::NotServing {
        error("This ZooKeeper instance is not currently serving requests")
    } else {
        run(cx, command, args)
    };
    json.insert("command".into(), command.into());
    json
}

fn run(cx: Context<'_>, command: &str, args: &BTreeMap<String, String>) -> Map<String, Value> {
    let Context { info, node, member } = cx;
    match command {
        "configuration" => about_server::configuration(info),
        "connection_stat_reset" => {
            node.reset_connection_stats();
            Map::new()
        }
        "connections" => stats::connections(node),
        "dirs" => about_server::dirs(info),
        "dump" => sessions::dump(node),
        "environment" => about_server::environment(),
        "get_trace_mask" => about_server::trace_mask(info),
        "hash" => sessions::hash(node),
        "initial_configuration" => about_server::initial_configuration(info),
        "is_read_only" => object([("read_only", (node.mode() == Mode::ReadOnly).into())]),
        "last_snapshot" => about_server::last_snapshot(info),
        "leader" => quorum::leader(info, member),
        "monitor" => stats::monitor(info, node, member),
        // A leader's count (0 elsewhere, as ZooKeeper's keys are always
        // there); zkd lists no per-observer connection stats.
        "observers" => object([
            (
                "synced_observers",
                (member.and_then(|m| m.followers))
                    .map_or(0, |c| c.synced_observers)
                    .into(),
            ),
            ("observers", Value::Array(vec![])),
        ]),
        "server_stats" => stats::server_stats(info, node, member),
        "set_trace_mask" => about_server::set_trace_mask(info, args),
        "stat_reset" => {
            node.reset_stats();
            Map::new()
        }
        "stats" => stats::stats(info, node, member),
        "system_properties" => about_server::system_properties(info),
        "voting_view" => quorum::voting_view(info, member),
        "watch_summary" => sessions::watch_summary(node),
        "watches" => sessions::watches(node),
        "watches_by_path" => sessions::watches_by_path(node),
        "zabstate" => quorum::zabstate(info, node, member),
        // ruok and observer_connection_stat_reset (zkd keeps no per-observer stats).
        _ => Map::new(),
    }
}

/// A JSON object of `entries`.
pub(super) fn object<const N: usize>(entries: [(&str, Value); N]) -> Map<String, Value> {
    entries
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect()
}

/// An answer carrying only `error`, as ZooKeeper's failed commands give.
pub(super) fn error(why: impl Into<String>) -> Map<String, Value> {
    object([("error", Value::String(why.into()))])
}
