//! A follower loses power at each step of its DIFF sync into a new epoch:
//! after acceptedEpoch, part-way through the synced txns, after all of them
//! but before currentEpoch, after currentEpoch but before its ACK of
//! NEWLEADER, and after the leader took that ACK but before UPTODATE
//! (ZOOKEEPER-2307, 4785, 4643, 2033, 1282/1291). Each time: what the
//! step made durable is on its disk, the epoch files are in order, it
//! restarts, rejoins, serves a tree with every write acknowledged before
//! its restart, and the ensemble converges losing no acknowledged write.

use super::{behind_in_new_epoch, each_seed, until_sprung, Behind};
use crate::core::zab::{StorageOp, ZabMessage};
use crate::sim::member::Wire;
use crate::sim::{Action, Moment, SyncKind};
use std::cell::Cell;
use std::rc::Rc;
use zkd_protocol::Zxid;

/// Where the follower's sync is cut short.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Point {
    /// acceptedEpoch is durable, ACKEPOCH not sent.
    AcceptedEpoch,
    /// Some txns of the sync are durable, some not.
    PartWay,
    /// Every txn of the sync is durable; currentEpoch is not.
    BeforeCurrentEpoch,
    /// currentEpoch is durable; the ACK of NEWLEADER is not sent.
    AfterCurrentEpoch,
    /// The leader took the ACK of NEWLEADER; UPTODATE is on its way.
    NewLeaderAcked,
}

fn crash_during_diff_sync(seed: u64, point: Point) -> Result<(), String> {
    let Behind {
        mut s,
        behind: f,
        end,
        old_epoch,
        new_epoch,
        leader,
    } = behind_in_new_epoch(seed, 3, 5)?;
    let acked = s.acknowledged_zxids();
    let since = s.now();
    // The leader's last txn sent in the sync, and the append the crash followed.
    let sync_point = Rc::new(Cell::new(Zxid::ZERO));
    let crashed_after = Rc::new(Cell::new(Zxid::ZERO));
    let (seen_sync_point, seen_crash) = (sync_point.clone(), crashed_after.clone());
    s.at(move |sim, moment| {
        if let Some(z) = sim.sync_point(leader, f) {
            seen_sync_point.set(z);
        }
        let crash = match (point, moment) {
            (
                Point::AcceptedEpoch,
                Moment::AfterStorage {
                    member,
                    op: StorageOp::SetAcceptedEpoch(e),
                },
            ) => *member == f && *e == new_epoch,
            (
                Point::PartWay,
                Moment::AfterStorage {
                    member,
                    op: StorageOp::Append { zxid, .. },
                },
            ) if *member == f => {
                seen_crash.set(*zxid);
                sim.sync_point(leader, f).is_some_and(|p| *zxid < p)
            }
            (
                Point::BeforeCurrentEpoch,
                Moment::BeforeStorage {
                    member,
                    op: StorageOp::SetCurrentEpoch(e),
                },
            )
            | (
                Point::AfterCurrentEpoch,
                Moment::AfterStorage {
                    member,
                    op: StorageOp::SetCurrentEpoch(e),
                },
            ) => *member == f && *e == new_epoch,
            (
                Point::NewLeaderAcked,
                Moment::Received {
                    from,
                    to,
                    wire: Wire::Zab(ZabMessage::Ack { zxid }),
                },
            ) => {
                // After the leader handled it; UPTODATE is in flight.
                *from == f && *to == leader && *zxid == Zxid::new(new_epoch, 0) && !sim.serving(f)
            }
            _ => false,
        };
        crash.then_some(Action::Crash(f))
    });
    s.restart(f);
    until_sprung(&mut s, "the crash point", 10_000)?;
    let syncs = s.syncs_to(f, since);
    if point != Point::AcceptedEpoch && syncs.first().map(|(kind, _)| *kind) != Some(SyncKind::Diff)
    {
        return Err(format!(
            "member {f} was to be synced by DIFF, got {syncs:?}"
        ));
    }
    // What the crash left on its disk.
    let (accepted, current) = s.epochs_on_disk(f);
    let disk_end = s.disk_end(f);
    let expect_current = match point {
        Point::AcceptedEpoch | Point::PartWay | Point::BeforeCurrentEpoch => old_epoch,
        Point::AfterCurrentEpoch | Point::NewLeaderAcked => new_epoch,
    };
    if (accepted, current) != (new_epoch, expect_current) {
        return Err(format!(
            "{point:?}: member {f}'s epochs are {accepted}/{current}, expected {new_epoch}/{expect_current}"
        ));
    }
    match point {
        Point::AcceptedEpoch => {
            if disk_end != end {
                return Err(format!("{point:?}: its log moved from {end} to {disk_end}"));
            }
        }
        Point::PartWay => {
            let (at, upto) = (crashed_after.get(), sync_point.get());
            if !(end < disk_end && disk_end == at && at < upto) {
                return Err(format!(
                    "{point:?}: its log ends at {disk_end} (crash after {at}), \
                     not between {end} and the sync's end {upto}"
                ));
            }
        }
        // The whole sync is durable: every write acknowledged before it.
        Point::BeforeCurrentEpoch | Point::AfterCurrentEpoch | Point::NewLeaderAcked => {
            s.disk_holds(f, &acked)?;
            if disk_end < sync_point.get() {
                return Err(format!(
                    "{point:?}: its log ends at {disk_end}, before the sync's end {}",
                    sync_point.get()
                ));
            }
        }
    }
    s.restart(f);
    let acked = s.acknowledged_zxids();
    s.run_until("it rejoins and serves", 15_000, |s| s.serving(f))?;
    s.tree_holds(f, &acked)?;
    let epoch = s.epoch().ok_or("no leader")?;
    if s.epochs_on_disk(f) != (epoch, epoch) {
        return Err(format!(
            "member {f} serves in epoch {epoch} with epochs {:?} on disk",
            s.epochs_on_disk(f)
        ));
    }
    s.finish()
}

/// ZOOKEEPER-2307: power loss right after acceptedEpoch was written.
#[test]
fn zk_2307_follower_crash_after_accepted_epoch_rejoins() {
    each_seed(|seed| crash_during_diff_sync(seed, Point::AcceptedEpoch));
}

/// ZOOKEEPER-4785: power loss with part of the synced txns durable.
#[test]
fn zk_4785_follower_crash_part_way_through_the_synced_txns_rejoins() {
    each_seed(|seed| crash_during_diff_sync(seed, Point::PartWay));
}

/// ZOOKEEPER-4643: the synced txns are durable before currentEpoch; a
/// crash in between leaves the old epoch with the whole sync.
#[test]
fn zk_4643_follower_crash_between_the_synced_txns_and_current_epoch_keeps_them() {
    each_seed(|seed| crash_during_diff_sync(seed, Point::BeforeCurrentEpoch));
}

/// ZOOKEEPER-2033: a restart right after the new epoch was written, its
/// ACK of NEWLEADER never sent.
#[test]
fn zk_2033_follower_crash_after_current_epoch_before_its_ack_rejoins() {
    each_seed(|seed| crash_during_diff_sync(seed, Point::AfterCurrentEpoch));
}

/// ZOOKEEPER-1282/1291: the leader took the follower's ACK of NEWLEADER,
/// and the follower lost power before UPTODATE: its sync and currentEpoch
/// were durable, and it rejoins.
#[test]
fn zk_1282_follower_crash_between_newleader_ack_and_uptodate_keeps_its_sync() {
    each_seed(|seed| crash_during_diff_sync(seed, Point::NewLeaderAcked));
}
