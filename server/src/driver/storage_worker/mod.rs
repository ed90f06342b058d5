//! The storage worker: a dedicated thread that carries out storage jobs
//! **strictly in the order they are submitted**, appending txns with group
//! commit (one fsync covers every append queued while the previous one ran)
//! and reporting what became durable to the node loop.
//!
//! Ordering rule: before any job that is not an append (an epoch write, a
//! truncation, a snapshot install, a barrier, a local snapshot), the appends
//! queued before it are synced and reported `Persisted`. So
//! `[Persist.., SetCurrentEpoch(e), Barrier(t)]` makes the txns durable, then
//! currentEpoch, then reports `Reached(t)`: currentEpoch is durable after the
//! synced history and before the follower's ACK of NEWLEADER. Consecutive
//! appends still share one fsync.
//!
//! Local snapshots (taken every snapCount txns) stream in as pieces
//! (`StorageJob::SnapshotPiece`) and are written by a helper thread
//! (`local_snapshots`), so a large image never delays the log's fsyncs (and a
//! follower's ACKs). A truncation or snapshot install first abandons a stream
//! in progress and waits for the helper to finish sealing, so no local
//! snapshot can land after (and past) a TRUNC. Barriers do not wait for local
//! snapshots: the log already holds what they contain.

use std::sync::mpsc::{RecvTimeoutError, TryRecvError};
use std::sync::Arc;
use std::time::{Duration, Instant};
use zkd_protocol::Zxid;
use zkd_storage::snapshot::SnapshotSlot;
use zkd_storage::store::VerifiedSnapshots;
use zkd_storage::{StorageError, Store};

mod disk_faults;
mod job_queue;
mod local_snapshots;
mod received_image;
mod storage_metrics;
pub use crate::core::storage_job::{LoggedTxns, ReadState, RebuiltTree, StorageJob, StorageReport};
pub use disk_faults::DiskFaults;
pub use job_queue::{job_queue, JobReceiver, JobSender, Queued};
use local_snapshots::LocalSnapshots;
pub use local_snapshots::SnapshotProgress;
use received_image::ReceivedImage;
use storage_metrics::BatchFigures;
pub use storage_metrics::{StorageFigures, StorageMetrics};

/// Largest number of jobs taken from the queue at once; with one fsync per
/// run of appends, this bounds a batch as ZooKeeper's maxBatchSize does.
const MAX_BATCH: usize = 1000;

/// Log entries removed per step after a snapshot, so purging never holds up
/// the fsync that waiting clients need.
const PURGE_STEP: i64 = 256;

/// A log fsync this slow is logged (ZooKeeper's fsync.warningthresholdms).
const SLOW_SYNC: Duration = Duration::from_secs(1);

/// Where the storage thread's reports go, in the order it makes them: the
/// runtime's channel to its node loop, the simulator's queue. A closed
/// channel means the node loop is gone, and the jobs end soon too.
pub type Reports = Box<dyn Fn(StorageReport) + Send>;

/// How often the worker looks at a purge or a background snapshot in progress.
const POLL: Duration = Duration::from_millis(5);

/// Runs until the job channel closes or storage fails.
pub fn run<S: Store>(
    storage: S,
    retain: usize,
    jobs: JobReceiver,
    reports: Reports,
    disk_faults: Option<Arc<DiskFaults>>,
    progress: SnapshotProgress,
    metrics: StorageMetrics,
) {
    let snapshots = match LocalSnapshots::start(storage.clone(), retain, progress, metrics.clone())
    {
        Ok(s) => s,
        Err(e) => {
            reports(StorageReport::Failed(format!(
                "cannot start the snapshot thread: {e}"
            )));
            std::mem::forget(storage);
            return;
        }
    };
    let mut worker = Worker {
        storage,
        purge: None,
        unsynced: None,
        unsynced_permits: Vec::new(),
        unsynced_count: 0,
        unsynced_queued: Vec::new(),
        batch: BatchFigures::default(),
        snapshots,
        reports,
        disk_faults,
        verified: VerifiedSnapshots::default(),
        metrics,
        received: ReceivedImage::default(),
    };
    if let Err(e) = worker.serve(jobs) {
        // Nothing more is acknowledged. The store is not dropped: after an
        // I/O error sled's destructor flushes again and panics. The snapshot
        // thread ends after its current image; its clone is not the last.
        (worker.reports)(StorageReport::Failed(e.to_string()));
        worker.snapshots.detach();
        std::mem::forget(worker);
    }
}

/// The worker's job handling without its threads, for the simulator: each
/// job runs when the caller says (its simulated fsync latency), as a batch
/// of its own, and local snapshots are saved at once. What the jobs do is
/// the storage thread's own code.
#[cfg(test)]
pub struct InlineWorker<S>(Worker<S>);

#[cfg(test)]
impl<S: Store> InlineWorker<S> {
    /// A worker on `storage` that keeps `retain` snapshots and reports to `reports`.
    pub fn new(storage: S, retain: usize, reports: Reports) -> Self {
        InlineWorker(Worker {
            snapshots: LocalSnapshots::inline(storage.clone(), retain),
            storage,
            purge: None,
            unsynced: None,
            unsynced_permits: Vec::new(),
            unsynced_count: 0,
            unsynced_queued: Vec::new(),
            batch: BatchFigures::default(),
            reports,
            disk_faults: None,
            verified: VerifiedSnapshots::default(),
            metrics: StorageMetrics::default(),
            received: ReceivedImage::default(),
        })
    }

    /// Runs `job` as the storage thread does within a batch: appends are
    /// written, not yet synced; any other job first syncs those before it.
    pub fn run(&mut self, job: StorageJob) -> Result<(), StorageError> {
        let worker = &mut self.0;
        if let Some(goal) = worker.snapshots.collect(false)? {
            worker.purge = worker.purge.max(Some(goal));
        }
        worker.execute(job)
    }

    /// Ends a batch: one sync of its appends (reported `Persisted`), then a
    /// step of any purge. Whether any append waits for it.
    pub fn end_batch(&mut self) -> Result<(), StorageError> {
        self.0.sync_appends()?;
        self.0.purge_step()
    }

    /// Whether appends wait for [`end_batch`](Self::end_batch).
    pub fn has_unsynced(&self) -> bool {
        self.0.unsynced.is_some()
    }

    /// Bytes of local-snapshot pieces done with so far (see [`SnapshotProgress`]).
    pub fn snapshot_stored(&self) -> u64 {
        self.0.snapshots.progress().stored()
    }
}

/// The storage thread's state.
struct Worker<S> {
    storage: S,
    /// Log purge in progress: everything through this zxid may go.
    purge: Option<Zxid>,
    /// The last zxid appended and not yet synced.
    unsynced: Option<Zxid>,
    /// The permits of the appends not yet synced (see `StorageJob::Persist`).
    unsynced_permits: Vec<crate::core::ReadPermit>,
    /// How many appends wait for the next fsync.
    unsynced_count: u64,
    /// When the appends that wait for the next fsync were queued.
    unsynced_queued: Vec<Instant>,
    /// This batch's queue figures, not yet added to `metrics`.
    batch: BatchFigures,
    snapshots: LocalSnapshots,
    reports: Reports,
    /// A test's slow or failing disk (`zkd.faults.enable` only).
    disk_faults: Option<Arc<DiskFaults>>,
    /// Snapshots read whole once already, for the durable state's lowest cut.
    verified: VerifiedSnapshots,
    metrics: StorageMetrics,
    /// A SNAP decoded as it streams in, for the rebuild after its install.
    received: ReceivedImage,
}

impl<S: Store> Worker<S> {
    /// A piece of a SNAP streaming in (`StorageJob::StageSnapshotPiece`).
    fn stage(&mut self, first: bool, data: &bytes::Bytes) -> Result<(), StorageError> {
        if first {
            self.storage.remove_snapshot(SnapshotSlot::Staging)?;
        }
        self.storage.append_snapshot(SnapshotSlot::Staging, data)?;
        self.received.piece(first, data);
        // Paced writeback, as a local snapshot's: left to the seal, a
        // 2M-znode image (428 MB) was one fsync that stalled the log's
        // fsyncs of every member on the disk for 200-340 ms.
        self.storage.write_out_snapshot(SnapshotSlot::Staging)
    }

    /// A follower's SNAP becomes its history (`StorageJob::InstallSnapshot`).
    fn install(
        &mut self,
        zxid: Zxid,
        image: zkd_storage::store::SnapshotSource,
        fuzzy_through: Zxid,
    ) -> Result<(), StorageError> {
        self.settle_snapshots()?;
        if fuzzy_through > zxid {
            self.storage.set_fuzzy_image(zxid, fuzzy_through)?;
        }
        let staged = matches!(image, zkd_storage::store::SnapshotSource::Staged(_));
        zkd_storage::store::install_snapshot(&mut self.storage, zxid, image)?;
        match staged {
            true => self.received.installed(zxid),
            false => self.received = ReceivedImage::Nothing,
        }
        if self.storage.diverged_at()?.is_some() {
            // The leader's image replaced the tree that diverged.
            self.storage.set_diverged_at(None)?;
        }
        tracing::info!(%zxid, "snapshot from the leader installed");
        Ok(())
    }

    /// Processes jobs until the channel closes (Ok) or storage fails.
    fn serve(&mut self, jobs: JobReceiver) -> Result<(), StorageError> {
        loop {
            if let Some(goal) = self.snapshots.collect(false)? {
                self.purge = self.purge.max(Some(goal));
            }
            // With a purge or a snapshot pending, wake up now and then for it.
            let first = if self.purge.is_some() || self.snapshots.in_flight > 0 {
                match jobs.recv_timeout(POLL) {
                    Ok(job) => Some(job),
                    Err(RecvTimeoutError::Timeout) => None,
                    Err(RecvTimeoutError::Disconnected) => break,
                }
            } else {
                match jobs.recv() {
                    Some(job) => Some(job),
                    None => break,
                }
            };
            if let Some(first) = first {
                self.take(first)?;
                for _ in 1..MAX_BATCH {
                    match jobs.try_recv() {
                        Ok(job) => self.take(job)?,
                        Err(TryRecvError::Empty | TryRecvError::Disconnected) => break,
                    }
                }
                self.sync_appends()?;
                self.metrics.batch(&mut self.batch);
            }
            self.purge_step()?;
        }
        // The channel closed: finish what was queued, background snapshots too.
        self.sync_appends()?;
        self.snapshots.collect(true)?;
        self.snapshots.stop();
        Ok(())
    }

    /// Carries out a job taken from the queue, and notes how long it waited
    /// there and how long it took.
    fn take(&mut self, queued: Queued) -> Result<(), StorageError> {
        let started = Instant::now();
        let append = matches!(queued.job, StorageJob::Persist { .. });
        self.execute(queued.job)?;
        if append {
            self.unsynced_queued.push(queued.at);
        }
        let waited = started.saturating_duration_since(queued.at);
        self.batch.job(queued.waiting, waited, started.elapsed());
        Ok(())
    }

    /// Carries out one job, in order: appends are only written (the sync
    /// comes at the next non-append job or the end of the batch); any other
    /// job first syncs the appends before it.
    fn execute(&mut self, job: StorageJob) -> Result<(), StorageError> {
        if let StorageJob::Persist {
            zxid,
            record,
            permit,
        } = job
        {
            return self.append(zxid, record, permit);
        }
        self.sync_appends()?;
        match job {
            StorageJob::Persist { .. } => unreachable!("handled above"),
            StorageJob::SnapshotPiece(piece) => self.snapshots.submit(piece),
            StorageJob::Truncate(zxid) => {
                self.settle_snapshots()?;
                zkd_storage::store::truncate_history(&mut self.storage, zxid)?;
                tracing::info!(%zxid, "log truncated");
            }
            StorageJob::StageSnapshotPiece { first, data, .. } => self.stage(first, &data)?,
            StorageJob::InstallSnapshot {
                zxid,
                image,
                fuzzy_through,
            } => self.install(zxid, image, fuzzy_through)?,
            StorageJob::SetAcceptedEpoch(epoch) => self.storage.set_accepted_epoch(epoch)?,
            StorageJob::SetCurrentEpoch(epoch) => self.storage.set_current_epoch(epoch)?,
            StorageJob::MarkDiverged(zxid) => self.storage.set_diverged_at(Some(zxid))?,
            StorageJob::Barrier(token) => self.report(StorageReport::Reached(token)),
            StorageJob::Rebuild => {
                let received = self.received.take();
                let tree = super::recovery::rebuild_from(&self.storage, received)?;
                let fuzzy_through = super::recovery::fuzzy_through(&self.storage, &tree)?;
                self.report(StorageReport::Rebuilt(RebuiltTree {
                    tree: Box::new(tree),
                    fuzzy_through,
                }));
            }
            StorageJob::ReadDurableState { window, tree_at } => {
                let state =
                    super::recovery::durable_state(&self.storage, window, &mut self.verified)?;
                let after_tree = match tree_at >= state.history.base() {
                    true => state.history.after(tree_at).cloned().collect(),
                    false => self.logged(tree_at, state.history.last_zxid())?,
                };
                self.report(StorageReport::DurableState(ReadState {
                    state: Box::new(state),
                    after_tree,
                    diverged_at: self.storage.diverged_at()?,
                }));
            }
            StorageJob::ReadFor {
                peer,
                after,
                max_bytes,
            } => {
                let txns = self.logged_bytes(after, max_bytes)?;
                self.report(StorageReport::LoggedFor { peer, after, txns });
            }
            StorageJob::ReadLogged { after, through } => {
                let logged = self.logged(after, through)?;
                self.report(StorageReport::Logged(logged));
            }
        }
        Ok(())
    }

    /// Writes one txn to the log; the next sync makes it durable.
    fn append(
        &mut self,
        zxid: Zxid,
        record: bytes::Bytes,
        permit: Option<crate::core::ReadPermit>,
    ) -> Result<(), StorageError> {
        self.storage.append(zxid, record)?;
        self.unsynced = Some(zxid);
        self.unsynced_count += 1;
        self.unsynced_permits.extend(permit);
        Ok(())
    }

    /// One fsync for every append since the last, then `Persisted`.
    fn sync_appends(&mut self) -> Result<(), StorageError> {
        if let Some(zxid) = self.unsynced.take() {
            // Planted (skip-fsync): persisted in name only.
            if !crate::failpoints::active(crate::failpoints::Failpoint::SkipFsync) {
                let started = std::time::Instant::now();
                if let Some(faults) = &self.disk_faults {
                    faults.before_sync().map_err(StorageError::Db)?;
                }
                self.storage.sync()?;
                let took = started.elapsed();
                self.metrics
                    .synced(took, self.unsynced_count, took >= SLOW_SYNC);
                // As ZooKeeper's fsync.warningthresholdms: an operator sees a slow disk.
                if took >= SLOW_SYNC {
                    tracing::warn!(
                        ms = took.as_millis() as u64,
                        "fsync of the txn log was slow"
                    );
                }
            }
            // Durable now: the permits go back before the report, so whoever
            // hears of it finds the budget already freed.
            self.unsynced_permits.clear();
            let now = Instant::now();
            for queued in self.unsynced_queued.drain(..) {
                self.batch.flushed(now.saturating_duration_since(queued));
            }
            self.report(StorageReport::Persisted(zxid));
            self.unsynced_count = 0;
            self.storage.settle()?;
        }
        Ok(())
    }

    /// The logged txns after `after`, until `max_bytes` of them.
    fn logged_bytes(&self, after: Zxid, max_bytes: usize) -> Result<LoggedTxns, StorageError> {
        let mut logged = Vec::new();
        let mut bytes = 0;
        for item in self.storage.txns_after(after, 1024) {
            let (zxid, txn) = item?;
            bytes += txn.len();
            logged.push((zxid, txn));
            if bytes >= max_bytes {
                break;
            }
        }
        Ok(logged)
    }

    /// The logged txns after `after` through `through`.
    fn logged(&self, after: Zxid, through: Zxid) -> Result<LoggedTxns, StorageError> {
        let mut logged = Vec::new();
        for item in self.storage.txns_after(after, 1024) {
            let (zxid, txn) = item?;
            if zxid > through {
                break;
            }
            logged.push((zxid, txn));
        }
        Ok(logged)
    }

    /// Waits for background snapshots, and drops the log purge: the history
    /// is about to change under both.
    fn settle_snapshots(&mut self) -> Result<(), StorageError> {
        self.snapshots.abandon();
        self.snapshots.collect(true)?;
        self.purge = None;
        Ok(())
    }

    fn report(&self, report: StorageReport) {
        (self.reports)(report);
    }

    fn purge_step(&mut self) -> Result<(), StorageError> {
        let Some(goal) = self.purge else {
            return Ok(());
        };
        let Some(first) = self.storage.first_zxid()? else {
            self.purge = None;
            return Ok(());
        };
        // Counters are dense within an epoch, so this removes about PURGE_STEP entries.
        let step = Zxid(goal.0.min(first.0.saturating_add(PURGE_STEP)));
        self.storage.purge_through(step)?;
        self.purge = (step < goal).then_some(goal);
        Ok(())
    }
}

/// Outcome of one background snapshot: the oldest snapshot kept (the log
/// may be purged through it).
type Saved = Result<Option<Zxid>, StorageError>;

#[cfg(test)]
mod tests;
