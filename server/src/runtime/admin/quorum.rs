//! A member's place in its ensemble: `leader`, `voting_view` and
//! `zabstate`, in the shapes ZooKeeper's Jackson gives its objects.

use super::commands::{error, object};
use crate::config::{Config, ServerSpec};
use crate::core::member::MemberView;
use crate::core::Node;
use crate::runtime::server_info::ServerInfo;
use serde_json::{json, Map, Value};

/// Who leads: standalone, ZooKeeper's error.
pub(super) fn leader(info: &ServerInfo, member: Option<MemberView>) -> Map<String, Value> {
    let Some(member) = member else {
        return error("server is not initialized");
    };
    let leader = member.leader.map(|l| l.0);
    let host = leader.and_then(|id| info.config().servers.get(&id));
    object([
        ("is_leader", (member.leader == Some(member.id)).into()),
        ("leader_id", leader.map_or(-1, |id| id as i64).into()),
        ("leader_ip", host.map_or("", |s| s.host.as_str()).into()),
    ])
}

/// Every voting member's addresses; standalone, none.
pub(super) fn voting_view(info: &ServerInfo, member: Option<MemberView>) -> Map<String, Value> {
    let config = info.config();
    let voters: Map<String, Value> = match member {
        None => Map::new(),
        Some(_) => config
            .servers
            .iter()
            .filter(|(_, s)| !s.observer)
            .map(|(id, s)| {
                let view = json!({
                    "server_addresses": [format!("{}:{}", s.host, s.quorum_port)],
                    "election_addresses": [format!("{}:{}", s.host, s.election_port)],
                    "client_address": client_address(config, *id, s),
                    "learner_type": if s.observer { "observer" } else { "participant" },
                });
                (id.to_string(), view)
            })
            .collect(),
    };
    object([("current_config", Value::Object(voters))])
}

/// A member's client address as ZooKeeper knows it: from its server line,
/// or for this member its own client port; others' are unknown ("").
fn client_address(config: &Config, id: u64, spec: &ServerSpec) -> String {
    match spec.client_address.as_deref() {
        Some(a) if a.contains(':') => a.to_owned(),
        Some(port) => format!("0.0.0.0:{port}"),
        None if config.my_id == Some(id) => own_client_address(config),
        None => String::new(),
    }
}

/// This member's plaintext client address ("" with only a secure port).
fn own_client_address(config: &Config) -> String {
    let host = config.client_port_address.as_deref().unwrap_or("0.0.0.0");
    config
        .client_port
        .map_or(String::new(), |port| format!("{host}:{port}"))
}

/// Where this member is in Zab. Standalone, or before a member has a
/// role, ZooKeeper shows only `voting` false and an empty `zabstate`.
pub(super) fn zabstate(
    info: &ServerInfo,
    node: &Node,
    member: Option<MemberView>,
) -> Map<String, Value> {
    let config = info.config();
    let me = config.my_id.and_then(|id| config.servers.get(&id));
    let (Some(member), Some(me)) = (member, me) else {
        return object([("voting", false.into()), ("zabstate", "".into())]);
    };
    let zxid = node.processed_zxid();
    object([
        ("myid", member.id.0.into()),
        ("is_leader", (member.leader == Some(member.id)).into()),
        ("quorum_address", addresses(&me.host, me.quorum_port)),
        ("election_address", addresses(&me.host, me.election_port)),
        ("client_address", own_client_address(config).into()),
        ("voting", (!me.observer).into()),
        ("last_zxid", format!("0x{:x}", zxid.0).into()),
        ("zab_epoch", zxid.epoch().into()),
        ("zab_counter", zxid.counter().into()),
        ("zabstate", member.zab_state.name().into()),
    ])
}

/// One address as Jackson shows ZooKeeper's `MultipleAddresses`.
fn addresses(host: &str, port: u16) -> Value {
    let at = format!("{host}:{port}");
    json!({
        "empty": false,
        "all_addresses": [at],
        "all_reachable_addresses": [at],
        "one": at,
        "reachable_address": at,
        "wildcard_addresses": [format!("0.0.0.0:{port}")],
        "all_ports": [port],
        "all_host_strings": [host],
        "all_reachable_addresses_or_all": [at],
        "reachable_or_one": at,
    })
}
