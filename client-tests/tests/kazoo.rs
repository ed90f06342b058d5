//! kazoo, the stock Python client, against zkd: CRUD, transactions, watches
//! and kazoo's lock, queue, barrier and election recipes (`kazoo/smoke.py`).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use zkd_client_tests::oracle::oracle_required;
use zkd_client_tests::ZkdProcess;

fn kazoo_installed() -> bool {
    let ok = Command::new("python3")
        .args(["-c", "import kazoo"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        assert!(
            !oracle_required(),
            "kazoo is missing; run client-tests/run-all.sh to install it"
        );
        eprintln!("SKIPPED: kazoo is not installed (client-tests/run-all.sh installs it)");
    }
    ok
}

#[test]
fn kazoo_client_and_recipes_work() {
    if !kazoo_installed() {
        return;
    }
    let server = ZkdProcess::start();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/kazoo/smoke.py");
    let mut child = Command::new("python3")
        .arg(script)
        .arg(server.addr())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3");
    let deadline = Instant::now() + Duration::from_secs(120);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("kazoo smoke test timed out");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = child.wait_with_output().unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && text.contains("kazoo smoke: ok"),
        "{text}"
    );
}
