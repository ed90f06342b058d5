//! Durability: kill -9 at any moment loses no acknowledged write and no live
//! session; recovery works from snapshots plus the log.

use std::sync::{Arc, Mutex};
use std::time::Duration;
use zkd_client_tests::raw::RawClient;
use zkd_client_tests::{connect, persistent, within, ServerOptions, ZkdProcess};
use zkd_protocol::records::{ConnectRequest, CreateRequest, GetDataRequest};
use zkd_protocol::request::ClientRequest;
use zkd_protocol::OpCode;
use zookeeper_client as zk;

const SESSION: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_loses_no_acknowledged_write() {
    let mut server = ZkdProcess::start();
    let setup = connect(&server.addr(), SESSION).await;
    within(setup.create("/d", b"", &persistent()))
        .await
        .unwrap();
    let acked: Arc<Mutex<Vec<String>>> = Arc::default();
    let mut writers = Vec::new();
    for w in 0..4 {
        let client = connect(&server.addr(), SESSION).await;
        let acked = acked.clone();
        writers.push(tokio::spawn(async move {
            for i in 0..100_000 {
                let path = format!("/d/w{w}-{i}");
                match tokio::time::timeout(
                    Duration::from_secs(5),
                    client.create(&path, path.as_bytes(), &persistent()),
                )
                .await
                {
                    Ok(Ok(_)) => acked.lock().unwrap().push(path),
                    _ => break,
                }
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(700)).await;
    server.kill9();
    for w in writers {
        let _ = w.await;
    }
    let acked = acked.lock().unwrap().clone();
    assert!(
        acked.len() > 50,
        "the writers made too little progress ({}) to test anything",
        acked.len()
    );

    server.restart();
    let c = connect(&server.addr(), SESSION).await;
    let present: std::collections::BTreeSet<String> = within(c.list_children("/d"))
        .await
        .unwrap()
        .into_iter()
        .map(|n| format!("/d/{n}"))
        .collect();
    let lost: Vec<_> = acked.iter().filter(|p| !present.contains(*p)).collect();
    assert!(
        lost.is_empty(),
        "{} acknowledged creates lost, e.g. {:?}",
        lost.len(),
        &lost[..lost.len().min(5)]
    );
    for path in acked.iter().step_by(97) {
        assert_eq!(within(c.get_data(path)).await.unwrap().0, path.as_bytes());
    }
}

#[test]
fn live_sessions_and_their_ephemerals_survive_a_restart() {
    let mut server = ZkdProcess::start();
    let (mut c, session) = RawClient::new_session(server.port, 30_000);
    let create = ClientRequest::Create(
        OpCode::Create,
        CreateRequest {
            path: "/e".into(),
            data: None,
            acl: vec![zkd_protocol::records::Acl::world(31)],
            flags: 1,
        },
    );
    let (h, _) = c.call(1, &create);
    assert_eq!(h.err, 0);
    let last_zxid = h.zxid;
    server.kill9();
    server.restart();
    let mut again = RawClient::connect(server.port);
    let resp = again
        .handshake(&ConnectRequest {
            last_zxid_seen: last_zxid,
            time_out: 30_000,
            session_id: session.session_id,
            passwd: session.passwd.clone(),
            read_only: Some(false),
            ..Default::default()
        })
        .expect("handshake after restart");
    assert_eq!(
        resp.session_id, session.session_id,
        "the session outlives the restart"
    );
    let (h, mut body) = again.call(
        2,
        &ClientRequest::GetData(GetDataRequest {
            path: "/e".into(),
            watch: false,
        }),
    );
    assert_eq!(h.err, 0);
    assert!(h.zxid >= last_zxid, "zxids never go back after a restart");
    let reply = <zkd_protocol::records::GetDataResponse as zkd_protocol::Record>::decode(&mut body)
        .unwrap();
    assert_eq!(reply.stat.ephemeral_owner, session.session_id);
}

#[tokio::test]
async fn recovery_uses_snapshots_and_the_log() {
    let mut server = ZkdProcess::start_with(ServerOptions::default().with("snapCount", "20"));
    let c = connect(&server.addr(), SESSION).await;
    within(c.create("/s", b"", &persistent())).await.unwrap();
    for i in 0..150 {
        within(c.create(
            &format!("/s/n{i}"),
            format!("{i}").as_bytes(),
            &persistent(),
        ))
        .await
        .unwrap();
    }
    let last = within(c.set_data("/s", b"done", None)).await.unwrap();
    drop(c);
    assert!(
        server.log().contains("snapshot saved"),
        "snapCount=20 must have triggered snapshots"
    );
    server.restart();
    let c = connect(&server.addr(), SESSION).await;
    assert_eq!(within(c.count_descendants_number("/s")).await.unwrap(), 150);
    let (data, stat) = within(c.get_data("/s")).await.unwrap();
    assert_eq!(data, b"done");
    assert_eq!(stat.mzxid, last.mzxid);
    let (next, _) = within(c.create("/after", b"", &persistent()))
        .await
        .unwrap();
    assert!(next.czxid > last.mzxid);
    let kid: Option<zk::Stat> = within(c.check_stat("/s/n149")).await.unwrap();
    assert!(kid.is_some());
}

/// Writes sequential nodes under `/cycle` from two sessions until the server
/// dies; returns the acknowledged paths and the highest acknowledged zxid.
async fn write_until_killed(
    addr: &str,
    server: &mut ZkdProcess,
    after: Duration,
) -> (Vec<String>, i64) {
    let acked: Arc<Mutex<Vec<(String, i64)>>> = Arc::default();
    let mut writers = Vec::new();
    for w in 0..2 {
        let client = connect(addr, SESSION).await;
        let acked = acked.clone();
        writers.push(tokio::spawn(async move {
            let seq = zk::CreateMode::PersistentSequential.with_acls(zk::Acls::anyone_all());
            loop {
                let prefix = format!("/cycle/w{w}-");
                let created = tokio::time::timeout(
                    Duration::from_secs(5),
                    client.create(&prefix, b"x", &seq),
                )
                .await;
                match created {
                    Ok(Ok((stat, n))) => acked
                        .lock()
                        .unwrap()
                        .push((format!("{prefix}{n}"), stat.czxid)),
                    _ => break,
                }
            }
        }));
    }
    tokio::time::sleep(after).await;
    server.kill9();
    for w in writers {
        let _ = w.await;
    }
    let acked = acked.lock().unwrap().clone();
    let max = acked.iter().map(|(_, z)| *z).max().unwrap_or(0);
    (acked.into_iter().map(|(p, _)| p).collect(), max)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_kill_9_cycles_lose_nothing_and_never_reuse_a_zxid() {
    let mut server = ZkdProcess::start_with(ServerOptions::default().with("snapCount", "200"));
    let setup = connect(&server.addr(), SESSION).await;
    within(setup.create("/cycle", b"", &persistent()))
        .await
        .unwrap();
    drop(setup);
    let mut all_acked = Vec::new();
    for cycle in 0..3u64 {
        let (acked, max_zxid) = write_until_killed(
            &server.addr(),
            &mut server,
            Duration::from_millis(300 + 150 * cycle),
        )
        .await;
        assert!(!acked.is_empty(), "cycle {cycle} acknowledged nothing");
        all_acked.extend(acked);
        server.restart();
        let c = connect(&server.addr(), SESSION).await;
        let present: std::collections::BTreeSet<String> = within(c.list_children("/cycle"))
            .await
            .unwrap()
            .into_iter()
            .map(|n| format!("/cycle/{n}"))
            .collect();
        let lost: Vec<_> = all_acked.iter().filter(|p| !present.contains(*p)).collect();
        assert!(
            lost.is_empty(),
            "cycle {cycle}: {} acknowledged creates lost, e.g. {:?}",
            lost.len(),
            lost.first()
        );
        let (next, _) = within(c.create(
            "/cycle/after-",
            b"",
            &zk::CreateMode::PersistentSequential.with_acls(zk::Acls::anyone_all()),
        ))
        .await
        .unwrap();
        assert!(
            next.czxid > max_zxid,
            "cycle {cycle}: zxid {} reused after restart (acked up to {max_zxid})",
            next.czxid
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fuzzy_snapshots_taken_under_load_recover_exactly() {
    // Snapshots every ~1000 txns of a tree that grows past 8000 nodes: each is
    // written in slices of 2000 nodes while the writers keep going.
    let mut server = ZkdProcess::start_with(ServerOptions::default().with("snapCount", "1000"));
    let c = connect(&server.addr(), SESSION).await;
    within(c.create("/f", b"", &persistent())).await.unwrap();
    let mut tasks = Vec::new();
    for w in 0..8 {
        let c = c.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..1000 {
                let path = format!("/f/w{w}-{i}");
                c.create(&path, path.as_bytes(), &persistent())
                    .await
                    .unwrap();
                if i % 10 == 0 {
                    c.set_data(&format!("/f/w{w}-0"), format!("{i}").as_bytes(), None)
                        .await
                        .unwrap();
                }
            }
        }));
    }
    for t in tasks {
        within(t).await.unwrap();
    }
    let (_, last) = within(c.get_data("/f/w0-0")).await.unwrap();
    drop(c);
    assert!(
        server.log().matches("snapshot saved").count() >= 3,
        "expected several snapshots:\n{}",
        server.log()
    );
    server.kill9();
    server.restart();
    let c = connect(&server.addr(), SESSION).await;
    assert_eq!(
        within(c.count_descendants_number("/f")).await.unwrap(),
        8000
    );
    for w in 0..8 {
        let (data, stat) = within(c.get_data(&format!("/f/w{w}-0"))).await.unwrap();
        assert_eq!((data, stat.version), (b"990".to_vec(), 100), "writer {w}");
    }
    let (_, again) = within(c.get_data("/f/w0-0")).await.unwrap();
    assert_eq!(again, last, "the Stat survives exactly");
    let (_, f) = within(c.get_data("/f")).await.unwrap();
    assert_eq!((f.num_children, f.cversion), (8000, 8000));
}
