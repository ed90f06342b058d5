//! Startup recovery: the newest valid snapshot, then every logged txn after it.

use zkd_protocol::Zxid;
use zkd_storage::{DataTree, SnapshotStore, StorageError, Txn, TxnLog};

/// Rebuilds the tree from durable storage.
pub fn recover(storage: &(impl TxnLog + SnapshotStore)) -> Result<DataTree, StorageError> {
    let mut tree = match storage.latest_snapshot()? {
        Some((zxid, image)) => {
            let tree = DataTree::from_image(image)
                .map_err(|e| StorageError::Corrupt(format!("snapshot {zxid}: {e}")))?;
            tracing::info!(%zxid, "loaded snapshot");
            tree
        }
        None => DataTree::new(),
    };
    let mut prev = tree.last_zxid();
    let mut replayed = 0usize;
    for (zxid, bytes) in storage.read_after(prev)? {
        // A gap means lost history (a damaged snapshot over a purged log):
        // refuse to serve a silently wrong tree.
        if !follows(prev, zxid) {
            return Err(StorageError::Corrupt(format!(
                "log jumps from {prev} to {zxid}"
            )));
        }
        prev = zxid;
        let txn = Txn::from_bytes(bytes)
            .map_err(|e| StorageError::Corrupt(format!("txn {zxid}: {e}")))?;
        if txn.zxid() != zxid {
            return Err(StorageError::Corrupt(format!(
                "txn under key {zxid} says {}",
                txn.zxid()
            )));
        }
        tree.apply(&txn);
        replayed += 1;
    }
    tracing::info!(replayed, last_zxid = %tree.last_zxid(), "recovered data tree");
    Ok(tree)
}

/// Whether `next` may directly follow `prev` in the log: the next counter of
/// the same epoch, or the start of a later epoch.
fn follows(prev: Zxid, next: Zxid) -> bool {
    next == prev.next() || (next.epoch() > prev.epoch() && next.counter() <= 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use zkd_storage::{MemStorage, SnapshotStore, TxnLog};

    #[test]
    fn a_log_with_a_gap_is_refused() {
        let mut s = MemStorage::new();
        let txn = |z: i64| {
            Txn {
                header: zkd_protocol::records::TxnHeader {
                    client_id: 1,
                    cxid: 0,
                    zxid: z,
                    time: 0,
                    r#type: -1,
                },
                body: zkd_storage::TxnBody::Error(zkd_protocol::records::ErrorTxn { err: -101 }),
            }
            .to_bytes()
        };
        for z in [5, 6] {
            s.append(Zxid(z), txn(z)).unwrap();
        }
        assert!(
            matches!(recover(&s), Err(StorageError::Corrupt(_))),
            "txns 1-4 are missing"
        );
        s.save_snapshot(Zxid(4), DataTree::new().to_image())
            .unwrap();
        // The image itself says zxid 0, so its txns 1-4 are still missing.
        assert!(recover(&s).is_err());
    }

    #[test]
    fn epochs_may_restart_the_counter() {
        assert!(follows(Zxid::new(1, 7), Zxid::new(1, 8)));
        assert!(follows(Zxid::new(1, 7), Zxid::new(2, 1)));
        assert!(!follows(Zxid::new(1, 7), Zxid::new(1, 9)));
    }
}
