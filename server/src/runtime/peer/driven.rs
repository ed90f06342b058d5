//! The peer network as the shared driver reaches it
//! ([`PeerLinks`](crate::driver::member_driver::PeerLinks)), and the link
//! limits the runtime's member works to.

use super::PeerNetwork;
use crate::core::election::{Notification, ServerId};
use crate::core::member::LinkLimits;
use crate::core::peer_event::{LearnerIntake, PeerEvent};
use crate::core::zab::{FlowMarks, ZabMessage};
use crate::core::ServerSpec;
use crate::driver::member_driver::PeerLinks;
use bytes::Bytes;
use std::collections::BTreeMap;
use zkd_protocol::Zxid;

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
    fn set_learner_intake(&mut self, intake: LearnerIntake) {
        PeerNetwork::set_learner_intake(self, intake)
    }
    fn close_zab(&mut self, peer: ServerId) {
        PeerNetwork::close_zab(self, peer)
    }
    fn close_all_zab(&mut self) {
        PeerNetwork::close_all_zab(self)
    }
    fn learn_servers(&mut self, servers: BTreeMap<u64, ServerSpec>) {
        PeerNetwork::learn_servers(self, servers)
    }
}

/// The runtime's link limits: its peer network's bound, and flow marks
/// well under it.
pub(crate) fn runtime_limits(peers: &PeerNetwork) -> LinkLimits {
    LinkLimits {
        max_queued: peers.max_queued_bytes(),
        flow: FlowMarks::RUNTIME,
    }
}
