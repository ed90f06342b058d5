//! Apache ZooKeeper 3.8 (Debian's `zookeeper` package) as the oracle: started
//! standalone on loopback with its own data directory, killed on drop.
//!
//! [`launch`] is the one place that knows how to run Debian's ZooKeeper (the
//! java command, classpath and flags); [`ZooKeeperProcess`] here and the
//! ensemble members of [`crate::oracle_ensemble`] both start through it.

use crate::process::{four_letter_word, free_port, port_clash, PORT_CLASH_ATTEMPTS};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Debian's ZooKeeper jar; its manifest names every dependency.
pub const ZOOKEEPER_JAR: &str = "/usr/share/java/zookeeper.jar";

/// The servlet API (Debian's libservlet-api-java), which ZooKeeper's
/// manifest leaves out: without it its AdminServer (Jetty) does not start.
pub const SERVLET_API_JAR: &str = "/usr/share/java/servlet-api.jar";

/// slf4j's stderr logger (Debian's `libslf4j-java`, which ZooKeeper depends
/// on). Without a binding on the classpath ZooKeeper logs nothing at all, and
/// a failing ensemble test would have no server side to show.
const SLF4J_SIMPLE_JAR: &str = "/usr/share/java/slf4j-simple.jar";

/// How long a ZooKeeper JVM may take to start (and, in an ensemble, to elect).
pub const ZOOKEEPER_START_TIMEOUT: Duration = Duration::from_secs(60);

/// The JVM's main class for a standalone server.
pub const STANDALONE_MAIN: &str = "org.apache.zookeeper.server.ZooKeeperServerMain";

/// The JVM's main class for an ensemble member (reads `server.N` and `myid`).
pub const QUORUM_PEER_MAIN: &str = "org.apache.zookeeper.server.quorum.QuorumPeerMain";

/// Fails the test if `path` is missing. A test that could not run must not
/// report success, so a missing tool is a failure, never a skip.
pub fn require_tool(path: &str) {
    assert!(
        Path::new(path).exists(),
        "{path} is missing: run `bash client-tests/run-all.sh`, which installs what the tests need"
    );
}

/// The zoo.cfg lines every oracle server has: tick, data directory, client
/// port on loopback, every 4lw allowed, no admin server. Callers append the
/// rest (an ensemble's `initLimit`, `syncLimit` and `server.N` lines).
pub fn base_config(tick_time_ms: u64, data_dir: &Path, client_port: u16) -> String {
    base_config_at(tick_time_ms, data_dir, "127.0.0.1", client_port)
}

/// [`base_config`] with the client port on `host`.
pub fn base_config_at(tick_time_ms: u64, data_dir: &Path, host: &str, client_port: u16) -> String {
    format!(
        "tickTime={tick_time_ms}\ndataDir={}\nclientPort={client_port}\nclientPortAddress={host}\n4lw.commands.whitelist=*\nadmin.enableServer=false\n",
        data_dir.display()
    )
}

/// Copies ZooKeeper's files (`version-2/`) from the dataDir `from` to the
/// dataDir `to`.
pub fn copy_version_2(from: &Path, to: &Path) {
    let to = to.join("version-2");
    std::fs::create_dir_all(&to).expect("dataDir");
    for entry in std::fs::read_dir(from.join("version-2")).expect("read version-2") {
        let from = entry.expect("entry").path();
        std::fs::copy(&from, to.join(from.file_name().expect("name"))).expect("copy");
    }
}

/// Starts one ZooKeeper JVM running `main_class` on the zoo.cfg `config`,
/// with TTL nodes enabled, no admin server and the extra system properties
/// `properties` (each passed as `-Dkey=value`). Its log (stderr) is appended
/// to `log`, so a restarted server keeps its earlier log. Fails the test when
/// ZooKeeper is not installed; does not wait for the server to answer.
pub fn launch(
    main_class: &str,
    config: &Path,
    properties: &[(String, String)],
    heap: &str,
    log: &Path,
) -> Child {
    launch_wrapped(&[], main_class, config, properties, heap, log)
}

/// The JVM heap (`-Xmx`) of a ZooKeeper started for a test: small, as
/// tests hold few znodes and may run several servers at once.
pub const TEST_HEAP: &str = "256m";

/// The heap of a ZooKeeper started for a benchmark: 1 GiB, as operators
/// size it, so that neither a large tree nor its GC holds it back.
pub const BENCH_HEAP: &str = "1g";

/// [`launch`] under `wrapper`, a command prefix such as
/// `ip netns exec NS` (which execs, so the child is the JVM itself).
pub fn launch_wrapped(
    wrapper: &[String],
    main_class: &str,
    config: &Path,
    properties: &[(String, String)],
    heap: &str,
    log: &Path,
) -> Child {
    require_tool(ZOOKEEPER_JAR);
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .expect("ZooKeeper log file");
    let classpath = java_classpath();
    let mut command = match wrapper.split_first() {
        Some((program, args)) => {
            let mut c = Command::new(program);
            c.args(args).arg("java");
            c
        }
        None => Command::new("java"),
    };
    command
        .arg(format!("-Xmx{heap}"))
        .args([
            "-Dzookeeper.extendedTypesEnabled=true",
            "-Dzookeeper.admin.enableServer=false",
            "-Dorg.slf4j.simpleLogger.showDateTime=true",
            "-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS",
        ])
        .args(properties.iter().map(|(k, v)| format!("-D{k}={v}")))
        .args(["-cp", &classpath])
        .arg(main_class)
        .arg(config)
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("spawn java")
}

/// Netty's jars that Debian's zookeeper.jar manifest leaves out, and
/// without which its Netty client and server (TLS) cannot start.
pub const NETTY_MISSING_JARS: [&str; 2] = [
    "/usr/share/java/netty-resolver.jar",
    "/usr/share/java/netty-codec.jar",
];

/// ZooKeeper's jar, then those of the logger, the servlet API and Netty
/// that are installed: the classpath of a ZooKeeper server or client.
pub fn java_classpath() -> String {
    let mut classpath = ZOOKEEPER_JAR.to_owned();
    let extra = [SLF4J_SIMPLE_JAR, SERVLET_API_JAR]
        .into_iter()
        .chain(NETTY_MISSING_JARS);
    for jar in extra.filter(|jar| Path::new(jar).exists()) {
        classpath.push(':');
        classpath.push_str(jar);
    }
    classpath
}

/// ZooKeeper's CLI (`ZooKeeperMain`, the Java client) run once against
/// `addr` with the JVM options `jvm`: its output lines for `command`,
/// less logging, watcher events and the connecting banner.
pub fn zookeeper_main(jvm: &[String], addr: &str, command: &[&str]) -> Vec<String> {
    let out = Command::new("java")
        .args(jvm)
        .args([
            "-cp",
            &java_classpath(),
            "org.apache.zookeeper.ZooKeeperMain",
            "-server",
            addr,
        ])
        .args(command)
        .output()
        .expect("java");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .chain(String::from_utf8_lossy(&out.stderr).lines())
        .filter(|l| !l.contains("SLF4J") && !l.starts_with('[') && !l.trim().is_empty())
        .filter(|l| !l.starts_with("WATCHER") && !l.starts_with("WatchedEvent"))
        .filter(|l| !l.starts_with("Connecting to"))
        .map(str::to_owned)
        .collect()
}

/// A running Apache ZooKeeper server.
pub struct ZooKeeperProcess {
    child: Child,
    pub port: u16,
    log: PathBuf,
    /// What it was started with, to start it again.
    config: PathBuf,
    properties: Vec<(String, String)>,
    heap: String,
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
        ZooKeeperProcess::start_configured(tick_time_ms, properties, "")
    }

    /// Like [`ZooKeeperProcess::start_with`], with `more` (zoo.cfg lines)
    /// appended to its configuration.
    pub fn start_configured(
        tick_time_ms: u64,
        properties: &[(&str, &str)],
        more: &str,
    ) -> ZooKeeperProcess {
        ZooKeeperProcess::start_sized(tick_time_ms, properties, more, TEST_HEAP)
    }

    /// Like [`ZooKeeperProcess::start_configured`], with a heap of `heap`
    /// (as `-Xmx` takes it, e.g. [`BENCH_HEAP`]).
    pub fn start_sized(
        tick_time_ms: u64,
        properties: &[(&str, &str)],
        more: &str,
        heap: &str,
    ) -> ZooKeeperProcess {
        require_tool(ZOOKEEPER_JAR);
        let properties: Vec<(String, String)> = properties
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let mut attempt = 1;
        loop {
            let mut zk = ZooKeeperProcess::spawn(tick_time_ms, &properties, more, heap, None);
            match zk.try_wait_ready() {
                Ok(()) => return zk,
                // Another process bound the port first: a new port.
                Err(e) if port_clash(&e) && attempt < PORT_CLASH_ATTEMPTS => attempt += 1,
                Err(e) => panic!("{e}"),
            }
        }
    }

    /// Starts ZooKeeper standalone on a copy of the data directory `data`
    /// (its `version-2/`), as a server restarted on it would be, and waits
    /// until it serves.
    pub fn start_on_copy_of(tick_time_ms: u64, data: &Path) -> ZooKeeperProcess {
        ZooKeeperProcess::start_sized_on_copy_of(tick_time_ms, data, "", TEST_HEAP)
    }

    /// [`ZooKeeperProcess::start_on_copy_of`], with `more` zoo.cfg lines and
    /// a heap of `heap` (as `-Xmx` takes it).
    pub fn start_sized_on_copy_of(
        tick_time_ms: u64,
        data: &Path,
        more: &str,
        heap: &str,
    ) -> ZooKeeperProcess {
        require_tool(ZOOKEEPER_JAR);
        let mut zk = ZooKeeperProcess::spawn(tick_time_ms, &[], more, heap, Some(data));
        zk.try_wait_ready().unwrap_or_else(|e| panic!("{e}"));
        zk
    }

    /// Writes a new directory (a copy of `seed`'s `version-2/` in its
    /// dataDir, if given) and config, on a new port, and starts the JVM
    /// without waiting.
    fn spawn(
        tick_time_ms: u64,
        properties: &[(String, String)],
        more: &str,
        heap: &str,
        seed: Option<&Path>,
    ) -> ZooKeeperProcess {
        let dir = tempfile::tempdir().expect("tempdir");
        if let Some(seed) = seed {
            copy_version_2(seed, &dir.path().join("data"));
        }
        let port = free_port();
        let config = dir.path().join("zoo.cfg");
        let text = base_config(tick_time_ms, &dir.path().join("data"), port) + more;
        std::fs::write(&config, text).expect("write zoo.cfg");
        let log = dir.path().join("zookeeper.log");
        let child = launch(STANDALONE_MAIN, &config, properties, heap, &log);
        ZooKeeperProcess {
            child,
            port,
            log,
            config,
            properties: properties.to_vec(),
            heap: heap.to_owned(),
            _dir: dir,
        }
    }

    /// kill -9, then starts it again on the same port and data directory
    /// and waits until it answers `srvr` with its mode.
    pub fn restart(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.child = launch(
            STANDALONE_MAIN,
            &self.config,
            &self.properties,
            &self.heap,
            &self.log,
        );
        self.wait_ready();
    }

    fn wait_ready(&mut self) {
        self.try_wait_ready().unwrap_or_else(|e| panic!("{e}"));
    }

    /// Waits until it answers `srvr` with its mode; the error says why not, with its log.
    fn try_wait_ready(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + ZOOKEEPER_START_TIMEOUT;
        while Instant::now() < deadline {
            if four_letter_word(self.port, "srvr").is_ok_and(|r| r.contains("Mode:")) {
                return Ok(());
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!(
                    "ZooKeeper exited early with {status}; log:\n{}",
                    self.log()
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Err(format!(
            "ZooKeeper did not start within {ZOOKEEPER_START_TIMEOUT:?}; log:\n{}",
            self.log()
        ))
    }

    /// Its zoo.cfg.
    pub fn config_path(&self) -> &Path {
        &self.config
    }

    /// Its dataDir.
    pub fn data_dir(&self) -> PathBuf {
        self._dir.path().join("data")
    }

    /// Stops it: SIGTERM, ZooKeeper's clean shutdown, or SIGKILL (`kill9`),
    /// and waits for it to exit.
    pub fn stop(&mut self, kill9: bool) {
        let signal = if kill9 { "-KILL" } else { "-TERM" };
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args([signal, &pid]).status();
        let _ = self.child.wait();
    }

    /// The JVM's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `127.0.0.1:port`.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for ZooKeeperProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
