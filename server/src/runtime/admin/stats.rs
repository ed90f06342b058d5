//! The server's and its connections' counters: `server_stats`, `stats`,
//! `connections` and `monitor`.

use super::commands::object;
use crate::core::connection::Conn;
use crate::core::member::MemberView;
use crate::core::stats::ResponseSizes;
use crate::core::Node;
use crate::runtime::metrics_report::{self, Number};
use crate::runtime::server_info::{version_string, ServerInfo};
use serde_json::{json, Map, Value};

/// Sizes as ZooKeeper's `BufferStats` shows them.
fn buffer_sizes(sizes: ResponseSizes) -> Value {
    json!({ "last_buffer_size": sizes.last, "min_buffer_size": sizes.min, "max_buffer_size": sizes.max })
}

pub(super) fn server_stats(
    info: &ServerInfo,
    node: &Node,
    member: Option<MemberView>,
) -> Map<String, Value> {
    let s = node.stats();
    let (data, log) = info.disk_usage();
    let plaintext = info.connection_counts().plaintext_counts();
    let mut json = object([
        ("version", version_string().into()),
        (
            "read_only",
            (node.mode() == crate::core::Mode::ReadOnly).into(),
        ),
        (
            "server_stats",
            json!({
                "packets_sent": s.packets_sent,
                "packets_received": s.packets_received,
                "fsync_threshold_exceed_count": 0,
                "client_response_stats": buffer_sizes(s.client_responses),
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
                "auth_failed_count": crate::runtime::metrics_report::auth_failed_count(info, node),
                "non_mtlsremote_conn_count": plaintext.1,
                "non_mtlslocal_conn_count": plaintext.0,
            }),
        ),
        ("client_response", buffer_sizes(s.client_responses)),
        ("node_count", node.tree().node_count().into()),
    ]);
    if member.is_some_and(|m| m.followers.is_some()) {
        // A leader's, as ZooKeeper's leader adds them; zkd does not size
        // its proposals (-1, as before ZooKeeper's first).
        json.insert(
            "proposal_stats".into(),
            buffer_sizes(ResponseSizes::default()),
        );
    }
    json
}

/// `server_stats` with every connection, briefly.
pub(super) fn stats(
    info: &ServerInfo,
    node: &Node,
    member: Option<MemberView>,
) -> Map<String, Value> {
    let mut json = server_stats(info, node, member);
    let brief = node
        .connections()
        .values()
        .map(|c| connection(node, c, true));
    json.insert("connections".into(), brief.collect());
    json.insert("secure_connections".into(), Value::Array(Vec::new()));
    json
}

/// Every connection in full.
pub(super) fn connections(node: &Node) -> Map<String, Value> {
    let all = node
        .connections()
        .values()
        .map(|c| connection(node, c, false));
    object([
        ("connections", all.collect()),
        ("secure_connections", Value::Array(Vec::new())),
    ])
}

/// One connection as ZooKeeper's `getConnectionInfo(brief)` shows it: the
/// counters, and unless `brief` its session's.
fn connection(node: &Node, conn: &Conn, brief: bool) -> Value {
    let s = &conn.stats;
    let mut json = object([
        (
            "remote_socket_address",
            format!("{}:{}", conn.remote_ip, conn.remote_port).into(),
        ),
        ("interest_ops", 1.into()),
        ("outstanding_requests", conn.queue.len().into()),
        ("packets_received", s.received.into()),
        ("packets_sent", s.sent.into()),
    ]);
    if let (false, Some(session)) = (brief, conn.session()) {
        let avg = s.latency.total_ms.checked_div(s.latency.count).unwrap_or(0);
        let last_op = if s.last_op.is_empty() {
            "NA"
        } else {
            s.last_op
        };
        let timeout = node.sessions().timeout_ms(session).unwrap_or(0);
        json.extend(object([
            ("session_id", session.0.into()),
            ("last_operation", last_op.into()),
            ("established", s.established_ms.into()),
            ("session_timeout", timeout.into()),
            ("last_cxid", s.last_cxid.into()),
            ("last_zxid", s.last_zxid.into()),
            ("last_response_time", s.last_response_ms.into()),
            ("last_latency", s.latency.last_ms.into()),
            ("min_latency", s.latency.min_ms.into()),
            ("avg_latency", avg.into()),
            ("max_latency", s.latency.max_ms.into()),
        ]));
    }
    Value::Object(json)
}

/// ZooKeeper's `monitor`: the version, the state, and every metric zkd
/// reports, keyed as ZooKeeper's default metrics provider keys them.
pub(super) fn monitor(
    info: &ServerInfo,
    node: &Node,
    member: Option<MemberView>,
) -> Map<String, Value> {
    let mut json = object([
        ("version", version_string().into()),
        ("server_state", node.mode().name().into()),
    ]);
    let metrics = metrics_report::gather(info, node, member);
    for (key, value) in metrics_report::monitor_values(&metrics) {
        let value = match value {
            Number::Int(i) => Value::from(i),
            Number::Float(f) => Value::from(f),
        };
        json.insert(key, value);
    }
    json
}
