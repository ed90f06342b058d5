//! The leader's side of Zab: discovery (a new epoch above every accepted
//! one of a quorum), synchronization of each follower, broadcast with
//! cumulative acks and commits, heartbeats and step-down.

use super::learner_handler::{HandlerPhase, LearnerHandler};
use super::SyncPlan;
use super::{
    epoch_zxid, DurableState, Epoch, FlowMarks, Members, NextConfig, StorageOp, Timing, ZabCommand,
    ZabMessage,
};
use crate::core::election::ServerId;
use crate::failpoints::{active, Failpoint};
use bytes::Bytes;
use std::collections::{BTreeMap, VecDeque};
use zkd_protocol::{Zxid, MAX_EPOCH};

mod flow;
mod reconfig;
mod sync_limit;

/// Where the leader is in establishing its epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Waiting for a quorum of FOLLOWERINFO.
    Discovery,
    /// The new epoch is chosen; acceptedEpoch is being persisted.
    PersistingAcceptedEpoch,
    /// LEADERINFO sent; waiting for a quorum of ACKEPOCH.
    AwaitingEpochAcks,
    /// A quorum acked the epoch; currentEpoch is being persisted.
    PersistingCurrentEpoch,
    /// Followers are being synced; waiting for a quorum of NEWLEADER acks.
    Synchronizing,
    /// Established: proposing, committing, serving.
    Broadcast,
    /// Stepped down.
    Done,
}

/// How far a learner's acceptedEpoch may be ahead of the leader's own.
/// Each leader takes one more than the highest of a quorum's, so an honest
/// lead counts the elections this leader missed (its quorum did not);
/// without a bound one forged FOLLOWERINFO would spend every epoch left,
/// and then no leader could ever be chosen again.
pub const EPOCH_LEAP: Epoch = 1 << 16;

const TOKEN_ACCEPTED_EPOCH: u64 = 1;
const TOKEN_CURRENT_EPOCH: u64 = 2;

/// One member leading.
#[derive(Debug)]
pub struct Leader {
    me: ServerId,
    members: Members,
    /// A reconfig proposed (or found in the history) and not committed:
    /// from it on, quorums need its members too (see `reconfig`).
    next: Option<NextConfig>,
    /// It committed a reconfig that leaves it out, designating this
    /// member: it proposes and commits nothing more, and steps down.
    handed_to: Option<ServerId>,
    /// Servers outside the configuration that asked to learn, and when
    /// last: refused, and counted on by a reconfig that adds them.
    knocked: BTreeMap<ServerId, u64>,
    /// The servers last reported ready for a reconfig ([`ZabCommand::Synced`]).
    ready_sent: Vec<ServerId>,
    /// Until then a proposed configuration's joiners have time to sync:
    /// its quorum is not yet required of the synced followers.
    joiners_sync_until_ms: Option<u64>,
    timing: Timing,
    state: DurableState,
    phase: Phase,
    /// The epoch this leader establishes, once chosen.
    epoch: Epoch,
    learners: BTreeMap<ServerId, LearnerHandler>,
    /// Proposed, not yet committed, in zxid order.
    outstanding: BTreeMap<Zxid, Bytes>,
    /// Everything up to here is committed (the whole recovered history is).
    last_committed: Zxid,
    last_proposed: Zxid,
    /// The leader's own log is durable up to here.
    own_durable: Zxid,
    /// The establishment's current wait (for followers, their epoch acks,
    /// their acks of NEWLEADER) must end by then.
    deadline_ms: u64,
    /// When a follower's link is too full for live proposals.
    flow: FlowMarks,
    /// From then on it yields to a follower that accepted a later epoch
    /// (see `follower_info`); before, such a claim only drops the follower.
    may_yield_ms: u64,
    /// The next heartbeat: every half tick, as ZooKeeper's leader pings, so
    /// a follower allowed a tick of silence always hears one in time.
    next_tick_ms: u64,
    commands: VecDeque<ZabCommand>,
}

impl Leader {
    /// A member that won the election, with what it has on disk; its tree
    /// holds everything up to `tree_zxid`. Its whole history becomes
    /// committed in the new epoch, so what the tree lacks of it (logged in
    /// an earlier role, never applied) is delivered first, as ZooKeeper's
    /// leader loads its whole log.
    pub fn new(
        me: ServerId,
        members: Members,
        timing: Timing,
        state: DurableState,
        tree_zxid: Zxid,
        now_ms: u64,
    ) -> Leader {
        let last = state.history.last_zxid();
        assert!(
            tree_zxid >= state.history.base(),
            "the tree must hold at least the history before the window"
        );
        let mut leader = Leader {
            me,
            members,
            next: None,
            handed_to: None,
            knocked: BTreeMap::new(),
            ready_sent: Vec::new(),
            joiners_sync_until_ms: None,
            timing,
            phase: Phase::Discovery,
            epoch: 0,
            learners: BTreeMap::new(),
            outstanding: BTreeMap::new(),
            last_committed: last,
            last_proposed: last,
            own_durable: last,
            deadline_ms: now_ms + timing.init_ms(),
            may_yield_ms: now_ms + 2 * timing.init_ms(),
            flow: FlowMarks::RUNTIME,
            next_tick_ms: now_ms + timing.ping_ms(),
            commands: VecDeque::new(),
            state,
        };
        let unapplied: Vec<(Zxid, Bytes)> =
            leader.state.history.after(tree_zxid).cloned().collect();
        for (zxid, txn) in unapplied {
            let digest = None;
            (leader.commands).push_back(ZabCommand::Deliver { zxid, txn, digest });
        }
        leader.maybe_choose_epoch();
        leader
    }

    /// The same leader with other flow marks (the simulator's links are small).
    pub fn with_flow(mut self, flow: FlowMarks) -> Leader {
        self.flow = flow;
        self
    }

    /// A message from a follower.
    pub fn handle_message(&mut self, now_ms: u64, from: ServerId, message: ZabMessage) {
        if self.phase == Phase::Done {
            return;
        }
        // A learner receives the whole tree, ACLs aside: only a sid the
        // current or the proposed configuration names may become one (the
        // runtime checked that it came from that member's address). A
        // member removed while down learns again once a reconfig adds it.
        // Planted (strangers-learn): those outside are served, as ZooKeeper serves them.
        let outside = !active(Failpoint::StrangersLearn) && !self.is_member(from);
        if outside && message.is_learner_info() {
            self.knocked(now_ms, from);
        }
        if from == self.me || outside {
            return self
                .commands
                .push_back(ZabCommand::Disconnect { peer: from });
        }
        if let Some(h) = self.learners.get_mut(&from) {
            h.last_heard_ms = now_ms;
        }
        match message {
            ZabMessage::FollowerInfo { accepted_epoch } => {
                self.follower_info(now_ms, from, accepted_epoch, false)
            }
            ZabMessage::ObserverInfo { accepted_epoch } => {
                self.follower_info(now_ms, from, accepted_epoch, true)
            }
            ZabMessage::AckEpoch {
                current_epoch,
                last_zxid,
                log_base,
                wants_snapshot,
            } => {
                if let Some(h) = self.learners.get_mut(&from) {
                    h.wants_snapshot = wants_snapshot;
                }
                self.ack_epoch(from, current_epoch, last_zxid, log_base)
            }
            ZabMessage::Ack { zxid } => self.ack(from, zxid),
            ZabMessage::Ping { .. } => {}
            other => {
                tracing::warn!(peer = %from, ?other, "unexpected message from a follower; dropping it");
                self.drop_learner(from);
            }
        }
    }

    /// The storage thread reached barrier `token`. Each wait of the
    /// establishment (for followers, for their epoch acks, for their acks of
    /// NEWLEADER) has initLimit of its own, as ZooKeeper's leader gives it.
    pub fn handle_reached(&mut self, now_ms: u64, token: u64) {
        match (token, self.phase) {
            (TOKEN_ACCEPTED_EPOCH, Phase::PersistingAcceptedEpoch) => {
                self.state.accepted_epoch = self.epoch;
                self.phase = Phase::AwaitingEpochAcks;
                self.deadline_ms = now_ms + self.timing.init_ms();
                let waiting: Vec<ServerId> = self.learners.keys().copied().collect();
                for sid in waiting {
                    self.send(sid, ZabMessage::LeaderInfo { epoch: self.epoch });
                }
                self.maybe_persist_current_epoch();
            }
            (TOKEN_CURRENT_EPOCH, Phase::PersistingCurrentEpoch) => {
                self.state.current_epoch = self.epoch;
                tracing::info!(epoch = self.epoch, "leader: epoch agreed by a quorum");
                self.phase = Phase::Synchronizing;
                self.deadline_ms = now_ms + self.timing.init_ms();
                let ready: Vec<ServerId> = self
                    .learners
                    .values()
                    .filter(|h| h.phase == HandlerPhase::AwaitingSync)
                    .map(|h| h.sid)
                    .collect();
                for sid in ready {
                    self.sync(sid);
                }
                self.maybe_establish();
            }
            _ => {}
        }
    }

    /// The leader's own log is durable up to `zxid`.
    pub fn handle_persisted(&mut self, zxid: Zxid) {
        self.own_durable = self.own_durable.max(zxid);
        self.try_commit();
    }

    /// Heartbeats, liveness of followers, and the discovery deadline.
    pub fn handle_timeout(&mut self, now_ms: u64) {
        if self.phase == Phase::Done {
            return;
        }
        if self.phase != Phase::Broadcast
            && now_ms >= self.deadline_ms
            && !self.snaps_moving(now_ms)
        {
            return self.abandon(format!(
                "no quorum of followers within initLimit (synced: {:?})",
                self.synced()
            ));
        }
        if now_ms < self.next_tick_ms {
            return;
        }
        self.next_tick_ms = now_ms + self.timing.ping_ms();
        if let Some(designated) = self.handed_to {
            return self.abandon(format!("a reconfig left it out; {designated} leads next"));
        }
        let silent: Vec<ServerId> = self
            .learners
            .values()
            .filter(|h| now_ms.saturating_sub(h.last_heard_ms) > self.silence_limit_ms(h))
            .map(|h| h.sid)
            .collect();
        for sid in silent {
            tracing::info!(peer = %sid, "leader: dropping a silent follower");
            self.drop_learner(sid);
        }
        self.drop_unacknowledging(now_ms);
        self.report_ready(now_ms);
        if self.phase == Phase::Broadcast {
            let synced = self.synced();
            if !self.keeps_quorum(now_ms, &synced) {
                if active(Failpoint::DeposedLeaderServes) {
                    // Planted: the lost quorum is noticed and ignored; the
                    // leader keeps its clients (and answers their syncs
                    // itself) though it can commit nothing more.
                    tracing::debug!(?synced, "leader without a quorum, staying on (failpoint)");
                } else {
                    return self.abandon(format!("not enough followers synced, only {synced:?}"));
                }
            }
        }
        // Only followers whose sync is under way hear pings (as in ZooKeeper),
        // so one stuck earlier times out and connects again.
        self.send_to_forwarding(ZabMessage::Ping {
            zxid: self.last_proposed,
            touches: Vec::new(),
        });
    }

    /// When `handle_timeout` next has work.
    pub fn poll_timeout(&self) -> Option<u64> {
        match self.phase {
            Phase::Done => None,
            Phase::Broadcast => Some(self.next_tick_ms),
            _ => Some(self.next_tick_ms.min(self.deadline_ms)),
        }
    }

    /// A SNAP to `sid` moved on (the follower read more of it): it is not
    /// silent, however long the image takes. ZooKeeper's leader times a
    /// learner out per read, not per sync.
    pub fn heard_from(&mut self, sid: ServerId, now_ms: u64) {
        if active(Failpoint::SyncTimedWhole) {
            return;
        }
        if let Some(h) = self.learners.get_mut(&sid) {
            h.last_heard_ms = h.last_heard_ms.max(now_ms);
        }
    }

    /// The link to a follower broke.
    pub fn peer_disconnected(&mut self, sid: ServerId) {
        self.forget_learner(sid);
    }

    /// The zxid the next proposal gets, while established. None while not
    /// serving, or when the counter would roll over (the leader then steps
    /// down so the next epoch starts at 0: ZOOKEEPER-1277).
    pub fn next_zxid(&mut self) -> Option<Zxid> {
        if self.phase != Phase::Broadcast || self.handed_to.is_some() {
            return None;
        }
        let next = self.last_proposed.next();
        if next.counter() == u32::MAX {
            self.abandon("zxid counter would roll over: forcing a new epoch".into());
            return None;
        }
        Some(next)
    }

    /// Proposes `txn`, which must carry the zxid `next_zxid` gave.
    pub fn propose(&mut self, zxid: Zxid, txn: Bytes) {
        assert_eq!(
            Some(zxid),
            (self.phase == Phase::Broadcast).then(|| self.last_proposed.next())
        );
        self.last_proposed = zxid;
        self.state.history.push(zxid, txn.clone());
        self.outstanding.insert(zxid, txn.clone());
        self.commands
            .push_back(ZabCommand::Storage(StorageOp::Append {
                zxid,
                txn: txn.clone(),
            }));
        self.forward_proposal(zxid, &txn);
        if active(Failpoint::AckBeforeFsync) {
            // Planted: the leader counts its own ack once the append is
            // queued, before its fsync.
            self.handle_persisted(zxid);
        }
    }

    /// Commands produced so far, in order.
    pub fn drain_commands(&mut self) -> impl Iterator<Item = ZabCommand> + '_ {
        self.commands.drain(..)
    }

    /// Moves the commands produced so far to the back of `into` (see [`take_queued`](crate::core::take_queued)).
    pub fn take_commands(&mut self, into: &mut VecDeque<ZabCommand>) {
        crate::core::take_queued(&mut self.commands, into);
    }

    /// The epoch being established (0 before one is chosen).
    pub fn epoch(&self) -> Epoch {
        self.epoch
    }

    /// Whether the leader is established and serving.
    pub fn is_established(&self) -> bool {
        self.phase == Phase::Broadcast
    }

    /// The Zab phase, as ZooKeeper's leader names it: discovery until a
    /// quorum acked the new epoch, synchronization until a quorum acked
    /// NEWLEADER.
    pub fn zab_state(&self) -> super::ZabState {
        use super::ZabState;
        match self.phase {
            Phase::Discovery | Phase::PersistingAcceptedEpoch | Phase::AwaitingEpochAcks => {
                ZabState::Discovery
            }
            Phase::PersistingCurrentEpoch | Phase::Synchronizing => ZabState::Synchronization,
            Phase::Broadcast => ZabState::Broadcast,
            Phase::Done => ZabState::Election,
        }
    }

    /// Everything up to here is committed.
    pub fn last_committed(&self) -> Zxid {
        self.last_committed
    }

    /// Followers that acknowledged NEWLEADER.
    pub fn synced(&self) -> Vec<ServerId> {
        let mut synced = vec![self.me];
        synced.extend(
            self.learners
                .values()
                .filter(|h| h.phase == HandlerPhase::Synced)
                .map(|h| h.sid),
        );
        synced
    }

    /// Connected followers and their phases.
    pub fn learners(&self) -> impl Iterator<Item = &LearnerHandler> {
        self.learners.values()
    }

    /// Whether a follower this establishment waits for is still reading
    /// its SNAP (heard from within syncLimit while syncing): a joiner a
    /// pending reconfig names may need the whole tree first. The wait
    /// ends when it acks or falls silent.
    fn snaps_moving(&self, now_ms: u64) -> bool {
        self.phase == Phase::Synchronizing
            && (self.learners.values()).any(|h| {
                h.phase == HandlerPhase::Syncing
                    && now_ms.saturating_sub(h.last_heard_ms) <= self.timing.sync_ms()
            })
    }

    fn silence_limit_ms(&self, h: &LearnerHandler) -> u64 {
        match h.phase {
            HandlerPhase::Synced => self.timing.sync_ms(),
            _ => self.timing.init_ms() + self.timing.sync_ms(),
        }
    }

    fn follower_info(
        &mut self,
        now_ms: u64,
        from: ServerId,
        accepted_epoch: Epoch,
        observer: bool,
    ) {
        if observer != self.members.is_observer(from) {
            // Its role is the configuration's, not what a connection claims.
            tracing::warn!(peer = %from, observer, "learner announced a role not its own; dropping it");
            return self.drop_learner(from);
        }
        let ours = (self.state.accepted_epoch.max(self.state.current_epoch)).max(self.epoch);
        if accepted_epoch >= MAX_EPOCH || accepted_epoch > ours.saturating_add(EPOCH_LEAP) {
            // No epoch above the last exists: choosing one would wrap. And
            // no member got this far ahead of a leader its quorum elected.
            tracing::warn!(peer = %from, accepted_epoch, ours, "follower claims an epoch no leader could have chosen; dropping it");
            return self.drop_learner(from);
        }
        let chosen = !matches!(
            self.phase,
            Phase::Discovery | Phase::PersistingAcceptedEpoch
        );
        if chosen && accepted_epoch > self.epoch {
            return self.later_epoch_claimed(now_ms, from, accepted_epoch);
        }
        // A reconnecting follower starts over.
        let handler = LearnerHandler::new(from, accepted_epoch, now_ms, observer);
        self.forget_learner(from);
        self.learners.insert(from, handler);
        match self.phase {
            Phase::Discovery => self.maybe_choose_epoch(),
            Phase::PersistingAcceptedEpoch => {}
            _ => self.send(from, ZabMessage::LeaderInfo { epoch: self.epoch }),
        }
    }

    /// `from` promised a later epoch (to a leader that never got a quorum)
    /// and cannot follow this one. ZooKeeper's LearnerHandler drops it and
    /// leaves it out until the next election, which may never come while
    /// this leader keeps a quorum (simulator seed 461). So it is dropped,
    /// and only a leader that has led for two initLimits steps down for it:
    /// a real member gets its election, and a connection that merely claims
    /// a member's sid can force one at most that often, not one per frame.
    /// A learner outside the configuration never gets that election: no
    /// quorum needs it, and any connection can claim a stranger's sid.
    fn later_epoch_claimed(&mut self, now_ms: u64, from: ServerId, accepted_epoch: Epoch) {
        let yields = self.phase == Phase::Broadcast && now_ms >= self.may_yield_ms;
        if yields && self.is_member(from) {
            return self.abandon(format!(
                "follower {from} accepted epoch {accepted_epoch}, above ours {}",
                self.epoch
            ));
        }
        tracing::warn!(
            peer = %from,
            accepted_epoch,
            epoch = self.epoch,
            "follower accepted an epoch above ours; dropping it"
        );
        self.drop_learner(from)
    }

    /// Once a quorum is connected: the new epoch is above every acceptedEpoch
    /// among them, and is persisted before anyone hears of it.
    fn maybe_choose_epoch(&mut self) {
        let connected: Vec<ServerId> = std::iter::once(self.me)
            .chain(self.learners.keys().copied())
            .collect();
        if self.phase != Phase::Discovery || !self.members.is_quorum(&connected) {
            return;
        }
        let highest = self
            .learners
            .values()
            .map(|h| h.accepted_epoch)
            .chain([self.state.accepted_epoch, self.state.current_epoch])
            .max()
            .unwrap_or(0);
        // Learners above MAX_EPOCH - 1 were dropped; only our own disk can be there.
        let Some(epoch) = highest.checked_add(1).filter(|&e| e <= MAX_EPOCH) else {
            return self.abandon(format!("no epoch is left after {highest}"));
        };
        self.epoch = epoch;
        self.phase = Phase::PersistingAcceptedEpoch;
        self.commands
            .push_back(ZabCommand::Storage(StorageOp::SetAcceptedEpoch(self.epoch)));
        self.commands
            .push_back(ZabCommand::Storage(StorageOp::Barrier(
                TOKEN_ACCEPTED_EPOCH,
            )));
    }

    fn ack_epoch(
        &mut self,
        from: ServerId,
        current_epoch: Option<Epoch>,
        last_zxid: Zxid,
        log_base: Zxid,
    ) {
        let Some(h) = self.learners.get_mut(&from) else {
            return;
        };
        if h.phase != HandlerPhase::Discovery {
            return self.drop_learner(from);
        }
        let ours = (self.state.current_epoch, self.state.history.last_zxid());
        if let Some(epoch) = current_epoch {
            if (epoch, last_zxid) > ours {
                // ZooKeeper's "Follower is ahead of the leader" ends that
                // learner's handler, not the leader: the election made the
                // leader as recent as a quorum, so what the follower has
                // beyond it was never committed. Without a quorum the leader
                // steps down at initLimit, and another election finds it.
                tracing::warn!(
                    peer = %from, epoch, %last_zxid,
                    "follower is ahead of the leader; dropping it"
                );
                return self.drop_learner(from);
            }
        }
        h.summary = Some((current_epoch, last_zxid));
        h.log_base = log_base;
        h.phase = HandlerPhase::AwaitingSync;
        match self.phase {
            Phase::Synchronizing | Phase::Broadcast => self.sync(from),
            Phase::AwaitingEpochAcks => self.maybe_persist_current_epoch(),
            _ => {}
        }
    }

    /// A quorum (with the leader) acked the epoch with their currentEpoch:
    /// persist ours before any follower is synced.
    fn maybe_persist_current_epoch(&mut self) {
        if self.phase != Phase::AwaitingEpochAcks {
            return;
        }
        let acked: Vec<ServerId> = std::iter::once(self.me)
            .chain(
                self.learners
                    .values()
                    .filter(|h| matches!(h.summary, Some((Some(_), _))))
                    .map(|h| h.sid),
            )
            .collect();
        if self.members.is_quorum(&acked) {
            self.phase = Phase::PersistingCurrentEpoch;
            self.commands
                .push_back(ZabCommand::Storage(StorageOp::SetCurrentEpoch(self.epoch)));
            self.commands
                .push_back(ZabCommand::Storage(StorageOp::Barrier(TOKEN_CURRENT_EPOCH)));
        }
    }

    /// DIFF, TRUNC+DIFF or SNAP, then every txn after that point (committed
    /// ones followed by one cumulative COMMIT), outstanding proposals, and
    /// NEWLEADER. From here on live proposals flow to it too.
    fn sync(&mut self, sid: ServerId) {
        let Some(peer_last) = self
            .learners
            .get(&sid)
            .and_then(|h| h.summary)
            .map(|(_, last)| last)
        else {
            return;
        };
        let Some(&LearnerHandler {
            log_base,
            wants_snapshot,
            observer,
            ..
        }) = self.learners.get(&sid)
        else {
            return;
        };
        let plan = self.plan_sync(peer_last, log_base, wants_snapshot);
        let after = match plan {
            SyncPlan::Diff { after } => {
                self.send(sid, ZabMessage::Diff { zxid: after });
                after
            }
            SyncPlan::TruncThenDiff { to } => {
                self.send(sid, ZabMessage::Trunc { zxid: to });
                to
            }
            SyncPlan::Snap => {
                self.commands
                    .push_back(ZabCommand::SendSnapshot { to: sid });
                self.last_committed
            }
        };
        tracing::info!(
            peer = %sid,
            ?plan,
            from = %after,
            to = %self.last_proposed,
            "leader: syncing follower"
        );
        // An observer is sent committed txns only, then INFORMs.
        let sync_point = match observer {
            true => self.last_committed,
            false => self.last_proposed,
        };
        for (zxid, txn) in self.txns_after(after) {
            if zxid <= sync_point {
                self.send(sid, ZabMessage::Proposal { zxid, txn });
            }
        }
        self.end_sync(sid);
        if let Some(h) = self.learners.get_mut(&sid) {
            h.phase = HandlerPhase::Syncing;
            h.sync_point = sync_point;
            h.sent = sync_point;
            h.commit_sent = self.last_committed;
            h.live = true;
        }
    }

    /// The end of `sid`'s sync: a cumulative COMMIT (also of what it logged
    /// earlier and never applied), then NEWLEADER (its member adds the
    /// ensemble configuration).
    fn end_sync(&mut self, sid: ServerId) {
        let (zxid, digest) = (self.last_committed, None);
        self.send(sid, ZabMessage::Commit { zxid, digest });
        let (epoch, config) = (self.epoch, Bytes::new());
        self.send(sid, ZabMessage::NewLeader { epoch, config });
    }

    /// How to sync a follower whose log ends at `peer_last` and can be cut
    /// back no further than `log_base`.
    fn plan_sync(&self, peer_last: Zxid, log_base: Zxid, wants_snapshot: bool) -> SyncPlan {
        let plan = match self.state.history.plan_sync(peer_last) {
            // Its tree diverged from a leader's: only a SNAP repairs it.
            _ if wants_snapshot => SyncPlan::Snap,
            // It logged proposals we have not committed: they are cut and
            // sent again, so nothing uncommitted reaches its tree before the
            // COMMIT does (ZooKeeper TRUNCs to its last committed zxid).
            SyncPlan::Diff { after: point } | SyncPlan::TruncThenDiff { to: point }
                if point > self.last_committed && !active(Failpoint::DiffUncommitted) =>
            {
                SyncPlan::TruncThenDiff {
                    to: self.last_committed,
                }
            }
            plan => plan,
        };
        match plan {
            // Its log cannot be cut below its snapshot: replace everything.
            // Planted (trunc-below-log-base): the TRUNC goes out anyway.
            SyncPlan::TruncThenDiff { to }
                if to < log_base && !active(Failpoint::TruncBelowLogBase) =>
            {
                SyncPlan::Snap
            }
            plan => plan,
        }
    }

    /// Every txn after `after` that a follower synced there lacks: the
    /// committed ones from the history window (a DIFF starts inside it),
    /// then every outstanding proposal, which are all kept however many
    /// there are. The window alone would skip what lies between the last
    /// commit and its base once more than a window's worth is outstanding.
    fn txns_after(&self, after: Zxid) -> Vec<(Zxid, Bytes)> {
        let committed = (self.state.history.after(after))
            .take_while(|(zxid, _)| *zxid <= self.last_committed)
            .cloned();
        let from = after.max(self.last_committed);
        let outstanding = (self.outstanding.range(from..))
            .filter(|(zxid, _)| **zxid > from)
            .map(|(zxid, txn)| (*zxid, txn.clone()));
        committed.chain(outstanding).collect()
    }

    fn ack(&mut self, from: ServerId, zxid: Zxid) {
        let Some(h) = self.learners.get_mut(&from) else {
            return;
        };
        if zxid == epoch_zxid(self.epoch) && h.phase == HandlerPhase::Syncing {
            h.phase = HandlerPhase::Synced;
            h.acked = h.acked.max(h.sync_point);
            if self.phase == Phase::Broadcast {
                self.send(from, ZabMessage::UpToDate);
            }
            self.synced_changed();
            self.maybe_establish();
        } else if zxid.counter() != 0 && h.phase == HandlerPhase::Synced && !h.observer {
            if zxid > self.last_proposed {
                // ZooKeeper's ackConsistent: an ACK for a zxid never proposed.
                tracing::warn!(peer = %from, %zxid, "ack for a zxid never proposed");
                return self.drop_learner(from);
            }
            if zxid > h.acked {
                h.acked = zxid;
                h.acks_awaited_since_ms = None;
            }
        }
        self.try_commit();
    }

    /// A quorum acknowledged NEWLEADER: the epoch is established.
    fn maybe_establish(&mut self) {
        let synced = self.synced();
        if self.phase != Phase::Synchronizing || !self.is_quorum_for(self.last_committed, &synced) {
            return;
        }
        self.phase = Phase::Broadcast;
        self.history_reconfig_committed();
        self.last_proposed = epoch_zxid(self.epoch).max(self.last_proposed);
        tracing::info!(
            epoch = self.epoch,
            synced = ?self.synced(),
            last_zxid = %self.last_committed,
            "leader established"
        );
        self.commands.push_back(ZabCommand::Serving);
        let synced: Vec<ServerId> = self
            .learners
            .values()
            .filter(|h| h.phase == HandlerPhase::Synced)
            .map(|h| h.sid)
            .collect();
        for sid in synced {
            self.send(sid, ZabMessage::UpToDate);
        }
    }

    /// Commits, in order, every outstanding proposal a quorum has made durable.
    fn try_commit(&mut self) {
        if self.phase != Phase::Broadcast || self.handed_to.is_some() {
            return;
        }
        let before = self.last_committed;
        while let Some((&zxid, _)) = self.outstanding.first_key_value() {
            let own = (self.own_durable >= zxid).then_some(&self.me);
            let durable = own.into_iter().chain(
                (self.learners.values())
                    .filter(move |h| h.phase == HandlerPhase::Synced && h.acked >= zxid)
                    .map(|h| &h.sid),
            );
            // Planted (commit-without-quorum): the leader's own fsync taken
            // for a quorum, as a standalone server's is.
            let alone = active(Failpoint::CommitWithoutQuorum) && own.is_some();
            if !self.is_quorum_for(zxid, durable) && !alone {
                break;
            }
            let Some((zxid, txn)) = self.outstanding.pop_first() else {
                break;
            };
            if self.next.as_ref().is_some_and(|n| n.zxid == zxid) {
                self.commit_reconfig(zxid, txn);
                if self.handed_to.is_some() {
                    break;
                }
                continue;
            }
            self.last_committed = zxid;
            self.inform_observers(zxid, &txn);
            let digest = None;
            (self.commands).push_back(ZabCommand::Deliver { zxid, txn, digest });
        }
        if self.last_committed > before {
            self.forward_commit();
        }
    }

    /// Sends to every follower whose sync is under way or done.
    fn send_to_forwarding(&mut self, message: ZabMessage) {
        for h in self.learners.values().filter(|h| h.is_forwarding()) {
            let (to, message) = (h.sid, message.clone());
            self.commands.push_back(ZabCommand::Send { to, message });
        }
    }

    /// Forgets `sid`'s handler, saying so if it was synced.
    fn forget_learner(&mut self, sid: ServerId) {
        let removed = self.learners.remove(&sid);
        if removed.is_some_and(|h| h.phase == HandlerPhase::Synced) {
            self.synced_changed();
        }
    }

    fn synced_changed(&mut self) {
        self.send_ready();
    }

    /// Whether `sid` is a learner that acknowledged NEWLEADER.
    pub fn is_synced(&self, sid: ServerId) -> bool {
        (self.learners.get(&sid)).is_some_and(|h| h.phase == HandlerPhase::Synced)
    }

    /// Forgets `sid`'s handler and closes its link.
    pub fn drop_learner(&mut self, sid: ServerId) {
        self.forget_learner(sid);
        self.commands
            .push_back(ZabCommand::Disconnect { peer: sid });
    }

    fn abandon(&mut self, reason: String) {
        tracing::warn!(epoch = self.epoch, %reason, "leader stepping down");
        self.phase = Phase::Done;
        let peers: Vec<ServerId> = self.learners.keys().copied().collect();
        for peer in peers {
            self.commands.push_back(ZabCommand::Disconnect { peer });
        }
        self.learners.clear();
        self.commands.push_back(ZabCommand::Abandon { reason });
    }

    fn send(&mut self, to: ServerId, message: ZabMessage) {
        self.commands.push_back(ZabCommand::Send { to, message });
    }
}
