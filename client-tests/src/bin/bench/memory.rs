//! The memory rows: a fresh server of each kind, `--nodes` znodes of
//! `--payload` bytes created, then its resident memory per znode; then
//! `--watches` data watches on them from four sessions, and the memory per
//! watch. For ZooKeeper also its live heap per znode and per watch (after a
//! full GC, as `jmap -histo:live` counts it), the figure a compact JVM
//! could reach.

use super::{populate, rss_kib, Args};
use std::time::{Duration, Instant};
use zookeeper_client as zk;

/// One server's memory after the populate step.
pub struct Memory {
    /// Resident bytes per znode, whole process.
    pub rss_per_znode: f64,
    /// Resident bytes the znodes added (above the empty server), per znode.
    pub added_per_znode: f64,
    /// The JVM's live heap per znode (ZooKeeper only).
    pub live_heap_per_znode: Option<f64>,
    /// Resident bytes the watches added, per watch.
    pub rss_per_watch: f64,
    /// The live heap the watches added, per watch (ZooKeeper only).
    pub live_heap_per_watch: Option<f64>,
    /// The watches the server reported holding (`wchs`).
    pub watches: usize,
    /// kill -9 -> restarted and answering a read, ms (see [`restart`]).
    pub restart_ms: f64,
}

/// Fills the server at `addr` (process `pid`), then watches its znodes,
/// and measures it after each step; `jvm` also reads the live heap.
pub async fn measure(addr: &str, pid: u32, args: &Args, jvm: bool) -> Memory {
    let live_heap = || jvm.then(|| jvm_live_heap(pid)).flatten();
    let empty = rss_kib(pid);
    populate(addr, args.nodes, args.payload).await;
    let full = rss_kib(pid);
    let live_full = live_heap();
    let watchers = watch_paths(addr, super::populated_paths(args.watches.min(args.nodes))).await;
    let watched = rss_kib(pid);
    let live_watched = live_heap();
    // As the server counts them: a watch the client failed to set is not one.
    let watches = watch_count(addr);
    drop(watchers);
    let per = |bytes: f64, n: usize| bytes / n.max(1) as f64;
    let kib = |k: u64| k as f64 * 1024.0;
    Memory {
        rss_per_znode: per(kib(full), args.nodes),
        added_per_znode: per(kib(full.saturating_sub(empty)), args.nodes),
        live_heap_per_znode: live_full.map(|b| per(b as f64, args.nodes)),
        rss_per_watch: per(kib(watched.saturating_sub(full)), watches),
        live_heap_per_watch: live_full
            .zip(live_watched)
            .map(|(before, after)| per(after.saturating_sub(before) as f64, watches)),
        watches,
        restart_ms: f64::NAN,
    }
}

/// The watches the server at `addr` holds, from `wchs`'s
/// `Total watches:N` line (0 if it cannot be read).
pub(super) fn watch_count(addr: &str) -> usize {
    let Some((host, port)) = addr.rsplit_once(':') else {
        return 0;
    };
    let port = port.parse().unwrap_or(0);
    let text = zkd_client_tests::process::four_letter_word_at(host, port, "wchs");
    text.unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("Total watches:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

/// Sets an exists watch on each of `paths`, from four sessions; returns the
/// sessions and the watchers, which keep the watches set while they live.
pub(super) async fn watch_paths(
    addr: &str,
    paths: Vec<String>,
) -> (Vec<zk::Client>, Vec<zk::OneshotWatcher>) {
    const SESSIONS: usize = 4;
    const TASKS_PER_SESSION: usize = 16;
    let tasks = SESSIONS * TASKS_PER_SESSION;
    let mut running = Vec::new();
    let mut sessions = Vec::new();
    for s in 0..SESSIONS {
        let c = zkd_client_tests::connect(addr, Duration::from_secs(30)).await;
        sessions.push(c.clone());
        for t in 0..TASKS_PER_SESSION {
            let c = c.clone();
            let mine: Vec<String> = paths
                .iter()
                .skip(s * TASKS_PER_SESSION + t)
                .step_by(tasks)
                .cloned()
                .collect();
            running.push(tokio::spawn(async move {
                let mut watchers = Vec::with_capacity(mine.len());
                for path in mine {
                    if let Ok((_, watcher)) = c.check_and_watch_stat(&path).await {
                        watchers.push(watcher);
                    }
                }
                watchers
            }));
        }
    }
    let mut watchers = Vec::new();
    for task in running {
        watchers.extend(task.await.unwrap_or_default());
    }
    (sessions, watchers)
}

/// Times a restart of the populated server at `addr`: `restart` kills it
/// (-9) and starts it again; the clock stops at the first read that
/// finds every znode (the tree recovered from snapshot and log).
pub async fn restart(addr: &str, restart: impl FnOnce()) -> f64 {
    let before = zkd_client_tests::connect(addr, Duration::from_secs(30)).await;
    let expected = before
        .get_data("/mem")
        .await
        .map_or(0, |(_, s)| s.num_children);
    drop(before);
    let started = Instant::now();
    tokio::task::block_in_place(restart);
    let expected = usize::try_from(expected).unwrap_or(0);
    every_znode_readable(addr, expected, started, Duration::from_secs(120)).await
}

/// Ms from `started` until a read of `/mem` at `addr` finds `nodes`
/// children (the tree recovered), or NaN after `limit`.
pub async fn every_znode_readable(
    addr: &str,
    nodes: usize,
    started: Instant,
    limit: Duration,
) -> f64 {
    let deadline = started + limit;
    while Instant::now() < deadline {
        let connecting = zk::Client::connector()
            .with_session_timeout(Duration::from_secs(30))
            .with_fail_eagerly()
            .connect(addr);
        if let Ok(Ok(c)) = tokio::time::timeout(Duration::from_secs(2), connecting).await {
            if let Ok((_, stat)) = c.get_data("/mem").await {
                if stat.num_children as usize >= nodes {
                    return started.elapsed().as_secs_f64() * 1000.0;
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    f64::NAN
}

/// The live heap of JVM `pid` in bytes: `jmap -histo:live` (which runs a full
/// GC first) ends with a `Total <instances> <bytes>` line. `None` without a JDK.
pub fn jvm_live_heap(pid: u32) -> Option<u64> {
    // The attach can fail while the JVM is busy (a GC, say): a few tries.
    (0..3).find_map(|_| {
        let out = std::process::Command::new("jmap")
            .args(["-histo:live", &pid.to_string()])
            .output()
            .ok()?;
        let text = String::from_utf8_lossy(&out.stdout);
        let total = text.lines().rev().find(|l| l.starts_with("Total"))?;
        total.split_whitespace().nth(2)?.parse().ok()
    })
}

/// Prints the memory rows with their ratios.
pub fn print(ours: &Memory, theirs: &Memory, args: &Args) {
    println!();
    println!(
        "| memory, {} znodes of {} B, fresh server | zkd | zookeeper | zkd / zookeeper |",
        args.nodes, args.payload
    );
    println!("|---|---|---|---|");
    let row = |what: &str, a: f64, b: f64| {
        println!("| {what} | {a:.0} B | {b:.0} B | {:.2}x |", a / b.max(1.0));
    };
    row("RSS per znode", ours.rss_per_znode, theirs.rss_per_znode);
    row(
        "RSS the znodes added, per znode",
        ours.added_per_znode,
        theirs.added_per_znode,
    );
    println!(
        "| RSS per data watch (zkd held {}, ZooKeeper {}, from 4 sessions) | {:.0} B | {:.0} B | {:.2}x |",
        ours.watches,
        theirs.watches,
        ours.rss_per_watch,
        theirs.rss_per_watch,
        ours.rss_per_watch / theirs.rss_per_watch.max(1.0)
    );
    if let Some(live) = theirs.live_heap_per_watch {
        row(
            "zkd RSS per watch vs ZooKeeper's live heap per watch",
            ours.rss_per_watch,
            live,
        );
    }
    println!(
        "| kill -9 with {} txns logged -> restarted, every znode readable | {:.0} ms | {:.0} ms | {:.2}x |",
        args.nodes,
        ours.restart_ms,
        theirs.restart_ms,
        ours.restart_ms / theirs.restart_ms
    );
    match theirs.live_heap_per_znode {
        Some(live) => row(
            "zkd RSS per znode vs ZooKeeper's live heap per znode",
            ours.rss_per_znode,
            live,
        ),
        None => println!("(ZooKeeper's live heap unknown: jmap failed or is not installed)"),
    }
}
