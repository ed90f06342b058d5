//! What a member asks of the world outside it, as commands its driver
//! carries out in order: messages to its peers, its quorum links opened and
//! closed, how it takes learners, and jobs for its storage thread. The
//! driver also tells the member how full each quorum link is, so a leader
//! paces SNAPs and live proposals to what each follower reads without
//! asking the network in the middle of a step.

use crate::core::election::{Notification, ServerId};
use crate::core::peer_event::LearnerIntake;
use crate::core::storage_job::StorageJob;
use crate::core::zab::{FlowMarks, ZabMessage};
use crate::core::ServerSpec;
use bytes::Bytes;
use std::collections::{BTreeMap, VecDeque};
use zkd_protocol::Zxid;

/// Bytes a message other than a txn is counted as on a link.
const SMALL_MESSAGE: usize = 64;

/// One thing a member asks of its driver.
#[derive(Debug)]
pub enum MemberCommand {
    /// Queue an election notification for `to`.
    Notify {
        to: ServerId,
        notification: Notification,
    },
    /// Follower: open a fresh quorum link to this leader (an older one closes).
    ConnectZab(ServerId),
    /// Queue a Zab message on the quorum link with `to`, if there is one.
    SendZab { to: ServerId, message: ZabMessage },
    /// A SNAP of the image as of `zxid` starts streaming to `to`.
    SnapStart { to: ServerId, zxid: Zxid },
    /// The next piece of the SNAP to `to`; the last carries `fuzzy_through`.
    SnapChunk {
        to: ServerId,
        offset: u64,
        data: Bytes,
        fuzzy_through: Option<Zxid>,
    },
    /// Take, hold or refuse learners' connections from now on.
    LearnerIntake(LearnerIntake),
    /// Close the quorum link with this peer, if any.
    CloseZab(ServerId),
    /// A reconfig this member leads proposes these servers: their links
    /// are admitted from now on, at the addresses given (a joiner syncs
    /// before the proposal commits).
    LearnServers(BTreeMap<u64, ServerSpec>),
    /// Close every quorum link.
    CloseAllZab,
    /// Queue a job for the storage thread (run in the order submitted).
    Storage(StorageJob),
}

/// How much a member's quorum links may hold, which its driver sets.
#[derive(Clone, Copy, Debug)]
pub struct LinkLimits {
    /// Bytes a quorum link may queue before it closes; what waits behind a
    /// SNAP is held to the same bound.
    pub max_queued: usize,
    /// When a leader stops queueing live proposals for a follower, and
    /// starts again (well below `max_queued`).
    pub flow: FlowMarks,
}

/// The member's commands in the order made, and its view of its links:
/// how full each was when the driver last looked, plus what the member
/// queued on it since (a link drains meanwhile, so this errs on the full
/// side).
pub(crate) struct Outbox {
    commands: VecDeque<MemberCommand>,
    limits: LinkLimits,
    /// Bytes queued on each quorum link that is up.
    queued: BTreeMap<ServerId, usize>,
    /// When the driver last said how full the links are.
    looked_ms: Option<u64>,
}

impl Outbox {
    pub fn new(limits: LinkLimits) -> Outbox {
        Outbox {
            commands: VecDeque::new(),
            limits,
            queued: BTreeMap::new(),
            looked_ms: None,
        }
    }

    /// Moves the commands made so far to the end of `into`.
    pub fn take(&mut self, into: &mut VecDeque<MemberCommand>) {
        if into.is_empty() {
            std::mem::swap(into, &mut self.commands);
        } else {
            into.append(&mut self.commands);
        }
    }

    /// Whether the driver's look at the links is older than `now_ms`.
    pub fn levels_stale(&self, now_ms: u64) -> bool {
        self.looked_ms != Some(now_ms)
    }

    /// What the driver saw at `now_ms`: the bytes queued on each link to
    /// `peers` that is up.
    pub fn set_levels(
        &mut self,
        now_ms: u64,
        peers: impl Iterator<Item = ServerId>,
        mut level: impl FnMut(ServerId) -> Option<usize>,
    ) {
        self.looked_ms = Some(now_ms);
        self.queued.clear();
        for peer in peers {
            if let Some(bytes) = level(peer) {
                self.queued.insert(peer, bytes);
            }
        }
    }

    /// A message came on the live link with `peer` (the driver drops those
    /// of closed links), so that link is up even if it opened since the
    /// driver last looked.
    pub fn link_up(&mut self, peer: ServerId) {
        self.queued.entry(peer).or_insert(0);
    }

    /// The link with `peer` closed.
    pub fn link_down(&mut self, peer: ServerId) {
        self.queued.remove(&peer);
    }

    /// Bytes queued for `to` and not yet written; None without a link.
    pub fn queued_bytes(&self, to: ServerId) -> Option<usize> {
        self.queued.get(&to).copied()
    }

    /// Bytes a quorum link may queue before it closes.
    pub fn max_queued_bytes(&self) -> usize {
        self.limits.max_queued
    }

    /// The leader's flow marks.
    pub fn flow_marks(&self) -> FlowMarks {
        self.limits.flow
    }

    pub fn send_notification(&mut self, to: ServerId, notification: Notification) {
        self.commands
            .push_back(MemberCommand::Notify { to, notification });
    }

    pub fn connect_zab(&mut self, leader: ServerId) {
        self.queued.insert(leader, 0);
        self.commands.push_back(MemberCommand::ConnectZab(leader));
    }

    pub fn send_zab(&mut self, to: ServerId, message: ZabMessage) {
        self.count(to, weight(&message));
        self.commands
            .push_back(MemberCommand::SendZab { to, message });
    }

    pub fn send_snap_start(&mut self, to: ServerId, zxid: Zxid) {
        self.commands
            .push_back(MemberCommand::SnapStart { to, zxid });
    }

    pub fn send_snap_chunk(
        &mut self,
        to: ServerId,
        offset: u64,
        data: Bytes,
        fuzzy_through: Option<Zxid>,
    ) {
        self.count(to, data.len());
        self.commands.push_back(MemberCommand::SnapChunk {
            to,
            offset,
            data,
            fuzzy_through,
        });
    }

    pub fn set_learner_intake(&mut self, intake: LearnerIntake) {
        self.commands
            .push_back(MemberCommand::LearnerIntake(intake));
    }

    pub fn learn_servers(&mut self, servers: BTreeMap<u64, ServerSpec>) {
        self.commands
            .push_back(MemberCommand::LearnServers(servers));
    }

    pub fn close_zab(&mut self, peer: ServerId) {
        self.link_down(peer);
        self.commands.push_back(MemberCommand::CloseZab(peer));
    }

    pub fn close_all_zab(&mut self) {
        self.queued.clear();
        self.commands.push_back(MemberCommand::CloseAllZab);
    }

    pub fn submit(&mut self, job: StorageJob) {
        self.commands.push_back(MemberCommand::Storage(job));
    }

    fn count(&mut self, to: ServerId, bytes: usize) {
        if let Some(queued) = self.queued.get_mut(&to) {
            *queued += bytes;
        }
    }
}

/// What a Zab message is counted as on a link, or behind a SNAP: its txn
/// or body, or a small message.
pub fn weight(message: &ZabMessage) -> usize {
    match message {
        ZabMessage::Proposal { txn, .. } => txn.len() + SMALL_MESSAGE,
        ZabMessage::Request(request) => request.body.len() + SMALL_MESSAGE,
        _ => SMALL_MESSAGE,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outbox() -> Outbox {
        Outbox::new(LinkLimits {
            max_queued: 1 << 20,
            flow: FlowMarks::RUNTIME,
        })
    }

    /// The driver looked before a follower's link opened; a message on that
    /// link in the same millisecond shows it is up (a SNAP to it would
    /// otherwise be abandoned as if its link had closed).
    #[test]
    fn a_link_a_message_came_on_is_up_until_the_driver_looks_again() {
        let (one, two) = (ServerId(1), ServerId(2));
        let mut out = outbox();
        out.set_levels(5, [one, two].into_iter(), |p| (p == one).then_some(10));
        assert_eq!(out.queued_bytes(two), None);
        out.link_up(two);
        assert_eq!(out.queued_bytes(two), Some(0));
        assert!(!out.levels_stale(5));
        out.link_down(two);
        assert_eq!(out.queued_bytes(two), None);
        assert!(out.levels_stale(6));
    }

    /// Between the driver's looks, what the member queues counts, so a SNAP
    /// stream stops at its bound within one millisecond too.
    #[test]
    fn what_the_member_queues_counts_until_the_driver_looks_again() {
        let one = ServerId(1);
        let mut out = outbox();
        out.set_levels(5, [one].into_iter(), |_| Some(100));
        out.send_snap_chunk(one, 0, Bytes::from(vec![0; 1000]), None);
        let proposal = ZabMessage::Proposal {
            zxid: Zxid::new(1, 1),
            txn: Bytes::from(vec![0; 200]),
        };
        out.send_zab(one, proposal);
        assert_eq!(
            out.queued_bytes(one),
            Some(100 + 1000 + 200 + SMALL_MESSAGE)
        );
        out.set_levels(6, [one].into_iter(), |_| Some(0));
        assert_eq!(out.queued_bytes(one), Some(0));
        let mut commands = VecDeque::new();
        out.take(&mut commands);
        assert!(matches!(commands[0], MemberCommand::SnapChunk { .. }));
        assert!(matches!(commands[1], MemberCommand::SendZab { .. }));
        assert_eq!(commands.len(), 2);
    }
}
