//! A whole member's links in the simulation: the runtime member's
//! [`PeerLinks`] over simulated connections. Each quorum connection
//! has an id that both ends know it by (the runtime's link generation);
//! what a member sends waits in its outbox until the simulation puts it on
//! the network, and a connection closed by either end, or broken by a
//! partition or a crash, is dead for both.

use crate::core::election::{Notification, ServerId};
pub(crate) use crate::core::member::weight;
use crate::core::member::LinkLimits;
use crate::core::peer_event::{LearnerIntake, PeerEvent, SnapPiece};
use crate::core::zab::{FlowMarks, ZabMessage};
use crate::core::ServerSpec;
use crate::driver::link_bound::passes_bound;
use crate::driver::member_driver::PeerLinks;
use bytes::Bytes;
use std::collections::BTreeMap;
use zkd_protocol::Zxid;

/// Bytes a simulated quorum link may hold unread before it closes: the
/// runtime's 256 MiB, scaled as the flow marks are.
const SIM_MAX_QUEUED: usize = 64 << 10;

/// The simulator's link limits. Its txns are a few hundred bytes, so the
/// flow marks are too: a follower whose reader waits for its budget (a slow
/// disk) is paused and catches up, as the runtime's is past megabytes.
pub const SIM_LIMITS: LinkLimits = LinkLimits {
    max_queued: SIM_MAX_QUEUED,
    flow: FlowMarks {
        high: 6 << 10,
        low: 2 << 10,
        batch: 2 << 10,
    },
};

/// What travels between two members.
#[derive(Debug)]
pub enum Wire {
    Notification(Notification),
    Zab {
        conn: u64,
        message: ZabMessage,
    },
    Snap {
        conn: u64,
        piece: SnapPiece,
    },
    /// The sending end closed connection `conn`.
    Closed {
        conn: u64,
    },
    /// The sending end is down: it refused the receiver's election connection.
    Refused,
}

/// One member's end of its links.
pub struct SimLinks {
    /// The quorum connection this member holds with each peer.
    pub quorum: BTreeMap<ServerId, u64>,
    /// Whether learners' new connections are taken, held or refused.
    pub intake: LearnerIntake,
    /// What it sent, in order, for the simulation to carry.
    pub outbox: Vec<(ServerId, Wire)>,
    /// The zxid of the SNAP streaming to each follower.
    snapping: BTreeMap<ServerId, Zxid>,
    /// Ids of connections this member opens (unique per incarnation).
    next_conn: u64,
    /// Bytes of SNAP pieces and Zab messages sent on each connection and not
    /// yet read by the other end: a slow or stopped reader holds the
    /// leader's image back, and makes its flow control pause that follower.
    unread: BTreeMap<u64, usize>,
    /// Connections this member closed at their bound: the member itself
    /// hears of each as a closed link, as the runtime's links report it.
    pub over_bound: Vec<(ServerId, u64)>,
}

impl SimLinks {
    /// The links of a member incarnation whose connection ids start at `first_conn`.
    pub fn new(first_conn: u64) -> SimLinks {
        SimLinks {
            quorum: BTreeMap::new(),
            intake: LearnerIntake::Held,
            outbox: Vec::new(),
            snapping: BTreeMap::new(),
            next_conn: first_conn,
            unread: BTreeMap::new(),
            over_bound: Vec::new(),
        }
    }

    /// Counts `bytes` more sent to `to` on `conn`, unless they pass the
    /// bound ([`passes_bound`], the runtime's rule): then the link closes,
    /// and its end is reported.
    fn within_bound(&mut self, to: ServerId, conn: u64, bytes: usize) -> bool {
        let unread = self.unread.entry(conn).or_default();
        if passes_bound(*unread, bytes, SIM_MAX_QUEUED) {
            tracing::warn!(peer = %to, "sim: quorum link over its bound; closing");
            self.over_bound.push((to, conn));
            self.close(to);
            return false;
        }
        *unread += bytes;
        true
    }

    /// The other end read `bytes` sent on `conn`.
    pub fn read(&mut self, conn: u64, bytes: usize) {
        if let Some(unread) = self.unread.get_mut(&conn) {
            *unread = unread.saturating_sub(bytes);
        }
    }

    fn close(&mut self, peer: ServerId) {
        self.snapping.remove(&peer);
        if let Some(conn) = self.quorum.remove(&peer) {
            self.unread.remove(&conn);
            self.outbox.push((peer, Wire::Closed { conn }));
        }
    }
}

impl PeerLinks for SimLinks {
    fn send_notification(&mut self, to: ServerId, n: Notification) {
        self.outbox.push((to, Wire::Notification(n)));
    }

    fn connect_zab(&mut self, leader: ServerId) {
        self.close(leader);
        self.next_conn += 1;
        self.quorum.insert(leader, self.next_conn);
    }

    fn is_stale(&self, event: &PeerEvent) -> bool {
        let current = |peer: &ServerId| self.quorum.get(peer).copied();
        match event {
            PeerEvent::Notification(_) | PeerEvent::Unreachable(_) => false,
            PeerEvent::Zab { from, link, .. } | PeerEvent::SnapChunk { from, link, .. } => {
                current(from) != Some(*link)
            }
            PeerEvent::ZabClosed { peer, link } => current(peer).is_some_and(|c| c != *link),
        }
    }

    fn send_zab(&mut self, to: ServerId, message: ZabMessage) {
        let Some(&conn) = self.quorum.get(&to) else {
            return;
        };
        if self.within_bound(to, conn, weight(&message)) {
            self.outbox.push((to, Wire::Zab { conn, message }));
        }
    }

    fn send_snap_start(&mut self, to: ServerId, zxid: Zxid) {
        self.snapping.insert(to, zxid);
    }

    fn send_snap_chunk(
        &mut self,
        to: ServerId,
        offset: u64,
        data: Bytes,
        fuzzy_through: Option<Zxid>,
    ) {
        let (Some(&conn), Some(&zxid)) = (self.quorum.get(&to), self.snapping.get(&to)) else {
            return;
        };
        if !self.within_bound(to, conn, data.len()) {
            return;
        }
        let piece = SnapPiece {
            zxid,
            offset,
            data,
            fuzzy_through,
        };
        self.outbox.push((to, Wire::Snap { conn, piece }));
    }

    fn queued_bytes(&self, to: ServerId) -> Option<usize> {
        let conn = self.quorum.get(&to)?;
        Some(self.unread.get(conn).copied().unwrap_or(0))
    }

    fn set_learner_intake(&mut self, intake: LearnerIntake) {
        self.intake = intake;
    }

    fn close_zab(&mut self, peer: ServerId) {
        self.close(peer);
    }

    fn close_all_zab(&mut self) {
        let peers: Vec<ServerId> = self.quorum.keys().copied().collect();
        for peer in peers {
            self.close(peer);
        }
    }

    // The simulated network knows every member from the start.
    fn learn_servers(&mut self, _servers: BTreeMap<u64, ServerSpec>) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A leader's links with a quorum connection (id 7) to follower 2.
    fn links() -> SimLinks {
        let mut links = SimLinks::new(100);
        links.quorum.insert(ServerId(2), 7);
        links
    }

    fn closed(links: &SimLinks) -> bool {
        (links.outbox.iter())
            .any(|(to, w)| *to == ServerId(2) && matches!(w, Wire::Closed { conn: 7 }))
    }

    #[test]
    fn a_link_at_its_bound_closes_and_its_own_end_is_told() {
        let mut links = links();
        let txn = Bytes::from(vec![0; 1000]);
        let proposal = |n| ZabMessage::Proposal {
            zxid: Zxid(n),
            txn: txn.clone(),
        };
        let fits = SIM_MAX_QUEUED / weight(&proposal(1));
        for n in 0..fits as i64 {
            links.send_zab(ServerId(2), proposal(n));
        }
        assert!(!closed(&links) && links.over_bound.is_empty());
        links.send_zab(ServerId(2), proposal(fits as i64));
        assert!(closed(&links), "the follower's end hears it closed");
        assert_eq!(
            links.over_bound,
            vec![(ServerId(2), 7)],
            "and so does the leader"
        );
        assert_eq!(links.queued_bytes(ServerId(2)), None);
    }

    #[test]
    fn snap_chunks_obey_the_link_bound_and_a_lone_one_may_pass_it() {
        let mut links = links();
        links.send_snap_start(ServerId(2), Zxid(5));
        let big = Bytes::from(vec![0; SIM_MAX_QUEUED + 1]);
        links.send_snap_chunk(ServerId(2), 0, big.clone(), None);
        assert!(
            !closed(&links),
            "a lone chunk larger than the bound is sent"
        );
        links.send_snap_chunk(
            ServerId(2),
            big.len() as u64,
            Bytes::from_static(b"x"),
            None,
        );
        assert!(
            closed(&links),
            "the next one, unread behind it, closes the link"
        );
        assert_eq!(links.over_bound, vec![(ServerId(2), 7)]);
    }
}
