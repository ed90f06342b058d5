//! Scripted: what a closed quorum link still brings reaches no role. A
//! runtime link reader may hold what it read while it waits for its read
//! budget, so a link's last packets and its close can reach the member
//! after a newer link to the same peer has synced.

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
    use crate::failpoints::{planted, Failpoint};
    let failure = (1..=10).find_map(|seed| {
        planted::with(Failpoint::StaleLinkEvents, || {
            a_stale_close_reaches_the_leader(seed).err()
        })
    });
    let failure = failure.expect("stale-link-events planted, and no seed caught it");
    assert!(failure.contains("stopped following"), "{failure}");
    eprintln!("{failure}");
}
