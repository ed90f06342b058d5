//! Real 3- and 5-member ensembles driven by the stock Rust client: writes on
//! one member are read on another after sync, a killed leader is replaced
//! with every acknowledged write kept, a minority may die, a majority's loss
//! gives connection loss (never a wrong answer), restarted members rejoin
//! (by DIFF, and by SNAP after a long absence), and sessions move between
//! members with their ephemerals.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use zkd_client_tests::ensemble::Ensemble;
use zkd_client_tests::{connect, ephemeral, persistent, within, ServerOptions};
use zookeeper_client as zk;

const SESSION: Duration = Duration::from_secs(6);

/// Creates `/e` through `client`, ignoring NodeExists.
async fn make_parent(client: &zk::Client) {
    match within(client.create("/e", b"", &persistent())).await {
        Ok(_) | Err(zk::Error::NodeExists) => {}
        Err(e) => panic!("create /e: {e}"),
    }
}

/// Creates `path`; NodeExists counts as done, since an earlier attempt
/// whose answer was lost to a connection loss may have created it.
async fn create_once(client: &zk::Client, path: &str) -> Result<(), zk::Error> {
    match client.create(path, b"", &persistent()).await {
        Ok(_) | Err(zk::Error::NodeExists) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Retries `f` until it succeeds or `limit` passes (a client reconnecting
/// after its member died needs a few attempts).
async fn eventually<T, F, Fut>(limit: Duration, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, zk::Error>>,
{
    let deadline = Instant::now() + limit;
    loop {
        match tokio::time::timeout(Duration::from_secs(5), f()).await {
            Ok(Ok(v)) => return v,
            Ok(Err(e)) if Instant::now() > deadline => panic!("still failing: {e}"),
            Err(_) if Instant::now() > deadline => panic!("still timing out"),
            _ => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_on_one_member_is_read_on_every_other_after_sync() {
    let ensemble = Ensemble::start(3);
    let leader = ensemble.leader().expect("a leader");
    let modes: Vec<String> = (0..3).map(|i| ensemble.mode(i).unwrap()).collect();
    assert_eq!(
        modes.iter().filter(|m| *m == "leader").count(),
        1,
        "exactly one leader: {modes:?}"
    );
    assert_eq!(modes.iter().filter(|m| *m == "follower").count(), 2);
    // Before the epoch's first write, as Apache ZooKeeper 3.8 shows it: the
    // leader has processed `epoch << 32`, the followers nothing yet.
    for i in 0..3 {
        let srvr = ensemble.members[i].four_letter_word("srvr");
        let expected = if i == leader {
            "Zxid: 0x100000000"
        } else {
            "Zxid: 0x0"
        };
        assert!(srvr.contains(expected), "member {}: {srvr}", i + 1);
    }

    // Write through a follower (forwarded to the leader), read everywhere.
    let follower = (0..3).find(|i| *i != leader).unwrap();
    let writer = connect(&ensemble.connect_string(&[follower]), SESSION).await;
    make_parent(&writer).await;
    for i in 0..50 {
        let path = format!("/e/n{i}");
        within(writer.create(&path, path.as_bytes(), &persistent()))
            .await
            .unwrap();
    }
    within(writer.set_data("/e/n7", b"changed", None))
        .await
        .unwrap();
    for i in 0..3 {
        let reader = connect(&ensemble.connect_string(&[i]), SESSION).await;
        within(reader.sync("/e")).await.unwrap();
        let children = within(reader.list_children("/e")).await.unwrap();
        assert_eq!(children.len(), 50, "member {} after sync", i + 1);
        let (data, _) = within(reader.get_data("/e/n7")).await.unwrap();
        assert_eq!(data, b"changed", "member {} after sync", i + 1);
    }

    // mntr on the leader reports its followers.
    let mntr = ensemble.members[leader].four_letter_word("mntr");
    assert!(mntr.contains("zk_server_state\tleader"), "{mntr}");
    assert!(mntr.contains("zk_followers\t2"), "{mntr}");
    assert!(mntr.contains("zk_synced_followers\t2"), "{mntr}");
    assert!(mntr.contains("zk_pending_syncs\t"), "{mntr}");
    let mntr = ensemble.members[follower].four_letter_word("mntr");
    assert!(mntr.contains("zk_server_state\tfollower"), "{mntr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_leader_elects_another_and_keeps_every_acknowledged_write() {
    let mut ensemble = Ensemble::start(3);
    let leader = ensemble.leader().expect("a leader");
    let others: Vec<usize> = (0..3).filter(|i| *i != leader).collect();
    let setup = connect(&ensemble.all(), SESSION).await;
    make_parent(&setup).await;

    let acked: Arc<Mutex<Vec<String>>> = Arc::default();
    let mut writers = Vec::new();
    for w in 0..3 {
        // Clients on every member, the leader's included.
        let client = connect(&ensemble.all(), SESSION).await;
        let acked = acked.clone();
        writers.push(tokio::spawn(async move {
            let deadline = Instant::now() + Duration::from_secs(12);
            let mut i = 0;
            while Instant::now() < deadline {
                let path = format!("/e/w{w}-{i}");
                // A fresh path per attempt: a write whose answer was lost
                // may have happened, and retrying it would only say NodeExists.
                i += 1;
                if let Ok(Ok(_)) = tokio::time::timeout(
                    Duration::from_secs(3),
                    client.create(&path, b"", &persistent()),
                )
                .await
                {
                    acked.lock().unwrap().push(path);
                } else {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let before_kill = acked.lock().unwrap().len();
    ensemble.members[leader].kill9();
    let new_leader = ensemble.wait_until_serving(&others);
    assert_ne!(new_leader, leader);
    for w in writers {
        w.await.unwrap();
    }
    let acked = acked.lock().unwrap().clone();
    assert!(
        before_kill > 20 && acked.len() > before_kill,
        "writers made progress before ({before_kill}) and after ({}) the kill; logs:\n{}",
        acked.len(),
        ensemble.logs()
    );

    // Every acknowledged write is on both survivors, and on the old leader once it is back.
    ensemble.members[leader].restart();
    ensemble.wait_until_serving(&[0, 1, 2]);
    for i in 0..3 {
        let reader = connect(&ensemble.connect_string(&[i]), SESSION).await;
        within(reader.sync("/e")).await.unwrap();
        let present: BTreeSet<String> = within(reader.list_children("/e"))
            .await
            .unwrap()
            .into_iter()
            .map(|n| format!("/e/{n}"))
            .collect();
        let lost: Vec<&String> = acked.iter().filter(|p| !present.contains(*p)).collect();
        assert!(
            lost.is_empty(),
            "member {}: {} acknowledged writes lost, e.g. {:?}",
            i + 1,
            lost.len(),
            &lost[..lost.len().min(5)]
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_minority_may_die_and_a_majority_loss_gives_connection_loss_not_wrong_answers() {
    let mut ensemble = Ensemble::start(3);
    let leader = ensemble.leader().expect("a leader");
    let follower = (0..3).find(|i| *i != leader).unwrap();
    let client = connect(&ensemble.connect_string(&[leader]), SESSION).await;
    make_parent(&client).await;

    // One follower down: the other two still commit.
    ensemble.members[follower].kill9();
    within(client.create("/e/with-two", b"", &persistent()))
        .await
        .unwrap();

    // The second one down too: the leader steps down within syncLimit and
    // nothing more is acknowledged.
    let last = (0..3).find(|i| *i != leader && *i != follower).unwrap();
    ensemble.members[last].kill9();
    let result = tokio::time::timeout(
        Duration::from_secs(10),
        client.create("/e/alone", b"", &persistent()),
    )
    .await;
    assert!(
        !matches!(result, Ok(Ok(_))),
        "a write was acknowledged by a leader without a quorum"
    );
    // It refuses clients while it has no quorum.
    let deadline = Instant::now() + Duration::from_secs(10);
    while ensemble.mode(leader).is_some() {
        assert!(
            Instant::now() < deadline,
            "the lone member still serves: {:?}",
            ensemble.mode(leader)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Back to a quorum: the write that was not acknowledged may or may not
    // be there, the acknowledged one is.
    ensemble.members[follower].restart();
    ensemble.wait_until_serving(&[leader, follower]);
    let reader = connect(&ensemble.connect_string(&[follower]), SESSION).await;
    within(reader.sync("/e")).await.unwrap();
    assert!(within(reader.check_stat("/e/with-two"))
        .await
        .unwrap()
        .is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_moves_to_another_member_with_its_ephemerals() {
    let mut ensemble = Ensemble::start(3);
    let leader = ensemble.leader().expect("a leader");
    let home = (0..3).find(|i| *i != leader).unwrap();
    let other = (0..3).find(|i| *i != leader && *i != home).unwrap();
    // Detached: dropping the client leaves its session open, as a client
    // whose member died would.
    let first = within(
        zk::Client::connector()
            .with_session_timeout(SESSION)
            .with_detached()
            .connect(&ensemble.members[home].addr()),
    )
    .await
    .unwrap();
    make_parent(&first).await;
    within(first.create("/e/mine", b"", &ephemeral()))
        .await
        .unwrap();
    let id = first.session_id();
    let session = first.session().clone();
    drop(first);
    ensemble.members[home].kill9();

    // The same session on another member, within its timeout: the
    // ephemeral is still its own, and it outlives the session's old member
    // for several session timeouts because the new member relays touches.
    let moved = within(
        zk::Client::connector()
            .with_session(session)
            .connect(&ensemble.members[other].addr()),
    )
    .await
    .unwrap();
    assert_eq!(moved.session_id(), id);
    let (_, stat) = within(moved.get_data("/e/mine")).await.unwrap();
    assert_eq!(stat.ephemeral_owner, id.0);
    tokio::time::sleep(SESSION * 2).await;
    let (_, stat) = within(moved.get_data("/e/mine")).await.unwrap();
    assert_eq!(stat.ephemeral_owner, id.0, "the session was kept alive");

    // Dropping the client closes the session: the ephemeral goes everywhere.
    drop(moved);
    let reader = connect(&ensemble.connect_string(&[leader]), SESSION).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while within(reader.check_stat("/e/mine"))
        .await
        .unwrap()
        .is_some()
    {
        assert!(
            Instant::now() < deadline,
            "the closed session's ephemeral stays"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_member_catches_up_by_diff_and_a_long_absent_one_by_snap() {
    let mut ensemble = Ensemble::start_with(
        3,
        ServerOptions {
            tick_time_ms: 500,
            ..ServerOptions::default()
        }
        // Small snapshots, so a long absence outruns the leader's in-memory history.
        .with("snapCount", "200"),
    );
    let leader = ensemble.leader().expect("a leader");
    let away = (0..3).find(|i| *i != leader).unwrap();
    let client = connect(&ensemble.connect_string(&[leader]), SESSION).await;
    make_parent(&client).await;

    // A short absence.
    ensemble.members[away].kill9();
    for i in 0..20 {
        within(client.create(&format!("/e/a{i}"), b"", &persistent()))
            .await
            .unwrap();
    }
    ensemble.members[away].restart();
    ensemble.wait_until_serving(&[away]);
    let reader = connect(&ensemble.connect_string(&[away]), SESSION).await;
    within(reader.sync("/e")).await.unwrap();
    assert_eq!(within(reader.list_children("/e")).await.unwrap().len(), 20);
    drop(reader);
    let log = ensemble.members[leader].log();
    assert!(log.contains("Diff"), "the leader synced by DIFF:\n{log}");
    assert!(!log.contains("Snap"), "no SNAP for a short absence:\n{log}");

    // A long one: more than the leader keeps in memory.
    ensemble.members[away].kill9();
    let _ = eventually(Duration::from_secs(10), || client.sync("/e")).await;
    for i in 0..12_000 {
        let path = format!("/e/b{i}");
        eventually(Duration::from_secs(10), || create_once(&client, &path)).await;
    }
    ensemble.members[away].restart();
    ensemble.wait_until_serving(&[away]);
    let reader = connect(&ensemble.connect_string(&[away]), SESSION).await;
    within(reader.sync("/e")).await.unwrap();
    assert_eq!(
        within(reader.list_children("/e")).await.unwrap().len(),
        12_020
    );
    let log = ensemble.members[leader].log();
    assert!(log.contains("Snap"), "the leader synced by SNAP:\n{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_members_survive_two_failures() {
    let mut ensemble = Ensemble::start(5);
    let leader = ensemble.leader().expect("a leader");
    let client = connect(&ensemble.all(), SESSION).await;
    make_parent(&client).await;
    let victims: Vec<usize> = (0..5).filter(|i| *i != leader).take(2).collect();
    for v in &victims {
        ensemble.members[*v].kill9();
    }
    for i in 0..20 {
        let path = format!("/e/f{i}");
        eventually(Duration::from_secs(15), || create_once(&client, &path)).await;
    }
    let survivors: Vec<usize> = (0..5).filter(|i| !victims.contains(i)).collect();
    for i in survivors {
        let reader = connect(&ensemble.connect_string(&[i]), SESSION).await;
        within(reader.sync("/e")).await.unwrap();
        assert_eq!(within(reader.list_children("/e")).await.unwrap().len(), 20);
    }
}

/// A create of `path` as the raw client sends it.
fn raw_create(path: &str) -> zkd_protocol::request::ClientRequest {
    zkd_protocol::request::ClientRequest::Create(
        zkd_protocol::OpCode::Create,
        zkd_protocol::records::CreateRequest {
            path: path.into(),
            data: None,
            acl: vec![zkd_protocol::records::Acl::world(31)],
            flags: 0,
        },
    )
}

#[test]
fn a_session_that_moved_is_refused_on_the_member_it_left() {
    use zkd_client_tests::raw::RawClient;
    use zkd_protocol::records::ConnectRequest;
    let ensemble = Ensemble::start(3);
    for (from, to) in [(0, 1), (1, 2), (2, 0)] {
        let (mut old, created) = RawClient::new_session(ensemble.members[from].port, 6000);
        assert_ne!(created.session_id, 0);
        let (h, _) = old.call(1, &raw_create(&format!("/before-{from}")));
        assert_eq!(h.err, 0);
        // The same session reattaches on another member (ZooKeeper's
        // REVALIDATE). That member may not have applied the create yet: it
        // refuses a client that has seen a later zxid, and the client tries
        // again, as ZooKeeper's does.
        let reattach = ConnectRequest {
            last_zxid_seen: h.zxid,
            time_out: 6000,
            session_id: created.session_id,
            passwd: created.passwd.clone(),
            read_only: Some(false),
            ..ConnectRequest::default()
        };
        let (mut new, moved) = (0..40)
            .find_map(|attempt| {
                if attempt > 0 {
                    std::thread::sleep(std::time::Duration::from_millis(50));
                }
                let mut new = RawClient::connect(ensemble.members[to].port);
                new.handshake(&reattach).map(|moved| (new, moved))
            })
            .expect("reattach answered within 2 s");
        assert_eq!(moved.session_id, created.session_id, "{from} -> {to}");
        assert!(moved.time_out > 0);
        // Xids go on across the session's connections, as a real client's
        // do: a member matches a committed txn to its request by session
        // and xid, so a reused xid could take another request's outcome.
        let (h, _) = new.call(2, &raw_create(&format!("/after-{to}")));
        assert_eq!(h.err, 0, "the session works where it moved");
        // A write through the member it left: SESSIONMOVED closes that
        // connection with no answer, as ZooKeeper does (ZOOKEEPER-710).
        old.send_request(3, &raw_create(&format!("/stale-{from}")));
        assert!(
            old.closed_by_server(),
            "{from} -> {to}: the old connection is closed"
        );
        let (h, _) = new.call(4, &raw_create(&format!("/still-{to}")));
        assert_eq!(h.err, 0);
    }
    // A session id nobody has is refused on a follower too (the leader decides).
    let leader = ensemble.leader().unwrap();
    let follower = (0..3).find(|i| *i != leader).unwrap();
    let mut stranger = RawClient::connect(ensemble.members[follower].port);
    let answer = stranger.handshake(&ConnectRequest {
        time_out: 6000,
        session_id: 0x0100_0000_0000_0999,
        passwd: bytes::Bytes::from_static(&[0; 16]),
        read_only: Some(false),
        ..ConnectRequest::default()
    });
    assert!(
        answer
            .as_ref()
            .is_none_or(|a| a.session_id == 0 && a.time_out == 0),
        "an unknown session is expired: {answer:?}"
    );
}

#[test]
fn a_member_refuses_a_client_that_has_seen_a_later_zxid() {
    use zkd_client_tests::raw::RawClient;
    use zkd_protocol::records::ConnectRequest;
    let ensemble = Ensemble::start(3);
    for i in 0..3 {
        let (mut c, _) = RawClient::new_session(ensemble.members[i].port, 6000);
        let (h, _) = c.call(1, &raw_create(&format!("/seen-{i}")));
        assert_eq!(h.err, 0);
        // A client from the future (its last zxid beyond anything committed).
        let mut ahead = RawClient::connect(ensemble.members[i].port);
        let answer = ahead.handshake(&ConnectRequest {
            last_zxid_seen: h.zxid + 1_000,
            time_out: 6000,
            passwd: bytes::Bytes::from_static(&[0; 16]),
            read_only: Some(false),
            ..ConnectRequest::default()
        });
        assert!(answer.is_none(), "member {}: {answer:?}", i + 1);
        assert!(ahead.closed_by_server());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_on_distinct_loopback_addresses_use_the_same_ports() {
    use zkd_client_tests::ensemble::PeerAddr;
    use zkd_client_tests::process::{free_port, ZkdProcess};
    // ZooKeeper's usual layout, one host per member: every member's client,
    // quorum and election ports are the same numbers, on its own address.
    let (client, quorum, election) = (free_port(), free_port(), free_port());
    let peers: Vec<PeerAddr> = (1..=3)
        .map(|id| PeerAddr {
            host: format!("127.0.0.1{id}"),
            quorum_port: quorum,
            election_port: election,
        })
        .collect();
    let servers: String = (1..=3)
        .map(|id| format!("server.{id}=127.0.0.1{id}:{quorum}:{election}\n"))
        .collect::<String>()
        + "initLimit=10\nsyncLimit=4\n";
    let options = ServerOptions {
        tick_time_ms: 500,
        ..ServerOptions::default()
    };
    let members: Vec<ZkdProcess> = (1..=3)
        .map(|id| {
            let host = format!("127.0.0.1{id}");
            ZkdProcess::start_at(options.clone(), &host, client, &servers, Some(id))
        })
        .collect();
    let ensemble = Ensemble {
        members,
        peers,
        net: None,
    };
    ensemble.wait_until_serving(&[0, 1, 2]);
    let writer = connect(&ensemble.connect_string(&[0]), SESSION).await;
    make_parent(&writer).await;
    within(writer.create("/e/x", b"1", &persistent()))
        .await
        .unwrap();
    let reader = connect(&ensemble.connect_string(&[2]), SESSION).await;
    within(reader.sync("/e")).await.unwrap();
    assert_eq!(within(reader.get_data("/e/x")).await.unwrap().0, b"1");
}

#[test]
fn a_follower_takes_in_no_more_requests_than_the_outstanding_limit() {
    use zkd_client_tests::raw::RawClient;
    let ensemble = Ensemble::start_with(
        3,
        ServerOptions {
            tick_time_ms: 500,
            ..ServerOptions::default()
        }
        // Long enough that the follower keeps its stalled leader while we look.
        .with("syncLimit", "20"),
    );
    let leader = ensemble.leader().expect("a leader");
    let follower = (0..3).find(|i| *i != leader).unwrap();
    // Twelve sessions of 120 writes each (a connection itself holds at most
    // 128 unanswered requests): 1,440 in all, beyond the node's limit of 1,000.
    let mut clients: Vec<RawClient> = (0..12)
        .map(|_| RawClient::new_session(ensemble.members[follower].port, 30_000).0)
        .collect();
    // The leader stalls: forwarded writes get no answer.
    ensemble.members[leader].pause();
    for (c, client) in clients.iter_mut().enumerate() {
        for xid in 1..=120 {
            client.send_request(xid, &raw_create(&format!("/flood-{c}-{xid}")));
        }
    }
    let outstanding = || -> usize {
        let mntr = ensemble.members[follower].four_letter_word("mntr");
        mntr.lines()
            .find_map(|l| l.strip_prefix("zk_outstanding_requests\t"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    while outstanding() < 1000 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(300));
    let held = outstanding();
    ensemble.members[leader].resume();
    assert!(
        (1000..=1001).contains(&held),
        "a follower counts what it forwarded and stops reading at the limit: {held}"
    );
}
