//! Local snapshots and uncommitted txns (ZOOKEEPER-1558, 1549). A
//! simulated member snapshots only when a script asks (`Scenario::snapshot`:
//! the tree as it is, then retention and log purge as the runtime does).

use super::{each_seed, holds_none, leader_with_writes, more_writes};
use crate::sim::scenario::Scenario;
use crate::sim::SyncKind;

/// ZOOKEEPER-1558: a leader, cut off, proposes writes nobody else gets and
/// snapshots while they are outstanding, then loses power; a new leader
/// without them commits more. The old leader's snapshot held none of them
/// (it is of the tree, which holds only what was committed), and on its
/// return the TRUNC removes them from its log: it holds none of them.
#[test]
fn zk_1558_a_leader_snapshotting_with_outstanding_proposals_keeps_none() {
    each_seed(|seed| {
        let mut s = Scenario::new(seed, 3);
        let old = leader_with_writes(&mut s, 20)?;
        s.isolate(old);
        let lone: Vec<_> = (0..3).filter_map(|_| s.write_on(old)).collect();
        if lone.is_empty() {
            return Err("the isolated leader refused writes".into());
        }
        let snap = s.snapshot(old)?;
        if !s.is_leader(old) || !lone.iter().all(|z| s.logged(old, *z)) || snap >= lone[0] {
            return Err(format!(
                "expected a snapshot below the outstanding {lone:?} on the leader, got {snap}"
            ));
        }
        if holds_none(&s, old, &lone).is_ok() {
            return Err("the outstanding proposals were never logged".into());
        }
        s.crash(old);
        s.heal();
        s.run_until("a new leader", 10_000, |s| {
            s.leader().is_some_and(|l| l != old)
        })?;
        more_writes(&mut s, 10, 10_000)?;
        let since = s.now();
        s.restart(old);
        s.run_until("it rejoins and serves", 15_000, |s| s.serving(old))?;
        if !matches!(s.syncs_to(old, since).first(), Some((SyncKind::Trunc, _))) {
            return Err(format!("expected a TRUNC: {:?}", s.syncs_to(old, since)));
        }
        holds_none(&s, old, &lone)?;
        s.crash(old);
        holds_none(&s, old, &lone)?;
        s.finish()
    });
}

/// ZOOKEEPER-1549: a deposed leader restarts with uncommitted txns in its
/// log (recovery replays them into its tree) and, before any leader synced
/// it, snapshots that dirty tree. It then rejoins a leader of a newer
/// epoch. Even seeds: an earlier, clean snapshot keeps the log's purge
/// mark below the cut, so the leader TRUNCs and the truncation deletes the
/// dirty snapshot. Odd seeds: the dirty snapshot is the only one, the log
/// is purged through it and cannot be cut there, so the leader SNAPs.
/// Either way neither its tree nor its disk holds the uncommitted txns.
#[test]
fn zk_1549_a_dirty_snapshot_never_survives_the_sync() {
    each_seed(|seed| {
        let mut s = Scenario::new(seed, 3);
        let old = leader_with_writes(&mut s, 20)?;
        let clean = seed % 2 == 0;
        if clean {
            s.snapshot(old)?;
        }
        s.isolate(old);
        let lone: Vec<_> = (0..3).filter_map(|_| s.write_on(old)).collect();
        let last = *lone.last().ok_or("the isolated leader refused writes")?;
        s.run_until("its lone txns durable", 2_000, |s| {
            lone.iter().all(|z| s.logged(old, *z))
        })?;
        s.crash(old);
        s.heal();
        s.run_until("a new leader", 10_000, |s| {
            s.leader().is_some_and(|l| l != old)
        })?;
        more_writes(&mut s, 10, 10_000)?;
        // Back, still cut off: recovery replayed the lone txns into its tree.
        s.isolate(old);
        s.restart(old);
        let dirty = s.snapshot(old)?;
        if dirty < last || !s.in_tree(old, lone[0]) {
            return Err(format!(
                "the snapshot at {dirty} is not dirty (lone {lone:?})"
            ));
        }
        let since = s.now();
        s.heal();
        s.run_until("it rejoins and serves", 15_000, |s| s.serving(old))?;
        let expected = if clean {
            SyncKind::Trunc
        } else {
            SyncKind::Snap
        };
        if s.syncs_to(old, since).first().map(|x| x.0) != Some(expected) {
            return Err(format!(
                "expected a {expected:?}: {:?}",
                s.syncs_to(old, since)
            ));
        }
        holds_none(&s, old, &lone)?;
        more_writes(&mut s, 5, 10_000)?;
        s.crash(old);
        holds_none(&s, old, &lone)?;
        s.finish()
    });
}
