//! A deposed leader's lone txns, with whole members: a leader cut off from
//! the others logs its clients' writes that nobody else has, then comes back
//! as the follower of a newer leader. Its TRUNC is cut short by power loss
//! or a broken link (ZOOKEEPER-1489, 5094); it never lost its memory (2845);
//! its lone txn is the first of an epoch the newer leader skipped (2832); it
//! snapshotted with them outstanding (1558), or a dirty snapshot of them is
//! on its disk (1549). Each time no member keeps them, and nothing
//! acknowledged is lost.

use super::script::Script;
use super::scripted::each_seed;
use super::trap::{Action, JobKind, Moment};
use super::SyncKind;
use crate::core::election::ServerId;
use crate::core::zab::ZabMessage;
use std::cell::Cell;
use std::rc::Rc;
use zkd_protocol::Zxid;

/// The leader is partitioned from the others (silently: it leads on until
/// its followers' silence tells it), and two clients move to it: their new
/// sessions and writes are txns nobody else gets. Runs until it logged one.
/// Returns the leader and where the others' logs ended when it was cut off
/// (everything past that on its log is lone).
fn cut_off_leader_with_lone_txns(s: &mut Script) -> Result<(ServerId, Zxid), String> {
    let old = s.leader_with_writes(20)?;
    s.isolate_silently(old);
    s.pin_clients(old)?;
    let others = s.others(old);
    // What was on the wire before the partition lands on their disks.
    s.run_for(20)?;
    s.run_until("the others' queues run", 100, |s| {
        others.iter().all(|id| s.queued(*id) == 0)
    })?;
    let base = others.iter().map(|id| s.last_logged(*id)).max();
    let base = base.unwrap_or(Zxid::ZERO);
    s.run_until("a lone txn on the cut-off leader", 2_000, |s| {
        !s.logged_after(old, base).is_empty()
    })?;
    Ok((old, base))
}

/// Runs until every txn member `id` logged after `base` is durable.
fn lone_durable(s: &mut Script, id: ServerId, base: Zxid) -> Result<(), String> {
    s.run_until("its lone txns durable", 1_000, |s| {
        s.logged_after(id, base)
            .last()
            .is_some_and(|z| s.durable(id, *z))
    })
}

/// [`cut_off_leader_with_lone_txns`], then it loses power and the others
/// elect a leader and commit more. Returns it (down) and its lone txns.
fn deposed_leader_down(s: &mut Script) -> Result<(ServerId, Vec<Zxid>), String> {
    let (old, base) = cut_off_leader_with_lone_txns(s)?;
    lone_durable(s, old, base)?;
    let lone = down_while_others_move_on(s, old, base)?;
    Ok((old, lone))
}

/// The cut-off leader `old` loses power; the others elect a leader and
/// commit more. Returns its lone txns, those past `base` its disk kept.
fn down_while_others_move_on(
    s: &mut Script,
    old: ServerId,
    base: Zxid,
) -> Result<Vec<Zxid>, String> {
    s.crash(old);
    let lone = s.logged_after(old, base);
    s.heal();
    s.unpin_clients()?;
    s.run_until("a new leader", 10_000, |s| {
        s.leader().is_some_and(|l| l != old)
    })?;
    s.more_writes(10, 10_000)?;
    Ok(lone)
}

/// Fails unless the first sync member `id` received since `since` is `kind`.
fn first_sync(s: &Script, id: ServerId, since: u64, kind: SyncKind) -> Result<(), String> {
    match s.syncs_to(id, since).first() {
        Some((k, _)) if *k == kind => Ok(()),
        _ => Err(format!(
            "expected a {kind:?} to member {id}: {:?}",
            s.syncs_to(id, since)
        )),
    }
}

/// ZOOKEEPER-1154/1156: on its return the deposed leader's lone txns are
/// truncated, never delivered anywhere, and it converges.
fn lone_txns_truncated_on_return(seed: u64) -> Result<(), String> {
    let mut s = Script::new(seed, 3);
    let (old, lone) = deposed_leader_down(&mut s)?;
    let since = s.now();
    s.restart(old)?;
    s.run_until("it rejoins and serves", 15_000, |s| s.serving(old))?;
    first_sync(&s, old, since, SyncKind::Trunc)?;
    s.run_for(1_000)?;
    s.holds_none(old, &lone)?;
    s.finish()
}

/// ZOOKEEPER-1489: power lost right after the TRUNC cut the log. The cut
/// kept every acknowledged txn up to its point and none of the lone ones;
/// the member restarts, rejoins and converges.
fn crash_right_after_the_trunc(seed: u64) -> Result<(), String> {
    let mut s = Script::new(seed, 3);
    let (old, lone) = deposed_leader_down(&mut s)?;
    let cut = Rc::new(Cell::new(None));
    let seen = cut.clone();
    s.at(move |_, moment| match moment {
        Moment::AfterJob {
            member,
            job: JobKind::Truncate(to),
        } if *member == old => {
            seen.set(Some(*to));
            Some(Action::Crash(old))
        }
        _ => None,
    });
    s.restart(old)?;
    s.until_sprung("the crash after the TRUNC", 10_000)?;
    let cut = cut.get().ok_or("no truncation")?;
    if lone.first().is_some_and(|first| cut >= *first) {
        return Err(format!("the TRUNC to {cut} keeps the lone {lone:?}"));
    }
    s.holds_none(old, &lone)?;
    s.disk_holds(old, &s.acked_through(cut))?;
    if s.disk_end(old) != cut {
        return Err(format!(
            "the log ends at {}, not at the cut {cut}",
            s.disk_end(old)
        ));
    }
    s.restart(old)?;
    let acked = s.acked();
    s.run_until("it rejoins and serves", 15_000, |s| s.serving(old))?;
    s.tree_holds(old, &acked)?;
    s.holds_none(old, &lone)?;
    s.finish()
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
/// before NEWLEADER is acknowledged. Once its role has ended the member's
/// memory is within its disk; it syncs again, and a later restart recovers
/// its whole history.
fn trunc_interrupted(seed: u64, at: Break) -> Result<(), String> {
    let mut s = Script::new(seed, 3);
    let (old, lone) = deposed_leader_down(&mut s)?;
    let leader = s.leader().ok_or("no leader")?;
    let since = s.now();
    s.at(move |_, moment| {
        let now = match (at, moment) {
            (
                Break::OnTrunc,
                Moment::Received {
                    to,
                    message: ZabMessage::Trunc { .. },
                    ..
                },
            ) => *to == old,
            (
                Break::AfterTheCut,
                Moment::AfterJob {
                    member,
                    job: JobKind::Truncate(_),
                },
            ) => *member == old,
            _ => false,
        };
        now.then_some(Action::Cut(old, leader))
    });
    s.restart(old)?;
    s.until_sprung("the broken link", 10_000)?;
    first_sync(&s, old, since, SyncKind::Trunc)?;
    s.run_until("its role ends and its queue runs", 2_000, |s| {
        !s.serving(old) && s.queued(old) == 0
    })?;
    s.memory_within_disk(old)?;
    s.heal();
    s.run_until("it rejoins and serves", 15_000, |s| s.serving(old))?;
    s.holds_none(old, &lone)?;
    s.more_writes(10, 10_000)?;
    s.restart_keeps_acked(old)?;
    s.holds_none(old, &lone)?;
    s.finish()
}

/// ZOOKEEPER-2845: a leader cut off logs a txn only it has and steps down
/// without a restart (its memory kept); it rejoins the new leader as a
/// follower, is truncated, and neither then nor after a restart does any
/// member hold that txn.
fn deposed_leader_with_its_memory(seed: u64) -> Result<(), String> {
    let mut s = Script::new(seed, 3);
    let (old, base) = cut_off_leader_with_lone_txns(&mut s)?;
    lone_durable(&mut s, old, base)?;
    s.run_until("a new leader, the old one stepped down", 10_000, |s| {
        s.leader().is_some_and(|l| l != old) && !s.serving(old)
    })?;
    let lone = s.logged_after(old, base);
    s.more_writes(10, 10_000)?;
    let since = s.now();
    // Few writes until it is back: its gap stays within the leader's log.
    s.hold_writes();
    s.heal();
    s.run_until("it follows the new leader", 15_000, |s| s.serving(old))?;
    s.release_writes();
    first_sync(&s, old, since, SyncKind::Trunc)?;
    for id in s.ids() {
        s.holds_none(id, &lone)?;
    }
    s.restart_keeps_acked(old)?;
    s.holds_none(old, &lone)?;
    s.finish()
}

/// ZOOKEEPER-2832: B leads epoch e and logs <e,1> alone (A acked only its
/// NEWLEADER, then its disk stalled); B and A go down; A leads the next epoch with C, C takes a
/// snapshot; A goes down, C leads with B. C's history has nothing of
/// epoch e, so where ZooKeeper sent a DIFF from its last zxid and B kept
/// <e,1>, B gets a SNAP, and <e,1> is gone.
fn first_txn_of_a_skipped_epoch(seed: u64) -> Result<(), String> {
    let mut s = Script::new(seed, 3);
    s.leader_with_writes(20)?;
    let c = ServerId(1 + seed % 3);
    s.crash_all();
    let (x, y) = match s.others(c)[..] {
        [x, y] => (x, y),
        _ => return Err("three members".into()),
    };
    s.restart(x)?;
    s.restart(y)?;
    // The moment B is established, A's disk stalls: B's proposals of its
    // epoch reach A and wait there; only B logs them.
    s.run_until("B established", 10_000, |s| s.leader().is_some())?;
    let b = s.leader().ok_or("no leader")?;
    let a = if b == x { y } else { x };
    s.stall_disk(a);
    let epoch = s.leading_epoch(b).ok_or("no epoch")?;
    let first = Zxid::new(epoch, 1);
    s.run_until("<e,1> durable on B", 2_000, |s| s.durable(b, first))?;
    let acked_last = s.acked().values().max().copied().unwrap_or(0);
    if s.disk_end(a).epoch() >= epoch || acked_last >= first.0 {
        return Err(format!("A has {} of epoch {epoch}", s.disk_end(a)));
    }
    s.crash(b);
    s.crash(a);
    s.unstall_disk(a);
    s.restart(a)?;
    s.restart(c)?;
    s.run_until("A leads the next epoch", 10_000, |s| s.leader() == Some(a))?;
    s.more_writes(10, 10_000)?;
    s.run_until("C serving", 10_000, |s| s.serving(c))?;
    s.snapshot(c)?;
    s.more_writes(10, 10_000)?;
    s.crash(a);
    let since = s.now();
    s.restart(b)?;
    s.run_until("C leads with B", 15_000, |s| {
        s.leader() == Some(c) && s.serving(b)
    })?;
    first_sync(&s, b, since, SyncKind::Snap)?;
    s.holds_none(b, &[first])?;
    s.finish()
}

/// ZOOKEEPER-1558: a leader, cut off, has its clients' proposals
/// outstanding and snapshots meanwhile, then loses power; a new leader
/// without them commits more. The snapshot held none of them (a tree holds
/// only what was committed), and on its return the TRUNC removes them from
/// its log.
fn snapshot_with_outstanding_proposals(seed: u64) -> Result<(), String> {
    let mut s = Script::new(seed, 3);
    let (old, base) = cut_off_leader_with_lone_txns(&mut s)?;
    if !s.serving(old) {
        return Err("the cut-off leader stepped down before its snapshot".into());
    }
    let snap = s.snapshot(old)?;
    let lone = s.logged_after(old, base);
    if lone.first().is_none_or(|first| snap >= *first) {
        return Err(format!(
            "expected a snapshot below the outstanding {lone:?}, got {snap}"
        ));
    }
    let lone = down_while_others_move_on(&mut s, old, base)?;
    let since = s.now();
    s.restart(old)?;
    s.run_until("it rejoins and serves", 15_000, |s| s.serving(old))?;
    first_sync(&s, old, since, SyncKind::Trunc)?;
    s.holds_none(old, &lone)?;
    s.crash(old);
    s.holds_none(old, &lone)?;
    s.finish()
}

/// ZOOKEEPER-1549: a deposed leader restarts with its lone txns in its log
/// (recovery replays them into its tree) and, before any leader synced it,
/// a snapshot of that dirty tree lands on its disk (as an older zkd took
/// one; today's takes none before it serves). On rejoining a leader of a
/// newer epoch (TRUNC, or SNAP where its log cannot be cut), the dirty
/// snapshot is gone and neither its tree nor its disk holds the txns.
/// Even seeds took a clean snapshot before it was cut off.
fn dirty_snapshot_never_survives(seed: u64) -> Result<(), String> {
    let mut s = Script::new(seed, 3);
    if seed.is_multiple_of(2) {
        let leader = s.leader_with_writes(20)?;
        s.snapshot(leader)?;
    }
    let (old, lone) = deposed_leader_down(&mut s)?;
    let last = *lone.last().ok_or("no lone txns")?;
    // Back, still cut off: recovery replayed the lone txns into its tree.
    s.isolate(old);
    s.restart(old)?;
    s.run_for(50)?;
    let dirty = s.snapshot(old)?;
    if dirty < last {
        return Err(format!(
            "the snapshot at {dirty} is not dirty (lone {lone:?})"
        ));
    }
    let since = s.now();
    s.heal();
    s.run_until("it rejoins and serves", 15_000, |s| s.serving(old))?;
    match s.syncs_to(old, since).first() {
        Some((SyncKind::Trunc | SyncKind::Snap, _)) => {}
        other => return Err(format!("expected a TRUNC or a SNAP, got {other:?}")),
    }
    if s.snapshots(old).contains(&dirty) {
        return Err(format!("the dirty snapshot at {dirty} survived the sync"));
    }
    s.holds_none(old, &lone)?;
    s.more_writes(5, 10_000)?;
    s.crash(old);
    s.holds_none(old, &lone)?;
    s.finish()
}

#[test]
fn zk_1154_a_dead_leaders_lone_txns_are_truncated_on_its_return() {
    each_seed(lone_txns_truncated_on_return);
}

#[test]
fn zk_1489_crash_right_after_a_trunc_loses_nothing_committed() {
    each_seed(crash_right_after_the_trunc);
}

#[test]
fn zk_5094_link_broken_on_trunc_before_the_cut_keeps_memory_within_disk() {
    each_seed(|seed| trunc_interrupted(seed, Break::OnTrunc));
}

#[test]
fn zk_5094_link_broken_after_the_trunc_cut_keeps_memory_within_disk() {
    each_seed(|seed| trunc_interrupted(seed, Break::AfterTheCut));
}

#[test]
fn zk_2845_a_deposed_leader_that_kept_its_memory_is_truncated() {
    each_seed(deposed_leader_with_its_memory);
}

#[test]
fn zk_2832_an_uncommitted_first_txn_of_a_skipped_epoch_is_dropped() {
    each_seed(first_txn_of_a_skipped_epoch);
}

#[test]
fn zk_1558_a_leader_snapshotting_with_outstanding_proposals_keeps_none() {
    each_seed(snapshot_with_outstanding_proposals);
}

#[test]
fn zk_1549_a_dirty_snapshot_never_survives_the_sync() {
    each_seed(dirty_snapshot_never_survives);
}
