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
            Command::Send { conn: c, frame } if *c == conn => {
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
    n.handle_event(
        at(10),
        Event::Request {
            conn,
            frame: request(5, &create("/a", 0)),
        },
    );
    let commands = drain(&mut n);
    assert!(
        matches!(&commands[..], [Command::Persist { .. }]),
        "only a Persist before durability: {commands:?}"
    );
    persist_all(&mut n, &commands, 11);
    assert_eq!(sent_xids(&drain(&mut n), conn), vec![5]);
}

#[test]
fn a_read_waits_behind_its_own_sessions_write_but_not_others() {
    let mut n = node();
    let (a, b) = (ConnId(1), ConnId(2));
    open_session(&mut n, a, 4000);
    open_session(&mut n, b, 4000);
    n.handle_event(
        at(10),
        Event::Request {
            conn: a,
            frame: request(1, &create("/a", 0)),
        },
    );
    let get = ClientRequest::GetData(GetDataRequest {
        path: "/a".into(),
        watch: false,
    });
    n.handle_event(
        at(10),
        Event::Request {
            conn: a,
            frame: request(2, &get),
        },
    );
    n.handle_event(
        at(10),
        Event::Request {
            conn: b,
            frame: request(7, &get),
        },
    );
    let commands = drain(&mut n);
    assert!(
        sent_xids(&commands, a).is_empty(),
        "a's read waits for a's write"
    );
    assert_eq!(sent_xids(&commands, b), vec![7], "b is not held up by a");
    persist_all(&mut n, &commands, 11);
    let commands = drain(&mut n);
    assert_eq!(sent_xids(&commands, a), vec![1, 2]);
    let Command::Send { frame, .. } = &commands[1] else {
        panic!()
    };
    let mut frame = frame.clone();
    assert_eq!(
        ReplyHeader::decode(&mut frame).unwrap().err,
        0,
        "the read sees the write"
    );
}

#[test]
fn a_silent_session_expires_at_the_tick_after_its_timeout() {
    let mut n = node();
    let conn = ConnId(1);
    let session = open_session(&mut n, conn, 4000);
    n.handle_event(
        at(100),
        Event::Request {
            conn,
            frame: request(1, &create("/e", 1)),
        },
    );
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
    n.handle_event(
        at(1),
        Event::Request {
            conn,
            frame: request(1, &create("/w", 0)),
        },
    );
    let c = drain(&mut n);
    persist_all(&mut n, &c, 1);
    drain(&mut n);
    let watch = ClientRequest::Exists(ExistsRequest {
        path: "/w".into(),
        watch: true,
    });
    n.handle_event(
        at(2),
        Event::Request {
            conn,
            frame: request(2, &watch),
        },
    );
    let set = ClientRequest::SetData(SetDataRequest {
        path: "/w".into(),
        data: None,
        version: -1,
    });
    n.handle_event(
        at(2),
        Event::Request {
            conn,
            frame: request(3, &set),
        },
    );
    let c = drain(&mut n);
    persist_all(&mut n, &c, 3);
    let mut xids = sent_xids(&c, conn);
    xids.extend(sent_xids(&drain(&mut n), conn));
    assert_eq!(xids, vec![2, -1, 3]);
}
