//! Where zkd keeps its files, and the data directories it refuses.
//!
//! zkd's files live under `zkd/`: snapshots and epochs in dataDir, the txn
//! log in dataLogDir. Apache ZooKeeper keeps its snapshots, logs and epochs
//! under `version-2/`, and zkd writes nothing there, so a directory is
//! always clearly one or the other. ZooKeeper's state is imported into
//! `zkd/` before the stores open (`import`); a directory that holds
//! ZooKeeper's files beside zkd's own, not imported from them, is refused,
//! untouched. Earlier versions of zkd kept their files under `version-2/`
//! too; those are moved to `zkd/` on open.

use crate::error::{Result, StorageError};
use std::path::{Path, PathBuf};

/// zkd's own directory, in dataDir and in dataLogDir.
pub const ZKD_DIR: &str = "zkd";

/// Apache ZooKeeper's directory (its snapshot format's version).
const ZOOKEEPER_DIR: &str = "version-2";

/// What earlier versions of zkd kept under `version-2/`: the txn log, the
/// sled log before it, snapshots, and the epochs' database.
const EARLIER_ZKD: [&str; 4] = ["txnlog", "log", "snapshots", "data"];

/// ZooKeeper's files this many at most are named in a refusal.
const NAMED: usize = 6;

/// The paths zkd's stores use.
pub(super) struct Layout {
    /// The txn log's segments (`dataLogDir/zkd/txnlog`).
    pub log_dir: PathBuf,
    /// The sled log of earlier versions (`dataLogDir/zkd/log`), moved into
    /// segments if it is there.
    pub sled_log_dir: PathBuf,
    /// Snapshot files (`dataDir/zkd/snapshots`).
    pub snapshot_dir: PathBuf,
    /// The epochs' database (`dataDir/zkd/data`).
    pub epochs_dir: PathBuf,
}

impl Layout {
    /// Refuses ZooKeeper's data in either directory, moves an earlier
    /// zkd's files out of `version-2/`, and says where the stores are.
    pub fn prepare(data_dir: &Path, data_log_dir: &Path) -> Result<Layout> {
        refuse_zookeeper_data(data_dir, data_log_dir)?;
        for dir in distinct(data_dir, data_log_dir) {
            move_earlier_zkd(dir)?;
        }
        let (data, log) = (data_dir.join(ZKD_DIR), data_log_dir.join(ZKD_DIR));
        Ok(Layout {
            log_dir: log.join("txnlog"),
            sled_log_dir: log.join("log"),
            snapshot_dir: data.join("snapshots"),
            epochs_dir: data.join("data"),
        })
    }
}

/// Fails, naming the files, if dataDir or dataLogDir holds Apache
/// ZooKeeper's snapshots, logs or epochs that zkd has not imported. Reads only.
pub fn refuse_zookeeper_data(data_dir: &Path, data_log_dir: &Path) -> Result<()> {
    let imported = data_dir.join(ZKD_DIR).join(super::import::RECORD).exists();
    match imported || zookeeper_files_in(data_dir, data_log_dir)?.is_empty() {
        true => Ok(()),
        false => Err(refusal(data_dir, data_log_dir)),
    }
}

/// ZooKeeper's files in either directory, sorted.
fn zookeeper_files_in(data_dir: &Path, data_log_dir: &Path) -> Result<Vec<PathBuf>> {
    let mut found = Vec::new();
    for dir in distinct(data_dir, data_log_dir) {
        found.extend(zookeeper_files(dir)?);
    }
    found.sort();
    Ok(found)
}

/// Why zkd will not open directories that hold ZooKeeper's files beside
/// zkd's own, which were not imported from them.
pub(super) fn refusal(data_dir: &Path, data_log_dir: &Path) -> StorageError {
    let found = zookeeper_files_in(data_dir, data_log_dir).unwrap_or_default();
    let count = found.len();
    let mut named: Vec<String> = found
        .iter()
        .take(NAMED)
        .map(|p| p.display().to_string())
        .collect();
    if count > NAMED {
        named.push(format!("and {} more", count - NAMED));
    }
    StorageError::Foreign(format!(
        "{} holds Apache ZooKeeper's data ({}) beside zkd's own files under {ZKD_DIR}/, \
         which were not imported from it. zkd will not choose between them: move \
         {ZKD_DIR}/ elsewhere to have zkd import ZooKeeper's data, or move ZooKeeper's \
         {ZOOKEEPER_DIR}/ elsewhere to serve zkd's. Nothing was changed.",
        dirs_named(data_dir, data_log_dir),
        named.join(", ")
    ))
}

/// ZooKeeper's files in `dir/version-2`: its snapshots (`snapshot.<zxid>`,
/// compressed or not), txn logs (`log.<zxid>`) and epoch files.
fn zookeeper_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let v2 = dir.join(ZOOKEEPER_DIR);
    let entries = match std::fs::read_dir(&v2) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_error(&v2, e)),
    };
    let mut found = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| io_error(&v2, e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let is_file = entry.file_type().is_ok_and(|t| t.is_file());
        if is_file && is_zookeepers(&name) {
            found.push(entry.path());
        }
    }
    Ok(found)
}

/// Whether a file in `version-2/` is named as ZooKeeper names its own.
fn is_zookeepers(name: &str) -> bool {
    let epoch = ["acceptedEpoch", "currentEpoch"]
        .iter()
        .any(|e| name == *e || name.strip_prefix(e) == Some(".tmp"));
    epoch || name.starts_with("snapshot.") || name.starts_with("log.")
}

/// Moves what an earlier zkd kept in `dir/version-2` to `dir/zkd`, one
/// entry at a time (each move is one rename, so a crash midway leaves each
/// entry whole in one place, and the next open moves the rest).
fn move_earlier_zkd(dir: &Path) -> Result<()> {
    let (old, new) = (dir.join(ZOOKEEPER_DIR), dir.join(ZKD_DIR));
    let earlier: Vec<&str> = EARLIER_ZKD
        .into_iter()
        .filter(|name| old.join(name).exists())
        .collect();
    if earlier.is_empty() {
        return Ok(());
    }
    std::fs::create_dir_all(&new).map_err(|e| io_error(&new, e))?;
    for name in earlier {
        let (from, to) = (old.join(name), new.join(name));
        if to.exists() {
            return Err(StorageError::Foreign(format!(
                "both {} and {} exist: an earlier zkd's files and this one's; \
                 keep the one you want and remove the other",
                from.display(),
                to.display()
            )));
        }
        std::fs::rename(&from, &to).map_err(|e| io_error(&from, e))?;
        tracing::info!(from = %from.display(), to = %to.display(), "moved an earlier zkd's files");
    }
    sync_dir(&new)?;
    sync_dir(&old)?;
    // Left empty, the old directory goes; anything else in it stays.
    if std::fs::remove_dir(&old).is_ok() {
        sync_dir(dir)?;
    }
    Ok(())
}

/// The data directories, once each.
fn distinct<'a>(data_dir: &'a Path, data_log_dir: &'a Path) -> Vec<&'a Path> {
    match data_dir == data_log_dir {
        true => vec![data_dir],
        false => vec![data_dir, data_log_dir],
    }
}

fn dirs_named(data_dir: &Path, data_log_dir: &Path) -> String {
    match distinct(data_dir, data_log_dir)[..] {
        [one] => format!("dataDir {}", one.display()),
        _ => format!(
            "dataDir {} or dataLogDir {}",
            data_dir.display(),
            data_log_dir.display()
        ),
    }
}

/// Makes the entries of `dir` durable (the renames into and out of it).
fn sync_dir(dir: &Path) -> Result<()> {
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io_error(dir, e))
}

fn io_error(path: &Path, e: std::io::Error) -> StorageError {
    StorageError::Db(format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// Every file under `dir`, with its bytes.
    fn contents(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
        let mut out = BTreeMap::new();
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                out.extend(contents(&path));
            } else {
                out.insert(path.clone(), std::fs::read(&path).unwrap());
            }
        }
        out
    }

    fn zookeeper_dir(dir: &Path) {
        let v2 = dir.join("version-2");
        std::fs::create_dir_all(&v2).unwrap();
        for (name, bytes) in [
            ("snapshot.0", &b"ZKSN"[..]),
            ("log.1", b"ZKLG"),
            ("acceptedEpoch", b"1"),
            ("currentEpoch", b"1"),
        ] {
            std::fs::write(v2.join(name), bytes).unwrap();
        }
        std::fs::write(dir.join("myid"), "1\n").unwrap();
    }

    #[test]
    fn zookeepers_data_is_refused_by_name_and_left_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        zookeeper_dir(dir.path());
        let before = contents(dir.path());
        let refusal = match Layout::prepare(dir.path(), dir.path()) {
            Err(StorageError::Foreign(e)) => e,
            Err(e) => panic!("refused for another reason: {e}"),
            Ok(_) => panic!("ZooKeeper's data directory was taken"),
        };
        for name in ["snapshot.0", "log.1", "acceptedEpoch", "currentEpoch"] {
            assert!(refusal.contains(&format!("version-2/{name}")), "{refusal}");
        }
        assert!(refusal.contains("Nothing was changed"), "{refusal}");
        assert_eq!(contents(dir.path()), before, "ZooKeeper's files changed");
        assert!(!dir.path().join(ZKD_DIR).exists());
    }

    #[test]
    fn zookeepers_logs_in_a_separate_log_dir_are_refused() {
        let (data, log) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        std::fs::create_dir_all(log.path().join("version-2")).unwrap();
        std::fs::write(log.path().join("version-2/log.100000001"), b"ZKLG").unwrap();
        match Layout::prepare(data.path(), log.path()) {
            Err(StorageError::Foreign(e)) => assert!(e.contains("log.100000001"), "{e}"),
            _ => panic!("ZooKeeper's log directory was taken"),
        }
    }

    #[test]
    fn an_earlier_zkds_files_move_out_of_version_2() {
        let dir = tempfile::tempdir().unwrap();
        let v2 = dir.path().join("version-2");
        for name in ["txnlog", "snapshots", "data"] {
            std::fs::create_dir_all(v2.join(name)).unwrap();
            std::fs::write(v2.join(name).join("f"), name).unwrap();
        }
        let layout = Layout::prepare(dir.path(), dir.path()).unwrap();
        assert!(!v2.exists(), "the emptied version-2 stays");
        assert_eq!(std::fs::read(layout.log_dir.join("f")).unwrap(), b"txnlog");
        assert_eq!(
            std::fs::read(layout.snapshot_dir.join("f")).unwrap(),
            b"snapshots"
        );
        assert_eq!(std::fs::read(layout.epochs_dir.join("f")).unwrap(), b"data");
    }

    #[test]
    fn an_earlier_zkds_files_beside_this_ones_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("version-2/data")).unwrap();
        std::fs::create_dir_all(dir.path().join("zkd/data")).unwrap();
        match Layout::prepare(dir.path(), dir.path()) {
            Err(StorageError::Foreign(e)) => assert!(e.contains("both"), "{e}"),
            _ => panic!("two sets of epochs were taken"),
        }
    }

    #[test]
    fn other_files_in_version_2_are_neither_refused_nor_moved() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("version-2/notes")).unwrap();
        std::fs::write(dir.path().join("version-2/README"), "x").unwrap();
        Layout::prepare(dir.path(), dir.path()).unwrap();
        assert!(dir.path().join("version-2/README").exists());
        assert!(dir.path().join("version-2/notes").exists());
    }
}
