//! What a whole-member script reads of a member's disk and tree: its log,
//! epochs and snapshots, what a power cut now would recover, and whether
//! acknowledged creates are there and uncommitted txns are not.

use super::script::Script;
use crate::core::election::ServerId;
use crate::driver::recovery;
use std::collections::BTreeMap;
use zkd_protocol::Zxid;
use zkd_storage::{DataTree, DivergenceMark, EpochStore, SnapshotStore, TxnLog};

impl Script {
    /// The last txn on member `id`'s disk, synced or not.
    pub fn last_logged(&self, id: ServerId) -> Zxid {
        self.sim.disks[&id]
            .last_zxid()
            .ok()
            .flatten()
            .unwrap_or(Zxid::ZERO)
    }

    /// Whether member `id`'s disk holds `zxid`, synced or not.
    pub fn logged(&self, id: ServerId, zxid: Zxid) -> bool {
        self.sim.disks[&id].contains(zxid).unwrap_or(false)
    }

    /// Member `id`'s acceptedEpoch and currentEpoch, on disk.
    pub fn epochs_on_disk(&self, id: ServerId) -> (u32, u32) {
        let disk = &self.sim.disks[&id];
        let accepted = disk.accepted_epoch().unwrap_or_default();
        (accepted, disk.current_epoch().unwrap_or_default())
    }

    /// Where member `id`'s disk notes its tree diverged, if it does.
    pub fn diverged_on_disk(&self, id: ServerId) -> Option<Zxid> {
        self.sim.disks[&id].diverged_at().ok().flatten()
    }

    /// The end of member `id`'s history on disk: its last logged txn, or
    /// its snapshot's zxid when the log is empty past it.
    pub fn disk_end(&self, id: ServerId) -> Zxid {
        let disk = &self.sim.disks[&id];
        let purged = disk.purged_through().ok().flatten();
        disk.last_zxid()
            .ok()
            .flatten()
            .max(purged)
            .unwrap_or(Zxid::ZERO)
    }

    /// The creates acknowledged so far: path and zxid.
    pub fn acked(&self) -> BTreeMap<String, i64> {
        self.sim.clients.acked().clone()
    }

    /// Fails unless a restart of member `id` now would recover every create
    /// of `acked`.
    pub fn disk_holds(&self, id: ServerId, acked: &BTreeMap<String, i64>) -> Result<(), String> {
        let tree = recovery::rebuild(&self.sim.disks[&id].power_cut_copy())
            .map_err(|e| format!("member {id} cannot recover its disk: {e}"))?;
        holds(&tree, acked).map_err(|e| format!("member {id}'s disk: {e}"))
    }

    /// Fails unless member `id`'s tree holds every create of `acked`.
    pub fn tree_holds(&self, id: ServerId, acked: &BTreeMap<String, i64>) -> Result<(), String> {
        match self.sim.procs.get(&id) {
            Some(Some(p)) => {
                holds(p.node.tree(), acked).map_err(|e| format!("member {id}'s tree: {e}"))
            }
            _ => Err(format!("member {id} is down")),
        }
    }

    /// Whether a power cut on member `id` now would keep `zxid`.
    pub fn durable(&self, id: ServerId, zxid: Zxid) -> bool {
        self.sim.disks[&id].holds_durably(zxid)
    }

    /// The txns on member `id`'s disk after `after`, synced or not.
    pub fn logged_after(&self, id: ServerId, after: Zxid) -> Vec<Zxid> {
        let txns = self.sim.disks[&id].read_range(after, usize::MAX);
        txns.unwrap_or_default()
            .into_iter()
            .map(|(z, _)| z)
            .collect()
    }

    /// The zxids of the snapshots on member `id`'s disk.
    pub fn snapshots(&self, id: ServerId) -> Vec<Zxid> {
        self.sim.disks[&id].snapshot_zxids().unwrap_or_default()
    }

    /// The creates acknowledged at or below `through`.
    pub fn acked_through(&self, through: Zxid) -> BTreeMap<String, i64> {
        let mut acked = self.acked();
        acked.retain(|_, zxid| *zxid <= through.0);
        acked
    }

    /// The tree a power cut now would leave member `id` to start from.
    pub fn recovered(&self, id: ServerId) -> Result<DataTree, String> {
        recovery::rebuild(&self.sim.disks[&id].power_cut_copy())
            .map_err(|e| format!("member {id} cannot recover its disk: {e}"))
    }

    /// Fails if any of `zxids` is in member `id`'s log, its tree (if it is
    /// up) or the tree its disk recovers.
    pub fn holds_none(&self, id: ServerId, zxids: &[Zxid]) -> Result<(), String> {
        let recovered = self.recovered(id)?;
        let tree = match self.sim.procs.get(&id) {
            Some(Some(p)) => Some(p.node.tree()),
            _ => None,
        };
        for zxid in zxids {
            if self.logged(id, *zxid)
                || tree.is_some_and(|t| bears(t, *zxid))
                || bears(&recovered, *zxid)
            {
                return Err(format!("member {id} still holds the uncommitted {zxid}"));
            }
        }
        Ok(())
    }

    /// Fails if member `id`'s tree is ahead of what its disk recovers.
    pub fn memory_within_disk(&self, id: ServerId) -> Result<(), String> {
        let Some(Some(p)) = self.sim.procs.get(&id) else {
            return Err(format!("member {id} is down"));
        };
        let disk = self.recovered(id)?;
        let memory = p.node.tree();
        let (at, durable) = (memory.last_zxid(), disk.last_zxid());
        if durable < at || (durable == at && disk.digest() != memory.digest()) {
            return Err(format!(
                "member {id}'s tree at {at} is ahead of its disk (which recovers to {durable})"
            ));
        }
        Ok(())
    }
}

/// Fails unless `tree` holds each create of `acked` with its zxid.
fn holds(tree: &DataTree, acked: &BTreeMap<String, i64>) -> Result<(), String> {
    match acked
        .iter()
        .find(|(path, zxid)| tree.node(path).map(|n| n.stat.czxid) != Some(**zxid))
    {
        Some((path, zxid)) => Err(format!("{path}, acknowledged at {zxid:#x}, is missing")),
        None => Ok(()),
    }
}

/// Whether `tree` shows `zxid`: it ends there, or a node was created,
/// changed or had its children changed by it.
fn bears(tree: &DataTree, zxid: Zxid) -> bool {
    tree.last_zxid() == zxid
        || tree.preorder("/").any(|(_, n)| {
            let s = &n.stat;
            s.czxid == zxid.0 || s.mzxid == zxid.0 || s.pzxid == zxid.0
        })
}
