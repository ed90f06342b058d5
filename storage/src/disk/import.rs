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

use super::layout::ZKD_DIR;
use super::DiskStorage;
use crate::epoch_store::EpochStore;
use crate::error::{Result, StorageError};
use crate::snapshot::{SnapshotSlot, SnapshotWriter, SNAPSHOT_CHUNK};
use crate::store::{install_snapshot, SnapshotSource};
use crate::zookeeper::{self, ZooKeeperData, VERSION_DIR};
use crate::DataTree;
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
    let Some(found) = zookeeper::load(data_dir, data_log_dir)? else {
        return Ok(None);
    };
    import(found, &stamps, data_dir, data_log_dir).map(Some)
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
    let found = zookeeper::load(from_data, from_log)?.ok_or_else(|| {
        StorageError::Foreign(format!(
            "{} holds no snapshot or log of ZooKeeper's under {VERSION_DIR}/",
            from_data.display()
        ))
    })?;
    import(found, &stamps, to_data, to_log)
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

fn import(
    found: ZooKeeperData,
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
    let tree = &found.tree;
    {
        let mut store = DiskStorage::open(&stage_data, &stage_log)?;
        save_tree(&mut store, tree)?;
        let epoch_of_zxid = tree.last_zxid().0 >> 32;
        let current = found.current_epoch.unwrap_or(epoch_of_zxid);
        let accepted = found.accepted_epoch.unwrap_or(current);
        store.set_accepted_epoch(epoch(accepted)?)?;
        store.set_current_epoch(epoch(current)?)?;
    }
    let imported = Imported {
        zxid: tree.last_zxid(),
        nodes: tree.node_count(),
        sessions: tree.sessions().len(),
        snapshot: found.snapshot.clone(),
        logs: found.logs.len(),
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
        ms = started.elapsed().as_millis() as u64,
        "imported Apache ZooKeeper's data; its files are unchanged"
    );
    Ok(imported)
}

/// An empty directory at `dir`, whatever an earlier, unfinished import left there.
fn fresh(dir: &Path) -> Result<PathBuf> {
    if dir.exists() {
        std::fs::remove_dir_all(dir).map_err(|e| io(dir, e))?;
    }
    std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
    Ok(dir.to_owned())
}

/// Writes `tree` as the store's snapshot, a piece at a time; the log starts after it.
fn save_tree(store: &mut DiskStorage, tree: &DataTree) -> Result<()> {
    let mut writer = SnapshotWriter::new(store, SnapshotSlot::Staging)?;
    let mut cursor = tree.start_snapshot();
    loop {
        let done = cursor.step(tree, 4096);
        while let Some(chunk) = cursor.take_chunk(SNAPSHOT_CHUNK) {
            writer.write(store, &chunk)?;
        }
        if done {
            break;
        }
    }
    writer.write(store, &cursor.finish())?;
    let seal = writer.seal_so_far();
    install_snapshot(store, tree.last_zxid(), SnapshotSource::Staged(seal))
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
