//! The peer transport over real loopback sockets: members exchanging
//! notifications and Zab traffic, and strangers whose faults close their own
//! link only.

use super::*;
use crate::core::election::{ServerState, Vote};
use crate::core::zab::SessionTouch;
use bytes::Bytes;
use tokio::time::timeout;
use zkd_protocol::Zxid;

/// Every test ends within this.
const TEST_TIMEOUT: Duration = Duration::from_secs(30);

/// How long an expected event or close may take.
const EVENT_TIMEOUT: Duration = Duration::from_secs(5);

pub(in crate::runtime) fn settings() -> PeerSettings {
    PeerSettings {
        connect_timeout: Duration::from_secs(2),
        stall_timeout: Duration::from_millis(300),
        ..PeerSettings::default()
    }
}

fn spec(election: SocketAddr, quorum: SocketAddr) -> ServerSpec {
    ServerSpec {
        host: "127.0.0.1".into(),
        quorum_port: quorum.port(),
        election_port: election.port(),
        observer: false,
        client_address: None,
    }
}

/// A member's peer side, with the events it receives.
pub(in crate::runtime) struct Member {
    pub net: PeerNetwork,
    pub events: mpsc::Receiver<PeerEvent>,
}

/// `ids.len()` listener pairs on free loopback ports, and the `server.N` map of
/// `ids` plus `absent` members (configured, never started).
async fn listeners(
    ids: &[u64],
    absent: &[u64],
) -> (BTreeMap<u64, ServerSpec>, Vec<(TcpListener, TcpListener)>) {
    let mut servers = BTreeMap::new();
    let mut bound = Vec::new();
    for &id in ids.iter().chain(absent) {
        let election = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let quorum = TcpListener::bind("127.0.0.1:0").await.unwrap();
        servers.insert(
            id,
            spec(election.local_addr().unwrap(), quorum.local_addr().unwrap()),
        );
        if ids.contains(&id) {
            bound.push((election, quorum));
        }
    }
    (servers, bound)
}

/// Members `ids` running, `absent` configured only.
pub(in crate::runtime) async fn ensemble(
    ids: &[u64],
    absent: &[u64],
    settings: PeerSettings,
) -> Vec<Member> {
    let (servers, bound) = listeners(ids, absent).await;
    ids.iter()
        .zip(bound)
        .map(|(&id, (election, quorum))| {
            let (tx, events) = mpsc::channel(64);
            let net = PeerNetwork::with_listeners(
                ServerId(id),
                &servers,
                election,
                quorum,
                tx,
                settings.clone(),
            )
            .unwrap();
            Member { net, events }
        })
        .collect()
}

pub(in crate::runtime) async fn next_event(member: &mut Member) -> PeerEvent {
    timeout(EVENT_TIMEOUT, member.events.recv())
        .await
        .expect("an event in time")
        .expect("the event channel is open")
}

async fn next_zab(member: &mut Member) -> (ServerId, ZabMessage) {
    loop {
        match next_event(member).await {
            PeerEvent::Zab { from, message, .. } => return (from, message),
            PeerEvent::Notification(_) => continue,
            other => panic!("expected a Zab message, got {other:?}"),
        }
    }
}

async fn next_notification(member: &mut Member) -> Notification {
    loop {
        if let PeerEvent::Notification(n) = next_event(member).await {
            return n;
        }
    }
}

async fn assert_silent(member: &mut Member) {
    let quiet = timeout(Duration::from_millis(300), member.events.recv()).await;
    assert!(quiet.is_err(), "unexpected event {quiet:?}");
}

fn notification(sender: u64, epoch: u64) -> Notification {
    Notification {
        sender: ServerId(sender),
        state: ServerState::Looking,
        vote: Vote {
            leader: ServerId(sender),
            zxid: Zxid::new(1, sender as u32),
            peer_epoch: 1,
        },
        election_epoch: epoch,
        config: None,
    }
}

/// A follower `f` linked to leader `l`, FOLLOWERINFO delivered.
pub(in crate::runtime) async fn link(f: &mut Member, l: &mut Member, f_id: u64, l_id: u64) {
    l.net.set_learner_intake(LearnerIntake::Taken);
    f.net.connect_zab(ServerId(l_id));
    let info = ZabMessage::FollowerInfo { accepted_epoch: 3 };
    f.net.send_zab(ServerId(l_id), info.clone());
    assert_eq!(next_zab(l).await, (ServerId(f_id), info));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_members_exchange_notifications_both_ways() {
    timeout(TEST_TIMEOUT, async {
        // Free ports first, then `start` binds them itself.
        let (servers, bound) = listeners(&[1, 2, 3], &[]).await;
        drop(bound);
        let mut members = Vec::new();
        for id in 1..=3 {
            let (tx, events) = mpsc::channel(64);
            let net = PeerNetwork::start(ServerId(id), &servers, tx, settings())
                .await
                .unwrap();
            members.push(Member { net, events });
        }
        for (i, member) in members.iter_mut().enumerate() {
            let from = i as u64 + 1;
            for to in (1..=3).filter(|&to| to != from) {
                member
                    .net
                    .send_notification(ServerId(to), notification(from, 10 * from + to));
            }
            // To itself: dropped (the election loops its own back).
            member
                .net
                .send_notification(ServerId(from), notification(from, 0));
        }
        for (i, member) in members.iter_mut().enumerate() {
            let me = i as u64 + 1;
            let mut expected: Vec<Notification> = (1..=3)
                .filter(|&from| from != me)
                .map(|from| notification(from, 10 * from + me))
                .collect();
            while !expected.is_empty() {
                let n = next_notification(member).await;
                // Re-sends on a new link may repeat one; anything else is wrong.
                assert!(n.election_epoch != 0, "a notification to oneself went out");
                assert_eq!(n.election_epoch, 10 * n.sender.0 + me, "{n:?}");
                expected.retain(|e| *e != n);
            }
        }
        // The links stay up: a newer notification replaces nothing queued and arrives.
        members[0]
            .net
            .send_notification(ServerId(3), notification(1, 99));
        loop {
            let n = next_notification(&mut members[2]).await;
            if n.election_epoch == 99 {
                assert_eq!(n.sender, ServerId(1));
                break;
            }
        }
    })
    .await
    .expect("test timed out");
}

#[tokio::test]
async fn follower_and_leader_see_each_others_messages_in_order() {
    timeout(TEST_TIMEOUT, async {
        let mut m = ensemble(&[1, 2], &[], settings()).await;
        let (f, l) = m.split_at_mut(1);
        let (f, l) = (&mut f[0], &mut l[0]);
        link(f, l, 1, 2).await;
        let leader = ServerId(2);
        let follower = ServerId(1);
        l.net
            .send_zab(follower, ZabMessage::LeaderInfo { epoch: 4 });
        for counter in 1..=100 {
            let zxid = Zxid::new(4, counter);
            l.net.send_zab(
                follower,
                ZabMessage::Proposal {
                    zxid,
                    txn: Bytes::from(format!("txn {counter}")),
                },
            );
        }
        l.net.send_zab(
            follower,
            ZabMessage::Commit {
                zxid: Zxid::new(4, 100),
                digest: None,
            },
        );
        assert_eq!(
            next_zab(f).await,
            (leader, ZabMessage::LeaderInfo { epoch: 4 })
        );
        f.net.send_zab(
            leader,
            ZabMessage::AckEpoch {
                current_epoch: None,
                last_zxid: Zxid::new(3, 9),
                log_base: Zxid::new(3, 1),
                wants_snapshot: false,
            },
        );
        for counter in 1..=100 {
            let (from, message) = next_zab(f).await;
            assert_eq!(from, leader);
            assert_eq!(
                message,
                ZabMessage::Proposal {
                    zxid: Zxid::new(4, counter),
                    txn: Bytes::from(format!("txn {counter}")),
                }
            );
            f.net.send_zab(
                leader,
                ZabMessage::Ack {
                    zxid: Zxid::new(4, counter),
                },
            );
        }
        assert_eq!(
            next_zab(f).await.1,
            ZabMessage::Commit {
                zxid: Zxid::new(4, 100),
                digest: None,
            }
        );
        let touches = vec![SessionTouch {
            session: 7,
            timeout_ms: 4000,
        }];
        f.net.send_zab(
            leader,
            ZabMessage::Ping {
                zxid: Zxid::new(4, 100),
                touches: touches.clone(),
            },
        );
        assert_eq!(
            next_zab(l).await,
            (
                follower,
                ZabMessage::AckEpoch {
                    current_epoch: None,
                    last_zxid: Zxid::new(3, 9),
                    log_base: Zxid::new(3, 1),
                    wants_snapshot: false,
                }
            )
        );
        for counter in 1..=100 {
            assert_eq!(
                next_zab(l).await,
                (
                    follower,
                    ZabMessage::Ack {
                        zxid: Zxid::new(4, counter)
                    }
                )
            );
        }
        assert_eq!(
            next_zab(l).await.1,
            ZabMessage::Ping {
                zxid: Zxid::new(4, 100),
                touches
            }
        );
        // The leader drops the follower: the follower hears ZabClosed, the leader nothing.
        l.net.close_zab(follower);
        assert!(matches!(
            next_event(f).await,
            PeerEvent::ZabClosed { peer, .. } if peer == leader
        ));
        assert_silent(l).await;
    })
    .await
    .expect("test timed out");
}

#[tokio::test]
async fn a_three_mib_snapshot_streams_in_pieces() {
    timeout(TEST_TIMEOUT, async {
        let mut m = ensemble(&[1, 2], &[], settings()).await;
        let (f, l) = m.split_at_mut(1);
        let (f, l) = (&mut f[0], &mut l[0]);
        link(f, l, 1, 2).await;
        let image: Vec<u8> = (0..3 << 20).map(|i| (i % 253) as u8).collect();
        let (zxid, fuzzy) = (Zxid::new(2, 40), Zxid::new(2, 45));
        l.net.send_snap_start(ServerId(1), zxid);
        let parts: Vec<&[u8]> = image.chunks(MAX_SNAP_CHUNK).collect();
        for (i, part) in parts.iter().enumerate() {
            let last = (i + 1 == parts.len()).then_some(fuzzy);
            let offset = (i * MAX_SNAP_CHUNK) as u64;
            l.net
                .send_snap_chunk(ServerId(1), offset, Bytes::copy_from_slice(part), last);
        }
        assert!(l.net.queued_bytes(ServerId(1)).is_some());
        l.net.send_zab(
            ServerId(1),
            ZabMessage::NewLeader {
                epoch: 3,
                config: Bytes::new(),
            },
        );
        let mut received = Vec::new();
        loop {
            let PeerEvent::SnapChunk { from, piece, .. } = next_event(f).await else {
                panic!("pieces of the image come first");
            };
            assert_eq!((from, piece.zxid), (ServerId(2), zxid));
            assert_eq!(piece.offset, received.len() as u64);
            received.extend_from_slice(&piece.data);
            if let Some(f) = piece.fuzzy_through {
                assert_eq!(f, fuzzy);
                break;
            }
        }
        assert!(received == image, "the image arrives intact");
        assert_eq!(
            next_zab(f).await.1,
            ZabMessage::NewLeader {
                epoch: 3,
                config: Bytes::new(),
            }
        );
    })
    .await
    .expect("test timed out");
}

#[test]
fn settings_that_cannot_carry_a_snapshot_chunk_are_refused() {
    let too_small = PeerSettings {
        max_frame: MAX_SNAP_CHUNK,
        ..PeerSettings::default()
    };
    assert!(too_small.validate().is_err());
    assert!(PeerSettings::default().validate().is_ok());
}

#[path = "fault_tests.rs"]
mod faults;

/// Issue 14, finding 8: a message the old quorum link queued, and the close
/// of a link, reach the member after it connected anew (a new role). Each
/// event names its link, so the member can tell them from the new link's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_old_links_queued_events_are_stale_once_a_new_link_replaces_it() {
    timeout(TEST_TIMEOUT, async {
        let mut m = ensemble(&[1, 2], &[], settings()).await;
        let (f, l) = m.split_at_mut(1);
        let (f, l) = (&mut f[0], &mut l[0]);
        let (leader, follower) = (ServerId(2), ServerId(1));
        link(f, l, 1, 2).await;
        l.net
            .send_zab(follower, ZabMessage::LeaderInfo { epoch: 4 });
        // Queued on the follower's side, not yet taken; then a new role connects again.
        let old = next_event(f).await;
        assert!(matches!(&old, PeerEvent::Zab { .. }), "{old:?}");
        assert!(!f.net.is_stale(&old), "the current link's message");
        f.net.connect_zab(leader);
        assert!(f.net.is_stale(&old), "the replaced link's message is stale");
        let info = ZabMessage::FollowerInfo { accepted_epoch: 4 };
        f.net.send_zab(leader, info.clone());
        // The leader takes the new link (the old one's close may come first).
        loop {
            let event = next_event(l).await;
            match &event {
                PeerEvent::ZabClosed { .. } => continue,
                PeerEvent::Zab { message, .. } if *message == info => {
                    assert!(!l.net.is_stale(&event));
                    break;
                }
                other => panic!("unexpected {other:?}"),
            }
        }
        l.net
            .send_zab(follower, ZabMessage::LeaderInfo { epoch: 5 });
        let new = next_event(f).await;
        assert!(
            matches!(
                &new,
                PeerEvent::Zab {
                    message: ZabMessage::LeaderInfo { epoch: 5 },
                    ..
                }
            ),
            "{new:?}"
        );
        assert!(!f.net.is_stale(&new), "the new link's message");
    })
    .await
    .expect("test timed out");
}

/// A follower that holds what it received (its disk has not made it durable)
/// stops reading at its budget of bytes in flight: the rest waits in the
/// leader's outbox, where the leader sees it, and comes once the follower
/// lets go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_holding_its_budget_of_proposals_stops_reading() {
    timeout(TEST_TIMEOUT, async {
        let roomy = PeerSettings {
            stall_timeout: Duration::from_secs(10),
            max_queued_bytes: 512 << 20,
            ..settings()
        };
        let mut m = ensemble(&[1, 2], &[], roomy).await;
        let (f, l) = m.split_at_mut(1);
        let (f, l) = (&mut f[0], &mut l[0]);
        link(f, l, 1, 2).await;
        const SIZE: usize = 512 << 10;
        // 200 MiB: past the budget and what the kernel buffers on loopback
        // (up to tcp_rmem's and tcp_wmem's maxima, 36 MiB here).
        const COUNT: u32 = 400;
        for counter in 1..=COUNT {
            let txn = Bytes::from(vec![counter as u8; SIZE]);
            let zxid = Zxid::new(4, counter);
            l.net
                .send_zab(ServerId(1), ZabMessage::Proposal { zxid, txn });
        }
        // Taken in and held, as appends not yet durable hold them.
        let mut held = Vec::new();
        while let Ok(Some(event)) = timeout(Duration::from_millis(500), f.events.recv()).await {
            assert!(matches!(event, PeerEvent::Zab { .. }), "{event:?}");
            held.push(event);
        }
        let in_flight = held.len() * SIZE;
        assert!(
            in_flight <= ZAB_BYTES_IN_FLIGHT,
            "{in_flight} B taken in, over the budget"
        );
        assert!(
            in_flight + 2 * SIZE > ZAB_BYTES_IN_FLIGHT,
            "{in_flight} B taken in: the budget is not spent"
        );
        let waiting = l.net.queued_bytes(ServerId(1)).expect("the link is up");
        assert!(
            waiting > 32 << 20,
            "only {waiting} B wait in the leader's outbox ({} held)",
            held.len()
        );
        // Durable: the rest comes, in order.
        let taken = held.len() as u32;
        drop(held);
        for counter in taken + 1..=COUNT {
            match next_zab(f).await.1 {
                ZabMessage::Proposal { zxid, .. } => assert_eq!(zxid, Zxid::new(4, counter)),
                other => panic!("unexpected {other:?}"),
            }
        }
    })
    .await
    .expect("test timed out");
}

/// A configuration that moves a member (its id at new ports, as a reconfig
/// that replaces a server's host does): the others dial it there from then
/// on, on both ports.
#[tokio::test]
async fn a_moved_member_is_dialled_at_its_new_addresses() {
    timeout(TEST_TIMEOUT, async {
        // Member 2 is configured at ports nothing listens on, and runs elsewhere.
        let mut m = ensemble(&[1], &[2], settings()).await;
        let (mut servers, bound) = listeners(&[2], &[]).await;
        let one = &mut m[0];
        servers.insert(1, spec(one.net.election_addr(), one.net.quorum_addr()));
        let (election, quorum) = bound.into_iter().next().unwrap();
        let (tx, events) = mpsc::channel(64);
        let net =
            PeerNetwork::with_listeners(ServerId(2), &servers, election, quorum, tx, settings())
                .unwrap();
        let mut two = Member { net, events };
        one.net.learn_servers(servers);
        one.net.send_notification(ServerId(2), notification(1, 9));
        assert_eq!(next_notification(&mut two).await, notification(1, 9));
        link(one, &mut two, 1, 2).await;
    })
    .await
    .expect("test timed out");
}
