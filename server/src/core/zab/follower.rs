//! The follower's side of Zab: accept the leader's epoch, take its sync,
//! make it durable before acknowledging NEWLEADER (log, then currentEpoch:
//! ZOOKEEPER-3911, -4643, -4646), then log, acknowledge and apply proposals.
//! An observer is a follower without a vote: it announces itself with
//! OBSERVERINFO, syncs the same way, and then gets INFORM (a committed txn,
//! logged and applied) instead of PROPOSAL and COMMIT, and acknowledges
//! nothing after NEWLEADER.

use super::{
    epoch_zxid, DurableState, Epoch, SnapshotSource, StorageOp, Timing, ZabCommand, ZabMessage,
};
use crate::core::election::ServerId;
use crate::failpoints::{active, Failpoint};
use bytes::Bytes;
use std::collections::{BTreeMap, VecDeque};
use zkd_protocol::Zxid;

/// Where the follower is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// FOLLOWERINFO sent.
    AwaitingLeaderInfo,
    /// Persisting acceptedEpoch before ACKEPOCH.
    PersistingAcceptedEpoch(Epoch),
    /// ACKEPOCH sent; waiting for DIFF, TRUNC or SNAP.
    AwaitingSync(Epoch),
    /// Receiving the sync; commits are held until NEWLEADER.
    Syncing(Epoch),
    /// NEWLEADER received: making the sync durable, then currentEpoch.
    PersistingNewLeader(Epoch),
    /// NEWLEADER acknowledged; waiting for UPTODATE.
    AwaitingUpToDate(Epoch),
    /// Serving.
    Broadcast(Epoch),
    /// Gone back to election.
    Done,
}

const TOKEN_ACCEPTED_EPOCH: u64 = 11;
const TOKEN_NEW_LEADER: u64 = 12;

/// One member following `leader`.
#[derive(Debug)]
pub struct Follower {
    leader: ServerId,
    timing: Timing,
    state: DurableState,
    phase: Phase,
    /// The newest zxid in our log (appended, maybe not yet durable).
    last_logged: Zxid,
    /// Our log is durable up to here.
    durable: Zxid,
    /// ACKed up to here (NEWLEADER's ACK covers the sync).
    acked: Zxid,
    /// The last zxid of the sync, which NEWLEADER's ACK acknowledges.
    sync_point: Zxid,
    /// The leader committed everything up to here.
    commit_to: Zxid,
    /// The tree holds everything up to here.
    delivered: Zxid,
    /// Logged txns not yet delivered.
    pending: BTreeMap<Zxid, Bytes>,
    /// The newest COMMIT that carried the leader's digest, checked once
    /// the tree reaches its zxid.
    digest_to_check: Option<(Zxid, u64)>,
    /// Our tree diverged from a leader's: the sync must be a SNAP.
    wants_snapshot: bool,
    /// An observer: no vote, INFORM instead of PROPOSAL and COMMIT.
    observer: bool,
    last_heard_ms: u64,
    commands: VecDeque<ZabCommand>,
}

impl Follower {
    /// A member that elected `leader`, with what it has on disk; its tree
    /// holds everything up to `tree_zxid`. Sends FOLLOWERINFO, or
    /// OBSERVERINFO as an `observer`.
    pub fn new(
        leader: ServerId,
        timing: Timing,
        state: DurableState,
        tree_zxid: Zxid,
        now_ms: u64,
        observer: bool,
    ) -> Follower {
        let last = state.history.last_zxid();
        assert!(
            tree_zxid >= state.history.base(),
            "the tree must hold at least the history before the window"
        );
        // Logged in an earlier role but never applied: once the sync shows
        // they are in the leader's history, they are committed and delivered.
        let pending: BTreeMap<Zxid, Bytes> = state.history.after(tree_zxid).cloned().collect();
        let mut follower = Follower {
            leader,
            timing,
            phase: Phase::AwaitingLeaderInfo,
            last_logged: last,
            durable: last,
            acked: Zxid::ZERO,
            sync_point: last,
            commit_to: Zxid::ZERO,
            delivered: tree_zxid,
            pending,
            digest_to_check: None,
            wants_snapshot: false,
            observer,
            last_heard_ms: now_ms,
            commands: VecDeque::new(),
            state,
        };
        let accepted_epoch = follower.state.accepted_epoch;
        follower.send(match observer {
            true => ZabMessage::ObserverInfo { accepted_epoch },
            false => ZabMessage::FollowerInfo { accepted_epoch },
        });
        follower
    }

    /// This member's tree diverged from a leader's (found by a digest or a
    /// failed apply): it asks the leader for a SNAP.
    pub fn asking_for_snapshot(mut self) -> Follower {
        self.wants_snapshot = true;
        self
    }

    /// The leader's link carried something the role does not see yet (a
    /// piece of a SNAP, a message held during a reload): the leader is not
    /// silent. ZooKeeper's learner times out per read, not per sync.
    pub fn heard_from_leader(&mut self, now_ms: u64) {
        if active(Failpoint::SyncTimedWhole) {
            return;
        }
        self.last_heard_ms = self.last_heard_ms.max(now_ms);
    }

    /// A message from the leader (anyone else is disconnected).
    pub fn handle_message(&mut self, now_ms: u64, from: ServerId, message: ZabMessage) {
        if self.phase == Phase::Done {
            return;
        }
        if from != self.leader {
            return self
                .commands
                .push_back(ZabCommand::Disconnect { peer: from });
        }
        self.last_heard_ms = now_ms;
        match (message, self.phase) {
            (ZabMessage::LeaderInfo { epoch }, Phase::AwaitingLeaderInfo) => {
                self.leader_info(epoch)
            }
            (ZabMessage::Diff { .. }, Phase::AwaitingSync(e)) => self.phase = Phase::Syncing(e),
            (ZabMessage::Trunc { zxid }, Phase::AwaitingSync(e)) => self.truncate(e, zxid),
            (
                ZabMessage::Snap {
                    zxid,
                    image,
                    fuzzy_through,
                },
                Phase::AwaitingSync(e),
            ) => self.install_snapshot(e, zxid, image, fuzzy_through),
            (ZabMessage::Proposal { zxid, txn }, phase) if self.receiving(phase) => {
                self.proposal(zxid, txn)
            }
            (ZabMessage::Commit { zxid, digest }, phase) if self.receiving(phase) => {
                self.commit(zxid, digest)
            }
            (ZabMessage::Inform { zxid, txn }, phase) if self.observer && self.receiving(phase) => {
                self.proposal(zxid, txn);
                self.commit(zxid, None);
            }
            // A reconfig's commit: its configuration takes effect as the
            // txn applies, and the member elects again if its leader or
            // its own role changed (so the designated leader needs no check).
            (ZabMessage::CommitAndActivate { zxid, digest, .. }, phase)
                if !self.observer && self.receiving(phase) =>
            {
                self.commit(zxid, digest)
            }
            (ZabMessage::InformAndActivate { zxid, txn, .. }, phase)
                if self.observer && self.receiving(phase) =>
            {
                self.proposal(zxid, txn);
                self.commit(zxid, None);
            }
            (ZabMessage::NewLeader { epoch, .. }, Phase::Syncing(e)) if epoch == e => {
                self.new_leader(e)
            }
            (ZabMessage::UpToDate, Phase::AwaitingUpToDate(e)) => {
                tracing::info!(epoch = e, leader = %self.leader, "follower up to date");
                self.phase = Phase::Broadcast(e);
                self.commands.push_back(ZabCommand::Serving);
            }
            // The member adds its clients' session touches on the way out.
            (ZabMessage::Ping { .. }, _) => self.send(ZabMessage::Ping {
                zxid: self.last_logged,
                touches: Vec::new(),
            }),
            (message, phase) => self.abandon(format!(
                "unexpected {message:?} from the leader while {phase:?}"
            )),
        }
    }

    /// The storage thread reached barrier `token`.
    pub fn handle_reached(&mut self, token: u64) {
        match (token, self.phase) {
            (TOKEN_ACCEPTED_EPOCH, Phase::PersistingAcceptedEpoch(e)) => {
                self.state.accepted_epoch = e;
                self.phase = Phase::AwaitingSync(e);
                self.send(ZabMessage::AckEpoch {
                    current_epoch: Some(self.state.current_epoch),
                    last_zxid: self.last_logged,
                    log_base: self.state.log_base,
                    wants_snapshot: self.wants_snapshot,
                });
            }
            (TOKEN_NEW_LEADER, Phase::PersistingNewLeader(e)) => {
                // The sync is durable, and currentEpoch after it.
                self.state.current_epoch = e;
                // Exactly the sync is durable now: reports of appends made
                // before a truncation all came before this barrier.
                self.durable = self.sync_point;
                self.acked = self.sync_point;
                self.phase = Phase::AwaitingUpToDate(e);
                self.send(ZabMessage::Ack {
                    zxid: epoch_zxid(e),
                });
                self.deliver_committed();
                self.ack_durable();
            }
            _ => {}
        }
    }

    /// Our log is durable up to `zxid`.
    pub fn handle_persisted(&mut self, zxid: Zxid) {
        self.durable = self.durable.max(zxid);
        self.ack_durable();
    }

    /// A silent leader ends the role.
    pub fn handle_timeout(&mut self, now_ms: u64) {
        if self.phase == Phase::Done {
            return;
        }
        if now_ms.saturating_sub(self.last_heard_ms) > self.silence_limit_ms() {
            self.abandon("the leader went silent".into());
        }
    }

    /// When `handle_timeout` next has work.
    pub fn poll_timeout(&self) -> Option<u64> {
        if self.phase == Phase::Done {
            return None;
        }
        Some(self.last_heard_ms + self.silence_limit_ms() + 1)
    }

    /// The link to the leader broke, or it closed our handshake. A
    /// leader-elect holds a handshake until it leads, and only a member that
    /// is not leading closes one, so there is nothing to try again (as
    /// ZooKeeper's learner does five times, a second apart): the election
    /// finds the leader at once (issue 35, finding 13: a joiner that chose a
    /// follower waited 8 s).
    /// Whether it sent FOLLOWERINFO and heard no LEADERINFO yet.
    pub fn awaiting_leader_info(&self) -> bool {
        self.phase == Phase::AwaitingLeaderInfo
    }

    /// The link to the leader closed.
    pub fn leader_disconnected(&mut self) {
        if self.phase != Phase::Done {
            self.abandon("lost the connection to the leader".into());
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

    /// The leader followed.
    pub fn leader(&self) -> ServerId {
        self.leader
    }

    /// Our currentEpoch: after UPTODATE, the epoch of the leader we serve under.
    pub fn current_epoch(&self) -> Epoch {
        self.state.current_epoch
    }

    /// Whether this is an observer.
    pub fn is_observer(&self) -> bool {
        self.observer
    }

    /// Whether the follower serves clients.
    pub fn is_serving(&self) -> bool {
        matches!(self.phase, Phase::Broadcast(_))
    }

    /// The Zab phase, as ZooKeeper's follower names it: discovery until it
    /// acked the leader's epoch, synchronization until UPTODATE.
    pub fn zab_state(&self) -> super::ZabState {
        use super::ZabState;
        match self.phase {
            Phase::AwaitingLeaderInfo | Phase::PersistingAcceptedEpoch(_) => ZabState::Discovery,
            Phase::AwaitingSync(_)
            | Phase::Syncing(_)
            | Phase::PersistingNewLeader(_)
            | Phase::AwaitingUpToDate(_) => ZabState::Synchronization,
            Phase::Broadcast(_) => ZabState::Broadcast,
            Phase::Done => ZabState::Election,
        }
    }

    fn silence_limit_ms(&self) -> u64 {
        match self.phase {
            Phase::AwaitingUpToDate(_) | Phase::Broadcast(_) => self.timing.sync_ms(),
            _ => self.timing.init_ms(),
        }
    }

    fn receiving(&self, phase: Phase) -> bool {
        matches!(
            phase,
            Phase::Syncing(_)
                | Phase::PersistingNewLeader(_)
                | Phase::AwaitingUpToDate(_)
                | Phase::Broadcast(_)
        )
    }

    fn leader_info(&mut self, epoch: Epoch) {
        let accepted = self.state.accepted_epoch;
        if epoch < accepted {
            return self.abandon(format!(
                "leader proposed epoch {epoch} below our accepted {accepted}"
            ));
        }
        if epoch == accepted {
            // ZooKeeper's -1: no epoch ack, but the leader learns our last zxid.
            self.phase = Phase::AwaitingSync(epoch);
            return self.send(ZabMessage::AckEpoch {
                current_epoch: None,
                last_zxid: self.last_logged,
                log_base: self.state.log_base,
                wants_snapshot: self.wants_snapshot,
            });
        }
        self.phase = Phase::PersistingAcceptedEpoch(epoch);
        self.storage(StorageOp::SetAcceptedEpoch(epoch));
        self.storage(StorageOp::Barrier(TOKEN_ACCEPTED_EPOCH));
    }

    /// TRUNC: our txns after `zxid` were never committed. The tree is rebuilt
    /// from what is left, so it holds none of them.
    fn truncate(&mut self, epoch: Epoch, zxid: Zxid) {
        tracing::info!(to = %zxid, from = %self.last_logged, "follower: truncating its log");
        self.storage(StorageOp::TruncateAndReload { after: zxid });
        self.state.history.truncate_after(zxid);
        // The reloaded tree holds the whole remaining log: nothing of it is pending.
        self.pending.clear();
        self.last_logged = zxid;
        self.durable = self.durable.min(zxid);
        self.delivered = zxid;
        self.phase = Phase::Syncing(epoch);
    }

    /// SNAP: the leader's tree replaces ours, and our log goes with it.
    fn install_snapshot(
        &mut self,
        epoch: Epoch,
        zxid: Zxid,
        image: SnapshotSource,
        fuzzy_through: Zxid,
    ) {
        tracing::info!(%zxid, %fuzzy_through, "follower: installing the leader's snapshot");
        self.storage(StorageOp::InstallSnapshot {
            zxid,
            image,
            fuzzy_through,
        });
        self.state.history.reset(zxid);
        self.state.log_base = zxid;
        self.pending.clear();
        self.last_logged = zxid;
        self.durable = zxid;
        self.delivered = zxid;
        self.commit_to = self.commit_to.max(zxid);
        self.phase = Phase::Syncing(epoch);
    }

    fn proposal(&mut self, zxid: Zxid, txn: Bytes) {
        // Proposals come in zxid order; a new epoch starts its own count.
        let in_order = zxid > self.last_logged
            && (zxid == self.last_logged.next() || zxid.epoch() > self.last_logged.epoch());
        if !in_order {
            return self.abandon(format!(
                "proposal {zxid} out of order after {}",
                self.last_logged
            ));
        }
        self.storage(StorageOp::Append {
            zxid,
            txn: txn.clone(),
        });
        self.state.history.push(zxid, txn.clone());
        self.pending.insert(zxid, txn);
        self.last_logged = zxid;
        if active(Failpoint::AckBeforeFsync) {
            // Planted: "handed to the log" taken for "durable", so the ACK
            // goes out before the fsync a power loss would need.
            self.handle_persisted(zxid);
        }
    }

    fn commit(&mut self, zxid: Zxid, digest: Option<u64>) {
        if zxid > self.last_logged {
            // ZooKeeper's messageLegal: a COMMIT for a txn we were never sent.
            return self.abandon(format!("commit {zxid} beyond our log {}", self.last_logged));
        }
        self.commit_to = self.commit_to.max(zxid);
        if let Some(digest) = digest {
            self.digest_to_check = Some((zxid, digest));
        }
        if !matches!(
            self.phase,
            Phase::Syncing(_) | Phase::PersistingNewLeader(_)
        ) {
            self.deliver_committed();
        }
    }

    /// NEWLEADER: everything of the sync becomes durable, then currentEpoch,
    /// and only then the ACK.
    fn new_leader(&mut self, epoch: Epoch) {
        self.sync_point = self.last_logged;
        self.phase = Phase::PersistingNewLeader(epoch);
        self.storage(StorageOp::SetCurrentEpoch(epoch));
        self.storage(StorageOp::Barrier(TOKEN_NEW_LEADER));
    }

    fn deliver_committed(&mut self) {
        while let Some(entry) = self.pending.first_entry() {
            let zxid = *entry.key();
            if zxid > self.commit_to {
                break;
            }
            let txn = entry.remove();
            if zxid > self.delivered {
                self.delivered = zxid;
                let digest = (self.digest_to_check)
                    .filter(|(at, _)| *at == zxid)
                    .map(|(_, digest)| digest);
                self.commands
                    .push_back(ZabCommand::Deliver { zxid, txn, digest });
            }
        }
        // Compared with its txn, or passed by (a later commit came first).
        if self
            .digest_to_check
            .is_some_and(|(at, _)| at <= self.delivered)
        {
            self.digest_to_check = None;
        }
    }

    /// ACKs what is durable beyond what NEWLEADER's ACK covered, once that
    /// was sent; an observer acknowledges nothing more.
    fn ack_durable(&mut self) {
        let acking = !self.observer
            && matches!(self.phase, Phase::AwaitingUpToDate(_) | Phase::Broadcast(_));
        let upto = self.durable.min(self.last_logged);
        if acking && upto > self.acked {
            self.acked = upto;
            self.send(ZabMessage::Ack { zxid: upto });
        }
    }

    fn abandon(&mut self, reason: String) {
        tracing::warn!(leader = %self.leader, %reason, "follower going back to election");
        self.phase = Phase::Done;
        self.commands
            .push_back(ZabCommand::Disconnect { peer: self.leader });
        self.commands.push_back(ZabCommand::Abandon { reason });
    }

    fn storage(&mut self, op: StorageOp) {
        self.commands.push_back(ZabCommand::Storage(op));
    }

    fn send(&mut self, message: ZabMessage) {
        self.commands.push_back(ZabCommand::Send {
            to: self.leader,
            message,
        });
    }
}
