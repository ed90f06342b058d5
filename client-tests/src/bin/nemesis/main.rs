//! `zkd-nemesis`: Jepsen-style fault testing of a local ensemble, zkd's or
//! Apache ZooKeeper's (the baseline). For each cell of the matrix (a
//! workload under a nemesis) it starts a fresh ensemble with every member in
//! a network namespace of its own, drives the workload through the stock
//! Rust client while the nemesis injects and heals faults, heals, runs the
//! final reads, checks the history and writes a report folder:
//!
//! ```text
//! OUT/summary.txt                      one line per cell
//! OUT/<workload>-<nemesis>/verdict.txt  verdict.json  history.jsonl
//!                         timeline.html logs/<member>.log
//! ```
//!
//! The exit status is 1 if any cell found an anomaly. Every cell is seeded
//! (faults, choices and operations); its replay command is in its report.
//!
//! `--exec "CMD"` runs any command under a nemesis instead, through the
//! fault API of a `zkd ensemble` (`exec.rs`): no root, CMD's exit status.

mod cluster;
mod disk;
mod exec;
mod faults;
mod final_reads;
mod membership;
mod partition;
mod recorder;
mod watching;
mod workload;

use clap::Parser;
use cluster::{Cluster, Server};
use faults::{Faults, Nemesis};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use recorder::Recorder;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, AtomicU32};
use std::sync::Arc;
use std::time::{Duration, Instant};
use workload::{Shared, Workload};
use zkd_client_tests::nemesis::checker::{self, Anomaly, Verdict};
use zkd_client_tests::nemesis::history::Op;
use zkd_client_tests::nemesis::report::{self, RunInfo, WorkloadResult};

#[derive(Parser, Debug)]
#[command(about = "Jepsen-style fault tests of a local zkd (or ZooKeeper) ensemble")]
struct Args {
    /// The server under test.
    #[arg(long, value_enum, default_value = "zkd")]
    server: Server,
    /// Members of the ensemble (3 or 5).
    #[arg(long, default_value_t = 3)]
    members: usize,
    /// Workloads, comma-separated, or `all`.
    #[arg(long, default_value = "register")]
    workload: String,
    /// Nemeses, comma-separated, or `all` (every fault kind and `mix`).
    #[arg(long, default_value = "kill-random")]
    nemesis: String,
    /// Seconds each cell runs its workload (then heal and final reads).
    #[arg(long = "time", default_value_t = 30)]
    time_secs: u64,
    /// Client processes per cell.
    #[arg(long, default_value_t = 5)]
    clients: u32,
    /// The seed; random if not given (it is printed either way).
    #[arg(long)]
    seed: Option<u64>,
    /// The report folder.
    #[arg(long, default_value = "nemesis-report")]
    out: PathBuf,
    /// The members' tickTime in milliseconds.
    #[arg(long, default_value_t = 500)]
    tick_ms: u64,
    /// Run this shell command (any test suite) under the nemesis instead of
    /// a workload, on a fresh `zkd ensemble` (or `--dir`'s) through its fault
    /// API: the connect string is in ZK_CONNECT and ZOOKEEPER_CONNECT, and
    /// the exit status is the command's. No root needed.
    #[arg(long)]
    exec: Option<String>,
    /// With --exec: the running `zkd ensemble --dir DIR` to use.
    #[arg(long, requires = "exec")]
    dir: Option<PathBuf>,
}

/// One cell's verdict, for the summary.
struct CellResult {
    workload: Workload,
    nemesis: Nemesis,
    verdict: Verdict,
    ops: usize,
    dir: PathBuf,
}

fn main() {
    let args = Args::parse();
    if let Some(cmd) = &args.exec {
        let seed = args.seed.unwrap_or_else(|| rand::thread_rng().gen());
        std::process::exit(exec::run(&exec::ExecArgs {
            cmd,
            dir: args.dir.as_deref(),
            members: args.members,
            nemesis: &args.nemesis,
            seed,
            out: &args.out,
            tick_ms: args.tick_ms,
        }));
    }
    let workloads = parse_list(&args.workload, &Workload::ALL, "workload");
    let mut all_nemeses = vec![Nemesis::None];
    all_nemeses.extend(Nemesis::FAULTS);
    all_nemeses.push(Nemesis::Mix);
    let nemeses = parse_list(&args.nemesis, &all_nemeses, "nemesis");
    for n in &nemeses {
        if let Err(e) = n.disk_plan().check_tools() {
            eprintln!("zkd-nemesis: {} needs: {e}", n.name());
            std::process::exit(2);
        }
    }
    let seed = args.seed.unwrap_or_else(|| rand::thread_rng().gen());
    let cells: Vec<(Workload, Nemesis)> = workloads
        .iter()
        .flat_map(|w| nemeses.iter().map(move |n| (*w, *n)))
        .collect();
    eprintln!(
        "zkd-nemesis: {} cell(s) on {} x {:?}, seed {seed}, report in {}",
        cells.len(),
        args.members,
        args.server,
        args.out.display()
    );
    std::fs::create_dir_all(&args.out).expect("create the report folder");
    let runtime = tokio::runtime::Runtime::new().expect("tokio runtime");
    let mut results = Vec::new();
    for (index, (w, n)) in cells.iter().enumerate() {
        // One cell alone runs on the seed itself, so a replay matches it.
        let cell_seed = if cells.len() == 1 {
            seed
        } else {
            mix(seed, index as u64)
        };
        let label = format!(
            "[{}/{}] {} x {}",
            index + 1,
            cells.len(),
            w.name(),
            n.name()
        );
        let result = run_cell(&runtime, &args, *w, *n, cell_seed, &label);
        eprintln!(
            "\r{label}: {} ({} ops) {}   ",
            verdict_word(&result.verdict),
            result.ops,
            result.dir.display()
        );
        results.push(result);
    }
    let summary = summarize(&args, seed, &results);
    std::fs::write(args.out.join("summary.txt"), &summary).expect("write summary");
    eprint!("{summary}");
    if results.iter().any(|r| r.verdict.is_invalid()) {
        std::process::exit(1);
    }
}

/// Every item named in a comma-separated list, or all of `all` for `all`.
fn parse_list<T: clap::ValueEnum + Copy>(list: &str, all: &[T], what: &str) -> Vec<T> {
    if list == "all" {
        return all.to_vec();
    }
    list.split(',')
        .map(|name| {
            T::from_str(name.trim(), true).unwrap_or_else(|_| {
                eprintln!("unknown {what} {name:?}");
                std::process::exit(2)
            })
        })
        .collect()
}

/// A cell's seed from the run's: splitmix64 of both.
fn mix(seed: u64, index: u64) -> u64 {
    let mut z = seed ^ index.wrapping_add(1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn run_cell(
    runtime: &tokio::runtime::Runtime,
    args: &Args,
    workload: Workload,
    nemesis: Nemesis,
    seed: u64,
    label: &str,
) -> CellResult {
    let dir = args
        .out
        .join(format!("{}-{}", workload.name(), nemesis.name()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut cluster = Cluster::start(
        args.server,
        args.members,
        args.tick_ms,
        nemesis.disk_plan(),
        nemesis.reconfig(),
    );
    let rec = Recorder::new();
    let connect = cluster.connect_string();
    let members: Vec<String> = connect.split(',').map(str::to_owned).collect();
    let readers = if workload.has_pinned_readers() {
        args.members as u32
    } else {
        0
    };
    let stride = args.clients + readers;
    let shared = Shared {
        workload,
        connect,
        rec: rec.clone(),
        next_value: Arc::new(AtomicI64::new(0)),
        current: Arc::new((0..stride).map(AtomicU32::new).collect()),
        members,
        writers: args.clients,
    };
    let run_time = Duration::from_secs(args.time_secs);
    let prepared = runtime.block_on(workload::prepare(&shared, Duration::from_secs(60)));
    assert!(prepared, "the ensemble never took the workload's setup");
    let until = tokio::time::Instant::now() + run_time;
    let mut rng = StdRng::seed_from_u64(seed);
    let clients: Vec<_> = (0..stride)
        .map(|worker| {
            let process_seed = rng.gen();
            runtime.spawn(workload::run_process(
                shared.clone(),
                worker,
                stride,
                process_seed,
                until,
            ))
        })
        .collect();
    // A log (CI) gets the one line per cell below, not a line rewritten each second.
    let progress = std::io::stderr()
        .is_terminal()
        .then(|| runtime.spawn(progress(rec.clone(), label.to_owned(), run_time)));
    let mut faults = Faults {
        cluster: &mut cluster,
        rng: &mut rng,
        rec: &rec,
        problems: Vec::new(),
    };
    run_nemesis(&mut faults, nemesis, run_time);
    let mut problems = faults.problems;
    let processes: Vec<workload::Process> = runtime.block_on(async {
        let mut done = Vec::new();
        for c in clients {
            if let Ok(p) = c.await {
                done.push(p);
            }
        }
        done
    });
    if let Some(progress) = progress {
        progress.abort();
    }
    cluster.heal();
    if !cluster.wait_all_serving(Duration::from_secs(60)) {
        let down: Vec<String> = (0..args.members)
            .filter(|i| !cluster.serving(*i))
            .map(|i| (i + 1).to_string())
            .collect();
        problems.push(format!(
            "member(s) {} not serving 60 s after the last heal",
            down.join(", ")
        ));
    }
    runtime.block_on(final_reads::run(&shared, processes));
    let history = rec.history();
    let verdict = with_problems(check(workload, &history.ops), &problems);
    let info = RunInfo {
        seed,
        server: format!("{:?}", args.server).to_lowercase(),
        members: args.members,
        duration_ns: rec.now_ns(),
        command: replay_command(args, workload, nemesis, seed),
    };
    let results = [WorkloadResult {
        workload: workload.name(),
        nemesis: nemesis.name(),
        verdict: verdict.clone(),
    }];
    report::write_report(&dir, &info, &history, &results).expect("write the report");
    save_logs(&dir, &cluster);
    drop(cluster);
    CellResult {
        workload,
        nemesis,
        verdict,
        ops: history.ops.len(),
        dir,
    }
}

/// Faults for `run_time`: a quiet spell, a fault held for a while, healed.
fn run_nemesis(faults: &mut Faults, nemesis: Nemesis, run_time: Duration) {
    let end = Instant::now() + run_time;
    let remaining = || end.saturating_duration_since(Instant::now());
    loop {
        let quiet = Duration::from_millis(faults.rng.gen_range(1000..3000));
        std::thread::sleep(quiet.min(remaining()));
        if remaining().is_zero() {
            return;
        }
        let injected = faults.inject(nemesis);
        let held = Duration::from_millis(faults.rng.gen_range(nemesis.hold_ms()));
        std::thread::sleep(held.min(remaining()));
        if let Some(injected) = injected {
            faults.heal(injected);
        }
        if nemesis == Nemesis::None {
            std::thread::sleep(remaining());
            return;
        }
    }
}

/// The checker's verdict, with every member that did not come back (after
/// a restart, or by the end) as an `unavailable` anomaly.
fn with_problems(verdict: Verdict, problems: &[String]) -> Verdict {
    if problems.is_empty() {
        return verdict;
    }
    let mut anomalies = match verdict {
        Verdict::Invalid { anomalies } => anomalies,
        Verdict::Valid | Verdict::Unknown { .. } => Vec::new(),
    };
    anomalies.extend(
        problems
            .iter()
            .map(|p| Anomaly::new("unavailable", p.clone(), Vec::new())),
    );
    Verdict::Invalid { anomalies }
}

/// The progress line, rewritten every second until aborted.
async fn progress(rec: Recorder, label: String, run_time: Duration) {
    let start = tokio::time::Instant::now();
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let c = rec.counts();
        eprint!(
            "\r{label}  {:>3}/{}s  ok {} fail {} unknown {}  faults {}   ",
            start.elapsed().as_secs(),
            run_time.as_secs(),
            c.ok,
            c.fail,
            c.unknown,
            rec.fault_count()
        );
    }
}

fn check(workload: Workload, ops: &[Op]) -> Verdict {
    match workload {
        Workload::Register => checker::register::check(ops, checker::register::Budget::default()),
        Workload::Set => checker::set::check(ops),
        Workload::UniqueIds => checker::unique_ids::check(ops),
        Workload::Counter => checker::counter::check(ops),
        Workload::Queue => checker::queue::check(ops),
        Workload::Sessions => checker::sessions::check(ops),
        Workload::Fifo => checker::fifo::check(ops),
        Workload::Watches => checker::watches::check(ops),
    }
}

fn replay_command(args: &Args, workload: Workload, nemesis: Nemesis, seed: u64) -> String {
    format!(
        "zkd-nemesis --server {} --members {} --workload {} --nemesis {} --time {} --clients {} --tick-ms {} --seed {seed}",
        format!("{:?}", args.server).to_lowercase(),
        args.members,
        workload.name(),
        nemesis.name(),
        args.time_secs,
        args.clients,
        args.tick_ms
    )
}

fn save_logs(dir: &Path, cluster: &Cluster) {
    let logs = dir.join("logs");
    if std::fs::create_dir_all(&logs).is_ok() {
        for (name, text) in cluster.logs() {
            let _ = std::fs::write(logs.join(name), text);
        }
    }
}

fn verdict_word(v: &Verdict) -> String {
    match v {
        Verdict::Valid => "valid".into(),
        Verdict::Invalid { anomalies } => {
            let mut kinds: Vec<&str> = anomalies.iter().map(|a| a.kind.as_str()).collect();
            kinds.sort_unstable();
            kinds.dedup();
            format!(
                "INVALID ({} anomalies: {})",
                anomalies.len(),
                kinds.join(", ")
            )
        }
        Verdict::Unknown { reason } => format!("unknown ({reason})"),
    }
}

fn summarize(args: &Args, seed: u64, results: &[CellResult]) -> String {
    let mut out = format!(
        "zkd-nemesis summary: server {:?}, {} members, seed {seed}\n",
        args.server, args.members
    );
    for r in results {
        out.push_str(&format!(
            "{:<12} {:<20} {:>7} ops  {}\n",
            r.workload.name(),
            r.nemesis.name(),
            r.ops,
            verdict_word(&r.verdict)
        ));
    }
    out
}
