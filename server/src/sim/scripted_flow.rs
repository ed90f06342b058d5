//! Issue 35, finding 2, with whole members: a follower whose disk is far
//! slower than the writes the others commit must lag and catch up, not
//! have its link closed at the link's bound and pull a whole SNAP again and
//! again. Its leader pauses it when its link backs up and, once the link
//! drains, sends it the txns it missed, from memory or from the log. And
//! issue 14's finding 7: the leader's slow reads for it stall no one.

use super::script::Script;
use super::scripted::each_seed;
use super::SyncKind;
use crate::core::election::ServerId;

/// How long the follower's disk is slow, and how slow each of its jobs is.
const SLOW_MS: u64 = 6_000;
const SLOW_JOB_MS: u64 = 60;

/// Txns between a member's snapshots (and log purges).
const SNAP_COUNT: u64 = 2_000;

/// How much longer each of the leader's reads takes while they are slow:
/// twice the scripts' syncLimit (5 ticks of 100 ms).
const SLOW_READ_MS: u64 = 1_000;

/// What is slow while the writes go on.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Slow {
    /// A follower's disk.
    FollowerDisk,
    /// A follower's disk, and its leader's reads (a cold cache), each
    /// longer than syncLimit.
    AndLeaderReads,
}

/// A follower's disk is slow for a while under writes, then recovers. All
/// along it serves its clients on the one sync it had, and at the end it
/// holds every write. Returns how often its leader read its log for it.
pub(super) fn a_slow_follower_lags_and_catches_up(seed: u64) -> Result<u64, String> {
    slow_for_a_while(seed, Slow::FollowerDisk)
}

/// Issue 14, finding 7: the leader catches the slow follower up from its
/// log while its own reads are slow too. The reads run on its storage
/// thread, not its loop: it goes on pinging the other follower and serving,
/// so every member serves its clients all along.
pub(super) fn slow_log_reads_stall_no_one(seed: u64) -> Result<u64, String> {
    slow_for_a_while(seed, Slow::AndLeaderReads)
}

fn slow_for_a_while(seed: u64, slow: Slow) -> Result<u64, String> {
    // Snapshots (and log purges) rare enough that the leader's log reaches
    // back past its in-memory window, as the runtime's does by default.
    let mut s = Script::snapshotting(seed, 3, SNAP_COUNT);
    let leader = s.leader_with_writes(20)?;
    let follower = s.others(leader)[0];
    let since = s.now();
    let reads = s.sim.counts.catch_up_reads;
    let serving = move |s: &Script| match slow {
        Slow::FollowerDisk => keeps_serving(s, follower),
        Slow::AndLeaderReads => s.ids().into_iter().try_for_each(|id| keeps_serving(s, id)),
    };
    s.slow_disk(follower, SLOW_JOB_MS);
    if slow == Slow::AndLeaderReads {
        s.slow_reads(leader, SLOW_READ_MS);
    }
    let until = s.now() + SLOW_MS;
    s.run_until_holding("the slow disk", SLOW_MS + 1, |s| s.now() >= until, serving)?;
    s.slow_disk(follower, 0);
    s.slow_reads(leader, 0);
    let end = s.now() + 3_000;
    s.run_until_holding("the disk recovered", 3_001, |s| s.now() >= end, serving)?;
    let syncs = s.syncs_to(follower, since);
    if syncs.iter().any(|(kind, _)| *kind == SyncKind::Snap) {
        return Err(format!("member {follower} was synced again: {syncs:?}"));
    }
    let reads = s.sim.counts.catch_up_reads - reads;
    s.finish().map(|()| reads)
}

/// A follower whose disk stalls acknowledges nothing and leaves its
/// leader after syncLimit, not before: its leader drops it (ZooKeeper's
/// SyncLimitCheck, `leader/sync_limit.rs`), or it hears its leader's pings
/// too late behind the proposals it cannot log and leaves on its own. It
/// stops serving reads it can no longer keep up with, the leader stays,
/// and once the disk resumes the follower syncs again and serves.
pub(super) fn a_stalled_follower_is_dropped_and_returns(seed: u64) -> Result<(), String> {
    let mut s = Script::new(seed, 3);
    let leader = s.leader_with_writes(20)?;
    let follower = s.others(leader)[0];
    s.stall_disk(follower);
    let stalled_at = s.now();
    s.run_until("it stops serving", 1_000, |s| !s.serving(follower))?;
    if s.now() - stalled_at < s.sim.schedule.timing.sync_ms() {
        return Err(format!(
            "dropped {} ms after its disk stalled",
            s.now() - stalled_at
        ));
    }
    s.more_writes(50, 5_000)?;
    s.unstall_disk(follower);
    s.run_until("it follows and serves again", 10_000, |s| {
        s.serving(follower) && s.following(follower) == Some(leader)
    })?;
    s.finish()
}

#[test]
fn a_follower_whose_disk_stalls_past_sync_limit_is_dropped_and_returns() {
    each_seed(a_stalled_follower_is_dropped_and_returns);
}

/// What a member's clients see: it serves them.
fn keeps_serving(s: &Script, id: ServerId) -> Result<(), String> {
    match s.serving(id) {
        true => Ok(()),
        false => Err(format!("member {id} stopped serving its clients")),
    }
}

/// Runs `script` over the seeds; at least one of them must have had the
/// leader read its log (most fall past its in-memory window; one replayed
/// may not).
fn reads_the_log(script: fn(u64) -> Result<u64, String>) {
    let reads = std::cell::Cell::new(0);
    each_seed(|seed| {
        reads.set(reads.get() + script(seed)?);
        Ok(())
    });
    let replaying = std::env::var("ZKD_SIM_SEED").is_ok();
    assert!(
        replaying || reads.get() > 0,
        "no catch-up read the leader's log"
    );
}

#[test]
fn a_follower_with_a_slow_disk_lags_and_catches_up_without_a_snap() {
    reads_the_log(a_slow_follower_lags_and_catches_up);
}

#[test]
fn a_leaders_slow_log_reads_stall_none_of_its_members() {
    reads_the_log(slow_log_reads_stall_no_one);
}

#[cfg(feature = "failpoints")]
#[test]
fn planted_blocking_storage_reads_caught_with_whole_members() {
    super::scripted::assert_script_catches(
        crate::failpoints::Failpoint::BlockingStorageReads,
        |seed| slow_log_reads_stall_no_one(seed).map(drop),
        &["stopped serving its clients"],
    );
}

#[cfg(feature = "failpoints")]
#[test]
fn planted_unpaced_followers_caught_with_whole_members() {
    super::scripted::assert_script_catches(
        crate::failpoints::Failpoint::UnpacedFollowers,
        |seed| a_slow_follower_lags_and_catches_up(seed).map(drop),
        &["stopped serving its clients"],
    );
}
