//! Serving Apache ZooKeeper's data directory: its state (the tree, the
//! sessions, the epochs) is read once into zkd's own files beside it, and
//! zkd serves those from then on. ZooKeeper's files are only ever read, so
//! ZooKeeper can start from them again.
//!
//! The import is whole or absent: it is written under `zkd.importing/` and
//! renamed to `zkd/` when complete (the log directory first when it is a
//! separate one), with a record of ZooKeeper's files as they were. A later
//! start that finds ZooKeeper's files changed since (ZooKeeper ran again)
//! refuses, rather than serve an older tree than ZooKeeper's.

use super::imported_history::HistoryWriter;
use super::layout::ZKD_DIR;
use super::DiskStorage;
use crate::epoch_store::EpochStore;
use crate::error::{Result, StorageError};
use crate::zookeeper::{self, ZooKeeperData, VERSION_DIR};
use std::path::{Path, PathBuf};
use zkd_protocol::Zxid;

/// Where a complete import records what it read, in dataDir's `zkd/`.
pub(super) const RECORD: &str = "imported-from-zookeeper";
/// Where an import is written until it is complete.
const STAGING: &str = "zkd.importing";

/// What an import read.
#[derive(Debug)]
pub struct Imported {
    pub zxid: Zxid,
    pub nodes: usize,
    pub sessions: usize,
    pub snapshot: PathBuf,
    pub logs: usize,
    /// ZooKeeper's txns that zkd's log holds, around its snapshot (0 when
    /// the snapshot is of the last zxid).
    pub history: u64,
}

/// Makes `data_dir` and `data_log_dir` ready for zkd's stores: ZooKeeper's
/// state is imported if they hold it and no zkd state yet (the result says
/// what was read); ZooKeeper's files changed since an import, or beside a
/// zkd state that was never imported, are refused.
pub fn prepare(data_dir: &Path, data_log_dir: &Path) -> Result<Option<Imported>> {
    let stamps = zookeeper_stamps(data_dir, data_log_dir)?;
    let zkd_data = data_dir.join(ZKD_DIR);
    let record = zkd_data.join(RECORD);
    if stamps.is_empty() {
        return Ok(None);
    }
    if record.exists() {
        return check_unchanged(&record, &stamps).map(|()| None);
    }
    if zkd_data.exists() || (data_log_dir != data_dir && log_dir_is_zkds(data_dir, data_log_dir)) {
        return Err(super::layout::refusal(data_dir, data_log_dir));
    }
    import((data_dir, data_log_dir), &stamps, data_dir, data_log_dir).map(Some)
}

/// Imports what `from_data` and `from_log` hold into zkd's stores under
/// `to_data` and `to_log`, which must hold no zkd state (`zkd import`).
pub fn import_from(
    from_data: &Path,
    from_log: &Path,
    to_data: &Path,
    to_log: &Path,
) -> Result<Imported> {
    if to_data.join(ZKD_DIR).exists() || to_log.join(ZKD_DIR).exists() {
        return Err(StorageError::Foreign(format!(
            "{} already holds zkd's files: import into an empty directory",
            to_data.display()
        )));
    }
    let stamps = zookeeper_stamps(from_data, from_log)?;
    if stamps.is_empty() {
        return Err(nothing_to_import(from_data));
    }
    import((from_data, from_log), &stamps, to_data, to_log)
}

fn nothing_to_import(dir: &Path) -> StorageError {
    StorageError::Foreign(format!(
        "{} holds no snapshot or log of ZooKeeper's under {VERSION_DIR}/",
        dir.display()
    ))
}

/// The log directory's `zkd/` exists without dataDir's: left by an import
/// that stopped between its two renames (then dataDir's staging is there,
/// and the log's is removed to import again), or someone else's.
fn log_dir_is_zkds(data_dir: &Path, data_log_dir: &Path) -> bool {
    let log = data_log_dir.join(ZKD_DIR);
    if !log.exists() {
        return false;
    }
    if data_dir.join(STAGING).exists() && std::fs::remove_dir_all(&log).is_ok() {
        return false;
    }
    true
}

/// Reads ZooKeeper's files in `from` (dataDir, dataLogDir) into zkd's
/// stores staged beside `data_dir` and `log_dir`, then moves them into place.
fn import(
    (from_data, from_log): (&Path, &Path),
    stamps: &[String],
    data_dir: &Path,
    log_dir: &Path,
) -> Result<Imported> {
    let started = std::time::Instant::now();
    let stage_data = fresh(&data_dir.join(STAGING))?;
    let stage_log = match log_dir == data_dir {
        true => stage_data.clone(),
        false => fresh(&log_dir.join(STAGING))?,
    };
    let imported = {
        let mut store = DiskStorage::open(&stage_data, &stage_log)?;
        let mut history = HistoryWriter::new(&mut store, from_log);
        let found = zookeeper::load(from_data, from_log, &mut history)?
            .ok_or_else(|| nothing_to_import(from_data))?;
        let kept = history.finish(&found.tree)?;
        save_epochs(&mut store, &found)?;
        Imported {
            zxid: found.tree.last_zxid(),
            nodes: found.tree.node_count(),
            sessions: found.tree.sessions().len(),
            snapshot: found.snapshot,
            logs: found.logs.len(),
            history: kept,
        }
    };
    write_record(&stage_data.join(ZKD_DIR).join(RECORD), &imported, stamps)?;
    if stage_log != stage_data {
        move_into_place(&stage_log, log_dir)?;
    }
    move_into_place(&stage_data, data_dir)?;
    tracing::info!(
        zxid = %imported.zxid,
        nodes = imported.nodes,
        sessions = imported.sessions,
        snapshot = %imported.snapshot.display(),
        logs = imported.logs,
        history = imported.history,
        ms = started.elapsed().as_millis() as u64,
        "imported Apache ZooKeeper's data; its files are unchanged"
    );
    Ok(imported)
}

/// ZooKeeper's epochs, or the last zxid's when it wrote no epoch files (standalone).
fn save_epochs(store: &mut DiskStorage, found: &ZooKeeperData) -> Result<()> {
    let epoch_of_zxid = found.tree.last_zxid().0 >> 32;
    let current = found.current_epoch.unwrap_or(epoch_of_zxid);
    let accepted = found.accepted_epoch.unwrap_or(current);
    store.set_accepted_epoch(epoch(accepted)?)?;
    store.set_current_epoch(epoch(current)?)
}

/// An empty directory at `dir`, whatever an earlier, unfinished import left there.
fn fresh(dir: &Path) -> Result<PathBuf> {
    if dir.exists() {
        std::fs::remove_dir_all(dir).map_err(|e| io(dir, e))?;
    }
    std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
    Ok(dir.to_owned())
}

fn epoch(value: i64) -> Result<u32> {
    u32::try_from(value).map_err(|_| {
        StorageError::Corrupt(format!("ZooKeeper's data: epoch {value} is out of range"))
    })
}

/// Renames `stage/zkd` to `dir/zkd` (one rename: the import appears whole),
/// syncs `dir`, and removes the staging directory.
fn move_into_place(stage: &Path, dir: &Path) -> Result<()> {
    let (from, to) = (stage.join(ZKD_DIR), dir.join(ZKD_DIR));
    std::fs::rename(&from, &to).map_err(|e| io(&to, e))?;
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io(dir, e))?;
    std::fs::remove_dir_all(stage).map_err(|e| io(stage, e))
}

/// ZooKeeper's snapshots, logs and epoch files in both directories, each
/// as "path length mtime": what an import read, to tell later whether
/// ZooKeeper wrote since. Empty if there is no snapshot and no log.
fn zookeeper_stamps(data_dir: &Path, log_dir: &Path) -> Result<Vec<String>> {
    let mut files = zookeeper::files(data_dir, "snapshot")?;
    files.extend(zookeeper::files(log_dir, "log")?);
    if files.is_empty() {
        return Ok(Vec::new());
    }
    let mut paths: Vec<PathBuf> = files.into_iter().map(|f| f.path).collect();
    for name in ["acceptedEpoch", "currentEpoch"] {
        paths.push(data_dir.join(VERSION_DIR).join(name));
    }
    let mut stamps = Vec::new();
    for path in paths {
        let Ok(meta) = std::fs::metadata(&path) else {
            continue;
        };
        let mtime = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos());
        stamps.push(format!("{} {} {mtime}", path.display(), meta.len()));
    }
    stamps.sort();
    Ok(stamps)
}

fn write_record(path: &Path, imported: &Imported, stamps: &[String]) -> Result<()> {
    let mut text = format!(
        "# zkd imported Apache ZooKeeper's data from these files and serves its own from here on.\n\
         zxid={:#x}\nnodes={}\nsessions={}\n",
        imported.zxid.0, imported.nodes, imported.sessions
    );
    for stamp in stamps {
        text.push_str(&format!("file={stamp}\n"));
    }
    std::fs::write(path, text)
        .and_then(|()| std::fs::File::open(path)?.sync_all())
        .map_err(|e| io(path, e))
}

/// Refuses if ZooKeeper's files differ from those the import read.
fn check_unchanged(record: &Path, stamps: &[String]) -> Result<()> {
    let text = std::fs::read_to_string(record).map_err(|e| io(record, e))?;
    let read: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("file="))
        .collect();
    if read == stamps.iter().map(String::as_str).collect::<Vec<_>>() {
        return Ok(());
    }
    let dir = record.parent().and_then(Path::parent).unwrap_or(record);
    Err(StorageError::Foreign(format!(
        "ZooKeeper's files in {dir}/{VERSION_DIR} changed since zkd imported them \
         (ZooKeeper ran again; the files zkd read are listed in {record}). zkd will not \
         serve its older copy: to serve ZooKeeper's newer state, move {dir}/{ZKD_DIR} \
         away and start zkd again, which imports it afresh.",
        dir = dir.display(),
        record = record.display(),
    )))
}

fn io(path: &Path, e: std::io::Error) -> StorageError {
    StorageError::Db(format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::{SnapshotRef, SnapshotStore};
    use crate::store::{load_snapshot, lowest_cut, VerifiedSnapshots};
    use crate::txn_log::TxnLog;
    use crate::{DataTree, Txn, TxnBody};
    use zkd_protocol::records::{Acl, CreateTxn, TxnHeader};
    use zkd_protocol::OpCode;

    fn create(zxid: i64) -> Txn {
        let body = TxnBody::Create(
            OpCode::Create,
            CreateTxn {
                path: format!("/n{zxid:x}"),
                data: Some(bytes::Bytes::from_static(b"v")),
                acl: vec![Acl::world(31)].into(),
                ephemeral: false,
                parent_c_version: 1,
            },
        );
        let header = TxnHeader {
            client_id: 0,
            cxid: 1,
            zxid,
            time: 1_700_000_000_000,
            r#type: OpCode::Create as i32,
        };
        Txn { header, body }
    }

    /// ZooKeeper's files: a snapshot (with its digest) of the txns
    /// `snapshot`, and a log of the txns `logged`.
    fn zookeeper_dir(snapshot: &[i64], logged: &[i64]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let mut tree = DataTree::new();
        snapshot.iter().for_each(|z| drop(tree.apply(&create(*z))));
        zookeeper::export(&tree, 1, 1, dir.path()).unwrap();
        let entries: Vec<Vec<u8>> = logged
            .iter()
            .map(|z| create(*z).to_bytes().to_vec())
            .collect();
        let log = dir.path().join(VERSION_DIR).join("log.100000001");
        std::fs::write(log, zookeeper::log_of(&entries, 100)).unwrap();
        dir
    }

    /// The tree the imported store recovers: its newest snapshot, then its log.
    fn recovered(store: &DiskStorage) -> DataTree {
        let (zxid, seal) = *store.snapshot_seals().unwrap().last().unwrap();
        let mut tree = load_snapshot(store, SnapshotRef { zxid, seal }).unwrap();
        for item in store.txns_after(zxid, 0) {
            tree.apply(&Txn::from_bytes(item.unwrap().1).unwrap());
        }
        tree
    }

    #[test]
    fn zookeepers_txns_around_the_snapshot_stay_zkds_history() {
        let logged: Vec<i64> = (0x100000001..=0x100000009).collect();
        let from = zookeeper_dir(&logged[..4], &logged);
        let to = tempfile::tempdir().unwrap();
        let imported = import_from(from.path(), from.path(), to.path(), to.path()).unwrap();
        assert_eq!((imported.zxid, imported.history), (Zxid(0x100000009), 9));
        let store = DiskStorage::open(to.path(), to.path()).unwrap();
        let snapshots: Vec<Zxid> = (store.snapshot_seals().unwrap().into_iter())
            .map(|(z, _)| z)
            .collect();
        // The digest is at 4, and 5 may be half in the image.
        assert_eq!(
            snapshots,
            vec![Zxid(0x100000005)],
            "where the tree is exact"
        );
        assert_eq!(store.first_zxid().unwrap(), Some(Zxid(0x100000001)));
        assert_eq!(store.last_zxid().unwrap(), Some(Zxid(0x100000009)));
        // A TRUNC may cut the log back to the snapshot, not below it.
        let cut = lowest_cut(&store, &mut VerifiedSnapshots::default()).unwrap();
        assert_eq!(cut, Zxid(0x100000005));
        let tree = recovered(&store);
        assert_eq!(tree.last_zxid(), Zxid(0x100000009));
        assert_eq!(tree.node_count(), imported.nodes);
        assert!(tree.node("/n100000009").is_some());
    }

    #[test]
    fn txns_of_an_earlier_epoch_are_not_history() {
        let mut logged: Vec<i64> = (0x100000001..=0x100000004).collect();
        logged.extend(0x200000001..=0x200000003);
        let from = zookeeper_dir(&logged[..6], &logged);
        let to = tempfile::tempdir().unwrap();
        let imported = import_from(from.path(), from.path(), to.path(), to.path()).unwrap();
        assert_eq!(imported.history, 3, "epoch 2's txns only");
        let store = DiskStorage::open(to.path(), to.path()).unwrap();
        assert_eq!(store.first_zxid().unwrap(), Some(Zxid(0x200000001)));
        assert_eq!(recovered(&store).last_zxid(), Zxid(0x200000003));
    }

    /// The digest ZooKeeper logs with a txn (a TxnDigest: version 2, then
    /// the tree's digest after it) must match the imported tree's.
    #[test]
    fn a_logged_digest_that_does_not_match_the_tree_is_refused() {
        let snapshot: Vec<i64> = (0x100000001..=0x100000004).collect();
        let mut after = DataTree::new();
        snapshot
            .iter()
            .chain(&[0x100000005])
            .for_each(|z| drop(after.apply(&create(*z))));
        let right = crate::zookeeper::zookeeper_digest(&after);
        for (digest, imports) in [(right, true), (right ^ 1, false)] {
            let from = zookeeper_dir(&snapshot, &[]);
            let mut entry = create(0x100000005).to_bytes().to_vec();
            entry.extend_from_slice(&2i32.to_be_bytes());
            entry.extend_from_slice(&digest.to_be_bytes());
            let log = from.path().join(VERSION_DIR).join("log.100000005");
            std::fs::write(log, zookeeper::log_of(&[entry], 100)).unwrap();
            let to = tempfile::tempdir().unwrap();
            let result = import_from(from.path(), from.path(), to.path(), to.path());
            match imports {
                true => assert_eq!(result.unwrap().zxid, Zxid(0x100000005)),
                false => {
                    let e = result.unwrap_err().to_string();
                    assert!(e.contains("does not match the digest"), "{e}");
                }
            }
        }
    }

    #[test]
    fn txns_that_skip_a_zxid_leave_only_a_snapshot_of_the_end() {
        let snapshot: Vec<i64> = (0x100000001..=0x100000004).collect();
        let from = zookeeper_dir(&snapshot, &[0x100000005, 0x100000006, 0x100000008]);
        let to = tempfile::tempdir().unwrap();
        let imported = import_from(from.path(), from.path(), to.path(), to.path()).unwrap();
        assert_eq!((imported.zxid, imported.history), (Zxid(0x100000008), 0));
        let store = DiskStorage::open(to.path(), to.path()).unwrap();
        let newest = store.snapshot_seals().unwrap().last().unwrap().0;
        assert_eq!(newest, Zxid(0x100000008));
        assert_eq!(store.last_zxid().unwrap(), None, "an empty log");
        assert_eq!(recovered(&store).node_count(), imported.nodes);
    }
}
