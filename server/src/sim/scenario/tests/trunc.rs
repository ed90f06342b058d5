//! TRUNC: a member holds txns no quorum has (a deposed leader's lone
//! proposals) and comes back as the follower of a newer leader. The TRUNC
//! is interrupted by power loss or a broken link (ZOOKEEPER-1489, 5094),
//! the deposed leader never lost its memory (2845), the uncommitted txn is
//! the first of its epoch and the newer leader skipped that epoch (2832).

use super::{each_seed, holds_none, id, leader_with_writes, more_writes, until_sprung};
use crate::core::election::ServerId;
use crate::core::zab::{StorageOp, ZabMessage};
use crate::sim::member::Wire;
use crate::sim::scenario::Scenario;
use crate::sim::{Action, Moment, SyncKind};
use std::cell::Cell;
use std::rc::Rc;
use zkd_protocol::Zxid;

/// The leader is cut off and logs writes only it has, then loses power;
/// the other two move on in a new epoch. Returns the deposed leader (down)
/// and its lone txns.
fn deposed_leader_with_lone_txns(s: &mut Scenario) -> Result<(ServerId, Vec<Zxid>), String> {
    let old = leader_with_writes(s, 20)?;
    s.isolate(old);
    let mut lone = Vec::new();
    for _ in 0..3 {
        lone.push(
            s.write_on(old)
                .ok_or("the isolated leader refused a write")?,
        );
    }
    s.run_until("its lone txns durable", 2_000, |s| {
        lone.iter().all(|z| s.logged(old, *z))
    })?;
    s.crash(old);
    s.heal();
    s.run_until("a new leader", 10_000, |s| {
        s.leader().is_some_and(|l| l != old)
    })?;
    more_writes(s, 10, 10_000)?;
    Ok((old, lone))
}

/// ZOOKEEPER-1489: power lost right after the TRUNC cut the log. The cut
/// kept every committed txn up to its point, none of the lone ones; the
/// member restarts, rejoins, and converges.
#[test]
fn zk_1489_crash_right_after_a_trunc_loses_nothing_committed() {
    each_seed(|seed| {
        let mut s = Scenario::new(seed, 3);
        let (old, lone) = deposed_leader_with_lone_txns(&mut s)?;
        let cut = Rc::new(Cell::new(None));
        let seen = cut.clone();
        s.at(move |_, moment| match moment {
            Moment::AfterStorage {
                member,
                op: StorageOp::TruncateAndReload { after },
            } if *member == old => {
                seen.set(Some(*after));
                Some(Action::Crash(old))
            }
            _ => None,
        });
        let acked = s.acknowledged_zxids();
        s.restart(old);
        until_sprung(&mut s, "the crash after the TRUNC", 10_000)?;
        let cut = cut.get().ok_or("no truncation")?;
        if cut >= lone[0] {
            return Err(format!("the TRUNC to {cut} keeps the lone {}", lone[0]));
        }
        holds_none(&s, old, &lone)?;
        let kept: Vec<Zxid> = acked.iter().copied().filter(|z| *z <= cut).collect();
        s.disk_holds(old, &kept)?;
        if s.disk_end(old) != cut {
            return Err(format!(
                "the log ends at {}, not at the cut {cut}",
                s.disk_end(old)
            ));
        }
        s.restart(old);
        let acked = s.acknowledged_zxids();
        s.run_until("it rejoins and serves", 15_000, |s| s.serving(old))?;
        s.tree_holds(old, &acked)?;
        holds_none(&s, old, &lone)?;
        s.finish()
    });
}

/// Where the link to the leader breaks during a TRUNC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Break {
    /// TRUNC received, the cut not yet run.
    OnTrunc,
    /// The cut is done; the sync's txns and NEWLEADER are in flight or queued.
    AfterTheCut,
}

/// ZOOKEEPER-5094: the link to the leader breaks during a TRUNC sync,
/// before NEWLEADER is acknowledged. The member's memory never runs ahead
/// of its disk; it reconnects, syncs again, and a later restart recovers
/// its whole history (no gap in the log).
fn trunc_interrupted(seed: u64, at: Break) -> Result<(), String> {
    let mut s = Scenario::new(seed, 3);
    let (old, lone) = deposed_leader_with_lone_txns(&mut s)?;
    let leader = s.leader().ok_or("no leader")?;
    let since = s.now();
    s.at(move |_, moment| {
        let cut = match (at, moment) {
            (
                Break::OnTrunc,
                Moment::Received {
                    to,
                    wire: Wire::Zab(ZabMessage::Trunc { .. }),
                    ..
                },
            ) => *to == old,
            (
                Break::AfterTheCut,
                Moment::AfterStorage {
                    member,
                    op: StorageOp::TruncateAndReload { .. },
                },
            ) => *member == old,
            _ => false,
        };
        cut.then_some(Action::Cut(old, leader))
    });
    s.restart(old);
    until_sprung(&mut s, "the broken link", 10_000)?;
    if !matches!(s.syncs_to(old, since).first(), Some((SyncKind::Trunc, _))) {
        return Err(format!("expected a TRUNC: {:?}", s.syncs_to(old, since)));
    }
    if s.serving(old) {
        return Err("it serves without its sync".into());
    }
    // Its role ended with the link: what it queued ran, its memory is on disk.
    s.memory_within_disk(old)?;
    holds_none(&s, old, &lone)?;
    s.heal();
    s.run_until("it rejoins and serves", 15_000, |s| s.serving(old))?;
    more_writes(&mut s, 10, 10_000)?;
    let acked = s.acknowledged_zxids();
    s.crash(old);
    s.recovered(old)?;
    s.restart(old);
    s.run_until("it serves after a restart", 15_000, |s| s.serving(old))?;
    s.tree_holds(old, &acked)?;
    holds_none(&s, old, &lone)?;
    s.finish()
}

#[test]
fn zk_5094_link_broken_on_trunc_before_the_cut_keeps_memory_within_disk() {
    each_seed(|seed| trunc_interrupted(seed, Break::OnTrunc));
}

#[test]
fn zk_5094_link_broken_after_the_trunc_cut_before_newleader_keeps_memory_within_disk() {
    each_seed(|seed| trunc_interrupted(seed, Break::AfterTheCut));
}

/// ZOOKEEPER-2845: a leader cut off logs txns only it has and steps down
/// without a restart (its in-memory tree kept); it rejoins the new leader
/// as a follower, is truncated, and neither then nor after a restart does
/// any member hold those txns.
#[test]
fn zk_2845_a_deposed_leader_that_kept_its_memory_is_truncated() {
    each_seed(|seed| {
        let mut s = Scenario::new(seed, 3);
        let old = leader_with_writes(&mut s, 20)?;
        s.isolate(old);
        let lone = s
            .write_on(old)
            .ok_or("the isolated leader refused a write")?;
        s.run_until("its lone txn durable", 2_000, |s| s.logged(old, lone))?;
        s.run_until("a new leader, the old one stepped down", 10_000, |s| {
            s.leader().is_some_and(|l| l != old) && !s.serving(old) && s.is_up(old)
        })?;
        more_writes(&mut s, 10, 10_000)?;
        let since = s.now();
        // No writes until it is back: its gap stays within the history window.
        s.pause_writes();
        s.heal();
        s.run_until("it follows the new leader", 15_000, |s| s.serving(old))?;
        s.resume_writes();
        if !matches!(s.syncs_to(old, since).first(), Some((SyncKind::Trunc, _))) {
            return Err(format!("expected a TRUNC: {:?}", s.syncs_to(old, since)));
        }
        for m in s.ids() {
            holds_none(&s, m, &[lone])?;
        }
        s.crash(old);
        s.restart(old);
        s.run_until("it serves after a restart", 15_000, |s| s.serving(old))?;
        holds_none(&s, old, &[lone])?;
        s.finish()
    });
}

/// ZOOKEEPER-2832: B leads epoch 2 and logs <2,1> alone (A acked only its
/// NEWLEADER); B and A go down; A leads epoch 3 with C, C takes a
/// snapshot; A goes down, C leads epoch 4 with B. C's history has nothing
/// of epoch 2, so where ZooKeeper sent a DIFF from its last zxid and B
/// kept <2,1>, B gets a SNAP, and <2,1> is gone.
#[test]
fn zk_2832_an_uncommitted_first_txn_of_a_skipped_epoch_is_dropped() {
    each_seed(|seed| {
        let mut s = Scenario::new(seed, 3);
        leader_with_writes(&mut s, 20)?;
        let c = id(1 + seed % 3);
        s.crash_all();
        let (x, y) = match s.others(c)[..] {
            [x, y] => (x, y),
            _ => return Err("three members".into()),
        };
        s.restart(x);
        s.restart(y);
        // B leads epoch 2; cut off the moment it is established, before
        // any of its proposals reaches A.
        s.run_until("B established", 10_000, |s| s.leader().is_some())?;
        let b = s.leader().ok_or("no leader")?;
        let a = if b == x { y } else { x };
        let epoch2 = s.epoch().ok_or("no epoch")?;
        s.isolate(b);
        let first = Zxid::new(epoch2, 1);
        if s.write_on(b).is_none_or(|z| z < first) {
            return Err(format!("B could not propose {first}"));
        }
        s.run_until("<2,1> durable on B", 2_000, |s| s.logged(b, first))?;
        if s.disk_end(a).epoch() >= epoch2 || s.acknowledged_zxids().last() >= Some(&first) {
            return Err(format!("A has {} of epoch {epoch2}", s.disk_end(a)));
        }
        s.crash(b);
        s.crash(a);
        s.heal();
        s.restart(a);
        s.restart(c);
        s.run_until("A leads epoch 3", 10_000, |s| s.leader() == Some(a))?;
        more_writes(&mut s, 10, 10_000)?;
        s.run_until("C serving", 10_000, |s| s.serving(c))?;
        s.snapshot(c)?;
        more_writes(&mut s, 10, 10_000)?;
        s.crash(a);
        let since = s.now();
        s.restart(b);
        s.run_until("C leads epoch 4 with B", 15_000, |s| {
            s.leader() == Some(c) && s.serving(b)
        })?;
        if !matches!(s.syncs_to(b, since).first(), Some((SyncKind::Snap, _))) {
            return Err(format!("expected a SNAP: {:?}", s.syncs_to(b, since)));
        }
        holds_none(&s, b, &[first])?;
        s.finish()
    });
}
