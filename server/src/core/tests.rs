//! The core driven by hand: events in, exact commands out, time injected.

use super::*;
use bytes::Bytes;
use zkd_protocol::records::*;
use zkd_protocol::request::ClientRequest;
use zkd_protocol::{OpCode, Record, Zxid};
use zkd_storage::{DataTree, TxnBody};

fn at(ms: u64) -> Now {
    Now {
        mono_ms: ms,
        wall_ms: 1_000_000 + ms as i64,
    }
}

fn node() -> Node {
    Node::new(CoreConfig::default(), DataTree::new(), at(0))
}

fn request(xid: i32, req: &ClientRequest) -> Bytes {
    let mut out = RequestHeader {
        xid,
        r#type: req.op_code() as i32,
    }
    .to_bytes()
    .to_vec();
    req.encode_body(&mut out);
    Bytes::from(out)
}

fn create(path: &str, flags: i32) -> ClientRequest {
    ClientRequest::Create(
        OpCode::Create,
        CreateRequest {
            path: path.into(),
            data: None,
            acl: vec![Acl::world(31)],
            flags,
        },
    )
}

/// The err of a reply frame.
fn reply_err(frame: &Bytes) -> i32 {
    ReplyHeader::decode(&mut frame.clone()).unwrap().err
}

/// Feeds one request frame from `conn` at time `t`.
fn submit(n: &mut Node, t: u64, conn: ConnId, xid: i32, req: &ClientRequest) {
    n.handle_event(
        at(t),
        Event::Request {
            conn,
            frame: request(xid, req),
        },
    );
}

fn drain(n: &mut Node) -> Vec<Command> {
    n.drain_commands().collect()
}

/// Persists every txn the node asked for; returns the highest zxid.
fn persist_all(n: &mut Node, commands: &[Command], t: u64) -> Option<Zxid> {
    let last = commands
        .iter()
        .filter_map(|c| {
            if let Command::Persist { txn } = c {
                Some(txn.zxid())
            } else {
                None
            }
        })
        .max();
    if let Some(zxid) = last {
        n.handle_event(at(t), Event::Persisted { zxid });
    }
    last
}

fn sent_xids(commands: &[Command], conn: ConnId) -> Vec<i32> {
    commands
        .iter()
        .filter_map(|c| match c {
            Command::Send { conn: c, frame } | Command::Reply { conn: c, frame } if *c == conn => {
                Some(ReplyHeader::decode(&mut frame.clone()).ok()?.xid)
            }
            _ => None,
        })
        .collect()
}

/// Connects `conn` with a new session of `timeout_ms`; returns the session id.
fn open_session(n: &mut Node, conn: ConnId, timeout_ms: i32) -> i64 {
    n.handle_event(
        at(0),
        Event::Connected {
            conn,
            remote_ip: "127.0.0.1".into(),
            remote_port: 1,
        },
    );
    let request = ConnectRequest {
        time_out: timeout_ms,
        passwd: Bytes::from_static(&[0; 16]),
        read_only: Some(false),
        ..Default::default()
    };
    n.handle_event(at(0), Event::Handshake { conn, request });
    let commands = drain(n);
    assert!(
        matches!(&commands[..], [Command::Persist { txn }] if matches!(txn.body, TxnBody::CreateSession(_))),
        "{commands:?}"
    );
    persist_all(n, &commands, 0);
    let commands = drain(n);
    let [Command::Send { frame, .. }] = &commands[..] else {
        panic!("expected the ConnectResponse: {commands:?}")
    };
    ConnectResponse::decode(&mut frame.clone())
        .unwrap()
        .session_id
}

#[test]
fn a_write_is_answered_only_once_persisted() {
    let mut n = node();
    let conn = ConnId(1);
    open_session(&mut n, conn, 4000);
    submit(&mut n, 10, conn, 5, &create("/a", 0));
    let commands = drain(&mut n);
    assert!(
        matches!(&commands[..], [Command::Persist { .. }]),
        "only a Persist before durability: {commands:?}"
    );
    persist_all(&mut n, &commands, 11);
    assert_eq!(sent_xids(&drain(&mut n), conn), vec![5]);
}

#[test]
fn a_write_checks_the_version_a_pending_write_leaves_after_an_older_one_applies() {
    let mut n = node();
    let (a, b) = (ConnId(1), ConnId(2));
    open_session(&mut n, a, 4000);
    open_session(&mut n, b, 4000);
    submit(&mut n, 1, a, 1, &create("/v", 0));
    let c = drain(&mut n);
    persist_all(&mut n, &c, 1);
    drain(&mut n);
    let set = |version| {
        ClientRequest::SetData(SetDataRequest {
            path: "/v".into(),
            data: None,
            version,
        })
    };
    // Two pipelined writes of /v; only the first is durable when b's arrives.
    submit(&mut n, 2, a, 2, &set(0));
    submit(&mut n, 2, a, 3, &set(1));
    let c = drain(&mut n);
    let first = c.iter().find_map(|c| match c {
        Command::Persist { txn } => Some(txn.zxid()),
        _ => None,
    });
    n.handle_event(
        at(3),
        Event::Persisted {
            zxid: first.unwrap(),
        },
    );
    drain(&mut n);
    submit(&mut n, 4, b, 1, &set(2));
    let c = drain(&mut n);
    persist_all(&mut n, &c, 5);
    let replies = drain(&mut n);
    let errs: Vec<i32> = replies
        .iter()
        .filter_map(|c| match c {
            Command::Reply { frame, .. } => Some(reply_err(frame)),
            _ => None,
        })
        .collect();
    assert_eq!(errs, vec![0, 0], "a's second write, then b's at version 2");
    assert_eq!(n.tree().node("/v").unwrap().stat.version, 3);
}

#[test]
fn a_read_waits_behind_its_own_sessions_write_but_not_others() {
    let mut n = node();
    let (a, b) = (ConnId(1), ConnId(2));
    open_session(&mut n, a, 4000);
    open_session(&mut n, b, 4000);
    submit(&mut n, 10, a, 1, &create("/a", 0));
    let get = ClientRequest::GetData(GetDataRequest {
        path: "/a".into(),
        watch: false,
    });
    submit(&mut n, 10, a, 2, &get);
    submit(&mut n, 10, b, 7, &get);
    let commands = drain(&mut n);
    assert!(
        sent_xids(&commands, a).is_empty(),
        "a's read waits for a's write"
    );
    assert_eq!(sent_xids(&commands, b), vec![7], "b is not held up by a");
    persist_all(&mut n, &commands, 11);
    let commands = drain(&mut n);
    assert_eq!(sent_xids(&commands, a), vec![1, 2]);
    let Command::Reply { frame, .. } = &commands[1] else {
        panic!()
    };
    assert_eq!(reply_err(frame), 0, "the read sees the write");
}

/// getData answers with the node's data (null, empty or not) and stat, as a
/// GetDataResponse, encoded from the node itself.
#[test]
fn get_data_answers_the_nodes_data_and_stat() {
    let mut n = node();
    let conn = ConnId(1);
    open_session(&mut n, conn, 4000);
    let datas = [None, Some(Bytes::new()), Some(Bytes::from_static(b"abc"))];
    for (i, data) in datas.iter().enumerate() {
        let ClientRequest::Create(op, mut req) = create(&format!("/d{i}"), 0) else {
            unreachable!()
        };
        req.data = data.clone();
        submit(&mut n, 10, conn, i as i32, &ClientRequest::Create(op, req));
    }
    let commands = drain(&mut n);
    persist_all(&mut n, &commands, 11);
    drain(&mut n);
    for (i, data) in datas.iter().enumerate() {
        let path = format!("/d{i}");
        let get = ClientRequest::GetData(GetDataRequest {
            path: path.clone(),
            watch: false,
        });
        submit(&mut n, 12, conn, 10 + i as i32, &get);
        let commands = drain(&mut n);
        let [Command::Reply { frame, .. }] = &commands[..] else {
            panic!("one reply: {commands:?}")
        };
        let mut body = frame.clone();
        assert_eq!(ReplyHeader::decode(&mut body).unwrap().err, 0);
        let got = GetDataResponse::decode(&mut body).unwrap();
        assert!(body.is_empty());
        assert_eq!(&got.data, data);
        assert_eq!(got.stat, n.tree().node(&path).unwrap().stat());
    }
}

#[test]
fn a_silent_session_expires_at_the_tick_after_its_timeout() {
    let mut n = node();
    let conn = ConnId(1);
    let session = open_session(&mut n, conn, 4000);
    submit(&mut n, 100, conn, 1, &create("/e", 1));
    let commands = drain(&mut n);
    persist_all(&mut n, &commands, 100);
    drain(&mut n);
    // Touched at 100 ms: expiry is 4100 rounded up to the next 2000 ms tick.
    assert_eq!(n.poll_timeout(), Some(6000));
    n.handle_timeout(at(5999));
    assert!(drain(&mut n).is_empty());
    n.handle_timeout(at(6000));
    let commands = drain(&mut n);
    let [Command::Persist { txn }] = &commands[..] else {
        panic!("expected closeSession: {commands:?}")
    };
    assert_eq!(txn.header.client_id, session);
    assert!(
        matches!(&txn.body, TxnBody::CloseSession(c) if c.paths2_delete == vec!["/e".to_string()])
    );
    persist_all(&mut n, &commands, 6001);
    let commands = drain(&mut n);
    assert!(
        matches!(&commands[..], [Command::Close { conn: c }] if *c == conn),
        "{commands:?}"
    );
    assert!(n.tree().node("/e").is_none());
    assert!(n.sessions().is_empty());
}

#[test]
fn a_watch_event_is_sent_before_the_reply_that_reflects_it() {
    let mut n = node();
    let conn = ConnId(1);
    open_session(&mut n, conn, 4000);
    submit(&mut n, 1, conn, 1, &create("/w", 0));
    let c = drain(&mut n);
    persist_all(&mut n, &c, 1);
    drain(&mut n);
    let watch = ClientRequest::Exists(ExistsRequest {
        path: "/w".into(),
        watch: true,
    });
    submit(&mut n, 2, conn, 2, &watch);
    let set = ClientRequest::SetData(SetDataRequest {
        path: "/w".into(),
        data: None,
        version: -1,
    });
    submit(&mut n, 2, conn, 3, &set);
    let c = drain(&mut n);
    persist_all(&mut n, &c, 3);
    let mut xids = sent_xids(&c, conn);
    xids.extend(sent_xids(&drain(&mut n), conn));
    assert_eq!(xids, vec![2, -1, 3]);
}

#[test]
fn a_close_prepared_behind_pending_writes_deletes_only_what_the_session_will_own() {
    let mut n = node();
    let (s, t) = (ConnId(1), ConnId(2));
    open_session(&mut n, s, 4000);
    let t_id = open_session(&mut n, t, 4000);
    submit(&mut n, 1, s, 1, &create("/lock", 1));
    submit(&mut n, 1, s, 2, &create("/mine", 1));
    let c = drain(&mut n);
    persist_all(&mut n, &c, 1);
    drain(&mut n);
    // None of these is durable yet when S's session closes.
    let delete = ClientRequest::Delete(DeleteRequest {
        path: "/lock".into(),
        version: -1,
    });
    submit(&mut n, 2, t, 1, &delete);
    submit(&mut n, 2, t, 2, &create("/lock", 1));
    submit(&mut n, 2, s, 3, &create("/late", 1));
    submit(&mut n, 2, s, 4, &ClientRequest::CloseSession);
    // T's multi must see S's ephemerals as gone.
    let check = ClientRequest::Multi(MultiRequest {
        ops: vec![MultiOp::Check(CheckVersionRequest {
            path: "/mine".into(),
            version: -1,
        })],
    });
    submit(&mut n, 2, t, 3, &check);
    let c = drain(&mut n);
    let close = c.iter().find_map(|c| match c {
        Command::Persist { txn } => match &txn.body {
            TxnBody::CloseSession(close) => Some(close.paths2_delete.clone()),
            _ => None,
        },
        _ => None,
    });
    assert_eq!(
        close,
        Some(vec!["/late".to_string(), "/mine".to_string()]),
        "/lock is T's by then"
    );
    persist_all(&mut n, &c, 3);
    let replies = drain(&mut n);
    assert_eq!(
        n.tree().node("/lock").and_then(|l| l.ephemeral_session()),
        Some(t_id)
    );
    assert!(n.tree().node("/mine").is_none() && n.tree().node("/late").is_none());
    let multi_reply = replies.iter().rev().find_map(|c| match c {
        Command::Reply { conn, frame } if *conn == t => Some(frame.clone()),
        _ => None,
    });
    let mut frame = multi_reply.unwrap();
    ReplyHeader::decode(&mut frame).unwrap();
    let results = MultiResponse::decode(&mut frame).unwrap().results;
    assert_eq!(
        results,
        vec![MultiResult::Error {
            err: zkd_protocol::ErrorCode::NoNode.code()
        }]
    );
}

#[test]
fn a_reattach_waits_for_the_sessions_writes_from_its_old_connection() {
    let mut n = node();
    let (old, new) = (ConnId(1), ConnId(2));
    let session = open_session(&mut n, old, 4000);
    submit(&mut n, 1, old, 1, &create("/x", 0));
    let pending = drain(&mut n);
    n.handle_event(
        at(2),
        Event::Connected {
            conn: new,
            remote_ip: "127.0.0.1".into(),
            remote_port: 2,
        },
    );
    let passwd = Bytes::copy_from_slice(&session::session_password(session));
    let hello = ConnectRequest {
        session_id: session,
        passwd,
        time_out: 4000,
        read_only: Some(false),
        ..Default::default()
    };
    n.handle_event(
        at(2),
        Event::Handshake {
            conn: new,
            request: hello,
        },
    );
    let get = ClientRequest::GetData(GetDataRequest {
        path: "/x".into(),
        watch: false,
    });
    submit(&mut n, 2, new, 2, &get);
    let c = drain(&mut n);
    assert!(
        matches!(&c[..], [Command::Close { conn }] if *conn == old),
        "only the old connection is closed so far: {c:?}"
    );
    persist_all(&mut n, &pending, 3);
    let c = drain(&mut n);
    let [Command::Send { conn, frame }, Command::Reply { frame: reply, .. }] = &c[..] else {
        panic!("{c:?}")
    };
    assert_eq!(*conn, new);
    assert_eq!(
        ConnectResponse::decode(&mut frame.clone())
            .unwrap()
            .session_id,
        session
    );
    assert_eq!(
        reply_err(reply),
        0,
        "the read on the new connection sees the old write"
    );
}

#[test]
fn a_second_reattach_closes_the_first_one_still_waiting() {
    let mut n = node();
    let (old, b, c) = (ConnId(1), ConnId(2), ConnId(3));
    let session = open_session(&mut n, old, 4000);
    submit(&mut n, 1, old, 1, &create("/x", 0));
    let pending = drain(&mut n);
    let passwd = Bytes::copy_from_slice(&session::session_password(session));
    for conn in [b, c] {
        n.handle_event(
            at(2),
            Event::Connected {
                conn,
                remote_ip: "127.0.0.1".into(),
                remote_port: 2,
            },
        );
        let hello = ConnectRequest {
            session_id: session,
            passwd: passwd.clone(),
            time_out: 4000,
            read_only: Some(false),
            ..Default::default()
        };
        n.handle_event(
            at(2),
            Event::Handshake {
                conn,
                request: hello,
            },
        );
    }
    let closed: Vec<ConnId> = drain(&mut n)
        .iter()
        .filter_map(|c| {
            if let Command::Close { conn } = c {
                Some(*conn)
            } else {
                None
            }
        })
        .collect();
    assert_eq!(
        closed,
        vec![old, b],
        "each reattach closes every other connection of the session"
    );
    persist_all(&mut n, &pending, 3);
    let c_out = drain(&mut n);
    assert!(
        matches!(&c_out[..], [Command::Send { conn, .. }] if *conn == c),
        "{c_out:?}"
    );
    assert_eq!(n.connections().len(), 1);
}

/// Reattaches `session` on a fresh connection `conn` asking for `timeout_ms`;
/// returns the negotiated timeout.
fn reattach(n: &mut Node, t: u64, conn: ConnId, session: i64, timeout_ms: i32) -> i32 {
    n.handle_event(
        at(t),
        Event::Connected {
            conn,
            remote_ip: "127.0.0.1".into(),
            remote_port: 2,
        },
    );
    let request = ConnectRequest {
        session_id: session,
        passwd: Bytes::copy_from_slice(&session::session_password(session)),
        time_out: timeout_ms,
        read_only: Some(false),
        ..Default::default()
    };
    n.handle_event(at(t), Event::Handshake { conn, request });
    let commands = drain(n);
    let Some(Command::Send { frame, .. }) = commands.last() else {
        panic!("expected the ConnectResponse: {commands:?}")
    };
    ConnectResponse::decode(&mut frame.clone())
        .unwrap()
        .time_out
}

#[test]
fn a_reattach_with_a_longer_timeout_expires_by_the_new_one() {
    let mut n = node();
    let session = open_session(&mut n, ConnId(1), 4000);
    assert_eq!(reattach(&mut n, 1000, ConnId(2), session, 20_000), 20_000);
    // Silent since 1000 ms: the old 4 s timeout would expire it at 6000.
    n.handle_timeout(at(6000));
    assert!(drain(&mut n).is_empty(), "expired by the old timeout");
    assert_eq!(n.poll_timeout(), Some(22_000));
    n.handle_timeout(at(22_000));
    assert!(
        matches!(&drain(&mut n)[..], [Command::Persist { txn }] if matches!(txn.body, TxnBody::CloseSession(_))),
        "expires by the negotiated timeout"
    );
}

#[test]
fn a_reattach_with_a_shorter_timeout_expires_by_the_new_one() {
    let mut n = node();
    let session = open_session(&mut n, ConnId(1), 20_000);
    assert_eq!(reattach(&mut n, 1000, ConnId(2), session, 4000), 4000);
    n.handle_timeout(at(6000));
    assert!(
        matches!(&drain(&mut n)[..], [Command::Persist { txn }] if matches!(txn.body, TxnBody::CloseSession(_))),
        "a 4 s session silent since 1000 ms expires at the 6000 ms tick"
    );
}

/// A member not serving that takes `conn`'s handshake for a new session.
fn member_with_handshake(conn: ConnId, t: u64) -> Node {
    let mut n = Node::new_member(CoreConfig::default(), DataTree::new(), Zxid::ZERO, at(0));
    n.handle_event(
        at(t),
        Event::Connected {
            conn,
            remote_ip: "127.0.0.1".into(),
            remote_port: 3,
        },
    );
    let request = ConnectRequest {
        time_out: 10_000,
        passwd: Bytes::from_static(&[0; 16]),
        read_only: Some(false),
        ..Default::default()
    };
    n.handle_event(at(t), Event::Handshake { conn, request });
    n
}

#[test]
fn a_handshake_during_a_failover_is_answered_once_the_member_serves() {
    let conn = ConnId(7);
    let mut n = member_with_handshake(conn, 10);
    assert!(drain(&mut n).is_empty(), "held, not refused");
    assert_eq!(n.poll_timeout(), Some(500), "until the hold ends");
    n.start_leading(at(40), 1);
    let commands = drain(&mut n);
    assert!(
        matches!(&commands[..], [Command::Persist { txn }] if matches!(txn.body, TxnBody::CreateSession(_))),
        "the held handshake goes on: {commands:?}"
    );
}

#[test]
fn a_handshake_held_past_the_failover_window_is_refused() {
    let conn = ConnId(7);
    let mut n = member_with_handshake(conn, 10);
    n.handle_timeout(at(499));
    assert!(drain(&mut n).is_empty());
    n.handle_timeout(at(500));
    assert!(matches!(&drain(&mut n)[..], [Command::Close { conn: c }] if *c == conn));
    // Later handshakes are refused at once, as ZooKeeper refuses them.
    let mut later = member_with_handshake(ConnId(8), 600);
    assert!(matches!(&drain(&mut later)[..], [Command::Close { .. }]));
}

#[test]
fn a_handshake_stays_held_through_a_role_that_ended_before_it_served() {
    let conn = ConnId(7);
    let mut n = member_with_handshake(conn, 10);
    n.stop_serving(at(20));
    assert!(drain(&mut n).is_empty(), "still held");
    n.start_following(at(30), false);
    let commands = drain(&mut n);
    assert!(
        matches!(&commands[..], [Command::Forward(_)]),
        "the held handshake creates its session through the leader: {commands:?}"
    );
}

/// A session follower 2 asks the leader to create, as a forwarded request.
fn forwarded_create_session(session: i64) -> Event {
    Event::Forwarded {
        from: 2,
        request: crate::core::zab::ForwardedRequest {
            session,
            cxid: 0,
            op_type: OpCode::CreateSession as i32,
            body: Bytes::copy_from_slice(&10_000i32.to_be_bytes()),
            auth: Vec::new(),
        },
    }
}

/// The leader counts what each follower forwarded until it is committed
/// (issue 35, finding 7): the member closes a link past the bound.
#[test]
fn a_leader_counts_each_followers_forwarded_requests_in_flight() {
    let mut n = Node::new_member(CoreConfig::default(), DataTree::new(), Zxid::ZERO, at(0));
    n.start_leading(at(0), 1);
    for session in 1..=3 {
        n.handle_event(at(1), forwarded_create_session(session));
    }
    assert_eq!((n.forwarded_in_flight(2), n.forwarded_in_flight(3)), (3, 0));
    let txns: Vec<_> = drain(&mut n)
        .into_iter()
        .filter_map(|c| match c {
            Command::Persist { txn } => Some(txn),
            _ => None,
        })
        .collect();
    assert_eq!(txns.len(), 3);
    for txn in txns.into_iter().take(2) {
        n.handle_event(at(2), Event::Committed { txn, digest: None });
    }
    assert_eq!(n.forwarded_in_flight(2), 1, "two of three committed");
    n.stop_serving(at(3));
    assert_eq!(n.forwarded_in_flight(2), 0, "the role ended");
}

fn create_with(path: &str, data: &'static [u8]) -> ClientRequest {
    ClientRequest::Create(
        OpCode::Create,
        CreateRequest {
            path: path.into(),
            data: Some(Bytes::from_static(data)),
            acl: vec![Acl::world(31)],
            flags: 0,
        },
    )
}

/// The errs of the replies among `commands`, in order.
fn reply_errs(commands: &[Command]) -> Vec<i32> {
    let replies = commands.iter().filter_map(|c| match c {
        Command::Reply { frame, .. } => Some(reply_err(frame)),
        _ => None,
    });
    replies.collect()
}

/// Writes in flight count against a hard quota: pipelined creates stop at
/// the limit (ZooKeeper checks the committed count only and lets them
/// through), a pipelined delete makes room, and a refused write is never
/// counted.
#[test]
fn pipelined_writes_cannot_pass_a_hard_quota() {
    let config = CoreConfig {
        enforce_quota: true,
        ..CoreConfig::default()
    };
    let mut n = Node::new(config, DataTree::new(), at(0));
    let conn = ConnId(1);
    open_session(&mut n, conn, 4000);
    let limits = b"count=-1,bytes=-1=;byteHardLimit=10;countHardLimit=3";
    let setup = [
        create_with("/q", b""),
        create_with("/zookeeper/quota/q", b""),
        create_with("/zookeeper/quota/q/zookeeper_limits", limits),
        create_with("/zookeeper/quota/q/zookeeper_stats", b"count=0,bytes=0"),
    ];
    for (xid, req) in (1..).zip(&setup) {
        submit(&mut n, 1, conn, xid, req);
        let c = drain(&mut n);
        persist_all(&mut n, &c, 1);
        assert_eq!(reply_errs(&drain(&mut n)), vec![0]);
    }
    let set = |data: &'static [u8]| {
        ClientRequest::SetData(SetDataRequest {
            path: "/q/a".into(),
            data: Some(Bytes::from_static(data)),
            version: -1,
        })
    };
    let delete = ClientRequest::Delete(DeleteRequest {
        path: "/q/a".into(),
        version: -1,
    });
    // Nothing is persisted until every request is in: all are in flight.
    let pipelined = [
        create_with("/q/a", b"12345"),
        create_with("/q/b", b""),
        create_with("/q/c", b""),
        set(b"12345678901"),
        set(b"1234567"),
        delete,
        create_with("/q/d", b"123"),
        create_with("/q/e", b""),
    ];
    for (xid, req) in (10..).zip(&pipelined) {
        submit(&mut n, 2, conn, xid, req);
    }
    let c = drain(&mut n);
    persist_all(&mut n, &c, 3);
    let errs = reply_errs(&drain(&mut n));
    let over = zkd_protocol::ErrorCode::QuotaExceeded.code();
    assert_eq!(errs, vec![0, 0, over, over, 0, 0, 0, over]);
    let stats = n.tree().node("/zookeeper/quota/q/zookeeper_stats").unwrap();
    assert_eq!(stats.data(), Some(&b"count=3,bytes=3"[..]));
}

#[path = "read_only_tests.rs"]
mod read_only_tests;
