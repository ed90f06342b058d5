//! Issue 36, item 0: `zkd serve` on an Apache ZooKeeper's zoo.cfg and data
//! directory. zkd cannot read ZooKeeper's files yet, so it must refuse to
//! start there, naming the files and saying what to do, serve nothing, and
//! leave every byte of ZooKeeper's as it was: after a clean stop and after
//! kill -9 (a log without its final snapshot).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use zkd_client_tests::oracle::ZooKeeperProcess;
use zkd_client_tests::process::zkd_binary;
use zookeeper::{Acl, CreateMode, ZooKeeper};

/// How long zkd has to refuse.
const REFUSAL_WITHIN: Duration = Duration::from_secs(10);

/// Every file under `dir`, with its bytes.
fn contents(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(dir).expect("read the data dir") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            out.extend(contents(&path));
        } else {
            out.insert(path.clone(), std::fs::read(&path).expect("read a file"));
        }
    }
    out
}

/// A ZooKeeper that took writes (sequential nodes among them), stopped
/// cleanly or killed.
fn zookeeper_that_wrote(kill9: bool) -> ZooKeeperProcess {
    let mut zk = ZooKeeperProcess::start(200);
    let client = ZooKeeper::connect(&zk.addr(), Duration::from_secs(10), |_| {})
        .expect("connect to ZooKeeper");
    let acl = Acl::open_unsafe().clone();
    client
        .create("/app", b"v1".to_vec(), acl.clone(), CreateMode::Persistent)
        .expect("create /app");
    for _ in 0..5 {
        client
            .create(
                "/app/job-",
                Vec::new(),
                acl.clone(),
                CreateMode::PersistentSequential,
            )
            .expect("create a sequential node");
    }
    client.close().expect("close");
    zk.stop(kill9);
    zk
}

/// Runs `zkd serve` on ZooKeeper's own zoo.cfg until it exits; its exit
/// status and its log.
fn zkd_serve(config: &Path) -> (std::process::ExitStatus, String) {
    let log = tempfile::NamedTempFile::new().expect("log file");
    let mut child = Command::new(zkd_binary())
        .args(["serve", "--config"])
        .arg(config)
        .env("ZKD_LOG", "info")
        .stdout(Stdio::null())
        .stderr(log.reopen().expect("log"))
        .spawn()
        .expect("spawn zkd");
    let deadline = Instant::now() + REFUSAL_WITHIN;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for zkd") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            let log = std::fs::read_to_string(log.path()).unwrap_or_default();
            panic!("zkd still runs on ZooKeeper's data after {REFUSAL_WITHIN:?}:\n{log}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    (
        status,
        std::fs::read_to_string(log.path()).unwrap_or_default(),
    )
}

fn refuses(kill9: bool) {
    let zk = zookeeper_that_wrote(kill9);
    let data = zk.data_dir();
    let before = contents(&data);
    let names: Vec<String> = before
        .keys()
        .filter_map(|p| p.strip_prefix(&data).ok())
        .map(|p| p.display().to_string())
        .filter(|p| p.starts_with("version-2/"))
        .collect();
    assert!(
        names.iter().any(|n| n.starts_with("version-2/log.")),
        "ZooKeeper wrote no log: {names:?}"
    );
    let (status, log) = zkd_serve(zk.config_path());
    assert!(!status.success(), "zkd exited with {status}:\n{log}");
    assert!(!log.contains("panicked"), "zkd panicked:\n{log}");
    // Nothing was served: it never opened its client port.
    assert!(!log.contains("client port open"), "zkd served:\n{log}");
    let fatal: Vec<&str> = log.lines().filter(|l| l.contains("fatal")).collect();
    assert_eq!(fatal.len(), 1, "one fatal line:\n{log}");
    assert!(
        fatal[0].contains("Apache ZooKeeper's data") && fatal[0].contains("empty directory"),
        "the refusal says what it found and what to do: {}",
        fatal[0]
    );
    for name in names.iter().take(6) {
        assert!(
            fatal[0].contains(name.as_str()),
            "{name} not named: {}",
            fatal[0]
        );
    }
    assert_eq!(
        contents(&data),
        before,
        "ZooKeeper's data directory changed under zkd"
    );
}

#[test]
fn zkd_refuses_a_cleanly_stopped_zookeepers_data_dir_untouched() {
    refuses(false);
}

#[test]
fn zkd_refuses_a_killed_zookeepers_data_dir_untouched() {
    refuses(true);
}
