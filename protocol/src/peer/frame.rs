//! Peer-link framing: a 4-byte big-endian length, then that many bytes of one prost
//! message ([`super::ElectionMessage`] on the election link, [`super::QuorumPacket`] on
//! the quorum link).
//!
//! Like [`crate::client_codec`], parsing is two-phase (is a whole frame here? then split
//! it off and decode it), so a link task owns its read buffer and never blocks mid-frame.
//! Every failure is a [`PeerFrameError`], never a panic: a negative or oversized length,
//! a body prost cannot decode, or a decoded message that [`PeerMessage::check`] refuses.
//! Each of them ends that peer link only; the caller closes it and the peer reconnects.
//!
//! The length is checked before anything is buffered for the body, so a hostile length
//! cannot make the receiver reserve more than the configured maximum.

use super::{InvalidMessage, PeerMessage};
use bytes::{Buf, BufMut, BytesMut};
use std::fmt;
use std::io;
use std::marker::PhantomData;
use tokio_util::codec::{Decoder, Encoder};

/// The default largest frame body: 4 MiB. The biggest regular messages are a PROPOSAL of
/// a txn near `jute.maxbuffer` (1 MiB) and a snapshot chunk
/// ([`super::zab::MAX_SNAP_CHUNK`], 1 MiB), so this leaves ample room.
pub const DEFAULT_MAX_PEER_FRAME: usize = 4 << 20;

/// Why a peer frame could not be read or written. Any of these ends the link.
#[derive(Debug)]
pub enum PeerFrameError {
    /// The socket failed.
    Io(io::Error),
    /// The length prefix, read as ZooKeeper's signed `int`, is negative.
    NegativeLength(i32),
    /// The frame (read or about to be written) is longer than the codec's maximum.
    Oversized {
        /// The frame body's length.
        len: usize,
        /// The codec's maximum.
        max: usize,
    },
    /// The body is not a valid prost encoding of the expected message.
    Decode(prost::DecodeError),
    /// The body decoded but means nothing (no message in the oneof, an unknown state...).
    Invalid(InvalidMessage),
}

impl fmt::Display for PeerFrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PeerFrameError::Io(e) => write!(f, "peer link i/o error: {e}"),
            PeerFrameError::NegativeLength(len) => write!(f, "peer frame length {len} < 0"),
            PeerFrameError::Oversized { len, max } => {
                write!(f, "peer frame length {len} exceeds maximum {max}")
            }
            PeerFrameError::Decode(e) => write!(f, "undecodable peer frame: {e}"),
            PeerFrameError::Invalid(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for PeerFrameError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            PeerFrameError::Io(e) => Some(e),
            PeerFrameError::Decode(e) => Some(e),
            PeerFrameError::Invalid(e) => Some(e),
            PeerFrameError::NegativeLength(_) | PeerFrameError::Oversized { .. } => None,
        }
    }
}

impl From<io::Error> for PeerFrameError {
    fn from(e: io::Error) -> PeerFrameError {
        PeerFrameError::Io(e)
    }
}

/// A tokio-util codec reading and writing length-prefixed frames of one message type `M`.
pub struct PeerCodec<M> {
    max_frame: usize,
    _message: PhantomData<fn() -> M>,
}

impl<M> PeerCodec<M> {
    /// A codec refusing frame bodies longer than [`DEFAULT_MAX_PEER_FRAME`].
    pub fn new() -> PeerCodec<M> {
        PeerCodec::with_max_frame(DEFAULT_MAX_PEER_FRAME)
    }

    /// A codec refusing frame bodies longer than `max_frame` bytes (capped at `i32::MAX`,
    /// the largest length the prefix can carry).
    pub fn with_max_frame(max_frame: usize) -> PeerCodec<M> {
        PeerCodec {
            max_frame: max_frame.min(i32::MAX as usize),
            _message: PhantomData,
        }
    }

    /// The largest frame body this codec reads or writes.
    pub fn max_frame(&self) -> usize {
        self.max_frame
    }
}

impl<M> Default for PeerCodec<M> {
    fn default() -> PeerCodec<M> {
        PeerCodec::new()
    }
}

// Manual impls: derives would needlessly require `M: Clone` / `M: Debug`.
impl<M> Clone for PeerCodec<M> {
    fn clone(&self) -> PeerCodec<M> {
        PeerCodec::with_max_frame(self.max_frame)
    }
}

impl<M> fmt::Debug for PeerCodec<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PeerCodec")
            .field("max_frame", &self.max_frame)
            .finish()
    }
}

impl<M: PeerMessage> Decoder for PeerCodec<M> {
    type Item = M;
    type Error = PeerFrameError;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<M>, PeerFrameError> {
        if src.len() < 4 {
            return Ok(None);
        }
        let len = i32::from_be_bytes([src[0], src[1], src[2], src[3]]);
        if len < 0 {
            return Err(PeerFrameError::NegativeLength(len));
        }
        let len = len as usize;
        if len > self.max_frame {
            return Err(PeerFrameError::Oversized {
                len,
                max: self.max_frame,
            });
        }
        if src.len() < 4 + len {
            src.reserve(4 + len - src.len());
            return Ok(None);
        }
        src.advance(4);
        let body = src.split_to(len);
        let message = M::decode(body.freeze()).map_err(PeerFrameError::Decode)?;
        message.check().map_err(PeerFrameError::Invalid)?;
        Ok(Some(message))
    }
}

impl<M: PeerMessage> Encoder<M> for PeerCodec<M> {
    type Error = PeerFrameError;

    fn encode(&mut self, item: M, dst: &mut BytesMut) -> Result<(), PeerFrameError> {
        Encoder::<&M>::encode(self, &item, dst)
    }
}

impl<M: PeerMessage> Encoder<&M> for PeerCodec<M> {
    type Error = PeerFrameError;

    /// Writes one frame. A message longer than the maximum is refused rather than sent,
    /// since the peer would drop the link on it.
    fn encode(&mut self, item: &M, dst: &mut BytesMut) -> Result<(), PeerFrameError> {
        let len = item.encoded_len();
        if len > self.max_frame {
            return Err(PeerFrameError::Oversized {
                len,
                max: self.max_frame,
            });
        }
        dst.reserve(4 + len);
        dst.put_u32(len as u32);
        item.encode_raw(dst);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::peer::election::{ElectionHello, Notification, ServerState};
    use crate::peer::zab::{self, Ack, QuorumPacket, SnapChunk, MAX_SNAP_CHUNK};
    use crate::peer::ElectionMessage;
    use bytes::Bytes;
    use proptest::prelude::*;
    use prost::Message;

    fn frame(body: &[u8]) -> BytesMut {
        let mut buf = BytesMut::new();
        buf.put_u32(body.len() as u32);
        buf.put_slice(body);
        buf
    }

    #[test]
    fn every_quorum_packet_round_trips_through_the_codec() {
        let mut codec = PeerCodec::<QuorumPacket>::new();
        let mut wire = BytesMut::new();
        let packets: Vec<QuorumPacket> = zab::tests::every_packet()
            .into_iter()
            .map(|(p, _, _)| p)
            .collect();
        for p in &packets {
            codec.encode(p, &mut wire).unwrap();
        }
        // Delivered a byte at a time, frames come out whole and in order.
        let mut rx = BytesMut::new();
        let mut got = Vec::new();
        for byte in wire {
            rx.put_u8(byte);
            if let Some(p) = codec.decode(&mut rx).unwrap() {
                got.push(p);
            }
        }
        assert!(rx.is_empty());
        assert_eq!(got, packets);
    }

    #[test]
    fn election_messages_round_trip_through_the_codec() {
        let mut codec = PeerCodec::<ElectionMessage>::with_max_frame(
            crate::peer::election::MAX_ELECTION_PAYLOAD,
        );
        let hello: ElectionMessage = ElectionHello {
            protocol_version: crate::peer::election::PROTOCOL_VERSION_V1,
            sid: 3,
            election_addr: "127.0.0.1:3890".into(),
        }
        .into();
        let vote: ElectionMessage = Notification {
            state: ServerState::Looking as i32,
            leader: 3,
            zxid: 0x1_0000_0002,
            election_epoch: 1,
            peer_epoch: 1,
            sid: 3,
            config_version: 0,
            config: Bytes::new(),
        }
        .into();
        let mut wire = BytesMut::new();
        codec.encode(hello.clone(), &mut wire).unwrap();
        codec.encode(&vote, &mut wire).unwrap();
        assert_eq!(codec.decode(&mut wire).unwrap(), Some(hello));
        assert_eq!(codec.decode(&mut wire).unwrap(), Some(vote));
        assert_eq!(codec.decode(&mut wire).unwrap(), None);
    }

    #[test]
    fn waits_for_a_whole_frame() {
        let mut codec = PeerCodec::<QuorumPacket>::new();
        let whole = frame(&QuorumPacket::from(Ack { zxid: 5 }).encode_to_vec());
        let mut buf = BytesMut::from(&whole[..whole.len() - 1]);
        assert!(codec.decode(&mut buf).unwrap().is_none());
        assert!(codec
            .decode(&mut BytesMut::from(&whole[..3]))
            .unwrap()
            .is_none());
        buf.put_u8(whole[whole.len() - 1]);
        assert_eq!(
            codec.decode(&mut buf).unwrap(),
            Some(QuorumPacket::from(Ack { zxid: 5 }))
        );
    }

    #[test]
    fn rejects_negative_and_oversized_lengths_before_buffering() {
        let mut codec = PeerCodec::<QuorumPacket>::with_max_frame(16);
        let mut neg = BytesMut::from(&[0xff, 0xff, 0xff, 0xfe][..]);
        assert!(matches!(
            codec.decode(&mut neg),
            Err(PeerFrameError::NegativeLength(-2))
        ));
        let mut big = BytesMut::from(&[0, 0, 0, 17][..]);
        assert!(matches!(
            codec.decode(&mut big),
            Err(PeerFrameError::Oversized { len: 17, max: 16 })
        ));
        assert!(big.capacity() < 1024);
        // The default limit: 4 MiB accepted, one byte more refused, with no body yet.
        let mut codec = PeerCodec::<QuorumPacket>::new();
        let mut at = BytesMut::from(&(DEFAULT_MAX_PEER_FRAME as u32).to_be_bytes()[..]);
        assert!(codec.decode(&mut at).unwrap().is_none());
        let mut over = BytesMut::from(&(DEFAULT_MAX_PEER_FRAME as u32 + 1).to_be_bytes()[..]);
        assert!(matches!(
            codec.decode(&mut over),
            Err(PeerFrameError::Oversized { .. })
        ));
        let mut huge = BytesMut::from(&[0x7f, 0xff, 0xff, 0xff][..]);
        assert!(codec.decode(&mut huge).is_err());
    }

    #[test]
    fn refuses_to_encode_an_oversized_frame() {
        let mut codec = PeerCodec::<QuorumPacket>::with_max_frame(MAX_SNAP_CHUNK);
        let chunk: QuorumPacket = SnapChunk {
            offset: 0,
            data: Bytes::from(vec![1; MAX_SNAP_CHUNK]),
            last: true,
            fuzzy_through: 0,
        }
        .into();
        let mut dst = BytesMut::new();
        assert!(matches!(
            codec.encode(&chunk, &mut dst),
            Err(PeerFrameError::Oversized { .. })
        ));
        assert!(dst.is_empty());
        // The default limit carries a maximal chunk.
        PeerCodec::<QuorumPacket>::new()
            .encode(chunk, &mut dst)
            .unwrap();
        assert_eq!(
            dst.len(),
            4 + u32::from_be_bytes(dst[..4].try_into().unwrap()) as usize
        );
    }

    #[test]
    fn garbage_and_meaningless_bodies_are_errors() {
        let mut codec = PeerCodec::<QuorumPacket>::new();
        // A truncated varint.
        assert!(matches!(
            codec.decode(&mut frame(&[0x08, 0xff])),
            Err(PeerFrameError::Decode(_))
        ));
        // Wire type 7 does not exist.
        assert!(matches!(
            codec.decode(&mut frame(&[0x0f])),
            Err(PeerFrameError::Decode(_))
        ));
        // An empty frame: a packet without a body.
        assert!(matches!(
            codec.decode(&mut frame(&[])),
            Err(PeerFrameError::Invalid(_))
        ));
        // Only an unknown field (tag 22): prost skips it, leaving no body.
        assert!(matches!(
            codec.decode(&mut frame(&[0xb0, 0x01, 0x01])),
            Err(PeerFrameError::Invalid(_))
        ));
        // A notification with an unknown state.
        let bad: ElectionMessage = Notification {
            state: 4,
            ..Notification::default()
        }
        .into();
        assert!(matches!(
            PeerCodec::<ElectionMessage>::new().decode(&mut frame(&bad.encode_to_vec())),
            Err(PeerFrameError::Invalid(_))
        ));
    }

    /// Bytes that often begin with a plausible length, so bodies get decoded too.
    fn framed_garbage() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..512),
            proptest::collection::vec(any::<u8>(), 0..256).prop_map(|body| {
                let mut out = (body.len() as u32).to_be_bytes().to_vec();
                out.extend(body);
                out
            }),
        ]
    }

    /// Valid frames with a few bytes flipped.
    fn mutated_frames() -> impl Strategy<Value = Vec<u8>> {
        let packets = zab::tests::every_packet();
        (
            0..packets.len(),
            proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
        )
            .prop_map(move |(i, flips)| {
                let mut buf = BytesMut::new();
                PeerCodec::<QuorumPacket>::new()
                    .encode(&packets[i].0, &mut buf)
                    .unwrap();
                let mut out = buf.to_vec();
                for (at, byte) in flips {
                    let at = at.index(out.len());
                    out[at] ^= byte;
                }
                out
            })
    }

    fn drain<M: PeerMessage>(bytes: &[u8]) {
        let mut codec = PeerCodec::<M>::with_max_frame(1 << 16);
        let mut buf = BytesMut::from(bytes);
        while let Ok(Some(_)) = codec.decode(&mut buf) {}
    }

    proptest! {
        #[test]
        fn frame_decoders_never_panic(bytes in framed_garbage()) {
            drain::<QuorumPacket>(&bytes);
            drain::<ElectionMessage>(&bytes);
        }

        #[test]
        fn mutated_frames_never_panic(bytes in mutated_frames()) {
            drain::<QuorumPacket>(&bytes);
            drain::<ElectionMessage>(&bytes);
        }

        #[test]
        fn message_decoders_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = QuorumPacket::decode(bytes.as_slice()).map(|p| p.check());
            let _ = ElectionMessage::decode(bytes.as_slice()).map(|m| m.check());
            let _ = Notification::decode(bytes.as_slice());
            let _ = ElectionHello::decode(bytes.as_slice());
            let _ = zab::Request::decode(bytes.as_slice());
            let _ = zab::Ping::decode(bytes.as_slice());
        }

        #[test]
        fn generated_packets_round_trip(
            session_id in any::<i64>(),
            cxid in any::<i32>(),
            op_type in any::<i32>(),
            body in proptest::collection::vec(any::<u8>(), 0..64),
            auth in proptest::collection::vec((".{0,8}", ".{0,16}"), 0..3),
            touches in proptest::collection::vec((any::<i64>(), any::<i32>()), 0..8),
            zxid in any::<i64>(),
        ) {
            let request: QuorumPacket = zab::Request {
                session_id,
                cxid,
                op_type,
                body: Bytes::from(body),
                auth: auth
                    .into_iter()
                    .map(|(scheme, id)| zab::Id { scheme, id })
                    .collect(),
            }
            .into();
            let ping: QuorumPacket = zab::Ping {
                zxid,
                touches: touches
                    .into_iter()
                    .map(|(session_id, timeout_ms)| zab::SessionTouch { session_id, timeout_ms })
                    .collect(),
            }
            .into();
            let mut codec = PeerCodec::<QuorumPacket>::new();
            let mut wire = BytesMut::new();
            codec.encode(&request, &mut wire).unwrap();
            codec.encode(&ping, &mut wire).unwrap();
            prop_assert_eq!(codec.decode(&mut wire).unwrap(), Some(request));
            prop_assert_eq!(codec.decode(&mut wire).unwrap(), Some(ping));
            prop_assert!(wire.is_empty());
        }
    }
}
