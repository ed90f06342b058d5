//! kazoo, the stock Python client, against zkd: CRUD, transactions, watches
//! and kazoo's lock, queue, barrier and election recipes (`kazoo/smoke.py`),
//! on a standalone zkd and on a 3-member ensemble.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use zkd_client_tests::ensemble::Ensemble;
use zkd_client_tests::fault_ensemble::FaultEnsemble;
use zkd_client_tests::ZkdProcess;

/// Fails the test when kazoo is missing: a test that could not run must not pass.
fn require_kazoo() {
    let ok = Command::new("python3")
        .args(["-c", "import kazoo"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "kazoo is missing: run `bash client-tests/run-all.sh`, which installs what the tests need"
    );
}

#[test]
fn kazoo_client_and_recipes_work() {
    require_kazoo();
    let server = ZkdProcess::start();
    run_smoke(&server.addr());
}

#[test]
fn kazoo_client_and_recipes_work_on_a_three_member_ensemble() {
    require_kazoo();
    let ensemble = Ensemble::start(3);
    // Every member's address: kazoo picks one at random, a follower as often as not.
    run_smoke(&ensemble.all());
}

/// A kazoo lock holder under `zkd ensemble`'s faults (`kazoo/faults.py`,
/// driving the HTTP fault API): isolating its member moves it with its
/// session and lock; expiring its session hands the lock over.
#[test]
fn kazoo_lock_holder_under_isolation_and_session_expiry() {
    require_kazoo();
    let ensemble = FaultEnsemble::start(3);
    let leader = ensemble.leader().expect("a leader");
    // The leader's address first: the holder (not randomizing) connects there.
    let mut hosts = vec![ensemble.address(leader)];
    hosts.extend(
        (1..=3)
            .filter(|i| *i != leader)
            .map(|i| ensemble.address(i)),
    );
    let api = ensemble.api().to_owned();
    run_script(
        "faults.py",
        &[&hosts.join(","), &api],
        "kazoo fault checks passed",
    );
}

/// Runs `kazoo/smoke.py` against `hosts` (a connect string).
fn run_smoke(hosts: &str) {
    run_script("smoke.py", &[hosts], "kazoo smoke: ok");
}

/// Runs `kazoo/<script>` with `args`; fails the test unless it exits 0
/// having printed `passed`.
fn run_script(script: &str, args: &[&str], passed: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/kazoo")
        .join(script);
    let mut child = Command::new("python3")
        .arg(path)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3");
    let deadline = Instant::now() + Duration::from_secs(120);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("kazoo {script:?} timed out");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = child.wait_with_output().unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && text.contains(passed), "{text}");
}
