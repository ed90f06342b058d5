//! `Store`: everything one member persists, behind one cloneable handle, and
//! the two Zab operations that span the log and the snapshots (TRUNC, SNAP).

use crate::data_tree::{DataTree, ImageDecoder};
use crate::divergence_mark::DivergenceMark;
use crate::epoch_store::EpochStore;
use crate::error::{Result, StorageError};
use crate::snapshot::{read_snapshot, SnapshotRef, SnapshotSeal, SnapshotSlot, SnapshotStore};
use crate::txn_log::TxnLog;
use bytes::Bytes;
use std::collections::BTreeMap;
use zkd_protocol::Zxid;

/// The txn log, snapshots, epochs and divergence note of one member. The runtime is handed a
/// `Store` and clones it for its storage thread, so the same node loop runs
/// on sled in production and on [`crate::MemStorage`] in tests.
pub trait Store:
    TxnLog + SnapshotStore + EpochStore + DivergenceMark + Clone + Send + 'static
{
    /// Bytes on disk of the data store and of the log (`dirs`, `conf`).
    fn disk_usage(&self) -> (u64, u64);

    /// The newest sealed snapshot: its zxid, and when it was sealed in
    /// seconds since the Unix epoch (the AdminServer's `last_snapshot`).
    fn last_snapshot(&self) -> Option<(Zxid, u64)>;
}

impl Store for crate::DiskStorage {
    fn disk_usage(&self) -> (u64, u64) {
        self.sizes()
    }

    fn last_snapshot(&self) -> Option<(Zxid, u64)> {
        self.newest_snapshot()
    }
}

impl Store for crate::MemStorage {
    fn disk_usage(&self) -> (u64, u64) {
        (0, 0)
    }

    /// The newest sealed snapshot, sealed at time 0: memory keeps no clock.
    fn last_snapshot(&self) -> Option<(Zxid, u64)> {
        let seals = self.snapshot_seals().ok()?;
        seals.last().map(|(zxid, _)| (*zxid, 0))
    }
}

/// A TRUNC to `zxid`: deletes the snapshots past `zxid` (ZOOKEEPER-1549:
/// one holding txns past the cut must never be reloaded), then cuts the log
/// after `zxid`. **Durable on return.**
///
/// Refused with `Misuse`, changing nothing, when the history through `zxid`
/// could not be rebuilt afterwards: `zxid` below the log's purge mark, or no
/// valid snapshot between the mark and `zxid` to replay from. The member
/// must then be synced with a SNAP. Cost: when the log was ever purged, one
/// snapshot is read and verified, besides the deletions.
///
/// Crash safety: snapshots go first, so a crash in between leaves the old
/// log whole over a snapshot at or below `zxid` (the old state; the leader
/// will TRUNC again).
pub fn truncate_history<S: TxnLog + SnapshotStore>(store: &mut S, zxid: Zxid) -> Result<()> {
    if let Some(purged) = store.purged_through()? {
        if zxid < purged {
            return Err(crate::txn_log::cut_below_purge(zxid, purged));
        }
        if purged > Zxid::ZERO {
            let base = store.latest_snapshot_at_or_before(zxid)?.map(|r| r.zxid);
            if base.is_none_or(|b| b < purged) {
                return Err(StorageError::Misuse(format!(
                    "truncate after {zxid}: no snapshot between the purge mark {purged} and the cut"
                )));
            }
        }
    }
    store.delete_snapshots_after(zxid)?;
    store.truncate_after(zxid)
}

/// The lowest zxid [`truncate_history`] can cut this history back to: zero
/// while nothing was purged, else the oldest snapshot at or above the purge
/// mark that verifies (a step-wise purge can leave the mark between
/// snapshots, and the replay after a cut needs a snapshot at or above it;
/// a damaged one cannot be replayed from, so it counts for neither). With
/// none, the history's end: it cannot be cut at all, and a leader sends a
/// SNAP. Each snapshot is read to verify it once per `verified`.
pub fn lowest_cut<S: TxnLog + SnapshotStore>(
    store: &S,
    verified: &mut VerifiedSnapshots,
) -> Result<Zxid> {
    let Some(purged) = store.purged_through()?.filter(|p| *p > Zxid::ZERO) else {
        return Ok(Zxid::ZERO);
    };
    for (zxid, seal) in store.snapshot_seals()? {
        if zxid >= purged && verified.verifies(store, zxid, seal)? {
            return Ok(zxid);
        }
    }
    Ok(store.last_zxid()?.unwrap_or(purged).max(purged))
}

/// The verdicts on sealed snapshots read whole so far: each is read once
/// (it may be large, and [`lowest_cut`] runs at every election).
#[derive(Debug, Default)]
pub struct VerifiedSnapshots(BTreeMap<Zxid, (SnapshotSeal, bool)>);

impl VerifiedSnapshots {
    /// Whether the snapshot at `zxid` sealed with `seal` verifies.
    pub fn verifies<S: SnapshotStore + ?Sized>(
        &mut self,
        store: &S,
        zxid: Zxid,
        seal: SnapshotSeal,
    ) -> Result<bool> {
        if let Some(&(known, verdict)) = self.0.get(&zxid) {
            if known == seal {
                return Ok(verdict);
            }
        }
        let verdict = crate::snapshot::snapshot_verifies(store, zxid, seal)?;
        self.0.insert(zxid, (seal, verdict));
        Ok(verdict)
    }
}

/// Where the image of a SNAP is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SnapshotSource {
    /// Whole, in memory (the simulator's members pass images so).
    Whole(Bytes),
    /// Received piece by piece into [`SnapshotSlot::Staging`], as sealed;
    /// the install moves it into place without a copy.
    Staged(SnapshotSeal),
}

/// Installs a snapshot received from the leader (SNAP): afterwards the
/// history is exactly the image, as of `zxid`, and the log is empty with its
/// purge mark at `zxid`. **Durable on return.**
///
/// Crash safety: the log is first cut after `zxid` (or after its purge mark,
/// if higher), so the new snapshot is never followed by txns of the old
/// history; then the snapshot is saved, the log reset and later snapshots
/// deleted. A crash part-way leaves either a prefix of the old history, the
/// new one, or (when the old log was purged past `zxid`) a store that
/// recovery refuses as incomplete; never a mixture. Snapshots past `zxid`
/// left by a crash are ignored by recovery, which deletes them. A staged
/// image is checked against its seal before anything is changed.
pub fn install_snapshot<S: TxnLog + SnapshotStore>(
    store: &mut S,
    zxid: Zxid,
    image: SnapshotSource,
) -> Result<()> {
    if let SnapshotSource::Staged(seal) = image {
        read_snapshot(store, SnapshotSlot::Staging, seal).try_for_each(|c| c.map(drop))?;
    }
    let purged = store.purged_through()?.unwrap_or_default();
    store.truncate_after(zxid.max(purged))?;
    match image {
        SnapshotSource::Whole(image) => store.save_snapshot(zxid, image)?,
        SnapshotSource::Staged(seal) => store.seal_snapshot(SnapshotSlot::Staging, zxid, seal)?,
    }
    store.reset(zxid)?;
    store.delete_snapshots_after(zxid)
}

/// Loads the tree from a sealed snapshot, a chunk at a time (or takes the
/// copy the store preloaded, checked the same way); the caller replays the
/// log after its zxid. A chunk that fails its seal or an image that does
/// not decode is `Corrupt`.
pub fn load_snapshot<S: SnapshotStore>(store: &S, snapshot: SnapshotRef) -> Result<DataTree> {
    if let Some((preloaded, tree)) = store.take_preloaded() {
        if preloaded == snapshot {
            return tree;
        }
        // Another one: dropped here, before this one is decoded.
    }
    let pieces = read_snapshot(store, SnapshotSlot::Saved(snapshot.zxid), snapshot.seal);
    decode_snapshot(snapshot, pieces)
}

/// Decodes the image of `snapshot` from its `pieces`, checking the seal.
pub(crate) fn decode_snapshot(
    snapshot: SnapshotRef,
    pieces: impl Iterator<Item = Result<Bytes>>,
) -> Result<DataTree> {
    let mut decoder = ImageDecoder::for_image_of(snapshot.seal.len);
    let corrupt = |e| StorageError::Corrupt(format!("snapshot {}: {e}", snapshot.zxid));
    for chunk in pieces {
        decoder.feed(&chunk?).map_err(corrupt)?;
    }
    decoder.finish().map_err(corrupt)
}
