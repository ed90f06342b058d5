//! `zkd ensemble`: a local ZooKeeper-style ensemble to try zkd with. For each
//! member `i` it writes `DIR/node{i}/zoo.cfg` and `DIR/node{i}/data/myid`, starts
//! `zkd serve --config DIR/node{i}/zoo.cfg` as a child process, re-prints the
//! child's output prefixed `[node{i}] `, reports which member leads (by asking each
//! one `srvr`), and stops them all on SIGINT or SIGTERM.
//!
//! The connect string (stdout) and the status lines (stderr) are this command's
//! product, so they are written as plain lines with `std::io::Write`; problems
//! that stop the command go through tracing like the rest of zkd.

use std::collections::BTreeSet;
use std::fmt;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, ExitStatus, Stdio};
use std::thread::JoinHandle;
use std::time::Duration;

/// The largest ensemble the command runs.
pub const MAX_NODES: usize = 7;
/// First quorum port = base port + this (2181 + 707 = 2888, ZooKeeper's default).
pub const QUORUM_OFFSET: u32 = 707;
/// First election port = base port + this (2181 + 1707 = 3888, ZooKeeper's default).
pub const ELECTION_OFFSET: u32 = 1707;
/// How long members get to stop after SIGTERM before they are killed.
pub const STOP_GRACE: Duration = Duration::from_secs(10);
/// How often each member is asked `srvr`.
pub const POLL_INTERVAL: Duration = Duration::from_secs(1);
/// Bound on one `srvr` exchange (connect, write, read to EOF).
pub const POLL_TIMEOUT: Duration = Duration::from_millis(500);
/// Name of the file in `DIR/node{i}/` holding the pid of the last member started there.
pub const PID_FILE: &str = "zkd.pid";

const LAYOUT_HELP: &str = "\
Files, for member i = 1..N:
  DIR/node{i}/zoo.cfg      its configuration (rewritten when the flags change)
  DIR/node{i}/data/        its dataDir; data/myid holds i
  DIR/node{i}/zkd.pid      pid of the member last started there
A rerun in the same DIR keeps every data directory; a DIR made with another --nodes is refused.

Ports, for member i and base port B (--base-port):
  client    B + i - 1      2181, 2182, 2183 ...
  quorum    B + 706 + i    2888, 2889, 2890 ...
  election  B + 1706 + i   3888, 3889, 3890 ...
Two ensembles whose base ports differ by 7 to 700 use disjoint ports.

The connect string (host:port,...) is printed on stdout. Members' output goes to stderr prefixed
[node{i}], with a line whenever the leader changes (each member is asked `srvr` every second).
Ctrl-C or SIGTERM stops every member: SIGTERM, then SIGKILL for those still running after 10 s
(a second Ctrl-C kills at once).";

/// Flags of `zkd ensemble`.
#[derive(clap::Args, Clone, Debug)]
#[command(after_help = LAYOUT_HELP)]
pub struct EnsembleArgs {
    /// Number of members: an odd number from 1 to 7 (3 or 5 for a real ensemble).
    #[arg(long)]
    pub nodes: usize,
    /// Directory holding node1/ .. nodeN/ (created if missing, kept across runs).
    #[arg(long, default_value = "zkd-ensemble")]
    pub dir: PathBuf,
    /// Client port of node1; every other port is derived from it (see below).
    #[arg(long, default_value_t = 2181)]
    pub base_port: u16,
    /// Address every member listens on, for clients and for its peers (an IPv4
    /// address or a host name).
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// tickTime (milliseconds) written to each zoo.cfg.
    #[arg(long, default_value_t = 2000)]
    pub tick_time: u64,
}

/// Why the ensemble was not started.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EnsembleError {
    /// Bad flags, or a directory that does not match them (exit code 2).
    Invalid(String),
    /// A file or directory could not be written (exit code 1).
    Io(String),
}

impl EnsembleError {
    /// The process exit code for this error.
    pub fn exit_code(&self) -> u8 {
        match self {
            EnsembleError::Invalid(_) => 2,
            EnsembleError::Io(_) => 1,
        }
    }
}

impl fmt::Display for EnsembleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EnsembleError::Invalid(m) | EnsembleError::Io(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for EnsembleError {}

fn invalid(message: impl Into<String>) -> EnsembleError {
    EnsembleError::Invalid(message.into())
}

fn io_error(path: &Path, e: std::io::Error) -> EnsembleError {
    EnsembleError::Io(format!("{}: {e}", path.display()))
}

/// One member's addresses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    /// Its `myid`, 1..=N.
    pub id: usize,
    pub host: String,
    pub client_port: u16,
    pub quorum_port: u16,
    pub election_port: u16,
}

impl Member {
    /// `host:clientPort`.
    pub fn client_address(&self) -> String {
        format!("{}:{}", self.host, self.client_port)
    }

    /// Its `server.N` line.
    pub fn server_line(&self) -> String {
        format!(
            "server.{}={}:{}:{}",
            self.id, self.host, self.quorum_port, self.election_port
        )
    }
}

/// The members the flags describe, with their ports (see [`LAYOUT_HELP`]).
pub fn members(args: &EnsembleArgs) -> Result<Vec<Member>, EnsembleError> {
    let n = args.nodes;
    if n == 0 || n > MAX_NODES || n.is_multiple_of(2) {
        return Err(invalid(format!(
            "--nodes {n}: an ensemble needs an odd number of members from 1 to {MAX_NODES} \
             (an even count tolerates no more failures than one member fewer)"
        )));
    }
    if args.tick_time == 0 {
        return Err(invalid("--tick-time must be positive"));
    }
    let host = args.host.trim();
    if host.is_empty()
        || host.contains(|c: char| c == ':' || c == ',' || c == '=' || c.is_whitespace())
    {
        return Err(invalid(format!(
            "--host {:?}: expected an IPv4 address or a host name",
            args.host
        )));
    }
    let base = u32::from(args.base_port);
    let highest = base + ELECTION_OFFSET + n as u32 - 1;
    if base == 0 || highest > u32::from(u16::MAX) {
        return Err(invalid(format!(
            "--base-port {base}: must be from 1 to {} so that every port fits \
             (the highest is base + {})",
            u32::from(u16::MAX) - ELECTION_OFFSET - (n as u32 - 1),
            ELECTION_OFFSET + n as u32 - 1
        )));
    }
    let port = |p: u32| u16::try_from(p).expect("checked above");
    Ok((1..=n)
        .map(|id| {
            let i = id as u32;
            Member {
                id,
                host: host.to_owned(),
                client_port: port(base + i - 1),
                quorum_port: port(base + QUORUM_OFFSET + i - 1),
                election_port: port(base + ELECTION_OFFSET + i - 1),
            }
        })
        .collect())
}

/// The comma-separated client addresses, as clients take them.
pub fn connect_string(members: &[Member]) -> String {
    members
        .iter()
        .map(Member::client_address)
        .collect::<Vec<_>>()
        .join(",")
}

/// `DIR/node{id}`.
pub fn node_dir(dir: &Path, id: usize) -> PathBuf {
    dir.join(format!("node{id}"))
}

/// The `zoo.cfg` of member `me`, whose dataDir is `data_dir`.
pub fn zoo_cfg(members: &[Member], me: &Member, data_dir: &str, tick_time_ms: u64) -> String {
    let mut text = format!(
        "# Member {id} of a {n}-member ensemble, written by `zkd ensemble`.\n\
         # A rerun rewrites this file (the data directory is kept). myid is in dataDir.\n\
         tickTime={tick_time_ms}\n\
         initLimit=10\n\
         syncLimit=5\n\
         dataDir={data_dir}\n\
         clientPort={port}\n\
         clientPortAddress={host}\n\
         4lw.commands.whitelist=*\n",
        id = me.id,
        n = members.len(),
        port = me.client_port,
        host = me.host,
    );
    for m in members {
        text.push_str(&m.server_line());
        text.push('\n');
    }
    text
}

/// The `node{i}` directories already in `dir` (none when it does not exist).
fn existing_nodes(dir: &Path) -> Result<BTreeSet<usize>, EnsembleError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeSet::new()),
        Err(e) => return Err(io_error(dir, e)),
    };
    let mut found = BTreeSet::new();
    for entry in entries {
        let entry = entry.map_err(|e| io_error(dir, e))?;
        let name = entry.file_name();
        let Some(id) = name
            .to_str()
            .and_then(|n| n.strip_prefix("node"))
            .filter(|digits| !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|digits| digits.parse::<usize>().ok())
        else {
            continue;
        };
        if entry.path().is_dir() {
            found.insert(id);
        }
    }
    Ok(found)
}

fn read_myid(path: &Path) -> Result<Option<String>, EnsembleError> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text.lines().next().unwrap_or("").trim().to_owned())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_error(path, e)),
    }
}

/// Refuses ports another process listens on, before anything is written.
fn check_ports_free(members: &[Member]) -> Result<(), EnsembleError> {
    for m in members {
        for (what, port) in [
            ("client", m.client_port),
            ("quorum", m.quorum_port),
            ("election", m.election_port),
        ] {
            if let Err(e) = std::net::TcpListener::bind((m.host.as_str(), port)) {
                return Err(invalid(format!(
                    "node{} {what} port {}:{port} is not available ({e}); is an ensemble \
                     already running with this --base-port? Stop it or choose another \
                     --base-port",
                    m.id, m.host
                )));
            }
        }
    }
    Ok(())
}

/// Checks `args.dir` against the flags and creates or updates every member's
/// files, never removing any. Returns the absolute directory and the members.
pub fn prepare(args: &EnsembleArgs) -> Result<(PathBuf, Vec<Member>), EnsembleError> {
    let members = members(args)?;
    let dir = &args.dir;
    if dir.exists() && !dir.is_dir() {
        return Err(invalid(format!(
            "--dir {}: exists and is not a directory",
            dir.display()
        )));
    }
    let found = existing_nodes(dir)?;
    let wanted: BTreeSet<usize> = (1..=members.len()).collect();
    if !found.is_empty() && found != wanted {
        let names: Vec<String> = found.iter().map(|i| format!("node{i}")).collect();
        return Err(invalid(format!(
            "{} holds an ensemble of {} members ({}), not {}: rerun with --nodes {}, or choose \
             another --dir (nothing was changed)",
            dir.display(),
            found.len(),
            names.join(", "),
            members.len(),
            found.len()
        )));
    }
    for m in &members {
        let myid = node_dir(dir, m.id).join("data").join("myid");
        if let Some(text) = read_myid(&myid)? {
            if text != m.id.to_string() {
                return Err(invalid(format!(
                    "{} holds {text:?}, expected {}: this directory was not made by \
                     `zkd ensemble` (nothing was changed)",
                    myid.display(),
                    m.id
                )));
            }
        }
    }
    check_ports_free(&members)?;
    std::fs::create_dir_all(dir).map_err(|e| io_error(dir, e))?;
    let dir = std::fs::canonicalize(dir).map_err(|e| io_error(dir, e))?;
    for m in &members {
        let data = node_dir(&dir, m.id).join("data");
        std::fs::create_dir_all(&data).map_err(|e| io_error(&data, e))?;
        let myid = data.join("myid");
        if read_myid(&myid)?.is_none() {
            std::fs::write(&myid, format!("{}\n", m.id)).map_err(|e| io_error(&myid, e))?;
        }
        let data_str = data.to_str().ok_or_else(|| {
            invalid(format!(
                "--dir {}: the path must be valid UTF-8 to be written in zoo.cfg",
                data.display()
            ))
        })?;
        let cfg = node_dir(&dir, m.id).join("zoo.cfg");
        let text = zoo_cfg(&members, m, data_str, args.tick_time);
        if std::fs::read_to_string(&cfg).ok().as_deref() != Some(text.as_str()) {
            let tmp = cfg.with_extension("cfg.tmp");
            std::fs::write(&tmp, &text).map_err(|e| io_error(&tmp, e))?;
            std::fs::rename(&tmp, &cfg).map_err(|e| io_error(&cfg, e))?;
        }
    }
    Ok((dir, members))
}

/// The `Mode:` value of a `srvr` reply (`leader`, `follower`, `standalone`, ...).
pub fn parse_mode(srvr_reply: &str) -> Option<&str> {
    srvr_reply
        .lines()
        .find_map(|l| l.strip_prefix("Mode:"))
        .map(str::trim)
}

/// The status line for the members answering leader.
pub fn describe_leaders(members: &[Member], leaders: &[usize]) -> String {
    let name = |id: &usize| {
        let m = &members[id - 1];
        format!("node{} ({})", m.id, m.client_address())
    };
    match leaders {
        [] => "no leader".to_owned(),
        [one] => format!("leader is {}", name(one)),
        many => format!(
            "several members answer leader: {}",
            many.iter().map(name).collect::<Vec<_>>().join(", ")
        ),
    }
}

/// `exit code N` or `signal N`.
fn describe_status(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit code {code}"),
        (None, Some(signal)) => format!("signal {signal}"),
        (None, None) => status.to_string(),
    }
}

/// `1 member`, `3 members`.
fn plural(n: usize) -> String {
    format!("{n} member{}", if n == 1 { "" } else { "s" })
}

/// One line on stderr, whole.
fn status_line(line: &str) {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{line}");
}

/// Runs `zkd ensemble` to the end; returns the process exit code.
pub fn run(args: &EnsembleArgs) -> ExitCode {
    let (dir, members) = match prepare(args) {
        Ok(prepared) => prepared,
        Err(e) => {
            tracing::error!("{e}");
            return ExitCode::from(e.exit_code());
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!("cannot start runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(supervise(dir, members))
}

/// A started member.
struct Running {
    id: usize,
    child: Child,
}

/// Starts `zkd serve` for `m`, with its output forwarded by two threads.
fn start(
    exe: &Path,
    dir: &Path,
    m: &Member,
    forwarders: &mut Vec<JoinHandle<()>>,
) -> std::io::Result<Child> {
    let node = node_dir(dir, m.id);
    let mut child = Command::new(exe)
        .arg("serve")
        .arg("--config")
        .arg(node.join("zoo.cfg"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    if let Some(out) = child.stdout.take() {
        forwarders.push(forward(out, m.id)?);
    }
    if let Some(err) = child.stderr.take() {
        forwarders.push(forward(err, m.id)?);
    }
    let pid_file = node.join(PID_FILE);
    if let Err(e) = std::fs::write(&pid_file, format!("{}\n", child.id())) {
        tracing::warn!("cannot write {}: {e}", pid_file.display());
    }
    Ok(child)
}

/// Re-prints each line of `stream` on stderr as `[node{id}] line`.
fn forward(stream: impl Read + Send + 'static, id: usize) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name(format!("node{id}-output"))
        .spawn(move || {
            let mut reader = BufReader::new(stream);
            let prefix = format!("[node{id}] ");
            let mut line = Vec::new();
            loop {
                line.clear();
                line.extend_from_slice(prefix.as_bytes());
                match reader.read_until(b'\n', &mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        if !line.ends_with(b"\n") {
                            line.push(b'\n');
                        }
                        let _ = std::io::stderr().lock().write_all(&line);
                    }
                }
            }
        })
}

async fn supervise(dir: PathBuf, members: Vec<Member>) -> ExitCode {
    use tokio::signal::unix::{signal, SignalKind};
    // Before any child exists, so that a signal can never be missed.
    let (mut interrupt, mut terminate) = match (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) {
        (Ok(i), Ok(t)) => (i, t),
        (Err(e), _) | (_, Err(e)) => {
            tracing::error!("cannot handle signals: {e}");
            return ExitCode::FAILURE;
        }
    };
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => {
            tracing::error!("cannot find the zkd executable: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut running = Vec::new();
    let mut forwarders = Vec::new();
    for m in &members {
        match start(&exe, &dir, m, &mut forwarders) {
            Ok(child) => running.push(Running { id: m.id, child }),
            Err(e) => {
                tracing::error!("cannot start node{}: {e}", m.id);
                stop(&mut running, &mut interrupt, &mut terminate).await;
                join(forwarders);
                return ExitCode::FAILURE;
            }
        }
    }
    let connect = connect_string(&members);
    {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{connect}");
        let _ = out.flush();
    }
    status_line(&format!(
        "{} starting in {}; connect with: zkCli.sh -server {connect}",
        plural(members.len()),
        dir.display()
    ));
    let watcher = tokio::spawn(watch_leader(members));
    let mut failed = false;
    let mut check = tokio::time::interval(Duration::from_millis(100));
    let signalled = loop {
        tokio::select! {
            _ = interrupt.recv() => break Some("SIGINT"),
            _ = terminate.recv() => break Some("SIGTERM"),
            _ = check.tick() => {
                failed |= reap(&mut running);
                if running.is_empty() {
                    break None;
                }
            }
        }
    };
    watcher.abort();
    let code = match signalled {
        Some(signal) => {
            if !running.is_empty() {
                status_line(&format!("{signal}: stopping {}", plural(running.len())));
            }
            if stop(&mut running, &mut interrupt, &mut terminate).await {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        None => {
            status_line("all members have exited");
            if failed {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            }
        }
    };
    join(forwarders);
    code
}

/// Waits for the output forwarders, which end when their member's pipes close.
fn join(forwarders: Vec<JoinHandle<()>>) {
    for f in forwarders {
        let _ = f.join();
    }
}

/// Reports and forgets the members that have exited; true if one failed.
fn reap(running: &mut Vec<Running>) -> bool {
    let mut failed = false;
    running.retain_mut(|r| match r.child.try_wait() {
        Ok(Some(status)) => {
            status_line(&format!(
                "node{} exited with {}",
                r.id,
                describe_status(status)
            ));
            failed |= !status.success();
            false
        }
        Ok(None) => true,
        Err(e) => {
            tracing::warn!("cannot wait for node{}: {e}", r.id);
            true
        }
    });
    failed
}

/// SIGTERM to every member, then SIGKILL to those still running after
/// [`STOP_GRACE`] (or at once on a second signal). True if none needed SIGKILL.
async fn stop(
    running: &mut Vec<Running>,
    interrupt: &mut tokio::signal::unix::Signal,
    terminate: &mut tokio::signal::unix::Signal,
) -> bool {
    use nix::sys::signal::{kill, Signal};
    use nix::unistd::Pid;
    for r in running.iter() {
        // The child is not reaped until try_wait/wait sees it, so its pid is still ours.
        if let Ok(pid) = i32::try_from(r.child.id()) {
            if let Err(e) = kill(Pid::from_raw(pid), Signal::SIGTERM) {
                tracing::warn!("cannot send SIGTERM to node{}: {e}", r.id);
            }
        }
    }
    let deadline = tokio::time::Instant::now() + STOP_GRACE;
    let mut hurried = false;
    loop {
        reap(running);
        if running.is_empty() {
            return true;
        }
        if hurried || tokio::time::Instant::now() >= deadline {
            break;
        }
        let wake = deadline.min(tokio::time::Instant::now() + Duration::from_millis(100));
        tokio::select! {
            _ = tokio::time::sleep_until(wake) => {}
            _ = interrupt.recv() => hurried = true,
            _ = terminate.recv() => hurried = true,
        }
    }
    for r in running.iter_mut() {
        status_line(&format!(
            "node{} is still running{}; killing it",
            r.id,
            if hurried {
                " (second signal)".to_owned()
            } else {
                format!(" after {} s", STOP_GRACE.as_secs())
            }
        ));
        let _ = r.child.kill();
        match r.child.wait() {
            Ok(status) => status_line(&format!(
                "node{} exited with {}",
                r.id,
                describe_status(status)
            )),
            Err(e) => tracing::warn!("cannot wait for node{}: {e}", r.id),
        }
    }
    running.clear();
    false
}

/// Asks every member `srvr` each [`POLL_INTERVAL`] and prints a line whenever
/// the set of members answering leader changes.
async fn watch_leader(members: Vec<Member>) {
    let start = tokio::time::Instant::now() + POLL_INTERVAL;
    let mut tick = tokio::time::interval_at(start, POLL_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let single = members.len() == 1;
    let mut last: Option<Vec<usize>> = None;
    loop {
        tick.tick().await;
        let polls: Vec<_> = members
            .iter()
            .map(|m| tokio::spawn(srvr_mode(m.host.clone(), m.client_port)))
            .collect();
        let mut leaders = Vec::new();
        for (m, poll) in members.iter().zip(polls) {
            if let Ok(Some(mode)) = poll.await {
                if mode == "leader" || (single && mode == "standalone") {
                    leaders.push(m.id);
                }
            }
        }
        if last.as_ref() != Some(&leaders) {
            status_line(&describe_leaders(&members, &leaders));
            last = Some(leaders);
        }
    }
}

/// The `Mode:` a member reports to `srvr`, or None when it does not answer
/// within [`POLL_TIMEOUT`].
pub async fn srvr_mode(host: String, port: u16) -> Option<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect((host.as_str(), port))
            .await
            .ok()?;
        stream.write_all(b"srvr").await.ok()?;
        let mut reply = Vec::new();
        (&mut stream)
            .take(64 * 1024)
            .read_to_end(&mut reply)
            .await
            .ok()?;
        parse_mode(&String::from_utf8_lossy(&reply)).map(str::to_owned)
    };
    tokio::time::timeout(POLL_TIMEOUT, exchange)
        .await
        .ok()
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(nodes: usize, base_port: u16) -> EnsembleArgs {
        EnsembleArgs {
            nodes,
            dir: PathBuf::from("unused"),
            base_port,
            host: "127.0.0.1".into(),
            tick_time: 2000,
        }
    }

    #[test]
    fn ports_follow_zookeepers_single_host_layout() {
        let m = members(&args(3, 2181)).unwrap();
        assert_eq!(
            connect_string(&m),
            "127.0.0.1:2181,127.0.0.1:2182,127.0.0.1:2183"
        );
        assert_eq!(m[0].server_line(), "server.1=127.0.0.1:2888:3888");
        assert_eq!(m[2].server_line(), "server.3=127.0.0.1:2890:3890");
    }

    #[test]
    fn even_or_oversized_ensembles_and_overflowing_ports_are_refused() {
        for n in [0, 2, 4, 8, 9] {
            assert!(matches!(
                members(&args(n, 2181)),
                Err(EnsembleError::Invalid(_))
            ));
        }
        for n in [1, 3, 5, 7] {
            assert_eq!(members(&args(n, 2181)).unwrap().len(), n);
        }
        assert!(members(&args(7, 65535 - 1713)).is_ok());
        assert!(members(&args(7, 65535 - 1712)).is_err());
        assert!(members(&args(3, 0)).is_err());
    }

    #[test]
    fn zoo_cfg_is_accepted_by_the_config_parser() {
        let m = members(&args(5, 2181)).unwrap();
        let text = zoo_cfg(&m, &m[1], "/tmp/x/node2/data", 2000);
        let mut props = crate::config::parse_properties(&text);
        props.insert("myid".into(), "2".into());
        let c = crate::config::Config::from_properties(&props).unwrap();
        assert_eq!(c.client_port, 2182);
        assert_eq!(c.servers.len(), 5);
        assert_eq!(c.servers[&5].election_port, 3892);
        assert_eq!(c.init_limit, Some(10));
        assert!(c.is_quorum());
    }

    #[test]
    fn mode_and_leader_lines() {
        let reply = "Zookeeper version: 3.9.5\nZxid: 0x0\nMode: follower\nNode count: 4\n";
        assert_eq!(parse_mode(reply), Some("follower"));
        assert_eq!(parse_mode("imok"), None);
        let m = members(&args(3, 2181)).unwrap();
        assert_eq!(describe_leaders(&m, &[]), "no leader");
        assert_eq!(
            describe_leaders(&m, &[2]),
            "leader is node2 (127.0.0.1:2182)"
        );
    }
}
