//! Issue 49: who may speak on a member's peer ports, tried with sockets
//! that speak the peer wire against real 3-member ensembles. Each test is
//! one hole a plain connection opened before (strangers learning the tree
//! and forwarding requests as `super`, an epoch squatted, a stranger's
//! configuration taken, handshake slots held, impostors from elsewhere),
//! and asserts what a client or the attacker sees now.

use std::net::IpAddr;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use zkd_client_tests::ensemble::{spread_host, Ensemble};
use zkd_client_tests::peer_wire::{
    create_as_super, create_session, dial_from, follower_info, hello, looking, quorum_frame,
    requests_as_super, send_and_read, Answer,
};
use zkd_client_tests::process::four_letter_word_at;
use zkd_client_tests::{connect, persistent, within, ServerOptions};
use zkd_protocol::peer::zab as wire;
use zookeeper_client as zk;

const SESSION: Duration = Duration::from_secs(10);

/// An address on no member's host (the members run on 127.0.0.1, or on
/// 127.0.0.11-13 when spread).
fn elsewhere() -> Option<IpAddr> {
    Some("127.0.0.99".parse().unwrap())
}

fn quorum_addr(ensemble: &Ensemble, i: usize) -> String {
    let p = &ensemble.peers[i];
    format!("{}:{}", p.host, p.quorum_port)
}

fn election_addr(ensemble: &Ensemble, i: usize) -> String {
    let p = &ensemble.peers[i];
    format!("{}:{}", p.host, p.election_port)
}

/// The epoch member `i` serves in, from `srvr`'s zxid.
fn epoch(ensemble: &Ensemble, i: usize) -> Option<u64> {
    let m = &ensemble.members[i];
    let reply = four_letter_word_at(&m.host, m.port, "srvr").ok()?;
    let hex = reply.lines().find_map(|l| l.strip_prefix("Zxid: 0x"))?;
    Some(u64::from_str_radix(hex.trim(), 16).ok()? >> 32)
}

/// Whether `path` exists, read through member `i` after a sync.
async fn exists(ensemble: &Ensemble, i: usize, path: &str) -> bool {
    let client = connect(&ensemble.members[i].addr(), SESSION).await;
    within(client.sync("/")).await.expect("sync");
    within(client.check_stat(path))
        .await
        .expect("stat")
        .is_some()
}

/// A node only the digest user `owner` may change.
async fn locked_node(ensemble: &Ensemble, path: &str) {
    let client = connect(&ensemble.all(), SESSION).await;
    within(client.auth("digest", b"owner:secret"))
        .await
        .expect("addauth");
    let acl = zk::Acls::creator_all();
    let opts = zk::CreateMode::Persistent.with_acls(acl);
    within(client.create(path, b"", &opts))
        .await
        .expect("create the locked node");
}

/// Sends `bytes` from `from` to member `i`'s quorum port; what it answers
/// within 3 s.
async fn to_quorum_port(
    ensemble: &Ensemble,
    i: usize,
    from: Option<IpAddr>,
    bytes: &[u8],
) -> Answer {
    send_and_read(
        from,
        &quorum_addr(ensemble, i),
        bytes,
        Duration::from_secs(3),
    )
    .await
    .expect("the quorum port takes connections")
}

/// A moment later, `path` is not on member `i`: the requests that would
/// have created it were not executed.
async fn assert_not_created(ensemble: &Ensemble, i: usize, path: &str, what: &str) {
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!exists(ensemble, i, path).await, "{what} was executed");
}

/// Whether the other side has not closed `s` (nothing to read is open).
fn is_open(s: &tokio::net::TcpStream) -> bool {
    matches!(s.try_read(&mut [0u8; 64]), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
}

fn assert_refused(answer: &Answer, what: &str) {
    let first = answer.packets.first().and_then(|p| p.body.as_ref());
    assert!(
        answer.packets.is_empty() && answer.closed,
        "{what}: the member answered {} packets, the first {:.200} (closed: {})",
        answer.packets.len(),
        format!("{first:?}"),
        answer.closed
    );
}

/// Holes 1 and 4: a sid no server line names sends FOLLOWERINFO, asks for
/// a snapshot and forwards requests as `super`. The leader closes it at
/// once: no LEADERINFO, no tree, nothing executed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stranger_learns_nothing_and_forwards_nothing() {
    let ensemble = Ensemble::start(3);
    let leader = ensemble.wait_until_serving(&[0, 1, 2]);
    locked_node(&ensemble, "/locked").await;
    let e = epoch(&ensemble, leader).unwrap();
    let mut bytes = follower_info(4, e);
    bytes.extend(quorum_frame(wire::AckEpoch {
        current_epoch: e as i64,
        last_logged_zxid: 0,
        log_base: 0,
        wants_snapshot: true,
    }));
    bytes.extend(requests_as_super(0x4_0000_0001, "/locked/stranger"));
    let answer = to_quorum_port(&ensemble, leader, None, &bytes).await;
    assert_refused(&answer, "a stranger's FOLLOWERINFO");
    assert_not_created(
        &ensemble,
        leader,
        "/locked/stranger",
        "a stranger's request",
    )
    .await;
}

/// Hole 1 for a member's sid: while member F is down, a connection from
/// its host claims its sid and forwards requests right after FOLLOWERINFO,
/// before any sync. ZooKeeper drops such a link; so does zkd now.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_before_the_sync_are_not_taken() {
    let (closed, created) = requests_before_the_sync(&[]).await;
    assert!(
        closed,
        "the leader kept a link that sent requests before its sync"
    );
    assert!(!created, "a request before the sync was executed");
}

/// The rule planted back: the leader takes them, and a node only the
/// digest user may change is created under as `super`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn planted_requests_before_sync_is_caught() {
    let (_, created) = requests_before_the_sync(&["requests-before-sync"]).await;
    assert!(
        created,
        "requests before the sync planted, and nothing was executed"
    );
}

/// While member F is down, a connection from its host claims its sid,
/// creates a session right after FOLLOWERINFO and, once that has had time
/// to commit, a node under `/locked` as `super`. Whether the leader closed
/// the link, and whether the node was created.
async fn requests_before_the_sync(planted: &[&str]) -> (bool, bool) {
    let options = ServerOptions {
        planted: planted.iter().map(|p| p.to_string()).collect(),
        ..ServerOptions::default()
    };
    let mut ensemble = Ensemble::start_with(3, options);
    let leader = ensemble.wait_until_serving(&[0, 1, 2]);
    locked_node(&ensemble, "/locked").await;
    let f = (0..3).find(|i| *i != leader).unwrap();
    ensemble.members[f].kill9();
    let e = epoch(&ensemble, leader).unwrap();
    let session = 0x4_0000_0002;
    let mut stream = dial_from(None, &quorum_addr(&ensemble, leader))
        .await
        .expect("the quorum port takes connections");
    let mut first = follower_info(f as u64 + 1, e);
    first.extend(create_session(session));
    let _ = stream.write_all(&first).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let _ = stream
        .write_all(&create_as_super(session, "/locked/unsynced"))
        .await;
    let closed = closed_within(&mut stream, Duration::from_millis(500)).await;
    (closed, exists(&ensemble, leader, "/locked/unsynced").await)
}

/// Whether the other side closes `stream` within `within` (what it sends
/// meanwhile is read and dropped).
async fn closed_within(stream: &mut tokio::net::TcpStream, within: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + within;
    let mut buf = [0u8; 4096];
    loop {
        match tokio::time::timeout_at(deadline, stream.read(&mut buf)).await {
            Err(_) => return false,
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            Ok(Ok(_)) => {}
        }
    }
}

/// Hole 6: members on hosts of their own (127.0.0.11-13). From another
/// address, a connection claiming a down member's sid is refused on both
/// ports; the member itself, restarted, rejoins from its host.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_impostor_from_another_host_is_refused() {
    let mut ensemble = Ensemble::start_spread(3);
    let leader = ensemble.wait_until_serving(&[0, 1, 2]);
    let f = (0..3).find(|i| *i != leader).unwrap();
    let sid = f as u64 + 1;
    ensemble.members[f].kill9();
    let e = epoch(&ensemble, leader).unwrap();
    let mut bytes = follower_info(sid, e);
    bytes.extend(quorum_frame(wire::AckEpoch {
        current_epoch: e as i64,
        last_logged_zxid: 0,
        log_base: 0,
        wants_snapshot: true,
    }));
    let answer = to_quorum_port(&ensemble, leader, elsewhere(), &bytes).await;
    assert_refused(&answer, "an impostor's FOLLOWERINFO");
    let own = format!("{}:1", spread_host(f));
    for i in (0..3).filter(|i| *i != f) {
        let mut bytes = hello(sid, &own);
        bytes.extend(looking(sid, i64::MAX >> 1, e, ""));
        let answer = send_and_read(
            elsewhere(),
            &election_addr(&ensemble, i),
            &bytes,
            Duration::from_secs(3),
        )
        .await
        .expect("the election port takes connections");
        assert!(
            answer.closed,
            "member {} kept an impostor's election link",
            i + 1
        );
    }
    ensemble.members[f].restart();
    ensemble.wait_until_serving(&[0, 1, 2]);
    assert_eq!(ensemble.leader(), Some(leader), "the leader changed");
}

/// Hole 2: FOLLOWERINFO claiming epoch 2^31 - 2, held open on every
/// quorum port under every sid while the leader dies. The next leaders
/// never take it: two elections later the ensemble still elects and
/// takes writes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_frame_spends_the_epochs() {
    let mut ensemble = Ensemble::start(3);
    let squat = (1u64 << 31) - 2;
    for round in 0..2 {
        let leader = ensemble.wait_until_serving(&[0, 1, 2]);
        let ports: Vec<String> = (0..3).map(|i| quorum_addr(&ensemble, i)).collect();
        let stop = Instant::now() + Duration::from_secs(4);
        let squatters = tokio::spawn(async move {
            while Instant::now() < stop {
                let mut held = Vec::new();
                for port in &ports {
                    for sid in 1..=4u64 {
                        if let Ok(mut s) = dial_from(None, port).await {
                            let _ = tokio::io::AsyncWriteExt::write_all(
                                &mut s,
                                &follower_info(sid, squat),
                            )
                            .await;
                            held.push(s);
                        }
                    }
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
        ensemble.members[leader].kill9();
        squatters.await.unwrap();
        ensemble.members[leader].restart();
        let next = ensemble.wait_until_serving(&[0, 1, 2]);
        let e = epoch(&ensemble, next).unwrap();
        assert!(e < 1000, "round {round}: the ensemble's epoch is {e}");
        let client = connect(&ensemble.all(), SESSION).await;
        within(client.create(&format!("/after-{round}"), b"", &persistent()))
            .await
            .expect("a write after the squat");
    }
}

/// Hole 3: with reconfigEnabled, a stranger's notification carrying a
/// configuration of a newer version (member F's own line alone) reaches F
/// while it looks. F must not take it: it follows the real leader, counts
/// the real members, and its writes are seen by the others.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_strangers_configuration_is_not_taken() {
    let options = ServerOptions {
        tick_time_ms: 500,
        extra: vec![
            ("reconfigEnabled".into(), "true".into()),
            ("skipACL".into(), "yes".into()),
        ],
        ..ServerOptions::default()
    };
    let mut ensemble = Ensemble::start_with(3, options);
    let leader = ensemble.wait_until_serving(&[0, 1, 2]);
    let f = (0..3).find(|i| *i != leader).unwrap();
    let p = &ensemble.peers[f];
    let forged = format!(
        "server.{}={}:{}:{}:participant;{}\nversion=7fff00000000",
        f + 1,
        p.host,
        p.quorum_port,
        p.election_port,
        ensemble.members[f].addr()
    );
    ensemble.members[f].kill9();
    let target = election_addr(&ensemble, f);
    let stop = Instant::now() + Duration::from_secs(6);
    let forger = tokio::spawn(async move {
        while Instant::now() < stop {
            let mut bytes = hello(9, "127.0.0.1:1");
            bytes.extend(looking(9, 1 << 32, 1, &forged));
            let _ = send_and_read(None, &target, &bytes, Duration::from_millis(20)).await;
        }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    ensemble.members[f].restart();
    forger.await.unwrap();
    ensemble.wait_until_serving(&[0, 1, 2]);
    assert_ne!(
        ensemble.mode(f).as_deref(),
        Some("leader"),
        "member {} leads alone",
        f + 1
    );
    let client = connect(&ensemble.members[f].addr(), SESSION).await;
    let config = within(client.get_config()).await.expect("getConfig").0;
    let text = String::from_utf8_lossy(&config);
    assert_eq!(
        text.lines().filter(|l| l.starts_with("server.")).count(),
        3,
        "member {} serves {text}",
        f + 1
    );
    within(client.create("/through-f", b"", &persistent()))
        .await
        .expect("a write through F");
    let other = (0..3).find(|i| *i != f).unwrap();
    assert!(
        exists(&ensemble, other, "/through-f").await,
        "F's write is not on member {}",
        other + 1
    );
}

/// Hole 5: members on hosts of their own. From another address, silent
/// sockets are held on both ports of every member (opened again as they
/// are closed) while a follower restarts: it rejoins within an election's
/// time, as its address has handshake slots of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_sockets_from_elsewhere_hold_no_members_slot() {
    if let Err(e) = rejoins_under_a_flood(&[]).await {
        panic!("{e}");
    }
}

/// The rule planted back: with one pool of slots for every address, as
/// ZooKeeper's, the flood holds them and the restarted member stays out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn planted_shared_handshake_slots_is_caught() {
    let caught = rejoins_under_a_flood(&["shared-handshake-slots"]).await;
    let e = caught.expect_err("shared handshake slots planted, and the member rejoined");
    assert!(e.contains("did not rejoin under the flood"), "{e}");
}

/// Members spread over 127.0.0.11-13, `planted` in each; silent sockets
/// from elsewhere on every port while a follower restarts. Errs if it has
/// not rejoined within 10 s.
async fn rejoins_under_a_flood(planted: &[&str]) -> Result<(), String> {
    let options = ServerOptions {
        tick_time_ms: 500,
        planted: planted.iter().map(|p| p.to_string()).collect(),
        ..ServerOptions::default()
    };
    let mut ensemble = Ensemble::start_spread_with(3, options);
    let leader = ensemble.wait_until_serving(&[0, 1, 2]);
    let f = (0..3).find(|i| *i != leader).unwrap();
    let ports: Vec<String> = (0..3)
        .flat_map(|i| [quorum_addr(&ensemble, i), election_addr(&ensemble, i)])
        .collect();
    let stop = Instant::now() + Duration::from_secs(15);
    let holders: Vec<_> = ports
        .into_iter()
        .map(|port| {
            tokio::spawn(async move {
                let mut held = Vec::new();
                while Instant::now() < stop {
                    held.retain(is_open);
                    while held.len() < 32 {
                        match dial_from(elsewhere(), &port).await {
                            Ok(s) => held.push(s),
                            Err(_) => break,
                        }
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(500)).await;
    ensemble.members[f].kill9();
    let started = Instant::now();
    ensemble.members[f].restart();
    let mut rejoined = Ok(());
    while ensemble.mode(f).is_none() {
        if started.elapsed() > Duration::from_secs(10) {
            rejoined = Err(format!(
                "member {} did not rejoin under the flood; logs:\n{}",
                f + 1,
                ensemble.logs()
            ));
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for h in holders {
        h.abort();
    }
    rejoined
}
