//! What a member reaches outside itself: its links to the other members
//! and its storage thread. The member calls them synchronously and they
//! never block (sends queue, jobs queue), so a step of the member is
//! deterministic given their answers: the runtime plugs in its peer
//! network and the storage thread's channel, and a driver with simulated
//! links and a simulated disk can plug in its own.
//!
//! Ports rather than returned commands: a leader's SNAP goes out only as
//! fast as the follower's link has room, which the member asks mid-step,
//! and the order of a step's sends and jobs is the order it makes them.

use super::{PeerEvent, PeerNetwork, ServeError, StorageJob};
use crate::core::election::{Notification, ServerId};
use crate::core::zab::{FlowMarks, ZabMessage};
use crate::runtime::peer::LearnerIntake;
use bytes::Bytes;
use zkd_protocol::Zxid;

/// The member's links to its peers (see [`PeerNetwork`] for each call).
pub trait PeerLinks {
    /// Queues an election notification for `to`.
    fn send_notification(&mut self, to: ServerId, n: Notification);
    /// Follower: opens a fresh quorum link to `leader`.
    fn connect_zab(&mut self, leader: ServerId);
    /// Whether `event` came from a quorum link closed or replaced since.
    fn is_stale(&self, event: &PeerEvent) -> bool;
    /// Queues a Zab message on the quorum link with `to`.
    fn send_zab(&mut self, to: ServerId, message: ZabMessage);
    /// Starts a SNAP of the image as of `zxid` to `to`.
    fn send_snap_start(&mut self, to: ServerId, zxid: Zxid);
    /// The next chunk of the SNAP to `to`; the last carries `fuzzy_through`.
    fn send_snap_chunk(
        &mut self,
        to: ServerId,
        offset: u64,
        data: Bytes,
        fuzzy_through: Option<Zxid>,
    );
    /// Bytes queued for `to` and not yet written; None without a link.
    fn queued_bytes(&self, to: ServerId) -> Option<usize>;
    /// Bytes a quorum link may queue before it closes.
    fn max_queued_bytes(&self) -> usize;
    /// When a leader stops queueing live proposals for a follower, and
    /// starts again (well below `max_queued_bytes`).
    fn flow_marks(&self) -> FlowMarks;
    /// Whether learners' connections are taken, held or refused.
    fn set_learner_intake(&mut self, intake: LearnerIntake);
    /// Closes the quorum link with `peer`, if any.
    fn close_zab(&mut self, peer: ServerId);
    /// Closes every quorum link.
    fn close_all_zab(&mut self);
}

/// The member's storage thread: jobs run strictly in the order submitted,
/// and their reports come back in that order.
pub trait StorageJobs {
    /// Queues `job`; an error means storage has stopped.
    fn submit(&mut self, job: StorageJob) -> Result<(), ServeError>;
}

impl PeerLinks for PeerNetwork {
    fn send_notification(&mut self, to: ServerId, n: Notification) {
        PeerNetwork::send_notification(self, to, n)
    }
    fn connect_zab(&mut self, leader: ServerId) {
        PeerNetwork::connect_zab(self, leader)
    }
    fn is_stale(&self, event: &PeerEvent) -> bool {
        PeerNetwork::is_stale(self, event)
    }
    fn send_zab(&mut self, to: ServerId, message: ZabMessage) {
        PeerNetwork::send_zab(self, to, message)
    }
    fn send_snap_start(&mut self, to: ServerId, zxid: Zxid) {
        PeerNetwork::send_snap_start(self, to, zxid)
    }
    fn send_snap_chunk(
        &mut self,
        to: ServerId,
        offset: u64,
        data: Bytes,
        fuzzy_through: Option<Zxid>,
    ) {
        PeerNetwork::send_snap_chunk(self, to, offset, data, fuzzy_through)
    }
    fn queued_bytes(&self, to: ServerId) -> Option<usize> {
        PeerNetwork::queued_bytes(self, to)
    }
    fn max_queued_bytes(&self) -> usize {
        PeerNetwork::max_queued_bytes(self)
    }
    fn flow_marks(&self) -> FlowMarks {
        FlowMarks::RUNTIME
    }
    fn set_learner_intake(&mut self, intake: LearnerIntake) {
        PeerNetwork::set_learner_intake(self, intake)
    }
    fn close_zab(&mut self, peer: ServerId) {
        PeerNetwork::close_zab(self, peer)
    }
    fn close_all_zab(&mut self) {
        PeerNetwork::close_all_zab(self)
    }
}

impl StorageJobs for std::sync::mpsc::Sender<StorageJob> {
    fn submit(&mut self, job: StorageJob) -> Result<(), ServeError> {
        self.send(job)
            .map_err(|_| ServeError::Storage("storage worker stopped".into()))
    }
}
