//! ZooKeeper's processor chain as pure stages:
//!
//! ```text
//! request ─▶ prep (validate vs tree + pending, build txn) ─▶ Persist command
//! Persisted(z) ─▶ apply (DataTree) ─▶ watch triggers ─▶ reply (outcome)
//! read ─▶ waits behind its connection's writes ─▶ read::execute
//! ```

pub mod outcome;
pub mod pending;
pub mod prep;
pub mod read;
pub mod reconfig;
pub mod txn_changes;
