//! Round trips and ZooKeeper's type codes for every Zab message.

use super::quorum_packet::Body;
use super::*;
use crate::Zxid;
use prost::Message;

/// One packet of every variant, with non-default values in every field, and the type
/// code and packet zxid ZooKeeper gives it.
pub(crate) fn every_packet() -> Vec<(QuorumPacket, i32, Option<i64>)> {
    let z = Zxid::new(2, 7).0;
    let txn = Bytes::from_static(b"\0\0\0\0\0\0\0\x2a txn header and record");
    vec![
        (
            Request {
                session_id: 0x1000_0abc_0000_0001,
                cxid: 12,
                op_type: 1,
                body: Bytes::from_static(b"\0\0\0\x02/a"),
                auth: vec![
                    Id {
                        scheme: "digest".into(),
                        id: "u:pw".into(),
                    },
                    Id {
                        scheme: "ip".into(),
                        id: "127.0.0.1".into(),
                    },
                ],
            }
            .into(),
            1,
            Some(-1),
        ),
        (
            Proposal {
                zxid: z,
                txn: txn.clone(),
            }
            .into(),
            2,
            Some(z),
        ),
        (Ack { zxid: z }.into(), 3, Some(z)),
        (
            Commit {
                zxid: z,
                digest: Some(0xfeed),
            }
            .into(),
            4,
            Some(z),
        ),
        (
            Ping {
                zxid: z,
                touches: vec![
                    SessionTouch {
                        session_id: 5,
                        timeout_ms: 4000,
                    },
                    SessionTouch {
                        session_id: -7,
                        timeout_ms: 30000,
                    },
                ],
            }
            .into(),
            5,
            Some(z),
        ),
        (
            Revalidate {
                session_id: 9,
                timeout_ms: 6000,
            }
            .into(),
            6,
            Some(-1),
        ),
        (
            RevalidateReply {
                session_id: 9,
                valid: true,
            }
            .into(),
            6,
            Some(-1),
        ),
        (
            Sync {
                session_id: 9,
                cxid: 44,
            }
            .into(),
            7,
            Some(0),
        ),
        (
            QuorumPacket {
                body: Some(Body::Inform(Inform { zxid: z, txn })),
            },
            8,
            Some(z),
        ),
        (
            CommitAndActivate {
                zxid: z,
                designated_leader: 3,
                digest: None,
            }
            .into(),
            9,
            Some(z),
        ),
        (
            InformAndActivate {
                zxid: z,
                designated_leader: 3,
                txn: Bytes::from_static(b"t"),
            }
            .into(),
            19,
            Some(z),
        ),
        (
            NewLeader {
                zxid: Zxid::new(2, 0).0,
                config: Bytes::from_static(b"server.1=127.0.0.1:2888:3888:participant"),
            }
            .into(),
            10,
            Some(0x2_0000_0000),
        ),
        (
            FollowerInfo {
                accepted_epoch: 1,
                sid: 3,
                protocol_version: ZAB_PROTOCOL_VERSION,
                config_version: 0x1_0000_0000,
            }
            .into(),
            11,
            Some(0x1_0000_0000),
        ),
        (UpToDate {}.into(), 12, Some(-1)),
        (Diff { zxid: z }.into(), 13, Some(z)),
        (Trunc { zxid: z - 2 }.into(), 14, Some(z - 2)),
        (Snap { zxid: z }.into(), 15, Some(z)),
        (
            SnapChunk {
                offset: 1 << 20,
                data: Bytes::from(vec![0xa5; 4096]),
                last: true,
                fuzzy_through: 0,
            }
            .into(),
            15,
            None,
        ),
        (
            QuorumPacket {
                body: Some(Body::ObserverInfo(FollowerInfo {
                    accepted_epoch: 4,
                    sid: 8,
                    protocol_version: ZAB_PROTOCOL_VERSION,
                    config_version: 0,
                })),
            },
            16,
            Some(0x4_0000_0000),
        ),
        (
            LeaderInfo {
                new_epoch: 2,
                protocol_version: ZAB_PROTOCOL_VERSION,
            }
            .into(),
            17,
            Some(0x2_0000_0000),
        ),
        (
            AckEpoch {
                current_epoch: 1,
                last_logged_zxid: Zxid::new(1, 8).0,
                log_base: Zxid::new(1, 3).0,
                wants_snapshot: true,
            }
            .into(),
            18,
            Some(0x1_0000_0008),
        ),
        (
            AckEpoch {
                current_epoch: ACK_EPOCH_ALREADY_ACCEPTED,
                last_logged_zxid: 0,
                log_base: 0,
                wants_snapshot: false,
            }
            .into(),
            18,
            Some(0),
        ),
    ]
}

#[test]
fn packet_type_codes_match_zookeeper() {
    let expected = [
        (PacketType::Request, 1),
        (PacketType::Proposal, 2),
        (PacketType::Ack, 3),
        (PacketType::Commit, 4),
        (PacketType::Ping, 5),
        (PacketType::Revalidate, 6),
        (PacketType::Sync, 7),
        (PacketType::Inform, 8),
        (PacketType::CommitAndActivate, 9),
        (PacketType::NewLeader, 10),
        (PacketType::FollowerInfo, 11),
        (PacketType::UpToDate, 12),
        (PacketType::Diff, 13),
        (PacketType::Trunc, 14),
        (PacketType::Snap, 15),
        (PacketType::ObserverInfo, 16),
        (PacketType::LeaderInfo, 17),
        (PacketType::AckEpoch, 18),
        (PacketType::InformAndActivate, 19),
    ];
    for (ty, code) in expected {
        assert_eq!(ty as i32, code, "{ty:?}");
        assert_eq!(PacketType::try_from(code), Ok(ty));
    }
    assert!(PacketType::try_from(0).is_err());
    assert!(PacketType::try_from(20).is_err());
}

#[test]
fn every_packet_round_trips_with_its_zookeeper_type_and_zxid() {
    let packets = every_packet();
    // Every variant is covered (21 variants; AckEpoch appears twice).
    assert_eq!(packets.len(), 22);
    for (packet, code, zxid) in packets {
        assert_eq!(packet.type_code(), code, "{packet:?}");
        let body = packet.body.as_ref().unwrap();
        assert_eq!(body.zookeeper_zxid(), zxid, "{packet:?}");
        assert_eq!(packet.check(), Ok(()), "{packet:?}");
        let bytes = packet.encode_to_vec();
        let back = QuorumPacket::decode(bytes.as_slice()).unwrap();
        assert_eq!(back, packet);
        // The inner message round-trips alone too.
        let inner = match body {
            Body::Request(m) => Request::decode(&*m.encode_to_vec()).map(|m| m.into()),
            Body::Proposal(m) => Proposal::decode(&*m.encode_to_vec()).map(|m| m.into()),
            Body::Ping(m) => Ping::decode(&*m.encode_to_vec()).map(|m| m.into()),
            Body::SnapChunk(m) => SnapChunk::decode(&*m.encode_to_vec()).map(|m| m.into()),
            _ => Ok(packet.clone()),
        };
        assert_eq!(inner.unwrap(), packet);
    }
}

#[test]
fn distinct_variants_with_one_code_stay_distinct() {
    let req: QuorumPacket = Revalidate {
        session_id: 1,
        timeout_ms: 0,
    }
    .into();
    let rep: QuorumPacket = RevalidateReply {
        session_id: 1,
        valid: false,
    }
    .into();
    assert_eq!(req.type_code(), rep.type_code());
    let rep_back = QuorumPacket::decode(&*rep.encode_to_vec()).unwrap();
    assert!(matches!(rep_back.body, Some(Body::RevalidateReply(_))));
    // Empty messages still mark their variant.
    let up: QuorumPacket = UpToDate {}.into();
    assert!(!up.encode_to_vec().is_empty());
    assert_eq!(QuorumPacket::decode(&*up.encode_to_vec()).unwrap(), up);
}

#[test]
fn check_rejects_meaningless_packets() {
    assert_eq!(QuorumPacket::default().type_code(), 0);
    assert!(QuorumPacket::default().check().is_err());
    // An empty frame decodes to a packet without a body.
    assert!(QuorumPacket::decode(&[][..]).unwrap().check().is_err());
    let big_epoch: QuorumPacket = LeaderInfo {
        new_epoch: 1 << 32,
        protocol_version: ZAB_PROTOCOL_VERSION,
    }
    .into();
    assert!(big_epoch.check().is_err());
    let big_epoch: QuorumPacket = FollowerInfo {
        accepted_epoch: u64::MAX,
        ..FollowerInfo::default()
    }
    .into();
    assert!(big_epoch.check().is_err());
    // 2^31 fits in 32 bits but would make the zxids of that epoch negative.
    for accepted_epoch in [1 << 31, u64::from(u32::MAX)] {
        let negative: QuorumPacket = FollowerInfo {
            accepted_epoch,
            ..FollowerInfo::default()
        }
        .into();
        assert!(negative.check().is_err(), "{accepted_epoch}");
    }
    let last: QuorumPacket = FollowerInfo {
        accepted_epoch: u64::from(crate::MAX_EPOCH),
        ..FollowerInfo::default()
    }
    .into();
    assert!(last.check().is_ok());
    let big_chunk: QuorumPacket = SnapChunk {
        offset: 0,
        data: Bytes::from(vec![0; MAX_SNAP_CHUNK + 1]),
        last: false,
        fuzzy_through: 0,
    }
    .into();
    assert!(big_chunk.check().is_err());
    let max_chunk: QuorumPacket = SnapChunk {
        offset: 0,
        data: Bytes::from(vec![0; MAX_SNAP_CHUNK]),
        last: true,
        fuzzy_through: 0,
    }
    .into();
    assert_eq!(max_chunk.check(), Ok(()));
}
