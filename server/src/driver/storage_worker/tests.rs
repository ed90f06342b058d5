//! The storage worker on MemStorage wrappers: order, group commit, barriers, snapshots.

use super::*;
use crate::core::types::SnapshotPiece;
use bytes::Bytes;
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver};
use zkd_protocol::records::{ErrorTxn, TxnHeader};
use zkd_storage::snapshot::{SnapshotSeal, SnapshotSlot};
use zkd_storage::store::SnapshotSource;
use zkd_storage::{
    DataTree, DivergenceMark, EpochStore, MemStorage, SnapshotStore, StorageError, Txn, TxnBody,
    TxnLog,
};

type Result<T> = std::result::Result<T, StorageError>;

/// MemStorage that records every write it carries out, in order, and
/// whose `save_snapshot` takes `snapshot_delay` and `sync` `sync_delay`.
#[derive(Clone, Debug, Default)]
struct Recorder {
    inner: MemStorage,
    ops: Arc<Mutex<Vec<String>>>,
    snapshot_delay: Duration,
    sync_delay: Duration,
}

impl Recorder {
    fn record(&self, op: String) {
        self.ops.lock().unwrap().push(op);
    }
    fn ops(&self) -> Vec<String> {
        self.ops.lock().unwrap().clone()
    }
}

impl TxnLog for Recorder {
    fn append(&mut self, zxid: Zxid, txn: Bytes) -> Result<()> {
        self.record(format!("append {}", zxid.0));
        self.inner.append(zxid, txn)
    }
    fn sync(&mut self) -> Result<()> {
        std::thread::sleep(self.sync_delay);
        self.record("sync".into());
        self.inner.sync()
    }
    fn first_zxid(&self) -> Result<Option<Zxid>> {
        self.inner.first_zxid()
    }
    fn last_zxid(&self) -> Result<Option<Zxid>> {
        self.inner.last_zxid()
    }
    fn purged_through(&self) -> Result<Option<Zxid>> {
        self.inner.purged_through()
    }
    fn read_range(&self, after: Zxid, max_txns: usize) -> Result<Vec<(Zxid, Bytes)>> {
        self.inner.read_range(after, max_txns)
    }
    fn last_zxid_at_or_before(&self, zxid: Zxid) -> Result<Option<Zxid>> {
        self.inner.last_zxid_at_or_before(zxid)
    }
    fn truncate_after(&mut self, zxid: Zxid) -> Result<()> {
        self.record(format!("truncate {}", zxid.0));
        self.inner.truncate_after(zxid)
    }
    fn reset(&mut self, through: Zxid) -> Result<()> {
        self.record(format!("reset {}", through.0));
        self.inner.reset(through)
    }
    fn purge_through(&mut self, zxid: Zxid) -> Result<()> {
        self.inner.purge_through(zxid)
    }
}

impl SnapshotStore for Recorder {
    fn append_snapshot(&mut self, slot: SnapshotSlot, piece: &[u8]) -> Result<()> {
        self.inner.append_snapshot(slot, piece)
    }
    fn read_snapshot_at(&self, slot: SnapshotSlot, offset: u64, max: usize) -> Result<Bytes> {
        self.inner.read_snapshot_at(slot, offset, max)
    }
    fn seal_snapshot(&mut self, slot: SnapshotSlot, zxid: Zxid, seal: SnapshotSeal) -> Result<()> {
        if slot == SnapshotSlot::Saved(zxid) {
            std::thread::sleep(self.snapshot_delay);
            self.record(format!("snapshot {}", zxid.0));
        }
        self.inner.seal_snapshot(slot, zxid, seal)
    }
    fn snapshot_seals(&self) -> Result<Vec<(Zxid, SnapshotSeal)>> {
        self.inner.snapshot_seals()
    }
    fn snapshot_zxids(&self) -> Result<Vec<Zxid>> {
        self.inner.snapshot_zxids()
    }
    fn remove_snapshot(&mut self, slot: SnapshotSlot) -> Result<()> {
        self.inner.remove_snapshot(slot)
    }
    fn sync_snapshots(&mut self) -> Result<()> {
        self.inner.sync_snapshots()
    }
    // Whole operations are recorded, as the worker calls them; a local
    // snapshot as its seal.
    fn delete_snapshots_after(&mut self, zxid: Zxid) -> Result<()> {
        self.record(format!("delete snapshots after {}", zxid.0));
        self.inner.delete_snapshots_after(zxid)
    }
    fn purge_snapshots(&mut self, retain: usize) -> Result<Option<Zxid>> {
        self.inner.purge_snapshots(retain)
    }
    fn set_fuzzy_image(&mut self, zxid: Zxid, end: Zxid) -> Result<()> {
        self.inner.set_fuzzy_image(zxid, end)
    }
    fn fuzzy_image(&self) -> Result<Option<(Zxid, Zxid)>> {
        self.inner.fuzzy_image()
    }
}

impl EpochStore for Recorder {
    fn accepted_epoch(&self) -> Result<u32> {
        self.inner.accepted_epoch()
    }
    fn set_accepted_epoch(&mut self, epoch: u32) -> Result<()> {
        self.record(format!("acceptedEpoch {epoch}"));
        self.inner.set_accepted_epoch(epoch)
    }
    fn current_epoch(&self) -> Result<u32> {
        self.inner.current_epoch()
    }
    fn set_current_epoch(&mut self, epoch: u32) -> Result<()> {
        self.record(format!("currentEpoch {epoch}"));
        self.inner.set_current_epoch(epoch)
    }
}

impl DivergenceMark for Recorder {
    fn diverged_at(&self) -> Result<Option<Zxid>> {
        self.inner.diverged_at()
    }
    fn set_diverged_at(&mut self, zxid: Option<Zxid>) -> Result<()> {
        self.record(format!("divergedAt {zxid:?}"));
        self.inner.set_diverged_at(zxid)
    }
}

impl Store for Recorder {
    fn disk_usage(&self) -> (u64, u64) {
        (0, 0)
    }

    fn last_snapshot(&self) -> Option<(Zxid, u64)> {
        self.inner.last_snapshot()
    }
}

fn txn(z: i64) -> Txn {
    Txn {
        header: TxnHeader {
            client_id: 1,
            cxid: 0,
            zxid: z,
            time: 0,
            r#type: -1,
        },
        body: TxnBody::Error(ErrorTxn { err: -101 }),
    }
}

fn persist(z: i64) -> StorageJob {
    let txn = txn(z);
    StorageJob::Persist {
        zxid: txn.zxid(),
        record: txn.to_bytes(),
        permit: None,
    }
}

/// A worker on `storage` with `jobs` already queued (so they form one batch).
struct Running {
    jobs: Option<super::JobSender>,
    reports: UnboundedReceiver<StorageReport>,
    thread: Option<std::thread::JoinHandle<()>>,
    progress: SnapshotProgress,
}

impl Running {
    fn start(storage: Recorder, queued: Vec<StorageJob>) -> Running {
        let metrics = super::StorageMetrics::default();
        let (tx, rx) = super::job_queue(metrics.queue());
        for job in queued {
            tx.send(job).map_err(|_| "worker gone").unwrap();
        }
        let (report_tx, reports) = unbounded_channel();
        let progress = SnapshotProgress::default();
        let counted = progress.clone();
        let thread = std::thread::spawn(move || {
            let reports = Box::new(move |r| {
                let _ = report_tx.send(r);
            });
            run(storage, 3, rx, reports, None, counted, metrics)
        });
        Running {
            jobs: Some(tx),
            reports,
            thread: Some(thread),
            progress,
        }
    }

    fn send(&self, job: StorageJob) {
        let sent = self.jobs.as_ref().unwrap().send(job);
        sent.map_err(|_| "worker gone").unwrap();
    }

    /// The next report, or None after `limit`.
    fn next(&mut self, limit: Duration) -> Option<StorageReport> {
        let deadline = Instant::now() + limit;
        loop {
            if let Ok(r) = self.reports.try_recv() {
                return Some(r);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    fn expect(&mut self, want: &[StorageReport]) {
        for w in want {
            assert_eq!(self.next(Duration::from_secs(10)).as_ref(), Some(w));
        }
    }

    /// Closes the job channel and waits for the worker to finish.
    fn stop(mut self) {
        self.jobs = None;
        self.thread.take().unwrap().join().unwrap();
    }
}

#[test]
fn jobs_run_strictly_in_order_with_appends_synced_first() {
    let storage = Recorder::default();
    let mut w = Running::start(
        storage.clone(),
        vec![
            persist(1),
            persist(2),
            StorageJob::SetAcceptedEpoch(3),
            StorageJob::SetCurrentEpoch(3),
            StorageJob::Barrier(7),
            persist(3),
            persist(4),
            StorageJob::Truncate(Zxid(3)),
            StorageJob::Barrier(8),
            persist(4),
            StorageJob::Barrier(9),
        ],
    );
    w.expect(&[
        StorageReport::Persisted(Zxid(2)),
        StorageReport::Reached(7),
        StorageReport::Persisted(Zxid(4)),
        StorageReport::Reached(8),
        StorageReport::Persisted(Zxid(4)),
        StorageReport::Reached(9),
    ]);
    w.stop();
    assert_eq!(
        storage.ops(),
        [
            "append 1",
            "append 2",
            "sync",
            "acceptedEpoch 3",
            "currentEpoch 3",
            "append 3",
            "append 4",
            "sync",
            "delete snapshots after 3",
            "truncate 3",
            "append 4",
            "sync",
        ]
    );
    // All of it survives a power cut.
    storage.inner.crash();
    assert_eq!(storage.inner.current_epoch().unwrap(), 3);
    let log: Vec<_> = storage
        .inner
        .txns_after(Zxid(0), 0)
        .map(|r| r.unwrap().0 .0)
        .collect();
    assert_eq!(log, [1, 2, 3, 4]);
}

#[test]
fn consecutive_appends_share_one_fsync() {
    let storage = Recorder::default();
    let mut w = Running::start(storage.clone(), (1..=50).map(persist).collect());
    w.expect(&[StorageReport::Persisted(Zxid(50))]);
    w.stop();
    assert_eq!(storage.ops().iter().filter(|o| *o == "sync").count(), 1);
}

#[test]
fn a_barrier_reports_once_everything_before_it_is_durable() {
    let storage = Recorder::default();
    let mut w = Running::start(storage.clone(), vec![]);
    for z in 1..=3 {
        w.send(persist(z));
    }
    w.send(StorageJob::SetCurrentEpoch(5));
    w.send(StorageJob::Barrier(1));
    // Wait for the barrier, then cut the power at once.
    loop {
        match w.next(Duration::from_secs(10)) {
            Some(StorageReport::Reached(1)) => break,
            Some(StorageReport::Persisted(_)) => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    let survived = storage.inner.power_cut_copy();
    assert_eq!(survived.current_epoch().unwrap(), 5);
    assert_eq!(survived.last_zxid().unwrap(), Some(Zxid(3)));
    w.stop();
}

#[test]
fn an_installed_snapshot_replaces_the_history_before_later_jobs() {
    let storage = Recorder::default();
    let mut leader = DataTree::new();
    leader.apply(&txn(10));
    let mut w = Running::start(
        storage.clone(),
        vec![
            persist(1),
            persist(2),
            StorageJob::InstallSnapshot {
                zxid: Zxid(10),
                image: SnapshotSource::Whole(leader.to_image()),
                fuzzy_through: Zxid::ZERO,
            },
            persist(11),
            StorageJob::Barrier(1),
        ],
    );
    w.expect(&[
        StorageReport::Persisted(Zxid(2)),
        StorageReport::Persisted(Zxid(11)),
        StorageReport::Reached(1),
    ]);
    w.stop();
    let mut disk = storage.inner.power_cut_copy();
    assert_eq!(disk.purged_through().unwrap(), Some(Zxid(10)));
    assert_eq!(
        disk.latest_snapshot().unwrap().map(|s| s.zxid),
        Some(Zxid(10))
    );
    let log: Vec<_> = disk
        .txns_after(Zxid(0), 0)
        .map(|r| r.unwrap().0 .0)
        .collect();
    assert_eq!(log, [11]);
    let tree = crate::driver::recovery::recover(&mut disk).unwrap();
    assert_eq!(tree.last_zxid(), Zxid(11));
}

#[test]
fn a_truncation_the_store_cannot_rebuild_fails_the_worker() {
    let storage = Recorder::default();
    let mut w = Running::start(storage.clone(), vec![persist(1), persist(2)]);
    w.expect(&[StorageReport::Persisted(Zxid(2))]);
    storage.inner.clone().purge_through(Zxid(2)).unwrap();
    w.send(StorageJob::Truncate(Zxid(1)));
    assert!(matches!(
        w.next(Duration::from_secs(10)),
        Some(StorageReport::Failed(_))
    ));
    w.stop();
}

/// A 2 s local snapshot does not hold up the log: appends submitted
/// meanwhile are durable and reported within 200 ms.
#[test]
fn a_slow_local_snapshot_does_not_delay_fsyncs() {
    let storage = Recorder {
        snapshot_delay: Duration::from_secs(2),
        ..Recorder::default()
    };
    let mut w = Running::start(storage.clone(), vec![persist(1)]);
    w.expect(&[StorageReport::Persisted(Zxid(1))]);
    w.send(StorageJob::SnapshotPiece(SnapshotPiece::whole(
        Zxid(1),
        DataTree::new().to_image(),
    )));
    std::thread::sleep(Duration::from_millis(100));
    for z in 2..=4 {
        let sent = Instant::now();
        w.send(persist(z));
        let report = w.next(Duration::from_millis(200));
        assert_eq!(report, Some(StorageReport::Persisted(Zxid(z))), "zxid {z}");
        assert!(sent.elapsed() < Duration::from_millis(200));
        // Epoch writes and barriers do not wait for it either.
        w.send(StorageJob::SetAcceptedEpoch(z as u32));
        w.send(StorageJob::Barrier(z as u64));
        assert_eq!(
            w.next(Duration::from_millis(200)),
            Some(StorageReport::Reached(z as u64))
        );
    }
    assert!(!storage.ops().contains(&"snapshot 1".to_string()));
    // Closing the channel still finishes the snapshot.
    w.stop();
    assert!(storage.ops().contains(&"snapshot 1".to_string()));
    assert!(storage.inner.latest_snapshot().unwrap().is_some());
}

/// A TRUNC waits for a local snapshot in progress, so the snapshot cannot
/// land past the cut after the cut deleted later snapshots.
#[test]
fn a_truncation_waits_for_a_local_snapshot_in_progress() {
    let storage = Recorder {
        snapshot_delay: Duration::from_millis(300),
        ..Recorder::default()
    };
    let mut image = DataTree::new();
    for z in 1..=5 {
        image.apply(&txn(z));
    }
    let mut w = Running::start(
        storage.clone(),
        (1..=5)
            .map(persist)
            .chain([
                StorageJob::SnapshotPiece(SnapshotPiece::whole(Zxid(5), image.to_image())),
                StorageJob::Truncate(Zxid(3)),
                StorageJob::Barrier(1),
            ])
            .collect(),
    );
    w.expect(&[StorageReport::Persisted(Zxid(5)), StorageReport::Reached(1)]);
    w.stop();
    let ops = storage.ops();
    let at = |op: &str| ops.iter().position(|o| o == op).unwrap();
    assert!(at("snapshot 5") < at("delete snapshots after 3"), "{ops:?}");
    assert_eq!(storage.inner.latest_snapshot().unwrap(), None);
    assert_eq!(storage.inner.last_zxid().unwrap(), Some(Zxid(3)));
}

/// Snapshots arriving while one is saved are skipped, as ZooKeeper skips
/// them; the log is purged through the oldest snapshot kept.
#[test]
fn local_snapshots_arriving_while_one_is_saved_are_skipped() {
    let storage = Recorder {
        snapshot_delay: Duration::from_millis(200),
        ..Recorder::default()
    };
    let mut jobs = Vec::new();
    let mut handed = 0;
    for z in 1..=6 {
        jobs.push(persist(z));
        let mut tree = DataTree::new();
        for t in 1..=z {
            tree.apply(&txn(t));
        }
        let image = tree.to_image();
        handed += image.len() as u64;
        jobs.push(StorageJob::SnapshotPiece(SnapshotPiece::whole(
            Zxid(z),
            image,
        )));
    }
    let mut w = Running::start(storage.clone(), jobs);
    for z in 1..=6 {
        w.expect(&[StorageReport::Persisted(Zxid(z))]);
    }
    // The worker purges the log once it hears a snapshot was saved.
    std::thread::sleep(Duration::from_millis(700));
    w.send(StorageJob::Barrier(1));
    w.expect(&[StorageReport::Reached(1)]);
    // Saved and skipped pieces alike no longer wait for the disk.
    assert_eq!(w.progress.stored(), handed);
    w.stop();
    let saved: Vec<_> = storage
        .ops()
        .into_iter()
        .filter(|o| o.starts_with("snapshot"))
        .collect();
    // The first is saved; while it takes 200 ms the rest arrive, and are skipped.
    assert_eq!(saved, vec!["snapshot 1".to_string()]);
    // The log is purged through it.
    let mut disk = storage.inner.clone();
    assert_eq!(disk.purged_through().unwrap(), Some(Zxid(1)));
    assert_eq!(
        crate::driver::recovery::recover(&mut disk)
            .unwrap()
            .last_zxid(),
        Zxid(6)
    );
}

/// The tree of txns `1..=z`.
fn tree_at(z: i64) -> DataTree {
    let mut tree = DataTree::new();
    for t in 1..=z {
        tree.apply(&txn(t));
    }
    tree
}

/// The jobs handing over `tree`'s image as the node does: in `pieces`
/// pieces, the first starting the stream and the last ending it.
fn piece_jobs(tree: &DataTree, pieces: usize) -> Vec<StorageJob> {
    let image = tree.to_image();
    let size = image.len().div_ceil(pieces);
    let count = image.len().div_ceil(size);
    (0..count)
        .map(|i| {
            StorageJob::SnapshotPiece(SnapshotPiece {
                zxid: tree.last_zxid(),
                data: image.slice(i * size..((i + 1) * size).min(image.len())),
                first: i == 0,
                last: i + 1 == count,
            })
        })
        .collect()
}

/// Appends txns 1..=50, then runs `jobs` and a barrier to the end.
fn run_after_fifty_txns(storage: &Recorder, jobs: Vec<StorageJob>) {
    let jobs = (1..=50)
        .map(persist)
        .chain(jobs)
        .chain([StorageJob::Barrier(1)])
        .collect();
    let mut w = Running::start(storage.clone(), jobs);
    w.expect(&[
        StorageReport::Persisted(Zxid(50)),
        StorageReport::Reached(1),
    ]);
    w.stop();
}

/// The local snapshots the store sealed, in order.
fn sealed(storage: &Recorder) -> Vec<String> {
    let ops = storage.ops().into_iter();
    ops.filter(|o| o.starts_with("snapshot")).collect()
}

/// A snapshot streamed in pieces is saved as the image they make.
#[test]
fn a_streamed_snapshot_is_saved_whole() {
    let storage = Recorder::default();
    run_after_fifty_txns(&storage, piece_jobs(&tree_at(50), 7));
    let latest = storage.inner.latest_snapshot().unwrap();
    let latest = latest.expect("a snapshot");
    assert_eq!(latest.zxid, Zxid(50));
    let slot = SnapshotSlot::Saved(latest.zxid);
    let image = zkd_storage::snapshot::read_whole(&storage.inner, slot, latest.seal).unwrap();
    assert_eq!(image, tree_at(50).to_image());
}

/// A truncation in the middle of a stream abandons it: the pieces after
/// the cut are ignored, and no snapshot is sealed from part of an image.
#[test]
fn a_truncation_abandons_a_stream_in_progress() {
    let storage = Recorder::default();
    let mut jobs = piece_jobs(&tree_at(50), 4);
    jobs.insert(2, StorageJob::Truncate(Zxid(40)));
    run_after_fifty_txns(&storage, jobs);
    assert_eq!(sealed(&storage), Vec::<String>::new());
    assert_eq!(storage.inner.latest_snapshot().unwrap(), None);
    assert_eq!(storage.inner.last_zxid().unwrap(), Some(Zxid(40)));
}

/// A stream the node dropped (its member stopped serving) is abandoned
/// when the next one starts: the next is saved, and the dropped one's late
/// pieces change nothing.
#[test]
fn a_dropped_stream_gives_way_to_the_next() {
    let storage = Recorder::default();
    let mut dropped = piece_jobs(&tree_at(30), 3);
    let late = dropped.split_off(1);
    let jobs = dropped
        .into_iter()
        .chain(piece_jobs(&tree_at(50), 3))
        .chain(late)
        .collect();
    run_after_fifty_txns(&storage, jobs);
    assert_eq!(sealed(&storage), vec!["snapshot 50".to_string()]);
    assert_eq!(storage.inner.snapshot_zxids().unwrap(), vec![Zxid(50)]);
}

/// A follower's proposal holds its share of the bytes in flight until it is
/// durable, not merely appended: a disk slower than the leader's stops the
/// link from reading instead of queueing without bound.
#[test]
fn a_proposals_permit_is_given_back_once_it_is_durable() {
    let budget = Arc::new(tokio::sync::Semaphore::new(10));
    let storage = Recorder {
        sync_delay: Duration::from_millis(500),
        ..Recorder::default()
    };
    let jobs = (1..=3)
        .map(|z| StorageJob::Persist {
            zxid: Zxid(z),
            record: txn(z).to_bytes(),
            permit: Some(crate::runtime::peer::ReadPermit::take(&budget, 2)),
        })
        .collect();
    assert_eq!(budget.available_permits(), 4);
    let mut worker = Running::start(storage, jobs);
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        budget.available_permits(),
        4,
        "given back before the fsync ended"
    );
    worker.expect(&[StorageReport::Persisted(Zxid(3))]);
    assert_eq!(budget.available_permits(), 10);
    worker.stop();
}

/// The txns a member's catch-up applies are read here, not on its loop:
/// after a TRUNC (`ReadLogged`), and with the state an election round
/// starts from, from the tree's zxid on, inside the history window or
/// below it.
#[test]
fn the_logged_txns_a_catch_up_applies_are_read_on_the_storage_thread() {
    let mut w = Running::start(Recorder::default(), (1..=6).map(persist).collect());
    w.expect(&[StorageReport::Persisted(Zxid(6))]);
    let zxids = |logged: &LoggedTxns| logged.iter().map(|(z, _)| z.0).collect::<Vec<_>>();
    w.send(StorageJob::ReadLogged {
        after: Zxid(2),
        through: Zxid(4),
    });
    match w.next(Duration::from_secs(10)) {
        Some(StorageReport::Logged(logged)) => {
            assert_eq!(zxids(&logged), [3, 4]);
            assert_eq!(logged[0].1, txn(3).to_bytes());
        }
        other => panic!("unexpected {other:?}"),
    }
    for (window, tree_at, after_tree) in [(2, 1, vec![2, 3, 4, 5, 6]), (10, 4, vec![5, 6])] {
        w.send(StorageJob::ReadDurableState {
            window,
            tree_at: Zxid(tree_at),
        });
        match w.next(Duration::from_secs(10)) {
            Some(StorageReport::DurableState(read)) => {
                assert_eq!(read.state.history.last_zxid(), Zxid(6));
                assert_eq!(zxids(&read.after_tree), after_tree, "window {window}");
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    w.stop();
}
