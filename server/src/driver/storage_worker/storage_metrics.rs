//! ZooKeeper's metrics that the storage threads keep: `fsynctime`,
//! `sync_processor_batch_size` (txns made durable by one fsync),
//! `snapshottime`, the job queue's figures (`sync_processor_queue_*`,
//! `sync_process_time`), and the fsyncs over `fsync.warningthresholdms`
//! that `srvr` counts. The threads write, the node loop reads when asked.

use super::job_queue::QueueCounts;
use crate::core::metrics::Summary;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// What the storage threads measured.
#[derive(Debug, Default)]
pub struct StorageFigures {
    pub fsync_ms: Summary,
    pub sync_batch: Summary,
    pub snapshot_ms: Summary,
    /// Jobs waiting as each was taken (`sync_processor_queue_size`).
    pub queue_size: Summary,
    /// How long each job waited (`sync_processor_queue_time_ms`).
    pub queue_ms: Summary,
    /// How long each job took (`sync_process_time`).
    pub process_ms: Summary,
    /// From an append's queueing to its fsync's end
    /// (`sync_processor_queue_and_flush_time_ms`).
    pub queue_and_flush_ms: Summary,
    pub slow_fsyncs: u64,
}

/// One batch's observations, kept by the thread and added to the shared
/// figures under one lock.
#[derive(Debug, Default)]
pub(super) struct BatchFigures {
    queue_size: Vec<u64>,
    queue_ms: Vec<u64>,
    process_ms: Vec<u64>,
    queue_and_flush_ms: Vec<u64>,
}

impl BatchFigures {
    /// A job was taken with `waiting` in the queue after `waited`, and took `took`.
    pub fn job(&mut self, waiting: usize, waited: Duration, took: Duration) {
        self.queue_size.push(waiting as u64);
        self.queue_ms.push(waited.as_millis() as u64);
        self.process_ms.push(took.as_millis() as u64);
    }

    /// An append queued `since` ago is durable.
    pub fn flushed(&mut self, since: Duration) {
        self.queue_and_flush_ms.push(since.as_millis() as u64);
    }
}

/// The storage threads' figures, shared with the node loop.
#[derive(Clone, Debug)]
pub struct StorageMetrics {
    figures: Arc<Mutex<StorageFigures>>,
    /// The job queue's counts, shared with its ends.
    queue: Arc<QueueCounts>,
    /// The origin of the summaries' clock.
    started: Instant,
}

impl Default for StorageMetrics {
    fn default() -> Self {
        StorageMetrics {
            figures: Arc::default(),
            queue: Arc::default(),
            started: Instant::now(),
        }
    }
}

impl StorageMetrics {
    fn lock(&self) -> MutexGuard<'_, StorageFigures> {
        self.figures.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    /// One fsync that took `took` made `batch` txns durable; `slow` if it
    /// passed the warning threshold.
    pub(super) fn synced(&self, took: Duration, batch: u64, slow: bool) {
        let now = self.now_ms();
        let mut figures = self.lock();
        figures.fsync_ms.observe(took.as_millis() as u64, now);
        figures.sync_batch.observe(batch, now);
        figures.slow_fsyncs += u64::from(slow);
    }

    /// A local snapshot took `took` from its first piece to its seal.
    pub(super) fn snapshot_saved(&self, took: Duration) {
        let now = self.now_ms();
        self.lock()
            .snapshot_ms
            .observe(took.as_millis() as u64, now);
    }

    /// Adds a batch's observations, and empties it.
    pub(super) fn batch(&self, batch: &mut BatchFigures) {
        if batch.queue_size.is_empty() && batch.queue_and_flush_ms.is_empty() {
            return;
        }
        let now = self.now_ms();
        let mut figures = self.lock();
        let figures = &mut *figures;
        for (summary, values) in [
            (&mut figures.queue_size, &mut batch.queue_size),
            (&mut figures.queue_ms, &mut batch.queue_ms),
            (&mut figures.process_ms, &mut batch.process_ms),
            (
                &mut figures.queue_and_flush_ms,
                &mut batch.queue_and_flush_ms,
            ),
        ] {
            values.drain(..).for_each(|v| summary.observe(v, now));
        }
    }

    /// The job queue's counts, for its ends.
    pub fn queue(&self) -> Arc<QueueCounts> {
        self.queue.clone()
    }

    /// Jobs queued since start (`sync_processor_request_queued`).
    pub fn queued(&self) -> u64 {
        self.queue.queued()
    }

    /// Reads the figures.
    pub fn read<R>(&self, f: impl FnOnce(&StorageFigures) -> R) -> R {
        f(&self.lock())
    }
}
