//! The write-ahead log of txns, keyed by zxid.
//!
//! Reads see every append, synced or not; only what [`TxnLog::sync`] (or a
//! method that says "durable on return") covered survives a crash. Reads are
//! bounded: the log is read in pages ([`TxnLog::read_range`]) or streamed
//! ([`TxnLog::txns_after`]), never returned whole, so a DIFF or a recovery of
//! a long log holds at most one page in memory.

use crate::error::{Result, StorageError};
use bytes::Bytes;
use std::collections::VecDeque;
use zkd_protocol::Zxid;

/// Txns per page that [`TxnLog::txns_after`] reads when the caller has no
/// better figure.
pub const DEFAULT_PAGE: usize = 1024;

/// An ordered, durable log of encoded txns.
///
/// Besides the txns, the log remembers its *purge mark*
/// ([`TxnLog::purged_through`]): the highest zxid whose txn may have been
/// removed because a snapshot holds it. The log's history is complete only
/// above that mark.
pub trait TxnLog {
    /// Appends one txn. zxids must strictly increase, and exceed the purge
    /// mark (else `Misuse`). **Not durable** until [`TxnLog::sync`] returns;
    /// a crash before that may lose it. Cost: one write, no I/O wait.
    fn append(&mut self, zxid: Zxid, txn: Bytes) -> Result<()>;

    /// Makes every txn appended so far durable (fsync). One call covers all
    /// appends before it: this is what group commit batches.
    fn sync(&mut self) -> Result<()>;

    /// Bookkeeping that may wait until the acknowledgements of the last
    /// [`TxnLog::sync`] went out: call after reporting what it made durable.
    /// It never changes what is durable in the log itself. (The sled store
    /// makes its synced mark durable here, now and then.) Default: nothing.
    fn settle(&mut self) -> Result<()> {
        Ok(())
    }

    /// The lowest zxid still in the log, if any (durable or not).
    fn first_zxid(&self) -> Result<Option<Zxid>>;

    /// The highest appended zxid, if any (durable or not).
    fn last_zxid(&self) -> Result<Option<Zxid>>;

    /// The purge mark: every txn at or below it may be gone from the log
    /// (held by a snapshot instead); `None` if nothing was ever purged. Set by
    /// [`TxnLog::purge_through`] (with the same durability as the purge) and by
    /// [`TxnLog::reset`] (durable). Cost: one point read.
    fn purged_through(&self) -> Result<Option<Zxid>>;

    /// One page of the log: up to `max_txns` txns with zxid strictly greater
    /// than `after`, in zxid order (synced or not). Fewer than `max_txns`
    /// (possibly none) means the end of the log was reached. Callers loop,
    /// passing the last zxid of one page as `after` of the next, or use
    /// [`TxnLog::txns_after`]. Cost: one range scan of `max_txns` entries;
    /// memory is bounded by the page. `max_txns == 0` returns an empty page.
    fn read_range(&self, after: Zxid, max_txns: usize) -> Result<Vec<(Zxid, Bytes)>>;

    /// The highest zxid in the log at or below `zxid` (synced or not), if
    /// any: the target a follower's log can be cut back to for a TRUNC. A txn
    /// at or below the purge mark is not found even if it was committed: it
    /// is no longer in the log. Cost: one reverse seek.
    fn last_zxid_at_or_before(&self, zxid: Zxid) -> Result<Option<Zxid>>;

    /// The zxid of the txn that has exactly `n` txns after it in the log
    /// (synced or not), or `None` if the log holds `n` txns or fewer: where
    /// to start reading the newest `n`. Default: reads the whole log.
    fn zxid_before_last(&self, n: usize) -> Result<Option<Zxid>>
    where
        Self: Sized,
    {
        let mut newest = VecDeque::with_capacity(n.saturating_add(1).min(1 << 16));
        for item in self.txns_after(Zxid::ZERO, 0) {
            newest.push_back(item?.0);
            if newest.len() > n + 1 {
                newest.pop_front();
            }
        }
        Ok((newest.len() == n + 1).then(|| newest[0]))
    }

    /// Whether the log holds a txn with exactly this zxid (synced or not).
    /// Cost: one seek.
    fn contains(&self, zxid: Zxid) -> Result<bool> {
        Ok(self.last_zxid_at_or_before(zxid)? == Some(zxid))
    }

    /// The highest zxid of `epoch` in the log (synced or not), if it holds
    /// any txn of that epoch. Cost: one reverse seek.
    fn last_zxid_in_epoch(&self, epoch: u32) -> Result<Option<Zxid>> {
        // No zxid carries an epoch past MAX_EPOCH (it would be negative).
        if epoch > zkd_protocol::MAX_EPOCH {
            return Ok(None);
        }
        Ok(self
            .last_zxid_at_or_before(Zxid::new(epoch, u32::MAX))?
            .filter(|z| z.epoch() == epoch))
    }

    /// Removes every txn with zxid greater than `zxid`, synced or not.
    /// **Durable on return.** Refused with `Misuse`, changing nothing, if
    /// `zxid` is below the purge mark: txns between the two are gone from
    /// the log and live only in snapshots past the cut, which a TRUNC
    /// deletes, so history through `zxid` could no longer be rebuilt. The
    /// caller must sync such a member with a SNAP instead.
    fn truncate_after(&mut self, zxid: Zxid) -> Result<()>;

    /// Removes every txn and sets the purge mark to `through`: the history
    /// through `through` now lives in a snapshot (a follower installing the
    /// leader's SNAP). **Durable on return.** Later appends must exceed `through`.
    fn reset(&mut self, through: Zxid) -> Result<()>;

    /// Removes txns with zxid at or below `zxid` (covered by a snapshot) and
    /// raises the purge mark to `zxid`. Durability of the removal does not
    /// matter: replay skips them anyway. Only synced txns need be removed.
    fn purge_through(&mut self, zxid: Zxid) -> Result<()>;

    /// Streams every txn with zxid strictly greater than `after`, in zxid
    /// order, reading `page` txns at a time (0 means [`DEFAULT_PAGE`]). The
    /// iterator sees appends and truncations made between pages.
    fn txns_after(&self, after: Zxid, page: usize) -> TxnsAfter<'_, Self>
    where
        Self: Sized,
    {
        TxnsAfter {
            log: self,
            after,
            page: if page == 0 { DEFAULT_PAGE } else { page },
            buffer: VecDeque::new(),
            done: false,
        }
    }
}

/// The streaming reader returned by [`TxnLog::txns_after`]. Yields
/// `Err` once, then ends, if a page read fails.
#[derive(Debug)]
pub struct TxnsAfter<'a, L> {
    log: &'a L,
    after: Zxid,
    page: usize,
    buffer: VecDeque<(Zxid, Bytes)>,
    done: bool,
}

impl<L: TxnLog> Iterator for TxnsAfter<'_, L> {
    type Item = Result<(Zxid, Bytes)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.buffer.is_empty() && !self.done {
            match self.log.read_range(self.after, self.page) {
                Ok(page) => {
                    self.done = page.len() < self.page;
                    self.buffer = page.into();
                }
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
            }
        }
        let (zxid, txn) = self.buffer.pop_front()?;
        self.after = zxid;
        Some(Ok((zxid, txn)))
    }
}

/// The `Misuse` error of an append that does not go past `last`.
pub(crate) fn out_of_order(zxid: Zxid, last: Zxid) -> StorageError {
    StorageError::Misuse(format!("append {zxid} after {last}"))
}

/// The `Misuse` error of a truncation below the purge mark.
pub(crate) fn cut_below_purge(zxid: Zxid, purged: Zxid) -> StorageError {
    StorageError::Misuse(format!(
        "truncate after {zxid}: txns through {purged} were purged from the log"
    ))
}
