//! The txn log as segment files of zkd's own, in `dataLogDir/zkd/txnlog`:
//! `zkd-log.<first zxid, 16 hex digits>`, each up to [`SEGMENT_BYTES`], plus
//! the purge mark (`zkd-purged`, a [`LogMark`]).
//!
//! Why not sled: a group commit on sled cost about three times the CPU of a
//! plain append and fdatasync (sled's flush wakes every one of its I/O
//! threads, and each insert allocates and clones tree nodes); see issue 15.
//!
//! A record is `len: u32, crc32: u32, zxid: u64` (big-endian) and `len` bytes
//! of txn; the CRC covers the zxid and the txn. Appends are buffered and
//! written with one `write` and one `fdatasync` per [`SegmentLog::sync`].
//!
//! Zeros are written [`GROW_BYTES`] at a time ahead of the records of the
//! segment being appended to, so that most syncs overwrite blocks already
//! allocated and written, and the file system writes no metadata for them. On this
//! project's machine a 6 KB append and fdatasync cost 184 us of wall time
//! and 68 us of CPU; into zeros already on disk, 98 us and 45 us. (A sparse
//! extension, as ZooKeeper pads its logs, saved little: 147 us and 63 us,
//! since each sync still allocated blocks.) A closed segment is cut to its
//! records before the next one is created.
//!
//! A segment is synced before the next one is created, and a new file's
//! directory entry is synced before anything in it is, so only the last
//! segment can end in a torn record: on open, a bad record there ends the
//! log (the file is cut back to it unless only zeros follow), and a bad
//! record in an earlier segment is damage, refused. Whether a cut-back tail
//! had been synced is for the synced mark beside the log to tell
//! ([`super::log_mark`]).

use super::gradual_removal;
use super::log_mark::LogMark;
use super::record_index::RecordIndex;
use super::segment_reader::SegmentReader;
use crate::error::{Result, StorageError};
use bytes::Bytes;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use zkd_protocol::Zxid;

/// A segment is closed, and the next one begun, past this size.
const SEGMENT_BYTES: u64 = 64 << 20;
/// Zeros written ahead of the last segment's records. Steps of 1 MiB stalled
/// the batch that wrote them: 1-3 ms for the write under load and 1-2 ms
/// more for its sync, the most frequent of zkd's p99.9 writes while
/// snapshots were taken. Alone (10 KB batches), 64 KiB steps cost about a
/// tenth more per sync on average and keep its p99.9 near 0.5 ms, not 1.4-2.
const GROW_BYTES: u64 = 64 << 10;
/// Record header: length, CRC, zxid.
const HEADER: usize = 4 + 4 + 8;
const PREFIX: &str = "zkd-log.";
/// The purge mark's file name.
const PURGED_FILE: &str = "zkd-purged";
/// A record longer than this is damage, not a txn (jute's default
/// maxbuffer is 1 MiB; a txn is a little more than its request).
const MAX_RECORD: usize = 64 << 20;

/// One segment file.
#[derive(Debug)]
struct Segment {
    path: PathBuf,
    /// Each record's zxid and offset, in order.
    index: RecordIndex,
    /// Bytes of records written to the file.
    len: u64,
    /// The file's size: `len` and zeros after it.
    size: u64,
}

impl Segment {
    fn last(&self) -> Option<Zxid> {
        self.index.last()
    }

    /// Where record `i` starts (the end of the written file past the last).
    fn start_of(&self, i: usize) -> u64 {
        if i < self.index.len() {
            self.index.offset(i)
        } else {
            self.len
        }
    }
}

/// The txn log in segment files; see the module doc.
#[derive(Debug)]
pub(super) struct SegmentLog {
    dir: PathBuf,
    /// Oldest first; appends go to the last.
    segments: Vec<Segment>,
    /// The last segment, open for appends.
    file: Option<File>,
    /// Encoded appends not yet written to the last segment.
    pending: Vec<u8>,
    purged: LogMark,
    /// [`SEGMENT_BYTES`]; smaller in tests.
    segment_bytes: u64,
}

fn io_error(path: &Path, e: std::io::Error) -> StorageError {
    StorageError::Db(format!("{}: {e}", path.display()))
}

fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io_error(dir, e))
}

fn crc_of(zxid: Zxid, txn: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&(zxid.0 as u64).to_be_bytes());
    h.update(txn);
    h.finalize()
}

fn encode(out: &mut Vec<u8>, zxid: Zxid, txn: &[u8]) {
    out.extend_from_slice(&(txn.len() as u32).to_be_bytes());
    out.extend_from_slice(&crc_of(zxid, txn).to_be_bytes());
    out.extend_from_slice(&(zxid.0 as u64).to_be_bytes());
    out.extend_from_slice(txn);
}

/// The record at the start of `buf`: its zxid, txn and length, or `None`
/// if it is incomplete or fails its CRC.
fn decode(buf: &[u8]) -> Option<(Zxid, &[u8], usize)> {
    let header = buf.get(..HEADER)?;
    let len = u32::from_be_bytes(header[..4].try_into().ok()?) as usize;
    if len > MAX_RECORD {
        return None;
    }
    let crc = u32::from_be_bytes(header[4..8].try_into().ok()?);
    let zxid = Zxid(u64::from_be_bytes(header[8..16].try_into().ok()?) as i64);
    let txn = buf.get(HEADER..HEADER + len)?;
    (crc_of(zxid, txn) == crc).then_some((zxid, txn, HEADER + len))
}

impl SegmentLog {
    /// Opens the log in `dir` (creating it), checking every record; a torn
    /// tail of the last segment is cut off.
    pub fn open(dir: &Path) -> Result<SegmentLog> {
        if !dir.exists() {
            std::fs::create_dir_all(dir).map_err(|e| io_error(dir, e))?;
            if let Some(parent) = dir.parent() {
                sync_dir(parent)?;
            }
        }
        gradual_removal::sweep(dir);
        let purged = LogMark::open_file(dir, PURGED_FILE)?;
        let mut names: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(|e| io_error(dir, e))?
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().starts_with(PREFIX))
            .map(|e| e.path())
            .collect();
        names.sort();
        let mut segments = Vec::with_capacity(names.len());
        let count = names.len();
        for (i, path) in names.into_iter().enumerate() {
            segments.push(Self::scan(path, i + 1 == count)?);
        }
        for pair in segments.windows(2) {
            if let (Some(a), Some(b)) = (pair[0].last(), pair[1].index.first()) {
                if b <= a {
                    return Err(StorageError::Corrupt(format!(
                        "{}: starts at {b} after {a}",
                        pair[1].path.display(),
                    )));
                }
            }
        }
        let file = match segments.last() {
            Some(s) => Some(Self::open_for_append(&s.path)?),
            None => None,
        };
        Ok(SegmentLog {
            dir: dir.to_owned(),
            segments,
            file,
            pending: Vec::new(),
            purged,
            segment_bytes: SEGMENT_BYTES,
        })
    }

    /// Reads and checks one segment; the last one is cut back to its last
    /// whole record.
    fn scan(path: PathBuf, last: bool) -> Result<Segment> {
        let file = File::open(&path).map_err(|e| io_error(&path, e))?;
        let size = file.metadata().map_err(|e| io_error(&path, e))?.len();
        let mut reader = SegmentReader::new(file);
        let index = Self::index_records(&mut reader).map_err(|e| io_error(&path, e))?;
        let at = reader.offset();
        // Zeros after the records are the room the segment was grown by.
        let clean =
            at == size || (last && reader.rest_is_zeros().map_err(|e| io_error(&path, e))?);
        let mut size = size;
        if !clean {
            if !last {
                return Err(StorageError::Corrupt(format!(
                    "{}: a damaged record at byte {at} of a closed segment",
                    path.display()
                )));
            }
            tracing::warn!(file = %path.display(), at, dropped = size - at, "txn log: cutting a torn tail");
            let f = OpenOptions::new()
                .write(true)
                .open(&path)
                .map_err(|e| io_error(&path, e))?;
            f.set_len(at)
                .and_then(|()| f.sync_all())
                .map_err(|e| io_error(&path, e))?;
            size = at;
        }
        Ok(Segment {
            path,
            index,
            len: at,
            size,
        })
    }

    /// Indexes the whole records from the reader's cursor on, each checked,
    /// and leaves the cursor after the last of them.
    fn index_records(reader: &mut SegmentReader) -> std::io::Result<RecordIndex> {
        let mut index = RecordIndex::default();
        loop {
            let offset = reader.offset();
            let header = reader.ahead(HEADER)?;
            let Some(len) = header
                .get(..4)
                .map(|l| u32::from_be_bytes([l[0], l[1], l[2], l[3]]))
            else {
                break;
            };
            // Damage, not a record: do not read that far to find out.
            if len as usize > MAX_RECORD {
                break;
            }
            let Some((zxid, _, len)) = decode(reader.ahead(HEADER + len as usize)?) else {
                break;
            };
            if index.last().is_some_and(|prev| zxid <= prev) || !index.push(zxid, offset) {
                break;
            }
            reader.advance(len);
        }
        Ok(index)
    }

    fn open_for_append(path: &Path) -> Result<File> {
        OpenOptions::new()
            .write(true)
            .open(path)
            .map_err(|e| io_error(path, e))
    }

    /// The purge mark, if anything was ever purged.
    pub fn purged_through(&self) -> Option<Zxid> {
        self.purged.zxid()
    }

    /// Sets the purge mark durably, up or down.
    fn set_purged(&mut self, zxid: Zxid) -> Result<()> {
        match self.purged.zxid() {
            Some(p) if p > zxid => self.purged.lower(zxid),
            _ => self.purged.record_durably(zxid),
        }
    }

    /// Whether a record holds a txn that is still in the log (above the mark).
    fn live(&self, zxid: Zxid) -> bool {
        self.purged.zxid().is_none_or(|p| zxid > p)
    }

    /// The lowest zxid still in the log (above the purge mark).
    pub fn first_zxid(&self) -> Option<Zxid> {
        let purged = self.purged.zxid().unwrap_or(Zxid(i64::MIN));
        self.segments.iter().find_map(|s| {
            let i = s.index.count_through(purged);
            (i < s.index.len()).then(|| s.index.zxid(i))
        })
    }

    /// The highest zxid appended, written or not.
    pub fn last_zxid(&self) -> Option<Zxid> {
        let last = self.segments.iter().rev().find_map(Segment::last)?;
        self.live(last).then_some(last)
    }

    /// The zxid with exactly `n` live records after it, if the log holds more.
    pub fn zxid_before_last(&self, n: usize) -> Option<Zxid> {
        let mut after = n;
        for segment in self.segments.iter().rev() {
            let len = segment.index.len();
            if len > after {
                let found = segment.index.zxid(len - 1 - after);
                return self.live(found).then_some(found);
            }
            after -= len;
        }
        None
    }

    /// Buffers one record; written and synced by [`sync`](Self::sync).
    pub fn append(&mut self, zxid: Zxid, txn: &[u8]) -> Result<()> {
        let full = self
            .segments
            .last()
            .is_none_or(|s| s.len + self.pending.len() as u64 >= self.segment_bytes);
        if full {
            self.start_segment(zxid)?;
        }
        let Some(segment) = self.segments.last_mut() else {
            return Err(StorageError::Db("txn log: no segment to append to".into()));
        };
        let at = segment.len + self.pending.len() as u64;
        if segment.last().is_some_and(|last| zxid <= last) || !segment.index.push(zxid, at) {
            return Err(StorageError::Db(format!(
                "txn log: cannot append {zxid} at byte {at} of {}",
                segment.path.display()
            )));
        }
        encode(&mut self.pending, zxid, txn);
        Ok(())
    }

    /// Closes the last segment (written and synced) and starts one at
    /// `zxid`, its directory entry durable before anything in it is.
    fn start_segment(&mut self, zxid: Zxid) -> Result<()> {
        self.sync()?;
        if let (Some(file), Some(segment)) = (self.file.as_ref(), self.segments.last_mut()) {
            // Cut to its records, durably: only the last segment may end in zeros.
            if segment.size > segment.len {
                file.set_len(segment.len)
                    .and_then(|()| file.sync_all())
                    .map_err(|e| io_error(&segment.path, e))?;
                segment.size = segment.len;
            }
        }
        let path = self.dir.join(format!("{PREFIX}{:016x}", zxid.0 as u64));
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .map_err(|e| io_error(&path, e))?;
        sync_dir(&self.dir)?;
        self.segments.push(Segment {
            path,
            index: RecordIndex::default(),
            len: 0,
            size: 0,
        });
        self.file = Some(file);
        Ok(())
    }

    /// Writes the buffered records to the last segment (no sync).
    fn write_pending(&mut self) -> Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let (Some(file), Some(segment)) = (self.file.as_mut(), self.segments.last_mut()) else {
            return Err(StorageError::Db("txn log: records with no segment".into()));
        };
        let end = segment.len + self.pending.len() as u64;
        file.write_all_at(&self.pending, segment.len)
            .map_err(|e| io_error(&segment.path, e))?;
        if end > segment.size {
            // Zeros written ahead (not past a whole segment), so that most
            // syncs overwrite blocks already on disk and write no metadata.
            let size = (end + GROW_BYTES).min(self.segment_bytes.max(end));
            let zeros = vec![0u8; (size - end) as usize];
            file.write_all_at(&zeros, end)
                .map_err(|e| io_error(&segment.path, e))?;
            segment.size = size;
        }
        segment.len = end;
        self.pending.clear();
        Ok(())
    }

    /// Writes and fdatasyncs every buffered record.
    pub fn sync(&mut self) -> Result<()> {
        self.write_pending()?;
        if let (Some(file), Some(segment)) = (self.file.as_ref(), self.segments.last()) {
            file.sync_data().map_err(|e| io_error(&segment.path, e))?;
        }
        Ok(())
    }

    /// Up to `max` txns after `after`, in order (buffered ones too).
    pub fn read_range(&mut self, after: Zxid, max: usize) -> Result<Vec<(Zxid, Bytes)>> {
        self.write_pending()?;
        let after = self.purged.zxid().map_or(after, |p| after.max(p));
        let mut out = Vec::new();
        for segment in &self.segments {
            if out.len() >= max {
                break;
            }
            if segment.last().is_none_or(|l| l <= after) {
                continue;
            }
            let from = segment.index.count_through(after);
            let to = segment.index.len().min(from + max - out.len());
            let start = segment.index.offset(from);
            let end = segment.start_of(to);
            let mut buf = vec![0u8; (end - start) as usize];
            File::open(&segment.path)
                .and_then(|f| f.read_exact_at(&mut buf, start))
                .map_err(|e| io_error(&segment.path, e))?;
            let buf = Bytes::from(buf);
            for i in from..to {
                let (zxid, offset) = (segment.index.zxid(i), segment.index.offset(i));
                let at = (offset - start) as usize;
                let Some((z, txn, _)) = decode(&buf[at..]) else {
                    return Err(StorageError::Corrupt(format!(
                        "{}: record {zxid} at byte {offset} is damaged",
                        segment.path.display()
                    )));
                };
                let txn_at = at + HEADER;
                out.push((z, buf.slice(txn_at..txn_at + txn.len())));
            }
        }
        Ok(out)
    }

    /// The highest zxid in the log at or below `zxid`.
    pub fn last_zxid_at_or_before(&self, zxid: Zxid) -> Option<Zxid> {
        let found = self.segments.iter().rev().find_map(|s| {
            let i = s.index.count_through(zxid);
            (i > 0).then(|| s.index.zxid(i - 1))
        })?;
        self.live(found).then_some(found)
    }

    /// Removes every record after `zxid`, durably: whole segments newest
    /// first, then the tail of the one that keeps some.
    pub fn truncate_after(&mut self, zxid: Zxid) -> Result<()> {
        self.write_pending()?;
        let mut removed = false;
        while let Some(segment) = self.segments.last() {
            let first = segment.index.first();
            if first.is_some_and(|f| f <= zxid) {
                break;
            }
            if first.is_none() && self.segments.len() == 1 {
                break;
            }
            gradual_removal::remove(&segment.path).map_err(|e| io_error(&segment.path, e))?;
            self.segments.pop();
            removed = true;
        }
        if removed {
            sync_dir(&self.dir)?;
        }
        if let Some(segment) = self.segments.last_mut() {
            let keep = segment.index.count_through(zxid);
            let cut = segment.start_of(keep);
            segment.index.truncate(keep);
            if cut < segment.len {
                let f = OpenOptions::new()
                    .write(true)
                    .open(&segment.path)
                    .map_err(|e| io_error(&segment.path, e))?;
                f.set_len(cut)
                    .and_then(|()| f.sync_all())
                    .map_err(|e| io_error(&segment.path, e))?;
                segment.len = cut;
                segment.size = cut;
            }
        }
        self.file = match self.segments.last() {
            Some(s) => Some(Self::open_for_append(&s.path)?),
            None => None,
        };
        Ok(())
    }

    /// Removes every record and sets the purge mark to `through`, durably.
    pub fn reset(&mut self, through: Zxid) -> Result<()> {
        self.set_purged(through)?;
        self.pending.clear();
        self.file = None;
        for segment in self.segments.drain(..).rev() {
            gradual_removal::remove(&segment.path).map_err(|e| io_error(&segment.path, e))?;
        }
        sync_dir(&self.dir)
    }

    /// Raises the purge mark to `zxid`, then removes the segments it covers
    /// whole. The mark is made durable only before files go: replay skips
    /// purged txns anyway, but a log must not lose its start unmarked.
    pub fn purge_through(&mut self, zxid: Zxid) -> Result<()> {
        let covered = self
            .segments
            .iter()
            .take_while(|s| s.last().is_some_and(|l| l <= zxid))
            .count();
        // The last segment stays, for appends.
        let covered = covered.min(self.segments.len().saturating_sub(1));
        if self.purged.zxid().is_none_or(|p| p < zxid) {
            match covered {
                0 => self.purged.record(zxid)?,
                _ => self.purged.record_durably(zxid)?,
            }
        }
        if covered == 0 {
            return Ok(());
        }
        for segment in self.segments.drain(..covered) {
            gradual_removal::remove(&segment.path).map_err(|e| io_error(&segment.path, e))?;
        }
        sync_dir(&self.dir)
    }

    /// Bytes in the segment files.
    pub fn bytes(&self) -> u64 {
        self.segments.iter().map(|s| s.len).sum::<u64>() + self.pending.len() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A log in `dir` whose segments close past 1 KiB.
    fn small(dir: &Path) -> SegmentLog {
        let mut log = SegmentLog::open(dir).unwrap();
        log.segment_bytes = 1024;
        log
    }

    fn fill(log: &mut SegmentLog, from: i64, to: i64) {
        for z in from..=to {
            log.append(Zxid(z), &[z as u8; 100]).unwrap();
        }
        log.sync().unwrap();
    }

    fn segment_files(dir: &Path) -> Vec<PathBuf> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.to_string_lossy().contains(PREFIX))
            .collect();
        files.sort();
        files
    }

    #[test]
    fn segments_roll_read_across_purge_whole_and_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = small(dir.path());
        fill(&mut log, 1, 50);
        let files = segment_files(dir.path()).len();
        assert!(files >= 5, "{files} segments");
        let page = log.read_range(Zxid(5), 30).unwrap();
        let zxids: Vec<i64> = page.iter().map(|(z, _)| z.0).collect();
        assert_eq!(zxids, (6..=35).collect::<Vec<_>>());
        assert_eq!(&page[0].1[..], &[6u8; 100][..]);
        log.purge_through(Zxid(25)).unwrap();
        assert!(
            segment_files(dir.path()).len() < files,
            "whole segments went"
        );
        assert_eq!(log.first_zxid(), Some(Zxid(26)));
        assert_eq!(log.last_zxid_at_or_before(Zxid(20)), None, "purged");
        // Counted back across segments, purged records left out.
        assert_eq!(log.zxid_before_last(0), Some(Zxid(50)));
        assert_eq!(log.zxid_before_last(20), Some(Zxid(30)));
        assert_eq!(log.zxid_before_last(24), Some(Zxid(26)));
        assert_eq!(log.zxid_before_last(25), None);
        log.truncate_after(Zxid(40)).unwrap();
        drop(log);
        let mut log = small(dir.path());
        assert_eq!(
            (log.first_zxid(), log.last_zxid()),
            (Some(Zxid(26)), Some(Zxid(40)))
        );
        assert_eq!(log.purged_through(), Some(Zxid(25)));
        fill(&mut log, 41, 45);
        assert_eq!(log.read_range(Zxid(39), 10).unwrap().len(), 6);
    }

    #[test]
    fn a_damaged_record_in_a_closed_segment_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = small(dir.path());
        fill(&mut log, 1, 50);
        drop(log);
        let first = segment_files(dir.path()).remove(0);
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&first)
            .unwrap();
        f.write_all_at(&[0xff], 40).unwrap();
        match SegmentLog::open(dir.path()) {
            Err(StorageError::Corrupt(e)) => assert!(e.contains("closed segment"), "{e}"),
            other => panic!("opened a damaged closed segment: {other:?}"),
        }
    }

    fn size_of(path: &Path) -> u64 {
        std::fs::metadata(path).unwrap().len()
    }

    #[test]
    fn the_last_segment_is_grown_ahead_and_its_zeros_are_no_tear() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = SegmentLog::open(dir.path()).unwrap();
        fill(&mut log, 1, 10);
        let records = log.bytes();
        let file = segment_files(dir.path()).pop().unwrap();
        assert_eq!(size_of(&file), records + GROW_BYTES);
        // Written, not a hole: a later sync must find its blocks allocated.
        let allocated =
            std::os::unix::fs::MetadataExt::blocks(&std::fs::metadata(&file).unwrap()) * 512;
        assert!(
            allocated >= records + GROW_BYTES,
            "{allocated} bytes allocated"
        );
        drop(log);
        let mut log = SegmentLog::open(dir.path()).unwrap();
        assert_eq!(size_of(&file), records + GROW_BYTES, "not cut at open");
        assert_eq!(log.last_zxid(), Some(Zxid(10)));
        fill(&mut log, 11, 20);
        assert_eq!(size_of(&file), records + GROW_BYTES, "appended in place");
        drop(log);
        let log = SegmentLog::open(dir.path()).unwrap();
        assert_eq!(
            (log.first_zxid(), log.last_zxid()),
            (Some(Zxid(1)), Some(Zxid(20)))
        );
    }

    #[test]
    fn a_torn_record_in_the_grown_room_is_cut_and_appends_go_on() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = SegmentLog::open(dir.path()).unwrap();
        fill(&mut log, 1, 10);
        let records = log.bytes();
        drop(log);
        let file = segment_files(dir.path()).pop().unwrap();
        let f = OpenOptions::new().write(true).open(&file).unwrap();
        f.write_all_at(&[0x5a; 40], records).unwrap();
        let mut log = SegmentLog::open(dir.path()).unwrap();
        assert_eq!(size_of(&file), records, "the tear is cut off");
        fill(&mut log, 11, 12);
        drop(log);
        let mut log = SegmentLog::open(dir.path()).unwrap();
        assert_eq!(log.last_zxid(), Some(Zxid(12)));
        let page = log.read_range(Zxid(10), 5).unwrap();
        assert_eq!(page.iter().map(|(z, _)| z.0).collect::<Vec<_>>(), [11, 12]);
    }

    /// The scan reads a segment a piece at a time: records that straddle
    /// pieces, and one longer than a piece, are read whole; a tear past
    /// the first piece is still found and cut.
    #[test]
    fn records_across_the_scans_pieces_open_whole() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = SegmentLog::open(dir.path()).unwrap();
        // 1,000-byte records put a boundary inside one every piece.
        for z in 1..=3000i64 {
            log.append(Zxid(z), &[z as u8; 1000]).unwrap();
        }
        log.append(Zxid(3001), &vec![7u8; 3 << 20]).unwrap();
        log.append(Zxid(3002), &[2u8; 10]).unwrap();
        log.sync().unwrap();
        let records = log.bytes();
        drop(log);
        let mut log = SegmentLog::open(dir.path()).unwrap();
        assert_eq!(
            (log.first_zxid(), log.last_zxid()),
            (Some(Zxid(1)), Some(Zxid(3002)))
        );
        let page = log.read_range(Zxid(2999), 5).unwrap();
        let lens: Vec<usize> = page.iter().map(|(_, t)| t.len()).collect();
        assert_eq!(lens, [1000, 3 << 20, 10]);
        assert!(page[1].1.iter().all(|b| *b == 7));
        drop(log);
        let file = segment_files(dir.path()).pop().unwrap();
        let f = OpenOptions::new().write(true).open(&file).unwrap();
        f.write_all_at(&[0x5a; 40], records).unwrap();
        let log = SegmentLog::open(dir.path()).unwrap();
        assert_eq!(size_of(&file), records, "the tear is cut off");
        assert_eq!(log.last_zxid(), Some(Zxid(3002)));
    }

    /// A segment closed before it filled its room (the segment size is
    /// lowered) is cut to its records, or it would be refused as damaged.
    #[test]
    fn a_closed_segment_ends_at_its_records() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = SegmentLog::open(dir.path()).unwrap();
        fill(&mut log, 1, 10);
        log.segment_bytes = 1024;
        fill(&mut log, 11, 20);
        drop(log);
        let files = segment_files(dir.path());
        assert!(files.len() >= 2, "{files:?}");
        assert_eq!(size_of(&files[0]), 10 * (HEADER as u64 + 100));
        let log = SegmentLog::open(dir.path()).unwrap();
        assert_eq!(
            (log.first_zxid(), log.last_zxid()),
            (Some(Zxid(1)), Some(Zxid(20)))
        );
    }

    #[test]
    fn a_reset_empties_the_log_and_appends_go_on_past_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = small(dir.path());
        fill(&mut log, 1, 30);
        log.reset(Zxid(100)).unwrap();
        assert!(segment_files(dir.path()).is_empty());
        assert_eq!((log.first_zxid(), log.last_zxid()), (None, None));
        fill(&mut log, 101, 103);
        drop(log);
        let log = small(dir.path());
        assert_eq!(log.purged_through(), Some(Zxid(100)));
        assert_eq!(log.first_zxid(), Some(Zxid(101)));
    }
}
