//! Seeded schedules: fault-free runs, and runs with crashes (torn ones
//! too), partitions (one-way and bridged ones too), pauses, stale
//! notifications after reconnects, and failed disk writes.
//! A failure prints its seed and a replay command.

use super::{run, FaultCounts, Schedule};

fn schedule(seed: u64, faults_until_ms: u64) -> Schedule {
    Schedule {
        seed,
        members: if seed.is_multiple_of(3) { 5 } else { 3 },
        faults_until_ms,
        end_ms: faults_until_ms + 12_000,
        scripted: false,
    }
}

fn seeds() -> u64 {
    std::env::var("ZKD_SIM_SEEDS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1000)
}

#[test]
fn fault_free_ensembles_elect_commit_and_converge() {
    for seed in 1..=30 {
        if let Err(e) = run(schedule(seed, 0)) {
            panic!("{e}");
        }
    }
}

#[test]
fn crashes_partitions_pauses_torn_cuts_and_disk_errors_keep_every_invariant() {
    let mut counts = FaultCounts::default();
    for seed in 1..=seeds() {
        match run(schedule(seed, 10_000)) {
            Ok(c) => counts += c,
            Err(e) => panic!("{e}"),
        }
    }
    eprintln!("faults that did something: {counts:?}");
    // The faults did what they are there for, in some schedules at least.
    assert!(
        counts.torn_writes > 0,
        "no torn cut left a write: {counts:?}"
    );
    assert!(
        counts.long_pauses > 0,
        "no pause outlasted the sync limit: {counts:?}"
    );
    assert!(
        counts.late_packets > 0,
        "no one-way partition held a message: {counts:?}"
    );
    assert!(
        counts.stale_notifications > 0,
        "no reconnect delivered an older notification: {counts:?}"
    );
    assert!(counts.bridges > 0, "no bridge partition: {counts:?}");
    assert!(
        counts.disk_errors > 0,
        "no storage operation failed: {counts:?}"
    );
}

/// Replays one schedule: `ZKD_SIM_SEED=N cargo test -p zkd-server sim::tests::replay -- --ignored`.
#[test]
#[ignore = "replays the schedule named by ZKD_SIM_SEED"]
fn replay() {
    let seed = std::env::var("ZKD_SIM_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .expect("set ZKD_SIM_SEED to the seed to replay");
    if let Err(e) = run(schedule(seed, 10_000)) {
        panic!("{e}");
    }
}
