//! Election rows with whole members: members joining an established
//! ensemble leave its leader alone (ZOOKEEPER-975, 1732, 1818); five
//! members with mixed histories, started one by one, elect within a bound
//! (1419); leaders failing one after another never reuse an epoch (335).

use super::script::Script;
use super::scripted::each_seed;
use crate::core::election::ServerId;

/// The leader `leader` stays established in `epoch`.
fn undisturbed(s: &Script, leader: ServerId, epoch: u32) -> Result<(), String> {
    if s.leader() == Some(leader) && s.epoch() == Some(epoch) {
        Ok(())
    } else {
        Err(format!(
            "the leader {leader} of epoch {epoch} was disturbed (leader now {:?}, epoch {:?})",
            s.leader(),
            s.epoch()
        ))
    }
}

/// Runs until member `id` serves, then a while longer, with `leader`
/// established in `epoch` at every step.
fn joins_leaving_the_leader_alone(
    s: &mut Script,
    id: ServerId,
    leader: ServerId,
    epoch: u32,
) -> Result<(), String> {
    s.run_until_holding(
        "it joins and serves",
        10_000,
        |s| s.serving(id),
        |s| undisturbed(s, leader, epoch),
    )?;
    let since = s.now();
    s.run_until_holding(
        "a while after",
        2_000,
        |s| s.now() >= since + 1_500,
        |s| undisturbed(s, leader, epoch),
    )
}

/// ZOOKEEPER-1732/975: a follower restarts into an established ensemble,
/// with its stale votes and epochs (odd seeds), or with an empty disk, a
/// new machine (even seeds).
fn a_member_joins_an_established_ensemble(seed: u64) -> Result<(), String> {
    let mut s = Script::new(seed, 3);
    let leader = s.leader_with_writes(20)?;
    let epoch = s.epoch().ok_or("no epoch")?;
    let f = s.others(leader)[(seed % 2) as usize];
    s.crash(f);
    s.more_writes(20, 10_000)?;
    if seed.is_multiple_of(2) {
        s.wipe(f)?;
    }
    s.restart(f)?;
    joins_leaving_the_leader_alone(&mut s, f, leader, epoch)?;
    s.finish()
}

/// ZOOKEEPER-1818: five members; one is down while the leader changes; it
/// comes back to the new leader, then the deposed leader does too.
fn members_return_after_a_leader_change(seed: u64) -> Result<(), String> {
    let mut s = Script::new(seed, 5);
    let old = s.leader_with_writes(20)?;
    let old_epoch = s.epoch().ok_or("no epoch")?;
    let absent = s.others(old)[(seed % 4) as usize];
    s.crash(absent);
    s.more_writes(10, 10_000)?;
    s.crash(old);
    s.run_until("a new leader", 10_000, |s| {
        s.epoch().is_some_and(|e| e > old_epoch)
    })?;
    let leader = s.leader().ok_or("no leader")?;
    let epoch = s.epoch().ok_or("no epoch")?;
    s.more_writes(10, 10_000)?;
    for back in [absent, old] {
        s.restart(back)?;
        joins_leaving_the_leader_alone(&mut s, back, leader, epoch)?;
    }
    s.finish()
}

/// How long five members may take to elect once a quorum of them is up.
const ELECTION_BOUND_MS: u64 = 5_000;

/// ZOOKEEPER-1419: five members with mixed epochs and zxids (members left
/// and came back across three epochs, then all lost power) start one by
/// one at seeded intervals: a leader is established within a bound after
/// the third start, and everyone converges.
fn mixed_histories_elect_within_a_bound(seed: u64) -> Result<(), String> {
    let mut s = Script::new(seed, 5);
    let first = s.leader_with_writes(10)?;
    let ids = s.ids();
    // One member misses the second epoch; two miss the third, at
    // different points of the second.
    let a = s.others(first)[(seed % 4) as usize];
    s.crash(a);
    s.more_writes(5, 10_000)?;
    s.crash(first);
    s.run_until("a second leader", 10_000, |s| s.leader().is_some())?;
    let second = s.leader().ok_or("no leader")?;
    s.more_writes(5, 10_000)?;
    s.restart(a)?;
    s.restart(first)?;
    s.run_until("both back", 10_000, |s| s.serving(a) && s.serving(first))?;
    let b = s
        .others(second)
        .into_iter()
        .find(|m| *m != a && *m != first)
        .ok_or("a fifth member")?;
    s.crash(b);
    s.more_writes(3, 10_000)?;
    s.crash(second);
    s.run_until("a third leader", 10_000, |s| s.leader().is_some())?;
    s.more_writes(5, 10_000)?;
    s.crash_all();
    let mut histories: Vec<(u32, String)> = ids
        .iter()
        .map(|m| (s.epochs_on_disk(*m).1, s.disk_end(*m).to_string()))
        .collect();
    histories.sort();
    histories.dedup();
    if histories.len() < 3 {
        return Err(format!("histories not mixed enough: {histories:?}"));
    }
    // Staggered starts, in a seeded order, 0-700 ms apart.
    let mut order = ids.clone();
    let mut r = seed;
    let mut next = || {
        r = r
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        r >> 33
    };
    for i in (1..order.len()).rev() {
        order.swap(i, next() as usize % (i + 1));
    }
    let mut quorum_at = 0;
    for (k, m) in order.into_iter().enumerate() {
        if k > 0 {
            s.run_for(next() % 700)?;
        }
        s.restart(m)?;
        if k == 2 {
            quorum_at = s.now();
        }
    }
    s.run_until("a leader", ELECTION_BOUND_MS, |s| s.leader().is_some())?;
    let took = s.now() - quorum_at;
    if took > ELECTION_BOUND_MS {
        return Err(format!("the election took {took} ms after a quorum was up"));
    }
    s.finish()
}

/// ZOOKEEPER-335/1081: leaders fail one after another, one of them after
/// it chose and persisted its epoch but before it was established: no
/// epoch is ever established twice (checked every millisecond).
fn cascading_leader_failures(seed: u64) -> Result<(), String> {
    let mut s = Script::new(seed, 3);
    s.run_until("a first leader", 10_000, |s| s.leader().is_some())?;
    let first = s.leader().ok_or("no leader")?;
    let first_epoch = s.epoch().ok_or("no epoch")?;
    s.crash(first);
    let ids = s.others(first);
    s.run_until("a successor choosing its epoch", 10_000, |s| {
        ids.iter().any(|id| s.establishing(*id))
    })?;
    let second = *ids.iter().find(|id| s.establishing(**id)).ok_or("none")?;
    s.crash(second);
    s.restart(first)?;
    s.run_until("a leader again", 20_000, |s| s.leader().is_some())?;
    let epoch = s.epoch().ok_or("no epoch")?;
    if epoch <= first_epoch {
        return Err(format!("epoch went from {first_epoch} to {epoch}"));
    }
    s.finish()
}

#[test]
fn zk_1732_975_a_member_joining_an_established_ensemble_leaves_its_leader_alone() {
    each_seed(a_member_joins_an_established_ensemble);
}

#[test]
fn zk_1818_members_returning_after_a_leader_change_leave_the_new_leader_alone() {
    each_seed(members_return_after_a_leader_change);
}

#[test]
fn zk_1419_five_members_with_mixed_histories_elect_within_a_bound() {
    each_seed(mixed_histories_elect_within_a_bound);
}

#[test]
fn zk_335_cascading_leader_failures_never_reuse_an_epoch() {
    each_seed(cascading_leader_failures);
}
