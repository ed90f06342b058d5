//! zkd-storage: the replicated state and its durability. No networking.
//!
//! ```text
//!   Txn ──apply──▶ DataTree ──▶ TxnOutcome (reply data) + WatchTriggers
//!   Txn ──encode──▶ TxnLog (append, sync)      DataTree ──serialize──▶ SnapshotStore
//! ```
//!
//! `DataTree` is pure and in memory. The three storage traits state their
//! durability contracts; `SledStorage` implements them on sled 0.34 and
//! `MemStorage` in memory with a crash model (unsynced writes are lost).

pub mod data_tree;
pub mod epoch_store;
pub mod error;
pub mod mem;
pub mod path;
pub mod sled;
pub mod snapshot;
pub mod store;
pub mod txn;
pub mod txn_log;

pub use data_tree::{DataNode, DataTree, TxnOutcome, WatchTrigger};
pub use epoch_store::EpochStore;
pub use error::StorageError;
pub use mem::MemStorage;
pub use sled::SledStorage;
pub use snapshot::SnapshotStore;
pub use store::Store;
pub use txn::{Txn, TxnBody};
pub use txn_log::TxnLog;

#[cfg(test)]
pub mod conformance;
