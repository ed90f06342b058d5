//! The write-ahead log of txns, keyed by zxid.

use crate::error::Result;
use bytes::Bytes;
use zkd_protocol::Zxid;

/// An ordered, durable log of encoded txns.
pub trait TxnLog {
    /// Appends one txn. zxids must strictly increase. **Not durable** until
    /// [`TxnLog::sync`] returns; a crash before that may lose it.
    fn append(&mut self, zxid: Zxid, txn: Bytes) -> Result<()>;

    /// Makes every txn appended so far durable (fsync). One call covers all
    /// appends before it: this is what group commit batches.
    fn sync(&mut self) -> Result<()>;

    /// The lowest zxid still in the log, if any.
    fn first_zxid(&self) -> Result<Option<Zxid>>;

    /// The highest appended zxid, if any (durable or not).
    fn last_zxid(&self) -> Result<Option<Zxid>>;

    /// Every txn with zxid strictly greater than `after`, in zxid order.
    fn read_after(&self, after: Zxid) -> Result<Vec<(Zxid, Bytes)>>;

    /// Removes every txn with zxid greater than `zxid`. Durable on return.
    fn truncate_after(&mut self, zxid: Zxid) -> Result<()>;

    /// Removes txns with zxid at or below `zxid` (covered by a snapshot).
    /// Durability of the removal does not matter: replay skips them anyway.
    fn purge_through(&mut self, zxid: Zxid) -> Result<()>;
}
