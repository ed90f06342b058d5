//! `MemStorage`: the three storage traits in memory, with a crash model for
//! simulation: anything appended but not synced is lost by [`MemStorage::crash`].
//! Everything else (truncations, resets, purge marks, sealed snapshots,
//! epochs) is durable as soon as the call returns, which every trait
//! allows: it is the strongest of its promises.

use crate::divergence_mark::DivergenceMark;
use crate::epoch_store::EpochStore;
use crate::error::Result;
use crate::snapshot::{SnapshotSeal, SnapshotSlot, SnapshotStore};
use crate::txn_log::TxnLog;
use bytes::Bytes;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use zkd_protocol::Zxid;

#[derive(Clone, Debug, Default)]
struct Disk {
    synced: BTreeMap<Zxid, Bytes>,
    unsynced: BTreeMap<Zxid, Bytes>,
    /// Sealed snapshots, and images still being written by slot.
    snapshots: BTreeMap<Zxid, (Vec<u8>, SnapshotSeal)>,
    unsealed: BTreeMap<SnapshotSlot, Vec<u8>>,
    /// The log's purge mark (durable, as the snapshots that justify it).
    purged_through: Option<Zxid>,
    fuzzy_image: Option<(Zxid, Zxid)>,
    accepted_epoch: u32,
    current_epoch: u32,
    diverged_at: Option<Zxid>,
}

/// In-memory storage. Clones share one simulated disk, so a clone taken after
/// [`MemStorage::crash`] plays the part of the restarted process.
#[derive(Clone, Debug, Default)]
pub struct MemStorage {
    disk: Arc<Mutex<Disk>>,
}

impl MemStorage {
    /// An empty disk.
    pub fn new() -> MemStorage {
        MemStorage::default()
    }

    /// Simulates power loss: every append not yet covered by `sync` is gone,
    /// and so is every snapshot image not yet sealed.
    pub fn crash(&self) {
        let mut disk = self.disk();
        disk.unsynced.clear();
        disk.unsealed.clear();
    }

    /// Simulates a torn power cut: of the appends not yet synced, the first
    /// `keep` reach the disk (a prefix, as a log written in order tears),
    /// the rest are gone, as is every image not yet sealed. Returns how many
    /// were kept.
    pub fn crash_keeping(&self, keep: usize) -> usize {
        let mut disk = self.disk();
        let unsynced = std::mem::take(&mut disk.unsynced);
        let kept = unsynced.len().min(keep);
        disk.synced.extend(unsynced.into_iter().take(kept));
        disk.unsealed.clear();
        kept
    }

    /// What a power cut at this instant leaves, as a separate disk: the synced
    /// log, snapshots and epochs, without the unsynced appends. This disk
    /// keeps running, so a test can cut power under a live server and start
    /// another on what survived.
    pub fn power_cut_copy(&self) -> MemStorage {
        let mut disk = self.disk().clone();
        disk.unsynced.clear();
        disk.unsealed.clear();
        MemStorage {
            disk: Arc::new(Mutex::new(disk)),
        }
    }

    /// Whether a power cut now would keep `zxid`: it is in the synced log,
    /// or at or below the purge mark (in a snapshot).
    pub fn holds_durably(&self, zxid: Zxid) -> bool {
        let disk = self.disk();
        disk.synced.contains_key(&zxid) || disk.purged_through.is_some_and(|p| p >= zxid)
    }

    fn disk(&self) -> MutexGuard<'_, Disk> {
        // A poisoned lock means a test already panicked; keep the state visible.
        self.disk.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Disk {
    fn last_zxid(&self) -> Option<Zxid> {
        self.unsynced
            .keys()
            .next_back()
            .or(self.synced.keys().next_back())
            .copied()
    }
}

impl TxnLog for MemStorage {
    fn append(&mut self, zxid: Zxid, txn: Bytes) -> Result<()> {
        let mut disk = self.disk();
        let last = disk.last_zxid().max(disk.purged_through);
        if let Some(last) = last.filter(|l| zxid <= *l) {
            return Err(crate::txn_log::out_of_order(zxid, last));
        }
        disk.unsynced.insert(zxid, txn);
        Ok(())
    }

    fn sync(&mut self) -> Result<()> {
        let mut disk = self.disk();
        let pending = std::mem::take(&mut disk.unsynced);
        disk.synced.extend(pending);
        Ok(())
    }

    fn first_zxid(&self) -> Result<Option<Zxid>> {
        let disk = self.disk();
        Ok(disk
            .synced
            .keys()
            .next()
            .or(disk.unsynced.keys().next())
            .copied())
    }

    fn last_zxid(&self) -> Result<Option<Zxid>> {
        Ok(self.disk().last_zxid())
    }

    fn purged_through(&self) -> Result<Option<Zxid>> {
        Ok(self.disk().purged_through)
    }

    fn read_range(&self, after: Zxid, max_txns: usize) -> Result<Vec<(Zxid, Bytes)>> {
        let disk = self.disk();
        // Every unsynced zxid is above every synced one (appends increase).
        Ok(disk
            .synced
            .range(after.next()..)
            .chain(disk.unsynced.range(after.next()..))
            .take(max_txns)
            .map(|(z, b)| (*z, b.clone()))
            .collect())
    }

    fn last_zxid_at_or_before(&self, zxid: Zxid) -> Result<Option<Zxid>> {
        let disk = self.disk();
        Ok(disk
            .unsynced
            .range(..=zxid)
            .next_back()
            .or(disk.synced.range(..=zxid).next_back())
            .map(|(z, _)| *z))
    }

    fn truncate_after(&mut self, zxid: Zxid) -> Result<()> {
        let mut disk = self.disk();
        if let Some(purged) = disk.purged_through.filter(|p| zxid < *p) {
            return Err(crate::txn_log::cut_below_purge(zxid, purged));
        }
        disk.synced.split_off(&zxid.next());
        disk.unsynced.split_off(&zxid.next());
        Ok(())
    }

    fn reset(&mut self, through: Zxid) -> Result<()> {
        let mut disk = self.disk();
        disk.synced.clear();
        disk.unsynced.clear();
        disk.purged_through = Some(through);
        Ok(())
    }

    fn purge_through(&mut self, zxid: Zxid) -> Result<()> {
        let mut disk = self.disk();
        disk.synced = disk.synced.split_off(&zxid.next());
        disk.purged_through = disk.purged_through.max(Some(zxid));
        Ok(())
    }
}

impl SnapshotStore for MemStorage {
    fn append_snapshot(&mut self, slot: SnapshotSlot, piece: &[u8]) -> Result<()> {
        let mut disk = self.disk();
        disk.unsealed
            .entry(slot)
            .or_default()
            .extend_from_slice(piece);
        Ok(())
    }

    fn read_snapshot_at(&self, slot: SnapshotSlot, offset: u64, max: usize) -> Result<Bytes> {
        let disk = self.disk();
        let image = match slot {
            SnapshotSlot::Saved(zxid) => disk.snapshots.get(&zxid).map(|(image, _)| image),
            SnapshotSlot::Staging => disk.unsealed.get(&slot),
        };
        let image = image.map_or(&[][..], |i| &i[..]);
        let start = (offset as usize).min(image.len());
        let end = start.saturating_add(max).min(image.len());
        Ok(Bytes::copy_from_slice(&image[start..end]))
    }

    fn seal_snapshot(&mut self, slot: SnapshotSlot, zxid: Zxid, seal: SnapshotSeal) -> Result<()> {
        let mut disk = self.disk();
        let image = disk.unsealed.remove(&slot).unwrap_or_default();
        disk.snapshots.insert(zxid, (image, seal));
        Ok(())
    }

    fn snapshot_seals(&self) -> Result<Vec<(Zxid, SnapshotSeal)>> {
        Ok(self
            .disk()
            .snapshots
            .iter()
            .map(|(z, (_, seal))| (*z, *seal))
            .collect())
    }

    fn snapshot_zxids(&self) -> Result<Vec<Zxid>> {
        let disk = self.disk();
        let mut zxids: Vec<Zxid> = disk.snapshots.keys().copied().collect();
        zxids.extend(disk.unsealed.keys().filter_map(|slot| match slot {
            SnapshotSlot::Saved(z) => Some(*z),
            SnapshotSlot::Staging => None,
        }));
        zxids.sort();
        zxids.dedup();
        Ok(zxids)
    }

    fn remove_snapshot(&mut self, slot: SnapshotSlot) -> Result<()> {
        let mut disk = self.disk();
        disk.unsealed.remove(&slot);
        if let SnapshotSlot::Saved(zxid) = slot {
            disk.snapshots.remove(&zxid);
        }
        Ok(())
    }

    fn sync_snapshots(&mut self) -> Result<()> {
        Ok(())
    }

    fn set_fuzzy_image(&mut self, zxid: Zxid, end: Zxid) -> Result<()> {
        self.disk().fuzzy_image = Some((zxid, end));
        Ok(())
    }

    fn fuzzy_image(&self) -> Result<Option<(Zxid, Zxid)>> {
        Ok(self.disk().fuzzy_image)
    }
}

/// Damages the sealed snapshot at `zxid` (tests of the checks on load).
#[cfg(test)]
impl MemStorage {
    pub(crate) fn damage_snapshot(&self, zxid: Zxid, at: usize) {
        if let Some((image, _)) = self.disk().snapshots.get_mut(&zxid) {
            image[at] ^= 0xff;
        }
    }
}

impl EpochStore for MemStorage {
    fn accepted_epoch(&self) -> Result<u32> {
        Ok(self.disk().accepted_epoch)
    }
    fn set_accepted_epoch(&mut self, epoch: u32) -> Result<()> {
        self.disk().accepted_epoch = epoch;
        Ok(())
    }
    fn current_epoch(&self) -> Result<u32> {
        Ok(self.disk().current_epoch)
    }
    fn set_current_epoch(&mut self, epoch: u32) -> Result<()> {
        self.disk().current_epoch = epoch;
        Ok(())
    }
}

impl DivergenceMark for MemStorage {
    fn diverged_at(&self) -> Result<Option<Zxid>> {
        Ok(self.disk().diverged_at)
    }
    fn set_diverged_at(&mut self, zxid: Option<Zxid>) -> Result<()> {
        self.disk().diverged_at = zxid;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crash_loses_only_unsynced_appends() {
        let mut s = MemStorage::new();
        s.append(Zxid(1), Bytes::from_static(b"a")).unwrap();
        s.sync().unwrap();
        s.append(Zxid(2), Bytes::from_static(b"b")).unwrap();
        s.crash();
        let after = s.clone();
        assert_eq!(
            after.read_range(Zxid(0), 10).unwrap(),
            vec![(Zxid(1), Bytes::from_static(b"a"))]
        );
    }
}
