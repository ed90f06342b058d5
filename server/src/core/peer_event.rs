//! What a member hears from its peers, and how it takes learners: the
//! runtime's peer network and the simulator's links both speak these.

use crate::core::election::{Notification, ServerId};
use crate::core::zab::ZabMessage;
use crate::core::ReadPermit;
use bytes::Bytes;
use zkd_protocol::Zxid;

/// What the peers of this member tell it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PeerEvent {
    /// An election notification from a peer (sender checked against the link's sid).
    Notification(Notification),
    /// Our election connection to `peer` was refused: nothing listens at
    /// its address, so it cannot vote until it is heard from again.
    Unreachable(ServerId),
    /// A Zab message on the quorum link with `from` (`link`: that link's
    /// generation, see the driver's staleness check).
    /// `permit`: its share of the bytes in flight the driver allows, held until the
    /// member is done with it (a proposal's, until it is durable).
    Zab {
        from: ServerId,
        message: ZabMessage,
        permit: ReadPermit,
        link: u64,
    },
    /// The next piece of the SNAP image `from` is streaming to us, with its
    /// share of the bytes in flight (drop it once the piece is written).
    SnapChunk {
        from: ServerId,
        piece: SnapPiece,
        permit: ReadPermit,
        link: u64,
    },
    /// The quorum link with `peer` closed (after every message it delivered).
    ZabClosed { peer: ServerId, link: u64 },
}

/// A piece of a SNAP's image, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapPiece {
    /// The zxid the SNAP names its image by.
    pub zxid: Zxid,
    /// Where `data` starts in the image (0 for the first piece).
    pub offset: u64,
    /// The bytes.
    pub data: Bytes,
    /// On the last piece: txns up to this zxid may already be in the image.
    pub fuzzy_through: Option<Zxid>,
}

/// Whether a member takes learners on its quorum port. Only a leader does
/// (ZooKeeper's followers do not listen for learners), so a connection that
/// claims a member's sid cannot replace a follower's link to its leader.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LearnerIntake {
    /// Leading: learners are taken.
    Taken,
    /// Looking: a learner's handshake waits (within `connect_timeout`) for
    /// the outcome, since followers may dial before their leader-elect leads.
    Held,
    /// Following: learners are closed at once, so one that chose this
    /// member by mistake looks again without waiting.
    Refused,
}
