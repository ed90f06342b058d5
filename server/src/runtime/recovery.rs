//! Startup recovery: the newest valid snapshot, then every logged txn after it.

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
    let from = tree.last_zxid();
    let mut replayed = 0usize;
    for (zxid, bytes) in storage.read_after(from)? {
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
