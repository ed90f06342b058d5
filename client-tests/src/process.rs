//! Spawning and controlling `zkd` processes.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// How long a server may take to answer a four-letter word after start.
const START_TIMEOUT: Duration = Duration::from_secs(20);

/// Settings written into the zoo.cfg of a test server.
#[derive(Clone, Debug)]
pub struct ServerOptions {
    pub tick_time_ms: u64,
    pub extra: Vec<(String, String)>,
    /// A command that runs zkd, e.g. `["fiu-run", "-x"]`; empty runs it directly.
    pub wrapper: Vec<String>,
    /// The dataDir (which must exist), e.g. on a filesystem the test
    /// controls; by default a `data` folder in the server's temporary directory.
    pub data_dir: Option<PathBuf>,
    /// Failpoints to plant (`ZKD_FAILPOINTS`), running the failpoints build
    /// ([`zkd_failpoints_binary`]); empty runs the ordinary build.
    pub planted: Vec<String>,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            tick_time_ms: 2000,
            extra: Vec::new(),
            wrapper: Vec::new(),
            data_dir: None,
            planted: Vec::new(),
        }
    }
}

impl ServerOptions {
    /// Adds a zoo.cfg line.
    pub fn with(mut self, key: &str, value: &str) -> Self {
        self.extra.push((key.into(), value.into()));
        self
    }

    /// Runs zkd under `wrapper` (its program and leading arguments).
    pub fn wrapped_in(mut self, wrapper: &[&str]) -> Self {
        self.wrapper = wrapper.iter().map(|s| s.to_string()).collect();
        self
    }
}

/// The `zkd` binary, built once per test process so tests never run a stale one.
pub fn zkd_binary() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Ok(bin) = std::env::var("ZKD_BIN") {
            return PathBuf::from(bin);
        }
        let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .expect("workspace root");
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let release = !cfg!(debug_assertions);
        let mut cmd = Command::new(cargo);
        cmd.current_dir(workspace)
            .args(["build", "-q", "-p", "zkd-server", "--bin", "zkd"]);
        if release {
            cmd.arg("--release");
        }
        let status = cmd.status().expect("run cargo build for zkd");
        assert!(status.success(), "building zkd failed");
        let target = std::env::var("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|_| workspace.join("target"));
        target
            .join(if release { "release" } else { "debug" })
            .join("zkd")
    })
}

/// The `zkd` build with planted bugs (the `failpoints` feature):
/// `ZKD_FAILPOINTS_BIN` if set (client-tests/run-all.sh builds it), else
/// built once per test process in a target directory of its own.
pub fn zkd_failpoints_binary() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Ok(bin) = std::env::var("ZKD_FAILPOINTS_BIN") {
            return PathBuf::from(bin);
        }
        let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .expect("workspace root");
        let target = workspace.join("target").join("failpoints");
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = Command::new(cargo)
            .current_dir(workspace)
            .args([
                "build",
                "-q",
                "--release",
                "-p",
                "zkd-server",
                "--bin",
                "zkd",
            ])
            .args(["--features", "failpoints", "--target-dir"])
            .arg(&target)
            .status()
            .expect("run cargo build");
        assert!(status.success(), "building zkd with failpoints failed");
        target.join("release").join("zkd")
    })
}

/// A free loopback port outside the kernel's ephemeral range (so no outbound
/// connection can take it between now and the moment a server binds it)
/// and never the same one twice in this process.
pub fn free_port() -> u16 {
    static TAKEN: OnceLock<std::sync::Mutex<std::collections::BTreeSet<u16>>> = OnceLock::new();
    let mut taken = TAKEN
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let ranges = non_ephemeral_ports();
    let mut rng = rand::thread_rng();
    let tries = if ranges.is_empty() { 0 } else { 1000 };
    for _ in 0..tries {
        let range = ranges[rand::Rng::gen_range(&mut rng, 0..ranges.len())].clone();
        let port = rand::Rng::gen_range(&mut rng, range);
        if !taken.contains(&port) && TcpListener::bind(("127.0.0.1", port)).is_ok() {
            taken.insert(port);
            return port;
        }
    }
    // A machine whose ephemeral range covers nearly everything: let the kernel choose.
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind")
        .port();
    taken.insert(port);
    port
}

/// The non-empty port ranges below and above the kernel's ephemeral range
/// (from 10000, to stay clear of well-known services).
fn non_ephemeral_ports() -> Vec<std::ops::RangeInclusive<u16>> {
    const LOWEST: u16 = 10_000;
    let range = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok();
    let mut bounds = range
        .iter()
        .flat_map(|r| r.split_whitespace())
        .filter_map(|b| b.parse::<u16>().ok());
    let (first, last) = match (bounds.next(), bounds.next()) {
        (Some(first), Some(last)) => (first, last),
        _ => (32_768, 60_999),
    };
    let below = LOWEST..=first.saturating_sub(1);
    let above = last.checked_add(1).map(|next| next.max(LOWEST)..=u16::MAX);
    [Some(below), above]
        .into_iter()
        .flatten()
        .filter(|r| !r.is_empty())
        .collect()
}

/// Whether a failed start says a port [`free_port`] chose was taken before
/// the server bound it (by a process outside this one), so that starting
/// again on other ports is the remedy.
pub fn port_clash(error: &str) -> bool {
    error.contains("Address already in use")
}

/// How many times a test server is started on fresh ports after a [`port_clash`].
pub const PORT_CLASH_ATTEMPTS: usize = 3;

/// The `Mode:` of a `srvr` reply (`leader`, `follower`, `standalone`), if it has one.
pub fn srvr_mode(reply: &str) -> Option<String> {
    reply
        .lines()
        .find_map(|l| l.strip_prefix("Mode: "))
        .map(str::to_owned)
}

/// A connect string: the addresses joined by commas.
pub fn connect_string(addrs: impl IntoIterator<Item = String>) -> String {
    addrs.into_iter().collect::<Vec<_>>().join(",")
}

/// Sends a four-letter word and returns the reply.
pub fn four_letter_word(port: u16, word: &str) -> std::io::Result<String> {
    four_letter_word_at("127.0.0.1", port, word)
}

/// Sends a four-letter word to `host:port` (an IPv4 address or a name) and
/// returns the reply; connecting and reading are bounded by 5 s each.
pub fn four_letter_word_at(host: &str, port: u16, word: &str) -> std::io::Result<String> {
    let addr = (host, port).to_socket_addrs()?.next().ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("no address for {host}"),
        )
    })?;
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    s.write_all(word.as_bytes())?;
    let mut out = String::new();
    s.read_to_string(&mut out)?;
    Ok(out)
}

/// A running `zkd serve` with its own data directory.
pub struct ZkdProcess {
    child: Option<Child>,
    pub port: u16,
    /// The address the client port listens on (`clientPortAddress`).
    pub host: String,
    dir: tempfile::TempDir,
    data: PathBuf,
    config: PathBuf,
    wrapper: Vec<String>,
    planted: Vec<String>,
}

impl ZkdProcess {
    /// Starts a standalone server with default options.
    pub fn start() -> ZkdProcess {
        ZkdProcess::start_with(ServerOptions::default())
    }

    /// Starts a standalone server with `options` (on other ports again
    /// after a [`port_clash`]).
    pub fn start_with(options: ServerOptions) -> ZkdProcess {
        let mut attempt = 1;
        loop {
            match ZkdProcess::try_start_at(options.clone(), "127.0.0.1", free_port(), "", None) {
                Ok(p) => return p,
                Err(e) if port_clash(&e) && attempt < PORT_CLASH_ATTEMPTS => attempt += 1,
                Err(e) => panic!("{e}"),
            }
        }
    }

    /// Starts a server on `port` whose zoo.cfg also holds `more` (an
    /// ensemble's server.N lines), with `myid` written to its dataDir.
    pub fn start_configured(
        options: ServerOptions,
        port: u16,
        more: &str,
        myid: Option<u64>,
    ) -> ZkdProcess {
        ZkdProcess::start_at(options, "127.0.0.1", port, more, myid)
    }

    /// As [`ZkdProcess::start_configured`], with the client port on `host`
    /// (`clientPortAddress`), e.g. an address inside a network namespace.
    pub fn start_at(
        options: ServerOptions,
        host: &str,
        port: u16,
        more: &str,
        myid: Option<u64>,
    ) -> ZkdProcess {
        ZkdProcess::try_start_at(options, host, port, more, myid).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Starts a member whose whole zoo.cfg is `config(data_dir)` (a 3.5+
    /// config may give the client port only in its `server.N` lines), with
    /// `myid` in its dataDir and its client port at `host:port`; the error
    /// says why it did not start, with its log.
    pub fn try_start_from(
        config: impl FnOnce(&Path) -> String,
        host: &str,
        port: u16,
        myid: u64,
    ) -> Result<ZkdProcess, String> {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = dir.path().join("data");
        std::fs::create_dir_all(&data).expect("data dir");
        std::fs::write(data.join("myid"), format!("{myid}\n")).expect("write myid");
        let path = dir.path().join("zoo.cfg");
        std::fs::write(&path, config(&data)).expect("write zoo.cfg");
        let options = ServerOptions::default();
        ZkdProcess::run(dir, data, path, (host, port), options)
    }

    /// Starts `zkd serve` on an existing zoo.cfg, in place (another server's,
    /// such as a stopped ZooKeeper member's), whose dataDir is `data` and
    /// client port `host:port`; zkd's own log goes to a directory of its own.
    pub fn try_start_on(
        config: &Path,
        data: &Path,
        (host, port): (&str, u16),
    ) -> Result<ZkdProcess, String> {
        let dir = tempfile::tempdir().expect("tempdir");
        let (data, config) = (data.to_owned(), config.to_owned());
        ZkdProcess::run(dir, data, config, (host, port), ServerOptions::default())
    }

    /// As [`ZkdProcess::start_at`]; the error says why it did not start, with its log.
    pub fn try_start_at(
        options: ServerOptions,
        host: &str,
        port: u16,
        more: &str,
        myid: Option<u64>,
    ) -> Result<ZkdProcess, String> {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = dir.path().join("zoo.cfg");
        let data = options
            .data_dir
            .clone()
            .unwrap_or_else(|| dir.path().join("data"));
        let mut text = format!(
            "tickTime={}\ndataDir={}\nclientPort={port}\nclientPortAddress={host}\n4lw.commands.whitelist=*\n{more}",
            options.tick_time_ms,
            data.display()
        );
        for (k, v) in &options.extra {
            text.push_str(&format!("{k}={v}\n"));
        }
        std::fs::write(&config, text).expect("write zoo.cfg");
        if let Some(id) = myid {
            std::fs::create_dir_all(&data).expect("data dir");
            std::fs::write(data.join("myid"), format!("{id}\n")).expect("write myid");
        }
        ZkdProcess::run(dir, data, config, (host, port), options)
    }

    /// Runs `zkd serve` on the files written in `dir`, its client port at
    /// `address`, under `options`' wrapper and planted failpoints.
    fn run(
        dir: tempfile::TempDir,
        data: PathBuf,
        config: PathBuf,
        (host, port): (&str, u16),
        options: ServerOptions,
    ) -> Result<ZkdProcess, String> {
        let mut p = ZkdProcess {
            child: None,
            port,
            host: host.to_owned(),
            dir,
            data,
            config,
            wrapper: options.wrapper,
            planted: options.planted,
        };
        p.spawn()?;
        Ok(p)
    }

    /// Starts the process and waits until it answers; the error says why not,
    /// with its log.
    fn spawn(&mut self) -> Result<(), String> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("zkd.log"))
            .expect("log file");
        let binary = match self.planted.is_empty() {
            true => zkd_binary(),
            false => zkd_failpoints_binary(),
        };
        let mut command = match self.wrapper.split_first() {
            Some((program, args)) => {
                let mut c = Command::new(program);
                c.args(args).arg(binary);
                c
            }
            None => Command::new(binary),
        };
        if !self.planted.is_empty() {
            command.env("ZKD_FAILPOINTS", self.planted.join(","));
        }
        let child = command
            .args(["serve", "--config"])
            .arg(&self.config)
            .env(
                "ZKD_LOG",
                std::env::var("ZKD_LOG").unwrap_or_else(|_| "info".into()),
            )
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(|e| format!("spawn zkd: {e}"))?;
        self.child = Some(child);
        self.wait_ready()
    }

    fn wait_ready(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + START_TIMEOUT;
        while Instant::now() < deadline {
            // Any answer to a 4lw proves the listener is up, whitelisted or not.
            if four_letter_word_at(&self.host, self.port, "srvr").is_ok_and(|r| !r.is_empty()) {
                return Ok(());
            }
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                self.child = None;
                return Err(format!(
                    "zkd exited early with {status}; log:\n{}",
                    self.log()
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Err(format!(
            "zkd did not answer ruok within {START_TIMEOUT:?}; log:\n{}",
            self.log()
        ))
    }

    /// `host:port` of the client port (`127.0.0.1:port` unless started with
    /// [`ZkdProcess::start_at`]).
    pub fn addr(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    /// The server's zoo.cfg.
    pub fn config_path(&self) -> &Path {
        &self.config
    }

    /// Its dataDir (zkd's files are under `zkd/` there).
    pub fn data_dir(&self) -> &Path {
        &self.data
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("zkd.log")).unwrap_or_default()
    }

    /// The process id, while running.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Whether the process runs (it may have exited by itself).
    pub fn running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// Waits up to `limit` for the server to exit by itself; its exit status.
    pub fn wait_for_exit(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Some(status) = self.child.as_mut()?.try_wait().ok().flatten() {
                self.child = None;
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    /// kill -9: no chance to flush anything.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Deletes everything the server stored (its myid stays): a member
    /// whose disk was replaced. Only while it is stopped.
    pub fn wipe_data(&self) {
        let stored = self.data.join("zkd");
        if stored.exists() {
            std::fs::remove_dir_all(&stored).expect("wipe the data dir");
        }
    }

    /// Plants `failpoints` (the failpoints build, `ZKD_FAILPOINTS`) from the
    /// next start on; none runs the ordinary build again.
    pub fn plant(&mut self, failpoints: &[&str]) {
        self.planted = failpoints.iter().map(|f| f.to_string()).collect();
    }

    /// Starts the server again on the same port and data directory.
    pub fn restart(&mut self) {
        self.try_restart().unwrap_or_else(|e| panic!("{e}"));
    }

    /// [`ZkdProcess::restart`], with a server that exits or never answers
    /// as an error (with its log) rather than a panic.
    pub fn try_restart(&mut self) -> Result<(), String> {
        self.kill9();
        self.spawn()
    }

    /// SIGSTOP: the process freezes with its sockets open.
    pub fn pause(&self) {
        self.signal("-STOP");
    }

    /// SIGCONT.
    pub fn resume(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, sig: &str) {
        if let Some(pid) = self.pid() {
            signal(pid, sig);
        }
    }

    /// Sends a four-letter word.
    pub fn four_letter_word(&self, word: &str) -> String {
        four_letter_word_at(&self.host, self.port, word).expect("4lw")
    }
}

/// Sends `sig` (as `kill` takes it: `-STOP`, `-CONT`) to the process `pid`,
/// one this test started.
pub fn signal(pid: u32, sig: &str) {
    let _ = Command::new("kill").arg(sig).arg(pid.to_string()).status();
}

impl Drop for ZkdProcess {
    fn drop(&mut self) {
        self.resume();
        self.kill9();
    }
}

/// Every file under `dir` (recursively), with its bytes: to check that a
/// directory is left as it was.
pub fn files_under(dir: &Path) -> std::collections::BTreeMap<PathBuf, Vec<u8>> {
    let mut out = std::collections::BTreeMap::new();
    for entry in std::fs::read_dir(dir).expect("read a directory") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            out.extend(files_under(&path));
        } else {
            out.insert(path.clone(), std::fs::read(&path).expect("read a file"));
        }
    }
    out
}
