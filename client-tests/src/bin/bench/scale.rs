//! `zkd-bench --scale 20000,200000,2000000`: issue 52's scale scenario. For
//! each size, a fresh 3-member ZooKeeper ensemble (4 GiB heaps), then a fresh
//! zkd ensemble, each alone on the machine, go through the same steps:
//!
//! ```text
//!   load SIZE znodes under 1,000 parents ─> --watches watches on one follower
//!   ─> --idle-sessions idle sessions over the members ─> writes while members snapshot
//!   ─> a follower killed -9 and restarted ─> a follower wiped and restarted: SNAP rejoin, writes on the leader
//! ```
//!
//! Every row is printed with zkd / ZooKeeper per size, then drawn against the
//! size as an SVG per row in `--svg-dir`, beside each run's member logs.
//! Sizes above `--zookeeper-up-to` run zkd alone (three JVMs cannot hold
//! them on one machine).

use super::ensemble::Cluster;
use super::{cpu_secs, fanout, memory, rss_kib, run_phase, svg, Args, Phase};
use hdrhistogram::Histogram;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use zkd_client_tests::ensemble::Ensemble;
use zkd_client_tests::oracle_ensemble::ZooKeeperEnsemble;
use zkd_client_tests::{connect, persistent, ServerOptions};
use zookeeper_client as zk;

/// Parents the znodes are spread under, as the issue's tree has them.
const PARENTS: usize = 1_000;
/// Creates in flight during the load: 8 sessions over the members, 8 each.
const LOAD_SESSIONS: usize = 8;
const LOAD_PER_SESSION: usize = 8;
/// ZooKeeper's heap in this scenario: 2M znodes need most of 4 GiB.
const HEAP: &str = "4g";
/// The znode written last in the load: a member that reads it has the tree.
const MARKER: &str = "/scale-done";
/// How long a member may take to serve again after a restart or a wipe.
const SERVE_LIMIT: Duration = Duration::from_secs(300);
/// Writes on the leader timed before the wiped follower starts, as the baseline.
const BEFORE_REJOIN: Duration = Duration::from_secs(2);

/// One server's rows at one size.
#[derive(Clone, Debug, Default)]
pub struct ScaleRun {
    /// Creates per second during the load.
    pub load_rate: f64,
    /// Every member's CPU over the load, per create, us.
    pub cpu_us_per_create: f64,
    /// Each member's RSS growth over the load, per znode, mean of the members.
    pub rss_per_znode: f64,
    /// One follower's memory growth per watch (see `Memory`).
    pub memory_per_watch: f64,
    /// The members' memory growth per idle session.
    pub memory_per_session: f64,
    /// setData's p99.9 while the members snapshot, ms.
    pub snapshot_write_p999_ms: f64,
    /// Snapshots the members began meanwhile.
    pub snapshots: usize,
    /// A killed follower's restart until it serves the tree, ms.
    pub restart_ms: f64,
    /// A wiped follower's restart until it serves the tree, ms.
    pub rejoin_ms: f64,
    /// The leader's write p99.9 during that rejoin, ms.
    pub rejoin_leader_p999_ms: f64,
    /// The same in the 2 s before it, ms.
    pub before_rejoin_leader_p999_ms: f64,
}

/// A row: its title, unit, value, and issue 52's goal.
pub struct Row {
    /// What the row is, as printed and as the chart's title.
    pub title: &'static str,
    /// The value's unit.
    pub unit: &'static str,
    /// The row's value in one run.
    pub value: fn(&ScaleRun) -> f64,
    goal: &'static str,
}

const fn row(
    title: &'static str,
    unit: &'static str,
    value: fn(&ScaleRun) -> f64,
    goal: &'static str,
) -> Row {
    Row {
        title,
        unit,
        value,
        goal,
    }
}

/// Every row, in the order the steps take.
pub const ROWS: [Row; 10] = [
    row("load rate", "creates/s", |r| r.load_rate, ""),
    row(
        "server CPU per create, load",
        "us",
        |r| r.cpu_us_per_create,
        "<= 0.15x, flat with size",
    ),
    row(
        "RSS per znode per member",
        "B",
        |r| r.rss_per_znode,
        "<= 200 B",
    ),
    row(
        "memory per watch, one follower (RSS; a JVM's live heap)",
        "B",
        |r| r.memory_per_watch,
        "<= 0.1x",
    ),
    row(
        "memory per idle session (RSS; a JVM's live heap)",
        "B",
        |r| r.memory_per_session,
        "<= 1000 B",
    ),
    row(
        "write p99.9 while members snapshot",
        "ms",
        |r| r.snapshot_write_p999_ms,
        "<= 0.1x",
    ),
    row(
        "killed follower, restart to serving",
        "ms",
        |r| r.restart_ms,
        "<= 0.1x",
    ),
    row(
        "wiped follower, SNAP rejoin to serving",
        "ms",
        |r| r.rejoin_ms,
        "<= 0.1x",
    ),
    row(
        "leader's write p99.9 during that rejoin",
        "ms",
        |r| r.rejoin_leader_p999_ms,
        "<= 0.2x",
    ),
    row(
        "leader's write p99.9 before it",
        "ms",
        |r| r.before_rejoin_leader_p999_ms,
        "",
    ),
];

/// Runs every size on both servers, prints each size's table as it ends,
/// and draws the curves.
pub async fn run(args: &Args) {
    println!(
        "zkd-bench --scale: 3 members of each server, sizes {:?} (stock zookeeper-client)",
        args.scale
    );
    let mut results = Vec::new();
    for &size in &args.scale {
        let theirs = if size <= args.zookeeper_up_to {
            let mut zk = tokio::task::block_in_place(|| {
                ZooKeeperEnsemble::start_sized_with_lines(3, 500, HEAP, "maxClientCnxns=0\n")
            });
            let run = measure(&mut zk, size, args, true).await;
            keep_logs(args, &format!("zookeeper-{size}"), &zk.logs());
            Some(run)
        } else {
            None
        };
        let ours = {
            let options = ServerOptions {
                tick_time_ms: 500,
                ..ServerOptions::default()
            }
            .with("maxClientCnxns", "0");
            let mut zkd = tokio::task::block_in_place(|| Ensemble::start_with(3, options));
            let run = measure(&mut zkd, size, args, false).await;
            keep_logs(args, &format!("zkd-{size}"), &Cluster::logs(&zkd));
            run
        };
        print(size, &ours, theirs.as_ref(), args);
        results.push((size, ours, theirs));
    }
    svg::write_charts(&args.svg_dir, &results);
}

/// Writes the members' logs of one run beside the charts, for a reader
/// who wants to see where a row's time went.
fn keep_logs(args: &Args, name: &str, logs: &str) {
    let path = args.svg_dir.join(format!("{name}.log"));
    let written = std::fs::create_dir_all(&args.svg_dir).and_then(|()| std::fs::write(&path, logs));
    if let Err(e) = written {
        eprintln!("cannot keep the logs in {}: {e}", path.display());
    }
}

/// Every step on `cluster`, in order, on a tree of `size` znodes; `jvm`:
/// the members are JVMs (see [`Memory`]).
async fn measure(cluster: &mut impl Cluster, size: usize, args: &Args, jvm: bool) -> ScaleRun {
    let addrs = cluster.addrs();
    let pids = cluster.pids();
    let mut run = ScaleRun::default();
    let empty: u64 = pids.iter().map(|p| rss_kib(*p)).sum();
    let (elapsed, cpu) = load(&addrs, &pids, size, args.payload).await;
    run.load_rate = size as f64 / elapsed.as_secs_f64();
    run.cpu_us_per_create = cpu * 1e6 / size as f64;
    let full: u64 = pids.iter().map(|p| rss_kib(*p)).sum();
    run.rss_per_znode = per(full.saturating_sub(empty), size * pids.len());
    let leader = tokio::task::block_in_place(|| cluster.leader()).expect("a leader");
    let follower = (0..addrs.len()).find(|i| *i != leader).expect("a follower");
    let memory = Memory { jvm };
    run.memory_per_watch = watches(&addrs[follower], pids[follower], size, args, memory).await;
    run.memory_per_session = idle_sessions(&addrs, &pids, args.idle_sessions, memory).await;
    (run.snapshot_write_p999_ms, run.snapshots) = snapshot_writes(cluster, &addrs, args).await;
    run.restart_ms = timed_restart(&addrs[follower], || cluster.restart(follower)).await;
    tokio::task::block_in_place(|| cluster.wipe(follower));
    let start = || cluster.restart(follower);
    let rejoin = rejoin(&addrs[leader], &addrs[follower], args, start).await;
    (
        run.rejoin_ms,
        run.rejoin_leader_p999_ms,
        run.before_rejoin_leader_p999_ms,
    ) = rejoin;
    run
}

fn per(kib: u64, n: usize) -> f64 {
    kib as f64 * 1024.0 / n.max(1) as f64
}

/// How a server's memory growth is read: its RSS, or for a JVM its live
/// heap (`jmap -histo:live`, after a full GC). A JVM's RSS hardly moves for
/// watches and sessions, as it took its heap's pages while loading the tree
/// (15.7 B per watch at 2M znodes); its live heap is what they cost.
#[derive(Clone, Copy)]
struct Memory {
    jvm: bool,
}

impl Memory {
    /// KiB in use by the processes `pids`.
    fn kib(self, pids: &[u32]) -> u64 {
        match self.jvm {
            true => {
                pids.iter()
                    .filter_map(|p| memory::jvm_live_heap(*p))
                    .sum::<u64>()
                    / 1024
            }
            false => pids.iter().map(|p| rss_kib(*p)).sum(),
        }
    }
}

/// The path of the `k`th znode of the load.
fn znode(k: usize) -> String {
    format!("/scale/p{}/n{k}", k % PARENTS)
}

/// Creates the parents, then `size` znodes of `payload` bytes, 64 in flight
/// from sessions over every member, and the marker last; returns the time
/// the znodes took and the members' CPU seconds over it.
async fn load(addrs: &[String], pids: &[u32], size: usize, payload: usize) -> (Duration, f64) {
    let first = connect(&addrs[0], Duration::from_secs(30)).await;
    let _ = first.create("/scale", b"", &persistent()).await;
    for p in 0..PARENTS {
        let _ = first
            .create(&format!("/scale/p{p}"), b"", &persistent())
            .await;
    }
    let mut sessions = Vec::new();
    for s in 0..LOAD_SESSIONS {
        sessions.push(connect(&addrs[s % addrs.len()], Duration::from_secs(30)).await);
    }
    let cpu_before = cpu_secs(pids);
    let started = Instant::now();
    let tasks = LOAD_SESSIONS * LOAD_PER_SESSION;
    let data = vec![5u8; payload];
    let mut running = Vec::new();
    for t in 0..tasks {
        let client = sessions[t % LOAD_SESSIONS].clone();
        let data = data.clone();
        running.push(tokio::spawn(async move {
            for k in (t..size).step_by(tasks) {
                client
                    .create(&znode(k), &data, &persistent())
                    .await
                    .expect("create");
            }
        }));
    }
    for task in running {
        task.await.expect("load task");
    }
    let elapsed = started.elapsed();
    let cpu = cpu_secs(pids) - cpu_before;
    first
        .create(MARKER, b"", &persistent())
        .await
        .expect("marker");
    (elapsed, cpu)
}

/// `--watches` exists watches (at most one a znode) from four sessions on
/// the follower at `addr`: its memory growth per watch it reports holding.
async fn watches(addr: &str, pid: u32, size: usize, args: &Args, memory: Memory) -> f64 {
    let before = memory.kib(&[pid]);
    let paths = (0..args.watches.min(size)).map(znode).collect();
    let held = memory::watch_paths(addr, paths).await;
    let after = memory.kib(&[pid]);
    let count = memory::watch_count(addr);
    drop(held);
    per(after.saturating_sub(before), count)
}

/// `count` idle sessions spread over the members: the members' memory
/// growth per session. The sessions close again.
async fn idle_sessions(addrs: &[String], pids: &[u32], count: usize, memory: Memory) -> f64 {
    let before = memory.kib(pids);
    let mut sessions = Vec::with_capacity(count);
    for (i, addr) in addrs.iter().enumerate() {
        let share = count * (i + 1) / addrs.len();
        fanout::connect_up_to(addr, &mut sessions, share).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = memory.kib(pids);
    drop(sessions);
    per(after.saturating_sub(before), count)
}

/// setData for `--stall-seconds` from sessions over every member, as
/// snapshots of the tree are taken: the p99.9 in ms and how many snapshots
/// the members began meanwhile.
async fn snapshot_writes(cluster: &impl Cluster, addrs: &[String], args: &Args) -> (f64, usize) {
    let began = |logs: String| {
        logs.matches("taking snapshot").count() + logs.matches("Snapshotting: 0x").count()
    };
    let before = began(cluster.logs());
    let timed = Args {
        seconds: args.stall_seconds,
        ..args.clone()
    };
    let phase = run_phase(addrs, &cluster.pids(), &timed, Phase::Write).await;
    let snapshots = began(cluster.logs()).saturating_sub(before);
    (phase.pct_ms(0.999), snapshots)
}

/// Ms from `restart` (which kills the member at `addr` and starts it) to a
/// read through it finding the marker.
async fn timed_restart(addr: &str, restart: impl FnOnce()) -> f64 {
    let started = Instant::now();
    tokio::task::block_in_place(restart);
    serves_marker(addr, started).await
}

/// Ms from `started` until a session on `addr` reads [`MARKER`], or NaN
/// after [`SERVE_LIMIT`].
async fn serves_marker(addr: &str, started: Instant) -> f64 {
    while started.elapsed() < SERVE_LIMIT {
        let connecting = zk::Client::connector()
            .with_session_timeout(Duration::from_secs(30))
            .with_fail_eagerly()
            .connect(addr);
        if let Ok(Ok(c)) = tokio::time::timeout(Duration::from_secs(2), connecting).await {
            if let Ok(Some(_)) = c.check_stat(MARKER).await {
                return started.elapsed().as_secs_f64() * 1000.0;
            }
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    f64::NAN
}

/// Writes on the leader at `leader` throughout; after [`BEFORE_REJOIN`],
/// `start` starts the follower at `follower`, whose data was wiped. Returns
/// the ms until the follower serves the marker, and the leader's write
/// p99.9 in ms during the rejoin and before it.
async fn rejoin(
    leader: &str,
    follower: &str,
    args: &Args,
    start: impl FnOnce(),
) -> (f64, f64, f64) {
    let writers = LeaderWriters::start(leader, args.sessions).await;
    tokio::time::sleep(BEFORE_REJOIN).await;
    let started_at = Instant::now();
    tokio::task::block_in_place(start);
    let rejoin_ms = serves_marker(follower, started_at).await;
    let served_at = Instant::now();
    let sent = writers.stop().await;
    let p999 = |from: Instant, to: Instant| {
        let mut h = Histogram::<u64>::new_with_bounds(1, 600_000_000, 3).expect("histogram");
        for (_, took) in sent.iter().filter(|(at, _)| (from..to).contains(at)) {
            let _ = h.record(took.as_micros().max(1) as u64);
        }
        h.value_at_quantile(0.999) as f64 / 1000.0
    };
    (
        rejoin_ms,
        p999(started_at, served_at),
        p999(started_at - BEFORE_REJOIN, started_at),
    )
}

/// Sessions on one member, each with one setData in flight, recording when
/// each write was sent and how long it took.
struct LeaderWriters {
    stop: Arc<AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    sent: Arc<Mutex<Vec<(Instant, Duration)>>>,
}

impl LeaderWriters {
    async fn start(addr: &str, sessions: usize) -> LeaderWriters {
        let setup = connect(addr, Duration::from_secs(30)).await;
        let _ = setup.create("/scale-writes", b"", &persistent()).await;
        let mut writers = LeaderWriters {
            stop: Arc::default(),
            tasks: Vec::new(),
            sent: Arc::default(),
        };
        for s in 0..sessions {
            let client = connect(addr, Duration::from_secs(30)).await;
            let path = format!("/scale-writes/w{s}");
            let _ = client.create(&path, b"", &persistent()).await;
            let (stop, sent) = (writers.stop.clone(), writers.sent.clone());
            writers.tasks.push(tokio::spawn(async move {
                let data = [7u8; 100];
                while !stop.load(Ordering::Relaxed) {
                    let at = Instant::now();
                    if client.set_data(&path, &data, None).await.is_ok() {
                        sent.lock().expect("sent lock").push((at, at.elapsed()));
                    }
                }
            }));
        }
        writers
    }

    /// Stops the writers; every write's (sent, took).
    async fn stop(self) -> Vec<(Instant, Duration)> {
        self.stop.store(true, Ordering::Relaxed);
        for task in self.tasks {
            let _ = task.await;
        }
        std::mem::take(&mut *self.sent.lock().expect("sent lock"))
    }
}

/// One size's table: each row, both servers, the ratio and the goal.
fn print(size: usize, ours: &ScaleRun, theirs: Option<&ScaleRun>, args: &Args) {
    println!();
    println!(
        "scale: {size} znodes of {} B under {PARENTS} parents, 3 members, {} watches, {} idle sessions, snapCount 100000; snapshots begun while writing: zkd {}, zookeeper {}",
        args.payload,
        args.watches.min(size),
        args.idle_sessions,
        ours.snapshots,
        theirs.map_or("not run".to_string(), |t| t.snapshots.to_string())
    );
    println!("| row | zookeeper | zkd | zkd / zookeeper | goal |");
    println!("|---|---:|---:|---:|---|");
    for row in &ROWS {
        let (unit, zkd) = (row.unit, (row.value)(ours));
        let (zk, ratio) = match theirs.map(row.value) {
            Some(zk) => (format!("{zk:.1} {unit}"), format!("{:.2}x", zkd / zk)),
            None => ("not run".to_string(), "-".to_string()),
        };
        println!(
            "| {} | {zk} | {zkd:.1} {unit} | {ratio} | {} |",
            row.title, row.goal
        );
    }
}
