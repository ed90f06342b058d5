//! A committed txn whose apply shows the tree diverged from the leader's
//! (issue 35, finding 5): nothing of it leaves the member, neither the
//! reply to its client nor a watch event, and the node reports where.

use super::*;
use bytes::Bytes;
use zkd_protocol::records::*;
use zkd_protocol::request::ClientRequest;
use zkd_protocol::{OpCode, Record, Zxid};
use zkd_storage::{DataTree, Txn, TxnBody};

fn at(ms: u64) -> Now {
    Now {
        mono_ms: ms,
        wall_ms: 1_000_000 + ms as i64,
    }
}

fn drain(n: &mut Node) -> Vec<Command> {
    n.drain_commands().collect()
}

/// Feeds one request frame from `conn`.
fn submit(n: &mut Node, conn: ConnId, xid: i32, req: &ClientRequest) {
    let mut frame = RequestHeader {
        xid,
        r#type: req.op_code() as i32,
    }
    .to_bytes()
    .to_vec();
    req.encode_body(&mut frame);
    let frame = Bytes::from(frame);
    n.handle_event(at(1), Event::Request { conn, frame });
}

/// The one txn the leading node proposed among `commands`.
fn proposed(commands: &[Command]) -> Txn {
    match commands {
        [Command::Persist { txn }] => txn.clone(),
        other => panic!("expected one proposal, got {other:?}"),
    }
}

/// The xids of the frames sent to `conn` (-1: a watch event).
fn xids_to(commands: &[Command], conn: ConnId) -> Vec<i32> {
    (commands.iter())
        .filter_map(|c| match c {
            Command::Send { conn: c, frame } | Command::Reply { conn: c, frame } if *c == conn => {
                Some(ReplyHeader::decode(&mut frame.clone()).ok()?.xid)
            }
            _ => None,
        })
        .collect()
}

/// A leading member with `conn`'s session open, and an exists watch on
/// `/w` set; returns it with the proposal of `conn`'s create of `/w`.
fn leader_with_a_watched_create(conn: ConnId) -> (Node, Txn) {
    let mut n = Node::new_member(CoreConfig::default(), DataTree::new(), Zxid::ZERO, at(0));
    n.start_leading(at(0), 1);
    drain(&mut n);
    n.handle_event(
        at(0),
        Event::Connected {
            conn,
            remote_ip: "127.0.0.1".into(),
            remote_port: 1,
        },
    );
    let request = ConnectRequest {
        time_out: 10_000,
        passwd: Bytes::from_static(&[0; 16]),
        read_only: Some(false),
        ..Default::default()
    };
    n.handle_event(at(0), Event::Handshake { conn, request });
    let txn = proposed(&drain(&mut n));
    n.handle_event(at(0), Event::Committed { txn, digest: None });
    drain(&mut n);
    let watch = ClientRequest::Exists(ExistsRequest {
        path: "/w".into(),
        watch: true,
    });
    submit(&mut n, conn, 1, &watch);
    assert_eq!(xids_to(&drain(&mut n), conn), vec![1]);
    let create = ClientRequest::Create(
        OpCode::Create,
        CreateRequest {
            path: "/w".into(),
            data: None,
            acl: vec![Acl::world(31)],
            flags: 0,
        },
    );
    submit(&mut n, conn, 2, &create);
    let txn = proposed(&drain(&mut n));
    assert!(matches!(txn.body, TxnBody::Create(..)));
    (n, txn)
}

/// The tree's digest once `txn` is applied to it.
fn digest_after(n: &Node, txn: &Txn) -> u64 {
    let mut tree = n.tree().clone();
    tree.apply(txn);
    tree.digest()
}

#[test]
fn a_txn_matching_the_leaders_digest_fires_its_watch_and_answers() {
    let conn = ConnId(1);
    let (mut n, txn) = leader_with_a_watched_create(conn);
    let digest = Some(digest_after(&n, &txn));
    n.handle_event(at(2), Event::Committed { txn, digest });
    assert_eq!(xids_to(&drain(&mut n), conn), vec![-1, 2]);
    assert_eq!(n.take_divergence(), None);
}

/// The xids `conn` receives when its committed create comes with a digest
/// other than the tree's after it, and where the node saw divergence.
fn sent_for_a_diverging_create(conn: ConnId) -> (Vec<i32>, Option<Zxid>) {
    let (mut n, txn) = leader_with_a_watched_create(conn);
    let digest = Some(digest_after(&n, &txn) ^ 1);
    n.handle_event(at(2), Event::Committed { txn, digest });
    (xids_to(&drain(&mut n), conn), n.take_divergence())
}

#[test]
fn a_txn_whose_digest_differs_from_the_leaders_leaves_nothing() {
    let (sent, diverged_at) = sent_for_a_diverging_create(ConnId(1));
    assert_eq!(
        sent,
        Vec::<i32>::new(),
        "neither the watch event nor the reply of a diverging txn"
    );
    assert_eq!(diverged_at, Some(Zxid::new(1, 2)));
}

#[cfg(feature = "failpoints")]
#[test]
fn planted_diverged_txn_answers_is_caught() {
    use crate::failpoints::{planted, Failpoint};
    let (sent, _) = planted::with(Failpoint::DivergedTxnAnswers, || {
        sent_for_a_diverging_create(ConnId(1))
    });
    assert_eq!(sent, vec![-1, 2], "planted: its event and reply go out");
}

#[test]
fn a_txn_that_fails_to_apply_leaves_nothing() {
    let conn = ConnId(1);
    let (mut n, txn) = leader_with_a_watched_create(conn);
    let zxid = txn.zxid();
    // The tree went wrong: /w is there already, so the create fails here.
    let mut stray = txn.clone();
    stray.header.zxid = n.tree().last_zxid().0;
    n.damage_tree(&stray);
    n.handle_event(at(2), Event::Committed { txn, digest: None });
    assert_eq!(xids_to(&drain(&mut n), conn), Vec::<i32>::new());
    assert_eq!(n.take_divergence(), Some(zxid));
}
