//! Prep of a reconfig (opcode 16), as ZooKeeper's `PrepRequestProcessor`
//! does it and in its order: reconfig enabled, an ensemble, no reconfig in
//! progress, `fromConfig` current, the next membership (incremental
//! `joining`/`leaving` or bulk `newMembers`), enough voters, a synced
//! quorum of them, then WRITE on `/zookeeper/config` (world may only read
//! it, so only `super` passes). The txn writes the next configuration,
//! versioned by its own zxid, to `/zookeeper/config`.

use super::prep::Prep;
use crate::core::election::ServerId;
use crate::core::zab::Members;
use crate::core::{EnsembleConfig, ServerSpec};
use bytes::Bytes;
use std::collections::BTreeMap;
use zkd_protocol::records::{ReconfigRequest, SetDataTxn};
use zkd_protocol::{ErrorCode, Perms};
use zkd_storage::TxnBody;

/// The node that holds the configuration.
pub const CONFIG_NODE: &str = "/zookeeper/config";

/// What a reconfig's prep needs to know of the ensemble.
#[derive(Clone, Debug)]
pub struct ReconfigContext {
    /// `reconfigEnabled`.
    pub enabled: bool,
    /// The configuration in effect; None standalone.
    pub config: Option<EnsembleConfig>,
    /// The leader, the followers synced with it, and the servers outside
    /// the configuration asking to learn (see `ZabCommand::Synced`).
    pub synced: Vec<ServerId>,
    /// `standaloneEnabled`: a configuration then needs two voters.
    pub standalone_enabled: bool,
}

type Servers = BTreeMap<u64, ServerSpec>;

impl Prep<'_> {
    /// reconfig: the txn that writes the next configuration.
    pub fn reconfig(
        &mut self,
        req: &ReconfigRequest,
        ctx: &ReconfigContext,
    ) -> Result<TxnBody, ErrorCode> {
        if !ctx.enabled {
            return Err(ErrorCode::ReconfigDisabled);
        }
        let Some(current) = &ctx.config else {
            return Err(ErrorCode::Unimplemented);
        };
        let mut node = self.require(CONFIG_NODE)?;
        let committed = self.tree.node(CONFIG_NODE).map(|n| n.stat.mzxid);
        if Some(node.stat.mzxid) != committed {
            // One prepared and not yet applied: ZooKeeper's last seen config.
            return Err(ErrorCode::ReconfigInProgress);
        }
        if req.cur_config_id != -1 && req.cur_config_id != current.version {
            return Err(ErrorCode::BadVersion);
        }
        let servers = match req.new_members.is_empty() {
            false => bulk(&req.new_members, ctx.standalone_enabled)?,
            true => incremental(current.servers(), req)?,
        };
        check_voters(&servers, ctx)?;
        self.check_perm(&node, Perms::WRITE)?;
        let config = EnsembleConfig::of(&servers, self.zxid);
        node.stat.version = -1;
        node.stat.mzxid = self.zxid;
        node.stat.mtime = self.time;
        node.data_len = config.text.len() as i64;
        self.scratch.insert(CONFIG_NODE.into(), Some(node));
        Ok(TxnBody::Reconfig(SetDataTxn {
            path: CONFIG_NODE.to_owned(),
            data: Some(config.text),
            version: -1,
        }))
    }
}

/// Enough voters, and a quorum of them synced or ready to sync
/// (NEWCONFIGNOQUORUM).
fn check_voters(servers: &Servers, ctx: &ReconfigContext) -> Result<(), ErrorCode> {
    let voters = servers.values().filter(|s| !s.observer).count();
    if voters < 1 || (ctx.standalone_enabled && voters < 2) {
        return Err(ErrorCode::BadArguments);
    }
    if !Members::of(servers).is_quorum(&ctx.synced) {
        return Err(ErrorCode::NewConfigNoQuorum);
    }
    Ok(())
}

/// `leaving` ids go, then each `joining` `server.N=spec` comes in (or
/// replaces N's line). ZooKeeper's failures: an id that is not a number is
/// a MARSHALLINGERROR, anything else wrong BADARGUMENTS.
fn incremental(mut servers: Servers, req: &ReconfigRequest) -> Result<Servers, ErrorCode> {
    for leaving in split(&req.leaving_servers, ',') {
        servers.remove(&sid(leaving)?);
    }
    for joiner in split(&req.joining_servers, ',') {
        let parts: Vec<&str> = split(joiner, '=').collect();
        let [key, value] = parts[..] else {
            return Err(ErrorCode::BadArguments);
        };
        let id = sid(key.rsplit_once('.').map_or(key, |(_, id)| id))?;
        let spec = ServerSpec::parse(value).map_err(|_| ErrorCode::BadArguments)?;
        // A joiner names all three ports: clients must find it.
        let clashes = (servers.iter()).any(|(&other, s)| other != id && spec.shares_an_address(s));
        if spec.client_address.is_none() || clashes {
            return Err(ErrorCode::BadArguments);
        }
        servers.insert(id, spec);
    }
    Ok(servers)
}

/// `newMembers`: the whole configuration, lines split by commas or
/// newlines, as a properties file.
fn bulk(new_members: &str, standalone_enabled: bool) -> Result<Servers, ErrorCode> {
    let mut servers = Servers::new();
    for line in new_members.split([',', '\n']).map(str::trim) {
        if line.is_empty() || line.starts_with('#') || line.starts_with('!') {
            continue;
        }
        let (key, value) = line.split_once('=').ok_or(ErrorCode::BadArguments)?;
        let key = key.trim();
        if key == "version" {
            continue;
        }
        let id = key.strip_prefix("server.").ok_or(ErrorCode::BadArguments)?;
        let spec = ServerSpec::parse(value).map_err(|_| ErrorCode::BadArguments)?;
        servers.insert(sid(id)?, spec);
    }
    // ZooKeeper's parseDynamicConfig throws an unchecked exception here,
    // which its prep answers with MARSHALLINGERROR.
    let observers = servers.values().filter(|s| s.observer).count();
    let voters = servers.len() - observers;
    if observers > 0 && (voters == 0 || (voters == 1 && standalone_enabled)) {
        return Err(ErrorCode::MarshallingError);
    }
    Ok(servers)
}

/// The non-empty trimmed pieces, as ZooKeeper's `StringUtils.split`.
fn split(s: &str, separator: char) -> impl Iterator<Item = &str> {
    s.split(separator).map(str::trim).filter(|p| !p.is_empty())
}

/// A server id; Java's `Long.parseLong` fails with an unchecked exception.
fn sid(s: &str) -> Result<u64, ErrorCode> {
    s.trim().parse().map_err(|_| ErrorCode::MarshallingError)
}

/// The text `data` of a reconfig txn, as its configuration at `zxid`.
pub fn reconfig_config(data: &Option<Bytes>, zxid: i64) -> EnsembleConfig {
    EnsembleConfig {
        text: data.clone().unwrap_or_default(),
        version: zxid,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn current() -> Servers {
        let line = |q: u16| ServerSpec::parse(&format!("h:{q}:{}:participant;{}", q + 1, q + 2));
        (1..=3)
            .map(|id| (id, line(id as u16 * 10).unwrap()))
            .collect()
    }

    fn request(joining: &str, leaving: &str, new_members: &str) -> ReconfigRequest {
        ReconfigRequest {
            joining_servers: joining.into(),
            leaving_servers: leaving.into(),
            new_members: new_members.into(),
            cur_config_id: -1,
        }
    }

    #[test]
    fn incremental_changes_remove_then_add() {
        let next = incremental(current(), &request("server.4=h:40:41;42", "3", "")).unwrap();
        assert_eq!(next.keys().copied().collect::<Vec<_>>(), [1, 2, 4]);
        // Replacing a member's own line is allowed; another's address is not.
        let same = incremental(current(), &request("server.2=h:20:21:observer;22", "", ""));
        assert!(same.unwrap()[&2].observer);
        let clash = incremental(current(), &request("server.4=h:20:41;42", "", ""));
        assert_eq!(clash, Err(ErrorCode::BadArguments));
    }

    #[test]
    fn incremental_failures_get_zookeepers_codes() {
        let two_ports = incremental(current(), &request("server.4=h:40:41", "", ""));
        assert_eq!(two_ports, Err(ErrorCode::BadArguments));
        let no_value = incremental(current(), &request("server.4", "", ""));
        assert_eq!(no_value, Err(ErrorCode::BadArguments));
        let bad_id = incremental(current(), &request("", "x", ""));
        assert_eq!(bad_id, Err(ErrorCode::MarshallingError));
    }

    #[test]
    fn bulk_takes_commas_or_newlines_and_skips_the_version() {
        let text = "server.1=h:10:11;12,server.2=h:20:21;22\nversion=5";
        let next = bulk(text, true).unwrap();
        assert_eq!(next.keys().copied().collect::<Vec<_>>(), [1, 2]);
        assert_eq!(bulk("clientPort=1", true), Err(ErrorCode::BadArguments));
        let lone = "server.1=h:10:11;12,server.2=h:20:21:observer;22";
        assert_eq!(bulk(lone, true), Err(ErrorCode::MarshallingError));
    }
}
