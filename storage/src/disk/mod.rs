//! `DiskStorage`: the storage traits on disk: the txn log in segment files
//! of zkd's own ([`segment_log`]), epochs on sled 0.34, snapshots as files.
//! A sled write is durable only after `flush()` returns, so every "durable
//! on return" method flushes.
//!
//! On Linux sled's flush ends in `sync_file_range`, which survives a killed
//! process but not power loss (no file metadata, no device cache flush), and
//! it never syncs the separate files it keeps for large values. So after each
//! flush [`FileSync`] fdatasyncs the database file and every new blob file:
//! nothing is acknowledged before it is truly on disk.
//!
//! A log that opens shorter than it was synced (a torn or corrupted record
//! ends it) is refused on open, by the synced mark kept beside it
//! ([`log_mark`]).
//!
//! Layout ([`layout`]): the txn log lives in `dataLogDir/zkd/txnlog`,
//! epochs in a sled database under `dataDir/zkd/data`, and snapshots are
//! files in `dataDir/zkd/snapshots` ([`snapshot_files`]), so operators can
//! put the log on a separate disk as with ZooKeeper. Nothing of zkd's is
//! under ZooKeeper's `version-2/`, and a directory holding ZooKeeper's files
//! is refused. A log still in the sled database of earlier versions
//! (`zkd/log`) is moved into segments on open ([`log_migration`]).

use crate::data_tree::DataTree;
use crate::divergence_mark::DivergenceMark;
use crate::epoch_store::EpochStore;
use crate::error::{Result, StorageError};
use crate::snapshot::{
    fnv1a_of, read_snapshot_with, SnapshotRef, SnapshotSeal, SnapshotSlot, SnapshotStore,
};
use crate::store::decode_snapshot;
use log_mark::LogMark;
use snapshot_files::SnapshotFiles;

mod gradual_removal;
pub mod import;
mod imported_history;
pub mod layout;
mod log_mark;
mod log_migration;
mod record_index;
mod segment_log;
mod segment_reader;
mod snapshot_files;
use crate::txn_log::TxnLog;
use bytes::Bytes;
use segment_log::SegmentLog;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use zkd_protocol::Zxid;

/// fdatasync of one sled database's files: its log file and its blob files.
#[derive(Debug)]
struct FileSync {
    dir: PathBuf,
    db_file: File,
    /// Highest blob file (sled names them by log sequence number) already synced.
    synced_blob: u64,
}

impl FileSync {
    fn open(dir: &Path) -> std::io::Result<FileSync> {
        let db_file = File::open(dir.join("db"))?;
        // Make the database's directory entries durable once.
        for d in dir.ancestors().take(3) {
            if let Ok(f) = File::open(d) {
                let _ = f.sync_all();
            }
        }
        Ok(FileSync {
            dir: dir.to_owned(),
            db_file,
            synced_blob: 0,
        })
    }

    /// fdatasync of the database file and of blob files new since the last
    /// call. The error names the file, for the operator's one fatal log line.
    fn sync(&mut self) -> Result<()> {
        let failed = |file: &Path, e: std::io::Error| {
            StorageError::Db(format!("fdatasync of {}: {e}", file.display()))
        };
        self.db_file
            .sync_data()
            .map_err(|e| failed(&self.dir.join("db"), e))?;
        let blobs = self.dir.join("blobs");
        let mut newest = self.synced_blob;
        let entries = std::fs::read_dir(&blobs).map_err(|e| failed(&blobs, e))?;
        for entry in entries {
            let entry = entry.map_err(|e| failed(&blobs, e))?;
            let Some(lsn) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<u64>().ok())
            else {
                continue;
            };
            if lsn > self.synced_blob {
                // A blob may be collected between listing and opening: nothing to sync then.
                if let Ok(f) = File::open(entry.path()) {
                    f.sync_data().map_err(|e| failed(&entry.path(), e))?;
                }
                newest = newest.max(lsn);
            }
        }
        if newest > self.synced_blob {
            File::open(&blobs)
                .and_then(|d| d.sync_all())
                .map_err(|e| failed(&blobs, e))?;
            self.synced_blob = newest;
        }
        Ok(())
    }
}

/// Durable storage on sled.
#[derive(Clone, Debug)]
pub struct DiskStorage {
    /// The txn log; reads take the lock too (they write buffered appends first).
    log: Arc<Mutex<SegmentLog>>,
    /// How far the log reached at its last sync (see [`log_mark`]).
    log_mark: Arc<Mutex<LogMark>>,
    /// The epochs last written, packed as (accepted, current) (see [`log_mark`]).
    epochs_mark: Arc<Mutex<LogMark>>,
    data_sync: Arc<Mutex<FileSync>>,
    data_db: ::sled::Db,
    snapshots: SnapshotFiles,
    epochs: ::sled::Tree,
    /// The newest snapshot, decoded while the store opened, until recovery takes it.
    preloaded: Arc<Mutex<Option<Preloaded>>>,
}

/// Opens a sled database. sled lets go of its file lock from a background
/// thread after its last handle is dropped, so a database reopened in the
/// same process (a test's restart) may find the lock held a moment longer:
/// that is waited out, for a bounded time.
fn open_sled(config: ::sled::Config) -> ::sled::Result<::sled::Db> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    loop {
        match config.open() {
            // sled reports the lock only in its message.
            Err(::sled::Error::Io(e))
                if e.to_string().contains("could not acquire lock")
                    && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(std::time::Duration::from_millis(10))
            }
            opened => return opened,
        }
    }
}

/// A snapshot decoded ahead, and how that went.
type Preloaded = (SnapshotRef, Result<DataTree>);

/// Decodes the newest sealed snapshot, checked against its seal, for
/// recovery to take ([`SnapshotStore::take_preloaded`]). None if there is
/// none, or if the directory cannot be listed (recovery lists it again and
/// reports why).
fn preload_newest(files: &SnapshotFiles) -> Option<Preloaded> {
    let (zxid, seal) = files.seals().ok()?.pop()?;
    let snapshot = SnapshotRef { zxid, seal };
    let slot = SnapshotSlot::Saved(zxid);
    let pieces = read_snapshot_with(|offset, max| files.read_at(slot, offset, max), slot, seal);
    Some((snapshot, decode_snapshot(snapshot, pieces)))
}

/// sled's page cache (its default is 1 GiB): the epochs need little.
const CACHE_BYTES: u64 = 8 * 1024 * 1024;

/// Key of the last fuzzy image installed, beside the epochs (it is about
/// as small and as rarely written).
const FUZZY_IMAGE: &str = "fuzzyImage";

fn key(zxid: Zxid) -> [u8; 8] {
    (zxid.0 as u64).to_be_bytes()
}

fn zxid_of(key: &[u8]) -> Result<Zxid> {
    let raw: [u8; 8] = key
        .try_into()
        .map_err(|_| StorageError::Corrupt("log key".into()))?;
    Ok(Zxid(u64::from_be_bytes(raw) as i64))
}

impl DiskStorage {
    /// Opens (or creates) the stores under `data_dir` and `data_log_dir`.
    pub fn open(data_dir: &Path, data_log_dir: &Path) -> Result<DiskStorage> {
        let layout::Layout {
            log_dir,
            sled_log_dir,
            snapshot_dir,
            epochs_dir: data_dir,
        } = layout::Layout::prepare(data_dir, data_log_dir)?;
        log_migration::migrate(&sled_log_dir, &log_dir)?;
        let snapshots = SnapshotFiles::open(snapshot_dir)?;
        // The log's scan (every record's CRC), sled's open and the newest
        // snapshot's decoding each take tens of ms or more on a large data
        // dir, and a restart waits for all three: side by side. Recovery
        // decides whether the snapshot is the one to use.
        let (data_db, log, preloaded) = std::thread::scope(|s| {
            let log = s.spawn(|| SegmentLog::open(&log_dir));
            let preloaded = s.spawn(|| preload_newest(&snapshots));
            let data_db = open_sled(
                ::sled::Config::new()
                    .path(&data_dir)
                    .mode(::sled::Mode::HighThroughput)
                    .cache_capacity(CACHE_BYTES),
            );
            let log = log.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
            let preloaded = preloaded
                .join()
                .unwrap_or_else(|p| std::panic::resume_unwind(p));
            (data_db, log, preloaded)
        });
        let (data_db, log) = (data_db?, log?);
        let io = |e: std::io::Error| StorageError::Db(e.to_string());
        let log_mark = LogMark::open(&log_dir)?;
        let epochs_mark = LogMark::open_file(&data_dir, log_mark::EPOCHS_FILE)?;
        let mut storage = DiskStorage {
            log: Arc::new(Mutex::new(log)),
            log_mark: Arc::new(Mutex::new(log_mark)),
            epochs_mark: Arc::new(Mutex::new(epochs_mark)),
            data_sync: Arc::new(Mutex::new(FileSync::open(&data_dir).map_err(io)?)),
            snapshots,
            epochs: data_db.open_tree("epochs")?,
            data_db,
            preloaded: Arc::new(Mutex::new(preloaded)),
        };
        storage.check_log_reaches_its_mark(&log_dir)?;
        storage.check_epochs_reach_their_mark(&data_dir)?;
        storage.migrate_whole_snapshots()?;
        Ok(storage)
    }

    /// Refuses a log that ends (with its purge mark) below the zxid it was
    /// synced through: sled stopped its recovery at a torn or corrupted
    /// record, dropping synced, possibly acknowledged, txns after it.
    fn check_log_reaches_its_mark(&self, log_dir: &Path) -> Result<()> {
        // Zxid 0 (a log cut to nothing) holds no txn.
        let Some(synced) = self.mark().zxid().filter(|z| *z > Zxid::ZERO) else {
            return Ok(());
        };
        let end = self.last_zxid()?.max(self.purged_through()?);
        if end.is_some_and(|end| end >= synced) {
            return Ok(());
        }
        let end = end.map_or("no txn".to_string(), |z| z.to_string());
        Err(StorageError::Corrupt(format!(
            "the txn log in {} was synced through zxid {synced} but now ends at {end}: \
             a damaged (torn or corrupted) record cut it short, losing txns that may have \
             been acknowledged. Refusing to start. Restore the log, or (in an ensemble) \
             move {} away so this member resyncs from the leader",
            log_dir.display(),
            log_dir.parent().unwrap_or(log_dir).display(),
        )))
    }

    /// Refuses epochs below those last written: sled dropped a damaged
    /// epoch record, and a member must never forget an epoch it accepted.
    fn check_epochs_reach_their_mark(&self, data_dir: &Path) -> Result<()> {
        let Some(mark) = self.epochs_mark().zxid() else {
            return Ok(());
        };
        let (accepted, current) = (self.accepted_epoch()?, self.current_epoch()?);
        if accepted >= mark.epoch() && current >= mark.counter() {
            return Ok(());
        }
        Err(StorageError::Corrupt(format!(
            "the epochs in {} were written as accepted {} and current {} but now read \
             {accepted} and {current}: a damaged record cut them short. Refusing to start. \
             Restore them, or (in an ensemble) move {} away so this member resyncs from \
             the leader",
            data_dir.display(),
            mark.epoch(),
            mark.counter(),
            data_dir.parent().unwrap_or(data_dir).display(),
        )))
    }

    fn epochs_mark(&self) -> std::sync::MutexGuard<'_, LogMark> {
        self.epochs_mark.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn mark(&self) -> std::sync::MutexGuard<'_, LogMark> {
        self.log_mark.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn log(&self) -> std::sync::MutexGuard<'_, SegmentLog> {
        // Only the storage thread writes; a panic there ends the process.
        self.log.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Data dirs written before snapshots were files keep each image whole
    /// with a trailing checksum in the `snapshots` tree: rewrite them as
    /// files, then drop the old tree. A crash part-way redoes it.
    fn migrate_whole_snapshots(&mut self) -> Result<()> {
        const OLD: &str = "snapshots";
        if !self
            .data_db
            .tree_names()
            .iter()
            .any(|n| n.as_ref() == OLD.as_bytes())
        {
            return Ok(());
        }
        let old = self.data_db.open_tree(OLD)?;
        for item in old.iter() {
            let (k, v) = item?;
            let zxid = zxid_of(&k)?;
            let (image, sum) = v.split_at(v.len().saturating_sub(8));
            if sum.len() != 8 || fnv1a_of(image).to_be_bytes() != sum {
                tracing::warn!(%zxid, "dropping a damaged snapshot of the old format");
                continue;
            }
            self.save_snapshot(zxid, Bytes::copy_from_slice(image))?;
            tracing::info!(%zxid, "snapshot moved to a file");
        }
        self.data_db.drop_tree(OLD)?;
        self.flush_data()
    }

    /// The newest sealed snapshot's zxid and the Unix second its file was
    /// sealed (renamed into place; its mtime is the last append's).
    pub fn newest_snapshot(&self) -> Option<(Zxid, u64)> {
        self.snapshots.newest_sealed()
    }

    /// Bytes used on disk by the log and by the data store (`dirs`).
    pub fn sizes(&self) -> (u64, u64) {
        (self.data_db.size_on_disk().unwrap_or(0), self.log().bytes())
    }

    fn flush_data(&self) -> Result<()> {
        Self::flush(&self.data_db, &self.data_sync)
    }

    /// sled's flush, then our fdatasyncs (see the module doc).
    fn flush(db: &::sled::Db, files: &Mutex<FileSync>) -> Result<()> {
        let mut files = files.lock().unwrap_or_else(|e| e.into_inner());
        db.flush().map_err(|e| {
            StorageError::Db(format!("flush of {}: {e}", files.dir.join("db").display()))
        })?;
        files.sync()
    }

    fn epoch(&self, name: &str) -> Result<u32> {
        match self.epochs.get(name)? {
            None => Ok(0),
            Some(v) => {
                let raw: [u8; 4] = v
                    .as_ref()
                    .try_into()
                    .map_err(|_| StorageError::Corrupt(name.into()))?;
                Ok(u32::from_be_bytes(raw))
            }
        }
    }

    fn set_epoch(&mut self, name: &str, epoch: u32) -> Result<()> {
        self.epochs.insert(name, &epoch.to_be_bytes())?;
        self.flush_data()?;
        // After the epochs are durable, so the mark never leads them.
        let both = Zxid::new(self.accepted_epoch()?, self.current_epoch()?);
        self.epochs_mark().record_durably(both)
    }
}

impl TxnLog for DiskStorage {
    fn append(&mut self, zxid: Zxid, txn: Bytes) -> Result<()> {
        let mut log = self.log();
        let last = log.last_zxid().max(log.purged_through());
        if let Some(last) = last.filter(|l| zxid <= *l) {
            return Err(crate::txn_log::out_of_order(zxid, last));
        }
        log.append(zxid, &txn)
    }

    fn sync(&mut self) -> Result<()> {
        let last = {
            let mut log = self.log();
            log.sync()?;
            log.last_zxid()
        };
        match last {
            Some(last) => self.mark().record(last),
            None => Ok(()),
        }
    }

    fn settle(&mut self) -> Result<()> {
        self.mark().settle(std::time::Instant::now())
    }

    fn first_zxid(&self) -> Result<Option<Zxid>> {
        Ok(self.log().first_zxid())
    }

    fn last_zxid(&self) -> Result<Option<Zxid>> {
        Ok(self.log().last_zxid())
    }

    fn purged_through(&self) -> Result<Option<Zxid>> {
        Ok(self.log().purged_through())
    }

    fn read_range(&self, after: Zxid, max_txns: usize) -> Result<Vec<(Zxid, Bytes)>> {
        if max_txns == 0 {
            return Ok(Vec::new());
        }
        self.log().read_range(after, max_txns)
    }

    fn last_zxid_at_or_before(&self, zxid: Zxid) -> Result<Option<Zxid>> {
        Ok(self.log().last_zxid_at_or_before(zxid))
    }

    fn zxid_before_last(&self, n: usize) -> Result<Option<Zxid>> {
        Ok(self.log().zxid_before_last(n))
    }

    fn truncate_after(&mut self, zxid: Zxid) -> Result<()> {
        if let Some(purged) = self.purged_through()?.filter(|p| zxid < *p) {
            return Err(crate::txn_log::cut_below_purge(zxid, purged));
        }
        // The synced mark goes down first, durably: a crash after it leaves
        // the mark below the log, which is allowed.
        self.mark().lower(zxid)?;
        self.log().truncate_after(zxid)
    }

    fn reset(&mut self, through: Zxid) -> Result<()> {
        self.mark().lower(through)?;
        self.log().reset(through)
    }

    fn purge_through(&mut self, zxid: Zxid) -> Result<()> {
        self.log().purge_through(zxid)
    }
}

#[cfg(test)]
impl DiskStorage {
    pub(crate) fn damage_snapshot(&self, zxid: Zxid, at: u64) {
        self.snapshots.damage(zxid, at);
    }
}

impl SnapshotStore for DiskStorage {
    fn append_snapshot(&mut self, slot: SnapshotSlot, piece: &[u8]) -> Result<()> {
        self.snapshots.append(slot, piece)
    }

    fn write_out_snapshot(&mut self, slot: SnapshotSlot) -> Result<()> {
        self.snapshots.write_out(slot)
    }

    fn read_snapshot_at(&self, slot: SnapshotSlot, offset: u64, max: usize) -> Result<Bytes> {
        self.snapshots.read_at(slot, offset, max)
    }

    fn seal_snapshot(&mut self, slot: SnapshotSlot, zxid: Zxid, seal: SnapshotSeal) -> Result<()> {
        self.snapshots.seal(slot, zxid, seal)
    }

    fn snapshot_seals(&self) -> Result<Vec<(Zxid, SnapshotSeal)>> {
        self.snapshots.seals()
    }

    fn snapshot_zxids(&self) -> Result<Vec<Zxid>> {
        self.snapshots.zxids()
    }

    fn remove_snapshot(&mut self, slot: SnapshotSlot) -> Result<()> {
        self.snapshots.remove(slot)
    }

    fn sync_snapshots(&mut self) -> Result<()> {
        self.snapshots.sync_dir()
    }

    fn set_fuzzy_image(&mut self, zxid: Zxid, end: Zxid) -> Result<()> {
        let mut value = [0u8; 16];
        value[..8].copy_from_slice(&key(zxid));
        value[8..].copy_from_slice(&key(end));
        self.epochs.insert(FUZZY_IMAGE, &value)?;
        self.flush_data()
    }

    fn take_preloaded(&self) -> Option<Preloaded> {
        self.preloaded
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }

    fn fuzzy_image(&self) -> Result<Option<(Zxid, Zxid)>> {
        let Some(value) = self.epochs.get(FUZZY_IMAGE)? else {
            return Ok(None);
        };
        let corrupt = || StorageError::Corrupt(FUZZY_IMAGE.into());
        let half = |range: std::ops::Range<usize>| -> Result<Zxid> {
            let raw: [u8; 8] = value
                .get(range)
                .ok_or_else(corrupt)?
                .try_into()
                .map_err(|_| corrupt())?;
            Ok(Zxid(i64::from_be_bytes(raw)))
        };
        Ok(Some((half(0..8)?, half(8..16)?)))
    }
}

impl EpochStore for DiskStorage {
    fn accepted_epoch(&self) -> Result<u32> {
        self.epoch("acceptedEpoch")
    }
    fn set_accepted_epoch(&mut self, epoch: u32) -> Result<()> {
        self.set_epoch("acceptedEpoch", epoch)
    }
    fn current_epoch(&self) -> Result<u32> {
        self.epoch("currentEpoch")
    }
    fn set_current_epoch(&mut self, epoch: u32) -> Result<()> {
        self.set_epoch("currentEpoch", epoch)
    }
}

/// The note lives beside the epochs: one small durable record.
const DIVERGED_AT: &str = "divergedAt";

impl DivergenceMark for DiskStorage {
    fn diverged_at(&self) -> Result<Option<Zxid>> {
        match self.epochs.get(DIVERGED_AT)? {
            None => Ok(None),
            Some(v) => {
                let raw: [u8; 8] = v
                    .as_ref()
                    .try_into()
                    .map_err(|_| StorageError::Corrupt(DIVERGED_AT.into()))?;
                Ok(Some(Zxid(i64::from_be_bytes(raw))))
            }
        }
    }

    fn set_diverged_at(&mut self, zxid: Option<Zxid>) -> Result<()> {
        match zxid {
            Some(z) => self.epochs.insert(DIVERGED_AT, &z.0.to_be_bytes())?,
            None => self.epochs.remove(DIVERGED_AT)?,
        };
        self.flush_data()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Appends txns `from..=to` (200-byte values), then syncs if asked.
    fn fill(s: &mut DiskStorage, from: i64, to: i64, sync: bool) {
        for z in from..=to {
            s.append(Zxid(z), Bytes::from(vec![z as u8; 200])).unwrap();
        }
        if sync {
            s.sync().unwrap();
        }
    }

    /// Closes the store as a kill would leave it: appends never written stay
    /// unwritten (the segment log writes nothing on drop).
    fn kill(s: DiskStorage, _dir: &Path) {
        drop(s);
    }

    /// Opens the store again after [`kill`] or a drop. sled's background
    /// threads let go of the database's lock a moment after the drop, so a
    /// lock still held is waited out (up to 5 s) instead of failing the test.
    fn reopen(dir: &Path) -> Result<DiskStorage> {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        loop {
            match DiskStorage::open(dir, dir) {
                Err(e)
                    if e.to_string().contains("could not acquire lock")
                        && std::time::Instant::now() < deadline =>
                {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                opened => return opened,
            }
        }
    }

    /// The newest segment file of the txn log.
    fn log_file(dir: &Path) -> PathBuf {
        let log = dir.join("zkd").join("txnlog");
        let mut segments: Vec<PathBuf> = std::fs::read_dir(log)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.to_string_lossy().contains("zkd-log."))
            .collect();
        segments.sort();
        segments.pop().expect("a segment")
    }

    /// Where the records of a log segment end: the segment is grown ahead
    /// of them with zeros, so its size is not their end (a record ending in
    /// zero bytes ends a little later, which a cut of records still hits).
    fn records_end(path: &Path) -> u64 {
        let bytes = std::fs::read(path).unwrap();
        bytes
            .iter()
            .rposition(|b| *b != 0)
            .map_or(0, |i| i as u64 + 1)
    }

    fn expect_refused(dir: &Path) {
        match reopen(dir) {
            Err(StorageError::Corrupt(e)) => assert!(e.contains("synced through"), "{e}"),
            Err(e) => panic!("refused, but not as a cut log: {e}"),
            Ok(s) => panic!(
                "opened a log cut short by damage: it ends at {:?}",
                s.last_zxid().unwrap()
            ),
        }
    }

    /// A torn tail of synced (acknowledged) txns: the log ends before them;
    /// the store must refuse to open.
    #[test]
    fn a_synced_tail_cut_by_damage_is_refused() {
        for cut in [1u64, 100, 4096] {
            let dir = tempfile::tempdir().unwrap();
            let mut s = DiskStorage::open(dir.path(), dir.path()).unwrap();
            fill(&mut s, 1, 500, true);
            kill(s, dir.path());
            let log = log_file(dir.path());
            let f = std::fs::OpenOptions::new().write(true).open(&log).unwrap();
            f.set_len(records_end(&log) - cut).unwrap();
            expect_refused(dir.path());
        }
    }

    /// A corrupted record in the middle of the log: the log ends there.
    #[test]
    fn a_corrupted_record_mid_log_is_refused() {
        for zeroed in [1usize, 4096] {
            let dir = tempfile::tempdir().unwrap();
            let mut s = DiskStorage::open(dir.path(), dir.path()).unwrap();
            fill(&mut s, 1, 2000, true);
            kill(s, dir.path());
            let log = log_file(dir.path());
            let f = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(&log)
                .unwrap();
            let at = records_end(&log) / 2;
            let mut bytes = vec![0u8; zeroed];
            std::os::unix::fs::FileExt::read_exact_at(&f, &mut bytes, at).unwrap();
            for b in &mut bytes {
                *b = if zeroed == 1 { *b ^ 0xff } else { 0 };
            }
            std::os::unix::fs::FileExt::write_all_at(&f, &bytes, at).unwrap();
            expect_refused(dir.path());
        }
    }

    /// A torn tail past the last sync was never acknowledged: the cut is
    /// the truncation ZooKeeper makes too, and the store opens.
    #[test]
    fn an_unsynced_torn_tail_is_truncated() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = DiskStorage::open(dir.path(), dir.path()).unwrap();
        fill(&mut s, 1, 500, true);
        fill(&mut s, 501, 600, false);
        // A read writes the unsynced appends to the file (not synced).
        assert_eq!(s.read_range(Zxid(599), 5).unwrap().len(), 1);
        kill(s, dir.path());
        let log = log_file(dir.path());
        let f = std::fs::OpenOptions::new().write(true).open(&log).unwrap();
        f.set_len(records_end(&log) - 100).unwrap();
        let s = reopen(dir.path()).unwrap();
        let last = s.last_zxid().unwrap().unwrap();
        assert!((Zxid(500)..Zxid(600)).contains(&last), "{last}");
        // And the cut is final: appends go on from there, and it reopens.
        let mut s = s;
        fill(&mut s, last.0 + 1, last.0 + 10, true);
        kill(s, dir.path());
        let s = reopen(dir.path()).unwrap();
        assert_eq!(s.last_zxid().unwrap(), Some(Zxid(last.0 + 10)));
    }

    /// A data dir of an earlier zkd, its files under `version-2/`: opened,
    /// they move to `zkd/` whole (log, epochs, snapshots), and nothing is
    /// left under ZooKeeper's name.
    #[test]
    fn an_earlier_zkds_data_dir_opens_with_everything_it_held() {
        use crate::snapshot::SnapshotStore;
        let dir = tempfile::tempdir().unwrap();
        let mut s = DiskStorage::open(dir.path(), dir.path()).unwrap();
        fill(&mut s, 1, 30, true);
        s.set_accepted_epoch(3).unwrap();
        s.set_current_epoch(2).unwrap();
        s.save_snapshot(Zxid(20), Bytes::from_static(b"image20"))
            .unwrap();
        kill(s, dir.path());
        std::fs::rename(dir.path().join("zkd"), dir.path().join("version-2")).unwrap();
        let s = reopen(dir.path()).unwrap();
        assert_eq!(s.last_zxid().unwrap(), Some(Zxid(30)));
        assert_eq!(
            (s.accepted_epoch().unwrap(), s.current_epoch().unwrap()),
            (3, 2)
        );
        assert_eq!(s.snapshot_zxids().unwrap(), vec![Zxid(20)]);
        assert!(!dir.path().join("version-2").exists());
    }

    /// A damaged epoch record: sled would hand back the older epoch.
    #[test]
    fn a_lost_epoch_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = DiskStorage::open(dir.path(), dir.path()).unwrap();
        s.set_accepted_epoch(3).unwrap();
        s.set_current_epoch(3).unwrap();
        s.set_accepted_epoch(4).unwrap();
        kill(s, dir.path());
        let db = dir.path().join("zkd").join("data").join("db");
        let f = std::fs::OpenOptions::new().write(true).open(db).unwrap();
        f.set_len(f.metadata().unwrap().len() - 1).unwrap();
        match reopen(dir.path()) {
            Err(StorageError::Corrupt(e)) => assert!(e.contains("epochs"), "{e}"),
            Err(e) => panic!("refused, but not for the epochs: {e}"),
            Ok(s) => panic!(
                "opened with epochs {} and {}",
                s.accepted_epoch().unwrap(),
                s.current_epoch().unwrap()
            ),
        }
    }

    /// A TRUNC or a SNAP install lowers the mark before cutting: the shorter
    /// log opens.
    #[test]
    fn a_deliberate_cut_lowers_the_mark() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = DiskStorage::open(dir.path(), dir.path()).unwrap();
        fill(&mut s, 1, 100, true);
        s.truncate_after(Zxid(40)).unwrap();
        kill(s, dir.path());
        let mut s = reopen(dir.path()).unwrap();
        assert_eq!(s.last_zxid().unwrap(), Some(Zxid(40)));
        fill(&mut s, 41, 60, true);
        s.reset(Zxid(50)).unwrap();
        kill(s, dir.path());
        let s = reopen(dir.path()).unwrap();
        assert_eq!(s.last_zxid().unwrap(), None);
        assert_eq!(s.purged_through().unwrap(), Some(Zxid(50)));
    }

    /// A data dir from before snapshots were files: its images are moved
    /// into files on open, damaged ones dropped.
    #[test]
    fn whole_snapshots_of_the_old_format_become_files() {
        let dir = tempfile::tempdir().unwrap();
        {
            let old = ::sled::open(dir.path().join("zkd").join("data")).unwrap();
            let tree = old.open_tree("snapshots").unwrap();
            for (zxid, image) in [(4i64, &b"image4"[..]), (7, b"image7")] {
                let mut value = image.to_vec();
                value.extend_from_slice(&fnv1a_of(image).to_be_bytes());
                tree.insert(key(Zxid(zxid)), value).unwrap();
            }
            tree.insert(key(Zxid(9)), &b"rotten image and sum"[..])
                .unwrap();
            old.flush().unwrap();
        }
        // The old database's threads may still hold its lock for a moment.
        let s = reopen(dir.path()).unwrap();
        let latest = s.latest_snapshot().unwrap().unwrap();
        assert_eq!(latest.zxid, Zxid(7));
        let image =
            crate::snapshot::read_whole(&s, SnapshotSlot::Saved(Zxid(7)), latest.seal).unwrap();
        assert_eq!(&image[..], b"image7");
        assert_eq!(s.snapshot_zxids().unwrap(), vec![Zxid(4), Zxid(7)]);
        drop(s);
        // The old tree is gone, so a second open has nothing to move.
        let s = reopen(dir.path()).unwrap();
        assert_eq!(s.snapshot_zxids().unwrap(), vec![Zxid(4), Zxid(7)]);
    }

    /// Snapshot files sealed with FNV-1a by earlier versions still load, and
    /// still fail their check when damaged; new seals are CRC-32.
    #[test]
    fn fnv_sealed_snapshot_files_still_load() {
        use crate::snapshot::{Checksum, SnapshotSeal};
        let dir = tempfile::tempdir().unwrap();
        let mut s = DiskStorage::open(dir.path(), dir.path()).unwrap();
        for (zxid, image) in [(4i64, &b"old image4"[..]), (7, b"old image7")] {
            s.append_snapshot(SnapshotSlot::Saved(Zxid(zxid)), image)
                .unwrap();
            let seal = SnapshotSeal {
                len: image.len() as u64,
                checksum: Checksum::Fnv1a(fnv1a_of(image)),
            };
            s.seal_snapshot(SnapshotSlot::Saved(Zxid(zxid)), Zxid(zxid), seal)
                .unwrap();
        }
        s.save_snapshot(Zxid(9), Bytes::from_static(b"new image9"))
            .unwrap();
        kill(s, dir.path());
        let s = reopen(dir.path()).unwrap();
        let seals = s.snapshot_seals().unwrap();
        assert!(
            matches!(seals[2].1.checksum, Checksum::Crc32(_)),
            "{seals:?}"
        );
        let seal = s.latest_snapshot_at_or_before(Zxid(8)).unwrap().unwrap();
        assert_eq!(seal.zxid, Zxid(7));
        let image = crate::snapshot::read_whole(&s, SnapshotSlot::Saved(Zxid(7)), seal.seal);
        assert_eq!(&image.unwrap()[..], b"old image7");
        s.snapshots.damage(Zxid(7), 2);
        let seal = s.latest_snapshot_at_or_before(Zxid(8)).unwrap().unwrap();
        assert_eq!(
            seal.zxid,
            Zxid(4),
            "the damaged FNV-sealed image is skipped"
        );
    }
}
