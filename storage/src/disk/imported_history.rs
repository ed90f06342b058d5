//! An import written as zkd's own history: a snapshot of the tree where it
//! is first exact (ZooKeeper's fuzzy snapshot is behind the replay), the
//! txns of its epoch that ZooKeeper logged up to there, and the txns after
//! it, in zkd's log. So a leader can bring a member that stopped a little
//! behind it up by DIFF, and cut back one that logged a txn nobody
//! committed by TRUNC, as ZooKeeper's leader does from its own logs.
//!
//! ```text
//!   zkd log:   purge mark | txns up to E (ZooKeeper's, one epoch) | txns after E
//!   snapshot:                                                    ^ at E
//! ```
//!
//! Without that point (no digest in the snapshot), or with a gap in the
//! txns after it, the snapshot is of the last zxid and the log starts empty.

use super::DiskStorage;
use crate::error::Result;
use crate::snapshot::{SnapshotSlot, SnapshotWriter, SNAPSHOT_CHUNK};
use crate::store::{install_snapshot, SnapshotSource};
use crate::txn_log::TxnLog;
use crate::zookeeper::{self, ReplaySink};
use crate::{DataTree, Txn};
use std::path::Path;
use zkd_protocol::Zxid;

/// ZooKeeper's txns up to the snapshot kept at most: as many as a member
/// keeps in memory for DIFF, and no more bytes than its history holds.
const PRIOR_TXNS: usize = 10_000;
const PRIOR_BYTES: usize = 64 << 20;

/// Writes the history into a fresh store as the replay hands it on.
pub(super) struct HistoryWriter<'s> {
    store: &'s mut DiskStorage,
    /// ZooKeeper's dataLogDir, read for the txns before the snapshot.
    zookeeper_logs: &'s Path,
    /// The last zxid written (snapshot or log), while the history is whole.
    last: Option<Zxid>,
    gap: bool,
    /// Txns in zkd's log.
    kept: u64,
}

impl<'s> HistoryWriter<'s> {
    pub(super) fn new(store: &'s mut DiskStorage, zookeeper_logs: &'s Path) -> HistoryWriter<'s> {
        HistoryWriter {
            store,
            zookeeper_logs,
            last: None,
            gap: false,
            kept: 0,
        }
    }

    /// Makes the history durable, ending at `tree`: the txns logged (synced),
    /// or a snapshot of `tree` alone. Returns how many txns the log holds.
    pub(super) fn finish(self, tree: &DataTree) -> Result<u64> {
        if self.last == Some(tree.last_zxid()) && !self.gap {
            self.store.sync()?;
            return Ok(self.kept);
        }
        install_tree(self.store, tree)?;
        Ok(0)
    }

    fn append(&mut self, zxid: Zxid, txn: bytes::Bytes) -> Result<()> {
        self.store.append(zxid, txn)?;
        self.last = Some(zxid);
        self.kept += 1;
        Ok(())
    }
}

impl ReplaySink for HistoryWriter<'_> {
    fn exact(&mut self, tree: &DataTree) -> Result<()> {
        let at = tree.last_zxid();
        let prior = zookeeper::logged_through(self.zookeeper_logs, at, PRIOR_TXNS, PRIOR_BYTES);
        let Some((first, _)) = prior.first() else {
            install_tree(self.store, tree)?;
            self.last = Some(at);
            return Ok(());
        };
        // Everything before the first kept txn is in the snapshot only: a
        // TRUNC may not cut below the snapshot (store::lowest_cut).
        self.store.reset(Zxid(first.0 - 1))?;
        for (zxid, txn) in prior {
            self.append(zxid, txn)?;
        }
        let image = write_image(self.store, SnapshotSlot::Saved(at), tree)?;
        image.seal(self.store, at)
    }

    fn txn(&mut self, txn: &Txn) -> Result<()> {
        let Some(prev) = self.last.filter(|_| !self.gap) else {
            return Ok(());
        };
        if !txn.zxid().follows(prev) {
            tracing::warn!(%prev, next = %txn.zxid(), "ZooKeeper's logs skip txns after their snapshot; zkd's history starts at the last zxid");
            self.gap = true;
            return Ok(());
        }
        self.append(txn.zxid(), txn.to_bytes())
    }
}

/// Writes `tree` as the store's only snapshot, a piece at a time; the log
/// starts empty after it.
fn install_tree(store: &mut DiskStorage, tree: &DataTree) -> Result<()> {
    let seal = write_image(store, SnapshotSlot::Staging, tree)?.seal_so_far();
    install_snapshot(store, tree.last_zxid(), SnapshotSource::Staged(seal))
}

/// Writes the image of `tree` into `slot`, a piece at a time, unsealed.
fn write_image(
    store: &mut DiskStorage,
    slot: SnapshotSlot,
    tree: &DataTree,
) -> Result<SnapshotWriter> {
    let mut writer = SnapshotWriter::new(store, slot)?;
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
    Ok(writer)
}
