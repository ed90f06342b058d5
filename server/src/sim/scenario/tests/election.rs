//! Election rows: members joining an established ensemble leave its leader
//! alone (ZOOKEEPER-975, 1732, 1818); five members with mixed histories,
//! started one by one, elect within a bounded time (ZOOKEEPER-1419).
//! (ZOOKEEPER-4712 runs with whole members: `sim/whole/scripted.rs`.)

use super::{each_seed, leader_with_writes, more_writes};
use crate::core::election::ServerId;
use crate::sim::scenario::Scenario;

/// The leader `leader` stays established in `epoch`.
fn undisturbed(s: &Scenario, leader: ServerId, epoch: u32) -> Result<(), String> {
    if s.is_leader(leader) && s.epoch() == Some(epoch) {
        Ok(())
    } else {
        Err(format!(
            "the leader {leader} of epoch {epoch} was disturbed (leader now {:?}, epoch {:?})",
            s.leader(),
            s.epoch()
        ))
    }
}

/// ZOOKEEPER-1732/975: a follower restarts into an established ensemble,
/// with its stale votes and epochs (odd seeds), or with an empty disk, a
/// new machine (even seeds). Its leader stays established in the same
/// epoch at every step until it serves, and after.
#[test]
fn zk_1732_975_a_member_joining_an_established_ensemble_leaves_its_leader_alone() {
    each_seed(|seed| {
        let mut s = Scenario::new(seed, 3);
        let leader = leader_with_writes(&mut s, 20)?;
        let epoch = s.epoch().ok_or("no epoch")?;
        let f = s.others(leader)[(seed % 2) as usize];
        s.crash(f);
        more_writes(&mut s, 20, 10_000)?;
        if seed % 2 == 0 {
            s.wipe(f);
        }
        s.restart(f);
        s.run_until_holding(
            "it joins and serves",
            10_000,
            |s| s.serving(f),
            |s| undisturbed(s, leader, epoch),
        )?;
        let since = s.now();
        s.run_until_holding(
            "a while after",
            2_000,
            |s| s.now() >= since + 1_500,
            |s| undisturbed(s, leader, epoch),
        )?;
        s.finish()
    });
}

/// ZOOKEEPER-1818: five members; one is down while the leader changes;
/// it comes back to the new leader, then the deposed leader does too.
/// Neither disturbs the new leader or its epoch.
#[test]
fn zk_1818_members_returning_after_a_leader_change_leave_the_new_leader_alone() {
    each_seed(|seed| {
        let mut s = Scenario::new(seed, 5);
        let old = leader_with_writes(&mut s, 20)?;
        let old_epoch = s.epoch().ok_or("no epoch")?;
        let absent = s.others(old)[(seed % 4) as usize];
        s.crash(absent);
        more_writes(&mut s, 10, 10_000)?;
        s.crash(old);
        s.run_until("a new leader", 10_000, |s| {
            s.epoch().is_some_and(|e| e > old_epoch)
        })?;
        let leader = s.leader().ok_or("no leader")?;
        let epoch = s.epoch().ok_or("no epoch")?;
        more_writes(&mut s, 10, 10_000)?;
        for back in [absent, old] {
            s.restart(back);
            s.run_until_holding(
                "it joins and serves",
                10_000,
                |s| s.serving(back),
                |s| undisturbed(s, leader, epoch),
            )?;
        }
        let since = s.now();
        s.run_until_holding(
            "a while after",
            2_000,
            |s| s.now() >= since + 1_500,
            |s| undisturbed(s, leader, epoch),
        )?;
        s.finish()
    });
}

/// How long five members may take to elect once a quorum of them is up.
const ELECTION_BOUND_MS: u64 = 5_000;

/// ZOOKEEPER-1419: five members with mixed epochs and zxids (members left
/// and came back across three epochs, then all lost power) start one by
/// one at seeded intervals: a leader is established within a bound after
/// the third start, and everyone converges.
#[test]
fn zk_1419_five_members_with_mixed_histories_elect_within_a_bound() {
    each_seed(|seed| {
        let mut s = Scenario::new(seed, 5);
        let first = leader_with_writes(&mut s, 10)?;
        let ids = s.ids();
        // Mixed histories: one member misses the second epoch, another
        // the third; leaders change twice.
        let a = s.others(first)[(seed % 4) as usize];
        s.crash(a);
        more_writes(&mut s, 5, 10_000)?;
        s.crash(first);
        s.run_until("a second leader", 10_000, |s| s.leader().is_some())?;
        let second = s.leader().ok_or("no leader")?;
        more_writes(&mut s, 5, 10_000)?;
        s.restart(a);
        s.restart(first);
        s.run_until("both back", 10_000, |s| s.serving(a) && s.serving(first))?;
        let b = s
            .others(second)
            .into_iter()
            .find(|m| *m != a && *m != first)
            .ok_or("a fifth member")?;
        s.crash(b);
        s.crash(second);
        s.run_until("a third leader", 10_000, |s| s.leader().is_some())?;
        more_writes(&mut s, 5, 10_000)?;
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
        for i in (1..order.len()).rev() {
            r = r
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            order.swap(i, (r >> 33) as usize % (i + 1));
        }
        let mut quorum_at = 0;
        for (k, m) in order.into_iter().enumerate() {
            r = r
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            if k > 0 {
                s.run_for((r >> 33) % 700)?;
            }
            s.restart(m);
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
    });
}
