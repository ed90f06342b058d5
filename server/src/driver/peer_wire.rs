//! Pure translations between the core's peer messages and their prost wire form
//! ([`zkd_protocol::peer`]): election notifications both ways, a Zab message into
//! one or more quorum packets, and a stateful decoder back. A SNAP travels as a
//! header and its chunks and comes out as those chunks, checked for order and
//! size, so neither side ever holds the image whole.
//!
//! Every decoding failure is a [`ConvertError`], never a panic; the link task
//! closes the link on it.

use crate::core::election::{Notification, ServerId, ServerState, Vote};
pub use crate::core::peer_event::SnapPiece;
use crate::core::zab::{Epoch, ForwardedRequest, SessionTouch, SnapshotSource, ZabMessage};
use crate::core::EnsembleConfig;
use bytes::Bytes;
use std::fmt;
use zkd_protocol::peer::election as wire_election;
use zkd_protocol::peer::zab::{self as wire, quorum_packet::Body, QuorumPacket};
use zkd_protocol::{Zxid, MAX_EPOCH};

/// The largest snapshot image a decoder accepts (1 GiB).
pub const MAX_SNAPSHOT_BYTES: u64 = 1 << 30;

/// A well-formed peer message the core cannot take. It ends the link.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConvertError(pub String);

impl fmt::Display for ConvertError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unusable peer message: {}", self.0)
    }
}

impl std::error::Error for ConvertError {}

fn bad<T>(reason: impl Into<String>) -> Result<T, ConvertError> {
    Err(ConvertError(reason.into()))
}

/// An epoch from a peer: at most [`MAX_EPOCH`], so its zxids stay positive
/// and the epochs chosen after it cannot wrap.
fn epoch_from_wire(epoch: u64, what: &str) -> Result<Epoch, ConvertError> {
    match Epoch::try_from(epoch) {
        Ok(epoch) if epoch <= MAX_EPOCH => Ok(epoch),
        _ => bad(format!("{what} {epoch} is past the last epoch {MAX_EPOCH}")),
    }
}

/// A zxid in a Zab message: never negative (an epoch past [`MAX_EPOCH`]).
fn zxid_from_wire(zxid: i64, what: &str) -> Result<Zxid, ConvertError> {
    if zxid < 0 {
        return bad(format!("{what} zxid {zxid:#x} is negative"));
    }
    Ok(Zxid(zxid))
}

/// The most election rounds a peer may claim: ZooKeeper's electionEpoch is a
/// signed 64-bit number, and a round past it would wrap our logical clock.
const MAX_ELECTION_EPOCH: u64 = i64::MAX as u64;

/// The wire form of a notification: with reconfig, it carries the sender's
/// configuration (version 0 and no text without).
pub fn notification_to_wire(n: &Notification) -> wire_election::Notification {
    let state = match n.state {
        ServerState::Looking => wire_election::ServerState::Looking,
        ServerState::Following => wire_election::ServerState::Following,
        ServerState::Leading => wire_election::ServerState::Leading,
    };
    wire_election::Notification {
        state: state as i32,
        leader: n.vote.leader.0,
        zxid: n.vote.zxid.0,
        election_epoch: n.election_epoch,
        peer_epoch: u64::from(n.vote.peer_epoch),
        sid: n.sender.0,
        config_version: n.config.as_ref().map_or(0, |c| c.version),
        config: n
            .config
            .as_ref()
            .map_or_else(Bytes::new, |c| c.text.clone()),
    }
}

/// The core form of a received notification. OBSERVING senders and unknown states
/// are errors (zkd's observers report LOOKING, or FOLLOWING once they follow);
/// so is a peer epoch past 32 bits.
pub fn notification_from_wire(
    n: &wire_election::Notification,
) -> Result<Notification, ConvertError> {
    let state = match wire_election::ServerState::try_from(n.state) {
        Ok(wire_election::ServerState::Looking) => ServerState::Looking,
        Ok(wire_election::ServerState::Following) => ServerState::Following,
        Ok(wire_election::ServerState::Leading) => ServerState::Leading,
        Ok(wire_election::ServerState::Observing) => return bad("notification from an observer"),
        Err(_) => return bad(format!("unknown server state {}", n.state)),
    };
    let peer_epoch = epoch_from_wire(n.peer_epoch, "peer epoch")?;
    // A vote's zxid is its leader's last: of its current epoch or earlier
    // (or the next, logged in a sync before NEWLEADER made it current), or
    // -1 (ZooKeeper's observers vote with it). A forged one would
    // outvote every log.
    let past_epoch = n.zxid >= 0 && Zxid(n.zxid).epoch() > peer_epoch.saturating_add(1);
    if n.zxid < -1 || past_epoch {
        return bad(format!(
            "vote zxid {:#x} past its peer epoch {peer_epoch}",
            n.zxid
        ));
    }
    Ok(Notification {
        sender: ServerId(n.sid),
        state,
        vote: Vote {
            leader: ServerId(n.leader),
            zxid: Zxid(n.zxid),
            peer_epoch,
        },
        election_epoch: match n.election_epoch {
            round @ 0..=MAX_ELECTION_EPOCH => round,
            round => return bad(format!("election round {round} past {MAX_ELECTION_EPOCH}")),
        },
        // A configuration that does not read is not taken.
        config: match n.config.is_empty() {
            true => None,
            false => EnsembleConfig::parse(n.config.clone()),
        },
    })
}

/// The packets carrying `message` from member `me`, in order: one, or for a SNAP
/// with a whole image a header and its chunks of at most [`wire::MAX_SNAP_CHUNK`]
/// bytes (at least one, the last flagged). A staged image exists only where it
/// was received, so it encodes to nothing; a leader streams its image with
/// [`snap_start`] and [`snap_chunk`] instead.
pub fn encode_zab(me: ServerId, message: ZabMessage) -> Vec<QuorumPacket> {
    let packet: QuorumPacket = match message {
        ZabMessage::Snap {
            zxid,
            image: SnapshotSource::Whole(image),
            fuzzy_through,
        } => return encode_snap(zxid, image, fuzzy_through),
        ZabMessage::Snap {
            image: SnapshotSource::Staged(_),
            ..
        } => return Vec::new(),
        ZabMessage::FollowerInfo { accepted_epoch } => learner_info(me, accepted_epoch).into(),
        ZabMessage::ObserverInfo { accepted_epoch } => QuorumPacket {
            body: Some(Body::ObserverInfo(learner_info(me, accepted_epoch))),
        },
        ZabMessage::LeaderInfo { epoch } => wire::LeaderInfo {
            new_epoch: u64::from(epoch),
            protocol_version: wire::ZAB_PROTOCOL_VERSION,
        }
        .into(),
        ZabMessage::AckEpoch {
            current_epoch,
            last_zxid,
            log_base,
            wants_snapshot,
        } => wire::AckEpoch {
            current_epoch: current_epoch.map_or(wire::ACK_EPOCH_ALREADY_ACCEPTED, i64::from),
            last_logged_zxid: last_zxid.0,
            log_base: log_base.0,
            wants_snapshot,
        }
        .into(),
        ZabMessage::Diff { zxid } => wire::Diff { zxid: zxid.0 }.into(),
        ZabMessage::Trunc { zxid } => wire::Trunc { zxid: zxid.0 }.into(),
        ZabMessage::Proposal { zxid, txn } => wire::Proposal { zxid: zxid.0, txn }.into(),
        m @ (ZabMessage::Commit { .. }
        | ZabMessage::Inform { .. }
        | ZabMessage::CommitAndActivate { .. }
        | ZabMessage::InformAndActivate { .. }) => committed_packet(m),
        ZabMessage::NewLeader { epoch, config } => wire::NewLeader {
            zxid: Zxid::new(epoch, 0).0,
            config,
        }
        .into(),
        ZabMessage::UpToDate => wire::UpToDate {}.into(),
        ZabMessage::Ack { zxid } => wire::Ack { zxid: zxid.0 }.into(),
        ZabMessage::Ping { zxid, touches } => wire::Ping {
            zxid: zxid.0,
            touches: touches
                .into_iter()
                .map(|t| wire::SessionTouch {
                    session_id: t.session,
                    timeout_ms: t.timeout_ms,
                })
                .collect(),
        }
        .into(),
        ZabMessage::Request(r) => wire::Request {
            session_id: r.session,
            cxid: r.cxid,
            op_type: r.op_type,
            body: r.body,
            auth: r
                .auth
                .into_iter()
                .map(|(scheme, id)| wire::Id { scheme, id })
                .collect(),
        }
        .into(),
        ZabMessage::Revalidate {
            session,
            timeout_ms,
        } => wire::Revalidate {
            session_id: session,
            timeout_ms,
        }
        .into(),
        ZabMessage::RevalidateReply { session, valid } => wire::RevalidateReply {
            session_id: session,
            valid,
        }
        .into(),
    };
    vec![packet]
}

fn encode_snap(zxid: Zxid, image: Bytes, fuzzy_through: Zxid) -> Vec<QuorumPacket> {
    let total = image.len();
    let mut packets = Vec::with_capacity(2 + total / wire::MAX_SNAP_CHUNK);
    packets.push(snap_start(zxid));
    let mut offset = 0;
    loop {
        let end = (offset + wire::MAX_SNAP_CHUNK).min(total);
        let last = (end == total).then_some(fuzzy_through);
        packets.push(snap_chunk(offset as u64, image.slice(offset..end), last));
        if end == total {
            return packets;
        }
        offset = end;
    }
}

/// SNAP's header: the image of the tree as of `zxid` follows in chunks.
pub fn snap_start(zxid: Zxid) -> QuorumPacket {
    wire::Snap { zxid: zxid.0 }.into()
}

/// A chunk of a SNAP's image at `offset`; the last one carries `fuzzy_through`.
pub fn snap_chunk(offset: u64, data: Bytes, fuzzy_through: Option<Zxid>) -> QuorumPacket {
    wire::SnapChunk {
        offset,
        data,
        last: fuzzy_through.is_some(),
        fuzzy_through: fuzzy_through.map_or(0, |z| z.0),
    }
    .into()
}

/// FOLLOWERINFO's and OBSERVERINFO's payload (ZooKeeper's LearnerInfo).
fn learner_info(me: ServerId, accepted_epoch: Epoch) -> wire::FollowerInfo {
    wire::FollowerInfo {
        accepted_epoch: u64::from(accepted_epoch),
        sid: me.0,
        protocol_version: wire::ZAB_PROTOCOL_VERSION,
        config_version: 0,
    }
}

/// The member id a quorum link's first packet announces, if it is a
/// FOLLOWERINFO or an OBSERVERINFO.
pub fn follower_info_sid(packet: &QuorumPacket) -> Option<ServerId> {
    match &packet.body {
        Some(Body::FollowerInfo(info) | Body::ObserverInfo(info)) => Some(ServerId(info.sid)),
        _ => None,
    }
}

/// What a quorum link delivers: a message, or a piece of a SNAP's image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Inbound {
    /// A whole message.
    Message(ZabMessage),
    /// The next piece of the image a SNAP announced.
    SnapChunk(SnapPiece),
}

/// A SNAP whose chunks are arriving.
#[derive(Debug)]
struct SnapInProgress {
    zxid: Zxid,
    received: u64,
}

/// Turns the packets of one quorum link back into Zab messages and SNAP pieces.
/// Stateful (it checks that a SNAP's chunks are contiguous, bounded and
/// uninterrupted), so use one decoder per link.
#[derive(Debug, Default)]
pub struct ZabDecoder {
    snap: Option<SnapInProgress>,
}

impl ZabDecoder {
    /// A decoder for a fresh link.
    pub fn new() -> ZabDecoder {
        ZabDecoder::default()
    }

    /// What `packet` carries: `None` for a SNAP's header (its chunks follow).
    pub fn decode(&mut self, packet: QuorumPacket) -> Result<Option<Inbound>, ConvertError> {
        let Some(body) = packet.body else {
            return bad("quorum packet without a body");
        };
        if let Body::SnapChunk(chunk) = body {
            return self.snap_chunk(chunk).map(|p| Some(Inbound::SnapChunk(p)));
        }
        if self.snap.is_some() {
            return bad(format!(
                "{:?} in the middle of a snapshot",
                body.packet_type()
            ));
        }
        if let Body::Snap(snap) = body {
            self.snap = Some(SnapInProgress {
                zxid: zxid_from_wire(snap.zxid, "SNAP")?,
                received: 0,
            });
            return Ok(None);
        }
        decode_single(body).map(|m| Some(Inbound::Message(m)))
    }

    fn snap_chunk(&mut self, chunk: wire::SnapChunk) -> Result<SnapPiece, ConvertError> {
        // Taken out: an error ends the link, a last chunk the SNAP.
        let Some(mut snap) = self.snap.take() else {
            return bad("snapshot chunk without a SNAP");
        };
        if chunk.offset != snap.received {
            return bad(format!(
                "snapshot chunk at offset {}, expected {}",
                chunk.offset, snap.received
            ));
        }
        if chunk.data.len() > wire::MAX_SNAP_CHUNK {
            return bad(format!("snapshot chunk of {} bytes", chunk.data.len()));
        }
        let end = snap.received + chunk.data.len() as u64;
        if end > MAX_SNAPSHOT_BYTES {
            return bad(format!("snapshot exceeds {MAX_SNAPSHOT_BYTES} bytes"));
        }
        let fuzzy_through = chunk.last.then_some(Zxid(chunk.fuzzy_through));
        if fuzzy_through.is_some_and(|f| f < snap.zxid) {
            return bad(format!(
                "snapshot of {} fuzzy only through {}",
                snap.zxid, chunk.fuzzy_through
            ));
        }
        let piece = SnapPiece {
            zxid: snap.zxid,
            offset: chunk.offset,
            data: chunk.data,
            fuzzy_through,
        };
        if !chunk.last {
            snap.received = end;
            self.snap = Some(snap);
        }
        Ok(piece)
    }
}

/// Every packet that is a whole message by itself.
fn decode_single(body: Body) -> Result<ZabMessage, ConvertError> {
    Ok(match body {
        Body::FollowerInfo(info) => ZabMessage::FollowerInfo {
            accepted_epoch: learner_epoch(&info)?,
        },
        Body::ObserverInfo(info) => ZabMessage::ObserverInfo {
            accepted_epoch: learner_epoch(&info)?,
        },
        Body::LeaderInfo(info) => {
            check_protocol_version(info.protocol_version)?;
            ZabMessage::LeaderInfo {
                epoch: epoch_from_wire(info.new_epoch, "new epoch")?,
            }
        }
        Body::AckEpoch(ack) => ZabMessage::AckEpoch {
            current_epoch: match ack.current_epoch {
                wire::ACK_EPOCH_ALREADY_ACCEPTED => None,
                e => match u64::try_from(e) {
                    Ok(e) => Some(epoch_from_wire(e, "ACKEPOCH current epoch")?),
                    Err(_) => return bad(format!("ACKEPOCH current epoch {e}")),
                },
            },
            last_zxid: zxid_from_wire(ack.last_logged_zxid, "ACKEPOCH")?,
            log_base: zxid_from_wire(ack.log_base, "ACKEPOCH log base")?,
            wants_snapshot: ack.wants_snapshot,
        },
        Body::Diff(d) => ZabMessage::Diff {
            zxid: zxid_from_wire(d.zxid, "DIFF")?,
        },
        Body::Trunc(t) => ZabMessage::Trunc {
            zxid: zxid_from_wire(t.zxid, "TRUNC")?,
        },
        Body::Proposal(p) => ZabMessage::Proposal {
            zxid: zxid_from_wire(p.zxid, "PROPOSAL")?,
            txn: p.txn,
        },
        Body::NewLeader(n) => new_leader(n)?,
        b @ (Body::Commit(_)
        | Body::Inform(_)
        | Body::CommitAndActivate(_)
        | Body::InformAndActivate(_)) => committed(b)?,
        Body::UpToDate(_) => ZabMessage::UpToDate,
        Body::Ack(a) => ZabMessage::Ack {
            zxid: zxid_from_wire(a.zxid, "ACK")?,
        },
        Body::Ping(p) => ZabMessage::Ping {
            zxid: zxid_from_wire(p.zxid, "PING")?,
            touches: p
                .touches
                .into_iter()
                .map(|t| SessionTouch {
                    session: t.session_id,
                    timeout_ms: t.timeout_ms,
                })
                .collect(),
        },
        Body::Request(r) => ZabMessage::Request(ForwardedRequest {
            session: r.session_id,
            cxid: r.cxid,
            op_type: r.op_type,
            body: r.body,
            auth: r.auth.into_iter().map(|id| (id.scheme, id.id)).collect(),
        }),
        Body::Revalidate(r) => ZabMessage::Revalidate {
            session: r.session_id,
            timeout_ms: r.timeout_ms,
        },
        Body::RevalidateReply(r) => ZabMessage::RevalidateReply {
            session: r.session_id,
            valid: r.valid,
        },
        other @ (Body::Sync(_) | Body::Snap(_) | Body::SnapChunk(_)) => {
            return bad(format!("{:?} is not used by zkd", other.packet_type()))
        }
    })
}

/// The accepted epoch a FOLLOWERINFO or OBSERVERINFO carries.
/// NEWLEADER: its zxid must start an epoch.
/// A commit's packet: COMMIT, INFORM, or their reconfig forms.
fn committed_packet(message: ZabMessage) -> QuorumPacket {
    match message {
        ZabMessage::Commit { zxid, digest } => wire::Commit {
            zxid: zxid.0,
            digest,
        }
        .into(),
        ZabMessage::Inform { zxid, txn } => wire::Inform { zxid: zxid.0, txn }.into(),
        ZabMessage::CommitAndActivate {
            zxid,
            designated,
            digest,
        } => wire::CommitAndActivate {
            zxid: zxid.0,
            designated_leader: designated.0,
            digest,
        }
        .into(),
        ZabMessage::InformAndActivate {
            zxid,
            designated,
            txn,
        } => wire::InformAndActivate {
            zxid: zxid.0,
            designated_leader: designated.0,
            txn,
        }
        .into(),
        other => unreachable!("{other:?} commits nothing"),
    }
}

/// COMMIT, INFORM, or their reconfig forms, which name the next leader.
fn committed(body: Body) -> Result<ZabMessage, ConvertError> {
    Ok(match body {
        Body::Commit(c) => ZabMessage::Commit {
            zxid: zxid_from_wire(c.zxid, "COMMIT")?,
            digest: c.digest,
        },
        Body::Inform(i) => ZabMessage::Inform {
            zxid: zxid_from_wire(i.zxid, "INFORM")?,
            txn: i.txn,
        },
        Body::CommitAndActivate(c) => ZabMessage::CommitAndActivate {
            zxid: zxid_from_wire(c.zxid, "COMMITANDACTIVATE")?,
            designated: ServerId(c.designated_leader),
            digest: c.digest,
        },
        Body::InformAndActivate(i) => ZabMessage::InformAndActivate {
            zxid: zxid_from_wire(i.zxid, "INFORMANDACTIVATE")?,
            designated: ServerId(i.designated_leader),
            txn: i.txn,
        },
        other => return bad(format!("{:?} commits nothing", other.packet_type())),
    })
}

fn new_leader(n: wire::NewLeader) -> Result<ZabMessage, ConvertError> {
    let zxid = zxid_from_wire(n.zxid, "NEWLEADER")?;
    if zxid.counter() != 0 {
        return bad(format!("NEWLEADER zxid {zxid} is not an epoch start"));
    }
    let (epoch, config) = (zxid.epoch(), n.config);
    Ok(ZabMessage::NewLeader { epoch, config })
}

fn learner_epoch(info: &wire::FollowerInfo) -> Result<Epoch, ConvertError> {
    check_protocol_version(info.protocol_version)?;
    epoch_from_wire(info.accepted_epoch, "accepted epoch")
}

/// zkd speaks Zab 1.0 only (LEADERINFO and ACKEPOCH); older learners skip them.
fn check_protocol_version(version: i32) -> Result<(), ConvertError> {
    if version < wire::ZAB_PROTOCOL_VERSION {
        return bad(format!("Zab protocol version {version:#x} before 1.0"));
    }
    Ok(())
}

#[cfg(test)]
#[path = "peer_wire_tests.rs"]
mod tests;
