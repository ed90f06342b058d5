//! Startup recovery: the newest valid snapshot at or below the log's end,
//! then every logged txn after it, read a page at a time.

use crate::core::zab::{DurableState, History};
use std::time::{Duration, Instant};
use zkd_protocol::Zxid;
use zkd_storage::snapshot::SnapshotRef;
use zkd_storage::store::VerifiedSnapshots;
use zkd_storage::{DataTree, SnapshotStore, StorageError, Store, Txn, TxnLog};

/// Txns read (and held in memory) per page of the log.
const REPLAY_PAGE: usize = 1024;

/// How long a rebuild took, as ZooKeeper's startup metrics report it.
#[derive(Clone, Copy, Debug, Default)]
pub struct LoadFigures {
    /// Loading (and verifying) the base snapshot.
    pub snapshot: Duration,
    /// Replaying the log after it.
    pub replay: Duration,
    /// Txns replayed.
    pub txns: u64,
}

/// Rebuilds the tree from durable storage, then deletes any snapshot past
/// the rebuilt state: such a snapshot holds txns the log no longer has (a
/// TRUNC or SNAP install cut short by a crash), and must not become
/// loadable once new txns take the log past it (ZOOKEEPER-1549).
pub fn recover(storage: &mut (impl TxnLog + SnapshotStore)) -> Result<DataTree, StorageError> {
    recover_timed(storage).map(|(tree, _)| tree)
}

/// [`recover`], with how long it took.
pub fn recover_timed(
    storage: &mut (impl TxnLog + SnapshotStore),
) -> Result<(DataTree, LoadFigures), StorageError> {
    let tree = rebuild_timed(storage, None);
    // A preloaded snapshot recovery did not use is not kept.
    drop(storage.take_preloaded());
    let (tree, figures) = tree?;
    storage.delete_snapshots_after(tree.last_zxid())?;
    Ok((tree, figures))
}

/// Where a tree rebuilt from `storage` is fuzzy: a leader's image installed
/// as its snapshot may hold txns through some later zxid, which the log
/// (cut short by a crash right after the install) may not have reached.
/// Until the tree does, a txn of that range that fails to apply was already
/// in the image, not a sign of divergence. `Zxid::ZERO` when exact.
pub fn fuzzy_through(storage: &impl SnapshotStore, tree: &DataTree) -> Result<Zxid, StorageError> {
    let at = tree.last_zxid();
    Ok(match storage.fuzzy_image()? {
        Some((image, end)) if image <= at && at < end => end,
        _ => Zxid::ZERO,
    })
}

/// Rebuilds the tree from durable storage without changing it.
///
/// The base is the newest valid snapshot at or below the log's end (its last
/// txn, or its purge mark if it is empty), never one past a truncation. A log
/// that never held anything (no txn, no purge mark) puts no bound on it.
pub fn rebuild(storage: &(impl TxnLog + SnapshotStore)) -> Result<DataTree, StorageError> {
    rebuild_timed(storage, None).map(|(tree, _)| tree)
}

/// [`rebuild`], starting from `received` (the tree of the snapshot at its
/// zxid, decoded as a SNAP streamed in) when that is the base snapshot,
/// rather than reading it back.
pub fn rebuild_from(
    storage: &(impl TxnLog + SnapshotStore),
    received: Option<(Zxid, DataTree)>,
) -> Result<DataTree, StorageError> {
    rebuild_timed(storage, received).map(|(tree, _)| tree)
}

/// [`rebuild_from`], with how long it took.
fn rebuild_timed(
    storage: &(impl TxnLog + SnapshotStore),
    received: Option<(Zxid, DataTree)>,
) -> Result<(DataTree, LoadFigures), StorageError> {
    let purged = storage.purged_through()?;
    let started = Instant::now();
    let mut tree = match load_base(storage, received)? {
        Some((found, tree)) => {
            tracing::info!(zxid = %found.zxid, bytes = found.seal.len, "loaded snapshot");
            tree
        }
        None => DataTree::new(),
    };
    let loaded = Instant::now();
    let mut prev = tree.last_zxid();
    let mut replayed = 0usize;
    for item in storage.txns_after(prev, REPLAY_PAGE) {
        let (zxid, bytes) = item?;
        // A gap means lost history (a damaged snapshot over a purged log):
        // refuse to serve a silently wrong tree.
        if !zxid.follows(prev) {
            return Err(StorageError::Corrupt(format!(
                "log jumps from {prev} to {zxid}"
            )));
        }
        prev = zxid;
        let txn = Txn::from_bytes(bytes)
            .map_err(|e| StorageError::Corrupt(format!("txn {zxid}: {e}")))?;
        if txn.zxid() != zxid {
            return Err(StorageError::Corrupt(format!(
                "txn under key {zxid} says {}",
                txn.zxid()
            )));
        }
        crate::core::apply_to_tree(&mut tree, &txn);
        replayed += 1;
    }
    // Txns through the purge mark were durable once; the tree must hold them.
    if let Some(purged) = purged.filter(|p| tree.last_zxid() < *p) {
        return Err(StorageError::Corrupt(format!(
            "the log was purged through {purged} but no valid snapshot reaches it (tree at {})",
            tree.last_zxid()
        )));
    }
    tracing::info!(replayed, last_zxid = %tree.last_zxid(), "recovered data tree");
    let figures = LoadFigures {
        snapshot: loaded - started,
        replay: loaded.elapsed(),
        txns: replayed as u64,
    };
    Ok((tree, figures))
}

/// The snapshot recovery starts from, loaded: the newest valid one at or
/// below the log's end (its last txn, or its purge mark if it is empty),
/// never one past a truncation. A log that never held anything puts no
/// bound on it. Each candidate is verified as it is decoded, in one read; a
/// damaged one is skipped for the next older.
pub fn load_base_snapshot(
    storage: &(impl TxnLog + SnapshotStore),
) -> Result<Option<(SnapshotRef, DataTree)>, StorageError> {
    load_base(storage, None)
}

/// [`load_base_snapshot`], taking `received` for the snapshot at its zxid.
fn load_base(
    storage: &(impl TxnLog + SnapshotStore),
    mut received: Option<(Zxid, DataTree)>,
) -> Result<Option<(SnapshotRef, DataTree)>, StorageError> {
    let end = storage.last_zxid()?.max(storage.purged_through()?);
    for (zxid, seal) in storage.snapshot_seals()?.into_iter().rev() {
        if end.is_some_and(|end| zxid > end) {
            continue;
        }
        let found = SnapshotRef { zxid, seal };
        // Another base: dropped before that one is decoded.
        if let Some((_, tree)) = received.take().filter(|(at, _)| *at == zxid) {
            tracing::info!(%zxid, "the SNAP's tree, decoded as it came, is the base");
            return Ok(Some((found, tree)));
        }
        match zkd_storage::store::load_snapshot(storage, found) {
            Ok(tree) => return Ok(Some((found, tree))),
            Err(StorageError::Corrupt(e)) => {
                tracing::warn!(%zxid, "skipping damaged snapshot: {e}")
            }
            Err(e) => return Err(e),
        }
    }
    Ok(None)
}

/// What a member has durably, read back from storage: its epochs, and the
/// last `window` txns of its log, kept for DIFF.
/// `verified`: the snapshots already read whole (see `store::lowest_cut`).
pub fn durable_state(
    storage: &impl Store,
    window: usize,
    verified: &mut VerifiedSnapshots,
) -> Result<DurableState, StorageError> {
    // Never a snapshot past the log's end (a TRUNC or SNAP install cut
    // short): recovery does not start from it, so the tree may be below it.
    // Seals only, not the image (read at every election, it may be large):
    // a damaged newest one raises the base above the tree's, which only
    // makes a follower behind it get a SNAP.
    let end = storage.last_zxid()?.max(storage.purged_through()?);
    let base = storage
        .snapshot_seals()?
        .into_iter()
        .map(|(zxid, _)| zxid)
        .filter(|zxid| end.is_none_or(|end| *zxid <= end))
        .max()
        .unwrap_or(Zxid::ZERO);
    // The newest `window` txns the log holds, before the snapshot too (as
    // ZooKeeper's leader syncs from its logs): a follower that stopped a
    // little before a snapshot still gets a DIFF. No further back (a restart
    // or election after 100k txns read them all, about 10 ms). Never below
    // the purge mark: a purge's removals need not be durable, and what a
    // crash left of them may have gaps.
    let purged = storage.purged_through()?.unwrap_or(Zxid::ZERO);
    let start = match storage.zxid_before_last(window)? {
        _ if storage.last_zxid()?.is_none() => base,
        Some(zxid) => zxid.max(purged),
        None => purged,
    };
    let mut history = History::new(start, window);
    for item in storage.txns_after(start, 1024) {
        let (zxid, txn) = item?;
        history.push(zxid, txn);
    }
    Ok(DurableState {
        accepted_epoch: storage.accepted_epoch()?,
        current_epoch: storage.current_epoch()?,
        history,
        log_base: zkd_storage::store::lowest_cut(storage, verified)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use zkd_protocol::records::{Acl, CreateTxn, Id, TxnHeader};
    use zkd_protocol::OpCode;
    use zkd_storage::store::SnapshotSource;
    use zkd_storage::{DiskStorage, MemStorage, SnapshotStore, TxnBody, TxnLog};

    /// Txn `z`: creates `/n{z}`.
    fn create(z: i64) -> Txn {
        Txn {
            header: TxnHeader {
                client_id: 1,
                cxid: z as i32,
                zxid: z,
                time: 1000 + z,
                r#type: OpCode::Create as i32,
            },
            body: TxnBody::Create(
                OpCode::Create,
                CreateTxn {
                    path: format!("/n{z}"),
                    data: Some(Bytes::from(format!("v{z}"))),
                    acl: vec![Acl {
                        perms: 31,
                        id: Id {
                            scheme: "world".into(),
                            id: "anyone".into(),
                        },
                    }]
                    .into(),
                    ephemeral: false,
                    parent_c_version: z as i32,
                },
            ),
        }
    }

    /// A fresh tree with txns `1..=n` applied.
    fn tree_through(n: i64) -> DataTree {
        let mut tree = DataTree::new();
        for z in 1..=n {
            tree.apply(&create(z));
        }
        tree
    }

    fn assert_same_tree(a: &DataTree, b: &DataTree) {
        assert_eq!(a.last_zxid(), b.last_zxid());
        assert_eq!(a.digest(), b.digest());
        assert_eq!(a.to_image(), b.to_image());
    }

    /// Log 1..=10 (synced), a snapshot at 8.
    fn history(s: &mut (impl TxnLog + SnapshotStore)) {
        for z in 1..=10 {
            s.append(Zxid(z), create(z).to_bytes()).unwrap();
        }
        s.sync().unwrap();
        s.save_snapshot(Zxid(8), tree_through(8).to_image())
            .unwrap();
        assert_same_tree(&rebuild(s).unwrap(), &tree_through(10));
    }

    /// TRUNC to 5 of log 1..10 with a snapshot at 8: recovery gives exactly
    /// the tree of txns 1..5, never the snapshot past the cut.
    fn recovers_the_truncated_history(mut s: impl TxnLog + SnapshotStore) {
        history(&mut s);
        zkd_storage::store::truncate_history(&mut s, Zxid(5)).unwrap();
        assert_eq!(s.latest_snapshot().unwrap(), None);
        assert_same_tree(&recover(&mut s).unwrap(), &tree_through(5));
    }

    /// The log cut but the snapshot past the cut still there (a crash
    /// between the two): recovery ignores it, then deletes it, so txns
    /// logged later cannot make it loadable.
    fn ignores_and_deletes_a_snapshot_past_the_log(mut s: impl TxnLog + SnapshotStore) {
        history(&mut s);
        s.truncate_after(Zxid(5)).unwrap();
        assert_same_tree(&recover(&mut s).unwrap(), &tree_through(5));
        assert_eq!(s.latest_snapshot().unwrap(), None);
        for z in 6..=9 {
            s.append(Zxid(z), create(z).to_bytes()).unwrap();
        }
        s.sync().unwrap();
        assert_same_tree(&recover(&mut s).unwrap(), &tree_through(9));
    }

    /// A SNAP installed at 7 over a log of 1..10: the image, then what follows it.
    fn recovers_an_installed_snapshot(mut s: impl TxnLog + SnapshotStore) {
        history(&mut s);
        let image = SnapshotSource::Whole(tree_through(7).to_image());
        zkd_storage::store::install_snapshot(&mut s, Zxid(7), image).unwrap();
        assert_same_tree(&recover(&mut s).unwrap(), &tree_through(7));
        s.append(Zxid(8), create(8).to_bytes()).unwrap();
        s.sync().unwrap();
        assert_same_tree(&recover(&mut s).unwrap(), &tree_through(8));
    }

    /// A log purged through 9 whose only snapshot covering it is gone.
    fn refuses_a_purge_mark_no_snapshot_reaches(mut s: impl TxnLog + SnapshotStore) {
        history(&mut s);
        s.purge_through(Zxid(9)).unwrap();
        assert!(matches!(recover(&mut s), Err(StorageError::Corrupt(_))));
    }

    fn sled() -> (tempfile::TempDir, DiskStorage) {
        let dir = tempfile::tempdir().unwrap();
        let s = DiskStorage::open(dir.path(), dir.path()).unwrap();
        (dir, s)
    }

    /// The history a member elects with: the newest `window` txns of its
    /// log, across its snapshot, never below the purge mark; the snapshot's
    /// zxid when the log is empty.
    fn keeps_the_newest_txns_across_the_snapshot(mut s: impl zkd_storage::Store) {
        history(&mut s);
        let history = |s: &_, window| {
            let verified = &mut zkd_storage::store::VerifiedSnapshots::default();
            let h = durable_state(s, window, verified).unwrap().history;
            (h.base(), h.last_zxid())
        };
        assert_eq!(history(&s, 100), (Zxid::ZERO, Zxid(10)), "the whole log");
        assert_eq!(
            history(&s, 4),
            (Zxid(6), Zxid(10)),
            "before the snapshot at 8"
        );
        s.purge_through(Zxid(7)).unwrap();
        assert_eq!(history(&s, 100), (Zxid(7), Zxid(10)));
        let image = SnapshotSource::Whole(tree_through(10).to_image());
        zkd_storage::store::install_snapshot(&mut s, Zxid(10), image).unwrap();
        assert_eq!(history(&s, 100), (Zxid(10), Zxid(10)), "an empty log");
    }

    #[test]
    fn the_history_is_the_logs_newest_txns() {
        keeps_the_newest_txns_across_the_snapshot(MemStorage::new());
        let (_dir, s) = sled();
        keeps_the_newest_txns_across_the_snapshot(s);
    }

    #[test]
    fn truncation_recovers_exactly_the_kept_txns() {
        recovers_the_truncated_history(MemStorage::new());
        let (_dir, s) = sled();
        recovers_the_truncated_history(s);
    }

    #[test]
    fn a_snapshot_past_the_log_is_never_loaded() {
        ignores_and_deletes_a_snapshot_past_the_log(MemStorage::new());
        let (_dir, s) = sled();
        ignores_and_deletes_a_snapshot_past_the_log(s);
    }

    #[test]
    fn an_installed_snapshot_is_recovered() {
        recovers_an_installed_snapshot(MemStorage::new());
        let (_dir, s) = sled();
        recovers_an_installed_snapshot(s);
    }

    #[test]
    fn a_purge_mark_beyond_every_snapshot_is_refused() {
        refuses_a_purge_mark_no_snapshot_reaches(MemStorage::new());
        let (_dir, s) = sled();
        refuses_a_purge_mark_no_snapshot_reaches(s);
    }

    /// A store reopened over snapshots decodes the newest while it opens.
    /// Recovery uses it only when it is the base: not when it lies past the
    /// log's end (a crash between a TRUNC's cut and the snapshot's removal),
    /// nor when it is damaged; and keeps none of it afterwards.
    #[test]
    fn a_snapshot_preloaded_at_open_is_used_only_as_the_base() {
        let dir = tempfile::tempdir().unwrap();
        let reopen = |s: DiskStorage| {
            drop(s);
            DiskStorage::open(dir.path(), dir.path()).unwrap()
        };
        let mut s = DiskStorage::open(dir.path(), dir.path()).unwrap();
        history(&mut s);
        let mut s = reopen(s);
        assert_same_tree(&recover(&mut s).unwrap(), &tree_through(10));
        assert!(s.take_preloaded().is_none(), "recovery took it");

        s.save_snapshot(Zxid(3), tree_through(3).to_image())
            .unwrap();
        s.truncate_after(Zxid(5)).unwrap();
        let mut s = reopen(s);
        assert_same_tree(&recover(&mut s).unwrap(), &tree_through(5));
        assert!(s.take_preloaded().is_none(), "recovery dropped it");

        for z in 6..=10 {
            s.append(Zxid(z), create(z).to_bytes()).unwrap();
        }
        s.sync().unwrap();
        s.save_snapshot(Zxid(8), tree_through(8).to_image())
            .unwrap();
        s.save_snapshot(Zxid(10), tree_through(10).to_image())
            .unwrap();
        damage_snapshot_10(dir.path());
        let mut s = reopen(s);
        let (found, _) = load_base_snapshot(&s).unwrap().expect("a snapshot");
        assert_eq!(found.zxid, Zxid(8));
        assert_same_tree(&recover(&mut s).unwrap(), &tree_through(10));
    }

    /// Flips a byte inside the sealed snapshot at zxid 10 under `dir`.
    fn damage_snapshot_10(dir: &std::path::Path) {
        let file = dir.join("zkd/snapshots/snapshot.a");
        let mut bytes = std::fs::read(&file).unwrap();
        bytes[40] ^= 0xff;
        std::fs::write(&file, bytes).unwrap();
    }

    /// The newest snapshot damaged on disk: recovery skips it (it is
    /// verified as it is decoded) and starts from the one before.
    #[test]
    fn a_damaged_newest_snapshot_is_skipped() {
        let (dir, mut s) = sled();
        history(&mut s);
        s.save_snapshot(Zxid(10), tree_through(10).to_image())
            .unwrap();
        damage_snapshot_10(dir.path());
        let (found, tree) = load_base_snapshot(&s).unwrap().expect("a snapshot");
        assert_eq!(found.zxid, Zxid(8));
        assert_same_tree(&tree, &tree_through(8));
        assert_same_tree(&recover(&mut s).unwrap(), &tree_through(10));
    }

    #[test]
    fn recovery_reads_the_log_in_pages() {
        let mut s = MemStorage::new();
        let n = REPLAY_PAGE as i64 * 2 + 7;
        for z in 1..=n {
            s.append(Zxid(z), create(z).to_bytes()).unwrap();
        }
        s.sync().unwrap();
        assert_same_tree(&recover(&mut s).unwrap(), &tree_through(n));
    }

    #[test]
    fn a_log_with_a_gap_is_refused() {
        let mut s = MemStorage::new();
        let txn = |z: i64| {
            Txn {
                header: zkd_protocol::records::TxnHeader {
                    client_id: 1,
                    cxid: 0,
                    zxid: z,
                    time: 0,
                    r#type: -1,
                },
                body: zkd_storage::TxnBody::Error(zkd_protocol::records::ErrorTxn { err: -101 }),
            }
            .to_bytes()
        };
        for z in [5, 6] {
            s.append(Zxid(z), txn(z)).unwrap();
        }
        assert!(
            matches!(recover(&mut s), Err(StorageError::Corrupt(_))),
            "txns 1-4 are missing"
        );
        s.save_snapshot(Zxid(4), DataTree::new().to_image())
            .unwrap();
        // The image itself says zxid 0, so its txns 1-4 are still missing.
        assert!(recover(&mut s).is_err());
    }
}
