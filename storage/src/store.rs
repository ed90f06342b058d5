//! `Store`: everything one member persists, behind one cloneable handle.

use crate::epoch_store::EpochStore;
use crate::snapshot::SnapshotStore;
use crate::txn_log::TxnLog;

/// The txn log, snapshots and epochs of one member. The runtime is handed a
/// `Store` and clones it for its storage thread, so the same node loop runs
/// on sled in production and on [`crate::MemStorage`] in tests.
pub trait Store: TxnLog + SnapshotStore + EpochStore + Clone + Send + 'static {
    /// Bytes on disk of the data store and of the log (`dirs`, `conf`).
    fn disk_usage(&self) -> (u64, u64);
}

impl Store for crate::SledStorage {
    fn disk_usage(&self) -> (u64, u64) {
        self.sizes()
    }
}

impl Store for crate::MemStorage {
    fn disk_usage(&self) -> (u64, u64) {
        (0, 0)
    }
}
