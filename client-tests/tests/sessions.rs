//! Sessions: timeout negotiation, expiry (ephemerals deleted in one txn,
//! watches fired), reattach on a new connection, wrong passwords and expired
//! ids answered as ZooKeeper does, closeSession.

use bytes::Bytes;
use std::time::Duration;
use zkd_client_tests::raw::RawClient;
use zkd_client_tests::{connect, within, ServerOptions, ZkdProcess};
use zkd_protocol::records::{ConnectRequest, CreateRequest, ExistsRequest, ReplyHeader};
use zkd_protocol::request::ClientRequest;
use zkd_protocol::{OpCode, Record};
use zookeeper_client as zk;

/// A ConnectRequest reattaching `session_id` (readOnly byte sent, as stock clients do).
fn reattach(session_id: i64, passwd: Bytes, time_out: i32) -> ConnectRequest {
    ConnectRequest {
        session_id,
        passwd,
        time_out,
        read_only: Some(false),
        ..Default::default()
    }
}

fn fast_ticks() -> ServerOptions {
    // tickTime 100 ms: sessions may be as short as 200 ms.
    ServerOptions {
        tick_time_ms: 100,
        ..ServerOptions::default()
    }
}

fn create_ephemeral(path: &str) -> ClientRequest {
    ClientRequest::Create(
        OpCode::Create,
        CreateRequest {
            path: path.into(),
            data: None,
            acl: vec![zkd_protocol::records::Acl::world(31)],
            flags: 1,
        },
    )
}

#[test]
fn timeouts_are_clamped_to_two_and_twenty_ticks() {
    let server = ZkdProcess::start();
    let (_, short) = RawClient::new_session(server.port, 1);
    assert_eq!(short.time_out, 4000);
    let (_, long) = RawClient::new_session(server.port, 1_000_000_000);
    assert_eq!(long.time_out, 40000);
    assert_eq!(short.passwd.len(), 16);
    assert_eq!(
        (short.session_id as u64) >> 56,
        1,
        "standalone session ids carry server id 1"
    );
    assert_eq!(long.session_id, short.session_id + 1);
}

#[test]
fn handshake_answers_in_the_form_the_client_used() {
    let server = ZkdProcess::start();
    let mut with_byte = RawClient::connect(server.port);
    let req = ConnectRequest {
        time_out: 4000,
        passwd: Bytes::from_static(&[0; 16]),
        read_only: Some(false),
        ..Default::default()
    };
    with_byte.send_frame(&req.to_bytes());
    assert_eq!(with_byte.recv().len(), 37);
    let mut without = RawClient::connect(server.port);
    without.send_frame(
        &ConnectRequest {
            read_only: None,
            ..req
        }
        .to_bytes(),
    );
    assert_eq!(without.recv().len(), 36);
}

#[tokio::test]
async fn expiry_deletes_ephemerals_and_fires_watches() {
    let server = ZkdProcess::start_with(fast_ticks());
    let watcher = connect(&server.addr(), Duration::from_secs(5)).await;
    // A raw client that never pings: its session must expire.
    let (mut silent, resp) = RawClient::new_session(server.port, 400);
    assert_eq!(resp.time_out, 400);
    let (h, _) = silent.call(1, &create_ephemeral("/eph"));
    assert_eq!(h.err, 0);
    let (h, _) = silent.call(2, &create_ephemeral("/eph2"));
    assert_eq!(h.err, 0);
    let (_, w) = within(watcher.check_and_watch_stat("/eph")).await.unwrap();
    let ev = within(w.changed()).await;
    assert_eq!(
        (ev.event_type, ev.path.as_str()),
        (zk::EventType::NodeDeleted, "/eph")
    );
    assert_eq!(within(watcher.check_stat("/eph2")).await.unwrap(), None);
    // Both ephemerals went in one closeSession txn: same pzxid on the root.
    let (_, root) = within(watcher.get_data("/")).await.unwrap();
    assert_eq!(root.pzxid, ev.zxid);
    // The expired session's connection is closed by the server.
    assert!(silent.closed_by_server());
    // Reattaching an expired session is answered in-band: timeout 0, id 0, zero password.
    let mut again = RawClient::connect(server.port);
    let reply = again
        .handshake(&reattach(resp.session_id, resp.passwd.clone(), 400))
        .expect("in-band answer");
    assert_eq!(
        (reply.time_out, reply.session_id, reply.passwd.as_ref()),
        (0, 0, &[0u8; 16][..])
    );
    assert!(again.closed_by_server());
}

#[test]
fn wrong_password_is_refused_and_kills_the_old_connection() {
    let server = ZkdProcess::start();
    let (mut first, resp) = RawClient::new_session(server.port, 10_000);
    let mut intruder = RawClient::connect(server.port);
    let reply = intruder
        .handshake(&reattach(
            resp.session_id,
            Bytes::from_static(&[1; 16]),
            10_000,
        ))
        .expect("in-band answer");
    assert_eq!((reply.time_out, reply.session_id), (0, 0));
    assert!(intruder.closed_by_server());
    // ZooKeeper closes the session's live connection before checking the password.
    assert!(first.closed_by_server());
    // The session itself lives on: the right password reattaches.
    let mut owner = RawClient::connect(server.port);
    let ok = owner
        .handshake(&reattach(resp.session_id, resp.passwd.clone(), 10_000))
        .unwrap();
    assert_eq!(
        (ok.session_id, ok.passwd.clone()),
        (resp.session_id, resp.passwd)
    );
}

#[tokio::test]
async fn reattach_moves_the_session_and_keeps_its_ephemerals() {
    let server = ZkdProcess::start();
    // Detached: dropping the client closes its connection but not its session,
    // as when a client process hands its session to a successor. (Two live
    // clients sharing one session would keep stealing it from each other.)
    let first = within(
        zk::Client::connector()
            .with_session_timeout(Duration::from_secs(10))
            .with_detached()
            .connect(&server.addr()),
    )
    .await
    .unwrap();
    let eph = zk::CreateMode::Ephemeral.with_acls(zk::Acls::anyone_all());
    within(first.create("/mine", b"", &eph)).await.unwrap();
    let id = first.session_id();
    let session = first.session().clone();
    drop(first);
    let second = within(
        zk::Client::connector()
            .with_session(session)
            .connect(&server.addr()),
    )
    .await
    .unwrap();
    assert_eq!(second.session_id(), id);
    let (_, stat) = within(second.get_data("/mine")).await.unwrap();
    assert_eq!(stat.ephemeral_owner, id.0);
}

#[test]
fn close_session_replies_then_closes_and_removes_ephemerals() {
    let server = ZkdProcess::start();
    let (mut c, _) = RawClient::new_session(server.port, 10_000);
    let (created, _) = c.call(1, &create_ephemeral("/bye"));
    assert_eq!(created.err, 0);
    let (closed, body) = c.call(2, &ClientRequest::CloseSession);
    assert_eq!((closed.xid, closed.err), (2, 0));
    assert!(closed.zxid > created.zxid, "closeSession is a txn");
    assert!(body.is_empty());
    assert!(c.closed_by_server());
    let (mut other, _) = RawClient::new_session(server.port, 10_000);
    let (h, _) = other.call(
        1,
        &ClientRequest::Exists(ExistsRequest {
            path: "/bye".into(),
            watch: false,
        }),
    );
    assert_eq!(h.err, zkd_protocol::ErrorCode::NoNode.code());
}

#[tokio::test]
async fn pings_keep_a_session_alive_past_its_timeout() {
    let server = ZkdProcess::start_with(fast_ticks());
    let c = connect(&server.addr(), Duration::from_millis(600)).await;
    within(c.create(
        "/alive",
        b"",
        &zk::CreateMode::Ephemeral.with_acls(zk::Acls::anyone_all()),
    ))
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_millis(2000)).await;
    assert!(within(c.check_stat("/alive")).await.unwrap().is_some());
}

#[test]
fn ping_replies_use_xid_minus_two() {
    let server = ZkdProcess::start();
    let (mut c, _) = RawClient::new_session(server.port, 10_000);
    c.send_request(77, &ClientRequest::Ping);
    let mut frame = c.recv();
    let h = ReplyHeader::decode(&mut frame).unwrap();
    assert_eq!((h.xid, h.err), (-2, 0));
}
