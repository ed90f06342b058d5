//! Data dirs of earlier versions keep the txn log in a sled database at
//! `dataLogDir/version-2/log` (now `zkd/log`; trees `txnlog` and `txnlog-meta`, and the
//! synced mark beside them). On open its txns and purge mark are copied into
//! segment files, synced, and the old directory is renamed away, then
//! removed. Until the rename the old log is the truth: a copy cut short by a
//! crash is thrown away and made again.

use super::log_mark::LogMark;
use super::segment_log::SegmentLog;
use super::zxid_of;
use crate::error::{Result, StorageError};
use std::path::Path;
use zkd_protocol::Zxid;

/// Key of the purge mark in the old `txnlog-meta` tree.
const PURGED_THROUGH: &str = "purgedThrough";

/// Moves the sled log at `old` (if there is one) into segments at `new`.
pub(super) fn migrate(old: &Path, new: &Path) -> Result<()> {
    let gone = old.with_extension("migrated");
    if gone.exists() {
        remove(&gone);
    }
    if !old.join("db").exists() {
        return Ok(());
    }
    if new.exists() {
        std::fs::remove_dir_all(new).map_err(|e| io(new, e))?;
    }
    let (count, last) = copy(old, new)?;
    // sled's threads may still hold the old files a moment; a rename is fine.
    std::fs::rename(old, &gone).map_err(|e| io(old, e))?;
    if let Some(parent) = old.parent() {
        std::fs::File::open(parent)
            .and_then(|d| d.sync_all())
            .map_err(|e| io(parent, e))?;
    }
    remove(&gone);
    tracing::info!(txns = count, last = ?last, from = %old.display(), to = %new.display(), "txn log moved from sled to segment files");
    Ok(())
}

/// Copies every txn and the purge mark, refusing an old log that lost
/// synced txns; records the synced mark of the copy. Returns how many txns
/// and the last one.
fn copy(old: &Path, new: &Path) -> Result<(usize, Option<Zxid>)> {
    let db = super::open_sled(::sled::Config::new().path(old))?;
    let txns = db.open_tree("txnlog")?;
    let meta = db.open_tree("txnlog-meta")?;
    let purged = meta.get(PURGED_THROUGH)?.map(|v| zxid_of(&v)).transpose()?;
    let last = txns.last()?.map(|(k, _)| zxid_of(&k)).transpose()?;
    if let Some(synced) = LogMark::open(old)?.zxid().filter(|z| *z > Zxid::ZERO) {
        let end = last.max(purged);
        if end.is_none_or(|end| end < synced) {
            return Err(StorageError::Corrupt(format!(
                "the txn log in {} was synced through zxid {synced} but now ends at {end:?}: \
                 refusing to move it; restore it, or (in an ensemble) move it away so this \
                 member resyncs from the leader",
                old.display()
            )));
        }
    }
    let mut log = SegmentLog::open(new)?;
    if let Some(purged) = purged {
        log.reset(purged)?;
    }
    let mut count = 0;
    for item in txns.iter() {
        let (k, v) = item?;
        log.append(zxid_of(&k)?, &v)?;
        count += 1;
    }
    log.sync()?;
    if let Some(last) = last {
        LogMark::open(new)?.record_durably(last)?;
    }
    drop(db);
    Ok((count, last))
}

fn remove(dir: &Path) {
    if let Err(e) = std::fs::remove_dir_all(dir) {
        tracing::warn!(dir = %dir.display(), "could not remove the old txn log: {e}");
    }
}

fn io(path: &Path, e: std::io::Error) -> StorageError {
    StorageError::Db(format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DiskStorage, TxnLog};

    #[test]
    fn a_sled_log_moves_to_segments_with_its_purge_mark() {
        let dir = tempfile::tempdir().unwrap();
        let old = dir.path().join("zkd").join("log");
        {
            let db = ::sled::open(&old).unwrap();
            let txns = db.open_tree("txnlog").unwrap();
            for z in 11..=30i64 {
                txns.insert(super::super::key(Zxid(z)), vec![z as u8; 50])
                    .unwrap();
            }
            let meta = db.open_tree("txnlog-meta").unwrap();
            meta.insert(PURGED_THROUGH, &super::super::key(Zxid(10)))
                .unwrap();
            db.flush().unwrap();
        }
        let s = DiskStorage::open(dir.path(), dir.path()).unwrap();
        assert_eq!(s.purged_through().unwrap(), Some(Zxid(10)));
        assert_eq!(s.first_zxid().unwrap(), Some(Zxid(11)));
        assert_eq!(s.last_zxid().unwrap(), Some(Zxid(30)));
        let page = s.read_range(Zxid(20), 3).unwrap();
        assert_eq!(page[0], (Zxid(21), bytes::Bytes::from(vec![21u8; 50])));
        assert!(!old.exists(), "the old log is gone");
        drop(s);
        let s = DiskStorage::open(dir.path(), dir.path()).unwrap();
        assert_eq!(s.last_zxid().unwrap(), Some(Zxid(30)));
    }
}
