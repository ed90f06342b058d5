//! `zkd-nemesis --exec "CMD"`: any test suite under a nemesis, through the
//! fault API of a `zkd ensemble` (no root). A kazoo writer stands in for a
//! user's suite: it must see every acknowledged write through the faults;
//! the report holds the faults, the leader changes and its output; the exit
//! status is the command's, whatever it is.

use std::path::Path;
use std::process::Command;

fn nemesis(out: &Path, cmd: &str, nemeses: &str, seed: u64) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_zkd-nemesis"))
        .args(["--exec", cmd, "--nemesis", nemeses])
        .args(["--seed", &seed.to_string(), "--out"])
        .arg(out)
        .env("ZKD_BIN", zkd_client_tests::process::zkd_binary())
        .output()
        .expect("run zkd-nemesis")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn a_kazoo_suite_runs_under_faults_and_its_report_lines_them_up() {
    let tmp = tempfile::tempdir().unwrap();
    let writer = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/nemesis_exec/writer.py");
    let cmd = format!("python3 {} 14", writer.display());
    let out = tmp.path().join("report");
    let run = nemesis(
        &out,
        &cmd,
        "kill-leader,partition-leader,pause-random,expire-session",
        7,
    );
    let text =
        String::from_utf8_lossy(&run.stdout).into_owned() + &String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(0), "{text}");
    assert!(text.contains("0 missing"), "{text}");
    let history = read(&out.join("history.jsonl"));
    assert!(
        history.contains("\"record\":\"fault\""),
        "no fault was injected:\n{history}"
    );
    assert!(
        history.contains("leader is node"),
        "no leader event:\n{history}"
    );
    assert!(
        history.contains("\"source\":\"cmd\""),
        "no output line:\n{history}"
    );
    let timeline = read(&out.join("timeline.html"));
    assert!(timeline.contains(">cmd</text>") && timeline.contains(">ensemble</text>"));
    assert!(read(&out.join("output.txt")).contains("acknowledged"));
    assert!(read(&out.join("verdict.txt")).contains("VALID"));
}

/// Under `expire-session` alone, each fault expires a live session (the
/// writer's, its only one): the member's expiry is on the timeline, and the
/// writer, whose client opens a new session, still finds every write.
#[test]
fn session_expiries_are_on_the_timeline() {
    let tmp = tempfile::tempdir().unwrap();
    let writer = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/nemesis_exec/writer.py");
    let out = tmp.path().join("report");
    let run = nemesis(
        &out,
        &format!("python3 {} 6", writer.display()),
        "expire-session",
        3,
    );
    let text =
        String::from_utf8_lossy(&run.stdout).into_owned() + &String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(0), "{text}");
    let history = read(&out.join("history.jsonl"));
    assert!(
        history.contains("expired session 0x"),
        "no session expiry:\n{history}"
    );
}

#[test]
fn the_exit_status_is_the_commands_and_bad_nemeses_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("report");
    let run = nemesis(&out, "echo \"at $ZK_CONNECT\"; exit 3", "none", 1);
    assert_eq!(run.status.code(), Some(3));
    let output = read(&out.join("output.txt"));
    assert!(output.contains("at 127.0.0.1:"), "{output}");
    assert!(read(&out.join("verdict.txt")).contains("INVALID (command-failed"));

    let refused = nemesis(&tmp.path().join("no"), "true", "power-loss-all", 1);
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("cannot inject \"power-loss-all\""));
}
