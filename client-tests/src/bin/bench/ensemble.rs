//! `zkd-bench --members 3`: an Apache ZooKeeper ensemble, then a zkd
//! ensemble of the same size and tick, each measured alone on this machine
//! (each phase after its untimed warm-up):
//!
//! ```text
//!   write ─> read ─> create ─> writes at equal load ─> failover: steady writes ─ kill -9 leader ─> writes resume
//!   (session s on member s % n only)                   (every session's connect string names every member)
//! ```
//!
//! The failover stall is measured from the writers' side: (i) the longest
//! gap between two successful writes, and (ii) the time from the kill to the
//! first success of a write *sent* after the kill (a write sent before it may
//! have been committed already and says nothing about the new leader). Every
//! wait is bounded; a stall longer than [`RECOVERY_LIMIT`] is reported as such.

use crate::{
    memory, phase_table, populate, rss_kib, run_phase_at, run_phases, Args, Phase, PhaseResult,
    ServerRun,
};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use zkd_client_tests::ensemble::Ensemble;
use zkd_client_tests::oracle::BENCH_HEAP;
use zkd_client_tests::oracle_ensemble::ZooKeeperEnsemble;
use zkd_client_tests::persistent;
use zkd_client_tests::process::four_letter_word;
use zookeeper_client as zk;

/// Bound on the stall: past it the run reports "none within" and moves on.
const RECOVERY_LIMIT: Duration = Duration::from_secs(60);
/// Steady writes measured after the first post-kill success.
const AFTER_RECOVERY: Duration = Duration::from_secs(2);
/// Bound on one write (a request to a dead member may never be answered).
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);
/// Session timeout of the failover writers: ZooKeeper's maximum for a 500 ms
/// tick (20 ticks), so no session expires during an ordinary failover.
const SESSION_TIMEOUT: Duration = Duration::from_secs(10);
/// Tries at landing a failover session on the member it is meant for.
const PLACEMENT_TRIES: usize = 30;

/// What the benchmark needs from either ensemble.
pub(super) trait Cluster {
    fn ports(&self) -> Vec<u16>;
    /// The members' client addresses.
    fn addrs(&self) -> Vec<String> {
        self.ports()
            .iter()
            .map(|p| format!("127.0.0.1:{p}"))
            .collect()
    }
    /// The members' process ids (of those running).
    fn pids(&self) -> Vec<u32>;
    fn leader(&self) -> Option<usize>;
    fn kill9(&mut self, i: usize);
    /// Starts member `i` again on its ports and data (killing it first).
    fn restart(&mut self, i: usize);
    /// Waits until every member serves.
    fn wait_serving(&mut self);
    /// Kills member `i` (-9) and deletes everything it stored (its id
    /// stays: a disk replaced); [`restart`](Cluster::restart) starts it.
    fn wipe(&mut self, i: usize);
    /// Every member's log so far.
    fn logs(&self) -> String;
}

impl Cluster for Ensemble {
    fn ports(&self) -> Vec<u16> {
        self.members.iter().map(|m| m.port).collect()
    }
    fn pids(&self) -> Vec<u32> {
        self.members.iter().filter_map(|m| m.pid()).collect()
    }
    fn leader(&self) -> Option<usize> {
        Ensemble::leader(self)
    }
    fn kill9(&mut self, i: usize) {
        self.members[i].kill9();
    }
    fn restart(&mut self, i: usize) {
        self.members[i].restart();
    }
    fn wait_serving(&mut self) {
        self.wait_until_serving(&(0..self.members.len()).collect::<Vec<_>>());
    }
    fn wipe(&mut self, i: usize) {
        self.members[i].kill9();
        self.members[i].wipe_data();
    }
    fn logs(&self) -> String {
        Ensemble::logs(self)
    }
}

impl Cluster for ZooKeeperEnsemble {
    fn ports(&self) -> Vec<u16> {
        self.members.iter().map(|m| m.port).collect()
    }
    fn pids(&self) -> Vec<u32> {
        self.members.iter().filter_map(|m| m.pid()).collect()
    }
    fn leader(&self) -> Option<usize> {
        ZooKeeperEnsemble::leader(self)
    }
    fn kill9(&mut self, i: usize) {
        ZooKeeperEnsemble::kill9(self, i);
    }
    fn restart(&mut self, i: usize) {
        ZooKeeperEnsemble::restart(self, i);
    }
    fn wait_serving(&mut self) {
        self.wait_until_serving(&(0..self.members.len()).collect::<Vec<_>>());
    }
    fn wipe(&mut self, i: usize) {
        let member = &mut self.members[i];
        member.kill9();
        let stored = member.data_dir().join("version-2");
        if stored.exists() {
            std::fs::remove_dir_all(&stored).expect("wipe ZooKeeper's version-2");
        }
    }
    fn logs(&self) -> String {
        ZooKeeperEnsemble::logs(self)
    }
}

/// The failover stall as the writers saw it.
struct Failover {
    /// Successful writes per second in the second before the kill.
    rate_before: f64,
    /// Longest time between two successful writes, from a second before the
    /// kill to the end of the run.
    longest_gap: Duration,
    /// Kill to the first success of a write sent after the kill.
    first_write: Option<Duration>,
    /// Kill to a surviving member's `srvr` saying `Mode: leader`.
    new_leader: Option<Duration>,
    /// Sessions that expired and were replaced during the run.
    expired: usize,
    /// Writer sessions per member at the start (the leader's included).
    placement: Vec<usize>,
    /// The member killed.
    killed: usize,
}

/// Memory and a follower's restart over a large tree.
struct Rejoin {
    /// Resident bytes `--nodes` new znodes added per znode, mean of the members.
    rss_per_znode: f64,
    /// A follower's kill -9 -> restarted and reading every znode, ms.
    restart_ms: f64,
}

/// One ensemble's results.
struct EnsembleRun {
    phases: ServerRun,
    /// setData at the equal load ([`EQUAL_LOAD`] of ZooKeeper's write rate), and that rate.
    equal_load: (f64, PhaseResult),
    failover: Failover,
    rejoin: Rejoin,
}

/// Runs every phase on a ZooKeeper ensemble, then on a zkd ensemble, and
/// prints both with zkd/ZooKeeper ratios. ZooKeeper runs first, so that
/// zkd's equal-load phase can offer the load ZooKeeper's had.
pub async fn run(args: &Args) {
    let theirs = {
        let mut zk = tokio::task::block_in_place(|| {
            ZooKeeperEnsemble::start_sized(args.members, 500, &[], BENCH_HEAP)
        });
        measure(&mut zk, args, None).await
    };
    let ours = {
        let mut zkd = tokio::task::block_in_place(|| Ensemble::start(args.members));
        measure(&mut zkd, args, Some(theirs.equal_load.0)).await
    };
    print(&ours, &theirs, args);
}

/// The share of ZooKeeper's write rate both servers are offered in the
/// equal-load phase: below what either can take, so neither queues up to
/// its limit, and their latencies compare at the same work.
const EQUAL_LOAD: f64 = 0.8;

/// Every phase on `cluster`; the equal-load phase offers `equal_load` ops/s,
/// or [`EQUAL_LOAD`] of this cluster's own write rate if `None`.
async fn measure(cluster: &mut impl Cluster, args: &Args, equal_load: Option<f64>) -> EnsembleRun {
    let addrs = cluster.addrs();
    let pids = cluster.pids();
    let phases = run_phases(&addrs, &pids, args).await;
    let rate = equal_load.unwrap_or(EQUAL_LOAD * phases.write.throughput());
    let paced = run_phase_at(&addrs, &pids, args, Phase::Write, Some(rate)).await;
    let failover = failover(cluster, args).await;
    let rejoin = rejoin(cluster, args, failover.killed).await;
    EnsembleRun {
        phases,
        equal_load: (rate, paced),
        failover,
        rejoin,
    }
}

/// After the failover: the killed member restarted and every member
/// serving, `--nodes` znodes are created; then each member's memory is
/// read, and a follower is killed -9 and restarted, timed until a read
/// through it finds every znode.
async fn rejoin(cluster: &mut impl Cluster, args: &Args, killed: usize) -> Rejoin {
    tokio::task::block_in_place(|| {
        cluster.restart(killed);
        cluster.wait_serving();
    });
    let ports = cluster.ports();
    let pids = cluster.pids();
    let rss = |pids: &[u32]| pids.iter().map(|p| rss_kib(*p)).collect::<Vec<_>>();
    let before = rss(&pids);
    populate(&format!("127.0.0.1:{}", ports[0]), args.nodes, args.payload).await;
    let added: u64 = rss(&pids)
        .iter()
        .zip(&before)
        .map(|(after, before)| after.saturating_sub(*before))
        .sum();
    let rss_per_znode = added as f64 * 1024.0 / pids.len().max(1) as f64 / args.nodes.max(1) as f64;
    let leader = tokio::task::block_in_place(|| cluster.leader()).expect("a leader");
    let follower = (0..ports.len()).find(|i| *i != leader).expect("a follower");
    let addr = format!("127.0.0.1:{}", ports[follower]);
    let restart_ms = memory::restart(&addr, || cluster.restart(follower)).await;
    Rejoin {
        rss_per_znode,
        restart_ms,
    }
}

/// The connect string of every member.
fn connect_string(ports: &[u16]) -> String {
    ports
        .iter()
        .map(|p| format!("127.0.0.1:{p}"))
        .collect::<Vec<_>>()
        .join(",")
}

async fn try_connect(connect: &str) -> Option<zk::Client> {
    let fut = zk::Client::connector()
        .with_session_timeout(SESSION_TIMEOUT)
        .connect(connect);
    tokio::time::timeout(SESSION_TIMEOUT, fut).await.ok()?.ok()
}

/// The member whose `cons` lists `session`, if any.
fn member_of(ports: &[u16], session: zk::SessionId) -> Option<usize> {
    let needle = format!("sid=0x{:x}", session.0);
    ports
        .iter()
        .position(|p| four_letter_word(*p, "cons").is_ok_and(|c| c.contains(&needle)))
}

/// A session on every member's connect string that the client placed on
/// member `want` (the client picks a random member; this retries, bounded,
/// so the load is spread evenly whatever the dice say), and the member it
/// is on.
async fn placed_client(ports: &[u16], want: usize) -> (zk::Client, Option<usize>) {
    let connect = connect_string(ports);
    let mut last = None;
    for _ in 0..PLACEMENT_TRIES {
        let Some(client) = try_connect(&connect).await else {
            continue;
        };
        let id = client.session_id();
        let on = tokio::task::block_in_place(|| member_of(ports, id));
        if on == Some(want) {
            return (client, on);
        }
        last = Some((client, on));
    }
    last.expect("no session could be opened for the failover phase")
}

/// Successful writes: (sent, answered).
type Acks = Arc<Mutex<Vec<(Instant, Instant)>>>;

/// One writer: setData on its own node, one request in flight, until `stop`.
/// A session that expires is replaced by a new one on the same connect string.
async fn writer(
    mut client: zk::Client,
    connect: String,
    path: String,
    acks: Acks,
    stop: Arc<AtomicBool>,
    expired: Arc<AtomicUsize>,
) {
    let data = vec![7u8; 100];
    while !stop.load(Ordering::Relaxed) {
        let sent = Instant::now();
        match tokio::time::timeout(WRITE_TIMEOUT, client.set_data(&path, &data, None)).await {
            Ok(Ok(_)) => acks.lock().expect("acks lock").push((sent, Instant::now())),
            Ok(Err(zk::Error::SessionExpired | zk::Error::ClientClosed)) => {
                expired.fetch_add(1, Ordering::Relaxed);
                while !stop.load(Ordering::Relaxed) {
                    if let Some(c) = try_connect(&connect).await {
                        client = c;
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
            // Connection loss while the client finds a member that serves.
            _ => tokio::time::sleep(Duration::from_millis(5)).await,
        }
    }
}

/// The steady write load: one task per session.
struct Writers {
    tasks: Vec<tokio::task::JoinHandle<()>>,
    acks: Acks,
    stop: Arc<AtomicBool>,
    expired: Arc<AtomicUsize>,
    placement: Vec<usize>,
}

/// Opens `args.sessions` sessions spread over the members and starts writing.
async fn start_writers(ports: &[u16], args: &Args) -> Writers {
    let connect = connect_string(ports);
    let setup = try_connect(&connect).await.expect("connect for failover");
    let _ = setup.create("/failover", b"", &persistent()).await;
    let mut w = Writers {
        tasks: Vec::new(),
        acks: Arc::default(),
        stop: Arc::default(),
        expired: Arc::default(),
        placement: vec![0; ports.len()],
    };
    for s in 0..args.sessions {
        let (client, on) = placed_client(ports, s % ports.len()).await;
        if let Some(m) = on {
            w.placement[m] += 1;
        }
        let path = format!("/failover/w{s}");
        let _ = client.create(&path, b"", &persistent()).await;
        w.tasks.push(tokio::spawn(writer(
            client,
            connect.clone(),
            path,
            w.acks.clone(),
            w.stop.clone(),
            w.expired.clone(),
        )));
    }
    w
}

/// Kills the leader; returns which member and when it was killed, and how long until another
/// member led, once that happened and a write sent after the kill succeeded
/// (or [`RECOVERY_LIMIT`] passed).
async fn kill_leader(
    cluster: &mut impl Cluster,
    acks: &Acks,
) -> (usize, Instant, Option<Duration>) {
    let leader =
        tokio::task::block_in_place(|| cluster.leader()).expect("a leader before the kill");
    let killed_at = Instant::now();
    tokio::task::block_in_place(|| cluster.kill9(leader));
    let mut new_leader = None;
    let mut written = false;
    while killed_at.elapsed() < RECOVERY_LIMIT && (new_leader.is_none() || !written) {
        if new_leader.is_none() && tokio::task::block_in_place(|| cluster.leader()).is_some() {
            new_leader = Some(killed_at.elapsed());
        }
        written = first_after(&acks.lock().expect("acks lock"), killed_at).is_some();
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    (leader, killed_at, new_leader)
}

async fn failover(cluster: &mut impl Cluster, args: &Args) -> Failover {
    let writers = start_writers(&cluster.ports(), args).await;
    tokio::time::sleep(Duration::from_secs(args.warmup)).await;
    let (killed, killed_at, new_leader) = kill_leader(cluster, &writers.acks).await;
    tokio::time::sleep(AFTER_RECOVERY).await;
    let end = Instant::now();
    writers.stop.store(true, Ordering::Relaxed);
    for task in writers.tasks {
        // Each writer ends within WRITE_TIMEOUT (or one connect) of `stop`.
        let _ = task.await;
    }
    let acks = writers.acks.lock().expect("acks lock").clone();
    let second_before = killed_at - Duration::from_secs(1);
    Failover {
        rate_before: acks
            .iter()
            .filter(|(_, done)| (second_before..killed_at).contains(done))
            .count() as f64,
        longest_gap: longest_gap(&acks, second_before, end),
        first_write: first_after(&acks, killed_at),
        new_leader,
        expired: writers.expired.load(Ordering::Relaxed),
        placement: writers.placement,
        killed,
    }
}

/// Kill to the first success of a write sent at or after the kill.
fn first_after(acks: &[(Instant, Instant)], killed_at: Instant) -> Option<Duration> {
    acks.iter()
        .filter(|(sent, _)| *sent >= killed_at)
        .map(|(_, done)| done.duration_since(killed_at))
        .min()
}

/// The longest time between consecutive write successes in `from..end`
/// (`from` and `end` count as successes, so writes that never resume show as
/// one long gap).
fn longest_gap(acks: &[(Instant, Instant)], from: Instant, end: Instant) -> Duration {
    let mut done: Vec<Instant> = acks
        .iter()
        .map(|(_, d)| *d)
        .filter(|d| (from..end).contains(d))
        .collect();
    done.push(from);
    done.push(end);
    done.sort();
    done.windows(2)
        .map(|w| w[1].duration_since(w[0]))
        .max()
        .unwrap_or_default()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn ratio_row(what: &str, ours: f64, theirs: f64) {
    println!(
        "| {what:<50} | {ours:>9.1} | {theirs:>9.1} | {:>6.2}x |",
        ours / theirs
    );
}

/// A stall row; `None` means no recovery within [`RECOVERY_LIMIT`].
fn stall_row(what: &str, ours: Option<Duration>, theirs: Option<Duration>) {
    let show = |d: Option<Duration>| {
        d.map_or(format!(">{}", ms(RECOVERY_LIMIT)), |d| {
            format!("{:.1}", ms(d))
        })
    };
    let ratio = match (ours, theirs) {
        (Some(o), Some(t)) => format!("{:.2}x", ms(o) / ms(t)),
        _ => "-".into(),
    };
    println!(
        "| {what:<50} | {:>9} | {:>9} | {ratio:>7} |",
        show(ours),
        show(theirs)
    );
}

/// Throughput, latency and CPU per op of one phase, zkd beside ZooKeeper.
fn phase_ratio_rows(op: &str, ours: &PhaseResult, theirs: &PhaseResult) {
    ratio_row(
        &format!("{op} throughput (ops/s)"),
        ours.throughput(),
        theirs.throughput(),
    );
    ratio_row(
        &format!("{op} p50 latency (ms)"),
        ours.pct_ms(0.5),
        theirs.pct_ms(0.5),
    );
    ratio_row(
        &format!("{op} p99 latency (ms)"),
        ours.pct_ms(0.99),
        theirs.pct_ms(0.99),
    );
    ratio_row(
        &format!("{op} server CPU per op (us, all members)"),
        ours.cpu_us_per_op(),
        theirs.cpu_us_per_op(),
    );
}

fn print(ours: &EnsembleRun, theirs: &EnsembleRun, args: &Args) {
    phase_table(&ours.phases, &theirs.phases);
    println!();
    println!(
        "| {} members: zkd vs ZooKeeper                         |       zkd | zookeeper |   ratio |",
        args.members
    );
    println!(
        "|----------------------------------------------------|----------:|----------:|--------:|"
    );
    for (op, o, t) in [
        ("write", &ours.phases.write, &theirs.phases.write),
        ("read", &ours.phases.read, &theirs.phases.read),
        ("create", &ours.phases.create, &theirs.phases.create),
    ] {
        phase_ratio_rows(op, o, t);
    }
    let ((_, o), (_, t)) = (&ours.equal_load, &theirs.equal_load);
    ratio_row("write at equal load: ops/s", o.throughput(), t.throughput());
    ratio_row(
        "write at equal load: p50 latency (ms)",
        o.pct_ms(0.5),
        t.pct_ms(0.5),
    );
    ratio_row(
        "write at equal load: p99 latency (ms)",
        o.pct_ms(0.99),
        t.pct_ms(0.99),
    );
    ratio_row(
        "write at equal load: p99.9 latency (ms)",
        o.pct_ms(0.999),
        t.pct_ms(0.999),
    );
    ratio_row(
        "write at equal load: server CPU per op (us)",
        o.cpu_us_per_op(),
        t.cpu_us_per_op(),
    );
    let (o, t) = (&ours.failover, &theirs.failover);
    ratio_row(
        "failover: writes/s before the kill",
        o.rate_before,
        t.rate_before,
    );
    stall_row(
        "failover: longest gap between writes (ms)",
        Some(o.longest_gap),
        Some(t.longest_gap),
    );
    stall_row(
        "failover: kill -> first new write acked (ms)",
        o.first_write,
        t.first_write,
    );
    stall_row(
        "failover: kill -> new leader serving (ms)",
        o.new_leader,
        t.new_leader,
    );
    let (r, q) = (&ours.rejoin, &theirs.rejoin);
    ratio_row(
        "RSS per znode added, per member (B)",
        r.rss_per_znode,
        q.rss_per_znode,
    );
    ratio_row(
        "follower kill -9 -> every znode readable (ms)",
        r.restart_ms,
        q.restart_ms,
    );
    println!();
    println!(
        "write at equal load: {:.0} ops/s offered to both ({:.0}% of ZooKeeper's write rate)",
        theirs.equal_load.0,
        EQUAL_LOAD * 100.0
    );
    println!(
        "rejoin: {} znodes of {} B created after the failover (the killed leader restarted first), then a follower killed -9",
        args.nodes, args.payload
    );
    println!(
        "failover: {} sessions, 1 write in flight each, every member in each connect string; sessions per member (leader's included) zkd {:?}, zookeeper {:?}; sessions expired: zkd {}, zookeeper {}",
        args.sessions, o.placement, t.placement, o.expired, t.expired
    );
}
