//! Messages between ensemble members: fast-leader-election and Zab.
//!
//! ZooKeeper members talk over two ports. The **election port** carries, after an initial
//! header ([`election::ElectionHello`]), length-prefixed notifications
//! ([`election::Notification`], spec §8). The **quorum port** carries a stream of jute
//! `QuorumPacket{int type; long zxid; buffer data; vector<Id> authinfo}` records
//! ([`zab::QuorumPacket`], spec §9).
//!
//! The types here mirror those messages **one for one**: one message per ZooKeeper
//! QuorumPacket type zkd uses, named after ZooKeeper's constant and carrying exactly what
//! ZooKeeper puts in that packet's `zxid`, `data` and `authinfo`, with the `data` buffer
//! decoded into named fields. The numeric type code of each is kept
//! ([`zab::PacketType`], [`zab::QuorumPacket::type_code`]).
//!
//! They are [prost](https://docs.rs/prost) messages, derived by hand (no `.proto`, no
//! build step), because that gives zkd a compact, versionable, panic-free wire of its
//! own today ([`frame::PeerCodec`]: a 4-byte big-endian length, then the prost bytes),
//! while the field-for-field correspondence lets a later codec map the same values onto
//! ZooKeeper's jute peer wire, so that zkd and Apache ZooKeeper can share an ensemble and
//! captures can be compared with the reference server (spec §9.8). Where zkd's messages
//! carry something ZooKeeper's do not (the sender's sid in a notification, which
//! ZooKeeper takes from the connection; snapshot chunks, which ZooKeeper streams raw
//! after SNAP; the session and cxid of a SYNC, which ZooKeeper matches FIFO), the field
//! docs say what such a codec does with it.
//!
//! Integer conventions: zxids are `i64` (ZooKeeper's `long`, see [`crate::Zxid`]); sids
//! and epochs are `u64`. ZooKeeper's `long` values that are negative on its wire (an
//! observer's `Long.MIN_VALUE` vote) map by two's-complement cast (`as i64` / `as u64`).

pub mod election;
pub mod frame;
pub mod zab;

pub use election::{ElectionHello, ElectionMessage, Notification, ServerState};
pub use frame::{PeerCodec, PeerFrameError};
pub use zab::{PacketType, QuorumPacket};

use std::fmt;

/// A peer message that can be the top-level item of a [`PeerCodec`] frame.
///
/// prost accepts any well-formed encoding, including one that leaves out a `oneof` or
/// carries an enumeration value it does not know. [`PeerMessage::check`] is the
/// semantic gate applied after decoding, so the rest of the server only ever sees
/// messages that mean something.
pub trait PeerMessage: prost::Message + Default {
    /// `Ok` when the decoded message is meaningful; otherwise why not.
    fn check(&self) -> Result<(), InvalidMessage>;
}

/// A well-formed prost encoding that is not a meaningful peer message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InvalidMessage(pub &'static str);

impl fmt::Display for InvalidMessage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid peer message: {}", self.0)
    }
}

impl std::error::Error for InvalidMessage {}
