//! Apache ZooKeeper 3.8 (Debian's `zookeeper` package) as the oracle: started
//! standalone on loopback with its own data directory, killed on drop.

use crate::process::{four_letter_word, free_port};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Debian's ZooKeeper jar; its manifest names every dependency.
pub const ZOOKEEPER_JAR: &str = "/usr/share/java/zookeeper.jar";

/// Fails the test if `path` is missing. A test that could not run must not
/// report success, so a missing tool is a failure, never a skip.
pub fn require_tool(path: &str) {
    assert!(
        Path::new(path).exists(),
        "{path} is missing: run `bash client-tests/run-all.sh`, which installs what the tests need"
    );
}

/// A running Apache ZooKeeper server.
pub struct ZooKeeperProcess {
    child: Child,
    pub port: u16,
    _dir: tempfile::TempDir,
}

impl ZooKeeperProcess {
    /// Starts ZooKeeper standalone with TTL nodes enabled and every 4lw
    /// allowed; fails the test when it is not installed.
    pub fn start(tick_time_ms: u64) -> ZooKeeperProcess {
        ZooKeeperProcess::start_with(tick_time_ms, &[])
    }

    /// Like [`ZooKeeperProcess::start`], with extra JVM system properties, each
    /// passed as `-Dkey=value` (e.g. `("znode.container.checkIntervalMs", "100")`).
    pub fn start_with(tick_time_ms: u64, properties: &[(&str, &str)]) -> ZooKeeperProcess {
        require_tool(ZOOKEEPER_JAR);
        let dir = tempfile::tempdir().expect("tempdir");
        let port = free_port();
        let cfg = dir.path().join("zoo.cfg");
        let text = format!(
            "tickTime={tick_time_ms}\ndataDir={}\nclientPort={port}\nclientPortAddress=127.0.0.1\n4lw.commands.whitelist=*\nadmin.enableServer=false\n",
            dir.path().join("data").display()
        );
        std::fs::write(&cfg, text).expect("write zoo.cfg");
        let log = std::fs::File::create(dir.path().join("zookeeper.log")).expect("log");
        let child = Command::new("java")
            .args([
                "-Xmx256m",
                "-Dzookeeper.extendedTypesEnabled=true",
                "-Dzookeeper.admin.enableServer=false",
            ])
            .args(properties.iter().map(|(k, v)| format!("-D{k}={v}")))
            .args(["-cp", ZOOKEEPER_JAR])
            .arg("org.apache.zookeeper.server.ZooKeeperServerMain")
            .arg(&cfg)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn java");
        let mut zk = ZooKeeperProcess {
            child,
            port,
            _dir: dir,
        };
        zk.wait_ready();
        zk
    }

    fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if four_letter_word(self.port, "srvr").is_ok_and(|r| r.contains("Mode:")) {
                return;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("ZooKeeper exited early with {status}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("ZooKeeper did not start within 60 s");
    }

    /// The JVM's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `127.0.0.1:port`.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

impl Drop for ZooKeeperProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
