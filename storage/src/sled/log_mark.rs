//! The log's synced mark: how far the txn log reached at its last sync, kept
//! outside sled in `dataLogDir/version-2/log/zkd-synced`, so that a log cut
//! short by damage is found on open.
//!
//! Why: sled treats the first record that fails its CRC, anywhere in the part
//! of its log it replays, as the end of the log (a "tear"), and opens without
//! an error. A torn or corrupted record thus silently drops every later txn,
//! acknowledged or not, and a member would serve, vote and lead with a
//! shorter history. sled reports nothing about where it stopped, so zkd keeps
//! its own evidence: after each log sync it writes the highest synced zxid
//! here; on open, a log (with its purge mark) ending below that zxid has lost
//! synced, hence possibly acknowledged, txns, and the store refuses to open.
//! A tail past the mark was never synced, hence never acknowledged: sled
//! dropping it is the truncation of an unacknowledged torn tail.
//!
//! Cost: one 32-byte `pwrite` per group-commit sync, no fsync. The mark is
//! written only after the log's fsync returned, so whatever part of it
//! reaches the disk never exceeds the durable log: it can lag (after a power
//! cut, by the writeback delay), never lead. A kill keeps it exact (the page
//! cache survives). Only a cut of the log (TRUNC, SNAP install) lowers it,
//! durably and before the cut: both slots rewritten and fsynced.
//!
//! Format: two 32-byte slots (magic, sequence, zxid, FNV-1a of the first 24
//! bytes), written alternately; the valid slot with the higher sequence
//! wins, so a torn write of one slot leaves the other. An all-zero or absent
//! slot was never written.
//!
//! The same file format keeps the epochs' mark ([`EPOCHS_FILE`], in the
//! epochs' sled directory): both epochs packed as a zxid's two halves
//! (accepted, current), recorded durably after each epoch write, since sled
//! would drop a damaged epoch record just as silently and a member must never
//! forget an epoch it accepted.

use crate::error::{Result, StorageError};
use crate::snapshot::fnv1a_of;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use zkd_protocol::Zxid;

/// File name, inside the log's sled directory (wiping the log wipes it).
pub(super) const FILE: &str = "zkd-synced";
/// File name of the epochs' mark, inside the epochs' sled directory.
pub(super) const EPOCHS_FILE: &str = "zkd-epochs";
const MAGIC: &[u8; 8] = b"ZKDLOGS1";
const SLOT: usize = 32;

/// The mark file of one log.
#[derive(Debug)]
pub(super) struct LogMark {
    path: PathBuf,
    file: File,
    seq: u64,
    /// The zxid the mark holds (in the page cache at least).
    zxid: Option<Zxid>,
}

#[derive(Debug, PartialEq)]
enum Slot {
    Empty,
    Valid { seq: u64, zxid: Zxid },
    Damaged,
}

fn encode(seq: u64, zxid: Zxid) -> [u8; SLOT] {
    let mut slot = [0u8; SLOT];
    slot[..8].copy_from_slice(MAGIC);
    slot[8..16].copy_from_slice(&seq.to_be_bytes());
    slot[16..24].copy_from_slice(&(zxid.0 as u64).to_be_bytes());
    let sum = fnv1a_of(&slot[..24]);
    slot[24..].copy_from_slice(&sum.to_be_bytes());
    slot
}

fn decode(raw: &[u8]) -> Slot {
    if raw.iter().all(|b| *b == 0) {
        return Slot::Empty;
    }
    let u64_at = |i: usize| u64::from_be_bytes(raw[i..i + 8].try_into().unwrap());
    if raw.len() < SLOT || &raw[..8] != MAGIC || fnv1a_of(&raw[..24]) != u64_at(24) {
        return Slot::Damaged;
    }
    Slot::Valid {
        seq: u64_at(8),
        zxid: Zxid(u64_at(16) as i64),
    }
}

fn io_error(path: &Path, e: std::io::Error) -> StorageError {
    StorageError::Db(format!("{}: {e}", path.display()))
}

impl LogMark {
    /// Opens (creating, durably) the mark file in the log's directory and
    /// reads it. `Corrupt` if both slots are damaged.
    pub fn open(log_dir: &Path) -> Result<LogMark> {
        LogMark::open_file(log_dir, FILE)
    }

    /// Opens (creating, durably) the mark file `name` in `dir`.
    pub fn open_file(log_dir: &Path, name: &str) -> Result<LogMark> {
        let path = log_dir.join(name);
        let existed = path.exists();
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| io_error(&path, e))?;
        if !existed {
            file.sync_all().map_err(|e| io_error(&path, e))?;
            File::open(log_dir)
                .and_then(|d| d.sync_all())
                .map_err(|e| io_error(log_dir, e))?;
        }
        let mut raw = [0u8; 2 * SLOT];
        let len = file.metadata().map_err(|e| io_error(&path, e))?.len();
        let n = (len as usize).min(raw.len());
        file.read_exact_at(&mut raw[..n], 0)
            .map_err(|e| io_error(&path, e))?;
        let slots = [decode(&raw[..SLOT]), decode(&raw[SLOT..])];
        let newest = slots
            .iter()
            .filter_map(|s| match s {
                Slot::Valid { seq, zxid } => Some((*seq, *zxid)),
                _ => None,
            })
            .max();
        if newest.is_none() && slots.iter().all(|s| *s == Slot::Damaged) {
            return Err(StorageError::Corrupt(format!(
                "{}: both slots of this mark file are damaged",
                path.display()
            )));
        }
        if slots.contains(&Slot::Damaged) {
            tracing::warn!(file = %path.display(), "one slot of a mark file is damaged (a torn write?); using the other");
        }
        Ok(LogMark {
            path,
            file,
            seq: newest.map_or(0, |(seq, _)| seq),
            zxid: newest.map(|(_, zxid)| zxid),
        })
    }

    /// The highest zxid the log held at a sync, if recorded.
    pub fn zxid(&self) -> Option<Zxid> {
        self.zxid
    }

    /// Records that the log is synced through `zxid`. Call only after the
    /// log's fsync returned. Not durable by itself (no fsync): it may lag.
    pub fn record(&mut self, zxid: Zxid) -> Result<()> {
        if self.zxid.is_some_and(|z| z >= zxid) {
            return Ok(());
        }
        self.seq += 1;
        let at = (self.seq % 2) * SLOT as u64;
        self.file
            .write_all_at(&encode(self.seq, zxid), at)
            .map_err(|e| io_error(&self.path, e))?;
        self.zxid = Some(zxid);
        Ok(())
    }

    /// [`LogMark::record`], then fsync: durable on return.
    pub fn record_durably(&mut self, zxid: Zxid) -> Result<()> {
        self.record(zxid)?;
        self.file.sync_data().map_err(|e| io_error(&self.path, e))
    }

    /// Lowers the mark to `zxid` (if above it) in both slots, durably: call
    /// before cutting the log after `zxid`, so no older, higher mark can
    /// outlive the cut.
    pub fn lower(&mut self, zxid: Zxid) -> Result<()> {
        if self.zxid.is_none_or(|z| z <= zxid) {
            return Ok(());
        }
        self.seq += 1;
        let slot = encode(self.seq, zxid);
        let mut both = [0u8; 2 * SLOT];
        both[..SLOT].copy_from_slice(&slot);
        both[SLOT..].copy_from_slice(&slot);
        self.file
            .write_all_at(&both, 0)
            .and_then(|()| self.file.sync_data())
            .map_err(|e| io_error(&self.path, e))?;
        self.zxid = Some(zxid);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_newest_valid_slot_wins_and_a_torn_one_is_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let mut m = LogMark::open(dir.path()).unwrap();
        assert_eq!(m.zxid(), None);
        m.record(Zxid(5)).unwrap();
        m.record(Zxid(9)).unwrap();
        m.record(Zxid(7)).unwrap(); // never goes back without `lower`
        assert_eq!(LogMark::open(dir.path()).unwrap().zxid(), Some(Zxid(9)));
        // Tear the newest slot (seq 2, slot 0): the older one is used.
        let f = OpenOptions::new()
            .write(true)
            .open(dir.path().join(FILE))
            .unwrap();
        f.write_all_at(b"\x01", 20).unwrap();
        assert_eq!(LogMark::open(dir.path()).unwrap().zxid(), Some(Zxid(5)));
        // Both damaged: refused.
        f.write_all_at(b"\x01", SLOT as u64 + 20).unwrap();
        assert!(matches!(
            LogMark::open(dir.path()),
            Err(StorageError::Corrupt(_))
        ));
    }

    #[test]
    fn lowering_rewrites_both_slots() {
        let dir = tempfile::tempdir().unwrap();
        let mut m = LogMark::open(dir.path()).unwrap();
        m.record(Zxid(5)).unwrap();
        m.record(Zxid(9)).unwrap();
        m.lower(Zxid(3)).unwrap();
        // A later record lost (torn) must not bring back 9.
        m.record(Zxid(4)).unwrap();
        let f = OpenOptions::new()
            .write(true)
            .open(dir.path().join(FILE))
            .unwrap();
        let torn = (m.seq % 2) * SLOT as u64;
        f.write_all_at(b"\x01", torn + 20).unwrap();
        assert_eq!(LogMark::open(dir.path()).unwrap().zxid(), Some(Zxid(3)));
    }
}
