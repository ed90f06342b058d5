//! The snapshot stall: a fresh server of each kind holding `--stall-nodes`
//! znodes, with a small snapCount, takes setData under the timed load, so
//! snapshots of the whole tree are written while clients wait on writes.
//! The p99.9 latency is the row that matters: a snapshot that blocks the
//! write path shows there first.

use super::{populate, row, run_phase, warm_up, Args, Phase, PhaseResult};

/// snapCount for both servers: each snapshots after snapCount/2 plus a
/// random share of snapCount/2 txns, so several land in one phase.
pub const SNAP_COUNT: &str = "20000";

/// One server's write phase over a large tree, and how many snapshots it
/// finished during it.
pub struct Stall {
    pub phase: PhaseResult,
    pub snapshots: usize,
}

/// Fills the server at `addr` (process `pid`), then times writes; `log`
/// reads the server's log, where `saved` marks each finished snapshot.
pub async fn measure(
    addr: &str,
    pid: u32,
    args: &Args,
    log: impl Fn() -> String,
    saved: &str,
) -> Stall {
    populate(addr, args.stall_nodes, args.payload).await;
    let addrs = [addr.to_owned()];
    warm_up(&addrs, &[pid], args, Phase::Write).await;
    let before = log().matches(saved).count();
    let timed = Args {
        seconds: args.stall_seconds,
        ..args.clone()
    };
    let phase = run_phase(&addrs, &[pid], &timed, Phase::Write).await;
    Stall {
        phase,
        snapshots: log().matches(saved).count().saturating_sub(before),
    }
}

/// Prints both rows and the tail-latency ratios.
pub fn print(ours: &Stall, theirs: &Stall, args: &Args) {
    println!();
    println!(
        "snapshot stall: setData over {} znodes, snapCount {SNAP_COUNT}, {} s; snapshots saved: zkd {}, zookeeper {}",
        args.stall_nodes, args.stall_seconds, ours.snapshots, theirs.snapshots
    );
    super::header();
    row("zkd", "write", &ours.phase);
    row("zookeeper", "write", &theirs.phase);
    let ratio = |q: f64| ours.phase.pct_ms(q) / theirs.phase.pct_ms(q).max(0.001);
    println!(
        "| ratio zkd/zookeeper | p99 {:.2}x | p99.9 {:.2}x | max {:.2}x | throughput {:.2}x |",
        ratio(0.99),
        ratio(0.999),
        ours.phase.latency_us.max() as f64 / theirs.phase.latency_us.max().max(1) as f64,
        ours.phase.throughput() / theirs.phase.throughput()
    );
}
