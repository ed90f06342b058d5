//! What a leader knows of one follower (ZooKeeper's `LearnerHandler`).

use super::Epoch;
use crate::core::election::ServerId;
use zkd_protocol::Zxid;

/// Where a follower is in discovery and sync, as the leader sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HandlerPhase {
    /// Sent FOLLOWERINFO; waits for LEADERINFO, then answers ACKEPOCH.
    Discovery,
    /// Answered ACKEPOCH; its sync waits for a quorum of epoch acks.
    AwaitingSync,
    /// Its sync and NEWLEADER are sent; live proposals flow to it too.
    Syncing,
    /// Acknowledged NEWLEADER: it counts towards quorums.
    Synced,
}

/// One follower connected to the leader.
#[derive(Clone, Debug)]
pub struct LearnerHandler {
    /// The follower.
    pub sid: ServerId,
    pub phase: HandlerPhase,
    /// Its acceptedEpoch, from FOLLOWERINFO.
    pub accepted_epoch: Epoch,
    /// Its currentEpoch from ACKEPOCH (None: it had already accepted the
    /// epoch, ZooKeeper's -1), and its last logged zxid.
    pub summary: Option<(Option<Epoch>, Zxid)>,
    /// The lowest zxid its history can be truncated to.
    pub log_base: Zxid,
    /// It found its tree diverged and asks for a SNAP.
    pub wants_snapshot: bool,
    /// The last zxid sent before NEWLEADER: acknowledging NEWLEADER
    /// acknowledges every proposal up to here.
    pub sync_point: Zxid,
    /// Every proposal up to here is durable on the follower.
    pub acked: Zxid,
    /// Since when proposals sent to it wait for an ack that moves `acked`
    /// (None: nothing outstanding, or it just acknowledged).
    pub acks_awaited_since_ms: Option<u64>,
    /// When it was last heard from.
    pub last_heard_ms: u64,
    /// Every proposal up to here was queued for it: its send cursor.
    pub sent: Zxid,
    /// The last COMMIT queued for it (never past `sent`).
    pub commit_sent: Zxid,
    /// Live proposals are queued for it as they are made; otherwise it
    /// catches up from `sent`, a batch at a time, as its link drains.
    pub live: bool,
    /// Its link is over the high mark: nothing more is queued until it drains.
    pub paused: bool,
    /// A read of the leader's log for it is under way.
    pub reading: bool,
    /// An observer: it is sent committed txns only (INFORM), its acks count
    /// for nothing, and its cursors never pass the last commit.
    pub observer: bool,
}

impl LearnerHandler {
    /// A follower that just sent FOLLOWERINFO (an observer, OBSERVERINFO).
    pub fn new(
        sid: ServerId,
        accepted_epoch: Epoch,
        now_ms: u64,
        observer: bool,
    ) -> LearnerHandler {
        LearnerHandler {
            sid,
            phase: HandlerPhase::Discovery,
            accepted_epoch,
            summary: None,
            log_base: Zxid::ZERO,
            wants_snapshot: false,
            sync_point: Zxid::ZERO,
            acked: Zxid::ZERO,
            acks_awaited_since_ms: None,
            last_heard_ms: now_ms,
            sent: Zxid::ZERO,
            commit_sent: Zxid::ZERO,
            live: false,
            paused: false,
            reading: false,
            observer,
        }
    }

    /// Whether live proposals and commits go to it.
    pub fn is_forwarding(&self) -> bool {
        matches!(self.phase, HandlerPhase::Syncing | HandlerPhase::Synced)
    }
}
