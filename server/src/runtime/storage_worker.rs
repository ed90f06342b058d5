//! The storage worker: a dedicated thread that appends txns and fsyncs them
//! with group commit (one sync covers every txn queued while the previous one
//! ran), then reports the highest durable zxid to the node loop.

use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError};
use std::time::Duration;
use tokio::sync::mpsc::UnboundedSender;
use zkd_protocol::Zxid;
use zkd_storage::{StorageError, Store, Txn};

/// Work for the storage thread.
#[derive(Debug)]
pub enum StorageJob {
    /// Append and make durable.
    Persist(Txn),
    /// Store a snapshot, then purge old snapshots and the log they cover.
    Snapshot { zxid: Zxid, image: bytes::Bytes },
}

/// What the storage thread reports.
#[derive(Debug)]
pub enum StorageReport {
    /// Everything up to this zxid is durable.
    Persisted(Zxid),
    /// Storage failed: the node must stop.
    Failed(String),
}

/// Snapshot images to store, with the zxid each includes.
type Snapshots = Vec<(Zxid, bytes::Bytes)>;

/// Largest number of txns one fsync covers, as ZooKeeper's maxBatchSize.
const MAX_BATCH: usize = 1000;

/// Log entries removed per step after a snapshot, so purging never holds up
/// the fsync that waiting clients need.
const PURGE_STEP: i64 = 256;

/// The storage thread's state.
struct Worker<S> {
    storage: S,
    retain: usize,
    /// Log purge in progress: everything through this zxid may go.
    purge: Option<Zxid>,
}

/// Runs until the job channel closes or storage fails.
pub fn run<S: Store>(
    storage: S,
    retain: usize,
    jobs: Receiver<StorageJob>,
    reports: UnboundedSender<StorageReport>,
) {
    let mut worker = Worker {
        storage,
        retain,
        purge: None,
    };
    if let Err(e) = worker.serve(jobs, &reports) {
        // Nothing more is acknowledged. The store is not dropped: after an
        // I/O error sled's destructor flushes again and panics.
        let _ = reports.send(StorageReport::Failed(e.to_string()));
        std::mem::forget(worker);
    }
}

impl<S: Store> Worker<S> {
    /// Processes jobs until the channel closes (Ok) or storage fails.
    fn serve(
        &mut self,
        jobs: Receiver<StorageJob>,
        reports: &UnboundedSender<StorageReport>,
    ) -> Result<(), StorageError> {
        loop {
            // With a purge pending, wake up now and then to make progress on it.
            let first = if self.purge.is_some() {
                match jobs.recv_timeout(Duration::from_millis(5)) {
                    Ok(job) => Some(job),
                    Err(RecvTimeoutError::Timeout) => None,
                    Err(RecvTimeoutError::Disconnected) => return Ok(()),
                }
            } else {
                match jobs.recv() {
                    Ok(job) => Some(job),
                    Err(_) => return Ok(()),
                }
            };
            if let Some(first) = first {
                let mut batch = vec![first];
                while batch.len() < MAX_BATCH {
                    match jobs.try_recv() {
                        Ok(job) => batch.push(job),
                        Err(TryRecvError::Empty | TryRecvError::Disconnected) => break,
                    }
                }
                let (last, snapshots) = self.persist(batch)?;
                // Clients waiting on these txns hear before any snapshot is written.
                if let Some(zxid) = last {
                    if reports.send(StorageReport::Persisted(zxid)).is_err() {
                        return Ok(());
                    }
                }
                self.save_snapshots(snapshots)?;
            }
            self.purge_step()?;
        }
    }
    /// Appends the batch's txns and syncs them once; returns the last zxid and
    /// the snapshots the batch asked for.
    fn persist(
        &mut self,
        batch: Vec<StorageJob>,
    ) -> Result<(Option<Zxid>, Snapshots), StorageError> {
        let mut last = None;
        let mut snapshots = Vec::new();
        for job in batch {
            match job {
                StorageJob::Persist(txn) => {
                    self.storage.append(txn.zxid(), txn.to_bytes())?;
                    last = Some(txn.zxid());
                }
                StorageJob::Snapshot { zxid, image } => snapshots.push((zxid, image)),
            }
        }
        if last.is_some() {
            self.storage.sync()?;
        }
        Ok((last, snapshots))
    }

    /// Saves snapshots (every txn they include is already durable), then
    /// schedules the purge of what the oldest kept snapshot covers.
    fn save_snapshots(&mut self, snapshots: Snapshots) -> Result<(), StorageError> {
        for (zxid, image) in snapshots {
            self.storage.save_snapshot(zxid, image)?;
            if let Some(oldest) = self.storage.purge_snapshots(self.retain)? {
                self.purge = Some(oldest);
            }
            tracing::info!(%zxid, "snapshot saved");
        }
        Ok(())
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
