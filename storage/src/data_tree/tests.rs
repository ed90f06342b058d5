use super::*;
use crate::txn::{Txn, TxnBody};
use zkd_protocol::records::*;
use zkd_protocol::OpCode;

fn txn(zxid: i64, session: i64, body: TxnBody) -> Txn {
    Txn {
        header: TxnHeader {
            client_id: session,
            cxid: 1,
            zxid,
            time: 1000 + zxid,
            r#type: body.type_code(),
        },
        body,
    }
}

fn create(path: &str, ephemeral: bool, parent_cversion: i32) -> TxnBody {
    TxnBody::Create(
        OpCode::Create,
        CreateTxn {
            path: path.into(),
            data: Some(Bytes::from_static(b"d")),
            acl: vec![Acl::world(Perms::ALL)],
            ephemeral,
            parent_c_version: parent_cversion,
        },
    )
}

#[test]
fn fresh_tree_matches_zookeeper() {
    let tree = DataTree::new();
    let root = tree.node("/").unwrap();
    assert_eq!(root.stat().cversion, -1);
    assert_eq!(tree.node("/zookeeper").unwrap().stat().cversion, -2);
    assert_eq!(tree.node("/zookeeper/config").unwrap().stat().aversion, -1);
    assert_eq!(tree.node_count(), 5);
    assert_eq!(tree.descendant_count("/"), 3);
}

#[test]
fn create_then_delete_updates_parent_counters() {
    let mut tree = DataTree::new();
    let (outcome, triggers) = tree.apply(&txn(1, 7, create("/a", false, 1)));
    assert!(matches!(outcome, TxnOutcome::Created { ref path, .. } if path == "/a"));
    assert_eq!(triggers.len(), 2);
    assert_eq!(triggers[0].event, EventType::NodeCreated);
    assert_eq!(triggers[1].path, "/");
    tree.apply(&txn(2, 7, create("/a/b", false, 1)));
    tree.apply(&txn(
        3,
        7,
        TxnBody::Delete(
            OpCode::Delete,
            DeleteTxn {
                path: "/a/b".into(),
            },
        ),
    ));
    let a = tree.node("/a").unwrap().stat();
    assert_eq!(a.cversion, 2);
    assert_eq!(a.pzxid, 3);
    assert_eq!(a.mzxid, 1);
    assert_eq!(a.num_children, 0);
}

#[test]
fn close_session_deletes_its_ephemerals() {
    let mut tree = DataTree::new();
    tree.apply(&txn(
        1,
        7,
        TxnBody::CreateSession(CreateSessionTxn { time_out: 4000 }),
    ));
    tree.apply(&txn(2, 7, create("/e", true, 1)));
    assert_eq!(tree.node("/e").unwrap().stat().ephemeral_owner, 7);
    assert_eq!(tree.ephemerals_of(7), vec!["/e".to_string()]);
    let (_, triggers) = tree.apply(&txn(
        3,
        7,
        TxnBody::CloseSession(CloseSessionTxn {
            paths2_delete: vec!["/e".into()],
        }),
    ));
    assert!(tree.node("/e").is_none());
    assert!(tree.sessions().is_empty());
    assert_eq!(triggers[0].event, EventType::NodeDeleted);
}

#[test]
fn replayed_create_is_idempotent() {
    let mut tree = DataTree::new();
    let t = txn(1, 7, create("/a", false, 1));
    tree.apply(&t);
    let before = tree.node("/").unwrap().clone();
    tree.apply(&t);
    assert_eq!(tree.node("/").unwrap(), &before);
}

#[test]
fn image_round_trips() {
    let mut tree = DataTree::new();
    tree.apply(&txn(
        1,
        7,
        TxnBody::CreateSession(CreateSessionTxn { time_out: 4000 }),
    ));
    tree.apply(&txn(2, 7, create("/a", false, 1)));
    tree.apply(&txn(3, 7, create("/a/e", true, 1)));
    let copy = DataTree::from_image(tree.to_image()).unwrap();
    assert_eq!(copy.to_image(), tree.to_image());
    assert_eq!(copy.ephemerals_of(7), vec!["/a/e".to_string()]);
    assert_eq!(copy.last_zxid(), Zxid(3));
    assert!(DataTree::from_image(Bytes::from_static(b"garbage")).is_err());
}

#[test]
fn very_deep_trees_count_and_snapshot_without_recursion() {
    // 64 KiB of stack cannot hold 5000 recursive frames: only iteration passes.
    let worker = std::thread::Builder::new().stack_size(64 * 1024).spawn(|| {
        let mut tree = DataTree::new();
        let mut p = String::new();
        for i in 0..5000 {
            p.push_str("/d");
            tree.apply(&txn(i + 1, 7, create(&p, false, 1)));
        }
        assert_eq!(tree.descendant_count("/d"), 4999);
        let copy = DataTree::from_image(tree.to_image()).unwrap();
        assert_eq!(copy.descendant_count("/"), 5003);
    });
    worker
        .unwrap()
        .join()
        .expect("deep tree handled without deep recursion");
}
