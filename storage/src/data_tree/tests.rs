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
            acl: vec![Acl::world(Perms::ALL)].into(),
            ephemeral,
            parent_c_version: parent_cversion,
        },
    )
}

/// One node as [`listing`] shows it.
type Listed<'a> = (
    String,
    Option<Vec<u8>>,
    Vec<Acl>,
    StatPersisted,
    Vec<&'a str>,
);

/// Everything a client can read of `tree`, in path order, each node's
/// children by name: two trees built by different histories (a live one,
/// a snapshot plus replay) list their children in different orders but
/// must agree on this.
fn listing(tree: &DataTree) -> Vec<Listed<'_>> {
    let mut nodes: Vec<_> = tree
        .preorder("/")
        .map(|(p, n)| {
            let mut children: Vec<&str> = tree.child_names(n).collect();
            children.sort_unstable();
            let data = n.data().map(<[u8]>::to_vec);
            (p.to_owned(), data, n.acl.to_vec(), n.stat.clone(), children)
        })
        .collect();
    nodes.sort_by(|a, b| a.0.cmp(&b.0));
    nodes
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
    let first = txn(1, 7, create("/a", false, 1));
    let (outcome, triggers) = tree.apply(&first);
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
    let close = txn(
        3,
        7,
        TxnBody::CloseSession(CloseSessionTxn {
            paths2_delete: vec!["/e".into()],
        }),
    );
    let (_, triggers) = tree.apply(&close);
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

const NAMES: [&str; 12] = [
    "/a",
    "/b",
    "/a/x",
    "/a/y",
    "/b/x",
    "/a/x/z",
    // Quotas on /a and, nested, /a/x, so the stats nodes' counts are checked too.
    "/zookeeper/quota/a",
    "/zookeeper/quota/a/zookeeper_limits",
    "/zookeeper/quota/a/zookeeper_stats",
    "/zookeeper/quota/a/x",
    "/zookeeper/quota/a/x/zookeeper_limits",
    "/zookeeper/quota/a/x/zookeeper_stats",
];

fn random_data(g: &mut Gen) -> Option<Bytes> {
    match g.next(6) {
        0 => None,
        1 => Some(Bytes::new()),
        // Long enough for the hash's four-lane path.
        2 => Some(Bytes::from(vec![
            g.next(255) as u8;
            64 + g.next(100) as usize
        ])),
        _ => Some(Bytes::from(vec![
            g.next(255) as u8;
            1 + g.next(20) as usize
        ])),
    }
}

fn random_acl(g: &mut Gen) -> Vec<Acl> {
    match g.next(3) {
        0 => vec![Acl::world(Perms::ALL)],
        1 => vec![Acl::world(Perms::READ)],
        _ => vec![
            Acl {
                perms: Perms::ALL,
                id: Id {
                    scheme: "digest".into(),
                    id: "u:x".into(),
                },
            },
            Acl::world(Perms::READ),
        ],
    }
}

/// One node op valid against `tree`, or None if the random pick does not fit.
fn random_op(tree: &DataTree, g: &mut Gen) -> Option<TxnBody> {
    let p = NAMES[g.next(NAMES.len() as u64) as usize];
    Some(match (g.next(5), tree.node(p)) {
        (0 | 1, None) => {
            let parent = tree.node(crate::path::parent(p))?;
            if parent.ephemeral_session().is_some() {
                return None;
            }
            let parent_c_version = parent.stat.cversion + 1;
            let (data, acl) = (random_data(g), random_acl(g));
            match g.next(6) {
                0 => TxnBody::CreateContainer(CreateContainerTxn {
                    path: p.into(),
                    data,
                    acl: acl.into(),
                    parent_c_version,
                }),
                1 => TxnBody::CreateTtl(CreateTtlTxn {
                    path: p.into(),
                    data,
                    acl: acl.into(),
                    parent_c_version,
                    ttl: 1 + g.next(10_000) as i64,
                }),
                kind => TxnBody::Create(
                    OpCode::Create,
                    CreateTxn {
                        path: p.into(),
                        data,
                        acl: acl.into(),
                        ephemeral: kind == 2,
                        parent_c_version,
                    },
                ),
            }
        }
        (2, Some(node)) if node.children.is_empty() => {
            TxnBody::Delete(OpCode::Delete, DeleteTxn { path: p.into() })
        }
        (3, Some(node)) => TxnBody::SetData(SetDataTxn {
            path: p.into(),
            data: random_data(g),
            version: node.stat.version + 1,
        }),
        (4, Some(node)) => TxnBody::SetAcl(SetAclTxn {
            path: p.into(),
            acl: random_acl(g),
            version: node.stat.aversion + 1,
        }),
        _ => return None,
    })
}

/// A txn valid against `tree`, or None if the random pick does not fit: node
/// ops, multis (some failed), session creates and closes, error txns.
fn random_txn(tree: &DataTree, g: &mut Gen, zxid: i64) -> Option<Txn> {
    let session = 1 + g.next(2) as i64;
    let body = match g.next(16) {
        0 | 1 => {
            // Each sub-op is valid against the tree as the earlier ones left it.
            let mut scratch = tree.clone();
            let mut subs = Vec::new();
            for _ in 0..1 + g.next(3) {
                if let Some(op) = random_op(&scratch, g) {
                    scratch.apply(&txn(zxid, session, op.clone()));
                    subs.push(op);
                }
            }
            if subs.is_empty() {
                return None;
            }
            match g.next(4) {
                0 => {
                    let failed = TxnBody::Error(ErrorTxn { err: -101 });
                    subs = vec![failed; subs.len()];
                }
                1 => subs.push(TxnBody::Check(CheckVersionTxn {
                    path: "/".into(),
                    version: 0,
                })),
                _ => {}
            }
            TxnBody::Multi(subs)
        }
        2 => TxnBody::CloseSession(CloseSessionTxn {
            paths2_delete: tree.ephemerals_of(session),
        }),
        3 if !tree.sessions().contains_key(&session) => TxnBody::CreateSession(CreateSessionTxn {
            time_out: 1000 * (1 + g.next(40) as i32),
        }),
        4 => TxnBody::Error(ErrorTxn { err: -110 }),
        _ => random_op(tree, g)?,
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
                    listing(r),
                    listing(&tree),
                    "seed {seed} step {step}: fuzzy snapshot + replay diverged"
                );
                assert_eq!(r.ephemeral_count(), tree.ephemeral_count(), "seed {seed}");
                assert_eq!(
                    r.digest(),
                    tree.digest(),
                    "seed {seed} step {step}: same state, different digests"
                );
                assert_eq!(r.digest(), r.recompute_digest(), "seed {seed} step {step}");
                assert!(r.quotas().eq(tree.quotas()), "seed {seed} step {step}");
            }
            // The live counts are what counting afresh gives.
            let mut recounted = tree.clone();
            recounted.rebuild_quotas();
            assert_eq!(
                listing(&recounted),
                listing(&tree),
                "seed {seed} step {step}"
            );
        }
    }
}

/// A parent with many children costs the walk one frame, not a list of its
/// children: the cursor's memory is bounded by the depth it is at.
#[test]
fn a_wide_parent_costs_the_cursor_one_frame() {
    let mut tree = DataTree::new();
    tree.apply(&txn(1, 7, create("/w", false, 1)));
    for i in 0..2_000 {
        tree.apply(&txn(2 + i, 7, create(&format!("/w/c{i:05}"), false, 1)));
    }
    let mut cursor = tree.start_snapshot();
    let mut deepest = 0;
    while !cursor.step(&tree, 1) {
        deepest = deepest.max(cursor.depth());
    }
    assert_eq!(deepest, 2, "frames for / and /w only");
    assert_eq!(
        DataTree::from_image(cursor.finish()).unwrap().to_image(),
        tree.to_image()
    );
}

/// A parent of thousands of children, created and deleted in random order
/// (its set splits and drains many chunks, and deleted slots are reused),
/// lists each child once, in id order, and a fuzzy snapshot walked a few
/// nodes at a time while they change loads, with the log replayed, into the
/// same tree.
#[test]
fn a_wide_parent_changing_in_random_order_keeps_its_children() {
    let mut g = Gen(0x5eed);
    let mut tree = DataTree::new();
    let mut log = vec![txn(1, 7, create("/w", false, 1))];
    tree.apply(&log[0]);
    let mut model = std::collections::BTreeSet::new();
    let mut cursor = None;
    for zxid in 2..12_000 {
        let name = format!("c{}", g.next(4_000));
        let body = if model.contains(&name) {
            model.remove(&name);
            TxnBody::Delete(
                OpCode::Delete,
                DeleteTxn {
                    path: format!("/w/{name}"),
                },
            )
        } else {
            model.insert(name.clone());
            create(&format!("/w/{name}"), false, zxid as i32)
        };
        log.push(txn(zxid, 7, body));
        tree.apply(log.last().unwrap());
        if zxid == 6_000 {
            cursor = Some(tree.start_snapshot());
        }
        if let Some(c) = cursor.as_mut() {
            c.step(&tree, 3);
        }
        if zxid % 1_000 == 0 {
            let w = tree.node("/w").unwrap();
            let ids: Vec<NodeId> = w.children.ids().collect();
            assert!(ids.windows(2).all(|p| p[0] < p[1]), "in id order");
            let mut listed: Vec<&str> = tree.child_names(w).collect();
            listed.sort_unstable();
            assert_eq!(listed, model.iter().map(String::as_str).collect::<Vec<_>>());
        }
    }
    let mut cursor = cursor.unwrap();
    while !cursor.step(&tree, 3) {}
    let from = cursor.zxid();
    let mut loaded = DataTree::from_image(cursor.finish()).unwrap();
    for t in log.iter().filter(|t| t.zxid() > from) {
        loaded.apply(t);
    }
    assert_eq!(loaded.digest(), tree.digest());
    assert_eq!(listing(&loaded), listing(&tree));
    assert_eq!(tree.node("/w").unwrap().children.len(), model.len());
}

/// Children created in order (the usual case: a queue, a lock's contenders,
/// sequential nodes) fill whole chunks: the set holds little more room than
/// ids. Split only once grown past a chunk, a set kept each full chunk's
/// first half in room for twice a chunk, about four times its ids.
#[test]
fn children_created_in_order_fill_whole_chunks() {
    let mut tree = DataTree::new();
    tree.apply(&txn(1, 7, create("/q", false, 1)));
    for zxid in 2..5_002 {
        let path = format!("/q/n{zxid:010}");
        tree.apply(&txn(zxid, 7, create(&path, false, zxid as i32)));
    }
    let q = tree.node("/q").unwrap();
    assert_eq!(q.children.len(), 5_000);
    assert!(
        q.children.capacity() <= 5_000 + 512,
        "room for {} ids",
        q.children.capacity()
    );
    let ids: Vec<NodeId> = q.children.ids().collect();
    assert!(ids.windows(2).all(|p| p[0] < p[1]), "in id order");
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
        // Write the root and /p, but not /p/c.
        while cursor.last_written(&tree) != Some("/p") {
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
        assert_eq!(listing(&rebuilt), listing(&tree));
    }
}

/// Throughput of `apply` for the digest's overhead report:
/// `cargo test --release -p zkd-storage apply_throughput -- --ignored --nocapture`.
#[test]
#[ignore]
#[allow(clippy::print_stdout)]
fn apply_throughput() {
    use std::time::Instant;
    for size in [16usize, 1024] {
        let mut tree = DataTree::new();
        tree.apply(&txn(1, 7, create("/a", false, 1)));
        let sets: Vec<Txn> = (0..64)
            .map(|i| {
                txn(
                    2 + i,
                    7,
                    TxnBody::SetData(SetDataTxn {
                        path: "/a".into(),
                        data: Some(Bytes::from(vec![i as u8; size])),
                        version: i as i32 + 1,
                    }),
                )
            })
            .collect();
        let n = 1_000_000;
        let start = Instant::now();
        for i in 0..n {
            std::hint::black_box(tree.apply(&sets[i % sets.len()]));
        }
        let dt = start.elapsed();
        println!(
            "setData {size:>5} B: {n} applies in {dt:?} = {:.1} ns/apply",
            dt.as_nanos() as f64 / n as f64
        );
    }
    let mut tree = DataTree::new();
    tree.apply(&txn(1, 7, create("/a", false, 1)));
    let creates: Vec<Txn> = (0..1000)
        .map(|i| {
            txn(
                2 + i,
                7,
                create(&format!("/a/n{i:04}"), false, i as i32 + 1),
            )
        })
        .collect();
    let deletes: Vec<Txn> = (0..1000)
        .map(|i| {
            txn(
                1002 + i,
                7,
                TxnBody::Delete(
                    OpCode::Delete,
                    DeleteTxn {
                        path: format!("/a/n{i:04}"),
                    },
                ),
            )
        })
        .collect();
    let start = Instant::now();
    for _ in 0..500 {
        for t in creates.iter().chain(&deletes) {
            std::hint::black_box(tree.apply(t));
        }
    }
    let dt = start.elapsed();
    println!(
        "create+delete: 1000000 applies in {dt:?} = {:.1} ns/apply",
        dt.as_nanos() as f64 / 1e6
    );
}

/// The state a digest covers: the image without its header's last zxid.
fn state_fingerprint(tree: &DataTree) -> u64 {
    use std::hash::{Hash, Hasher};
    let image = tree.to_image();
    // DefaultHasher::new() has fixed keys: an independent 64-bit check.
    let mut h = std::collections::hash_map::DefaultHasher::new();
    image[16..].hash(&mut h);
    h.finish()
}

/// After every txn the incremental digest equals one computed from scratch;
/// a snapshot taken at any point rebuilds the same digest; and over every
/// state reached, equal digests mean equal states (no field is left out).
#[test]
fn digest_is_incremental_exact_and_tells_states_apart() {
    let mut by_digest: std::collections::HashMap<u64, u64> = Default::default();
    let mut applied = 0;
    for seed in 1..=300u64 {
        let mut g = Gen(seed.wrapping_mul(0xd1b5_4a32_d192_ed03) | 1);
        let mut tree = DataTree::new();
        let mut zxid = 0;
        // 200 applied txns per seed; picks that do not fit are skipped.
        while zxid < 200 {
            let step = zxid;
            let Some(t) = random_txn(&tree, &mut g, zxid + 1) else {
                continue;
            };
            zxid += 1;
            applied += 1;
            tree.apply(&t);
            assert_eq!(
                tree.digest(),
                tree.recompute_digest(),
                "seed {seed} step {step}: incremental digest drifted after {:?}",
                t.body
            );
            let state = state_fingerprint(&tree);
            let seen = *by_digest.entry(tree.digest()).or_insert(state);
            assert_eq!(
                seen, state,
                "seed {seed} step {step}: two states, one digest"
            );
            if step % 25 == 0 {
                let copy = DataTree::from_image(tree.to_image()).unwrap();
                assert_eq!(copy.digest(), tree.digest(), "seed {seed} step {step}");
            }
        }
    }
    // Most txns change the state: the map must have seen tens of thousands.
    assert!(
        by_digest.len() > applied / 2,
        "{} states of {applied}",
        by_digest.len()
    );
}

/// Trees one field apart have different digests; the same txns, the same digest.
#[test]
fn one_field_apart_means_another_digest() {
    let base = |tweak: &dyn Fn(&mut Txn)| {
        let mut txns = vec![
            txn(
                1,
                7,
                TxnBody::CreateSession(CreateSessionTxn { time_out: 4000 }),
            ),
            txn(2, 7, create("/a", false, 1)),
            txn(3, 7, create("/a/e", true, 1)),
            txn(
                4,
                7,
                TxnBody::SetData(SetDataTxn {
                    path: "/a".into(),
                    data: Some(Bytes::from_static(b"hello")),
                    version: 1,
                }),
            ),
        ];
        for t in &mut txns {
            tweak(t);
        }
        let mut tree = DataTree::new();
        for t in &txns {
            tree.apply(t);
        }
        assert_eq!(tree.digest(), tree.recompute_digest());
        tree.digest()
    };
    let set_data = |f: fn(&mut SetDataTxn)| {
        move |t: &mut Txn| {
            if let TxnBody::SetData(s) = &mut t.body {
                f(s)
            }
        }
    };
    let reference = base(&|_| {});
    assert_eq!(base(&|_| {}), reference, "deterministic");
    let variants: Vec<(&str, u64)> = vec![
        (
            "one data byte",
            base(&set_data(|s: &mut SetDataTxn| {
                s.data = Some(Bytes::from_static(b"hellp"))
            })),
        ),
        (
            "one version",
            base(&set_data(|s: &mut SetDataTxn| s.version = 2)),
        ),
        (
            "empty instead of null",
            base(&set_data(|s: &mut SetDataTxn| s.data = Some(Bytes::new()))),
        ),
        (
            "null instead of empty",
            base(&set_data(|s: &mut SetDataTxn| s.data = None)),
        ),
        (
            "one mtime",
            base(&|t| {
                if t.header.zxid == 4 {
                    t.header.time += 1
                }
            }),
        ),
        (
            "one ephemeral owner",
            base(&|t| {
                if t.header.zxid == 3 {
                    t.header.client_id = 8
                }
            }),
        ),
        (
            "one session timeout",
            base(&|t| {
                if let TxnBody::CreateSession(s) = &mut t.body {
                    s.time_out = 4001
                }
            }),
        ),
        (
            "one ACL perm",
            base(&|t| {
                if let TxnBody::Create(_, c) = &mut t.body {
                    if c.path == "/a/e" {
                        c.acl = vec![Acl::world(Perms::READ)].into();
                    }
                }
            }),
        ),
        (
            "one parent cversion",
            base(&|t| {
                if let TxnBody::Create(_, c) = &mut t.body {
                    if c.path == "/a/e" {
                        c.parent_c_version = 2;
                    }
                }
            }),
        ),
    ];
    for (i, (what, d)) in variants.iter().enumerate() {
        assert_ne!(*d, reference, "{what}");
        for (other, e) in &variants[..i] {
            assert_ne!(d, e, "{what} vs {other}");
        }
    }
    // A node's pzxid only: raised by a replayed delete of a missing child.
    let mut tree = DataTree::new();
    tree.apply(&txn(1, 7, create("/a", false, 1)));
    let before = tree.digest();
    tree.apply(&txn(
        2,
        7,
        TxnBody::Delete(
            OpCode::Delete,
            DeleteTxn {
                path: "/a/gone".into(),
            },
        ),
    ));
    assert_eq!(tree.node("/a").unwrap().stat.pzxid, 2);
    assert_ne!(tree.digest(), before, "pzxid");
    assert_eq!(tree.digest(), tree.recompute_digest());
}

/// The fresh tree's digest is pinned: members built from different binaries
/// compare digests, so the definition must not drift unnoticed. (Changed
/// once, when `/zookeeper/config` left the digest: a member of an older
/// build then sees a newer one's trees as diverged and syncs by SNAP.)
#[test]
fn fresh_tree_digest_is_pinned() {
    let tree = DataTree::new();
    assert_eq!(tree.digest(), tree.recompute_digest());
    assert_eq!(tree.digest(), 0x01b2_c24b_c52d_2612);
}

/// `/zookeeper/config` is outside the digest: members set it each from its
/// own configuration, at their own moments.
#[test]
fn the_ensemble_config_leaves_the_digest_alone() {
    let mut tree = DataTree::new();
    let before = tree.digest();
    tree.set_ensemble_config(
        bytes::Bytes::from_static(b"server.1=a:1:2\nversion=100000000"),
        1 << 32,
    );
    assert_eq!(tree.digest(), before);
    assert_eq!(tree.digest(), tree.recompute_digest());
}

use zkd_protocol::{DecodeError, Record};

/// A tree using every part of an image: sessions with ephemerals, null, empty
/// and 100 KB data, nested paths, and ACLs that change between siblings' runs.
fn streaming_fixture() -> DataTree {
    let mut tree = DataTree::new();
    let mut zxid = 0;
    let mut apply = |tree: &mut DataTree, session: i64, body: TxnBody| {
        zxid += 1;
        let (outcome, _) = tree.apply(&txn(zxid, session, body));
        assert!(!matches!(outcome, TxnOutcome::Error(_)), "{outcome:?}");
    };
    for s in [7, 8, 9] {
        let time_out = 4000 + s as i32;
        apply(
            &mut tree,
            s,
            TxnBody::CreateSession(CreateSessionTxn { time_out }),
        );
    }
    let digest_acl = Acl {
        perms: Perms::READ | Perms::WRITE,
        id: Id {
            scheme: "digest".into(),
            id: "bob:aGFzaA==".into(),
        },
    };
    let acls = [
        vec![Acl::world(Perms::ALL)],
        vec![Acl::world(Perms::READ)],
        vec![digest_acl, Acl::world(Perms::READ)],
    ];
    let node = |path: String, data: Option<Bytes>, acl: &Vec<Acl>, ephemeral| {
        let create = CreateTxn {
            path,
            data,
            acl: acl.clone().into(),
            ephemeral,
            parent_c_version: 1,
        };
        TxnBody::Create(OpCode::Create, create)
    };
    let data = |i: usize| match i % 5 {
        0 => None,
        1 => Some(Bytes::new()),
        _ => Some(Bytes::from(vec![i as u8; i * 37 % 3000])),
    };
    let mut i = 0;
    for top in 0..20 {
        let acl = &acls[top % 3];
        apply(&mut tree, 7, node(format!("/n{top}"), data(i), acl, false));
        i += 1;
        for child in 0..10 {
            let p = format!("/n{top}/c{child}");
            apply(&mut tree, 7, node(p, data(i), acl, false));
            i += 1;
        }
        for grand in 0..4 {
            let p = format!("/n{top}/c0/g{grand}");
            apply(&mut tree, 7, node(p, data(i), &acls[(top + 1) % 3], false));
            i += 1;
        }
    }
    let big = Some(Bytes::from(vec![0xab; 100_000]));
    apply(&mut tree, 7, node("/big".into(), big, &acls[0], false));
    for (s, k) in [(7, 0), (7, 1), (8, 0)] {
        let p = format!("/n3/c5/e{s}_{k}");
        apply(&mut tree, s, node(p, data(k), &acls[1], true));
    }
    assert!(tree.node_count() > 300);
    tree
}

#[test]
fn images_decode_from_chunks_of_any_size() {
    let tree = streaming_fixture();
    let image = tree.to_image();
    // Large enough that holding consumed bytes would break the bound below.
    assert!(image.len() > 300_000, "{}", image.len());
    let largest_record = 100_000 + 200;
    for size in [1, 7, 4096, image.len()] {
        let mut decoder = ImageDecoder::new();
        for chunk in image.chunks(size) {
            decoder.feed(chunk).unwrap();
            assert!(decoder.pending_len() < largest_record, "chunk size {size}");
        }
        assert_eq!(decoder.pending_len(), 0);
        let copy = decoder.finish().unwrap();
        assert_eq!(copy.to_image(), image, "chunk size {size}");
        assert_eq!(copy.digest(), tree.digest(), "chunk size {size}");
        assert_eq!(copy.digest(), copy.recompute_digest());
        assert_eq!(copy.last_zxid(), tree.last_zxid());
        assert_eq!(copy.sessions(), tree.sessions());
        assert_eq!(copy.ephemerals_of(7), tree.ephemerals_of(7));
        assert_eq!(copy.ephemerals_of(8).len(), 1);
        // Consecutive equal ACLs share one allocation even across feeds.
        let acl = |p: &str| copy.node(p).unwrap().acl.clone();
        assert!(Arc::ptr_eq(&acl("/n4/c1"), &acl("/n4/c2")));
        assert!(!Arc::ptr_eq(&acl("/n4/c0/g3"), &acl("/n4/c1")));
    }
}

#[test]
fn cursor_chunks_and_finish_concatenate_to_the_image() {
    let tree = streaming_fixture();
    let mut cursor = tree.start_snapshot();
    assert_eq!(cursor.take_chunk(0), None);
    let mut image = Vec::new();
    let mut chunks = 0;
    loop {
        let done = cursor.step(&tree, 3);
        while let Some(chunk) = cursor.take_chunk(1000) {
            assert_eq!(chunk.len(), 1000);
            image.extend_from_slice(&chunk);
            chunks += 1;
        }
        assert!(cursor.buffered() < 1000);
        if done {
            break;
        }
    }
    let tail = cursor.finish();
    assert!(tail.len() < 1000 + 4);
    image.extend_from_slice(&tail);
    assert!(chunks > 300, "{chunks}");
    assert_eq!(image, tree.to_image());
}

#[test]
fn malformed_images_are_rejected() {
    let tree = streaming_fixture();
    let image = tree.to_image();
    let decode = |bytes: &[u8]| {
        let mut decoder = ImageDecoder::new();
        decoder.feed(bytes)?;
        decoder.finish()
    };
    // Truncated: without its terminator, mid-record, mid-header.
    let cut = image.len() - 4;
    assert_eq!(decode(&image[..cut]).unwrap_err(), DecodeError::Incomplete);
    assert_eq!(
        decode(&image[..cut / 2]).unwrap_err(),
        DecodeError::Incomplete
    );
    assert_eq!(decode(&image[..10]).unwrap_err(), DecodeError::Incomplete);
    // Trailing garbage, in the same chunk or a later one; the error sticks.
    let mut extra = image.to_vec();
    extra.push(0);
    assert!(matches!(decode(&extra), Err(DecodeError::Invalid(_))));
    let mut decoder = ImageDecoder::new();
    decoder.feed(&image).unwrap();
    assert!(decoder.feed(&[0, 0, 0, 0]).is_err());
    assert!(decoder.feed(&[]).is_err());
    assert!(decoder.finish().is_err());
    // Bad magic.
    let mut bad = image.to_vec();
    bad[0] ^= 0xff;
    assert!(matches!(decode(&bad), Err(DecodeError::Invalid(_))));
    // No root: a header, no sessions, then straight to the terminator; and
    // the nodes without their root, which are all skipped as orphans.
    let empty = DataTree::new().to_image();
    let mut rootless = empty[..20].to_vec();
    rootless.extend_from_slice(&[0, 0, 0, 0]);
    assert!(matches!(decode(&rootless), Err(DecodeError::Invalid(_))));
    let root = DataTree::new().node("/").unwrap().clone();
    let root_len = "/".to_owned().to_bytes().len()
        + root
            .data()
            .map(bytes::Bytes::copy_from_slice)
            .to_bytes()
            .len()
        + root.acl.to_vec().to_bytes().len()
        + root.stat.to_bytes().len();
    let mut orphans = empty[..20].to_vec();
    orphans.extend_from_slice(&empty[20 + root_len..]);
    assert!(decode(&empty).is_ok());
    assert!(matches!(decode(&orphans), Err(DecodeError::Invalid(_))));
    // A negative length is invalid, not a reason to wait for more input.
    let mut negative = empty[..20].to_vec();
    negative.extend_from_slice(&(-2i32).to_be_bytes());
    let mut decoder = ImageDecoder::new();
    assert!(matches!(
        decoder.feed(&negative),
        Err(DecodeError::Invalid(_))
    ));
}

/// Splits an image (no sessions) into its header, node records and terminator.
fn image_records(image: &[u8]) -> (Vec<u8>, Vec<Vec<u8>>, Vec<u8>) {
    let stat_len = StatPersisted::default().to_bytes().len();
    let (header, mut rest) = image.split_at(image::HEADER_LEN);
    let mut records = Vec::new();
    loop {
        let len = image::node_len(rest, stat_len).unwrap();
        let (record, after) = rest.split_at(len);
        if after.is_empty() {
            return (header.to_vec(), records, record.to_vec());
        }
        records.push(record.to_vec());
        rest = after;
    }
}

/// Children are gathered per parent while an image loads in preorder; a node
/// whose parent's turn has passed (an image out of preorder) still joins it,
/// and a node whose parent is missing is dropped.
#[test]
fn an_image_out_of_preorder_loads_the_same_tree() {
    let mut tree = DataTree::new();
    for (z, p) in ["/a", "/a/x", "/a/y", "/b", "/b/z"].iter().enumerate() {
        let cversion = tree.node(path::parent(p)).unwrap().stat.cversion + 1;
        tree.apply(&txn(z as i64 + 1, 7, create(p, false, cversion)));
    }
    let (header, records, end) = image_records(&tree.to_image());
    let position = |records: &[Vec<u8>], p: &str| {
        let mut record = (p.len() as i32).to_be_bytes().to_vec();
        record.extend_from_slice(p.as_bytes());
        records.iter().position(|r| r.starts_with(&record)).unwrap()
    };
    let mut reordered = records.clone();
    // "/a/y" after "/b/z", when "/a" is no longer an ancestor of the walk.
    let moved = reordered.remove(position(&reordered, "/a/y"));
    reordered.insert(position(&reordered, "/b/z") + 1, moved);
    let image: Vec<u8> = [header.clone(), reordered.concat(), end.clone()].concat();
    let loaded = DataTree::from_image(Bytes::from(image)).unwrap();
    assert_eq!(loaded.digest(), tree.digest());
    let names = |t: &DataTree, p: &str| {
        let mut names: Vec<_> = t.child_names(t.node(p).unwrap()).collect();
        names.sort_unstable();
        names.join(",")
    };
    assert_eq!(names(&loaded, "/a"), "x,y");
    assert_eq!(names(&loaded, "/b"), "z");
    // Without "/b", its child is an orphan and is skipped.
    let mut orphaned = records;
    orphaned.remove(position(&orphaned, "/b"));
    let image: Vec<u8> = [header, orphaned.concat(), end].concat();
    let loaded = DataTree::from_image(Bytes::from(image)).unwrap();
    assert!(loaded.node("/b/z").is_none());
    assert_eq!(names(&loaded, "/"), "a,zookeeper");
}

/// A load indexes its nodes in bulk, which finds a path listed twice only
/// when it indexes them (at the end, or when a node out of preorder needs
/// a lookup): the nodes so far are then linked again one at a time, and the
/// later record replaces the earlier, keeping the children of both, as when
/// every node was indexed on arrival.
#[test]
fn an_image_listing_a_path_twice_loads_the_later_node() {
    let mut old = DataTree::new();
    for (z, p) in ["/a", "/a/x", "/b", "/b/z"].iter().enumerate() {
        let cversion = old.node(path::parent(p)).unwrap().stat.cversion + 1;
        old.apply(&txn(z as i64 + 1, 7, create(p, false, cversion)));
    }
    let mut new = old.clone();
    new.apply(&txn(
        5,
        7,
        TxnBody::SetData(SetDataTxn {
            path: "/a".into(),
            data: Some(Bytes::from_static(b"later")),
            version: 1,
        }),
    ));
    let record_of = |records: &[Vec<u8>], p: &str| {
        let mut start = (p.len() as i32).to_be_bytes().to_vec();
        start.extend_from_slice(p.as_bytes());
        records.iter().position(|r| r.starts_with(&start)).unwrap()
    };
    let (_, old_records, _) = image_records(&old.to_image());
    let (header, records, end) = image_records(&new.to_image());
    // The earlier "/a" in its place, the later one after every other node.
    let mut twice = records.clone();
    let at = record_of(&twice, "/a");
    twice[at] = old_records[record_of(&old_records, "/a")].clone();
    twice.push(records[at].clone());
    let image: Vec<u8> = [header.clone(), twice.concat(), end.clone()].concat();
    let loaded = DataTree::from_image(Bytes::from(image)).unwrap();
    assert_eq!(listing(&loaded), listing(&new));
    assert_eq!(loaded.digest(), new.digest());
    // The same, with "/b/z" after the later "/a": its lookup of "/b" finds
    // the path listed twice halfway, and the load goes on one at a time.
    let moved = twice.remove(record_of(&twice, "/b/z"));
    twice.push(moved);
    let image: Vec<u8> = [header, twice.concat(), end].concat();
    let loaded = DataTree::from_image(Bytes::from(image)).unwrap();
    assert_eq!(listing(&loaded), listing(&new));
    assert_eq!(loaded.digest(), new.digest());
    assert_eq!(loaded.node_count(), new.node_count());
}

fn create_with(path: &str, data: &[u8]) -> TxnBody {
    TxnBody::Create(
        OpCode::Create,
        CreateTxn {
            path: path.into(),
            data: Some(Bytes::copy_from_slice(data)),
            acl: vec![Acl::world(Perms::ALL)].into(),
            ephemeral: false,
            parent_c_version: 1,
        },
    )
}

fn stats_text(tree: &DataTree, p: &str) -> String {
    let node = tree.node(&format!("/zookeeper/quota{p}/zookeeper_stats"));
    String::from_utf8(node.unwrap().data().unwrap().to_vec()).unwrap()
}

/// zkCli's `setquota` writes the limits node, then a stats node reading
/// zero, which the tree fills in; every later change moves the count, and a
/// snapshot holds the same text.
#[test]
fn a_quota_counts_its_subtree_as_zkcli_sets_it_up() {
    let mut tree = DataTree::new();
    let mut zxid = 0;
    let mut apply = |tree: &mut DataTree, body: TxnBody| {
        zxid += 1;
        tree.apply(&txn(zxid, 7, body));
    };
    apply(&mut tree, create_with("/app", b"abc"));
    apply(&mut tree, create_with("/app/a", b"xy"));
    apply(&mut tree, create_with("/zookeeper/quota/app", b""));
    let limits = b"count=-1,bytes=-1=;byteHardLimit=-1;countHardLimit=3";
    apply(
        &mut tree,
        create_with("/zookeeper/quota/app/zookeeper_limits", limits),
    );
    apply(
        &mut tree,
        create_with("/zookeeper/quota/app/zookeeper_stats", b"count=0,bytes=0"),
    );
    assert_eq!(stats_text(&tree, "/app"), "count=2,bytes=5");
    apply(&mut tree, create_with("/app/b", b""));
    let set = TxnBody::SetData(SetDataTxn {
        path: "/app/b".into(),
        data: Some(Bytes::from_static(b"hello")),
        version: 1,
    });
    apply(&mut tree, set);
    assert_eq!(stats_text(&tree, "/app"), "count=3,bytes=10");
    let quota = tree.quota_of("/app/b/deeper").unwrap();
    assert_eq!((quota.path, quota.limits.count_hard), ("/app", 3));
    assert_eq!(
        quota.usage,
        QuotaUsage {
            count: 3,
            bytes: 10
        }
    );
    assert_eq!(tree.quota_of("/apple"), None);
    apply(
        &mut tree,
        TxnBody::Delete(
            OpCode::Delete,
            DeleteTxn {
                path: "/app/a".into(),
            },
        ),
    );
    assert_eq!(stats_text(&tree, "/app"), "count=2,bytes=8");
    // The stats node's own stat does not move: the count is written in place.
    let stats = tree.node("/zookeeper/quota/app/zookeeper_stats").unwrap();
    assert_eq!((stats.stat.version, stats.stat.mzxid), (0, 5));

    let loaded = DataTree::from_image(tree.to_image()).unwrap();
    assert_eq!(listing(&loaded), listing(&tree));
    assert_eq!(loaded.digest(), tree.digest());

    let delete = DeleteTxn {
        path: "/zookeeper/quota/app/zookeeper_limits".into(),
    };
    apply(&mut tree, TxnBody::Delete(OpCode::Delete, delete));
    assert_eq!(tree.quota_of("/app/b"), None);
    assert_eq!(stats_text(&tree, "/app"), "count=0,bytes=0");
    assert_eq!(tree.digest(), tree.recompute_digest());
}
