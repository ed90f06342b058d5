//! The storage worker: a dedicated thread that appends txns and fsyncs them
//! with group commit (one sync covers every txn queued while the previous one
//! ran), then reports the highest durable zxid to the node loop.

use std::sync::mpsc::{Receiver, TryRecvError};
use tokio::sync::mpsc::UnboundedSender;
use zkd_protocol::Zxid;
use zkd_storage::{SledStorage, SnapshotStore, StorageError, Txn, TxnLog};

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

/// Largest number of txns one fsync covers, as ZooKeeper's maxBatchSize.
const MAX_BATCH: usize = 1000;

/// Runs until the job channel closes.
pub fn run(
    mut storage: SledStorage,
    retain: usize,
    jobs: Receiver<StorageJob>,
    reports: UnboundedSender<StorageReport>,
) {
    while let Ok(first) = jobs.recv() {
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match jobs.try_recv() {
                Ok(job) => batch.push(job),
                Err(TryRecvError::Empty | TryRecvError::Disconnected) => break,
            }
        }
        match process(&mut storage, retain, batch) {
            Ok(Some(zxid)) => {
                if reports.send(StorageReport::Persisted(zxid)).is_err() {
                    return;
                }
            }
            Ok(None) => {}
            Err(e) => {
                let _ = reports.send(StorageReport::Failed(e.to_string()));
                return;
            }
        }
    }
}

fn process(
    storage: &mut SledStorage,
    retain: usize,
    batch: Vec<StorageJob>,
) -> Result<Option<Zxid>, StorageError> {
    let mut last = None;
    let mut snapshots = Vec::new();
    for job in batch {
        match job {
            StorageJob::Persist(txn) => {
                storage.append(txn.zxid(), txn.to_bytes())?;
                last = Some(txn.zxid());
            }
            StorageJob::Snapshot { zxid, image } => snapshots.push((zxid, image)),
        }
    }
    if last.is_some() {
        storage.sync()?;
    }
    // Snapshots come after the sync: every txn they include is then durable.
    for (zxid, image) in snapshots {
        storage.save_snapshot(zxid, image)?;
        if let Some(oldest) = storage.purge_snapshots(retain)? {
            storage.purge_through(oldest)?;
        }
        tracing::info!(%zxid, "snapshot saved");
    }
    Ok(last)
}
