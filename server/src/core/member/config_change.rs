//! How a member follows a change of the ensemble's configuration: a
//! reconfig the leader proposes, one a new leader's history holds, and
//! the members its roles and elections count once one is in effect.

use super::{Ctx, Fatal, Member, Outbox, Role};
use crate::core::election::Notification;
use crate::core::election::ServerId;
use crate::core::pipeline::reconfig::reconfig_config;
use crate::core::zab::{History, Leader, Members, NextConfig};
use crate::failpoints::{active, Failpoint};
use std::collections::BTreeSet;
use zkd_protocol::Zxid;
use zkd_storage::{Txn, TxnBody};

/// Where a logged txn's type is: the last field of its header (clientId,
/// cxid, zxid and time before it, jute's big-endian 8, 4, 8 and 8 bytes).
const TXN_TYPE_AT: usize = 28;

/// A reconfig txn's type (ZooKeeper's `OpCode.reconfig`).
const RECONFIG_TXN: i32 = 16;

impl Member {
    /// The configuration in effect changed (a reconfig committed, or the
    /// one a NEWLEADER announced took effect): its members count from now
    /// on, in elections too. A follower whose own role it changed, or
    /// whose leader no longer votes, elects again, as ZooKeeper's
    /// `processReconfig` has it.
    pub(super) fn follow_config(&mut self, ctx: &mut Ctx<'_>) -> Result<(), Fatal> {
        let Some(config) = ctx.node.ensemble_config() else {
            return Ok(());
        };
        if self.members_version == Some(config.version) {
            return Ok(());
        }
        self.members_version = Some(config.version);
        self.members = Members::of(&config.servers());
        let carried = ctx.node.reconfig_enabled().then(|| config.clone());
        self.election
            .set_config(self.members.voters.clone(), carried);
        let Role::Following(f) = &self.role else {
            return Ok(());
        };
        let me = self.id;
        let moved = !self.members.contains(me)
            || self.members.is_observer(me) != f.is_observer()
            || !self.members.is_voter(f.leader());
        match moved {
            true => self.end_role(
                ctx,
                "the new configuration changed this member's role or leader",
            ),
            false => Ok(()),
        }
    }

    /// A looking member hears of a newer configuration than its own (it
    /// was away while a reconfig committed): it takes it, records it, and
    /// starts its round over with its voters, as ZooKeeper's election
    /// does with the configuration a notification carries.
    pub(super) fn take_newer_config(
        &mut self,
        ctx: &mut Ctx<'_>,
        n: &Notification,
    ) -> Result<(), Fatal> {
        let Some(config) = &n.config else {
            return Ok(());
        };
        // Planted (notified-config-ignored): the configuration is not taken.
        let own = match active(Failpoint::NotifiedConfigIgnored) {
            true => i64::MAX,
            false => ctx.node.ensemble_config().map_or(i64::MAX, |c| c.version),
        };
        if !matches!(self.role, Role::Looking)
            || !ctx.node.reconfig_enabled()
            || config.version <= own
        {
            return Ok(());
        }
        // Only a member of the configuration in effect may hand on the next
        // one: a stranger's notification is answered, never obeyed.
        // Planted (configs-from-anyone): anyone's is taken.
        if !self.members.contains(n.sender) && !active(Failpoint::ConfigsFromAnyone) {
            tracing::warn!(from = %n.sender, "a configuration from outside the members; ignored");
            return Ok(());
        }
        tracing::info!(
            from = %n.sender,
            version = %format!("{:x}", config.version),
            "a newer configuration, from an election notification"
        );
        ctx.node.activate_ensemble_config(config.clone());
        self.follow_config(ctx)?;
        self.election.restart(ctx.now.mono_ms);
        Ok(())
    }

    /// The voters of the newest reconfig this member logged (committed
    /// or not) beyond the configuration in effect: its election counts them
    /// too, as ZooKeeper's counts its last-seen configuration. None without
    /// reconfig, or without such a reconfig.
    pub(super) fn logged_next_voters(
        ctx: &Ctx<'_>,
        history: &History,
    ) -> Option<BTreeSet<ServerId>> {
        let current = ctx.node.ensemble_config()?.version;
        if !ctx.node.reconfig_enabled() {
            return None;
        }
        let logged = history
            .newest_after(Zxid(current))
            .find_map(|(zxid, bytes)| {
                // Only a reconfig's whole txn is decoded: its type ends the header.
                let kind = bytes.get(TXN_TYPE_AT..TXN_TYPE_AT + 4)?;
                if i32::from_be_bytes(kind.try_into().ok()?) != RECONFIG_TXN {
                    return None;
                }
                match Txn::from_bytes(bytes.clone()).ok()?.body {
                    TxnBody::Reconfig(t) => Some(reconfig_config(&t.data, zxid.0)),
                    _ => None,
                }
            });
        let config = logged.or_else(|| ctx.node.logged_ensemble_config())?;
        Some(Members::of(&config.servers()).voters)
    }

    /// A new leader's tree took its whole history, and with it a reconfig
    /// that is not in effect yet: its epoch commits it (NEWLEADER needs a
    /// quorum of that configuration's members too).
    pub(super) fn logged_next_config(&mut self, ctx: &Ctx<'_>) -> Option<NextConfig> {
        let config = ctx.node.logged_ensemble_config()?;
        let servers = config.servers();
        let members = Members::of(&servers);
        self.out.learn_servers(servers);
        let zxid = Zxid(config.version);
        Some(NextConfig { zxid, members })
    }
}

/// Proposes the node's `txn` at `zxid`: a reconfig with the members of
/// the configuration it makes, whose links the peer ports admit from now on.
pub(super) fn propose(leader: &mut Leader, out: &mut Outbox, zxid: Zxid, txn: &Txn) {
    match &txn.body {
        TxnBody::Reconfig(t) => {
            let servers = reconfig_config(&t.data, zxid.0).servers();
            let members = Members::of(&servers);
            out.learn_servers(servers);
            leader.propose_reconfig(zxid, txn.to_bytes(), members);
        }
        _ => leader.propose(zxid, txn.to_bytes()),
    }
}

#[cfg(test)]
mod tests {
    use super::{RECONFIG_TXN, TXN_TYPE_AT};
    use bytes::Bytes;
    use zkd_protocol::records::{SetDataTxn, TxnHeader};
    use zkd_storage::{Txn, TxnBody};

    /// The offset the election's scan reads a txn's type at is where the
    /// log's encoding puts it.
    #[test]
    fn a_logged_reconfig_is_found_by_its_type() {
        let txn = Txn {
            header: TxnHeader {
                client_id: 7,
                cxid: 3,
                zxid: 0x1_0000_0005,
                time: 1,
                r#type: RECONFIG_TXN,
            },
            body: TxnBody::Reconfig(SetDataTxn {
                path: "/zookeeper/config".into(),
                data: Some(Bytes::from_static(
                    b"server.1=a:1:2:participant\nversion=100000005",
                )),
                version: -1,
            }),
        };
        let bytes = txn.to_bytes();
        let kind = &bytes[TXN_TYPE_AT..TXN_TYPE_AT + 4];
        assert_eq!(i32::from_be_bytes(kind.try_into().unwrap()), RECONFIG_TXN);
        assert!(matches!(
            Txn::from_bytes(bytes).unwrap().body,
            TxnBody::Reconfig(_)
        ));
    }
}
