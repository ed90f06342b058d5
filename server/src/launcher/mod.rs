//! `zkd ensemble`: a local ZooKeeper-style ensemble to try zkd with. For each
//! member `i` it writes `DIR/node{i}/zoo.cfg` and `DIR/node{i}/data/myid`, starts
//! `zkd serve --config DIR/node{i}/zoo.cfg` as a child process, re-prints the
//! child's output prefixed `[node{i}] `, reports which member leads (by asking each
//! one `srvr`), and stops them all on SIGINT or SIGTERM.
//!
//! The connect string (stdout) and the status lines (stderr) are this command's
//! product, so they are written as plain lines with `std::io::Write`; problems
//! that stop the command go through tracing like the rest of zkd.

use control::{Control, Ensemble, InForce};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// The largest ensemble the command runs.
pub const MAX_NODES: usize = 7;
/// First quorum port = base port + this (2181 + 707 = 2888, ZooKeeper's default).
pub const QUORUM_OFFSET: u32 = 707;
/// First election port = base port + this (2181 + 1707 = 3888, ZooKeeper's default).
pub const ELECTION_OFFSET: u32 = 1707;
/// First AdminServer port = base port + this (2181 + 5899 = 8080, ZooKeeper's default).
pub const ADMIN_OFFSET: u32 = 5899;
/// How long members get to stop after SIGTERM before they are killed.
pub const STOP_GRACE: Duration = Duration::from_secs(10);
/// How often each member is asked `srvr`.
pub const POLL_INTERVAL: Duration = Duration::from_secs(1);
/// Bound on one `srvr` exchange (connect, write, read to EOF).
pub const POLL_TIMEOUT: Duration = Duration::from_millis(500);
/// Name of the file in `DIR/node{i}/` holding the pid of the last member started there.
pub const PID_FILE: &str = "zkd.pid";
/// Default fault API port = base port + this (2181 + 2700 = 4881).
pub const FAULT_API_OFFSET: u32 = 2700;
/// Name of the file in `DIR` holding the fault API's URL while the ensemble runs.
pub const FAULT_API_FILE: &str = "fault-api";

const LAYOUT_HELP: &str = "\
Files, for member i = 1..N (then the observers, N+1..):
  DIR/node{i}/zoo.cfg      its configuration (rewritten when the flags change)
  DIR/node{i}/data/        its dataDir; data/myid holds i
  DIR/node{i}/zkd.pid      pid of the member last started there
  DIR/fault-api            URL of the fault API while the ensemble runs
A rerun in the same DIR keeps every data directory; a DIR made with another --nodes is refused.

Ports, for member i and base port B (--base-port):
  client    B + i - 1      2181, 2182, 2183 ...
  quorum    B + 706 + i    2888, 2889, 2890 ...
  election  B + 1706 + i   3888, 3889, 3890 ...
  admin     B + 5898 + i   8080, 8081, 8082 ... (AdminServer: /commands)
  fault API B + 2700       4881 (--fault-port), on 127.0.0.1 only
Two ensembles whose base ports differ by 7 to 700 use disjoint ports.

The connect string (host:port,...) is printed on stdout. Members' output goes to stderr prefixed
[node{i}], with a line whenever the leader changes (each member is asked `srvr` every second).
Ctrl-C or SIGTERM stops every member: SIGTERM, then SIGKILL for those still running after 10 s
(a second Ctrl-C kills at once).

Faults, for testing applications (this is a test ensemble: every member takes fault commands):
  zkd fault --dir DIR VERB [ARGS], or POST /faults {\"verb\": VERB, \"args\": [ARGS]} to the fault API.
  kill N|leader, restart N, pause N|leader, resume N, partition A... / B...,
  partition-one-way A... / B..., isolate N|leader, cut-clients N, close-connections N,
  slow-disk N MS, disk-error N, expire-session 0xID, heal, status (also GET /status);
  with --reconfig, remove N|leader and add N change the membership by reconfig (heal adds back).";

/// Flags of `zkd ensemble`.
#[derive(clap::Args, Clone, Debug)]
#[command(after_help = LAYOUT_HELP)]
pub struct EnsembleArgs {
    /// Number of members: an odd number from 1 to 7 (3 or 5 for a real ensemble).
    #[arg(long)]
    pub nodes: usize,
    /// Observers besides them (members N+1.. with `:observer` lines): they
    /// serve clients without a vote.
    #[arg(long, default_value_t = 0)]
    pub observers: usize,
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
    /// Port of the fault API on 127.0.0.1 (default: base port + 2700).
    #[arg(long)]
    pub fault_port: Option<u16>,
    /// Enable reconfig (`reconfigEnabled=true`): clients may change the
    /// membership as the super user (password in DIR/super-password), the
    /// fault API's `remove` and `add` verbs do, and a rerun keeps the
    /// membership the members last recorded.
    #[arg(long)]
    pub reconfig: bool,
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
    /// Its AdminServer's port.
    pub admin_port: u16,
    /// An observer (`--observers`): it serves without a vote.
    pub observer: bool,
}

impl Member {
    /// `host:clientPort`.
    pub fn client_address(&self) -> String {
        format!("{}:{}", self.host, self.client_port)
    }

    /// Its `server.N` line.
    pub fn server_line(&self) -> String {
        let role = if self.observer { ":observer" } else { "" };
        format!(
            "server.{}={}:{}:{}{role}",
            self.id, self.host, self.quorum_port, self.election_port
        )
    }

    /// Its `server.N` line as 3.5+ writes it, role and client address
    /// included, so that `/zookeeper/config` gives clients (Curator's
    /// EnsembleTracker) every member's client address.
    pub fn dynamic_server_line(&self) -> String {
        let role = if self.observer {
            "observer"
        } else {
            "participant"
        };
        format!(
            "server.{}={}:{}:{}:{role};{}",
            self.id,
            self.host,
            self.quorum_port,
            self.election_port,
            self.client_address()
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
    if args.observers > 0 && n == 1 {
        return Err(invalid(
            "--observers: observers need an ensemble of 3 or more to follow",
        ));
    }
    if n + args.observers > MAX_NODES {
        return Err(invalid(format!(
            "--nodes {n} --observers {}: at most {MAX_NODES} members in all",
            args.observers
        )));
    }
    let n = n + args.observers;
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
    let highest = base + ADMIN_OFFSET + n as u32 - 1;
    if base == 0 || highest > u32::from(u16::MAX) {
        return Err(invalid(format!(
            "--base-port {base}: must be from 1 to {} so that every port fits \
             (the highest is base + {})",
            u32::from(u16::MAX) - ADMIN_OFFSET - (n as u32 - 1),
            ADMIN_OFFSET + n as u32 - 1
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
                admin_port: port(base + ADMIN_OFFSET + i - 1),
                observer: id > args.nodes,
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
    let mut text = static_part(members.len(), me, data_dir, tick_time_ms);
    text.push_str(&format!(
        "clientPort={port}\nclientPortAddress={host}\n",
        port = me.client_port,
        host = me.host,
    ));
    for m in members {
        text.push_str(&m.server_line());
        text.push('\n');
    }
    text
}

/// The `zoo.cfg` of member `me` with `--reconfig`: its client address is in
/// its server line, and when it has recorded a membership (`recorded`, a
/// `dynamicConfigFile=` line), that stands instead of the flags' members.
pub fn zoo_cfg_with_reconfig(
    members: &[Member],
    me: &Member,
    data_dir: &str,
    tick_time_ms: u64,
    super_user: &SuperUser,
    recorded: Option<&str>,
) -> String {
    let mut text = static_part(members.len(), me, data_dir, tick_time_ms);
    text.push_str(&super_user.zoo_cfg_lines());
    match recorded {
        Some(line) => {
            text.push_str(line);
            text.push('\n');
        }
        None => {
            for m in members {
                text.push_str(&m.dynamic_server_line());
                text.push('\n');
            }
        }
    }
    text
}

/// Every key but the client address and the membership.
fn static_part(n: usize, me: &Member, data_dir: &str, tick_time_ms: u64) -> String {
    format!(
        "# Member {id} of a {n}-member ensemble, written by `zkd ensemble`.\n\
         # A rerun rewrites this file (the data directory is kept). myid is in dataDir.\n\
         tickTime={tick_time_ms}\n\
         initLimit=10\n\
         syncLimit=5\n\
         dataDir={data_dir}\n\
         4lw.commands.whitelist=*\n\
         admin.serverAddress={host}\n\
         admin.serverPort={admin}\n\
         # A test ensemble: the member takes `zkd fault` commands (never set this in production).\n\
         zkd.faults.enable=true\n",
        id = me.id,
        host = me.host,
        admin = me.admin_port,
    )
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

/// The fault API's port: `--fault-port`, or base port + [`FAULT_API_OFFSET`].
pub fn fault_port(args: &EnsembleArgs) -> Result<u16, EnsembleError> {
    if let Some(port) = args.fault_port {
        return Ok(port);
    }
    u16::try_from(u32::from(args.base_port) + FAULT_API_OFFSET).map_err(|_| {
        invalid(format!(
            "--base-port {}: the fault API's port (base + {FAULT_API_OFFSET}) does not fit; \
             give --fault-port",
            args.base_port
        ))
    })
}

/// Refuses ports another process listens on, before anything is written.
fn check_ports_free(members: &[Member], fault_port: u16) -> Result<(), EnsembleError> {
    if let Err(e) = std::net::TcpListener::bind(("127.0.0.1", fault_port)) {
        return Err(invalid(format!(
            "fault API port 127.0.0.1:{fault_port} is not available ({e}); is an ensemble \
             already running with this --base-port? Stop it, or choose another --base-port \
             or --fault-port"
        )));
    }
    for m in members {
        for (what, port) in [
            ("client", m.client_port),
            ("quorum", m.quorum_port),
            ("election", m.election_port),
            ("admin", m.admin_port),
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

/// A checked ensemble directory, ready to start.
#[derive(Clone, Debug)]
pub struct Prepared {
    /// The absolute directory.
    pub dir: PathBuf,
    /// The members the flags describe.
    pub members: Vec<Member>,
    /// The fault API's port.
    pub fault_port: u16,
    /// With `--reconfig`, the super user who may reconfigure.
    pub super_user: Option<SuperUser>,
}

/// Checks `args.dir` against the flags and creates or updates every member's
/// files, never removing any.
pub fn prepare(args: &EnsembleArgs) -> Result<Prepared, EnsembleError> {
    let members = members(args)?;
    let fault_port = fault_port(args)?;
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
            "{} holds an ensemble of {} members ({}), not {}: rerun with --nodes {} (with \
             --observers, the two adding up to that), or choose another --dir (nothing was changed)",
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
    check_ports_free(&members, fault_port)?;
    std::fs::create_dir_all(dir).map_err(|e| io_error(dir, e))?;
    let dir = std::fs::canonicalize(dir).map_err(|e| io_error(dir, e))?;
    let super_user = match args.reconfig {
        true => Some(SuperUser::load_or_create(&dir)?),
        false => None,
    };
    for m in &members {
        write_member_files(&dir, m, &members, args.tick_time, super_user.as_ref())?;
    }
    Ok(Prepared {
        dir,
        members,
        fault_port,
        super_user,
    })
}

/// Member `m`'s dataDir, myid and zoo.cfg (rewritten only when it changes).
fn write_member_files(
    dir: &Path,
    m: &Member,
    members: &[Member],
    tick_time: u64,
    super_user: Option<&SuperUser>,
) -> Result<(), EnsembleError> {
    let data = node_dir(dir, m.id).join("data");
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
    let cfg = node_dir(dir, m.id).join("zoo.cfg");
    let old = std::fs::read_to_string(&cfg).ok();
    let text = match super_user {
        Some(user) => {
            let recorded = old.as_deref().and_then(|t| recorded_dynamic_file(t, m.id));
            zoo_cfg_with_reconfig(members, m, data_str, tick_time, user, recorded)
        }
        None => zoo_cfg(members, m, data_str, tick_time),
    };
    if old.as_deref() != Some(text.as_str()) {
        write_whole(&cfg, &text).map_err(|e| io_error(&cfg, e))?;
    }
    Ok(())
}

/// Writes `text` to `path` aside and renames it in, so that a reader (a test
/// polling for the fault API's address, a member reading its zoo.cfg) never
/// sees the file empty or half written.
fn write_whole(path: &Path, text: &str) -> std::io::Result<()> {
    let mut aside = path.as_os_str().to_owned();
    aside.push(".partial");
    std::fs::write(&aside, text)?;
    std::fs::rename(&aside, path)
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

mod control;
mod ensemble_reconfig;
pub mod fault_cli;
mod fault_verbs;
mod http;
mod membership_verbs;
mod reconfig_client;
mod supervise;
pub use ensemble_reconfig::{recorded_dynamic_file, restore_left_out, SuperUser, PASSWORD_FILE};
pub use supervise::run;

#[cfg(test)]
mod tests;
