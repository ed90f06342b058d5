//! A member's local snapshots: each one is the tree at its zxid, never a
//! mix of a tree a sync replaced and the one that replaced it (issue 14,
//! finding 2; ZOOKEEPER-1549/1558).

use super::*;
use bytes::Bytes;
use zkd_protocol::records::{Acl, CreateTxn, TxnHeader};
use zkd_protocol::{OpCode, Zxid};
use zkd_storage::{DataTree, Txn, TxnBody};

fn at(ms: u64) -> Now {
    Now {
        mono_ms: ms,
        wall_ms: 1_000_000 + ms as i64,
    }
}

/// Txn `(epoch, counter)`: creates `/{prefix}{counter}` (also the
/// simulator's stray create that damages a tree).
pub(crate) fn create(epoch: u32, counter: u32, prefix: &str) -> Txn {
    let zxid = Zxid::new(epoch, counter);
    let body = TxnBody::Create(
        OpCode::Create,
        CreateTxn {
            path: format!("/{prefix}{counter}"),
            data: Some(Bytes::from_static(b"v")),
            acl: vec![Acl::world(31)].into(),
            ephemeral: false,
            parent_c_version: 0,
        },
    );
    Txn {
        header: TxnHeader {
            client_id: 1,
            cxid: counter as i32,
            zxid: zxid.0,
            time: 1,
            r#type: body.type_code(),
        },
        body,
    }
}

fn tree_of(txns: &[Txn]) -> DataTree {
    let mut tree = DataTree::new();
    for txn in txns {
        tree.apply(txn);
    }
    tree
}

/// Steps the node's timers for a while; the snapshots it asked to store,
/// each the concatenation of its pieces.
fn snapshots(node: &mut Node, from_ms: u64) -> Vec<(Zxid, Bytes)> {
    let mut found = Vec::new();
    let mut image = Vec::new();
    for ms in (from_ms..from_ms + 5_000).step_by(10) {
        node.handle_timeout(at(ms));
        for command in node.drain_commands() {
            let Command::SnapshotPiece(piece) = command else {
                continue;
            };
            if piece.first {
                image.clear();
            }
            image.extend_from_slice(&piece.data);
            if piece.last {
                found.push((piece.zxid, Bytes::from(std::mem::take(&mut image))));
            }
        }
    }
    found
}

/// Every snapshot, with the txns after its zxid replayed over it (it is
/// fuzzy: some may be in it already), gives the tree of `applied`: what
/// recovery from it would build.
fn check(found: &[(Zxid, Bytes)], applied: &[Txn]) {
    let expected = tree_of(applied).digest();
    for (zxid, image) in found {
        let mut tree = DataTree::from_image(image.clone()).expect("the image decodes");
        for txn in applied.iter().filter(|t| t.zxid() > *zxid) {
            tree.apply(txn);
        }
        assert_eq!(
            tree.digest(),
            expected,
            "the snapshot at {zxid} does not recover the tree"
        );
    }
}

/// A member not serving catches its tree up with txns a sync then takes
/// back: it reloads another tree (TRUNC). No snapshot of either may mix
/// them; once serving, snapshots are taken again, and are exact.
#[test]
fn a_snapshot_never_spans_a_tree_replacement() {
    snapshots_across_a_tree_replacement();
}

/// On a slow disk a local snapshot waits for it (issue 35, finding 7):
/// no more of its image than the bound and one slice is ever handed to
/// storage and not yet stored, and once storage catches up it finishes.
#[test]
fn a_snapshot_waits_for_a_slow_disk() {
    snapshot_on_a_slow_disk();
}

fn snapshot_on_a_slow_disk() {
    let config = CoreConfig {
        snap_count: 2_000,
        ..CoreConfig::default()
    };
    let mut node = Node::new_member(config, DataTree::new(), Zxid::ZERO, at(0));
    node.start_following(at(0), false);
    let value = Bytes::from(vec![7u8; 8 << 10]);
    for c in 1..=3_000 {
        let mut txn = create(1, c, "big");
        if let TxnBody::Create(_, create) = &mut txn.body {
            create.data = Some(value.clone());
        }
        node.handle_event(at(0), Event::Committed { txn, digest: None });
    }
    assert!(node.snapshots.in_progress.is_some(), "no snapshot started");
    let bound = local_snapshot::MAX_SNAPSHOT_BACKLOG + (2 << 20);
    let mut last = false;
    for ms in (0..10_000).step_by(4) {
        node.handle_timeout(at(ms));
        last |= node
            .drain_commands()
            .any(|c| matches!(c, Command::SnapshotPiece(p) if p.last));
        let backlog = node.snapshot_backlog();
        assert!(
            backlog <= bound,
            "{backlog} bytes of image wait for the disk"
        );
    }
    assert!(
        !last,
        "a 24 MiB image was handed over to a disk that stored none of it"
    );
    for ms in (10_000..20_000).step_by(4) {
        node.snapshot_stored(node.snapshots.handed);
        node.handle_timeout(at(ms));
        last |= node
            .drain_commands()
            .any(|c| matches!(c, Command::SnapshotPiece(p) if p.last));
    }
    assert!(last, "the snapshot did not finish once the disk caught up");
}

/// Planted back (snapshot-any-tree, unpaced-snapshots), the same scripts fail.
#[cfg(feature = "failpoints")]
mod planted {
    use crate::failpoints::{planted, Failpoint};

    #[test]
    fn a_snapshot_that_outruns_the_disk_is_caught() {
        let outcome = planted::with(Failpoint::UnpacedSnapshots, || {
            std::panic::catch_unwind(super::snapshot_on_a_slow_disk)
        });
        assert!(
            outcome.is_err(),
            "unpaced-snapshots planted, and nothing failed"
        );
    }

    #[test]
    fn a_snapshot_across_a_replacement_is_caught() {
        let outcome = planted::with(Failpoint::SnapshotAnyTree, || {
            std::panic::catch_unwind(super::snapshots_across_a_tree_replacement)
        });
        assert!(
            outcome.is_err(),
            "snapshot-any-tree planted, and nothing failed"
        );
    }
}

fn snapshots_across_a_tree_replacement() {
    let config = CoreConfig {
        snap_count: 4,
        ..CoreConfig::default()
    };
    let mut node = Node::new_member(config, DataTree::new(), Zxid::ZERO, at(0));
    // Logged in an earlier role, applied while not serving.
    let dropped: Vec<Txn> = (1..=3_000).map(|c| create(1, c, "old")).collect();
    for txn in &dropped {
        node.handle_event(
            at(0),
            Event::Committed {
                txn: txn.clone(),
                digest: None,
            },
        );
    }
    // Its timers run: a snapshot under way would write a slice now.
    node.handle_timeout(at(0));
    // The sync cut them: the tree is rebuilt from what is left (nothing).
    node.replace_tree(DataTree::new(), Zxid::ZERO);
    let kept: Vec<Txn> = (1..=40).map(|c| create(2, c, "new")).collect();
    for txn in &kept[..20] {
        node.handle_event(
            at(10),
            Event::Committed {
                txn: txn.clone(),
                digest: None,
            },
        );
    }
    let before_serving = snapshots(&mut node, 20);
    check(&before_serving, &kept[..20]);
    assert!(
        before_serving.is_empty(),
        "a member not serving took a snapshot"
    );

    node.start_following(at(6_000), false);
    for txn in &kept[20..] {
        node.handle_event(
            at(6_000),
            Event::Committed {
                txn: txn.clone(),
                digest: None,
            },
        );
    }
    let serving = snapshots(&mut node, 6_010);
    assert!(!serving.is_empty(), "no snapshot while serving");
    check(&serving, &kept);
}
