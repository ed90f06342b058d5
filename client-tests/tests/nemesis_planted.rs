//! `zkd-nemesis` against a deliberately broken zkd: a build with the
//! `failpoints` feature (`server/src/failpoints.rs`) misbehaves on purpose
//! when `ZKD_FAILPOINTS` names a planted bug. Each planted bug must make its
//! cell invalid with the anomaly it stands for; the same build with no
//! failpoint named must be valid, so the anomalies come from the plants.
//!
//! The broken build is `ZKD_FAILPOINTS_BIN` (client-tests/run-all.sh builds
//! it before the tests); without it this test builds one in its own target
//! directory, never over the `zkd` the other tests run.

use std::path::Path;
use std::process::Command;

/// A planted bug, the cell that must catch it, and the anomaly kinds that
/// count as caught.
struct Plant {
    failpoint: &'static str,
    workload: &'static str,
    nemesis: &'static str,
    secs: u64,
    /// Client processes: more where the bug needs a client on one member.
    clients: u32,
    caught_as: &'static [&'static str],
    /// A line in a member's log that also counts as caught: the server's
    /// own check found the bug (and repaired its effect, so clients saw none).
    or_logged: Option<&'static str>,
}

const PLANTS: [Plant; 7] = [
    // Acknowledged on the page cache: a correlated power loss takes it.
    Plant {
        failpoint: "skip-fsync",
        workload: "set",
        nemesis: "power-loss-all",
        secs: 10,
        clients: 5,
        caught_as: &["lost-write"],
        or_logged: None,
    },
    // Acknowledged while the fsync is still running (5 ms on the nemesis's
    // disks): a power cut of every member lands in that window. 20 s, not
    // 10: a 10 s cell usually caught 15-33 lost writes, but once in a CI run
    // none of its power cuts landed in a window.
    Plant {
        failpoint: "ack-before-fsync",
        workload: "set",
        nemesis: "power-loss-all",
        secs: 20,
        clients: 5,
        caught_as: &["lost-write"],
        or_logged: None,
    },
    // After a restart the members forget their epochs, and the next leader
    // reuses the old one: the old leader's extra txns share zxids with the
    // new leader's, so it is synced by a diff and keeps them (ZOOKEEPER-335,
    // 1154). The leader's digest on COMMIT shows the diverged tree before it
    // serves (ZOOKEEPER-2846): the member logs it and is SNAPped, so the
    // per-member final reads no longer see a diverged set. Ten clients, so
    // several write to the old leader while it is cut off.
    Plant {
        failpoint: "skip-epoch-write",
        workload: "set",
        nemesis: "kill-all-leader-last",
        secs: 15,
        clients: 10,
        caught_as: &["lost-write"],
        or_logged: Some("tree diverged from the leader's"),
    },
    // A leader alone in a minority acknowledges what the majority never had.
    Plant {
        failpoint: "commit-without-quorum",
        workload: "set",
        nemesis: "partition-leader",
        secs: 15,
        clients: 5,
        caught_as: &["lost-write"],
        or_logged: None,
    },
    Plant {
        failpoint: "close-keeps-ephemerals",
        workload: "sessions",
        nemesis: "none",
        secs: 8,
        clients: 5,
        caught_as: &["surviving-ephemeral"],
        or_logged: None,
    },
    // A client cut from its member moves to another one, where the change it
    // missed is never announced; the re-armed watch fires at a later one.
    // Ten clients, so some are on each member cut.
    Plant {
        failpoint: "setwatches-rearm",
        workload: "watches",
        nemesis: "partition-client",
        secs: 20,
        clients: 10,
        caught_as: &["late-watch", "lost-watch", "watch-after-data"],
        or_logged: None,
    },
    // A leader that never steps down answers sync and reads alone: the
    // register's reader pinned to it reads stale values once the rest
    // elected another leader and wrote (ZOOKEEPER-1675). In some runs the
    // rest never elect one before the heal and the ensemble wedges, which
    // shows as a member not serving after it.
    Plant {
        failpoint: "deposed-leader-serves",
        workload: "register",
        nemesis: "partition-leader",
        secs: 15,
        clients: 5,
        caught_as: &["nonlinearizable", "unavailable"],
        or_logged: None,
    },
];

/// Runs one cell on the broken build with `failpoint` (or none); its
/// summary, and whether zkd-nemesis exited 1 (an anomaly).
fn run_cell(
    out: &Path,
    zkd: &Path,
    failpoint: Option<&str>,
    plant: &Plant,
    seed: u64,
) -> (String, bool) {
    let dir = out.join(format!("{}-{seed}", failpoint.unwrap_or("none")));
    let mut command = Command::new(env!("CARGO_BIN_EXE_zkd-nemesis"));
    command
        .env("ZKD_BIN", zkd)
        .env_remove("ZKD_FAILPOINTS")
        .args(["--workload", plant.workload, "--nemesis", plant.nemesis])
        .args([
            "--time",
            &plant.secs.to_string(),
            "--seed",
            &seed.to_string(),
        ])
        .args(["--clients", &plant.clients.to_string(), "--out"])
        .arg(&dir);
    if let Some(f) = failpoint {
        command.env("ZKD_FAILPOINTS", f);
    }
    let status = command.status().expect("run zkd-nemesis");
    let summary = std::fs::read_to_string(dir.join("summary.txt")).unwrap_or_default();
    assert!(
        matches!(status.code(), Some(0 | 1)),
        "zkd-nemesis failed to run ({status}):\n{summary}"
    );
    (summary, status.code() == Some(1))
}

/// Every member's log of `plant`'s cell, run with `failpoint` (or none)
/// and `seed`.
fn cell_logs(out: &Path, failpoint: Option<&str>, plant: &Plant, seed: u64) -> String {
    let logs = out
        .join(format!("{}-{seed}", failpoint.unwrap_or("none")))
        .join(format!("{}-{}", plant.workload, plant.nemesis))
        .join("logs");
    let Ok(entries) = std::fs::read_dir(&logs) else {
        return String::new();
    };
    entries
        .flatten()
        .filter_map(|e| std::fs::read_to_string(e.path()).ok())
        .collect()
}

/// Whether `plant`'s cell with `seed` caught it (an anomaly it names, or
/// the log line it leaves), and the cell's summary.
fn caught(out: &Path, zkd: &Path, plant: &Plant, seed: u64) -> (bool, String) {
    let (summary, invalid) = run_cell(out, zkd, Some(plant.failpoint), plant, seed);
    let seen = invalid && plant.caught_as.iter().any(|k| summary.contains(k));
    let logged = plant
        .or_logged
        .is_some_and(|line| cell_logs(out, Some(plant.failpoint), plant, seed).contains(line));
    eprintln!(
        "{} (seed {seed}): {}",
        plant.failpoint,
        summary.lines().last().unwrap_or("")
    );
    (seen || logged, summary)
}

#[test]
fn every_planted_bug_is_caught_and_the_unplanted_build_is_valid() {
    let zkd = zkd_client_tests::process::zkd_failpoints_binary();
    let out = tempfile::tempdir().expect("tempdir");
    let (summary, invalid) = run_cell(out.path(), zkd, None, &PLANTS[0], 7);
    assert!(
        !invalid,
        "the failpoints build without failpoints:\n{summary}"
    );
    let logs = cell_logs(out.path(), None, &PLANTS[0], 7);
    assert!(
        !logs.contains("tree diverged"),
        "a member found its tree diverged without a planted bug:\n{logs}"
    );
    let mut missed = Vec::new();
    for plant in &PLANTS {
        // A fault schedule can miss the moment a bug shows: a plant gets a
        // second seed, and must be caught by one of the two.
        let mut last = String::new();
        let mut found = false;
        for seed in [7, 8] {
            let (seen, summary) = caught(out.path(), zkd, plant, seed);
            last = summary;
            if seen {
                found = true;
                break;
            }
        }
        if !found {
            missed.push(format!(
                "{} not caught as {:?} by {} x {} (seeds 7 and 8):\n{last}",
                plant.failpoint, plant.caught_as, plant.workload, plant.nemesis
            ));
        }
    }
    assert!(missed.is_empty(), "{}", missed.join("\n"));
}
