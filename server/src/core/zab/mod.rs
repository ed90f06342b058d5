//! Zab as pure state machines: a [`Leader`] (with a [`LearnerHandler`] per
//! follower) and a [`Follower`], as ZooKeeper implements the protocol.
//!
//! ```text
//!  follower                         leader
//!  FOLLOWERINFO(acceptedEpoch) ───▶ quorum connected: epoch = max + 1, persist acceptedEpoch
//!  persist acceptedEpoch ◀──────── LEADERINFO(epoch)
//!  ACKEPOCH(currentEpoch, last) ──▶ quorum acked: persist currentEpoch
//!  truncate / install snapshot ◀── DIFF | TRUNC | SNAP, PROPOSAL+COMMIT.., PROPOSAL.., NEWLEADER
//!  log durable, then currentEpoch,
//!  ACK(NEWLEADER) ────────────────▶ quorum acked: established, UPTODATE to each
//!  serve ◀──────────────────────── UPTODATE
//!  log, fsync, ACK(z) ────────────▶ quorum acked z: COMMIT(z) to all, deliver z
//! ```
//!
//! Events in: peer messages, "durable up to zxid", "storage barrier reached",
//! the time. Commands out: messages to send, storage operations (strictly
//! ordered by the storage thread), committed txns to deliver in zxid order,
//! and the end of the role. ACKs and COMMITs are cumulative: ACK(z) says
//! every proposal up to z is durable, COMMIT(z) that every one up to z is
//! committed, so both batch naturally.

mod follower;
mod history;
mod leader;
mod learner_handler;

pub use follower::Follower;
pub use history::{History, SyncPlan};
pub use leader::Leader;
pub use learner_handler::{HandlerPhase, LearnerHandler};

use super::election::ServerId;
use bytes::Bytes;
use std::collections::{BTreeMap, BTreeSet};
use zkd_protocol::Zxid;
pub use zkd_storage::store::SnapshotSource;

/// A Zab epoch (the high 32 bits of a zxid).
pub type Epoch = u32;

/// What members send each other on the quorum port, one for one with
/// ZooKeeper's QuorumPacket types.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ZabMessage {
    /// FOLLOWERINFO: a follower connects, with its acceptedEpoch.
    FollowerInfo { accepted_epoch: Epoch },
    /// OBSERVERINFO: an observer connects, with its acceptedEpoch.
    ObserverInfo { accepted_epoch: Epoch },
    /// LEADERINFO: the epoch the leader proposes.
    LeaderInfo { epoch: Epoch },
    /// ACKEPOCH: the follower's currentEpoch (None if it had already
    /// accepted this epoch, ZooKeeper's -1), its last logged zxid, and the
    /// lowest point its history can be cut back to (its oldest snapshot at
    /// or above its purge mark): below that the leader sends a SNAP instead.
    /// ZooKeeper lacks this and can TRUNC into a dirty snapshot
    /// (ZOOKEEPER-1549) or into a purged range.
    AckEpoch {
        current_epoch: Option<Epoch>,
        last_zxid: Zxid,
        log_base: Zxid,
        /// It found its tree diverged: a SNAP, whatever the zxids say.
        wants_snapshot: bool,
    },
    /// DIFF: the follower's log is a prefix of the leader's.
    Diff { zxid: Zxid },
    /// TRUNC: drop every txn after `zxid`.
    Trunc { zxid: Zxid },
    /// SNAP: replace everything with this image of the tree as of `zxid`.
    /// The image is fuzzy: txns up to `fuzzy_through` were applied while it
    /// was written, so some may be in it already (replaying them is harmless).
    /// The runtime streams the image in and hands the role a staged one.
    Snap {
        zxid: Zxid,
        image: SnapshotSource,
        fuzzy_through: Zxid,
    },
    /// PROPOSAL: a txn to log.
    Proposal { zxid: Zxid, txn: Bytes },
    /// COMMIT: every proposal up to `zxid` is committed. The leader's member
    /// adds its tree's digest right after `zxid` when it sends one; a follower
    /// whose tree differs there has diverged (ZOOKEEPER-2846).
    Commit { zxid: Zxid, digest: Option<u64> },
    /// INFORM: a committed txn, to an observer (which sees no proposals).
    Inform { zxid: Zxid, txn: Bytes },
    /// COMMITANDACTIVATE: as COMMIT, up to a reconfig txn, whose
    /// configuration takes effect with `designated` leading it.
    CommitAndActivate {
        zxid: Zxid,
        designated: ServerId,
        digest: Option<u64>,
    },
    /// INFORMANDACTIVATE: as INFORM, of a reconfig txn, to an observer.
    InformAndActivate {
        zxid: Zxid,
        designated: ServerId,
        txn: Bytes,
    },
    /// NEWLEADER: the end of the sync for `epoch`, with the ensemble
    /// configuration the leader establishes (its text, `version=` last;
    /// empty without reconfig). The leader's member adds it on the way out.
    NewLeader { epoch: Epoch, config: Bytes },
    /// UPTODATE: the leader is established; start serving.
    UpToDate,
    /// ACK: every proposal up to `zxid` (or NEWLEADER, at `epoch << 32`) is durable.
    Ack { zxid: Zxid },
    /// PING: a heartbeat, both ways. A follower's carries the sessions its
    /// clients touched since its last one, with their timeouts.
    Ping {
        zxid: Zxid,
        touches: Vec<SessionTouch>,
    },
    /// REQUEST: a client write (or sync) a follower forwards to the leader,
    /// with the identities of the client's connection.
    Request(ForwardedRequest),
    /// REVALIDATE: may this session attach here (a client moved to a follower)?
    Revalidate { session: i64, timeout_ms: i32 },
    /// The leader's answer to REVALIDATE.
    RevalidateReply { session: i64, valid: bool },
}

impl ZabMessage {
    /// FOLLOWERINFO or OBSERVERINFO: a learner's handshake, which opens a link.
    pub fn is_learner_info(&self) -> bool {
        matches!(
            self,
            ZabMessage::FollowerInfo { .. } | ZabMessage::ObserverInfo { .. }
        )
    }
}

/// A session a follower's client touched, as a PING carries it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SessionTouch {
    pub session: i64,
    pub timeout_ms: i32,
}

/// A client request as a follower forwards it: ZooKeeper's REQUEST packet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ForwardedRequest {
    /// The client's session.
    pub session: i64,
    /// The request's xid, which the follower matches the committed txn by.
    pub cxid: i32,
    /// The opcode.
    pub op_type: i32,
    /// The request body as the client sent it (after the RequestHeader).
    pub body: Bytes,
    /// The connection's identities (scheme, id), checked against ACLs by the leader.
    pub auth: Vec<(String, String)>,
}

/// A storage operation. The storage thread runs them strictly in order and
/// syncs queued appends before any other kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StorageOp {
    /// Append a txn; durable once `Persisted` reports its zxid.
    Append { zxid: Zxid, txn: Bytes },
    /// Drop every logged txn after `zxid`, and snapshots past it; then
    /// rebuild the tree from what is left (reported as `Reloaded`).
    TruncateAndReload { after: Zxid },
    /// Drop the whole log and every snapshot, then store this image; then
    /// rebuild the tree from it. Txns up to `fuzzy_through` may already be
    /// in the image (a fuzzy snapshot).
    InstallSnapshot {
        zxid: Zxid,
        image: SnapshotSource,
        fuzzy_through: Zxid,
    },
    /// Persist acceptedEpoch.
    SetAcceptedEpoch(Epoch),
    /// Persist currentEpoch.
    SetCurrentEpoch(Epoch),
    /// Report `Reached(token)` once everything before it is durable.
    Barrier(u64),
}

/// What a Zab role asks its member to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ZabCommand {
    /// Send a message to a peer.
    Send { to: ServerId, message: ZabMessage },
    /// Hand an operation to the storage thread.
    Storage(StorageOp),
    /// Apply a committed txn to the tree; delivered in zxid order. `digest`:
    /// the leader's tree digest right after it, when a COMMIT carried one
    /// (a follower's tree that differs there diverged).
    Deliver {
        zxid: Zxid,
        txn: Bytes,
        digest: Option<u64>,
    },
    /// Leader: send `to` a SNAP of the tree as it is now (it holds every
    /// committed txn and nothing else), and hold the messages that follow
    /// for `to` until the whole image has gone out.
    SendSnapshot { to: ServerId },
    /// Leader: read from the log, for `to`, the txns after `after` (about
    /// `max_bytes` of them), and hand them to [`Leader::logged_for`]: a
    /// follower that fell behind the in-memory window catches up from disk.
    ReadLog {
        to: ServerId,
        after: Zxid,
        max_bytes: usize,
    },
    /// Close the link to a peer.
    Disconnect { peer: ServerId },
    /// Leader: the followers synced with it, itself, and the servers
    /// outside its configuration asking to learn, since they changed (a
    /// reconfig needs a quorum of its configuration among them; a joiner
    /// syncs once the proposal names it).
    Synced(Vec<ServerId>),
    /// The role can serve clients: a leader is established, a follower up to date.
    Serving,
    /// The role is over: back to election.
    Abandon { reason: String },
}

/// Timing, in milliseconds and ticks, as ZooKeeper's tickTime, initLimit, syncLimit.
#[derive(Clone, Copy, Debug)]
pub struct Timing {
    pub tick_ms: u64,
    pub init_limit: u64,
    pub sync_limit: u64,
}

impl Timing {
    /// How long discovery and sync may take.
    pub fn init_ms(&self) -> u64 {
        self.tick_ms * self.init_limit
    }

    /// How long a synced peer may stay silent.
    pub fn sync_ms(&self) -> u64 {
        self.tick_ms * self.sync_limit
    }

    /// How often a leader pings: every half tick, as ZooKeeper's does.
    pub fn ping_ms(&self) -> u64 {
        (self.tick_ms / 2).max(1)
    }
}

/// When a leader stops queueing live proposals for a follower and when it
/// starts again: bytes waiting on the follower's link (its queue, and what
/// waits behind a SNAP streaming to it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowMarks {
    /// Past this, the follower's proposals wait in the leader's log.
    pub high: usize,
    /// Below this, a waiting follower is sent the next `batch` bytes of them.
    pub low: usize,
    /// Bytes of txns sent per step of a catch-up.
    pub batch: usize,
}

impl FlowMarks {
    /// The runtime's: well under a link's 256 MiB bound, and batches the
    /// size of a storage read that does not hold the log's appends up long.
    pub const RUNTIME: FlowMarks = FlowMarks {
        high: 32 << 20,
        low: 8 << 20,
        batch: 4 << 20,
    };
}

/// What a member has durably: its epochs and its log, as recovered.
#[derive(Clone, Debug)]
pub struct DurableState {
    pub accepted_epoch: Epoch,
    pub current_epoch: Epoch,
    pub history: History,
    /// The lowest zxid the history can be truncated to (`store::lowest_cut`).
    pub log_base: Zxid,
}

/// The ensemble's members by role, as ZooKeeper's `QuorumVerifier` holds
/// them: voters make quorums by the majority rule (`QuorumMaj`), observers
/// follow the leader without a vote.
#[derive(Clone, Debug, Default)]
pub struct Members {
    pub voters: BTreeSet<ServerId>,
    pub observers: BTreeSet<ServerId>,
}

impl Members {
    /// An ensemble of voters only.
    pub fn voting(voters: impl IntoIterator<Item = ServerId>) -> Members {
        Members {
            voters: voters.into_iter().collect(),
            observers: BTreeSet::new(),
        }
    }

    /// The members of a configuration's server lines, by role.
    pub fn of(servers: &BTreeMap<u64, crate::core::ServerSpec>) -> Members {
        let (observers, voters) = (servers.iter())
            .map(|(id, s)| (ServerId(*id), s.observer))
            .partition::<Vec<_>, _>(|(_, observer)| *observer);
        let ids = |v: Vec<(ServerId, bool)>| v.into_iter().map(|(id, _)| id).collect();
        Members {
            voters: ids(voters),
            observers: ids(observers),
        }
    }

    /// Whether `members` holds more than half of the voters. Each voter
    /// counts once however often it is listed, and no set is built: this
    /// runs at every ACK.
    pub fn is_quorum<'a, M>(&self, members: M) -> bool
    where
        M: IntoIterator<Item = &'a ServerId>,
        M::IntoIter: Clone,
    {
        let members = members.into_iter();
        let n = (self.voters.iter())
            .filter(|v| members.clone().any(|m| m == *v))
            .count();
        n > self.voters.len() / 2
    }

    /// Whether `id` votes.
    pub fn is_voter(&self, id: ServerId) -> bool {
        self.voters.contains(&id)
    }

    /// Whether `id` observes.
    pub fn is_observer(&self, id: ServerId) -> bool {
        self.observers.contains(&id)
    }

    /// Whether `id` is a member in either role.
    pub fn contains(&self, id: ServerId) -> bool {
        self.is_voter(id) || self.is_observer(id)
    }

    /// Every member, voters first.
    pub fn all(&self) -> impl Iterator<Item = ServerId> + '_ {
        self.voters.iter().chain(&self.observers).copied()
    }
}

/// A reconfig logged and not known to be committed (ZooKeeper's last seen
/// configuration): its zxid and the members of its configuration.
#[derive(Clone, Debug)]
pub struct NextConfig {
    pub zxid: Zxid,
    pub members: Members,
}

/// Where a member is in Zab, as ZooKeeper's `QuorumPeer.ZabState` names
/// it (the AdminServer's `zabstate`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ZabState {
    Election,
    Discovery,
    Synchronization,
    Broadcast,
}

impl ZabState {
    /// The name ZooKeeper's AdminServer shows.
    pub fn name(self) -> &'static str {
        match self {
            ZabState::Election => "election",
            ZabState::Discovery => "discovery",
            ZabState::Synchronization => "synchronization",
            ZabState::Broadcast => "broadcast",
        }
    }
}

/// The zxid of NEWLEADER and of its ACK: the epoch with counter 0.
pub fn epoch_zxid(epoch: Epoch) -> Zxid {
    Zxid::new(epoch, 0)
}

#[cfg(test)]
mod tests;
