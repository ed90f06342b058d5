//! Watch fan-out and idle sessions, on a fresh server of each kind:
//! `--watchers` sessions each hold a data watch on one znode and one setData
//! fires them all; the time until the last session hears of it is the row
//! (median of three rounds, after untimed rounds for `--warm` seconds). The
//! same sessions, idle, give the server's resident memory per session, over
//! all of them and over the second half alone (the marginal cost).

use super::{rss_kib, Args};
use std::time::{Duration, Instant};
use zkd_client_tests::{connect, persistent};
use zookeeper_client as zk;

/// Rounds of watch, setData, notify.
const ROUNDS: usize = 3;
/// Sessions connecting at once.
const CONNECT_BATCH: usize = 250;

/// One server's fan-out and session memory.
pub struct Fanout {
    /// setData sent -> every watcher notified, per round, ms.
    pub notified_ms: Vec<f64>,
    /// Resident bytes the idle sessions added, per session.
    pub rss_per_session: f64,
    /// The same for the second half of them alone: the cost of one more
    /// session, without the memory the process had freed before it began
    /// (which the first sessions take up, so the whole figure grows with
    /// the number of sessions even where each costs the same).
    pub marginal_rss_per_session: f64,
}

impl Fanout {
    fn median_ms(&self) -> f64 {
        let mut sorted = self.notified_ms.clone();
        sorted.sort_by(f64::total_cmp);
        sorted.get(sorted.len() / 2).copied().unwrap_or(f64::NAN)
    }
}

/// Connects `args.watchers` sessions to the server at `addr` (process
/// `pid`), reads its memory, then times the rounds.
pub async fn measure(addr: &str, pid: u32, args: &Args) -> Fanout {
    let writer = connect(addr, Duration::from_secs(30)).await;
    let _ = writer.create("/fan", b"", &persistent()).await;
    let empty = rss_kib(pid);
    let mut sessions = Vec::with_capacity(args.watchers);
    let half = args.watchers / 2;
    connect_up_to(addr, &mut sessions, half).await;
    let at_half = settled_rss_kib(pid).await;
    connect_up_to(addr, &mut sessions, args.watchers).await;
    let full = settled_rss_kib(pid).await;
    let per = |kib: u64, n: usize| kib as f64 * 1024.0 / n.max(1) as f64;
    let rss_per_session = per(full.saturating_sub(empty), args.watchers);
    let marginal_rss_per_session = per(full.saturating_sub(at_half), args.watchers - half);
    let warm = Instant::now();
    let mut round = 0;
    while warm.elapsed() < Duration::from_secs(args.warm) {
        notify_all(&writer, &sessions, round).await;
        round += 1;
    }
    let mut notified_ms = Vec::new();
    for round in round..round + ROUNDS {
        notified_ms.push(notify_all(&writer, &sessions, round).await);
    }
    Fanout {
        notified_ms,
        rss_per_session,
        marginal_rss_per_session,
    }
}

/// Connects sessions to `addr`, [`CONNECT_BATCH`] at a time, until `sessions` holds `n`.
pub(super) async fn connect_up_to(addr: &str, sessions: &mut Vec<zk::Client>, n: usize) {
    while sessions.len() < n {
        let batch = CONNECT_BATCH.min(n - sessions.len());
        let connecting = (0..batch).map(|_| {
            let addr = addr.to_owned();
            tokio::spawn(async move { connect(&addr, Duration::from_secs(30)).await })
        });
        for c in connecting.collect::<Vec<_>>() {
            sessions.push(c.await.expect("connect task"));
        }
    }
}

/// The server's RSS once its per-connection buffers settled (idle a moment).
async fn settled_rss_kib(pid: u32) -> u64 {
    tokio::time::sleep(Duration::from_millis(500)).await;
    rss_kib(pid)
}

/// One round: every session watches `/fan`, `writer` sets it; the time from
/// the setData sent to the last session notified, ms.
async fn notify_all(writer: &zk::Client, sessions: &[zk::Client], round: usize) -> f64 {
    let mut heard = Vec::with_capacity(sessions.len());
    for s in sessions {
        let (_, _, watcher) = s.get_and_watch_data("/fan").await.expect("watch");
        heard.push(tokio::spawn(async move {
            watcher.changed().await;
            Instant::now()
        }));
    }
    let sent = Instant::now();
    writer
        .set_data("/fan", format!("{round}").as_bytes(), None)
        .await
        .expect("setData");
    let mut last = sent;
    for h in heard {
        let at = tokio::time::timeout(Duration::from_secs(60), h)
            .await
            .expect("every watcher notified within 60 s")
            .expect("watch task");
        last = last.max(at);
    }
    last.duration_since(sent).as_secs_f64() * 1000.0
}

/// Prints both servers' rows with their ratios.
pub fn print(ours: &Fanout, theirs: &Fanout, args: &Args) {
    println!();
    println!(
        "| {} sessions, fresh server | zkd | zookeeper | zkd / zookeeper |",
        args.watchers
    );
    println!("|---|---|---|---|");
    let (a, b) = (ours.median_ms(), theirs.median_ms());
    println!(
        "| one setData -> every session's watch notified (median of {ROUNDS}) | {a:.1} ms | {b:.1} ms | {:.2}x |",
        a / b
    );
    let (a, b) = (ours.rss_per_session, theirs.rss_per_session);
    println!(
        "| RSS per idle session | {a:.0} B | {b:.0} B | {:.2}x |",
        a / b.max(1.0)
    );
    let (a, b) = (
        ours.marginal_rss_per_session,
        theirs.marginal_rss_per_session,
    );
    println!(
        "| RSS per idle session, the second half's alone (marginal) | {a:.0} B | {b:.0} B | {:.2}x |",
        a / b.max(1.0)
    );
}
