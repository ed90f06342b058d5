//! Issue 51: `zkd serve` on an Apache ZooKeeper's zoo.cfg and data
//! directory imports ZooKeeper's state and serves it, leaving every byte of
//! ZooKeeper's as it was, after a clean stop and after kill -9 (a log
//! without its final snapshot). What it cannot take it refuses, naming the
//! file and the offset, and serves nothing: a flipped byte in a log (as
//! ZooKeeper refuses it), a snapshot of another format version (which
//! ZooKeeper 3.8 does not check), ZooKeeper's files changed after an import
//! (so zkd's copy is older), ZooKeeper's files beside zkd's own. A newest
//! snapshot cut short falls back to the one before and the logs, as
//! ZooKeeper does; an import a crash cut short is done again.
//! (`differential.rs`'s import test compares whole trees.)

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use zkd_client_tests::oracle::ZooKeeperProcess;
use zkd_client_tests::process::{files_under, zkd_binary};
use zookeeper::{Acl, CreateMode, ZooKeeper};

/// How long zkd has to refuse.
const REFUSAL_WITHIN: Duration = Duration::from_secs(10);

/// ZooKeeper's own files (its `version-2/`) under `data`.
fn zookeepers(data: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    files_under(&data.join("version-2"))
}

/// A ZooKeeper that took writes (`/app` and five sequential nodes under
/// it), stopped cleanly or killed.
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

/// `zkd serve` on ZooKeeper's own zoo.cfg, on a free client port.
struct Served {
    child: std::process::Child,
    log: tempfile::NamedTempFile,
    port: u16,
}

impl Served {
    fn start(config: &Path) -> Served {
        let log = tempfile::NamedTempFile::new().expect("log file");
        let port = zkd_client_tests::process::free_port();
        let child = Command::new(zkd_binary())
            .args(["serve", "--config"])
            .arg(config)
            .args(["--client-port", &port.to_string()])
            .env("ZKD_LOG", "info")
            .stdout(Stdio::null())
            .stderr(log.reopen().expect("log"))
            .spawn()
            .expect("spawn zkd");
        Served { child, log, port }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.log.path()).unwrap_or_default()
    }

    /// Waits until it serves, or exits: its exit status then.
    fn serving_or_exited(&mut self) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + REFUSAL_WITHIN;
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().expect("wait for zkd") {
                return Some(status);
            }
            let addr = format!("127.0.0.1:{}", self.port);
            if zkd_client_tests::process::four_letter_word(self.port, "ruok")
                .is_ok_and(|r| r.contains("imok"))
                && std::net::TcpStream::connect(addr).is_ok()
            {
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("zkd neither served nor exited:\n{}", self.log());
    }

    /// The one fatal line of a zkd that refused.
    fn refusal(mut self) -> String {
        let status = self.serving_or_exited();
        let log = self.log();
        assert!(status.is_some_and(|s| !s.success()), "zkd served:\n{log}");
        assert!(!log.contains("panicked"), "zkd panicked:\n{log}");
        let fatal: Vec<&str> = log.lines().filter(|l| l.contains("fatal")).collect();
        assert_eq!(fatal.len(), 1, "one fatal line:\n{log}");
        fatal[0].to_owned()
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serves_what_zookeeper_wrote(kill9: bool) {
    let zk = zookeeper_that_wrote(kill9);
    let data = zk.data_dir();
    let before = zookeepers(&data);
    let mut zkd = Served::start(zk.config_path());
    assert_eq!(zkd.serving_or_exited(), None, "zkd exited:\n{}", zkd.log());
    let client = ZooKeeper::connect(
        &format!("127.0.0.1:{}", zkd.port),
        Duration::from_secs(10),
        |_| {},
    )
    .expect("connect to zkd");
    let (data_v1, _) = client.get_data("/app", false).expect("/app");
    assert_eq!(data_v1, b"v1");
    let mut jobs = client.get_children("/app", false).expect("children");
    jobs.sort();
    let want: Vec<String> = (0..5).map(|i| format!("job-{i:010}")).collect();
    assert_eq!(jobs, want);
    // The sequence counter went on from where ZooKeeper left it.
    let next = client
        .create(
            "/app/job-",
            Vec::new(),
            Acl::open_unsafe().clone(),
            CreateMode::PersistentSequential,
        )
        .expect("create after the import");
    assert_eq!(next, "/app/job-0000000005");
    client.close().expect("close");
    drop(zkd);
    assert_eq!(
        zookeepers(&data),
        before,
        "ZooKeeper's files changed under zkd"
    );
    assert!(data.join("zkd/imported-from-zookeeper").exists());
}

#[test]
fn zkd_serves_a_cleanly_stopped_zookeepers_data_dir_and_leaves_it_as_it_was() {
    serves_what_zookeeper_wrote(false);
}

#[test]
fn zkd_serves_a_killed_zookeepers_data_dir_and_leaves_it_as_it_was() {
    serves_what_zookeeper_wrote(true);
}

/// The newest of ZooKeeper's files named `prefix.<hex zxid>` (`log`, `snapshot`).
fn newest(data: &Path, prefix: &str) -> PathBuf {
    let zxid = |p: &PathBuf| -> Option<u64> {
        let name = p.file_name()?.to_string_lossy().into_owned();
        u64::from_str_radix(name.strip_prefix(prefix)?.strip_prefix('.')?, 16).ok()
    };
    let files = zookeepers(data).into_keys();
    let named = files.filter_map(|p| Some((zxid(&p)?, p)));
    named.max().map(|(_, p)| p).expect("a file")
}

/// `/app`'s children as the server at `addr` lists them, sorted.
fn jobs(addr: &str) -> Vec<String> {
    let client = ZooKeeper::connect(addr, Duration::from_secs(10), |_| {}).expect("connect");
    let mut jobs = client.get_children("/app", false).expect("children");
    jobs.sort();
    client.close().expect("close");
    jobs
}

#[test]
fn a_newest_snapshot_cut_short_falls_back_as_zookeeper_does() {
    let mut zk = zookeeper_that_wrote(false);
    // ZooKeeper writes a snapshot of every txn as it starts again.
    zk.restart();
    zk.stop(false);
    let data = zk.data_dir();
    let snapshot = newest(&data, "snapshot");
    assert!(!snapshot.ends_with("snapshot.0"), "a second snapshot");
    let bytes = std::fs::read(&snapshot).expect("read the snapshot");
    std::fs::write(&snapshot, &bytes[..bytes.len() / 2]).expect("cut it short");
    let theirs = ZooKeeperProcess::start_on_copy_of(200, &data);
    let want: Vec<String> = (0..5).map(|i| format!("job-{i:010}")).collect();
    assert_eq!(jobs(&theirs.addr()), want, "ZooKeeper fell back");
    let mut zkd = Served::start(zk.config_path());
    assert_eq!(zkd.serving_or_exited(), None, "zkd exited:\n{}", zkd.log());
    assert_eq!(jobs(&format!("127.0.0.1:{}", zkd.port)), want);
    assert!(zkd.log().contains("invalid snapshot"), "{}", zkd.log());
}

#[test]
fn a_snapshot_of_another_format_version_is_refused_by_name() {
    let zk = zookeeper_that_wrote(true);
    let data = zk.data_dir();
    let snapshot = newest(&data, "snapshot");
    let mut bytes = std::fs::read(&snapshot).expect("read the snapshot");
    // The header: magic ZKSN, then the format version (2), then the dbid.
    bytes[4..8].copy_from_slice(&3i32.to_be_bytes());
    std::fs::write(&snapshot, &bytes).expect("write version 3");
    let before = zookeepers(&data);
    let fatal = Served::start(zk.config_path()).refusal();
    let name = snapshot.display().to_string();
    assert!(
        fatal.contains(&name) && fatal.contains("at byte 8"),
        "{fatal}"
    );
    assert!(fatal.contains("other than version 2"), "{fatal}");
    assert_eq!(zookeepers(&data), before, "ZooKeeper's files changed");
    assert!(!data.join("zkd").exists(), "nothing of zkd's was left");
}

#[test]
fn an_import_cut_short_by_a_crash_is_done_again() {
    let zk = zookeeper_that_wrote(true);
    let data = zk.data_dir();
    // What a crash part-way through an import leaves: its staging directory.
    let staging = data.join("zkd.importing/zkd");
    std::fs::create_dir_all(&staging).expect("staging");
    std::fs::write(staging.join("half-written"), b"...").expect("a piece");
    let mut zkd = Served::start(zk.config_path());
    assert_eq!(zkd.serving_or_exited(), None, "zkd exited:\n{}", zkd.log());
    let want: Vec<String> = (0..5).map(|i| format!("job-{i:010}")).collect();
    assert_eq!(jobs(&format!("127.0.0.1:{}", zkd.port)), want);
    assert!(
        !data.join("zkd.importing").exists(),
        "the staging directory is gone"
    );
    assert!(!data.join("zkd/half-written").exists());
}

#[test]
fn a_flipped_byte_in_a_log_is_refused_by_name_and_offset_as_zookeeper_refuses_it() {
    let zk = zookeeper_that_wrote(true);
    let data = zk.data_dir();
    let log = newest(&data, "log");
    let mut bytes = std::fs::read(&log).expect("read the log");
    // Inside the first record's entry: header 16, crc 8, length 4, then the entry.
    bytes[16 + 8 + 4 + 10] ^= 0x40;
    std::fs::write(&log, &bytes).expect("flip a byte");
    let before = zookeepers(&data);
    let fatal = Served::start(zk.config_path()).refusal();
    let name = log.display().to_string();
    assert!(
        fatal.contains(&name) && fatal.contains("at byte 16"),
        "{fatal}"
    );
    assert!(fatal.contains("CRC"), "{fatal}");
    assert_eq!(zookeepers(&data), before, "ZooKeeper's files changed");
    assert!(!data.join("zkd").exists(), "nothing of zkd's was left");
}

#[test]
fn zookeepers_files_changed_since_the_import_are_refused() {
    let mut zk = zookeeper_that_wrote(false);
    {
        let mut zkd = Served::start(zk.config_path());
        assert_eq!(zkd.serving_or_exited(), None, "zkd exited:\n{}", zkd.log());
    }
    // ZooKeeper runs again on its files: it writes a snapshot as it starts.
    zk.restart();
    zk.stop(false);
    let fatal = Served::start(zk.config_path()).refusal();
    assert!(fatal.contains("changed since zkd imported them"), "{fatal}");
}

#[test]
fn zookeepers_files_beside_zkds_own_are_refused() {
    let zk = zookeeper_that_wrote(false);
    let data = zk.data_dir();
    std::fs::create_dir_all(data.join("zkd")).expect("a zkd directory");
    let before = zookeepers(&data);
    let fatal = Served::start(zk.config_path()).refusal();
    assert!(fatal.contains("beside zkd's own files"), "{fatal}");
    assert!(fatal.contains("snapshot.0"), "{fatal}");
    assert_eq!(zookeepers(&data), before, "ZooKeeper's files changed");
}
