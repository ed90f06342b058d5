//! ZooKeeper's metrics that the storage threads keep: `fsynctime`,
//! `sync_processor_batch_size` (txns made durable by one fsync),
//! `snapshottime`, and the fsyncs over `fsync.warningthresholdms` that
//! `srvr` counts. The threads write, the node loop reads when asked.

use crate::core::metrics::Summary;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// What the storage threads measured.
#[derive(Debug, Default)]
pub struct StorageFigures {
    pub fsync_ms: Summary,
    pub sync_batch: Summary,
    pub snapshot_ms: Summary,
    pub slow_fsyncs: u64,
}

/// The storage threads' figures, shared with the node loop.
#[derive(Clone, Debug)]
pub struct StorageMetrics {
    figures: Arc<Mutex<StorageFigures>>,
    /// The origin of the summaries' clock.
    started: Instant,
}

impl Default for StorageMetrics {
    fn default() -> Self {
        StorageMetrics {
            figures: Arc::default(),
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

    /// Reads the figures.
    pub fn read<R>(&self, f: impl FnOnce(&StorageFigures) -> R) -> R {
        f(&self.lock())
    }
}
