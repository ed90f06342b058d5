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

/// Tiny deterministic generator for the fuzzy-snapshot property.
struct Gen(u64);
impl Gen {
    fn next(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

const NAMES: [&str; 6] = ["/a", "/b", "/a/x", "/a/y", "/b/x", "/a/x/z"];

/// A txn valid against `tree`, or None if the random pick does not fit.
fn random_txn(tree: &DataTree, g: &mut Gen, zxid: i64) -> Option<Txn> {
    let p = NAMES[g.next(NAMES.len() as u64) as usize];
    let session = 1 + g.next(2) as i64;
    let body = match (g.next(4), tree.node(p)) {
        (0 | 1, None) => {
            let parent = tree.node(crate::path::parent(p))?;
            if parent.ephemeral_session().is_some() {
                return None;
            }
            let mut body = create(p, g.next(3) == 0, parent.stat.cversion + 1);
            if let TxnBody::Create(_, t) = &mut body {
                t.data = Some(Bytes::from(vec![g.next(255) as u8; 3]));
            }
            body
        }
        (2, Some(node)) if node.children.is_empty() => {
            TxnBody::Delete(OpCode::Delete, DeleteTxn { path: p.into() })
        }
        (3, Some(node)) => TxnBody::SetData(SetDataTxn {
            path: p.into(),
            data: Some(Bytes::from(vec![g.next(255) as u8; 2])),
            version: node.stat.version + 1,
        }),
        (_, _) if g.next(8) == 0 => TxnBody::CloseSession(CloseSessionTxn {
            paths2_delete: tree.ephemerals_of(session),
        }),
        _ => return None,
    };
    Some(txn(zxid, session, body))
}

/// Snapshot + replay must equal the live tree at *every* point after the
/// snapshot completes, not only at the end: later txns can hide a stale value
/// (a parent's pzxid after replaying a delete of a child the cursor skipped).
#[test]
fn fuzzy_snapshots_plus_replay_rebuild_the_exact_tree() {
    for seed in 1..=300u64 {
        let mut g = Gen(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        let mut tree = DataTree::new();
        let mut log = Vec::new();
        let mut zxid = 0;
        let mut cursor = None;
        let mut rebuilt: Option<DataTree> = None;
        for step in 0..200 {
            if let Some(t) = random_txn(&tree, &mut g, zxid + 1) {
                zxid += 1;
                tree.apply(&t);
                if let Some(r) = rebuilt.as_mut() {
                    r.apply(&t);
                }
                log.push(t);
            }
            if step == 40 + (seed % 50) as usize {
                cursor = Some(tree.start_snapshot());
            }
            // A few nodes per step while txns keep landing.
            if let Some(c) = cursor.as_mut() {
                if c.step(&tree, 1 + g.next(2) as usize) {
                    let done = cursor.take().unwrap();
                    let from = done.zxid();
                    let mut r = DataTree::from_image(done.finish()).unwrap();
                    for t in log.iter().filter(|t| t.zxid() > from) {
                        r.apply(t);
                    }
                    rebuilt = Some(r);
                }
            }
            if let Some(r) = &rebuilt {
                assert_eq!(
                    r.to_image(),
                    tree.to_image(),
                    "seed {seed} step {step}: fuzzy snapshot + replay diverged"
                );
                assert_eq!(r.ephemeral_count(), tree.ephemeral_count(), "seed {seed}");
            }
        }
    }
}

/// The cursor has written /p but not /p/c when /p/c is deleted: replaying the
/// delete finds no child, yet /p must still get the delete's pzxid, as
/// ZooKeeper's deleteNode does (it raises pzxid before the existence check).
#[test]
fn replayed_delete_of_a_child_missing_from_the_snapshot_still_raises_pzxid() {
    for close_session in [false, true] {
        let mut tree = DataTree::new();
        tree.apply(&txn(1, 7, create("/p", false, 1)));
        tree.apply(&txn(2, 7, create("/p/c", true, 1)));
        let mut cursor = tree.start_snapshot();
        // Write the root, /p and /zookeeper... until /p is written but not /p/c.
        while cursor.pending_paths().iter().all(|p| p != "/p/c") {
            assert!(
                !cursor.step(&tree, 1),
                "cursor finished before reaching /p/c"
            );
        }
        let delete = if close_session {
            TxnBody::CloseSession(CloseSessionTxn {
                paths2_delete: vec!["/p/c".into()],
            })
        } else {
            TxnBody::Delete(
                OpCode::Delete,
                DeleteTxn {
                    path: "/p/c".into(),
                },
            )
        };
        let del = txn(3, 7, delete);
        tree.apply(&del);
        while !cursor.step(&tree, 16) {}
        let from = cursor.zxid();
        let mut rebuilt = DataTree::from_image(cursor.finish()).unwrap();
        assert!(from < del.zxid());
        rebuilt.apply(&del);
        assert_eq!(
            rebuilt.node("/p").unwrap().stat.pzxid,
            3,
            "close_session={close_session}: parent pzxid after replay"
        );
        assert_eq!(rebuilt.to_image(), tree.to_image());
    }
}
