//! The log's synced mark: how far the txn log reached at its last sync, kept
//! outside sled in `dataLogDir/zkd/txnlog/zkd-synced`, so that a log cut
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
//! Cost: one 32-byte `pwrite` per group-commit sync, and at most every
//! [`SETTLE_EVERY`] one fsync of this file, made by [`LogMark::settle`] after
//! the sync's acknowledgements went out. The mark is written only after the
//! log's fsync returned, so whatever part of it reaches the disk never
//! exceeds the durable log: it can lag (after a power cut, by up to the
//! settle interval), never lead. A kill keeps it exact (the page cache
//! survives). Only a cut of the log (TRUNC, SNAP install) lowers it, durably
//! and before the cut: both slots rewritten and fsynced.
//!
//! Format: two 32-byte slots (magic, sequence, zxid, FNV-1a of the first 24
//! bytes); the valid slot with the higher sequence wins. An all-zero or
//! absent slot was never written. Writes go to one slot only until an fsync
//! has made it durable; only then do they move to the other. So at most one
//! slot is ever unsynced, and a power cut that tears it leaves the other,
//! durable one: a torn mark lags, it is never lost. (Writing both slots in
//! turn with no fsync let one cut tear both, and the member refused to
//! start over a write that was never acknowledged.)
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
use std::time::{Duration, Instant};
use zkd_protocol::Zxid;

/// File name, inside the log's sled directory (wiping the log wipes it).
pub(super) const FILE: &str = "zkd-synced";
/// File name of the epochs' mark, inside the epochs' sled directory.
pub(super) const EPOCHS_FILE: &str = "zkd-epochs";
const MAGIC: &[u8; 8] = b"ZKDLOGS1";
const SLOT: usize = 32;
/// The longest [`LogMark::settle`] leaves the written slot unsynced: at
/// most ten extra small fsyncs a second, off the acknowledgement path.
pub(super) const SETTLE_EVERY: Duration = Duration::from_millis(100);

/// The mark file of one log.
#[derive(Debug)]
pub(super) struct LogMark {
    path: PathBuf,
    file: File,
    seq: u64,
    /// The zxid the mark holds (in the page cache at least).
    zxid: Option<Zxid>,
    /// The slot writes go to; the other one is durable (or never written).
    target: usize,
    /// Whether `target` was written since the file's last fsync.
    dirty: bool,
    /// When the file was last fsynced.
    synced_at: Instant,
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
        // (sequence, zxid, slot index) of the newest valid slot.
        let newest = (0..2)
            .filter_map(|i| match slots[i] {
                Slot::Valid { seq, zxid } => Some((seq, zxid, i)),
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
        // After a kill the newest slot may sit in the page cache only: make
        // it durable before writing the other one.
        file.sync_data().map_err(|e| io_error(&path, e))?;
        Ok(LogMark {
            path,
            file,
            seq: newest.map_or(0, |(seq, _, _)| seq),
            zxid: newest.map(|(_, zxid, _)| zxid),
            target: newest.map_or(0, |(_, _, i)| 1 - i),
            dirty: false,
            synced_at: Instant::now(),
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
        self.write(zxid)
    }

    /// Writes `zxid` with the next sequence into the target slot.
    fn write(&mut self, zxid: Zxid) -> Result<()> {
        self.seq += 1;
        let at = (self.target * SLOT) as u64;
        self.file
            .write_all_at(&encode(self.seq, zxid), at)
            .map_err(|e| io_error(&self.path, e))?;
        self.zxid = Some(zxid);
        self.dirty = true;
        Ok(())
    }

    /// [`LogMark::record`], then fsync: durable on return.
    pub fn record_durably(&mut self, zxid: Zxid) -> Result<()> {
        self.record(zxid)?;
        self.sync()
    }

    /// Makes the written slot durable if it has waited [`SETTLE_EVERY`]
    /// since the last fsync, so the next writes go to the other slot. Call
    /// off the acknowledgement path: its fsync delays nobody's ack.
    pub fn settle(&mut self, now: Instant) -> Result<()> {
        if self.dirty && now.saturating_duration_since(self.synced_at) >= SETTLE_EVERY {
            self.sync()?;
        }
        Ok(())
    }

    /// fsync; the written slot is now the durable one, and writes move to
    /// the other.
    fn sync(&mut self) -> Result<()> {
        self.file.sync_data().map_err(|e| io_error(&self.path, e))?;
        if self.dirty {
            self.target = 1 - self.target;
            self.dirty = false;
        }
        self.synced_at = Instant::now();
        Ok(())
    }

    /// Lowers the mark to `zxid` (if above it) in both slots, durably: call
    /// before cutting the log after `zxid`, so no older, higher mark can
    /// outlive the cut.
    pub fn lower(&mut self, zxid: Zxid) -> Result<()> {
        if self.zxid.is_none_or(|z| z <= zxid) {
            return Ok(());
        }
        // One slot at a time, each made durable before the next is written,
        // so a cut part-way leaves a valid slot: the old mark or the new one.
        for _ in 0..2 {
            self.write(zxid)?;
            self.sync()?;
        }
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
        m.record_durably(Zxid(9)).unwrap();
        m.record(Zxid(7)).unwrap(); // never goes back without `lower`
        assert_eq!(LogMark::open(dir.path()).unwrap().zxid(), Some(Zxid(9)));
        m.record(Zxid(12)).unwrap(); // seq 3, in the other slot (1)
        assert_eq!(LogMark::open(dir.path()).unwrap().zxid(), Some(Zxid(12)));
        // Tear the newest slot: the older one is used.
        let f = OpenOptions::new()
            .write(true)
            .open(dir.path().join(FILE))
            .unwrap();
        f.write_all_at(b"\x01", SLOT as u64 + 20).unwrap();
        assert_eq!(LogMark::open(dir.path()).unwrap().zxid(), Some(Zxid(9)));
        // Both damaged: refused.
        f.write_all_at(b"\x01", 20).unwrap();
        assert!(matches!(
            LogMark::open(dir.path()),
            Err(StorageError::Corrupt(_))
        ));
    }

    fn slots_on_disk(dir: &Path) -> [Vec<u8>; 2] {
        let raw = std::fs::read(dir.join(FILE)).unwrap();
        let slot = |i: usize| {
            raw.get(i * SLOT..(i + 1) * SLOT)
                .unwrap_or_default()
                .to_vec()
        };
        [slot(0), slot(1)]
    }

    /// A power cut can tear only what was written since the last fsync:
    /// that must never be both slots, or one cut loses the mark.
    #[test]
    fn only_one_slot_is_written_between_fsyncs() {
        let dir = tempfile::tempdir().unwrap();
        let mut m = LogMark::open(dir.path()).unwrap();
        for z in 1..=5 {
            m.record(Zxid(z)).unwrap();
        }
        let [first, second] = slots_on_disk(dir.path());
        assert!(second.is_empty(), "the second slot was written unsynced");
        // Not yet due: the writes stay on the first slot.
        m.settle(m.synced_at).unwrap();
        m.record(Zxid(6)).unwrap();
        assert_eq!(slots_on_disk(dir.path())[1], second);
        // Due: fsynced, and the writes move to the other slot.
        m.settle(m.synced_at + SETTLE_EVERY).unwrap();
        let durable = slots_on_disk(dir.path())[0].clone();
        assert_ne!(durable, first);
        for z in 7..=9 {
            m.record(Zxid(z)).unwrap();
        }
        assert_eq!(slots_on_disk(dir.path())[0], durable);
        // Tear the written slot: the durable one, a little behind, remains.
        let f = OpenOptions::new()
            .write(true)
            .open(dir.path().join(FILE))
            .unwrap();
        f.write_all_at(b"\x01", SLOT as u64 + 20).unwrap();
        let reopened = LogMark::open(dir.path()).unwrap();
        assert_eq!(reopened.zxid(), Some(Zxid(6)));
        // And a reopened mark writes the damaged slot, not the durable one.
        assert_eq!(reopened.target, 1);
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
        let torn = (m.target * SLOT) as u64;
        f.write_all_at(b"\x01", torn + 20).unwrap();
        assert_eq!(LogMark::open(dir.path()).unwrap().zxid(), Some(Zxid(3)));
    }
}
