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
    /// No snapshot yet, the schedule seeded by `seed` (the member's id).
    pub(super) fn new(seed: u64) -> Snapshots {
        Snapshots {
            txns_since: 0,
            due_after: 0,
            rng: mixed(seed),
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

/// A nonzero xorshift state from `seed`, different for every small seed.
/// `seed | 1` gave members 2 and 3 the same schedule, so two of three
/// members snapshotted at the same txn, their disks busy at once.
fn mixed(seed: u64) -> u64 {
    // splitmix64's finalizer: a bijection, so distinct seeds stay distinct.
    let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    z.max(1)
}

impl Node {
    /// Counts an applied txn and starts a snapshot when enough have been.
    /// Only while serving: a member not serving may hold txns a sync takes
    /// back or replaces with another tree (ZOOKEEPER-1549/1558).
    ///
    /// A snapshot due while the last one is still being written is skipped
    /// and the count starts again, as ZooKeeper's "Too busy to snap,
    /// skipping" does. Waiting for it instead ran snapshots of a large tree
    /// back to back under load: at 2M znodes a fifth of the CPU per create.
    pub(in crate::core) fn count_txn_for_snapshot(&mut self, now: Now) {
        self.snapshots.txns_since += 1;
        let due = self.snapshots.txns_since > self.snapshots.due_after;
        let serving = self.mode() != Mode::NotServing || active(Failpoint::SnapshotAnyTree);
        if !(due && serving) {
            return;
        }
        self.snapshots.schedule_next(self.config.snap_count);
        if let Some(busy) = &self.snapshots.in_progress {
            tracing::info!(writing = %busy.zxid(), "snapshot due while one is being written; skipping it");
            return;
        }
        let snapshot = LocalSnapshot::start(&self.tree, now.mono_ms);
        tracing::info!(zxid = %snapshot.zxid(), "taking snapshot");
        self.snapshots.in_progress = Some(snapshot);
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

#[cfg(test)]
mod tests {
    use super::Snapshots;

    /// Members 1 to 5 each snapshot at txns of their own.
    #[test]
    fn members_snapshot_on_schedules_of_their_own() {
        let firsts: Vec<u64> = (1..=5)
            .map(|id| {
                let mut s = Snapshots::new(id);
                s.schedule_next(100_000);
                s.due_after
            })
            .collect();
        for (i, a) in firsts.iter().enumerate() {
            assert!((50_000..100_000).contains(a), "{firsts:?}");
            assert!(
                !firsts[i + 1..].contains(a),
                "two members share a schedule: {firsts:?}"
            );
        }
    }
}
