//! ZooKeeper's txns up to a zxid, read back from its logs for the history
//! an import keeps before its snapshot (see `disk/imported_history.rs`).

use super::{files, txn_log, FileError};
use crate::Txn;
use bytes::Bytes;
use std::collections::VecDeque;
use std::path::Path;
use zkd_protocol::Zxid;

/// The txns (encoded as zkd logs them) of `zxid`'s epoch that ZooKeeper's
/// logs in `log_dir` hold up to and including `zxid`, oldest first: the
/// newest `max` of them at most (and `max_bytes` of their records), without
/// a gap, ending at `zxid`. Empty if the logs do not reach `zxid` so, or
/// cannot be read whole.
///
/// Within one epoch a member's log is a prefix of that epoch's leader's, so
/// none of these is a txn the ensemble dropped. Across epochs one can be: a
/// proposal never committed, left in an older file when a SNAP replaced the
/// history after it. So the txns stop at the epoch's start.
pub fn logged_through(
    log_dir: &Path,
    zxid: Zxid,
    max: usize,
    max_bytes: usize,
) -> Vec<(Zxid, Bytes)> {
    let Ok(logs) = files(log_dir, "log") else {
        return Vec::new();
    };
    // The files that can hold the newest `max` txns of the epoch up to `zxid`.
    let mut reading = Vec::new();
    for log in logs.iter().rev().filter(|l| l.zxid <= zxid) {
        reading.push(log);
        let reaches = log.zxid.epoch() < zxid.epoch()
            || (zxid.counter() - log.zxid.counter()) as usize >= max;
        if reaches {
            break;
        }
    }
    let mut kept = Prior::new(max, max_bytes);
    for log in reading.iter().rev() {
        let read = txn_log::read(&log.path, |logged| {
            kept.push(&logged.txn, zxid);
            Ok::<_, FileError>(())
        });
        if let Err(e) = read {
            tracing::warn!(error = %e, "ZooKeeper's older txns are not kept as history");
            return Vec::new();
        }
    }
    kept.ending_at(zxid)
}

/// The newest txns of one epoch read so far, without a gap, as zkd logs them.
struct Prior {
    txns: VecDeque<(Zxid, Bytes)>,
    bytes: usize,
    max: usize,
    max_bytes: usize,
}

impl Prior {
    fn new(max: usize, max_bytes: usize) -> Prior {
        let txns = VecDeque::new();
        Prior {
            txns,
            bytes: 0,
            max,
            max_bytes,
        }
    }

    /// Keeps `txn` if it is of `through`'s epoch and not past it; a txn
    /// that does not follow the last kept one starts them afresh.
    fn push(&mut self, txn: &Txn, through: Zxid) {
        let zxid = txn.zxid();
        if zxid > through || zxid.epoch() != through.epoch() {
            return;
        }
        if self
            .txns
            .back()
            .is_some_and(|(last, _)| !zxid.follows(*last))
        {
            self.txns.clear();
            self.bytes = 0;
        }
        let bytes = txn.to_bytes();
        self.bytes += bytes.len();
        self.txns.push_back((zxid, bytes));
        while self.txns.len() > self.max || self.bytes > self.max_bytes {
            match self.txns.pop_front() {
                Some((_, old)) => self.bytes -= old.len(),
                None => break,
            }
        }
    }

    fn ending_at(self, zxid: Zxid) -> Vec<(Zxid, Bytes)> {
        match self.txns.back() {
            Some((last, _)) if *last == zxid => self.txns.into(),
            _ => Vec::new(),
        }
    }
}
