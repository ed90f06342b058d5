//! Fast-leader-election messages (spec §8): the election port's initial header and the
//! notification each member sends about its vote.
//!
//! ZooKeeper's election link: the initiator sends `long protocolVersion; long sid; int
//! addrLen; bytes addr` ([`ElectionHello`]), then each direction carries `int length +
//! payload` frames whose payload is `int state; long leader; long zxid; long
//! electionEpoch; long peerEpoch; int version; int configLength; bytes config`
//! ([`Notification`]). On zkd's own wire both travel as [`ElectionMessage`] frames.

use super::{InvalidMessage, PeerMessage};
use bytes::Bytes;

/// `PROTOCOL_VERSION_V1` (3.5+): the first long of ZooKeeper's election header.
pub const PROTOCOL_VERSION_V1: i64 = -65536;

/// `PROTOCOL_VERSION_V2` (3.6+, only with `multiAddress.enabled`): addresses joined by `|`.
pub const PROTOCOL_VERSION_V2: i64 = -65535;

/// ZooKeeper accepts an election address of 1..=2048 bytes in the initial header.
pub const MAX_ELECTION_ADDRESS_LEN: usize = 2048;

/// ZooKeeper's `PACKETMAXSIZE`: the largest election-port frame payload (512 KiB).
pub const MAX_ELECTION_PAYLOAD: usize = 524_288;

/// The `version` field ZooKeeper 3.5+ writes in a notification (`CURRENTVERSION`); a jute
/// codec writes it, and with it `configLength` and `config`.
pub const NOTIFICATION_VERSION: i32 = 2;

/// A member's role, ZooKeeper's `QuorumPeer.ServerState` with its ordinal on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum ServerState {
    /// 0: electing; the vote is a proposal.
    Looking = 0,
    /// 1: following the vote's leader.
    Following = 1,
    /// 2: leading; the vote names the sender itself.
    Leading = 2,
    /// 3: observer; voters ignore its notifications (§8.5 step 6).
    Observing = 3,
}

/// One election notification: the sender's state and current vote (spec §8.2).
///
/// The vote is `(leader, zxid, peer_epoch)`, ordered by peer epoch, then zxid, then sid
/// (`totalOrderPredicate`, §8.4); `election_epoch` is the sender's round.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Notification {
    /// The sender's [`ServerState`] (ZooKeeper field 1, `int state`). prost keeps it as the
    /// raw `i32`; read it with `state()` after [`PeerMessage::check`] has rejected unknown
    /// values. A LOOKING sender is electing; a FOLLOWING or LEADING one is reporting the
    /// established leader, which is how a newcomer joins (§8.5 step 5).
    #[prost(enumeration = "ServerState", tag = "1")]
    pub state: i32,
    /// The proposed (LOOKING) or current leader's sid (field 2, `long leader`). ZooKeeper
    /// ignores a notification whose leader is not a voter.
    #[prost(uint64, tag = "2")]
    pub leader: u64,
    /// The proposed leader's last logged zxid, the vote's zxid (field 3, `long zxid`),
    /// compared after the peer epoch. A LOOKING notification with zxid -1 is ignored.
    #[prost(int64, tag = "3")]
    pub zxid: i64,
    /// The sender's logical clock, its election round (field 4, `long electionEpoch`).
    /// A higher round makes the receiver jump to it and clear its received votes; a lower
    /// one is ignored (answered with the receiver's own vote); FOLLOWING/LEADING reports
    /// carry the round in which their vote was decided.
    #[prost(uint64, tag = "4")]
    pub election_epoch: u64,
    /// The proposed leader's epoch, its `currentEpoch` (field 5, `long peerEpoch`),
    /// compared **before** the zxid. After activation every member reports the new epoch.
    #[prost(uint64, tag = "5")]
    pub peer_epoch: u64,
    /// The sender's sid. Not in ZooKeeper's payload: ZooKeeper takes it from the
    /// connection's [`ElectionHello`]; a jute codec drops it on write and fills it from the
    /// link on read. Votes are recorded per sender (`recvset[sid]`).
    #[prost(uint64, tag = "6")]
    pub sid: u64,
    /// The version of the sender's quorum configuration (the `version=` line of its
    /// quorum-verifier text, ZooKeeper's `QuorumVerifier.getVersion()`). ZooKeeper derives
    /// it from `config`; a LOOKING receiver with reconfig enabled adopts a higher one and
    /// restarts the election. 0 when the configuration is static.
    #[prost(int64, tag = "7")]
    pub config_version: i64,
    /// The sender's quorum-verifier text, UTF-8, in `/zookeeper/config` format (fields 7–8,
    /// `int configLength; bytes config`). May be empty on zkd's wire; a jute codec must
    /// write the text ZooKeeper expects.
    #[prost(bytes = "bytes", tag = "8")]
    pub config: Bytes,
}

impl PeerMessage for Notification {
    fn check(&self) -> Result<(), InvalidMessage> {
        if ServerState::try_from(self.state).is_err() {
            return Err(InvalidMessage("unknown server state"));
        }
        Ok(())
    }
}

/// The initial message on an election connection (spec §8.1): who is calling, and where
/// to call back.
///
/// The dedup rule keeps a connection only if the initiator has the larger sid; the
/// acceptor uses `election_addr` to connect back otherwise.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ElectionHello {
    /// ZooKeeper's first `long`: [`PROTOCOL_VERSION_V1`] (-65536), or
    /// [`PROTOCOL_VERSION_V2`] with several addresses. A non-negative value is a pre-3.5
    /// peer sending its sid directly.
    #[prost(int64, tag = "1")]
    pub protocol_version: i64,
    /// The initiator's myid (ZooKeeper's second `long`).
    #[prost(uint64, tag = "2")]
    pub sid: u64,
    /// The initiator's election address, `host:port`, UTF-8 (ZooKeeper's `int addrLen;
    /// bytes addr`, 1..=2048 bytes; `|`-separated list under V2).
    #[prost(string, tag = "3")]
    pub election_addr: String,
}

impl PeerMessage for ElectionHello {
    fn check(&self) -> Result<(), InvalidMessage> {
        if self.election_addr.is_empty() || self.election_addr.len() > MAX_ELECTION_ADDRESS_LEN {
            return Err(InvalidMessage("election address length out of 1..=2048"));
        }
        Ok(())
    }
}

/// One frame on zkd's election link: the hello first, notifications after it.
///
/// ZooKeeper sends the header unframed and the notifications framed; wrapping both lets
/// one [`super::PeerCodec`] serve the whole link.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ElectionMessage {
    /// The message; always present in a checked frame.
    #[prost(oneof = "election_message::Body", tags = "1, 2")]
    pub body: Option<election_message::Body>,
}

/// The variants of [`ElectionMessage`].
pub mod election_message {
    /// What an election frame carries.
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Body {
        /// The connection's initial header.
        #[prost(message, tag = "1")]
        Hello(super::ElectionHello),
        /// A vote.
        #[prost(message, tag = "2")]
        Notification(super::Notification),
    }
}

impl PeerMessage for ElectionMessage {
    fn check(&self) -> Result<(), InvalidMessage> {
        match &self.body {
            None => Err(InvalidMessage("election frame without a body")),
            Some(election_message::Body::Hello(h)) => h.check(),
            Some(election_message::Body::Notification(n)) => n.check(),
        }
    }
}

impl From<ElectionHello> for ElectionMessage {
    fn from(hello: ElectionHello) -> ElectionMessage {
        ElectionMessage {
            body: Some(election_message::Body::Hello(hello)),
        }
    }
}

impl From<Notification> for ElectionMessage {
    fn from(n: Notification) -> ElectionMessage {
        ElectionMessage {
            body: Some(election_message::Body::Notification(n)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    fn notification() -> Notification {
        Notification {
            state: ServerState::Following as i32,
            leader: 3,
            zxid: 0x1_0000_0007,
            election_epoch: 2,
            peer_epoch: 1,
            sid: 1,
            config_version: 0x1_0000_0000,
            config: Bytes::from_static(
                b"server.1=127.0.0.1:2888:3888:participant\nversion=100000000",
            ),
        }
    }

    #[test]
    fn server_state_codes_match_zookeeper() {
        assert_eq!(ServerState::Looking as i32, 0);
        assert_eq!(ServerState::Following as i32, 1);
        assert_eq!(ServerState::Leading as i32, 2);
        assert_eq!(ServerState::Observing as i32, 3);
        assert_eq!(ServerState::try_from(2), Ok(ServerState::Leading));
        assert!(ServerState::try_from(4).is_err());
        assert_eq!(ServerState::default(), ServerState::Looking);
    }

    #[test]
    fn notification_round_trips() {
        let n = notification();
        let back = Notification::decode(n.encode_to_vec().as_slice()).unwrap();
        assert_eq!(back, n);
        assert_eq!(back.state(), ServerState::Following);
        assert_eq!(back.check(), Ok(()));
        // An observer's Long.MIN_VALUE vote survives the u64 mapping.
        let obs = Notification {
            state: ServerState::Observing as i32,
            leader: i64::MIN as u64,
            zxid: i64::MIN,
            peer_epoch: i64::MIN as u64,
            ..Notification::default()
        };
        let back = Notification::decode(obs.encode_to_vec().as_slice()).unwrap();
        assert_eq!(back.leader as i64, i64::MIN);
        assert_eq!(back, obs);
    }

    #[test]
    fn hello_round_trips() {
        let h = ElectionHello {
            protocol_version: PROTOCOL_VERSION_V1,
            sid: 2,
            election_addr: "127.0.0.1:3888".into(),
        };
        assert_eq!(
            ElectionHello::decode(h.encode_to_vec().as_slice()).unwrap(),
            h
        );
        assert_eq!(h.check(), Ok(()));
        let wrapped = ElectionMessage::from(h.clone());
        assert_eq!(
            ElectionMessage::decode(wrapped.encode_to_vec().as_slice()).unwrap(),
            wrapped
        );
        assert!(ElectionHello {
            election_addr: String::new(),
            ..h.clone()
        }
        .check()
        .is_err());
        assert!(ElectionHello {
            election_addr: "a".repeat(MAX_ELECTION_ADDRESS_LEN + 1),
            ..h
        }
        .check()
        .is_err());
    }

    #[test]
    fn unknown_state_and_empty_frame_are_rejected() {
        let bad = Notification {
            state: 9,
            ..notification()
        };
        // prost keeps the unknown value; check() is what refuses it.
        let back = Notification::decode(bad.encode_to_vec().as_slice()).unwrap();
        assert_eq!(back.state, 9);
        assert!(back.check().is_err());
        assert!(ElectionMessage::from(back).check().is_err());
        assert!(ElectionMessage::default().check().is_err());
        assert_eq!(ElectionMessage::from(notification()).check(), Ok(()));
    }
}
