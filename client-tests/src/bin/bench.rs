//! `zkd-bench`: zkd and Apache ZooKeeper side by side, in one run, driven by
//! the stock Rust client: many sessions, each pipelining requests. Prints
//! write, read and create throughput, latency percentiles and server memory, with
//! zkd/ZooKeeper ratios (absolute numbers are noisy; ratios less so).
//!
//! `--members 1` (the default) runs each server standalone; `--members 3` runs
//! a ZooKeeper ensemble and then a zkd ensemble (`bench/ensemble.rs`): the
//! same phases with sessions spread over the members, writes at equal load,
//! then the failover stall when the leader is killed under a steady write load.
//! Every timed workload is first run untimed for `--warm` seconds.

#![allow(clippy::print_stdout)]

use clap::Parser;
use hdrhistogram::Histogram;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use zkd_client_tests::oracle::{ZooKeeperProcess, BENCH_HEAP};
use zkd_client_tests::{connect, persistent, ServerOptions, ZkdProcess};

#[path = "bench/ensemble.rs"]
mod ensemble;
#[path = "bench/fanout.rs"]
mod fanout;
#[path = "bench/memory.rs"]
mod memory;
#[path = "bench/migrate.rs"]
mod migrate;
#[path = "bench/scale.rs"]
mod scale;
#[path = "bench/stall.rs"]
mod stall;
#[path = "bench/svg.rs"]
mod svg;
#[cfg(feature = "bench-tls")]
#[path = "bench/tls.rs"]
mod tls;

#[derive(Parser, Debug, Clone)]
#[command(
    about = "Benchmark zkd against Apache ZooKeeper (standalone, or ensembles with --members 3)"
)]
struct Args {
    /// Members per server: 1 runs each standalone; 3 or 5 run an ensemble of
    /// each (and measure the failover stall).
    #[arg(long, default_value_t = 1, value_parser = parse_members)]
    members: usize,
    /// Seconds per phase (write, read) per server.
    #[arg(long, default_value_t = 5)]
    seconds: u64,
    /// Client sessions.
    #[arg(long, default_value_t = 8)]
    sessions: usize,
    /// Requests in flight per session (pipelining depth).
    #[arg(long, default_value_t = 16)]
    window: usize,
    /// Bytes of data per setData.
    #[arg(long, default_value_t = 100)]
    payload: usize,
    /// Znodes created in a fresh server of each kind (standalone), or after
    /// the failover (ensembles), whose memory per znode is then read.
    #[arg(long, default_value_t = 300_000)]
    nodes: usize,
    /// Run only these parts (standalone only): phases (write, read,
    /// create), stall (writes while snapshots are taken), memory (per
    /// znode), fanout (watch notification and memory per session), tls
    /// (write and read over TLS and in plaintext), migrate (`--nodes`
    /// znodes exported, then each server started on ZooKeeper's files).
    /// All by default.
    #[arg(long, value_enum, value_delimiter = ',', default_values = ["phases", "stall", "memory", "fanout", "tls", "migrate"])]
    only: Vec<Part>,
    /// Znodes in the tree the snapshot-stall phase writes over (0 skips it).
    #[arg(long, default_value_t = 500_000)]
    stall_nodes: usize,
    /// Seconds of the snapshot-stall phase.
    #[arg(long, default_value_t = 10)]
    stall_seconds: u64,
    /// Sessions that each watch one znode in the fan-out part (and whose
    /// idle memory is measured).
    #[arg(long, default_value_t = 5_000)]
    watchers: usize,
    /// Data watches set on the memory part's znodes (at most one each),
    /// from four sessions, whose memory per watch is then read.
    #[arg(long, default_value_t = 200_000)]
    watches: usize,
    /// Seconds of steady writes before the leader is killed (ensembles only).
    #[arg(long, default_value_t = 3)]
    warmup: u64,
    /// Seconds each server is driven, untimed, through a workload before
    /// that workload is timed (0: none). ZooKeeper's JVM compiles its hot
    /// paths in the first seconds of load: timed cold, a 3-member ZooKeeper
    /// wrote at half its warm rate, and applications meet it warm.
    #[arg(long, default_value_t = 5)]
    warm: u64,
    /// Runs the scale scenario instead (3 members, `bench/scale.rs`) at
    /// these sizes, in znodes: `--scale 20000,200000,2000000`.
    #[arg(long, value_delimiter = ',')]
    scale: Vec<usize>,
    /// Sizes above this run zkd alone in the scale scenario.
    #[arg(long, default_value_t = 2_000_000)]
    zookeeper_up_to: usize,
    /// Idle sessions opened over the members in the scale scenario.
    #[arg(long, default_value_t = 15_000)]
    idle_sessions: usize,
    /// Where the scale scenario writes its charts (SVG, one per row).
    #[arg(long, default_value = "zkd-bench-scale")]
    svg_dir: std::path::PathBuf,
}

/// The parts of a standalone run.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Part {
    Phases,
    Stall,
    Memory,
    Fanout,
    Tls,
    Migrate,
}

fn parse_members(s: &str) -> Result<usize, String> {
    match s.parse() {
        Ok(n @ (1 | 3 | 5)) => Ok(n),
        _ => Err(format!("{s}: members must be 1 (standalone), 3 or 5")),
    }
}

/// One phase's outcome.
struct PhaseResult {
    ops: u64,
    elapsed: Duration,
    latency_us: Histogram<u64>,
    /// CPU time the server processes spent during the timed phase, seconds
    /// (user and system, every thread): on 2 shared cores, the honest figure.
    cpu_secs: f64,
    /// CPU time this process (the load generator: the stock client and the
    /// tasks driving it) spent during the timed phase, seconds.
    client_cpu_secs: f64,
}

impl PhaseResult {
    fn throughput(&self) -> f64 {
        self.ops as f64 / self.elapsed.as_secs_f64()
    }
    /// Server CPU per operation, microseconds.
    fn cpu_us_per_op(&self) -> f64 {
        self.cpu_secs * 1e6 / self.ops.max(1) as f64
    }
    /// The load generator's CPU per operation, microseconds.
    fn client_cpu_us_per_op(&self) -> f64 {
        self.client_cpu_secs * 1e6 / self.ops.max(1) as f64
    }
    fn pct_ms(&self, q: f64) -> f64 {
        self.latency_us.value_at_quantile(q) as f64 / 1000.0
    }
}

#[derive(Clone, Copy)]
enum Phase {
    /// setData on the session's own znodes.
    Write,
    /// getData of them.
    Read,
    /// Persistent creates of new znodes (each op one new node).
    Create,
}

/// Ticks per second of `/proc/<pid>/stat`'s times (USER_HZ, fixed at 100
/// in Linux's ABI).
const USER_HZ: f64 = 100.0;

/// CPU seconds (user and system) the processes `pids` have used so far.
fn cpu_secs(pids: &[u32]) -> f64 {
    let ticks = |pid: &u32| -> Option<u64> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // Fields after the command name, which may hold spaces: utime and
        // stime are the 12th and 13th of them.
        let mut after = stat.rsplit_once(')')?.1.split_whitespace().skip(11);
        Some(after.next()?.parse::<u64>().ok()? + after.next()?.parse::<u64>().ok()?)
    };
    pids.iter().filter_map(ticks).sum::<u64>() as f64 / USER_HZ
}

/// CPU seconds this process, the load generator, has used so far.
fn own_cpu_secs() -> f64 {
    cpu_secs(&[std::process::id()])
}

/// One timed phase; session `s` connects to `addrs[s % addrs.len()]` only.
/// `pids`: the server processes whose CPU time the phase counts.
async fn run_phase(addrs: &[String], pids: &[u32], args: &Args, phase: Phase) -> PhaseResult {
    run_phase_at(addrs, pids, args, phase, None).await
}

/// [`run_phase`], offering `pace` ops/s in all if given (each in-flight slot
/// sends on a fixed schedule, catching up at once when an answer came late),
/// else as fast as the server answers. A request is timed from when it was
/// sent: tokio's timer wakes up to a millisecond late, which timing from
/// the due moment would charge to the server.
/// A client connected to `addr` (over TLS for the TLS part's addresses).
async fn session_to(addr: &str) -> zookeeper_client::Client {
    #[cfg(feature = "bench-tls")]
    return tls::connect(addr).await;
    #[cfg(not(feature = "bench-tls"))]
    return zkd_client_tests::connect(addr, std::time::Duration::from_secs(30)).await;
}

/// The TLS part, in a build with it.
async fn tls_part(args: &Args) {
    #[cfg(feature = "bench-tls")]
    {
        let (ours, theirs) = tls::measure(args).await;
        tls::print(&ours, &theirs);
    }
    #[cfg(not(feature = "bench-tls"))]
    {
        let _ = args;
        eprintln!("the tls part needs a build with it: cargo build --release -p zkd-client-tests --features bench-tls");
    }
}

async fn run_phase_at(
    addrs: &[String],
    pids: &[u32],
    args: &Args,
    phase: Phase,
    pace: Option<f64>,
) -> PhaseResult {
    let setup = session_to(&addrs[0]).await;
    let _ = setup.create("/bench", b"", &persistent()).await;
    let mut clients = Vec::new();
    for s in 0..args.sessions {
        let c = session_to(&addrs[s % addrs.len()]).await;
        for w in 0..args.window {
            let _ = c
                .create(
                    &format!("/bench/n{s}-{w}"),
                    &vec![0u8; args.payload],
                    &persistent(),
                )
                .await;
        }
        clients.push(c);
    }
    let hist = Arc::new(Mutex::new(
        Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).expect("histogram"),
    ));
    let ops = Arc::new(AtomicU64::new(0));
    // Each phase creates names of its own, never those of a phase before.
    static PASSES: AtomicU64 = AtomicU64::new(0);
    let pass = PASSES.fetch_add(1, Ordering::Relaxed);
    let cpu_before = cpu_secs(pids);
    let client_cpu_before = own_cpu_secs();
    let start = Instant::now();
    let deadline = start + Duration::from_secs(args.seconds);
    let slots = clients.len() * args.window;
    let interval = pace.map(|rate| Duration::from_secs_f64(slots as f64 / rate));
    let mut tasks = Vec::new();
    for (s, client) in clients.iter().enumerate() {
        for w in 0..args.window {
            // Paced slots start spread over one interval, so the load is even.
            // (next send, interval between sends), if paced.
            let mut schedule = interval.map(|i| {
                let first = start + i.mul_f64((s * args.window + w) as f64 / slots as f64);
                (first, i)
            });
            let client = client.clone();
            let hist = hist.clone();
            let ops = ops.clone();
            let path = format!("/bench/n{s}-{w}");
            let data = vec![7u8; args.payload];
            tasks.push(tokio::spawn(async move {
                let mut local =
                    Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).expect("histogram");
                let mut created = 0u64;
                while Instant::now() < deadline {
                    if let Some((due, interval)) = schedule.as_mut() {
                        if *due >= deadline {
                            break;
                        }
                        tokio::time::sleep_until((*due).into()).await;
                        *due += *interval;
                    }
                    let t = Instant::now();
                    let ok = match phase {
                        Phase::Write => client.set_data(&path, &data, None).await.is_ok(),
                        Phase::Read => client.get_data(&path).await.is_ok(),
                        Phase::Create => {
                            created += 1;
                            let new = format!("{path}-p{pass}c{created}");
                            client.create(&new, &data, &persistent()).await.is_ok()
                        }
                    };
                    if ok {
                        let _ = local.record(t.elapsed().as_micros().max(1) as u64);
                        ops.fetch_add(1, Ordering::Relaxed);
                    }
                }
                let _ = hist.lock().map(|mut h| h.add(&local));
            }));
        }
    }
    for t in tasks {
        let _ = t.await;
    }
    let elapsed = start.elapsed();
    let cpu_secs = cpu_secs(pids) - cpu_before;
    let client_cpu_secs = own_cpu_secs() - client_cpu_before;
    let latency_us = hist.lock().map(|h| h.clone()).expect("histogram lock");
    PhaseResult {
        ops: ops.load(Ordering::Relaxed),
        elapsed,
        latency_us,
        cpu_secs,
        client_cpu_secs,
    }
}

/// The resident memory of process `pid` in KiB, or 0.
fn rss_kib(pid: u32) -> u64 {
    status_kib(pid, "VmRSS:")
}

/// A `/proc/<pid>/status` figure in KiB (`VmRSS:`, `VmHWM:` for the peak), or 0.
fn status_kib(pid: u32, key: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(key))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

struct ServerRun {
    write: PhaseResult,
    read: PhaseResult,
    create: PhaseResult,
}

/// Znodes [`populate`] creates at once (one task each).
const POPULATE_IN_FLIGHT: usize = 64;

/// Creates `count` znodes of `payload` bytes under `/mem`, 64 in flight on
/// one session, however few the timed phases keep in flight.
async fn populate(addr: &str, count: usize, payload: usize) {
    let c = connect(addr, Duration::from_secs(30)).await;
    let _ = c.create("/mem", b"", &persistent()).await;
    let data = vec![5u8; payload];
    let per_task = count.div_ceil(POPULATE_IN_FLIGHT);
    let mut tasks = Vec::new();
    for w in 0..POPULATE_IN_FLIGHT {
        let c = c.clone();
        let data = data.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..per_task {
                let _ = c.create(&populated_path(w, i), &data, &persistent()).await;
            }
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
}

/// The path of the `i`th znode [`populate`]'s task `w` creates.
fn populated_path(w: usize, i: usize) -> String {
    format!("/mem/n{w}-{i}")
}

/// `count` of the paths [`populate`] created (it made at least `count`).
fn populated_paths(count: usize) -> Vec<String> {
    (0..count)
        .map(|k| populated_path(k % POPULATE_IN_FLIGHT, k / POPULATE_IN_FLIGHT))
        .collect()
}

/// Drives `phase` untimed for `--warm` seconds, as [`run_phase`] would.
async fn warm_up(addrs: &[String], pids: &[u32], args: &Args, phase: Phase) {
    if args.warm > 0 {
        let warm = Args {
            seconds: args.warm,
            ..args.clone()
        };
        run_phase(addrs, pids, &warm, phase).await;
    }
}

/// The write, read and create phases, each timed after its warm-up.
async fn run_phases(addrs: &[String], pids: &[u32], args: &Args) -> ServerRun {
    let warmed = |phase| async move {
        warm_up(addrs, pids, args, phase).await;
        run_phase(addrs, pids, args, phase).await
    };
    ServerRun {
        write: warmed(Phase::Write).await,
        read: warmed(Phase::Read).await,
        create: warmed(Phase::Create).await,
    }
}

fn header() {
    println!("| server    | op     |      ops/s |   p50 ms |   p99 ms | p99.9 ms |   max ms | CPU us/op | client us/op |");
    println!("|-----------|--------|-----------:|---------:|---------:|---------:|---------:|----------:|-------------:|");
}

fn row(name: &str, op: &str, r: &PhaseResult) {
    println!(
        "| {name:<9} | {op:<6} | {:>10.0} | {:>8.2} | {:>8.2} | {:>8.2} | {:>8.2} | {:>9.1} | {:>12.1} |",
        r.throughput(),
        r.pct_ms(0.5),
        r.pct_ms(0.99),
        r.pct_ms(0.999),
        r.latency_us.max() as f64 / 1000.0,
        r.cpu_us_per_op(),
        r.client_cpu_us_per_op()
    );
}

/// The phases' table, zkd's rows above ZooKeeper's, then the load
/// generator's ceiling.
fn phase_table(ours: &ServerRun, theirs: &ServerRun) {
    header();
    for (name, run) in [("zkd", ours), ("zookeeper", theirs)] {
        row(name, "write", &run.write);
        row(name, "read", &run.read);
        row(name, "create", &run.create);
    }
    println!();
    ceiling_rows(ours, theirs);
}

/// The load generator shares the machine's cores with the servers: at its
/// CPU per op in zkd's phase, it alone would fill every core at the
/// ceiling's rate, so no server could be measured above about that here.
fn ceiling_rows(ours: &ServerRun, theirs: &ServerRun) {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let ceiling = |r: &PhaseResult| cores as f64 * 1e6 / r.client_cpu_us_per_op().max(0.001);
    let line = |what: &str, cell: &dyn Fn(&PhaseResult, &PhaseResult) -> String| {
        let cells = [
            cell(&ours.write, &theirs.write),
            cell(&ours.read, &theirs.read),
            cell(&ours.create, &theirs.create),
        ];
        println!("| {what} | {} |", cells.join(" | "));
    };
    println!("| load generator (the client, this process) | write | read | create |");
    println!("|---|---|---|---|");
    line(
        "its CPU per op (us), in zkd's / ZooKeeper's phase",
        &|o, t| {
            format!(
                "{:.1} / {:.1}",
                o.client_cpu_us_per_op(),
                t.client_cpu_us_per_op()
            )
        },
    );
    line(
        &format!("ceiling: ops/s at which it alone fills the {cores} cores"),
        &|o, _| format!("{:.0}", ceiling(o)),
    );
    line("ceiling over ZooKeeper's ops/s", &|o, t| {
        format!("{:.2}x", ceiling(o) / t.throughput())
    });
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args = Args::parse();
    if !args.scale.is_empty() {
        return scale::run(&args).await;
    }
    println!(
        "zkd-bench: {} member(s), {} sessions x {} in flight, {} B payload, {} s per phase after {} s of warm-up (stock zookeeper-client)",
        args.members, args.sessions, args.window, args.payload, args.seconds, args.warm
    );
    if args.members > 1 {
        return ensemble::run(&args).await;
    }
    // Every session from one address: lift the default limit of 60 on both.
    let start_zkd = || {
        ZkdProcess::start_with(ServerOptions {
            extra: vec![("maxClientCnxns".to_string(), "0".to_string())],
            ..ServerOptions::default()
        })
    };
    let start_zookeeper =
        || ZooKeeperProcess::start_sized(2000, &[], "maxClientCnxns=0\n", BENCH_HEAP);
    if args.only.contains(&Part::Phases) {
        let zkd = start_zkd();
        let ours = run_phases(&[zkd.addr()], &[zkd.pid().unwrap_or(0)], &args).await;
        drop(zkd);
        let zk = start_zookeeper();
        let theirs = run_phases(&[zk.addr()], &[zk.pid()], &args).await;
        drop(zk);
        print_phases(&ours, &theirs);
    }
    if args.only.contains(&Part::Stall) && args.stall_nodes > 0 {
        stall_part(&args).await;
    }
    if args.only.contains(&Part::Tls) {
        tls_part(&args).await;
    }
    if args.only.contains(&Part::Fanout) {
        let zkd = start_zkd();
        let ours = fanout::measure(&zkd.addr(), zkd.pid().unwrap_or(0), &args).await;
        drop(zkd);
        let zk = start_zookeeper();
        let theirs = fanout::measure(&zk.addr(), zk.pid(), &args).await;
        drop(zk);
        fanout::print(&ours, &theirs, &args);
    }
    if args.only.contains(&Part::Migrate) {
        let migration = migrate::measure(&args).await;
        migrate::print(&migration, &args);
    }
    if args.only.contains(&Part::Memory) {
        memory_part(&args, start_zkd, start_zookeeper).await;
    }
}

/// The stall part: a fresh server of each kind, its tree snapshotted again
/// and again under writes.
async fn stall_part(args: &Args) {
    let zkd = ZkdProcess::start_with(ServerOptions {
        extra: vec![
            ("maxClientCnxns".to_string(), "0".to_string()),
            ("snapCount".to_string(), stall::SNAP_COUNT.to_string()),
        ],
        ..ServerOptions::default()
    });
    let zkd_log = || zkd.log();
    let ours = stall::measure(
        &zkd.addr(),
        zkd.pid().unwrap_or(0),
        args,
        zkd_log,
        "taking snapshot",
    )
    .await;
    drop(zkd);
    let more = format!("maxClientCnxns=0\nsnapCount={}\n", stall::SNAP_COUNT);
    let zk = ZooKeeperProcess::start_sized(2000, &[], &more, BENCH_HEAP);
    let zk_log = || zk.log();
    let theirs = stall::measure(&zk.addr(), zk.pid(), args, zk_log, "Snapshotting: 0x").await;
    drop(zk);
    stall::print(&ours, &theirs, args);
}

/// The memory rows: a fresh server of each kind filled, then restarted.
async fn memory_part(
    args: &Args,
    start_zkd: impl Fn() -> ZkdProcess,
    start_zookeeper: impl Fn() -> ZooKeeperProcess,
) {
    let mut zkd = start_zkd();
    let mut ours = memory::measure(&zkd.addr(), zkd.pid().unwrap_or(0), args, false).await;
    ours.restart_ms = memory::restart(&zkd.addr(), || zkd.restart()).await;
    drop(zkd);
    let mut zk = start_zookeeper();
    let mut theirs = memory::measure(&zk.addr(), zk.pid(), args, true).await;
    let addr = zk.addr();
    theirs.restart_ms = memory::restart(&addr, || zk.restart()).await;
    drop(zk);
    memory::print(&ours, &theirs, args);
}

/// The throughput and latency table, and its ratios.
fn print_phases(ours: &ServerRun, t: &ServerRun) {
    phase_table(ours, t);
    println!();
    println!("| ratio zkd/zookeeper | write | read | create |");
    println!("|---|---|---|---|");
    let ratios = |what: &str, f: fn(&PhaseResult) -> f64| {
        println!(
            "| {what} | {:.2}x | {:.2}x | {:.2}x |",
            f(&ours.write) / f(&t.write),
            f(&ours.read) / f(&t.read),
            f(&ours.create) / f(&t.create)
        );
    };
    ratios("throughput", PhaseResult::throughput);
    ratios("p50 latency", |r| r.pct_ms(0.5));
    ratios("p99 latency", |r| r.pct_ms(0.99));
    ratios("server CPU per op", PhaseResult::cpu_us_per_op);
}
