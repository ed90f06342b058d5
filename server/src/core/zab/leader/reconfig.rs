//! A leader's side of a reconfig, as ZooKeeper's `Leader` does it: from
//! the reconfig txn on, until it commits, every proposal (and NEWLEADER,
//! when the history holds an uncommitted one) needs a quorum of the
//! current members and one of the next configuration's. Its commit
//! activates the next configuration and names its leader in
//! COMMITANDACTIVATE: this one if it still votes, else the follower that
//! acknowledged most; a leader left out then commits nothing more and
//! steps down at its next tick, and the followers elect again.
//!
//! Only the members of the current and the proposed configuration may
//! learn (a learner is sent the whole tree). A server outside that asks to
//! (a member removed while it was down, one an operator is adding back) is
//! refused and counted as ready: a reconfig's prep may count on it for the
//! next configuration's quorum, and once the proposal names it, it has
//! initLimit to sync before that quorum is required of the synced.

use super::{Leader, Phase};
use crate::core::election::ServerId;
use crate::core::zab::learner_handler::HandlerPhase;
use crate::core::zab::{Members, NextConfig, ZabCommand, ZabMessage};
use bytes::Bytes;
use zkd_protocol::Zxid;

impl Leader {
    /// Proposes the reconfig txn `zxid`, whose configuration has `next`
    /// members. The node prepares one at a time (RECONFIGINPROGRESS).
    pub fn propose_reconfig(&mut self, zxid: Zxid, txn: Bytes, next: Members) {
        self.next = Some(NextConfig {
            zxid,
            members: next,
        });
        self.propose(zxid, txn);
    }

    /// The history holds a reconfig that may not be committed: the epoch's
    /// establishment commits it, so NEWLEADER needs its members' quorum too.
    pub fn with_next_config(mut self, next: Option<NextConfig>) -> Leader {
        self.next = next;
        self
    }

    /// The members whose quorum decides now (the next ones once active).
    pub fn members(&self) -> &Members {
        &self.members
    }

    /// Whether `sid` is a member, or one the next configuration adds.
    pub(super) fn is_member(&self, sid: ServerId) -> bool {
        self.members.contains(sid) || self.next.as_ref().is_some_and(|n| n.members.contains(sid))
    }

    /// `sid`, outside the configuration, asked to learn at `now_ms`.
    pub(super) fn knocked(&mut self, now_ms: u64, sid: ServerId) {
        if self.knocked.insert(sid, now_ms).is_none() {
            tracing::info!(peer = %sid, "leader: a server outside the configuration asks to learn; refused");
        }
        self.send_ready();
    }

    /// Forgets the servers that have not asked to learn within initLimit,
    /// and reports the ready ones if they changed.
    pub(super) fn report_ready(&mut self, now_ms: u64) {
        let limit = self.timing.init_ms();
        self.knocked
            .retain(|_, at| now_ms.saturating_sub(*at) <= limit);
        self.send_ready();
    }

    /// Reports the servers a reconfig may count on (the synced ones, and
    /// those outside asking to learn) if they changed since last said.
    pub(super) fn send_ready(&mut self) {
        let mut ready = self.synced();
        let outside = self.knocked.keys().filter(|s| !self.is_member(**s));
        ready.extend(outside);
        ready.sort_unstable();
        ready.dedup();
        if ready != self.ready_sent {
            self.ready_sent = ready.clone();
            self.commands.push_back(ZabCommand::Synced(ready));
        }
    }

    /// Whether `synced` keeps this established leader's quorums: of its
    /// members, and of a proposed configuration's, counting its joiners
    /// while they sync (a silent one is dropped) and for initLimit after
    /// the proposal while they connect.
    pub(super) fn keeps_quorum(&mut self, now_ms: u64, synced: &[ServerId]) -> bool {
        if !self.members.is_quorum(synced) {
            return false;
        }
        let Some(next) = &self.next else {
            self.joiners_sync_until_ms = None;
            return true;
        };
        let until = *self
            .joiners_sync_until_ms
            .get_or_insert(now_ms + self.timing.init_ms());
        let syncing = self.learners.keys().filter(|s| next.members.contains(**s));
        now_ms < until || next.members.is_quorum(synced.iter().chain(syncing))
    }

    /// Whether `acked` holds a quorum for `zxid`: of the members, and from
    /// an uncommitted reconfig on, of its members as well.
    pub(super) fn is_quorum_for<'a, M>(&self, zxid: Zxid, acked: M) -> bool
    where
        M: IntoIterator<Item = &'a ServerId>,
        M::IntoIter: Clone,
    {
        let acked = acked.into_iter();
        let next = self.next.as_ref().filter(|n| zxid >= n.zxid);
        self.members.is_quorum(acked.clone()) && next.is_none_or(|n| n.members.is_quorum(acked))
    }

    /// The epoch is established, which commits the whole history: a
    /// reconfig in it is committed, and its members decide from now on.
    pub(super) fn history_reconfig_committed(&mut self) {
        if let Some(next) = self.next.take_if(|n| n.zxid <= self.last_committed) {
            self.members = next.members;
            self.hand_over_unless_voting(next.zxid);
        }
    }

    /// Commits the reconfig `zxid` (everything before it is): its members
    /// decide from now on, and learners hear COMMITANDACTIVATE or
    /// INFORMANDACTIVATE with the next leader instead of COMMIT or INFORM.
    pub(super) fn commit_reconfig(&mut self, zxid: Zxid, txn: Bytes) {
        self.forward_commit();
        self.last_committed = zxid;
        let digest = None;
        let delivered = txn.clone();
        (self.commands).push_back(ZabCommand::Deliver {
            zxid,
            txn: delivered,
            digest,
        });
        let Some(next) = self.next.take() else {
            return;
        };
        self.members = next.members;
        let designated = self.designate(zxid);
        for h in (self.learners.values_mut()).filter(|h| h.is_forwarding() && !h.paused) {
            let message = match h.observer {
                true if h.live && zxid > h.sent => {
                    h.sent = zxid;
                    let txn = txn.clone();
                    ZabMessage::InformAndActivate {
                        zxid,
                        designated,
                        txn,
                    }
                }
                false if h.sent >= zxid => {
                    let digest = None;
                    ZabMessage::CommitAndActivate {
                        zxid,
                        designated,
                        digest,
                    }
                }
                _ => continue,
            };
            h.commit_sent = zxid;
            let to = h.sid;
            self.commands.push_back(ZabCommand::Send { to, message });
        }
        self.hand_over_unless_voting(zxid);
    }

    /// Who leads the configuration activated at `zxid`: this member if it
    /// votes in it, else the synced voter that acknowledged the most.
    fn designate(&self, zxid: Zxid) -> ServerId {
        if self.members.is_voter(self.me) {
            return self.me;
        }
        (self.learners.values())
            .filter(|h| h.phase == HandlerPhase::Synced && h.acked >= zxid)
            .filter(|h| self.members.is_voter(h.sid))
            .max_by_key(|h| (h.acked, std::cmp::Reverse(h.sid)))
            .map_or(self.me, |h| h.sid)
    }

    fn hand_over_unless_voting(&mut self, zxid: Zxid) {
        if self.members.is_voter(self.me) || self.phase != Phase::Broadcast {
            return;
        }
        let designated = self.designate(zxid);
        tracing::info!(%zxid, %designated, "leader: the configuration leaves it out; handing over");
        self.handed_to = Some(designated);
    }
}
