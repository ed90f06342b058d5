//! Read-only mode driven by hand: when it begins and ends, who may
//! connect, and what a read-only session is answered.

use super::*;

/// A member with read-only mode on that started looking at 0.
fn looking_member(local_sessions: bool) -> Node {
    let config = CoreConfig {
        read_only_mode: true,
        local_sessions,
        tick_ms: 500,
        ..CoreConfig::default()
    };
    let mut n = Node::new_member(config, DataTree::new(), Zxid::ZERO, at(0));
    n.looking(at(0));
    n
}

/// Connects `conn` at `t` with a new session asked for read-only or not;
/// the commands that follow.
fn connect(n: &mut Node, conn: ConnId, t: u64, read_only: bool) -> Vec<Command> {
    let remote_ip = "127.0.0.1".into();
    n.handle_event(
        at(t),
        Event::Connected {
            conn,
            remote_ip,
            remote_port: 1,
        },
    );
    let request = ConnectRequest {
        time_out: 6000,
        passwd: Bytes::from_static(&[0; 16]),
        read_only: Some(read_only),
        ..Default::default()
    };
    n.handle_event(at(t), Event::Handshake { conn, request });
    drain(n)
}

fn closed(commands: &[Command], conn: ConnId) -> bool {
    commands
        .iter()
        .any(|c| matches!(c, Command::Close { conn: c } if *c == conn))
}

#[test]
fn a_member_without_a_leader_serves_read_only_sessions_until_its_election_decides() {
    let mut n = looking_member(true);
    assert_eq!(n.poll_timeout(), Some(2000), "max(2 s, tickTime)");
    n.handle_timeout(at(1999));
    assert_eq!(n.mode(), Mode::NotServing);
    n.handle_timeout(at(2000));
    assert_eq!(n.mode(), Mode::ReadOnly);

    assert!(
        closed(&connect(&mut n, ConnId(1), 2001, false), ConnId(1)),
        "read-write refused"
    );
    let commands = connect(&mut n, ConnId(2), 2001, true);
    let [Command::Send { frame, .. }] = &commands[..] else {
        panic!("a local session, nothing persisted: {commands:?}");
    };
    let response = ConnectResponse::decode(&mut frame.clone()).unwrap();
    assert_eq!((response.read_only, response.time_out), (Some(true), 6000));

    submit(
        &mut n,
        2002,
        ConnId(2),
        1,
        &ClientRequest::Exists(ExistsRequest {
            path: "/zookeeper".into(),
            watch: false,
        }),
    );
    submit(&mut n, 2002, ConnId(2), 2, &create("/x", 0));
    submit(
        &mut n,
        2002,
        ConnId(2),
        3,
        &ClientRequest::Sync(SyncRequest { path: "/".into() }),
    );
    let answers: Vec<i32> = drain(&mut n)
        .iter()
        .filter_map(|c| match c {
            Command::Reply { frame, .. } => Some(reply_err(frame)),
            Command::Persist { .. } => panic!("read-only mode wrote: {c:?}"),
            _ => None,
        })
        .collect();
    assert_eq!(
        answers,
        vec![0, -119, -119],
        "reads served, writes and sync NOTREADONLY"
    );

    // A silent local session expires here.
    n.handle_timeout(at(2002 + 6000 + 500));
    assert!(closed(&drain(&mut n), ConnId(2)), "expired locally");
    // The election decided: every read-only connection closes.
    connect(&mut n, ConnId(3), 9000, true);
    n.election_decided(at(9001));
    assert!(closed(&drain(&mut n), ConnId(3)));
    assert_eq!(n.mode(), Mode::NotServing);
    assert_eq!(
        n.poll_timeout(),
        None,
        "no read-only mode until it looks again"
    );
}

#[test]
fn a_decision_in_time_keeps_the_member_from_read_only_mode() {
    let mut n = looking_member(true);
    n.election_decided(at(1000));
    n.handle_timeout(at(5000));
    assert_eq!(n.mode(), Mode::NotServing);
}

#[test]
fn without_local_sessions_a_read_only_connect_gets_a_bare_notreadonly() {
    let mut n = looking_member(false);
    n.handle_timeout(at(2000));
    let commands = connect(&mut n, ConnId(1), 2001, true);
    let [Command::Send { frame, .. }, Command::Close { .. }] = &commands[..] else {
        panic!("{commands:?}");
    };
    assert_eq!(reply_err(frame), -119);
}
