//! The migration rows (issue 51): `--nodes` znodes of `--payload` bytes
//! written to zkd, `zkd export`ed as ZooKeeper's data directory, then each
//! server started on its own copy of that directory, timed from the spawn
//! to the first read that finds every znode: ZooKeeper loading its own
//! files, and zkd importing them (a copy into its own store) and serving.
//! Beside the times, each start's CPU seconds and peak and settled RSS.

use super::memory::every_znode_readable;
use super::{cpu_secs, populate, status_kib, Args};
use std::path::Path;
use std::time::{Duration, Instant};
use zkd_client_tests::oracle::{ZooKeeperProcess, BENCH_HEAP};
use zkd_client_tests::process::{free_port, zkd_binary};
use zkd_client_tests::{ServerOptions, ZkdProcess};

/// How long a start may take.
const LIMIT: Duration = Duration::from_secs(300);

/// One server's start on ZooKeeper's files.
pub struct Start {
    /// Spawn -> every znode readable, ms.
    pub ms: f64,
    /// zkd's import alone, as its log reports it, ms.
    pub import_ms: Option<f64>,
    pub cpu_secs: f64,
    pub peak_kib: u64,
    pub rss_kib: u64,
}

/// Both starts, and the export that wrote the directory.
pub struct Migration {
    pub export_ms: f64,
    pub zkd: Start,
    pub zookeeper: Start,
}

pub async fn measure(args: &Args) -> Migration {
    let dir = tempfile::tempdir().expect("tempdir");
    let exported = dir.path().join("exported");
    let export_ms = written_and_exported(args, &exported).await;
    let copy = dir.path().join("for-zkd");
    zkd_client_tests::oracle::copy_version_2(&exported, &copy);
    let zkd = zkd_start(&copy, args.nodes).await;
    let zookeeper = zookeeper_start(&exported, args.nodes).await;
    Migration {
        export_ms,
        zkd,
        zookeeper,
    }
}

/// Fills a zkd server, stops it, and exports its state to `to`; returns
/// how long the export took, ms.
async fn written_and_exported(args: &Args, to: &Path) -> f64 {
    let mut zkd = ZkdProcess::start_with(ServerOptions::default().with("maxClientCnxns", "0"));
    populate(&zkd.addr(), args.nodes, args.payload).await;
    zkd.kill9();
    let started = Instant::now();
    let status = std::process::Command::new(zkd_binary())
        .args(["export", "--config"])
        .arg(zkd.config_path())
        .arg("--to")
        .arg(to)
        .status()
        .expect("run zkd export");
    assert!(status.success(), "zkd export failed: {status}");
    started.elapsed().as_secs_f64() * 1000.0
}

/// zkd on `data` (ZooKeeper's files only): it imports, then serves.
async fn zkd_start(data: &Path, nodes: usize) -> Start {
    let port = free_port();
    let config = data.join("zoo.cfg");
    let text = format!(
        "tickTime=2000\ndataDir={}\nclientPort={port}\nclientPortAddress=127.0.0.1\nmaxClientCnxns=0\n",
        data.display()
    );
    std::fs::write(&config, text).expect("write zoo.cfg");
    let started = Instant::now();
    let zkd = ZkdProcess::try_start_on(&config, data, ("127.0.0.1", port))
        .unwrap_or_else(|e| panic!("{e}"));
    let pid = zkd.pid().unwrap_or(0);
    let ms = every_znode_readable(&zkd.addr(), nodes, started, LIMIT).await;
    let log = zkd.log();
    let imported = log
        .lines()
        .find(|l| l.contains("imported Apache ZooKeeper"));
    let import_ms = imported.and_then(|l| {
        l.split_whitespace()
            .find_map(|w| w.strip_prefix("ms=")?.parse().ok())
    });
    settled(pid, ms, import_ms)
}

/// ZooKeeper on a copy of `data`.
async fn zookeeper_start(data: &Path, nodes: usize) -> Start {
    let started = Instant::now();
    let more = "maxClientCnxns=0\n";
    let zk = tokio::task::block_in_place(|| {
        ZooKeeperProcess::start_sized_on_copy_of(2000, data, more, BENCH_HEAP)
    });
    let ms = every_znode_readable(&zk.addr(), nodes, started, LIMIT).await;
    settled(zk.pid(), ms, None)
}

/// A started server's figures, read once it serves every znode.
fn settled(pid: u32, ms: f64, import_ms: Option<f64>) -> Start {
    Start {
        ms,
        import_ms,
        cpu_secs: cpu_secs(&[pid]),
        peak_kib: status_kib(pid, "VmHWM:"),
        rss_kib: status_kib(pid, "VmRSS:"),
    }
}

/// Prints the migration rows with their ratios.
pub fn print(m: &Migration, args: &Args) {
    println!();
    println!(
        "| migration, {} znodes of {} B: start on ZooKeeper's data directory | zkd | zookeeper | zkd / zookeeper |",
        args.nodes, args.payload
    );
    println!("|---|---|---|---|");
    let (a, b) = (&m.zkd, &m.zookeeper);
    let row = |what: &str, x: f64, y: f64, unit: &str| {
        println!("| {what} | {x:.1} {unit} | {y:.1} {unit} | {:.2}x |", x / y);
    };
    row("spawn -> every znode readable", a.ms, b.ms, "ms");
    row("server CPU for the start", a.cpu_secs, b.cpu_secs, "s");
    let mib = |kib: u64| kib as f64 / 1024.0;
    row(
        "peak RSS during the start",
        mib(a.peak_kib),
        mib(b.peak_kib),
        "MiB",
    );
    row("RSS when serving", mib(a.rss_kib), mib(b.rss_kib), "MiB");
    match a.import_ms {
        Some(ms) => println!("| of which zkd's import (its log) | {ms:.0} ms | | |"),
        None => println!("| zkd's import time: not in its log | | | |"),
    }
    println!(
        "| `zkd export` of the same tree (the way back) | {:.0} ms | | |",
        m.export_ms
    );
}
