//! zkd-storage: the replicated state and its durability. No networking.
//!
//! ```text
//!   Txn ──apply──▶ DataTree ──▶ TxnOutcome (reply data) + WatchTriggers
//!   Txn ──encode──▶ TxnLog (append, sync)      DataTree ──serialize──▶ SnapshotStore
//! ```
//!
//! `DataTree` is pure and in memory. The three storage traits state their
//! durability contracts; `DiskStorage` implements them on sled 0.34 and
//! `MemStorage` in memory with a crash model (unsynced writes are lost).
//! `conformance` (tests) checks every contract on both.
//!
//! What Zab's synchronisation needs of them: a bounded, streaming read of the
//! log for DIFF ([`TxnLog::read_range`], [`TxnLog::txns_after`]); the
//! queries behind the DIFF/TRUNC/SNAP choice ([`TxnLog::contains`],
//! [`TxnLog::last_zxid_in_epoch`], [`TxnLog::last_zxid_at_or_before`],
//! [`TxnLog::purged_through`]); TRUNC ([`TxnLog::truncate_after`] and
//! [`SnapshotStore::delete_snapshots_after`]); receiving and installing a SNAP
//! a chunk at a time ([`snapshot::SnapshotWriter`] into the staging slot,
//! [`store::install_snapshot`]), and loading a tree the same way
//! ([`store::load_snapshot`]); the epochs
//! ([`EpochStore`]). No snapshot image is ever needed whole in memory.

pub mod data_tree;
pub mod disk;
pub mod divergence_mark;
pub mod epoch_store;
pub mod error;
pub mod mem;
pub mod path;
pub mod snapshot;
pub mod store;
pub mod txn;
pub mod txn_log;
pub mod zookeeper;

pub use data_tree::{DataNode, DataTree, TxnOutcome, WatchTrigger};
pub use disk::DiskStorage;
pub use divergence_mark::DivergenceMark;
pub use epoch_store::EpochStore;
pub use error::StorageError;
pub use mem::MemStorage;
pub use snapshot::SnapshotStore;
pub use store::Store;
pub use txn::{Txn, TxnBody};
pub use txn_log::{TxnLog, TxnsAfter};

#[cfg(test)]
pub mod conformance;
