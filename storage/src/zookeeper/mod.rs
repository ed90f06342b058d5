//! Apache ZooKeeper's data directory, read: the newest whole snapshot in
//! `dataDir/version-2`, the txn logs after it in `dataLogDir/version-2`
//! replayed onto it (a fuzzy snapshot's txns again, as ZooKeeper does), the
//! digests ZooKeeper stored checked against the tree, and the epoch files.
//! Reading writes nothing: ZooKeeper's files are only ever read. `export`
//! writes a new `version-2/` from zkd's tree, for the way back.

mod digest;
mod export;
mod jute_reader;
mod logged_through;
mod snapshot;
mod txn_log;

pub use digest::zookeeper_digest;
pub use export::export;
use jute_reader::ReadError;
pub use logged_through::logged_through;
use std::path::{Path, PathBuf};
#[cfg(test)]
pub(crate) use txn_log::log_of;
pub use txn_log::LogEnd;
use zkd_protocol::Zxid;

use crate::error::StorageError;
use crate::{DataTree, Txn};

/// ZooKeeper's directory under dataDir and dataLogDir.
pub const VERSION_DIR: &str = "version-2";

/// How many snapshots are tried, newest first, before giving up (as ZooKeeper).
const SNAPSHOTS_TRIED: usize = 100;

/// A failure in one of ZooKeeper's files, and where in it.
#[derive(Debug)]
pub struct FileError {
    pub path: PathBuf,
    pub offset: u64,
    pub what: String,
}

impl FileError {
    fn io(path: &Path, offset: u64, e: std::io::Error) -> FileError {
        FileError::read(path, offset, ReadError::Io(e))
    }

    fn read(path: &Path, offset: u64, e: ReadError) -> FileError {
        FileError {
            path: path.to_owned(),
            offset,
            what: e.to_string(),
        }
    }
}

impl std::fmt::Display for FileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (path, offset, what) = (self.path.display(), self.offset, &self.what);
        write!(f, "{path}, at byte {offset}: {what}")
    }
}

impl From<FileError> for StorageError {
    fn from(e: FileError) -> StorageError {
        StorageError::Corrupt(format!("ZooKeeper's data: {e}"))
    }
}

/// What ZooKeeper's files hold.
#[derive(Debug)]
pub struct ZooKeeperData {
    /// The tree and sessions, at the last zxid the logs hold.
    pub tree: DataTree,
    /// The epoch files (a standalone ZooKeeper writes none).
    pub accepted_epoch: Option<i64>,
    pub current_epoch: Option<i64>,
    /// The snapshot the tree started from, and the logs replayed onto it.
    pub snapshot: PathBuf,
    pub logs: Vec<PathBuf>,
    /// A last record cut short and dropped, if one was.
    pub torn: Option<(PathBuf, u64)>,
}

/// One of ZooKeeper's files: its path and the zxid in its name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct NamedFile {
    pub zxid: Zxid,
    pub path: PathBuf,
}

/// ZooKeeper's files named `prefix.<hex zxid>` in `dir/version-2`, oldest
/// first. A compressed snapshot (`.gz`, `.snappy`) is listed too, to be refused.
pub fn files(dir: &Path, prefix: &str) -> Result<Vec<NamedFile>, StorageError> {
    let v2 = dir.join(VERSION_DIR);
    let entries = match std::fs::read_dir(&v2) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(StorageError::Db(format!("{}: {e}", v2.display()))),
    };
    let mut found = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix(prefix).and_then(|r| r.strip_prefix('.')) else {
            continue;
        };
        let hex = rest.split('.').next().unwrap_or_default();
        if let Ok(zxid) = u64::from_str_radix(hex, 16) {
            let path = entry.path();
            found.push(NamedFile {
                zxid: Zxid(zxid as i64),
                path,
            });
        }
    }
    found.sort();
    Ok(found)
}

/// Where a load hands on what it replays: the tree once it is exact (the
/// snapshot's fuzzy txns are behind it: the replay has applied the txn
/// after the zxid its digest names), then every txn applied after that, in
/// order. Without a digest the tree is only known exact at the end, and
/// `exact` is never called.
pub trait ReplaySink {
    /// The tree, exact at its last zxid.
    fn exact(&mut self, tree: &DataTree) -> Result<(), StorageError>;
    /// A txn applied after the tree was handed on (or after the last `txn`).
    fn txn(&mut self, txn: &Txn) -> Result<(), StorageError>;
}

/// Reads ZooKeeper's state from `data_dir` and `log_dir`, handing `sink` the
/// tree once exact and the txns after it: `None` if they hold no snapshot
/// and no log (an empty `version-2` is a fresh tree).
pub fn load(
    data_dir: &Path,
    log_dir: &Path,
    sink: &mut dyn ReplaySink,
) -> Result<Option<ZooKeeperData>, StorageError> {
    let snapshots = files(data_dir, "snapshot")?;
    let logs = files(log_dir, "log")?;
    if snapshots.is_empty() && logs.is_empty() {
        return Ok(None);
    }
    let (snapshot, loaded) = newest_snapshot(&snapshots)?;
    let mut replay = Replay::new(loaded, sink);
    let replayed = logs_after(&logs, snapshot.zxid);
    for log in &replayed {
        replay.log(&log.path)?;
    }
    let torn = replay.torn.clone();
    let tree = replay.finish()?;
    let epochs = |name| read_epoch(&data_dir.join(VERSION_DIR).join(name));
    Ok(Some(ZooKeeperData {
        tree,
        accepted_epoch: epochs("acceptedEpoch")?,
        current_epoch: epochs("currentEpoch")?,
        snapshot: snapshot.path.clone(),
        logs: replayed.into_iter().map(|l| l.path).collect(),
        torn,
    }))
}

/// The newest snapshot that reads whole, trying older ones as ZooKeeper
/// does when one is cut short or corrupt; none at all is refused (with logs
/// and no snapshot, ZooKeeper refuses to start too).
fn newest_snapshot(
    snapshots: &[NamedFile],
) -> Result<(&NamedFile, snapshot::Snapshot), StorageError> {
    let mut reasons = Vec::new();
    for candidate in snapshots.iter().rev().take(SNAPSHOTS_TRIED) {
        let name = candidate.path.display();
        if candidate
            .path
            .extension()
            .is_some_and(|e| e == "gz" || e == "snappy")
        {
            return Err(StorageError::Foreign(format!(
                "{name} is compressed (snapshot.compression.method); zkd reads uncompressed \
                 snapshots: start ZooKeeper once without compression so it writes one"
            )));
        }
        match snapshot::looks_whole(&candidate.path) {
            Ok(true) => {}
            Ok(false) => {
                tracing::warn!(snapshot = %name, "invalid snapshot: it does not end as a whole one does");
                reasons.push(format!("{name}: cut short"));
                continue;
            }
            Err(e) => return Err(StorageError::Db(format!("{name}: {e}"))),
        }
        match snapshot::read(&candidate.path, candidate.zxid) {
            Ok(s) => return Ok((candidate, s)),
            Err(e) => {
                tracing::warn!(error = %e, "invalid snapshot, trying an older one");
                reasons.push(e.to_string());
            }
        }
    }
    Err(StorageError::Corrupt(format!(
        "ZooKeeper's data holds no snapshot that reads whole ({})",
        if reasons.is_empty() {
            "none at all, only logs".into()
        } else {
            reasons.join("; ")
        }
    )))
}

/// The logs that can hold txns after `zxid`: the last one starting at or
/// before it, and every later one (ZooKeeper's `getLogFiles`).
fn logs_after(logs: &[NamedFile], zxid: Zxid) -> Vec<NamedFile> {
    let start = logs
        .iter()
        .rev()
        .find(|l| l.zxid <= zxid)
        .map_or(Zxid::ZERO, |l| l.zxid);
    logs.iter().filter(|l| l.zxid >= start).cloned().collect()
}

/// An epoch file: a decimal number; absent is None.
fn read_epoch(path: &Path) -> Result<Option<i64>, StorageError> {
    match std::fs::read_to_string(path) {
        Ok(text) => text.trim().parse().map(Some).map_err(|_| {
            StorageError::Corrupt(format!(
                "{}: not an epoch: {:?}",
                path.display(),
                text.trim()
            ))
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(StorageError::Db(format!("{}: {e}", path.display()))),
    }
}

/// The logs replayed onto a snapshot's tree, with ZooKeeper's digests checked.
struct Replay<'s> {
    tree: DataTree,
    /// The snapshot's digest, until the replay reaches its zxid.
    pending: Option<snapshot::ZxidDigest>,
    /// The digest ZooKeeper logged with the last txn applied, and where.
    last_digest: Option<(i64, PathBuf)>,
    torn: Option<(PathBuf, u64)>,
    /// The snapshot's digest zxid: the tree is exact after the next txn.
    exact_after: Option<Zxid>,
    sink: &'s mut dyn ReplaySink,
    handed_on: bool,
}

impl<'s> Replay<'s> {
    fn new(loaded: snapshot::Snapshot, sink: &'s mut dyn ReplaySink) -> Replay<'s> {
        Replay {
            tree: loaded.tree,
            pending: loaded.digest,
            last_digest: None,
            torn: None,
            exact_after: loaded.digest.map(|d| d.zxid),
            sink,
            handed_on: false,
        }
    }

    fn log(&mut self, path: &Path) -> Result<(), StorageError> {
        let end = txn_log::read(path, |logged| {
            if logged.txn.zxid() <= self.tree.last_zxid() {
                return Ok(());
            }
            self.tree.apply(&logged.txn);
            self.last_digest = logged.digest.map(|d| (d, path.to_owned()));
            self.check_snapshot_digest(path);
            self.hand_on(Some(&logged.txn))
        })?;
        if let LogEnd::Torn(offset) = end {
            tracing::warn!(log = %path.display(), offset, "last transaction was partial; dropped");
            self.torn = Some((path.to_owned(), offset));
        }
        Ok(())
    }

    /// Hands the sink the tree once it is exact, then each txn after that
    /// (`txn`, just applied). The tree is exact once the txn after the
    /// snapshot's digest zxid is applied: the snapshot may have held part
    /// of that one, never of a later one.
    fn hand_on(&mut self, txn: Option<&Txn>) -> Result<(), StorageError> {
        if self.handed_on {
            return txn.map_or(Ok(()), |t| self.sink.txn(t));
        }
        if self.exact_after.is_some_and(|z| self.tree.last_zxid() > z) {
            self.sink.exact(&self.tree)?;
            self.handed_on = true;
        }
        Ok(())
    }

    /// Compares the snapshot's digest once the txn of its zxid is applied,
    /// as ZooKeeper does (never the loaded tree itself). A mismatch is only
    /// logged, as ZooKeeper logs it: the snapshot may hold part of the txn
    /// after its digest's (ZooKeeper applies a txn before it moves its last
    /// processed zxid), and the digest logged with the last txn is checked
    /// at the end.
    fn check_snapshot_digest(&mut self, at: &Path) {
        let Some(expected) = self.pending else {
            return;
        };
        let zxid = self.tree.last_zxid();
        if zxid < expected.zxid {
            return;
        }
        self.pending = None;
        if zxid > expected.zxid {
            // Not replayed: it is the snapshot's own zxid, or missing from the logs.
            tracing::debug!(zxid = %expected.zxid, "the snapshot's digest is not compared");
            return;
        }
        let ours = zookeeper_digest(&self.tree);
        if ours != expected.digest {
            tracing::warn!(
                zxid = %expected.zxid,
                log = %at.display(),
                stored = format!("{:#x}", expected.digest),
                tree = format!("{ours:#x}"),
                "digest mismatch: the tree replayed to the snapshot's digest zxid differs (ZooKeeper logs this and goes on)"
            );
        }
    }

    fn finish(self) -> Result<DataTree, StorageError> {
        if let Some((expected, log)) = self.last_digest {
            let ours = zookeeper_digest(&self.tree);
            if ours != expected {
                return Err(StorageError::Corrupt(format!(
                    "ZooKeeper's data: the tree at zxid {} does not match the digest {} \
                     logged with it ({expected:#x}, the tree's is {ours:#x})",
                    self.tree.last_zxid(),
                    log.display()
                )));
            }
        }
        Ok(self.tree)
    }
}
