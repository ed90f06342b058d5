//! Faults on the peer ports: impostors and misbehaving peers lose their own
//! link, and the member's real links keep delivering; strangers are
//! answered; link replacement, dead leaders, deaf followers and shutdown.

use super::*;
use bytes::BytesMut;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::codec::Encoder;
use zkd_protocol::peer::election::PROTOCOL_VERSION_V1;
use zkd_protocol::peer::zab::{self as wire, ZAB_PROTOCOL_VERSION};
use zkd_protocol::peer::{ElectionHello, ElectionMessage, PeerCodec, PeerMessage, QuorumPacket};

fn frame<M: PeerMessage>(message: &M) -> Vec<u8> {
    let mut buf = BytesMut::new();
    PeerCodec::<M>::new().encode(message, &mut buf).unwrap();
    buf.to_vec()
}

fn hello(sid: u64) -> Vec<u8> {
    frame(&ElectionMessage::from(ElectionHello {
        protocol_version: PROTOCOL_VERSION_V1,
        sid,
        election_addr: "127.0.0.1:1".into(),
    }))
}

fn follower_info(sid: u64) -> Vec<u8> {
    frame(&QuorumPacket::from(wire::FollowerInfo {
        accepted_epoch: 1,
        sid,
        protocol_version: ZAB_PROTOCOL_VERSION,
        config_version: 0,
    }))
}

/// A raw connection that writes `bytes` (the peer may already have closed).
async fn stranger(addr: SocketAddr, bytes: &[u8]) -> TcpStream {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let _ = stream.write_all(bytes).await;
    stream
}

/// The other side closes `stream` (EOF or reset) without sending anything we wait on.
async fn assert_closed(stream: &mut TcpStream) {
    let mut buf = [0u8; 4096];
    loop {
        match timeout(EVENT_TIMEOUT, stream.read(&mut buf)).await {
            Err(_) => panic!("the connection is still open"),
            Ok(Ok(0)) | Ok(Err(_)) => return,
            Ok(Ok(_)) => continue,
        }
    }
}

#[tokio::test]
async fn bad_links_are_closed_while_the_real_links_keep_delivering() {
    timeout(TEST_TIMEOUT, async {
        // Member 3 is configured but absent: a stranger impersonates it.
        let mut m = ensemble(&[1, 2], &[3], settings()).await;
        let (f, l) = m.split_at_mut(1);
        let (f, l) = (&mut f[0], &mut l[0]);
        link(f, l, 1, 2).await;
        let election = l.net.election_addr();
        let quorum = l.net.quorum_addr();
        let mut oversized = vec![0x7f, 0xff, 0xff, 0xff];
        oversized.extend([0; 16]);
        let mut half = 100u32.to_be_bytes().to_vec();
        half.extend([0x08; 10]);
        let cases: Vec<(&str, SocketAddr, Vec<u8>)> = vec![
            ("garbage", election, vec![0, 0, 0, 3, 0xff, 0xff, 0xff]),
            ("own sid hello", election, hello(2)),
            ("oversized length", election, oversized.clone()),
            ("half a frame, then silence", election, half.clone()),
            ("garbage", quorum, vec![0, 0, 0, 2, 0x0f, 0x0f]),
            (
                "not FOLLOWERINFO first",
                quorum,
                frame(&QuorumPacket::from(wire::Ack { zxid: 1 })),
            ),
            ("FOLLOWERINFO from its own sid", quorum, follower_info(2)),
            ("oversized length", quorum, oversized),
            ("half a frame, then silence", quorum, half),
        ];
        for (round, (what, addr, bytes)) in cases.into_iter().enumerate() {
            let mut s = stranger(addr, &bytes).await;
            assert_closed(&mut s).await;
            // The member's real links are unaffected.
            let epoch = 1000 + round as u64;
            f.net.send_notification(ServerId(2), notification(1, epoch));
            loop {
                let n = next_notification(l).await;
                if n.election_epoch == epoch {
                    break;
                }
            }
            let ack = ZabMessage::Ack {
                zxid: Zxid(round as i64),
            };
            f.net.send_zab(ServerId(2), ack.clone());
            assert_eq!(next_zab(l).await, (ServerId(1), ack), "after {what}");
        }
        // An established election link whose notification names another sender.
        let mut s = stranger(election, &hello(3)).await;
        let wire_n = |sid| {
            frame(&ElectionMessage::from(convert::notification_to_wire(
                &notification(sid, 7),
            )))
        };
        s.write_all(&wire_n(3)).await.unwrap();
        assert_eq!(next_notification(l).await, notification(3, 7));
        let _ = s.write_all(&wire_n(1)).await;
        assert_closed(&mut s).await;
        f.net.send_zab(ServerId(2), ZabMessage::UpToDate);
        assert_eq!(next_zab(l).await, (ServerId(1), ZabMessage::UpToDate));
    })
    .await
    .expect("test timed out");
}

/// Finding 10 of issue 35: a second connection claiming a sid whose link
/// is live is closed and the live link keeps delivering; once that link has
/// been idle for `live_link`, a new one from the sid replaces it.
#[tokio::test]
async fn a_live_quorum_link_is_not_displaced_by_a_second_claiming_its_sid() {
    timeout(TEST_TIMEOUT, async {
        let settings = PeerSettings {
            connect_timeout: Duration::from_millis(600),
            live_link: Duration::from_millis(300),
            ..settings()
        };
        let mut m = ensemble(&[2], &[1], settings).await;
        let l = &mut m[0];
        l.net.set_learner_intake(LearnerIntake::Taken);
        let quorum = l.net.quorum_addr();
        let info = ZabMessage::FollowerInfo { accepted_epoch: 1 };
        let mut first = stranger(quorum, &follower_info(1)).await;
        assert_eq!(next_zab(l).await, (ServerId(1), info.clone()));
        // The first keeps talking while an impostor claims its sid.
        let mut impostor = stranger(quorum, &follower_info(1)).await;
        for n in 0..8 {
            let ack = frame(&QuorumPacket::from(wire::Ack { zxid: n }));
            first.write_all(&ack).await.unwrap();
            let expected = (ServerId(1), ZabMessage::Ack { zxid: Zxid(n) });
            assert_eq!(next_zab(l).await, expected);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_closed(&mut impostor).await;
        // The first has fallen silent: a new link from its sid takes over.
        tokio::time::sleep(Duration::from_millis(400)).await;
        let mut second = stranger(quorum, &follower_info(1)).await;
        assert_eq!(next_zab(l).await, (ServerId(1), info));
        // The first is closed without a ZabClosed for it.
        assert_closed(&mut first).await;
        assert_silent(l).await;
        // Messages go to the second, and its end is reported once.
        l.net
            .send_zab(ServerId(1), ZabMessage::LeaderInfo { epoch: 2 });
        let expected = frame(&QuorumPacket::from(wire::LeaderInfo {
            new_epoch: 2,
            protocol_version: ZAB_PROTOCOL_VERSION,
        }));
        let mut got = vec![0; expected.len()];
        second.read_exact(&mut got).await.unwrap();
        assert_eq!(got, expected);
        drop(second);
        assert!(matches!(
            next_event(l).await,
            PeerEvent::ZabClosed { peer, .. } if peer == ServerId(1)
        ));
        assert_silent(l).await;
    })
    .await
    .expect("test timed out");
}

/// Finding 9 of issue 35: a follower takes no learners, so FOLLOWERINFO
/// claiming its leader's sid is closed at once and its link to the leader
/// keeps delivering. A looking member holds a learner until it leads.
#[tokio::test]
async fn only_a_leader_takes_learners() {
    timeout(TEST_TIMEOUT, async {
        let mut m = ensemble(&[1, 2], &[3], settings()).await;
        let (f, l) = m.split_at_mut(1);
        let (f, l) = (&mut f[0], &mut l[0]);
        link(f, l, 1, 2).await;
        f.net.set_learner_intake(LearnerIntake::Refused);
        let mut impostor = stranger(f.net.quorum_addr(), &follower_info(2)).await;
        timeout(Duration::from_millis(500), assert_closed(&mut impostor))
            .await
            .expect("closed at once, not after connect_timeout");
        l.net.send_zab(ServerId(1), ZabMessage::UpToDate);
        assert_eq!(next_zab(f).await, (ServerId(2), ZabMessage::UpToDate));
        assert_silent(f).await;

        // Looking: member 3's handshake waits until member 1 leads.
        f.net.set_learner_intake(LearnerIntake::Held);
        let mut held = stranger(f.net.quorum_addr(), &follower_info(3)).await;
        assert_silent(f).await;
        f.net.set_learner_intake(LearnerIntake::Taken);
        let info = ZabMessage::FollowerInfo { accepted_epoch: 1 };
        assert_eq!(next_zab(f).await, (ServerId(3), info));
        f.net.send_zab(ServerId(3), ZabMessage::UpToDate);
        let expected = frame(&QuorumPacket::from(wire::UpToDate {}));
        let mut got = vec![0; expected.len()];
        held.read_exact(&mut got).await.unwrap();
        assert_eq!(got, expected);
    })
    .await
    .expect("test timed out");
}

#[tokio::test]
async fn a_dead_leader_is_reported_closed() {
    timeout(TEST_TIMEOUT, async {
        let settings = PeerSettings {
            connect_timeout: Duration::from_millis(500),
            ..settings()
        };
        let mut m = ensemble(&[1], &[2], settings).await;
        let f = &mut m[0];
        f.net.connect_zab(ServerId(2));
        f.net
            .send_zab(ServerId(2), ZabMessage::FollowerInfo { accepted_epoch: 1 });
        assert!(matches!(
            next_event(f).await,
            PeerEvent::ZabClosed { peer, .. } if peer == ServerId(2)
        ));
        // Nothing to send to afterwards: dropped quietly.
        f.net.send_zab(ServerId(2), ZabMessage::UpToDate);
        assert_silent(f).await;
    })
    .await
    .expect("test timed out");
}

#[tokio::test]
async fn a_follower_that_does_not_read_is_dropped() {
    timeout(TEST_TIMEOUT, async {
        let settings = PeerSettings {
            max_queued_bytes: 1 << 20,
            ..settings()
        };
        let mut m = ensemble(&[2], &[1], settings).await;
        let l = &mut m[0];
        l.net.set_learner_intake(LearnerIntake::Taken);
        let _deaf = stranger(l.net.quorum_addr(), &follower_info(1)).await;
        next_zab(l).await;
        let txn = Bytes::from(vec![0; 256 << 10]);
        for counter in 1.. {
            let zxid = Zxid::new(1, counter);
            l.net.send_zab(
                ServerId(1),
                ZabMessage::Proposal {
                    zxid,
                    txn: txn.clone(),
                },
            );
            if let Ok(event) = timeout(Duration::from_millis(1), l.events.recv()).await {
                assert!(matches!(
                    event,
                    Some(PeerEvent::ZabClosed { peer, .. }) if peer == ServerId(1)
                ));
                break;
            }
            assert!(counter < 10_000, "never closed");
        }
    })
    .await
    .expect("test timed out");
}

#[tokio::test]
async fn dropping_the_network_closes_its_links_and_ports() {
    timeout(TEST_TIMEOUT, async {
        let mut m = ensemble(&[1, 2], &[], settings()).await;
        let mut l = m.pop().unwrap();
        let mut f = m.pop().unwrap();
        link(&mut f, &mut l, 1, 2).await;
        let (election, quorum) = (f.net.election_addr(), f.net.quorum_addr());
        drop(f.net);
        assert!(matches!(
            next_event(&mut l).await,
            PeerEvent::ZabClosed { peer, .. } if peer == ServerId(1)
        ));
        // Its listeners are gone with it.
        for addr in [election, quorum] {
            loop {
                if TcpListener::bind(addr).await.is_ok() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    })
    .await
    .expect("test timed out");
}

/// Reads one election frame from `stream`.
async fn read_election(stream: &mut TcpStream) -> ElectionMessage {
    use tokio_util::codec::Decoder;
    let mut buf = BytesMut::new();
    loop {
        let mut codec = PeerCodec::<ElectionMessage>::new();
        if let Some(message) = codec.decode(&mut buf.clone()).unwrap() {
            return message;
        }
        let mut byte = [0u8; 1];
        let n = timeout(EVENT_TIMEOUT, stream.read(&mut byte))
            .await
            .unwrap()
            .unwrap();
        assert!(n > 0, "the link closed");
        buf.extend_from_slice(&byte[..n]);
    }
}

/// A sid outside the configuration is answered, as ZooKeeper answers any
/// sid: a larger one on its own link, a smaller one called back once at the
/// address its hello gives. Nothing is kept for a stranger once its link is
/// gone.
#[tokio::test]
async fn a_stranger_is_answered() {
    timeout(TEST_TIMEOUT, async {
        let mut m = ensemble(&[2, 3], &[], settings()).await;
        let member = &mut m[0];
        let wire_n = |sid, epoch| {
            frame(&ElectionMessage::from(convert::notification_to_wire(
                &notification(sid, epoch),
            )))
        };
        let notified = |message: ElectionMessage| match message.body {
            Some(zkd_protocol::peer::election::election_message::Body::Notification(n)) => {
                convert::notification_from_wire(&n).unwrap()
            }
            other => panic!("not a notification: {other:?}"),
        };
        // Sid 9, larger: its connection is the link.
        let mut bytes = hello(9);
        bytes.extend(wire_n(9, 7));
        let mut s = stranger(member.net.election_addr(), &bytes).await;
        assert_eq!(next_notification(member).await, notification(9, 7));
        member
            .net
            .send_notification(ServerId(9), notification(2, 8));
        assert_eq!(notified(read_election(&mut s).await), notification(2, 8));
        drop(s);
        tokio::time::sleep(Duration::from_millis(100)).await;
        member
            .net
            .send_notification(ServerId(9), notification(2, 9));
        assert!(!member.net.shared.lock().election.contains_key(&ServerId(9)));

        // Sid 1, smaller: it hangs up after its hello, and a member dials
        // only the addresses of its configuration: not called back.
        let back = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let hello_1 = frame(&ElectionMessage::from(ElectionHello {
            protocol_version: PROTOCOL_VERSION_V1,
            sid: 1,
            election_addr: back.local_addr().unwrap().to_string(),
        }));
        let _said = stranger(member.net.election_addr(), &hello_1).await;
        let called = timeout(Duration::from_millis(500), back.accept()).await;
        assert!(called.is_err(), "a stranger's hello was dialled back");
        assert!(!member.net.shared.lock().election.contains_key(&ServerId(1)));
    })
    .await
    .expect("test timed out");
}

/// The quorum port admits a member only from its host, and nobody the
/// configuration does not name (issue 49: a learner is sent the whole tree).
#[tokio::test]
async fn the_quorum_port_takes_members_from_their_hosts_only() {
    timeout(TEST_TIMEOUT, async {
        let mut m = ensemble(&[2, 3], &[], settings()).await;
        let (l, f) = m.split_at_mut(1);
        let (l, f) = (&mut l[0], &mut f[0]);
        l.net.set_learner_intake(LearnerIntake::Taken);
        let quorum = l.net.quorum_addr();
        // A stranger (no server line) learns nothing: closed, no event.
        let mut s = stranger(quorum, &follower_info(100)).await;
        assert_closed(&mut s).await;
        // Member 3's sid from an address that is not its host: closed.
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind("127.0.0.2:0".parse().unwrap()).unwrap();
        let mut impostor = socket.connect(quorum).await.unwrap();
        impostor.write_all(&follower_info(3)).await.unwrap();
        assert_closed(&mut impostor).await;
        // Member 3 itself, from its host, links.
        link(f, l, 3, 2).await;
    })
    .await
    .expect("test timed out");
}
