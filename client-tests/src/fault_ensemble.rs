//! A `zkd ensemble` started from a test, with every fault of its fault API
//! at hand: the spirit of Curator's `TestingCluster`, for Rust.
//!
//! ```no_run
//! use zkd_client_tests::fault_ensemble::{FaultEnsemble, Target};
//! let ensemble = FaultEnsemble::start(3);
//! let connect = ensemble.connect_string(); // give it to the application
//! ensemble.isolate(Target::Leader).unwrap(); // its clients must move
//! ensemble.heal().unwrap(); // every member serves again
//! // Dropping the ensemble stops every member.
//! ```
//!
//! It runs `zkd ensemble --dir <temp dir>` as a child process and drives it
//! through `zkd fault`, as a user would from a shell, so what a test sees is
//! what the CLI and the HTTP API give (see the README's "Testing your
//! application against faults").

use crate::process::zkd_binary;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long the ensemble may take to start and elect a leader.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// Which member a fault acts on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// Member `i` (1-based, its myid).
    Member(usize),
    /// Whichever member leads when the fault is applied.
    Leader,
}

impl Target {
    fn word(self) -> String {
        match self {
            Target::Member(i) => i.to_string(),
            Target::Leader => "leader".into(),
        }
    }
}

/// A running `zkd ensemble`; dropping it stops every member (unless it
/// was [attached](FaultEnsemble::attach) to, not started).
pub struct FaultEnsemble {
    /// The `zkd ensemble` process, when this handle started it.
    child: Option<Child>,
    /// The temporary directory holding the ensemble and its log, if ours.
    tmp: Option<tempfile::TempDir>,
    /// The directory given to `zkd ensemble --dir`.
    dir: PathBuf,
    connect: String,
    api: String,
}

impl FaultEnsemble {
    /// `n` members on ports from a free base port, tickTime 500 ms (so that
    /// faults are noticed within seconds).
    pub fn start(n: usize) -> FaultEnsemble {
        Self::start_with(n, free_base_port(), 500)
    }

    /// `n` members from `base_port` (see `zkd ensemble --help`) with `tick_ms`.
    pub fn start_with(n: usize, base_port: u16, tick_ms: u64) -> FaultEnsemble {
        Self::launch(n, base_port, tick_ms, &[])
    }

    /// As [`start`](FaultEnsemble::start), with `zkd ensemble --reconfig`:
    /// the [`remove`](FaultEnsemble::remove) and [`add`](FaultEnsemble::add)
    /// faults, and clients may reconfigure as the super user
    /// ([`super_password`](FaultEnsemble::super_password)).
    pub fn start_with_reconfig(n: usize) -> FaultEnsemble {
        Self::launch(n, free_base_port(), 500, &["--reconfig"])
    }

    fn launch(n: usize, base_port: u16, tick_ms: u64, flags: &[&str]) -> FaultEnsemble {
        let dir = tempfile::tempdir().expect("temp dir");
        let log = std::fs::File::create(dir.path().join("ensemble.log")).expect("log file");
        let mut child = Command::new(zkd_binary())
            .arg("ensemble")
            .args(["--nodes", &n.to_string()])
            .arg("--dir")
            .arg(dir.path().join("ensemble"))
            .args(["--base-port", &base_port.to_string()])
            .args(["--tick-time", &tick_ms.to_string()])
            .args(flags)
            .env("NO_COLOR", "1")
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .expect("start zkd ensemble");
        let mut line = String::new();
        let stdout = child.stdout.take().expect("stdout");
        let _ = BufReader::new(stdout).read_line(&mut line);
        let mut ensemble = FaultEnsemble {
            child: Some(child),
            dir: dir.path().join("ensemble"),
            tmp: Some(dir),
            connect: line.trim().to_owned(),
            api: String::new(),
        };
        assert!(
            !ensemble.connect.is_empty(),
            "zkd ensemble printed no connect string; log:\n{}",
            ensemble.log()
        );
        let deadline = Instant::now() + START_TIMEOUT;
        while Instant::now() < deadline {
            if let Ok(url) = std::fs::read_to_string(ensemble.ensemble_dir().join("fault-api")) {
                ensemble.api = url.trim().trim_start_matches("http://").to_owned();
                if ensemble.serving() {
                    return ensemble;
                }
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!(
            "zkd ensemble was not serving within {START_TIMEOUT:?}; log:\n{}",
            ensemble.log()
        );
    }

    /// The ensemble `zkd ensemble --dir DIR` runs (started elsewhere, and
    /// left running when this handle drops).
    pub fn attach(dir: &std::path::Path) -> Result<FaultEnsemble, String> {
        let file = dir.join("fault-api");
        let url = std::fs::read_to_string(&file).map_err(|e| {
            format!(
                "no ensemble runs in {} ({}: {e})",
                dir.display(),
                file.display()
            )
        })?;
        let mut ensemble = FaultEnsemble {
            child: None,
            tmp: None,
            dir: dir.to_owned(),
            connect: String::new(),
            api: url.trim().trim_start_matches("http://").to_owned(),
        };
        let (code, status) = ensemble.http("GET", "/status", "");
        ensemble.connect = status["connect"].as_str().unwrap_or("").to_owned();
        match (code, ensemble.connect.is_empty()) {
            (200, false) => Ok(ensemble),
            _ => Err(format!(
                "the fault API of {} answered {code}: {status}",
                dir.display()
            )),
        }
    }

    /// How many members there are.
    pub fn size(&self) -> usize {
        self.connect.split(',').count()
    }

    /// The connect string of every member.
    pub fn connect_string(&self) -> &str {
        &self.connect
    }

    /// `host:port` of member `i`'s client port.
    pub fn address(&self, i: usize) -> String {
        self.connect
            .split(',')
            .nth(i - 1)
            .expect("a member")
            .to_owned()
    }

    /// The directory given to `zkd ensemble --dir`.
    pub fn ensemble_dir(&self) -> PathBuf {
        self.dir.clone()
    }

    /// The fault API's `host:port`.
    pub fn api(&self) -> &str {
        &self.api
    }

    /// The file holding the ensemble's output, when this handle started it.
    pub fn log_path(&self) -> Option<PathBuf> {
        self.tmp.as_ref().map(|t| t.path().join("ensemble.log"))
    }

    /// The ensemble's output so far (its own lines and every member's).
    pub fn log(&self) -> String {
        let Some(tmp) = &self.tmp else {
            return String::new();
        };
        std::fs::read_to_string(tmp.path().join("ensemble.log")).unwrap_or_default()
    }

    /// Runs `zkd fault --dir DIR verb args...`: the API's answer, or its
    /// error when the fault was refused.
    pub fn fault(&self, verb: &str, args: &[&str]) -> Result<Value, String> {
        let out = Command::new(zkd_binary())
            .arg("fault")
            .arg("--dir")
            .arg(self.ensemble_dir())
            .arg(verb)
            .args(args)
            .env("NO_COLOR", "1")
            .output()
            .expect("run zkd fault");
        let answer: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "zkd fault {verb} {args:?} did not answer JSON ({e}): {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        });
        match (out.status.success(), answer["ok"].as_bool()) {
            (true, Some(true)) => Ok(answer),
            (false, Some(false)) => Err(answer["error"].as_str().unwrap_or("").to_owned()),
            _ => panic!("zkd fault {verb}: exit {} with {answer}", out.status),
        }
    }

    /// Each member's state, the leader and the faults in force.
    pub fn status(&self) -> Value {
        self.fault("status", &[]).expect("status")
    }

    /// Whether every member serves, under one leader (a member still
    /// syncing with a new leader does not take sessions yet).
    pub fn serving(&self) -> bool {
        let (code, status) = self.http("GET", "/status", "");
        let Some(members) = status["members"].as_array().filter(|_| code == 200) else {
            return false;
        };
        let modes: Vec<&str> = members
            .iter()
            .map(|m| m["mode"].as_str().unwrap_or(""))
            .collect();
        let leaders = modes.iter().filter(|m| **m == "leader").count();
        modes == ["standalone"]
            || (leaders == 1 && modes.iter().all(|m| *m == "leader" || *m == "follower"))
    }

    /// The member that leads now, if one does.
    pub fn leader(&self) -> Option<usize> {
        let status = self.fault("status", &[]).ok()?;
        status["leader"].as_u64().map(|l| l as usize)
    }

    /// SIGKILL; the member stays down until `restart` or `heal`.
    pub fn kill(&self, target: Target) -> Result<Value, String> {
        self.fault("kill", &[&target.word()])
    }

    /// Starts member `i` again.
    pub fn restart(&self, i: usize) -> Result<Value, String> {
        self.fault("restart", &[&i.to_string()])
    }

    /// SIGSTOP.
    pub fn pause(&self, target: Target) -> Result<Value, String> {
        self.fault("pause", &[&target.word()])
    }

    /// SIGCONT.
    pub fn resume(&self, i: usize) -> Result<Value, String> {
        self.fault("resume", &[&i.to_string()])
    }

    /// Members on either side lose every peer message to the other side.
    pub fn partition(&self, a: &[usize], b: &[usize]) -> Result<Value, String> {
        self.fault_sides("partition", a, b)
    }

    /// Messages from `a` to `b` are lost; `b` to `a` still arrive.
    pub fn partition_one_way(&self, a: &[usize], b: &[usize]) -> Result<Value, String> {
        self.fault_sides("partition-one-way", a, b)
    }

    /// `verb A... / B...`.
    fn fault_sides(&self, verb: &str, a: &[usize], b: &[usize]) -> Result<Value, String> {
        let mut words: Vec<String> = a.iter().map(usize::to_string).collect();
        words.push("/".into());
        words.extend(b.iter().map(usize::to_string));
        self.fault(verb, &words.iter().map(String::as_str).collect::<Vec<_>>())
    }

    /// Cuts the member off from every peer.
    pub fn isolate(&self, target: Target) -> Result<Value, String> {
        self.fault("isolate", &[&target.word()])
    }

    /// Member `i` stops answering its clients.
    pub fn cut_clients(&self, i: usize) -> Result<Value, String> {
        self.fault("cut-clients", &[&i.to_string()])
    }

    /// Every client of member `i` is disconnected (sessions live).
    pub fn close_connections(&self, i: usize) -> Result<Value, String> {
        self.fault("close-connections", &[&i.to_string()])
    }

    /// Each txn-log fsync of member `i` takes `ms` longer.
    pub fn slow_disk(&self, i: usize, ms: u64) -> Result<Value, String> {
        self.fault("slow-disk", &[&i.to_string(), &ms.to_string()])
    }

    /// Member `i`'s next fsync fails, and it exits.
    pub fn disk_error(&self, i: usize) -> Result<Value, String> {
        self.fault("disk-error", &[&i.to_string()])
    }

    /// The leader expires `session` now.
    pub fn expire_session(&self, session: i64) -> Result<Value, String> {
        self.fault("expire-session", &[&format!("0x{session:x}")])
    }

    /// Takes the member out of the configuration by reconfig (`--reconfig`).
    pub fn remove(&self, target: Target) -> Result<Value, String> {
        self.fault("remove", &[&target.word()])
    }

    /// Puts member `i` back into the configuration by reconfig.
    pub fn add(&self, i: usize) -> Result<Value, String> {
        self.fault("add", &[&i.to_string()])
    }

    /// The super user's password (`addauth digest super:<password>`) of an
    /// ensemble started with `--reconfig`.
    pub fn super_password(&self) -> String {
        let path = self.dir.join("super-password");
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        text.trim().to_owned()
    }

    /// Undoes every fault and waits until every member serves again.
    pub fn heal(&self) -> Result<Value, String> {
        self.fault("heal", &[])
    }

    /// One raw request to the fault API: its status code and JSON body.
    pub fn http(&self, method: &str, path: &str, body: &str) -> (u16, Value) {
        http(&self.api, method, path, body)
    }
}

impl Drop for FaultEnsemble {
    fn drop(&mut self) {
        let Some(child) = &mut self.child else {
            return;
        };
        // SIGTERM lets the launcher stop its members (it kills stragglers).
        if let Ok(pid) = i32::try_from(child.id()) {
            let _ = kill(Pid::from_raw(pid), Signal::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// One HTTP/1.1 request to `addr`, a POST as JSON; the status code and
/// the JSON body.
pub fn http(addr: &str, method: &str, path: &str, body: &str) -> (u16, Value) {
    let json = [("host", addr), ("content-type", "application/json")];
    let headers = if method == "POST" {
        &json[..]
    } else {
        &json[..1]
    };
    http_with(addr, method, path, headers, body)
}

/// One HTTP/1.1 request to `addr` with exactly `headers`; the status code
/// and the JSON body.
pub fn http_with(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, Value) {
    let mut stream = std::net::TcpStream::connect(addr).expect("connect to the fault API");
    stream
        .set_read_timeout(Some(Duration::from_secs(90)))
        .expect("timeout");
    let headers: String = headers
        .iter()
        .map(|(k, v)| format!("{k}: {v}\r\n"))
        .collect();
    let request = format!(
        "{method} {path} HTTP/1.1\r\n{headers}connection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).expect("send");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("read");
    let code = response
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = response.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (code, serde_json::from_str(body).unwrap_or(Value::Null))
}

/// A base port whose derived ports (client, quorum, election, fault API and
/// AdminServer: base .. base + 5905) are all free now.
pub fn free_base_port() -> u16 {
    use rand::Rng;
    let mut rng = rand::thread_rng();
    for _ in 0..200 {
        let base: u16 = rng.gen_range(11_000..28_000);
        let ports = (0..7)
            .flat_map(|i| [base + i, base + 706 + i, base + 1706 + i, base + 5899 + i])
            .chain([base + 2700]);
        if ports.into_iter().all(port_free) {
            return base;
        }
    }
    panic!("no free base port for an ensemble");
}

fn port_free(port: u16) -> bool {
    std::net::TcpListener::bind(("127.0.0.1", port)).is_ok()
}
