//! The node's fuzzy snapshots: when the next one starts, the one being
//! written a slice at a time, and how much of its image waits for the disk.

use super::Node;
use crate::core::local_snapshot::LocalSnapshot;
use crate::core::types::{Command, Mode, Now};
use crate::failpoints::{active, Failpoint};

/// The snapshot schedule and the snapshot in progress.
#[derive(Debug)]
pub(in crate::core) struct Snapshots {
    /// Txns applied since the last snapshot began.
    txns_since: u64,
    /// How many start the next one.
    due_after: u64,
    /// The seeded randomness of that number.
    rng: u64,
    /// A fuzzy snapshot being written.
    pub(in crate::core) in_progress: Option<LocalSnapshot>,
    /// Bytes of snapshot pieces ever handed to storage, and of those
    /// storage is done with: the difference waits for the disk.
    pub(in crate::core) handed: u64,
    stored: u64,
}

impl Snapshots {
    /// No snapshot yet, the schedule seeded by `seed`.
    pub(super) fn new(seed: u64) -> Snapshots {
        Snapshots {
            txns_since: 0,
            due_after: 0,
            rng: seed | 1,
            in_progress: None,
            handed: 0,
            stored: 0,
        }
    }

    /// ZooKeeper snapshots after `snapCount/2 + rand[0, snapCount/2)` txns so
    /// members do not all snapshot at once; the randomness here is seeded.
    pub(super) fn schedule_next(&mut self, snap_count: u64) {
        // xorshift64: deterministic for a given seed.
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        let half = (snap_count / 2).max(1);
        self.txns_since = 0;
        self.due_after = half + self.rng % half;
    }
}

impl Node {
    /// Counts an applied txn and starts a snapshot when enough have been.
    /// Only while serving: a member not serving may hold txns a sync takes
    /// back or replaces with another tree (ZOOKEEPER-1549/1558).
    pub(in crate::core) fn count_txn_for_snapshot(&mut self, now: Now) {
        self.snapshots.txns_since += 1;
        let due = self.snapshots.txns_since > self.snapshots.due_after;
        let serving = self.mode() != Mode::NotServing || active(Failpoint::SnapshotAnyTree);
        if due && serving && self.snapshots.in_progress.is_none() {
            self.snapshots.schedule_next(self.config.snap_count);
            let snapshot = LocalSnapshot::start(&self.tree, now.mono_ms);
            tracing::info!(zxid = %snapshot.zxid(), "taking snapshot");
            self.snapshots.in_progress = Some(snapshot);
        }
    }

    /// Writes the next slice of a snapshot in progress. Slices are small and
    /// spaced out, so even a huge tree never stalls clients for long.
    pub(super) fn step_snapshot(&mut self, now: Now) {
        let backlog = self.snapshot_backlog();
        let Some(snapshot) = self.snapshots.in_progress.as_mut() else {
            return;
        };
        let slice = self.config.snapshot_slice_nodes;
        let before = self.commands.len();
        if snapshot.step(&self.tree, now.mono_ms, slice, backlog, &mut self.commands) {
            if let Some(done) = self.snapshots.in_progress.take() {
                done.finish(&mut self.commands);
            }
        }
        for command in self.commands.range(before..) {
            if let Command::SnapshotPiece(piece) = command {
                self.snapshots.handed += piece.data.len() as u64;
            }
        }
    }

    /// Storage is done with `bytes` of snapshot pieces in all (written, or
    /// dropped): a snapshot waits while too much of its image waits for it.
    pub fn snapshot_stored(&mut self, bytes: u64) {
        self.snapshots.stored = bytes;
    }

    /// Bytes of snapshot pieces handed to storage and not yet written.
    pub fn snapshot_backlog(&self) -> u64 {
        self.snapshots.handed.saturating_sub(self.snapshots.stored)
    }
}
