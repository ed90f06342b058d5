//! Seeded schedules with whole members: fault-free runs, and runs with
//! crashes and partitions while clients create, read and sync.

use super::{run, WholeCounts};
use crate::core::zab::Timing;
use crate::sim::{Schedule, SCRIPT_TIMING};

/// A membership run's schedule (`Schedule::membership`).
fn membership(seed: u64) -> Schedule {
    Schedule {
        membership: true,
        ..schedule(seed, 12_000)
    }
}

fn schedule(seed: u64, faults_until_ms: u64) -> Schedule {
    Schedule {
        seed,
        members: if seed.is_multiple_of(3) { 5 } else { 3 },
        // A quarter of the schedules have observers too.
        observers: [0, 2, 0, 1][seed as usize % 4],
        faults_until_ms,
        end_ms: faults_until_ms + 10_000,
        scripted: false,
        snap_count: 40,
        timing: timing(seed),
        membership: false,
        hostile: false,
    }
}

/// tickTime, initLimit and syncLimit by seed (issue 35): a quarter of the
/// schedules run the scripts' 100 ms, 10 and 5; the rest mix ticks of 50,
/// 100 and 250 ms with initLimits of 1, 2, 5 and 10 and syncLimits of 1, 2
/// and 5. initLimit is at least 250 ms: the members of one round decide up
/// to a finalize wait (200 ms) apart (one that hears every other voter
/// decides at once), and a leader whose followers gave up before it decided
/// never establishes, in ZooKeeper too. So initLimit 1 comes with 250 ms ticks.
fn timing(seed: u64) -> Timing {
    let h = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40;
    if h.is_multiple_of(4) {
        return SCRIPT_TIMING;
    }
    let tick_ms = [50, 100, 250][(h >> 2) as usize % 3];
    let init_limit = [1, 2, 5, 10][(h >> 4) as usize % 4];
    Timing {
        tick_ms,
        init_limit: init_limit.max(250_u64.div_ceil(tick_ms)),
        sync_limit: [1, 2, 5][(h >> 6) as usize % 3],
    }
}

fn seeds() -> u64 {
    std::env::var("ZKD_SIM_SEEDS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1000)
}

/// The first seed of the random schedules (`ZKD_SIM_FIRST_SEED`, 1 by
/// default), so a long run can start past the ones CI runs.
fn first_seed() -> u64 {
    std::env::var("ZKD_SIM_FIRST_SEED")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1)
}

#[test]
fn members_without_faults_serve_clients_and_converge() {
    for seed in 1..=5 {
        match run(schedule(seed, 0)) {
            Ok(counts) => assert!(counts.clients.creates_acked > 0, "seed {seed}: {counts:?}"),
            Err(e) => panic!("{e}"),
        }
    }
}

#[test]
fn members_under_crashes_and_partitions_keep_what_clients_saw() {
    let mut counts = WholeCounts::default();
    let first = first_seed();
    for seed in first..first + seeds() {
        match run(schedule(seed, 12_000)) {
            Ok(c) => counts += c,
            Err(e) => panic!("{e}"),
        }
    }
    eprintln!("whole-member runs: {counts:?}");
    let c = counts.clients;
    assert!(counts.crashes > 0 && counts.partitions > 0, "{counts:?}");
    assert!(
        counts.bridges > 0 && counts.one_way_partitions > 0,
        "{counts:?}"
    );
    assert!(
        counts.late_packets > 0,
        "no one-way partition held a message: {counts:?}"
    );
    assert!(
        counts.long_pauses > 0,
        "no pause outlasted the sync limit: {counts:?}"
    );
    assert!(
        counts.late_reads > 0,
        "no closed link's message was read late: {counts:?}"
    );
    assert!(
        counts.budget_waits > 0,
        "no link reader waited for its read budget: {counts:?}"
    );
    assert!(
        counts.fuzzy_snaps > 0,
        "no SNAP image was fuzzy: {counts:?}"
    );
    assert!(
        counts.refusals > 0 && counts.shortcuts > 0 && counts.decisions > counts.shortcuts,
        "the election shortcut was never taken, or always: {counts:?}"
    );
    assert!(
        counts.catch_up_reads > 0,
        "no follower caught up from its leader's log: {counts:?}"
    );
    assert!(
        counts.snapshots_checked > 0,
        "no snapshot was compared with a tree: {counts:?}"
    );
    assert!(
        c.creates_acked > 0 && c.reads_found > 0 && c.syncs > 0,
        "{counts:?}"
    );
    assert!(
        c.reconnects > 0,
        "no client ever lost its member: {counts:?}"
    );
    assert!(
        c.reattached > 0 && c.expired > 0,
        "no session moved, or none expired: {counts:?}"
    );
    assert!(
        c.set_data_acked > 0 && c.watches_fired > 0,
        "no data changed under a watch: {counts:?}"
    );
}

/// A client removes voters and adds them back by reconfig while members
/// crash, partition and pause (`membership`): every invariant of the other
/// runs holds, with quorums counted in each member's configuration, and
/// the members end in one configuration no older than any acknowledged.
#[test]
fn membership_changes_under_crashes_and_partitions_keep_what_clients_saw() {
    let mut counts = WholeCounts::default();
    let first = first_seed();
    for seed in first..first + seeds() / 5 {
        match run(membership(seed)) {
            Ok(c) => counts += c,
            Err(e) => panic!("membership run: {e}"),
        }
    }
    eprintln!("membership runs: {counts:?}");
    assert!(counts.crashes > 0 && counts.partitions > 0, "{counts:?}");
    assert!(
        counts.clients.reconfigs_acked > 0 && counts.clients.creates_acked > 0,
        "{counts:?}"
    );
}

/// A hostile run's schedule: strangers and impostors speak to the members
/// while they crash, partition and pause; every fourth changes membership
/// too (forged configurations then target it).
fn hostile(seed: u64) -> Schedule {
    let base = match seed % 4 {
        0 => membership(seed),
        _ => schedule(seed, 12_000),
    };
    Schedule {
        hostile: true,
        ..base
    }
}

/// Hostile peers (issue 49): strangers' forged votes and configurations,
/// strangers and impostors from elsewhere asking to learn with forged
/// epochs, snapshot requests and requests as `super`, under the faults of
/// the other runs. Every invariant holds, and nothing of the tree is sent
/// to a hostile peer.
#[test]
fn hostile_peers_under_crashes_and_partitions_harm_no_client() {
    let mut counts = WholeCounts::default();
    let first = first_seed();
    for seed in first..first + seeds() {
        match run(hostile(seed)) {
            Ok(c) => counts += c,
            Err(e) => panic!("hostile run: {e}"),
        }
    }
    eprintln!("hostile runs: {counts:?}");
    assert!(
        counts.hostile_frames > 0 && counts.hostile_refused > 0,
        "{counts:?}"
    );
    assert!(counts.clients.creates_acked > 0, "{counts:?}");
}

/// Replays one schedule: `ZKD_SIM_SEED=N cargo test -p zkd-server sim::tests::replay -- --ignored`
/// (with `ZKD_SIM_MEMBERSHIP=1` for a membership run).
#[test]
#[ignore = "replays the schedule named by ZKD_SIM_SEED"]
fn replay() {
    let seed = std::env::var("ZKD_SIM_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .expect("set ZKD_SIM_SEED to the seed to replay");
    // ZKD_LOG=info shows what the members log, as a zkd process does.
    if let Ok(filter) = tracing_subscriber::EnvFilter::try_from_env("ZKD_LOG") {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_test_writer()
            .try_init();
    }
    // ZKD_SIM_MEMBERSHIP=1 replays a membership run, ZKD_SIM_HOSTILE=1 a hostile one.
    let mut schedule = match std::env::var_os("ZKD_SIM_MEMBERSHIP") {
        Some(_) => membership(seed),
        None => schedule(seed, 12_000),
    };
    schedule.hostile = std::env::var_os("ZKD_SIM_HOSTILE").is_some();
    if let Err(e) = run(schedule) {
        panic!("{e}");
    }
}

/// Each planted bug the whole-member runs must catch: a run that passes
/// with the bug in place would be blind to it.
#[cfg(feature = "failpoints")]
mod planted {
    use super::{run, schedule, Schedule};
    use crate::failpoints::{planted, Failpoint};
    use std::panic::{catch_unwind, AssertUnwindSafe};

    /// The first failure over the first `seeds` schedules `make` gives,
    /// with `failpoint` planted.
    fn caught(failpoint: Failpoint, seeds: u64, make: fn(u64) -> Schedule) -> Option<String> {
        (1..=seeds).find_map(|seed| {
            let outcome = planted::with(failpoint, || {
                catch_unwind(AssertUnwindSafe(|| run(make(seed))))
            });
            match outcome {
                Ok(Ok(_)) => None,
                Ok(Err(e)) => Some(e),
                Err(_) => Some(format!("seed {seed}: panicked")),
            }
        })
    }

    /// Asserts that `failpoint`, planted, fails a run within `seeds`
    /// schedules, with a failure that names one of `kinds`.
    fn assert_caught(failpoint: Failpoint, seeds: u64, kinds: &[&str]) {
        assert_caught_in(failpoint, seeds, kinds, |seed| schedule(seed, 12_000));
    }

    /// As [`assert_caught`], over the schedules `make` gives.
    fn assert_caught_in(
        failpoint: Failpoint,
        seeds: u64,
        kinds: &[&str],
        make: fn(u64) -> Schedule,
    ) {
        let Some(failure) = caught(failpoint, seeds, make) else {
            panic!("{} planted, and no schedule caught it", failpoint.name());
        };
        assert!(
            kinds.iter().any(|k| failure.contains(k)),
            "{} caught, but not as {kinds:?}: {failure}",
            failpoint.name()
        );
    }

    #[test]
    fn planted_ack_before_fsync_is_caught() {
        assert_caught(
            Failpoint::AckBeforeFsync,
            20,
            &["visibility:", "durability:"],
        );
    }

    #[test]
    fn planted_commit_without_quorum_is_caught() {
        assert_caught(
            Failpoint::CommitWithoutQuorum,
            20,
            &["visibility:", "durability:"],
        );
    }

    #[test]
    fn planted_skip_fsync_is_caught() {
        assert_caught(
            Failpoint::SkipFsync,
            20,
            &["cannot recover", "durability:", "visibility:"],
        );
    }

    #[test]
    fn planted_skip_epoch_write_is_caught() {
        assert_caught(
            Failpoint::SkipEpochWrite,
            40,
            // A member that forgot its epochs elects twice in one epoch,
            // diverges, or cannot take part again.
            &[
                "leadership:",
                "leader completeness:",
                "prefix consistency:",
                "durability:",
                "liveness:",
                "NONODE",
            ],
        );
    }

    #[test]
    fn planted_deposed_leader_serves_is_caught() {
        assert_caught(
            Failpoint::DeposedLeaderServes,
            20,
            &["convergence:", "liveness:", "after a sync"],
        );
    }

    #[test]
    fn planted_close_keeps_ephemerals_is_caught() {
        assert_caught(
            Failpoint::CloseKeepsEphemerals,
            20,
            &["outlives its session", "was closed and acknowledged"],
        );
    }

    #[test]
    fn planted_setwatches_rearm_is_caught() {
        assert_caught(Failpoint::SetwatchesRearm, 20, &["watches:"]);
    }

    #[test]
    fn planted_shortcut_without_quorum_is_caught() {
        assert_caught(Failpoint::ShortcutWithoutQuorum, 20, &["election:"]);
    }

    #[test]
    fn planted_strangers_learn_is_caught() {
        assert_caught_in(
            Failpoint::StrangersLearn,
            20,
            &["confidentiality:"],
            super::hostile,
        );
    }

    #[test]
    fn planted_any_address_is_caught() {
        assert_caught_in(
            Failpoint::AnyAddress,
            20,
            &["confidentiality:", "leader completeness:", "election:"],
            super::hostile,
        );
    }

    #[test]
    fn planted_configs_from_anyone_is_caught() {
        assert_caught_in(
            Failpoint::ConfigsFromAnyone,
            200,
            &[
                // A stranger's config with no voters: a member elects itself on no votes.
                "election:",
                "leader completeness:",
                "leadership:",
                "membership:",
                "visibility:",
                "durability:",
            ],
            super::hostile,
        );
    }

    /// The situation this plant needs, a member whose tree holds a later
    /// reconfig than its configuration in effect, came from removed members
    /// synced outside the configuration; since issue 49 they learn nothing
    /// until a reconfig names them again, and 1,000 membership runs no
    /// longer reach it (ZKD_PLANT surveys it). Kept, not asserted.
    #[test]
    #[ignore = "issue 49 took away the path that reached it; a survey, not a check"]
    fn planted_config_node_overwritten_is_caught() {
        assert_caught_in(
            Failpoint::ConfigNodeOverwritten,
            200,
            &["visibility:", "membership:", "liveness:", "durability:"],
            super::membership,
        );
    }

    #[test]
    #[ignore = "a survey of which plants the whole-member runs catch"]
    fn planted_survey() {
        // ZKD_PLANT=name surveys one plant over ZKD_SIM_SEEDS schedules.
        let only = std::env::var("ZKD_PLANT").ok();
        let seeds = super::seeds();
        for failpoint in Failpoint::ALL {
            if only.as_deref().is_some_and(|name| name != failpoint.name()) {
                continue;
            }
            let found = caught(failpoint, if only.is_some() { seeds } else { 40 }, |seed| {
                schedule(seed, 12_000)
            });
            let first = found.as_deref().unwrap_or("NOT CAUGHT").lines().next();
            eprintln!("{}: {}", failpoint.name(), first.unwrap_or(""));
        }
    }
}
