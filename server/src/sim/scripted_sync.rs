//! A DIFF sync cut short, with whole members: a follower loses power at
//! each step of its sync into a new epoch: after acceptedEpoch, part-way
//! through the synced txns (its process killed: what it wrote survives),
//! after all of them but before currentEpoch, after currentEpoch but before
//! its ACK of NEWLEADER, and after the leader took that ACK but before
//! UPTODATE (ZOOKEEPER-2307, 4785, 4643, 2033, 1282/1291). Each time what
//! the step made durable is on its disk, it restarts, rejoins, and serves
//! a tree with every create acknowledged before its restart. And the whole
//! ensemble loses power right after a new leader synced it (3911).

use super::script::Script;
use super::scripted::{behind_in_new_epoch, each_seed, Behind};
use super::trap::{Action, JobKind, Moment};
use super::SyncKind;
use crate::core::zab::ZabMessage;
use std::cell::Cell;
use std::rc::Rc;
use zkd_protocol::Zxid;

/// Members snapshot this rarely: no snapshot (and log purge) may pass the
/// member left behind, or a leader recovered from it syncs that member by
/// SNAP, not DIFF.
const NO_SNAPSHOTS: u64 = 1_000;

/// Where the follower's sync is cut short.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Point {
    /// acceptedEpoch is durable, ACKEPOCH not sent.
    AcceptedEpoch,
    /// Some txns of the sync are written, some not.
    PartWay,
    /// Every txn of the sync is written, maybe not synced; currentEpoch is not.
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
    } = behind_in_new_epoch(seed, 3, 5, NO_SNAPSHOTS)?;
    let acked = s.acked();
    let since = s.now();
    // The leader's last txn sent in the sync, and the append the kill followed.
    let sync_point = Rc::new(Cell::new(Zxid::ZERO));
    let killed_after = Rc::new(Cell::new(Zxid::ZERO));
    let (seen_sync_point, seen_kill) = (sync_point.clone(), killed_after.clone());
    s.at(move |sim, moment| {
        if let Some(z) = sim.sync_point(leader, f) {
            seen_sync_point.set(z);
        }
        let ours = |member: &crate::core::election::ServerId| *member == f;
        match (point, moment) {
            (
                Point::AcceptedEpoch,
                Moment::AfterJob {
                    member,
                    job: JobKind::AcceptedEpoch(e),
                },
            ) if ours(member) && *e == new_epoch => Some(Action::Crash(f)),
            (
                Point::PartWay,
                Moment::AfterJob {
                    member,
                    job: JobKind::Append(zxid),
                },
            ) if ours(member) && sim.sync_point(leader, f).is_some_and(|p| *zxid < p) => {
                seen_kill.set(*zxid);
                Some(Action::Kill(f))
            }
            (
                Point::BeforeCurrentEpoch,
                Moment::BeforeJob {
                    member,
                    job: JobKind::CurrentEpoch(e),
                },
            )
            | (
                Point::AfterCurrentEpoch,
                Moment::AfterJob {
                    member,
                    job: JobKind::CurrentEpoch(e),
                },
            ) if ours(member) && *e == new_epoch => Some(Action::Crash(f)),
            (
                Point::NewLeaderAcked,
                Moment::Received {
                    from,
                    to,
                    message: ZabMessage::Ack { zxid },
                },
            ) if ours(from)
                && *to == leader
                && *zxid == Zxid::new(new_epoch, 0)
                && !sim.serving(f) =>
            {
                Some(Action::Crash(f))
            }
            _ => None,
        }
    });
    s.restart(f)?;
    s.until_sprung("the crash point", 10_000)?;
    let syncs = s.syncs_to(f, since);
    if point != Point::AcceptedEpoch && syncs.first().map(|(kind, _)| *kind) != Some(SyncKind::Diff)
    {
        return Err(format!(
            "member {f} was to be synced by DIFF, got {syncs:?}"
        ));
    }
    let expect_current = match point {
        Point::AcceptedEpoch | Point::PartWay | Point::BeforeCurrentEpoch => old_epoch,
        Point::AfterCurrentEpoch | Point::NewLeaderAcked => new_epoch,
    };
    if s.epochs_on_disk(f) != (new_epoch, expect_current) {
        return Err(format!(
            "{point:?}: member {f}'s epochs are {:?}, expected {new_epoch}/{expect_current}",
            s.epochs_on_disk(f)
        ));
    }
    let disk_end = s.disk_end(f);
    match point {
        Point::AcceptedEpoch if disk_end != end => {
            return Err(format!("{point:?}: its log moved from {end} to {disk_end}"));
        }
        // The power cut may take what the sync wrote and did not yet sync.
        Point::BeforeCurrentEpoch if disk_end < end => {
            return Err(format!(
                "{point:?}: its log went back from {end} to {disk_end}"
            ));
        }
        Point::PartWay => {
            let (at, upto) = (killed_after.get(), sync_point.get());
            if !(end < disk_end && disk_end == at && at < upto) {
                return Err(format!(
                    "{point:?}: its log ends at {disk_end} (killed after {at}), \
                     not between {end} and the sync's end {upto}"
                ));
            }
        }
        // currentEpoch is durable, so is the whole sync: every create
        // acknowledged before it.
        Point::AfterCurrentEpoch | Point::NewLeaderAcked => {
            s.disk_holds(f, &acked)?;
            if disk_end < sync_point.get() {
                return Err(format!(
                    "{point:?}: its log ends at {disk_end}, before the sync's end {}",
                    sync_point.get()
                ));
            }
        }
        _ => {}
    }
    s.restart(f)?;
    let acked = s.acked();
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

/// ZOOKEEPER-3911/4643/4646: every member loses power right after a new
/// leader is established and its followers synced: every acknowledged
/// create survives (followers made their sync durable before acking it).
fn outage_right_after_a_sync(seed: u64) -> Result<(), String> {
    let mut s = Script::new(seed, 3);
    let old = s.leader_with_writes(30)?;
    s.crash(old);
    s.run_until("a new leader", 10_000, |s| s.leader().is_some())?;
    s.crash_all();
    for id in s.ids() {
        s.restart(id)?;
    }
    s.finish()
}

/// ZOOKEEPER-2307: power loss right after acceptedEpoch was written.
#[test]
fn zk_2307_follower_crash_after_accepted_epoch_rejoins() {
    each_seed(|seed| crash_during_diff_sync(seed, Point::AcceptedEpoch));
}

/// ZOOKEEPER-4785: killed with part of the synced txns written.
#[test]
fn zk_4785_follower_killed_part_way_through_the_synced_txns_rejoins() {
    each_seed(|seed| crash_during_diff_sync(seed, Point::PartWay));
}

/// ZOOKEEPER-4643: power lost just before currentEpoch is written: the old
/// epoch, with what of the sync was synced; it rejoins. (The synced txns
/// must be durable before currentEpoch: the 2033 and 1282 rows check it.)
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
/// and the follower lost power before UPTODATE.
#[test]
fn zk_1282_follower_crash_between_newleader_ack_and_uptodate_keeps_its_sync() {
    each_seed(|seed| crash_during_diff_sync(seed, Point::NewLeaderAcked));
}

#[test]
fn zk_3911_a_correlated_outage_after_sync_loses_no_acknowledged_write() {
    each_seed(outage_right_after_a_sync);
}
