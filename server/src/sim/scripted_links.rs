//! Scripted: a member's link readers. What a closed quorum link still
//! brings reaches no role: a runtime link reader may hold what it read
//! while it waits for its read budget, so a link's last packets and its
//! close can reach the member after a newer link to the same peer has
//! synced. And a reader waits for its budget, so a slow disk bounds what
//! a follower queues.

use super::reader::MAX_ZAB_MESSAGES;
use super::script::Script;
use super::scripted::each_seed;
use super::Wire;
use crate::core::election::ServerId;

/// How long the script watches the follower after the stale close arrives:
/// several sync limits, so a leader that dropped it would be seen to.
const WATCH_MS: u64 = 3_000;

#[test]
fn a_stale_close_of_a_replaced_link_ends_no_role() {
    each_seed(a_stale_close_reaches_the_leader);
}

/// A follower's link to its leader breaks and heals at once. The follower
/// learns, looks, and syncs again with the same leader on a new link; the
/// leader reads the old link's close only after that. It must see the
/// close is of a link replaced since: the follower keeps following and
/// serving, and its clients' writes keep being acknowledged.
pub(super) fn a_stale_close_reaches_the_leader(seed: u64) -> Result<(), String> {
    let mut s = Script::new(seed, 3);
    let leader = s.leader_with_writes(20)?;
    let follower = s.others(leader)[0];
    s.set_aside(move |from, to, wire| {
        from == follower && to == leader && matches!(wire, Wire::Closed { .. })
    });
    s.cut(leader, follower);
    s.heal();
    if s.aside() == 0 {
        return Err("the old link's close was not set aside".into());
    }
    let since = s.now();
    s.run_until("the follower synced again on a new link", 5_000, |s| {
        s.serving(follower) && !s.syncs_to(follower, since).is_empty()
    })?;
    if s.following(follower) != Some(leader) {
        return Err(format!("member {follower} follows another leader"));
    }
    s.more_writes(10, 3_000)?;
    s.release_aside();
    let until = s.now() + WATCH_MS;
    s.run_until_holding(
        "the stale close read",
        WATCH_MS + 1,
        |s| s.now() >= until,
        |s| same_role(s, leader, follower),
    )?;
    s.more_writes(10, 3_000)?;
    s.finish()
}

/// The leader leads and the follower serves, following it.
fn same_role(s: &Script, leader: ServerId, follower: ServerId) -> Result<(), String> {
    if s.leader() != Some(leader) {
        return Err(format!("member {leader} no longer leads"));
    }
    if !s.serving(follower) || s.following(follower) != Some(leader) {
        return Err(format!(
            "member {follower} stopped following member {leader}"
        ));
    }
    Ok(())
}

#[cfg(feature = "failpoints")]
#[test]
fn planted_stale_link_events_caught_with_whole_members() {
    super::scripted::assert_script_catches(
        crate::failpoints::Failpoint::StaleLinkEvents,
        a_stale_close_reaches_the_leader,
        &["stopped following"],
    );
}

/// Storage jobs a follower may have queued beyond the appends its read
/// budget covers: a barrier, a local snapshot (26 at most were seen).
const OTHER_JOBS: usize = 4;

/// How long the follower's disk is slow, and how much slower each job is:
/// far slower than the clients' writes come.
const SLOW_MS: u64 = 3_000;
const SLOW_JOB_MS: u64 = 20;

#[test]
fn a_follower_with_a_slow_disk_queues_no_more_than_its_budget() {
    each_seed(a_slow_follower);
}

/// Finding 6: a follower's disk is far slower than the writes coming. Each
/// proposal holds its share of the read budget until it is durable, so
/// its link's reader waits and the follower's storage queue stays within
/// the budget (the leader sees it fall behind), while the others go on
/// acknowledging writes.
pub(super) fn a_slow_follower(seed: u64) -> Result<(), String> {
    let mut s = Script::new(seed, 3);
    let leader = s.leader_with_writes(20)?;
    let follower = s.others(leader)[0];
    let waits = s.sim.counts.budget_waits;
    s.slow_disk(follower, SLOW_JOB_MS);
    let bound = MAX_ZAB_MESSAGES + OTHER_JOBS;
    let until = s.now() + SLOW_MS;
    s.run_until_holding(
        "the slow disk",
        SLOW_MS + 1,
        |s| s.now() >= until,
        |s| match s.queued(follower) {
            queued if queued > bound => Err(format!(
                "member {follower} has {queued} storage jobs queued, past its budget ({bound})"
            )),
            _ => Ok(()),
        },
    )?;
    if s.sim.counts.budget_waits == waits {
        return Err("the follower's reader never waited for its budget".into());
    }
    s.more_writes(10, 3_000)?;
    s.finish()
}

#[cfg(feature = "failpoints")]
#[test]
fn planted_unbounded_intake_caught_with_whole_members() {
    super::scripted::assert_script_catches(
        crate::failpoints::Failpoint::UnboundedIntake,
        a_slow_follower,
        &["past its budget"],
    );
}
