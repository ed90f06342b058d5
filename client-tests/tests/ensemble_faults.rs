//! Faults around a real 3-member ensemble:
//!
//! * a leader cut off from the other members by a network partition (each
//!   member in a network namespace of its own, `zkd_client_tests::netns`)
//!   never answers a `sync` followed by a read with a value older than a write
//!   the new leader acknowledged (ZOOKEEPER-1675), and stops serving;
//! * garbage, oversized lengths, stalled frames and strangers on the peer
//!   ports close those connections only: writes go on, the leader stays;
//! * Debian's `zkServer.sh status` reads each member's `Mode`;
//! * the sequential-ephemeral election recipe keeps at most one leader while
//!   the ensemble's leader is killed under it;
//! * a follower whose disk is far slower than the leader's stays within its
//!   memory budget, falls behind, and catches up.

use std::collections::BTreeSet;
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::watch;
use zkd_client_tests::ensemble::Ensemble;
use zkd_client_tests::oracle::require_tool;
use zkd_client_tests::process::four_letter_word_at;
use zkd_client_tests::{connect, persistent, within, ServerOptions};
use zkd_protocol::peer::zab::{quorum_packet, FollowerInfo, ZAB_PROTOCOL_VERSION};
use zkd_protocol::peer::{ElectionHello, ElectionMessage, PeerMessage, QuorumPacket};
use zookeeper_client as zk;

const TICK_MS: u64 = 500;
const SESSION: Duration = Duration::from_secs(6);

/// Options for one member: tickTime 500 ms, initLimit 10, this syncLimit.
fn member_options(sync_limit: u64) -> ServerOptions {
    ServerOptions {
        tick_time_ms: TICK_MS,
        ..ServerOptions::default()
    }
    .with("initLimit", "10")
    .with("syncLimit", &sync_limit.to_string())
}

/// The epoch (high 32 bits of `Zxid:` in `srvr`) member `i` is in, if it serves.
fn epoch(ensemble: &Ensemble, i: usize) -> Option<u64> {
    let m = &ensemble.members[i];
    let reply = four_letter_word_at(&m.host, m.port, "srvr").ok()?;
    let zxid = reply.lines().find_map(|l| l.strip_prefix("Zxid: "))?;
    let zxid = u64::from_str_radix(zxid.trim().trim_start_matches("0x"), 16).ok()?;
    Some(zxid >> 32)
}

/// Fails the test if any member's log shows a panic.
fn assert_no_panic(ensemble: &Ensemble) {
    for (i, m) in ensemble.members.iter().enumerate() {
        let log = m.log();
        assert!(
            !log.contains("panicked"),
            "member {} panicked:\n{log}",
            i + 1
        );
    }
}

/// The heavy tests (the peer-port attacks, the slow follower's 400 MiB of
/// writes) take turns: on 2 cores, one's load starves the other's members of
/// their heartbeats, and a failure would say nothing about zkd.
static HEAVY: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The last `n` lines of each member's log, for a failure's message.
fn log_tails(ensemble: &Ensemble, n: usize) -> String {
    let mut out = String::new();
    for (i, m) in ensemble.members.iter().enumerate() {
        let log = m.log();
        let lines: Vec<&str> = log.lines().collect();
        out.push_str(&format!("---- member {} (last {n} lines) ----\n", i + 1));
        out.push_str(&lines[lines.len().saturating_sub(n)..].join("\n"));
        out.push('\n');
    }
    out
}

/// Retries `f` (each attempt bounded by 3 s) until it succeeds or `limit` passes.
async fn eventually<T, F, Fut>(limit: Duration, what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, zk::Error>>,
{
    let deadline = Instant::now() + limit;
    loop {
        match tokio::time::timeout(Duration::from_secs(3), f()).await {
            Ok(Ok(v)) => return v,
            Ok(Err(e)) if Instant::now() > deadline => panic!("{what}: still failing: {e}"),
            Err(_) if Instant::now() > deadline => panic!("{what}: still timing out"),
            _ => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

#[path = "ensemble_faults/election_recipe.rs"]
mod election_recipe;
#[path = "ensemble_faults/partition.rs"]
mod partition;
#[path = "ensemble_faults/peer_ports.rs"]
mod peer_ports;
#[path = "ensemble_faults/slow_follower.rs"]
mod slow_follower;
#[path = "ensemble_faults/zkserver_status.rs"]
mod zkserver_status;
