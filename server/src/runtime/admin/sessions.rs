//! What the tree and the sessions hold: `dump`, the watch commands, and
//! `hash` (the tree's digest log).

use super::commands::object;
use crate::core::digest_log::ZKD_DIGEST_VERSION;
use crate::core::{ConnId, Node};
use serde_json::{json, Map, Value};

/// Sessions by when they expire, and each session's ephemeral nodes.
pub(super) fn dump(node: &Node) -> Map<String, Value> {
    let expiry: Map<String, Value> = node
        .sessions()
        .buckets()
        .map(|(at, ids)| (at.to_string(), ids.iter().map(|id| id.0).collect()))
        .collect();
    let tree = node.tree();
    let ephemerals: Map<String, Value> = tree
        .sessions()
        .keys()
        .map(|id| (id, tree.ephemerals_of(*id)))
        .filter(|(_, paths)| !paths.is_empty())
        .map(|(id, paths)| (id.to_string(), paths.into()))
        .collect();
    object([
        ("expiry_time_to_session_ids", Value::Object(expiry)),
        ("session_id_to_ephemeral_paths", Value::Object(ephemerals)),
    ])
}

/// The session of connection `conn` (0 before it has one, as ZooKeeper's).
fn session_of(node: &Node, conn: ConnId) -> i64 {
    node.connections()
        .get(&conn)
        .and_then(|c| c.session())
        .map_or(0, |s| s.0)
}

/// Each session's data watches (ZooKeeper's `getWatches`).
pub(super) fn watches(node: &Node) -> Map<String, Value> {
    let by_session: Map<String, Value> = node
        .watches()
        .data_paths_by_conn()
        .into_iter()
        .map(|(conn, paths)| (session_of(node, conn).to_string(), paths.into()))
        .collect();
    object([("session_id_to_watched_paths", Value::Object(by_session))])
}

/// Each watched path's sessions.
pub(super) fn watches_by_path(node: &Node) -> Map<String, Value> {
    let by_path: Map<String, Value> = node
        .watches()
        .data_conns_by_path()
        .into_iter()
        .map(|(path, conns)| {
            let sessions: Vec<i64> = conns.into_iter().map(|c| session_of(node, c)).collect();
            (path, sessions.into())
        })
        .collect();
    object([("path_to_session_ids", Value::Object(by_path))])
}

pub(super) fn watch_summary(node: &Node) -> Map<String, Value> {
    let (conns, paths, total) = node.watches().data_summary();
    object([
        ("num_connections", conns.into()),
        ("num_paths", paths.into()),
        ("num_total_watches", total.into()),
    ])
}

/// The tree's digest every 128th zxid. zkd's digest is its own, marked by
/// its version, so members of one zkd ensemble compare with each other.
pub(super) fn hash(node: &Node) -> Map<String, Value> {
    let digests: Vec<Value> = node
        .digests()
        .entries()
        .map(|(zxid, digest)| {
            json!({ "zxid": zxid.0, "digest": *digest as i64, "digest_version": ZKD_DIGEST_VERSION })
        })
        .collect();
    object([("digests", digests.into())])
}
