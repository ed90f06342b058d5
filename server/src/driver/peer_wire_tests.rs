//! Round trips of every core peer message through its wire form, and the
//! malformed inputs that must be errors.

use super::*;
use zkd_protocol::peer::zab::MAX_SNAP_CHUNK;

const ME: ServerId = ServerId(3);

fn every_message() -> Vec<ZabMessage> {
    let z = Zxid::new(2, 7);
    vec![
        ZabMessage::FollowerInfo { accepted_epoch: 4 },
        ZabMessage::ObserverInfo { accepted_epoch: 4 },
        ZabMessage::LeaderInfo { epoch: 5 },
        ZabMessage::AckEpoch {
            current_epoch: Some(1),
            last_zxid: z,
            log_base: Zxid::new(1, 3),
            wants_snapshot: false,
        },
        ZabMessage::AckEpoch {
            current_epoch: None,
            last_zxid: Zxid::ZERO,
            log_base: Zxid::ZERO,
            wants_snapshot: false,
        },
        ZabMessage::Diff { zxid: z },
        ZabMessage::Trunc { zxid: z },
        ZabMessage::Snap {
            zxid: z,
            image: SnapshotSource::Whole(Bytes::from_static(b"a small tree")),
            fuzzy_through: Zxid::new(2, 9),
        },
        ZabMessage::Proposal {
            zxid: z,
            txn: Bytes::from_static(b"txn header and record"),
        },
        ZabMessage::Commit {
            zxid: z,
            digest: None,
        },
        ZabMessage::Inform {
            zxid: z,
            txn: Bytes::from_static(b"committed txn"),
        },
        ZabMessage::CommitAndActivate {
            zxid: z,
            designated: ServerId(2),
            digest: Some(9),
        },
        ZabMessage::InformAndActivate {
            zxid: z,
            designated: ServerId(2),
            txn: Bytes::from_static(b"committed reconfig"),
        },
        ZabMessage::NewLeader {
            epoch: 2,
            config: Bytes::new(),
        },
        ZabMessage::NewLeader {
            epoch: MAX_EPOCH,
            config: Bytes::new(),
        },
        ZabMessage::UpToDate,
        ZabMessage::Ack { zxid: z },
        ZabMessage::Ping {
            zxid: z,
            touches: vec![],
        },
        ZabMessage::Ping {
            zxid: z,
            touches: vec![
                SessionTouch {
                    session: 5,
                    timeout_ms: 4000,
                },
                SessionTouch {
                    session: -7,
                    timeout_ms: 30000,
                },
            ],
        },
        ZabMessage::Request(ForwardedRequest {
            session: 0x1000_0abc_0000_0001,
            cxid: 12,
            op_type: 1,
            body: Bytes::from_static(b"\0\0\0\x02/a"),
            auth: vec![
                ("digest".into(), "u:pw".into()),
                ("ip".into(), "127.0.0.1".into()),
            ],
        }),
        ZabMessage::Revalidate {
            session: 9,
            timeout_ms: 6000,
        },
        ZabMessage::RevalidateReply {
            session: 9,
            valid: true,
        },
        ZabMessage::RevalidateReply {
            session: 10,
            valid: false,
        },
    ]
}

/// Feeds packets to a fresh decoder: one message, or a SNAP whose pieces
/// are put back together (the member stages them instead).
fn decode_all(packets: Vec<QuorumPacket>) -> Result<ZabMessage, ConvertError> {
    let mut decoder = ZabDecoder::new();
    let n = packets.len();
    let mut image = Vec::new();
    for (i, packet) in packets.into_iter().enumerate() {
        let out = decoder.decode(packet)?;
        match out {
            Some(Inbound::Message(message)) => {
                assert_eq!(i + 1, n, "a message before the last packet");
                return Ok(message);
            }
            Some(Inbound::SnapChunk(piece)) => {
                assert_eq!(piece.offset, image.len() as u64);
                image.extend_from_slice(&piece.data);
                if let Some(fuzzy_through) = piece.fuzzy_through {
                    assert_eq!(i + 1, n, "a last piece before the last packet");
                    return Ok(ZabMessage::Snap {
                        zxid: piece.zxid,
                        image: SnapshotSource::Whole(Bytes::from(image)),
                        fuzzy_through,
                    });
                }
            }
            None => assert_eq!(i, 0, "only a SNAP header yields nothing"),
        }
    }
    unreachable!("no packets, or no last piece")
}

#[test]
fn every_zab_message_round_trips() {
    for message in every_message() {
        let packets = encode_zab(ME, message.clone());
        assert_eq!(decode_all(packets), Ok(message));
    }
}

#[test]
fn wire_fields_match_zookeeper() {
    let [info] = &encode_zab(ME, ZabMessage::FollowerInfo { accepted_epoch: 4 })[..] else {
        panic!("one packet");
    };
    assert_eq!(follower_info_sid(info), Some(ME));
    assert_eq!(info.body.as_ref().unwrap().zookeeper_zxid(), Some(4 << 32));
    let [leader] = &encode_zab(
        ME,
        ZabMessage::NewLeader {
            epoch: 2,
            config: Bytes::new(),
        },
    )[..] else {
        panic!("one packet");
    };
    assert_eq!(
        leader.body.as_ref().unwrap().zookeeper_zxid(),
        Some(2 << 32)
    );
    assert_eq!(follower_info_sid(leader), None);
    let [observer] = &encode_zab(ME, ZabMessage::ObserverInfo { accepted_epoch: 4 })[..] else {
        panic!("one packet");
    };
    assert_eq!(follower_info_sid(observer), Some(ME));
    let ack = encode_zab(
        ME,
        ZabMessage::AckEpoch {
            current_epoch: None,
            last_zxid: Zxid(8),
            log_base: Zxid(2),
            wants_snapshot: false,
        },
    );
    assert_eq!(
        ack,
        vec![QuorumPacket::from(wire::AckEpoch {
            current_epoch: -1,
            last_logged_zxid: 8,
            log_base: 2,
            wants_snapshot: false,
        })]
    );
}

#[test]
fn snapshots_split_into_bounded_chunks_and_reassemble() {
    for len in [
        0,
        1,
        MAX_SNAP_CHUNK,
        MAX_SNAP_CHUNK + 1,
        3 * MAX_SNAP_CHUNK,
        3 * MAX_SNAP_CHUNK + 5,
    ] {
        let image = Bytes::from((0..len).map(|i| (i % 251) as u8).collect::<Vec<u8>>());
        let message = ZabMessage::Snap {
            zxid: Zxid::new(1, 9),
            image: SnapshotSource::Whole(image),
            fuzzy_through: Zxid::new(1, 12),
        };
        let packets = encode_zab(ME, message.clone());
        assert_eq!(
            packets.len(),
            1 + len.div_ceil(MAX_SNAP_CHUNK).max(1),
            "{len}"
        );
        for p in &packets[1..] {
            let Some(Body::SnapChunk(chunk)) = &p.body else {
                panic!("chunks follow the header");
            };
            assert!(chunk.data.len() <= MAX_SNAP_CHUNK);
        }
        assert_eq!(decode_all(packets), Ok(message), "{len}");
    }
}

#[test]
fn a_decoder_continues_after_a_snapshot() {
    let mut decoder = ZabDecoder::new();
    let mut packets = encode_zab(
        ME,
        ZabMessage::Snap {
            zxid: Zxid(1),
            image: SnapshotSource::Whole(Bytes::from(vec![7; MAX_SNAP_CHUNK + 3])),
            fuzzy_through: Zxid(1),
        },
    );
    packets.extend(encode_zab(
        ME,
        ZabMessage::Commit {
            zxid: Zxid(2),
            digest: None,
        },
    ));
    let out: Vec<_> = packets
        .into_iter()
        .filter_map(|p| decoder.decode(p).unwrap())
        .collect();
    assert_eq!(out.len(), 3, "two pieces and the COMMIT");
    assert_eq!(
        out[2],
        Inbound::Message(ZabMessage::Commit {
            zxid: Zxid(2),
            digest: None
        })
    );
}

fn snap() -> QuorumPacket {
    snap_start(Zxid(5))
}

fn chunk(offset: u64, len: usize, last: bool) -> QuorumPacket {
    snap_chunk(offset, Bytes::from(vec![1; len]), last.then_some(Zxid(7)))
}

fn decode_seq(packets: Vec<QuorumPacket>) -> Result<Vec<Inbound>, ConvertError> {
    let mut decoder = ZabDecoder::new();
    let mut out = Vec::new();
    for p in packets {
        out.extend(decoder.decode(p)?);
    }
    Ok(out)
}

#[test]
fn malformed_snapshots_are_errors() {
    let stale = wire::SnapChunk {
        offset: 0,
        data: Bytes::from_static(b"x"),
        last: true,
        fuzzy_through: 4,
    };
    let cases: Vec<(&str, Vec<QuorumPacket>)> = vec![
        ("chunk without SNAP", vec![chunk(0, 4, true)]),
        (
            "wrong offset",
            vec![snap(), chunk(0, 4, false), chunk(5, 4, true)],
        ),
        ("gap at start", vec![snap(), chunk(4, 4, true)]),
        (
            "oversize chunk",
            vec![snap(), chunk(0, MAX_SNAP_CHUNK + 1, true)],
        ),
        ("fuzzy before the image", vec![snap(), stale.into()]),
        (
            "interrupted",
            vec![snap(), chunk(0, 4, false), wire::Ack { zxid: 1 }.into()],
        ),
        ("SNAP inside SNAP", vec![snap(), snap()]),
        (
            "chunk after a finished SNAP",
            vec![snap(), chunk(0, 1, true), chunk(1, 1, true)],
        ),
    ];
    for (what, packets) in cases {
        assert!(decode_seq(packets).is_err(), "{what}");
    }
    // Pieces come out as they arrive; the last one says how fuzzy the image is.
    let out = decode_seq(vec![snap(), chunk(0, 4, false), chunk(4, 2, true)]).unwrap();
    let pieces: Vec<_> = out
        .iter()
        .map(|i| match i {
            Inbound::SnapChunk(p) => (p.zxid, p.offset, p.data.len(), p.fuzzy_through),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        pieces,
        vec![(Zxid(5), 0, 4, None), (Zxid(5), 4, 2, Some(Zxid(7)))]
    );
}

/// A peer streaming without end is cut off at the image size limit.
#[test]
fn a_snapshot_past_the_size_limit_is_an_error() {
    let mut decoder = ZabDecoder::new();
    decoder.decode(snap()).unwrap();
    let data = Bytes::from(vec![0; MAX_SNAP_CHUNK]);
    let chunks = MAX_SNAPSHOT_BYTES / MAX_SNAP_CHUNK as u64;
    for i in 0..chunks {
        let offset = i * MAX_SNAP_CHUNK as u64;
        decoder
            .decode(snap_chunk(offset, data.clone(), None))
            .unwrap();
    }
    let past = snap_chunk(MAX_SNAPSHOT_BYTES, Bytes::from_static(b"!"), None);
    assert!(decoder.decode(past).is_err());
}

#[test]
fn packets_zkd_does_not_use_are_errors() {
    let info = wire::FollowerInfo {
        accepted_epoch: 1,
        sid: 2,
        protocol_version: wire::ZAB_PROTOCOL_VERSION,
        config_version: 0,
    };
    let cases: Vec<(&str, QuorumPacket)> = vec![
        ("no body", QuorumPacket::default()),
        (
            "SYNC",
            wire::Sync {
                session_id: 1,
                cxid: 2,
            }
            .into(),
        ),
        (
            "epoch past 32 bits",
            wire::FollowerInfo {
                accepted_epoch: 1 << 32,
                ..info.clone()
            }
            .into(),
        ),
        (
            "pre-1.0 learner",
            wire::FollowerInfo {
                protocol_version: 0,
                ..info
            }
            .into(),
        ),
        (
            "pre-1.0 leader",
            wire::LeaderInfo {
                new_epoch: 1,
                protocol_version: 0,
            }
            .into(),
        ),
        (
            "LEADERINFO epoch past 32 bits",
            wire::LeaderInfo {
                new_epoch: u64::MAX,
                protocol_version: wire::ZAB_PROTOCOL_VERSION,
            }
            .into(),
        ),
        (
            "negative current epoch",
            wire::AckEpoch {
                current_epoch: -2,
                last_logged_zxid: 0,
                log_base: 0,
                wants_snapshot: false,
            }
            .into(),
        ),
        (
            "current epoch past 32 bits",
            wire::AckEpoch {
                current_epoch: 1 << 32,
                last_logged_zxid: 0,
                log_base: 0,
                wants_snapshot: false,
            }
            .into(),
        ),
        (
            "accepted epoch whose zxids are negative (finding 12)",
            wire::FollowerInfo {
                accepted_epoch: 1 << 31,
                sid: 2,
                protocol_version: wire::ZAB_PROTOCOL_VERSION,
                config_version: 0,
            }
            .into(),
        ),
        (
            "current epoch whose zxids are negative",
            wire::AckEpoch {
                current_epoch: 1 << 31,
                last_logged_zxid: 0,
                log_base: 0,
                wants_snapshot: false,
            }
            .into(),
        ),
        (
            "negative last zxid",
            wire::AckEpoch {
                current_epoch: 1,
                last_logged_zxid: -1,
                log_base: 0,
                wants_snapshot: false,
            }
            .into(),
        ),
        ("negative ACK", wire::Ack { zxid: i64::MIN }.into()),
        (
            "negative PROPOSAL",
            wire::Proposal {
                zxid: Zxid::new(1, 1).0 | i64::MIN,
                txn: Bytes::new(),
            }
            .into(),
        ),
        (
            "NEWLEADER of a negative epoch",
            wire::NewLeader {
                zxid: i64::MIN,
                config: Bytes::new(),
            }
            .into(),
        ),
        (
            "NEWLEADER mid-epoch",
            wire::NewLeader {
                zxid: Zxid::new(2, 1).0,
                config: Bytes::new(),
            }
            .into(),
        ),
    ];
    for (what, packet) in cases {
        assert!(ZabDecoder::new().decode(packet).is_err(), "{what}");
    }
}

fn notification(state: ServerState) -> Notification {
    Notification {
        sender: ServerId(2),
        state,
        vote: Vote {
            leader: ServerId(3),
            zxid: Zxid::new(1, 7),
            peer_epoch: 1,
        },
        election_epoch: 4,
        config: None,
    }
}

#[test]
fn notifications_round_trip() {
    for state in [
        ServerState::Looking,
        ServerState::Following,
        ServerState::Leading,
    ] {
        let n = notification(state);
        let wire = notification_to_wire(&n);
        assert_eq!(wire.sid, 2);
        assert_eq!(wire.config_version, 0);
        assert!(wire.config.is_empty());
        assert_eq!(notification_from_wire(&wire), Ok(n));
    }
    // The last epoch and a negative zxid (ZooKeeper's observers vote with one) survive.
    let mut n = notification(ServerState::Looking);
    n.vote.peer_epoch = MAX_EPOCH;
    n.vote.zxid = Zxid(-1);
    assert_eq!(notification_from_wire(&notification_to_wire(&n)), Ok(n));
}

#[test]
fn unusable_notifications_are_errors() {
    let good = notification_to_wire(&notification(ServerState::Looking));
    for (what, wire) in [
        (
            "observer",
            wire_election::Notification {
                state: wire_election::ServerState::Observing as i32,
                ..good.clone()
            },
        ),
        (
            "unknown state",
            wire_election::Notification {
                state: 7,
                ..good.clone()
            },
        ),
        (
            "negative state",
            wire_election::Notification {
                state: -1,
                ..good.clone()
            },
        ),
        (
            "peer epoch past 32 bits",
            wire_election::Notification {
                peer_epoch: 1 << 32,
                ..good.clone()
            },
        ),
        (
            "peer epoch whose zxids are negative",
            wire_election::Notification {
                peer_epoch: 1 << 31,
                ..good.clone()
            },
        ),
        (
            "election round that would wrap the logical clock",
            wire_election::Notification {
                election_epoch: u64::MAX,
                ..good.clone()
            },
        ),
    ] {
        assert!(notification_from_wire(&wire).is_err(), "{what}");
    }
}
