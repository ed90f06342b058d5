//! `MemStorage`: the three storage traits in memory, with a crash model for
//! simulation: anything appended but not synced is lost by [`MemStorage::crash`].

use crate::epoch_store::EpochStore;
use crate::error::{Result, StorageError};
use crate::snapshot::SnapshotStore;
use crate::txn_log::TxnLog;
use bytes::Bytes;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use zkd_protocol::Zxid;

#[derive(Clone, Debug, Default)]
struct Disk {
    synced: BTreeMap<Zxid, Bytes>,
    unsynced: BTreeMap<Zxid, Bytes>,
    snapshots: BTreeMap<Zxid, Bytes>,
    accepted_epoch: u32,
    current_epoch: u32,
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

    /// Simulates power loss: every append not yet covered by `sync` is gone.
    pub fn crash(&self) {
        self.disk().unsynced.clear();
    }

    /// What a power cut at this instant leaves, as a separate disk: the synced
    /// log, snapshots and epochs, without the unsynced appends. This disk
    /// keeps running, so a test can cut power under a live server and start
    /// another on what survived.
    pub fn power_cut_copy(&self) -> MemStorage {
        let mut disk = self.disk().clone();
        disk.unsynced.clear();
        MemStorage {
            disk: Arc::new(Mutex::new(disk)),
        }
    }

    fn disk(&self) -> MutexGuard<'_, Disk> {
        // A poisoned lock means a test already panicked; keep the state visible.
        self.disk.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl TxnLog for MemStorage {
    fn append(&mut self, zxid: Zxid, txn: Bytes) -> Result<()> {
        let mut disk = self.disk();
        let last = disk
            .unsynced
            .keys()
            .next_back()
            .or(disk.synced.keys().next_back())
            .copied();
        if last.is_some_and(|l| zxid <= l) {
            return Err(StorageError::Misuse(format!(
                "append {zxid} after {}",
                last.unwrap_or_default()
            )));
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
        let disk = self.disk();
        Ok(disk
            .unsynced
            .keys()
            .next_back()
            .or(disk.synced.keys().next_back())
            .copied())
    }

    fn read_after(&self, after: Zxid) -> Result<Vec<(Zxid, Bytes)>> {
        let disk = self.disk();
        let mut out: Vec<_> = disk
            .synced
            .range(after.next()..)
            .map(|(z, b)| (*z, b.clone()))
            .collect();
        out.extend(
            disk.unsynced
                .range(after.next()..)
                .map(|(z, b)| (*z, b.clone())),
        );
        Ok(out)
    }

    fn truncate_after(&mut self, zxid: Zxid) -> Result<()> {
        let mut disk = self.disk();
        disk.synced.split_off(&zxid.next());
        disk.unsynced.split_off(&zxid.next());
        Ok(())
    }

    fn purge_through(&mut self, zxid: Zxid) -> Result<()> {
        let mut disk = self.disk();
        disk.synced = disk.synced.split_off(&zxid.next());
        Ok(())
    }
}

impl SnapshotStore for MemStorage {
    fn save_snapshot(&mut self, zxid: Zxid, image: Bytes) -> Result<()> {
        self.disk()
            .snapshots
            .insert(zxid, crate::snapshot::seal(&image));
        Ok(())
    }

    fn latest_snapshot(&self) -> Result<Option<(Zxid, Bytes)>> {
        let disk = self.disk();
        Ok(disk
            .snapshots
            .iter()
            .rev()
            .find_map(|(z, s)| crate::snapshot::unseal(s).map(|i| (*z, i))))
    }

    fn purge_snapshots(&mut self, retain: usize) -> Result<Option<Zxid>> {
        let mut disk = self.disk();
        while disk.snapshots.len() > retain.max(1) {
            disk.snapshots.pop_first();
        }
        Ok(disk.snapshots.keys().next().copied())
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
            after.read_after(Zxid(0)).unwrap(),
            vec![(Zxid(1), Bytes::from_static(b"a"))]
        );
    }
}
