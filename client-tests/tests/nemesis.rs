//! `zkd-nemesis` on zkd: a short matrix in which every workload runs and
//! every nemesis strikes at least once, on 3 members, and a subset on 5. It
//! must find no anomaly and leave a complete report. (The long soak is in
//! the README: the full matrix for an hour.)

use std::path::Path;
use std::process::Command;

/// Each workload with three or four nemeses: together every fault kind, and the mix.
const MATRIX: [(&str, &str); 8] = [
    (
        "register",
        "partition-leader,kill-leader,power-loss-new-member,packet-loss",
    ),
    ("set", "kill-all,partition-halves,power-loss-all,membership"),
    ("unique-ids", "pause-leader,partition-ring,torn-write"),
    (
        "counter",
        "kill-random,partition-bridge,disk-error,kill-all-leader-last",
    ),
    (
        "queue",
        "pause-random,partition-one-way,disk-full,slow-disk",
    ),
    ("sessions", "rolling-restart,power-loss-random,clock-jump"),
    ("fifo", "pause-all,mix,truncated-log"),
    ("watches", "partition-client,power-loss-leader,corrupt-log"),
];

fn assert_report(dir: &Path) {
    for file in [
        "verdict.txt",
        "verdict.json",
        "history.jsonl",
        "timeline.html",
        "logs/zkd-1.log",
    ] {
        let path = dir.join(file);
        let meta = std::fs::metadata(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(meta.len() > 0, "{} is empty", path.display());
    }
}

/// Runs zkd-nemesis on `members` members; every cell must be valid and
/// leave its report.
fn run(out: &Path, members: usize, workload: &str, nemeses: &str, seed: usize) {
    let dir = out.join(format!("{members}-{workload}"));
    let status = Command::new(env!("CARGO_BIN_EXE_zkd-nemesis"))
        .args(["--members", &members.to_string()])
        .args(["--workload", workload, "--nemesis", nemeses, "--time", "8"])
        .args(["--seed", &seed.to_string(), "--out"])
        .arg(&dir)
        .status()
        .expect("run zkd-nemesis");
    let summary = std::fs::read_to_string(dir.join("summary.txt")).unwrap_or_default();
    assert!(
        status.success(),
        "zkd-nemesis {workload} x {nemeses}: {status}\n{summary}"
    );
    for w in workload.split(',') {
        for nemesis in nemeses.split(',') {
            assert_report(&dir.join(format!("{w}-{nemesis}")));
        }
    }
    assert!(
        !summary.contains("unknown ("),
        "an undecided verdict:\n{summary}"
    );
}

#[test]
fn a_short_matrix_finds_no_anomaly_on_zkd() {
    let out = tempfile::tempdir().expect("tempdir");
    for (i, (workload, nemeses)) in MATRIX.iter().enumerate() {
        run(out.path(), 3, workload, nemeses, 1000 + i);
    }
    // And a subset on 5 members, where a ring leaves every member a majority
    // and all five lose power at once.
    run(out.path(), 5, "register,queue", "partition-ring", 2000);
    run(out.path(), 5, "set", "power-loss-all", 2001);
}
