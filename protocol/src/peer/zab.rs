//! Zab messages on the quorum port (spec §9), one per ZooKeeper `QuorumPacket` type zkd
//! uses.
//!
//! ZooKeeper's record is `QuorumPacket{int type; long zxid; buffer data; vector<Id>
//! authinfo}`. Each message below is one `type`: its fields are that packet's `zxid`, its
//! `data` buffer decoded into named fields, and (REQUEST only) its `authinfo`. The field
//! docs say where each value sits in ZooKeeper's packet, so a jute codec can translate
//! both ways; [`quorum_packet::Body::zookeeper_zxid`] gives the `zxid` field exactly.
//!
//! COMMITANDACTIVATE (9) and INFORMANDACTIVATE (19) commit a reconfig txn and name the
//! leader of the configuration it activates.

use super::{InvalidMessage, PeerMessage};
use bytes::Bytes;

/// Zab protocol version ZooKeeper 3.4+ sends in LearnerInfo and LEADERINFO (`0x10000`).
pub const ZAB_PROTOCOL_VERSION: i32 = 0x10000;

/// [`AckEpoch::current_epoch`] when the learner had already accepted the proposed epoch:
/// the ACKEPOCH then reports its last zxid but does not count as an epoch ack (§9.3).
pub const ACK_EPOCH_ALREADY_ACCEPTED: i64 = -1;

/// The largest [`SnapChunk::data`] a sender produces and a receiver accepts (1 MiB), well
/// under the peer frame limit ([`super::frame::DEFAULT_MAX_PEER_FRAME`]).
pub const MAX_SNAP_CHUNK: usize = 1 << 20;

/// ZooKeeper's QuorumPacket type codes (`Leader.java` constants), one for one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum PacketType {
    /// 1: a client write, sync or global session op forwarded by a learner to the leader.
    Request = 1,
    /// 2: leader → follower, a txn to log and ACK.
    Proposal = 2,
    /// 3: follower → leader, a txn (or NEWLEADER / UPTODATE) logged and fsynced.
    Ack = 3,
    /// 4: leader → follower, a txn reached quorum; apply it.
    Commit = 4,
    /// 5: heartbeat; the learner's reply carries its session touches.
    Ping = 5,
    /// 6: learner asks the leader whether a reattaching session is valid, and the answer.
    Revalidate = 6,
    /// 7: leader → learner, answers a forwarded sync.
    Sync = 7,
    /// 8: leader → observer, a committed txn.
    Inform = 8,
    /// 9: leader → follower, a reconfig txn committed, naming the designated leader.
    CommitAndActivate = 9,
    /// 10: leader → learner, end of synchronization for the new epoch.
    NewLeader = 10,
    /// 11: follower → leader, first packet: accepted epoch and LearnerInfo.
    FollowerInfo = 11,
    /// 12: leader → learner, start serving clients.
    UpToDate = 12,
    /// 13: leader → learner, sync by replaying the following proposals.
    Diff = 13,
    /// 14: leader → learner, truncate the log, then replay.
    Trunc = 14,
    /// 15: leader → learner, replace the database with the following snapshot.
    Snap = 15,
    /// 16: observer → leader, first packet (same payload as FOLLOWERINFO).
    ObserverInfo = 16,
    /// 17: leader → learner, the new epoch.
    LeaderInfo = 17,
    /// 18: learner → leader, epoch acknowledged, with the learner's history position.
    AckEpoch = 18,
    /// 19: leader → observer, a committed reconfig txn, naming the designated leader.
    InformAndActivate = 19,
}

/// An authentication identity (`zookeeper.jute` `Id`), as carried in REQUEST's authinfo.
#[derive(Clone, PartialEq, Eq, Hash, prost::Message)]
pub struct Id {
    /// Scheme: `digest`, `ip`, `sasl`, `super`, ...
    #[prost(string, tag = "1")]
    pub scheme: String,
    /// Scheme-specific identity (for digest, `user:base64(sha1(user:password))`).
    #[prost(string, tag = "2")]
    pub id: String,
}

/// REQUEST (1), learner → leader: a client write, `sync`, `createSession` or
/// `closeSession` forwarded for the leader's pipeline (§9.5). ZooKeeper: zxid -1, data =
/// `long sessionId; int cxid; int type;` then the raw request record, authinfo = the
/// client connection's ids.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Request {
    /// The client's session (data `long sessionId`).
    #[prost(int64, tag = "1")]
    pub session_id: i64,
    /// The client's xid for this request (data `int cxid`); with `session_id` it matches
    /// the COMMIT back to the waiting client on the learner.
    #[prost(int32, tag = "2")]
    pub cxid: i32,
    /// The request's opcode (data `int type`, [`crate::OpCode`]).
    #[prost(int32, tag = "3")]
    pub op_type: i32,
    /// The jute-encoded request record exactly as the client sent it (the rest of data).
    #[prost(bytes = "bytes", tag = "4")]
    pub body: Bytes,
    /// The session's authenticated ids (authinfo), which the leader checks ACLs against.
    #[prost(message, repeated, tag = "5")]
    pub auth: Vec<Id>,
}

/// PROPOSAL (2), leader → follower: log, fsync, then ACK. ZooKeeper: zxid = the txn's
/// zxid, data = the serialized txn.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Proposal {
    /// The txn's zxid (packet zxid).
    #[prost(int64, tag = "1")]
    pub zxid: i64,
    /// The txn entry as the log stores it: jute TxnHeader + txn record (+ TxnDigest), kept
    /// opaque here (packet data, §10.1).
    #[prost(bytes = "bytes", tag = "2")]
    pub txn: Bytes,
}

/// ACK (3), follower → leader: everything up to `zxid` is fsynced. ZooKeeper: data null.
/// After NEWLEADER and UPTODATE the zxid is `epoch << 32`; an ACK with counter 0 is not a
/// txn ACK (§9.7).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Ack {
    /// The zxid acknowledged (packet zxid).
    #[prost(int64, tag = "1")]
    pub zxid: i64,
}

/// COMMIT (4), leader → follower: `zxid` has a quorum of ACKs; apply it (in zxid order).
/// ZooKeeper: data null.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Commit {
    /// The committed zxid (packet zxid).
    #[prost(int64, tag = "1")]
    pub zxid: i64,
    /// The digest of the leader's tree right after `zxid`, when it had just
    /// applied it: a follower whose tree differs there has diverged
    /// (ZOOKEEPER-2846). Not in ZooKeeper's packet (a jute codec drops it).
    #[prost(uint64, optional, tag = "2")]
    pub digest: Option<u64>,
}

/// One session a learner's clients kept alive since the last PING (data of a PING reply:
/// `long sessionId; int timeout`).
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct SessionTouch {
    /// The touched session.
    #[prost(int64, tag = "1")]
    pub session_id: i64,
    /// Its negotiated timeout, in ms.
    #[prost(int32, tag = "2")]
    pub timeout_ms: i32,
}

/// PING (5), both ways (§9.5, §9.6). The leader sends one every tickTime/2 with zxid =
/// its last proposed zxid and no touches; the learner echoes the zxid with the sessions
/// touched since its previous reply, and the leader, which owns expiry, touches them.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Ping {
    /// The leader's last proposed zxid, echoed in the reply (packet zxid).
    #[prost(int64, tag = "1")]
    pub zxid: i64,
    /// Learner → leader only: the session touches (packet data, possibly empty).
    #[prost(message, repeated, tag = "2")]
    pub touches: Vec<SessionTouch>,
}

/// REVALIDATE (6), learner → leader: a client reattached to this learner with a session
/// id; is the session alive? ZooKeeper: zxid -1, data = `long sessionId; int timeout`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Revalidate {
    /// The session the client presented.
    #[prost(int64, tag = "1")]
    pub session_id: i64,
    /// The timeout the learner negotiated, in ms; the leader touches the session with it.
    #[prost(int32, tag = "2")]
    pub timeout_ms: i32,
}

/// REVALIDATE (6), leader → learner: the answer, after which the learner sends its
/// ConnectResponse. ZooKeeper: zxid -1, data = `long sessionId; boolean valid`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RevalidateReply {
    /// The session asked about.
    #[prost(int64, tag = "1")]
    pub session_id: i64,
    /// Whether it is alive; if so the leader now counts this learner as its owner.
    #[prost(bool, tag = "2")]
    pub valid: bool,
}

/// SYNC (7), leader → learner: answers a `sync` forwarded as REQUEST, sent once every
/// commit issued before it is on the link (§7.3).
///
/// ZooKeeper's packet has zxid 0 and no data: the learner completes its **oldest**
/// pending sync (links are FIFO). zkd names the sync it answers, so the learner can
/// assert the FIFO match; a jute codec drops both fields on write and, on read, fills
/// them from the learner's oldest pending sync.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Sync {
    /// The session whose `sync` is answered.
    #[prost(int64, tag = "1")]
    pub session_id: i64,
    /// That request's cxid.
    #[prost(int32, tag = "2")]
    pub cxid: i32,
}

/// INFORM (8), leader → observer: a committed txn (observers see no proposals).
/// ZooKeeper: zxid = the txn's zxid, data = the same bytes as the PROPOSAL's.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Inform {
    /// The txn's zxid (packet zxid).
    #[prost(int64, tag = "1")]
    pub zxid: i64,
    /// The serialized txn, as in [`Proposal::txn`] (packet data).
    #[prost(bytes = "bytes", tag = "2")]
    pub txn: Bytes,
}

/// COMMITANDACTIVATE (9), leader → follower: the reconfig txn `zxid` has a quorum of
/// ACKs of the old and of the new configuration; apply it, activate its configuration and
/// follow `designated_leader` in it. ZooKeeper: zxid, data = `long designatedLeader`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct CommitAndActivate {
    /// The committed reconfig zxid (packet zxid).
    #[prost(int64, tag = "1")]
    pub zxid: i64,
    /// The sid that leads the new configuration (packet data).
    #[prost(uint64, tag = "2")]
    pub designated_leader: u64,
    /// As [`Commit::digest`]. Not in ZooKeeper's packet.
    #[prost(uint64, optional, tag = "3")]
    pub digest: Option<u64>,
}

/// INFORMANDACTIVATE (19), leader → observer: a committed reconfig txn, as [`Inform`], and
/// the leader of the configuration it activates. ZooKeeper: zxid, data = `long
/// designatedLeader` then the txn.
#[derive(Clone, PartialEq, prost::Message)]
pub struct InformAndActivate {
    /// The txn's zxid (packet zxid).
    #[prost(int64, tag = "1")]
    pub zxid: i64,
    /// The sid that leads the new configuration.
    #[prost(uint64, tag = "2")]
    pub designated_leader: u64,
    /// The serialized txn, as in [`Proposal::txn`].
    #[prost(bytes = "bytes", tag = "3")]
    pub txn: Bytes,
}

/// NEWLEADER (10), leader → learner: synchronization for the new epoch is complete. The
/// learner logs and fsyncs what it buffered, persists currentEpoch, and ACKs
/// `epoch << 32` (§9.4).
#[derive(Clone, PartialEq, prost::Message)]
pub struct NewLeader {
    /// `newEpoch << 32` (packet zxid).
    #[prost(int64, tag = "1")]
    pub zxid: i64,
    /// The leader's last-seen quorum configuration text (packet data, 3.5+).
    #[prost(bytes = "bytes", tag = "2")]
    pub config: Bytes,
}

/// FOLLOWERINFO (11) and OBSERVERINFO (16), learner → leader: the first packet of
/// discovery (§9.3). ZooKeeper: zxid = `acceptedEpoch << 32`, data =
/// `LearnerInfo{long serverid; int protocolVersion; long configVersion}`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct FollowerInfo {
    /// The highest epoch this learner agreed to follow (its `acceptedEpoch` file); on
    /// ZooKeeper's wire it is the packet zxid `accepted_epoch << 32`, so it must fit in 31
    /// bits. The leader proposes max(all accepted epochs) + 1.
    #[prost(uint64, tag = "1")]
    pub accepted_epoch: u64,
    /// The learner's myid (LearnerInfo.serverid).
    #[prost(uint64, tag = "2")]
    pub sid: u64,
    /// LearnerInfo.protocolVersion, [`ZAB_PROTOCOL_VERSION`].
    #[prost(int32, tag = "3")]
    pub protocol_version: i32,
    /// The version of the learner's quorum configuration (LearnerInfo.configVersion).
    #[prost(int64, tag = "4")]
    pub config_version: i64,
}

/// LEADERINFO (17), leader → learner: the epoch the leader proposes. ZooKeeper: zxid =
/// `newEpoch << 32`, data = `int protocolVersion`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct LeaderInfo {
    /// The new epoch (packet zxid `new_epoch << 32`; at most `MAX_EPOCH`). The learner
    /// persists it as acceptedEpoch if higher, and disconnects if lower.
    #[prost(uint64, tag = "1")]
    pub new_epoch: u64,
    /// [`ZAB_PROTOCOL_VERSION`] (packet data).
    #[prost(int32, tag = "2")]
    pub protocol_version: i32,
}

/// ACKEPOCH (18), learner → leader: answer to LEADERINFO, telling the leader where the
/// learner's history ends so it can pick DIFF, TRUNC or SNAP (§9.3, §9.4).
#[derive(Clone, PartialEq, prost::Message)]
pub struct AckEpoch {
    /// The learner's `currentEpoch` (packet data `int`), or [`ACK_EPOCH_ALREADY_ACCEPTED`]
    /// when it had already accepted this epoch (not counted as an epoch ack).
    #[prost(int64, tag = "1")]
    pub current_epoch: i64,
    /// The learner's last logged zxid (packet zxid).
    #[prost(int64, tag = "2")]
    pub last_logged_zxid: i64,
    /// The zxid the learner's log starts after (its latest snapshot's): the leader must
    /// not TRUNC it below this and sends SNAP instead. Not in ZooKeeper's packet, which
    /// carries only the other two fields, and whose leader can therefore TRUNC a learner
    /// into a state its snapshot already went past (ZOOKEEPER-1549); a jute codec drops
    /// it on write and, on read, fills 0 (no snapshot ahead of the log).
    #[prost(int64, tag = "3")]
    pub log_base: i64,
    /// The learner found its tree diverged from a leader's: it asks for a SNAP whatever
    /// its zxids say. Not in ZooKeeper's packet (a jute codec drops it; false on read).
    #[prost(bool, tag = "4")]
    pub wants_snapshot: bool,
}

/// UPTODATE (12), leader → learner: a quorum acked NEWLEADER; start serving clients.
/// The learner answers ACK(`epoch << 32`). ZooKeeper: zxid -1, data null.
#[derive(Clone, PartialEq, prost::Message)]
pub struct UpToDate {}

/// DIFF (13), leader → learner: keep the local database; the PROPOSAL/COMMIT pairs that
/// follow bring it up to date. ZooKeeper: data null.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Diff {
    /// The leader's last committed zxid covered by the diff (packet zxid); the learner's
    /// lastProcessedZxid becomes this.
    #[prost(int64, tag = "1")]
    pub zxid: i64,
}

/// TRUNC (14), leader → learner: drop logged txns after `zxid` (ones the leader never
/// committed), then replay the pairs that follow. ZooKeeper: data null.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Trunc {
    /// The zxid to truncate the log to (packet zxid).
    #[prost(int64, tag = "1")]
    pub zxid: i64,
}

/// SNAP (15), leader → learner: replace the database with the leader's snapshot, which
/// follows as [`SnapChunk`]s. ZooKeeper: data null, and the snapshot stream follows raw.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Snap {
    /// The leader's lastProcessedZxid, the snapshot's zxid (packet zxid).
    #[prost(int64, tag = "1")]
    pub zxid: i64,
    // Tag 2 was the total size, unknown to a leader that streams the image as
    // it writes it; the last chunk says where the image ends.
}

/// A piece of the snapshot that follows SNAP, in order, ending with `last`. ZooKeeper
/// has no packet for this: a jute codec writes the chunks' data back to back right after
/// the SNAP record, which is exactly ZooKeeper's snapshot stream.
#[derive(Clone, PartialEq, prost::Message)]
pub struct SnapChunk {
    /// Byte offset of `data` in the snapshot; chunks are contiguous.
    #[prost(uint64, tag = "1")]
    pub offset: u64,
    /// The bytes, at most [`MAX_SNAP_CHUNK`].
    #[prost(bytes = "bytes", tag = "2")]
    pub data: Bytes,
    /// Whether this is the final chunk.
    #[prost(bool, tag = "3")]
    pub last: bool,
    /// On the final chunk: the zxid the leader's tree had reached when the image
    /// was done. The image is fuzzy (written while txns were applied), so txns
    /// up to this one may already be in it. ZooKeeper's follower learns nothing
    /// like it and ignores every failed replay instead.
    #[prost(int64, tag = "4")]
    pub fuzzy_through: i64,
}

/// One frame on zkd's quorum link: any Zab message.
#[derive(Clone, PartialEq, prost::Message)]
pub struct QuorumPacket {
    /// The message; always present in a checked frame. Oneof tags equal ZooKeeper's type
    /// codes where one message has the code to itself.
    #[prost(
        oneof = "quorum_packet::Body",
        tags = "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21"
    )]
    pub body: Option<quorum_packet::Body>,
}

/// The variants of [`QuorumPacket`].
pub mod quorum_packet {
    use super::*;

    /// What a quorum frame carries: one variant per ZooKeeper packet type.
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Body {
        /// REQUEST (1).
        #[prost(message, tag = "1")]
        Request(Request),
        /// PROPOSAL (2).
        #[prost(message, tag = "2")]
        Proposal(Proposal),
        /// ACK (3).
        #[prost(message, tag = "3")]
        Ack(Ack),
        /// COMMIT (4).
        #[prost(message, tag = "4")]
        Commit(Commit),
        /// PING (5).
        #[prost(message, tag = "5")]
        Ping(Ping),
        /// REVALIDATE (6), learner → leader.
        #[prost(message, tag = "6")]
        Revalidate(Revalidate),
        /// SYNC (7).
        #[prost(message, tag = "7")]
        Sync(Sync),
        /// INFORM (8).
        #[prost(message, tag = "8")]
        Inform(Inform),
        /// COMMITANDACTIVATE (9).
        #[prost(message, tag = "9")]
        CommitAndActivate(CommitAndActivate),
        /// NEWLEADER (10).
        #[prost(message, tag = "10")]
        NewLeader(NewLeader),
        /// FOLLOWERINFO (11).
        #[prost(message, tag = "11")]
        FollowerInfo(FollowerInfo),
        /// UPTODATE (12).
        #[prost(message, tag = "12")]
        UpToDate(UpToDate),
        /// DIFF (13).
        #[prost(message, tag = "13")]
        Diff(Diff),
        /// TRUNC (14).
        #[prost(message, tag = "14")]
        Trunc(Trunc),
        /// SNAP (15).
        #[prost(message, tag = "15")]
        Snap(Snap),
        /// OBSERVERINFO (16), same payload as FOLLOWERINFO (ZooKeeper's LearnerInfo).
        #[prost(message, tag = "16")]
        ObserverInfo(FollowerInfo),
        /// LEADERINFO (17).
        #[prost(message, tag = "17")]
        LeaderInfo(LeaderInfo),
        /// ACKEPOCH (18).
        #[prost(message, tag = "18")]
        AckEpoch(AckEpoch),
        /// INFORMANDACTIVATE (19).
        #[prost(message, tag = "19")]
        InformAndActivate(InformAndActivate),
        /// REVALIDATE (6), leader → learner.
        #[prost(message, tag = "20")]
        RevalidateReply(RevalidateReply),
        /// Snapshot stream after SNAP (reported as SNAP, 15).
        #[prost(message, tag = "21")]
        SnapChunk(SnapChunk),
    }

    impl Body {
        /// The ZooKeeper packet type this message is, or travels as.
        ///
        /// [`RevalidateReply`] is REVALIDATE (ZooKeeper tells request from reply by
        /// direction); [`SnapChunk`] is part of the SNAP stream and reports SNAP.
        pub fn packet_type(&self) -> PacketType {
            match self {
                Body::Request(_) => PacketType::Request,
                Body::Proposal(_) => PacketType::Proposal,
                Body::Ack(_) => PacketType::Ack,
                Body::Commit(_) => PacketType::Commit,
                Body::Ping(_) => PacketType::Ping,
                Body::Revalidate(_) | Body::RevalidateReply(_) => PacketType::Revalidate,
                Body::Sync(_) => PacketType::Sync,
                Body::Inform(_) => PacketType::Inform,
                Body::CommitAndActivate(_) => PacketType::CommitAndActivate,
                Body::InformAndActivate(_) => PacketType::InformAndActivate,
                Body::NewLeader(_) => PacketType::NewLeader,
                Body::FollowerInfo(_) => PacketType::FollowerInfo,
                Body::UpToDate(_) => PacketType::UpToDate,
                Body::Diff(_) => PacketType::Diff,
                Body::Trunc(_) => PacketType::Trunc,
                Body::Snap(_) | Body::SnapChunk(_) => PacketType::Snap,
                Body::ObserverInfo(_) => PacketType::ObserverInfo,
                Body::LeaderInfo(_) => PacketType::LeaderInfo,
                Body::AckEpoch(_) => PacketType::AckEpoch,
            }
        }

        /// ZooKeeper's numeric type code (`QuorumPacket.type`) for this message.
        pub fn type_code(&self) -> i32 {
            self.packet_type() as i32
        }

        /// The value ZooKeeper puts in `QuorumPacket.zxid` for this message (spec §9.1),
        /// or `None` for a [`SnapChunk`], which is raw stream data there.
        pub fn zookeeper_zxid(&self) -> Option<i64> {
            let epoch_zxid = |epoch: u64| (epoch << 32) as i64;
            Some(match self {
                Body::Request(_)
                | Body::Revalidate(_)
                | Body::RevalidateReply(_)
                | Body::UpToDate(_) => -1,
                Body::Sync(_) => 0,
                Body::Proposal(Proposal { zxid, .. })
                | Body::Ack(Ack { zxid })
                | Body::Commit(Commit { zxid, .. })
                | Body::Ping(Ping { zxid, .. })
                | Body::Inform(Inform { zxid, .. })
                | Body::CommitAndActivate(CommitAndActivate { zxid, .. })
                | Body::InformAndActivate(InformAndActivate { zxid, .. })
                | Body::NewLeader(NewLeader { zxid, .. })
                | Body::Diff(Diff { zxid })
                | Body::Trunc(Trunc { zxid })
                | Body::Snap(Snap { zxid, .. }) => *zxid,
                Body::FollowerInfo(info) | Body::ObserverInfo(info) => {
                    epoch_zxid(info.accepted_epoch)
                }
                Body::LeaderInfo(info) => epoch_zxid(info.new_epoch),
                Body::AckEpoch(ack) => ack.last_logged_zxid,
                Body::SnapChunk(_) => return None,
            })
        }
    }
}

impl QuorumPacket {
    /// ZooKeeper's numeric type code (`QuorumPacket.type`, 1..=18) of the message carried,
    /// or 0 (no ZooKeeper type) for a packet without a body, which
    /// [`PeerMessage::check`] rejects.
    pub fn type_code(&self) -> i32 {
        self.body.as_ref().map_or(0, quorum_packet::Body::type_code)
    }
}

impl PeerMessage for QuorumPacket {
    fn check(&self) -> Result<(), InvalidMessage> {
        use quorum_packet::Body;
        // An epoch past MAX_EPOCH would make its zxids negative: older than every other.
        let fits_zxid = |epoch: u64| epoch <= u64::from(crate::MAX_EPOCH);
        match &self.body {
            None => Err(InvalidMessage("quorum packet without a body")),
            Some(Body::FollowerInfo(info) | Body::ObserverInfo(info))
                if !fits_zxid(info.accepted_epoch) =>
            {
                Err(InvalidMessage(
                    "accepted epoch does not fit in a positive zxid",
                ))
            }
            Some(Body::LeaderInfo(info)) if !fits_zxid(info.new_epoch) => {
                Err(InvalidMessage("new epoch does not fit in a positive zxid"))
            }
            Some(Body::SnapChunk(chunk)) if chunk.data.len() > MAX_SNAP_CHUNK => {
                Err(InvalidMessage("snapshot chunk larger than MAX_SNAP_CHUNK"))
            }
            Some(_) => Ok(()),
        }
    }
}

/// `From<Message> for QuorumPacket` for each message, so `QuorumPacket::from(Ack { .. })`.
macro_rules! into_packet {
    ($($message:ident => $variant:ident),* $(,)?) => {$(
        impl From<$message> for QuorumPacket {
            fn from(message: $message) -> QuorumPacket {
                QuorumPacket { body: Some(quorum_packet::Body::$variant(message)) }
            }
        }
    )*};
}

into_packet! {
    Request => Request,
    Proposal => Proposal,
    Ack => Ack,
    Commit => Commit,
    Ping => Ping,
    Revalidate => Revalidate,
    RevalidateReply => RevalidateReply,
    Sync => Sync,
    Inform => Inform,
    CommitAndActivate => CommitAndActivate,
    InformAndActivate => InformAndActivate,
    NewLeader => NewLeader,
    FollowerInfo => FollowerInfo,
    UpToDate => UpToDate,
    Diff => Diff,
    Trunc => Trunc,
    Snap => Snap,
    SnapChunk => SnapChunk,
    LeaderInfo => LeaderInfo,
    AckEpoch => AckEpoch,
}

#[cfg(test)]
#[path = "zab_tests.rs"]
pub(crate) mod tests;
