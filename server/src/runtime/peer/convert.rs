//! Pure translations between the core's peer messages and their prost wire form
//! ([`zkd_protocol::peer`]): election notifications both ways, a Zab message into
//! one or more quorum packets, and a stateful decoder back (a SNAP travels as a
//! header and its chunks, and comes out whole).
//!
//! Every decoding failure is a [`ConvertError`], never a panic; the link task
//! closes the link on it.

use crate::core::election::{Notification, ServerId, ServerState, Vote};
use crate::core::zab::{Epoch, ForwardedRequest, SessionTouch, ZabMessage};
use bytes::{Bytes, BytesMut};
use std::fmt;
use zkd_protocol::peer::election as wire_election;
use zkd_protocol::peer::zab::{self as wire, quorum_packet::Body, QuorumPacket};
use zkd_protocol::Zxid;

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

fn epoch_from_wire(epoch: u64, what: &str) -> Result<Epoch, ConvertError> {
    Epoch::try_from(epoch).or_else(|_| bad(format!("{what} {epoch} does not fit in 32 bits")))
}

/// The wire form of a notification (zkd's wire: a static configuration, version 0).
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
        config_version: 0,
        config: Bytes::new(),
    }
}

/// The core form of a received notification. OBSERVING senders and unknown states
/// are errors (zkd ensembles have no observers); so is a peer epoch past 32 bits.
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
    Ok(Notification {
        sender: ServerId(n.sid),
        state,
        vote: Vote {
            leader: ServerId(n.leader),
            zxid: Zxid(n.zxid),
            peer_epoch: epoch_from_wire(n.peer_epoch, "peer epoch")?,
        },
        election_epoch: n.election_epoch,
    })
}

/// The packets carrying `message` from member `me`, in order: one, or for a SNAP a
/// header and its chunks of at most [`wire::MAX_SNAP_CHUNK`] bytes (at least one,
/// the last flagged).
pub fn encode_zab(me: ServerId, message: ZabMessage) -> Vec<QuorumPacket> {
    let packet: QuorumPacket = match message {
        ZabMessage::Snap { zxid, image } => return encode_snap(zxid, image),
        ZabMessage::FollowerInfo { accepted_epoch } => wire::FollowerInfo {
            accepted_epoch: u64::from(accepted_epoch),
            sid: me.0,
            protocol_version: wire::ZAB_PROTOCOL_VERSION,
            config_version: 0,
        }
        .into(),
        ZabMessage::LeaderInfo { epoch } => wire::LeaderInfo {
            new_epoch: u64::from(epoch),
            protocol_version: wire::ZAB_PROTOCOL_VERSION,
        }
        .into(),
        ZabMessage::AckEpoch {
            current_epoch,
            last_zxid,
            log_base,
        } => wire::AckEpoch {
            current_epoch: current_epoch.map_or(wire::ACK_EPOCH_ALREADY_ACCEPTED, i64::from),
            last_logged_zxid: last_zxid.0,
            log_base: log_base.0,
        }
        .into(),
        ZabMessage::Diff { zxid } => wire::Diff { zxid: zxid.0 }.into(),
        ZabMessage::Trunc { zxid } => wire::Trunc { zxid: zxid.0 }.into(),
        ZabMessage::Proposal { zxid, txn } => wire::Proposal { zxid: zxid.0, txn }.into(),
        ZabMessage::Commit { zxid } => wire::Commit { zxid: zxid.0 }.into(),
        ZabMessage::NewLeader { epoch } => wire::NewLeader {
            zxid: Zxid::new(epoch, 0).0,
            config: Bytes::new(),
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

fn encode_snap(zxid: Zxid, image: Bytes) -> Vec<QuorumPacket> {
    let total = image.len();
    let mut packets = Vec::with_capacity(2 + total / wire::MAX_SNAP_CHUNK);
    packets.push(
        wire::Snap {
            zxid: zxid.0,
            total_size: total as u64,
        }
        .into(),
    );
    let mut offset = 0;
    loop {
        let end = (offset + wire::MAX_SNAP_CHUNK).min(total);
        packets.push(
            wire::SnapChunk {
                offset: offset as u64,
                data: image.slice(offset..end),
                last: end == total,
            }
            .into(),
        );
        if end == total {
            return packets;
        }
        offset = end;
    }
}

/// The member id a quorum link's first packet announces, if it is a FOLLOWERINFO.
pub fn follower_info_sid(packet: &QuorumPacket) -> Option<ServerId> {
    match &packet.body {
        Some(Body::FollowerInfo(info)) => Some(ServerId(info.sid)),
        _ => None,
    }
}

/// A snapshot being reassembled from its chunks.
#[derive(Debug)]
struct SnapAssembly {
    zxid: Zxid,
    total: u64,
    image: BytesMut,
}

/// Turns the packets of one quorum link back into Zab messages. Stateful: it holds
/// a SNAP's chunks until the last one, so use one decoder per link.
#[derive(Debug, Default)]
pub struct ZabDecoder {
    snap: Option<SnapAssembly>,
}

impl ZabDecoder {
    /// A decoder for a fresh link.
    pub fn new() -> ZabDecoder {
        ZabDecoder::default()
    }

    /// The message `packet` completes: `None` while a snapshot is being reassembled.
    pub fn decode(&mut self, packet: QuorumPacket) -> Result<Option<ZabMessage>, ConvertError> {
        let Some(body) = packet.body else {
            return bad("quorum packet without a body");
        };
        if let Body::SnapChunk(chunk) = body {
            return self.snap_chunk(chunk);
        }
        if self.snap.is_some() {
            return bad(format!(
                "{:?} in the middle of a snapshot",
                body.packet_type()
            ));
        }
        if let Body::Snap(snap) = body {
            return self.snap_start(snap);
        }
        decode_single(body).map(Some)
    }

    fn snap_start(&mut self, snap: wire::Snap) -> Result<Option<ZabMessage>, ConvertError> {
        if snap.total_size > MAX_SNAPSHOT_BYTES {
            return bad(format!(
                "snapshot of {} bytes exceeds {MAX_SNAPSHOT_BYTES}",
                snap.total_size
            ));
        }
        // Grow with the chunks actually received, not with what the header claims.
        let reserve = snap.total_size.min(4 * wire::MAX_SNAP_CHUNK as u64) as usize;
        self.snap = Some(SnapAssembly {
            zxid: Zxid(snap.zxid),
            total: snap.total_size,
            image: BytesMut::with_capacity(reserve),
        });
        Ok(None)
    }

    fn snap_chunk(&mut self, chunk: wire::SnapChunk) -> Result<Option<ZabMessage>, ConvertError> {
        // Taken out: an error drops the assembly with the link.
        let Some(mut snap) = self.snap.take() else {
            return bad("snapshot chunk without a SNAP");
        };
        let received = snap.image.len() as u64;
        if chunk.offset != received {
            return bad(format!(
                "snapshot chunk at offset {}, expected {received}",
                chunk.offset
            ));
        }
        let end = received + chunk.data.len() as u64;
        if end > snap.total {
            return bad(format!("snapshot chunk ends at {end}, past {}", snap.total));
        }
        if chunk.last != (end == snap.total) {
            return bad(format!(
                "snapshot chunk ending at {end} of {} has last = {}",
                snap.total, chunk.last
            ));
        }
        snap.image.extend_from_slice(&chunk.data);
        if !chunk.last {
            self.snap = Some(snap);
            return Ok(None);
        }
        Ok(Some(ZabMessage::Snap {
            zxid: snap.zxid,
            image: snap.image.freeze(),
        }))
    }
}

/// Every packet that is a whole message by itself.
fn decode_single(body: Body) -> Result<ZabMessage, ConvertError> {
    Ok(match body {
        Body::FollowerInfo(info) => {
            check_protocol_version(info.protocol_version)?;
            ZabMessage::FollowerInfo {
                accepted_epoch: epoch_from_wire(info.accepted_epoch, "accepted epoch")?,
            }
        }
        Body::LeaderInfo(info) => {
            check_protocol_version(info.protocol_version)?;
            ZabMessage::LeaderInfo {
                epoch: epoch_from_wire(info.new_epoch, "new epoch")?,
            }
        }
        Body::AckEpoch(ack) => ZabMessage::AckEpoch {
            current_epoch: match ack.current_epoch {
                wire::ACK_EPOCH_ALREADY_ACCEPTED => None,
                e => match Epoch::try_from(e) {
                    Ok(e) => Some(e),
                    Err(_) => return bad(format!("ACKEPOCH current epoch {e}")),
                },
            },
            last_zxid: Zxid(ack.last_logged_zxid),
            log_base: Zxid(ack.log_base),
        },
        Body::Diff(d) => ZabMessage::Diff { zxid: Zxid(d.zxid) },
        Body::Trunc(t) => ZabMessage::Trunc { zxid: Zxid(t.zxid) },
        Body::Proposal(p) => ZabMessage::Proposal {
            zxid: Zxid(p.zxid),
            txn: p.txn,
        },
        Body::Commit(c) => ZabMessage::Commit { zxid: Zxid(c.zxid) },
        Body::NewLeader(n) => {
            let zxid = Zxid(n.zxid);
            if zxid.counter() != 0 {
                return bad(format!("NEWLEADER zxid {zxid} is not an epoch start"));
            }
            ZabMessage::NewLeader {
                epoch: zxid.epoch(),
            }
        }
        Body::UpToDate(_) => ZabMessage::UpToDate,
        Body::Ack(a) => ZabMessage::Ack { zxid: Zxid(a.zxid) },
        Body::Ping(p) => ZabMessage::Ping {
            zxid: Zxid(p.zxid),
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
        other @ (Body::Sync(_)
        | Body::Inform(_)
        | Body::ObserverInfo(_)
        | Body::Snap(_)
        | Body::SnapChunk(_)) => {
            return bad(format!("{:?} is not used by zkd", other.packet_type()))
        }
    })
}

/// zkd speaks Zab 1.0 only (LEADERINFO and ACKEPOCH); older learners skip them.
fn check_protocol_version(version: i32) -> Result<(), ConvertError> {
    if version < wire::ZAB_PROTOCOL_VERSION {
        return bad(format!("Zab protocol version {version:#x} before 1.0"));
    }
    Ok(())
}

#[cfg(test)]
#[path = "convert_tests.rs"]
mod tests;
