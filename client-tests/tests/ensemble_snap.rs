//! A SNAP of a large tree streams both ways: the leader writes the image
//! from its live tree as the follower reads it, and the follower stages and
//! loads it a chunk at a time. Neither member's peak memory grows by the
//! image's size, as it did when the image was built whole (three times on
//! the follower: reassembled, copied to storage, decoded).

use std::time::Duration;
use zkd_client_tests::ensemble::Ensemble;
use zkd_client_tests::{connect, persistent, within, ServerOptions};

const SESSION: Duration = Duration::from_secs(10);
const NODES: usize = 96;
/// Under jute's default 1 MiB limit on a request.
const NODE_BYTES: usize = 1_000_000;
const IMAGE_BYTES: u64 = (NODES * NODE_BYTES) as u64;

fn data_of(i: usize) -> Vec<u8> {
    (0..NODE_BYTES).map(|j| (j * 7 + i * 13) as u8).collect()
}

/// A field of /proc/PID/status, in bytes.
fn status_bytes(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    let line = status
        .lines()
        .find(|l| l.starts_with(field))
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"));
    let kib: u64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .expect("a size in kB");
    kib * 1024
}

/// Resets the peak resident size the kernel reports as VmHWM.
fn reset_peak(pid: u32) {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").expect("clear_refs");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snap_of_a_large_tree_streams_without_holding_the_image() {
    let options = ServerOptions {
        tick_time_ms: 500,
        ..ServerOptions::default()
    }
    .with("snapCount", "40");
    let mut ensemble = Ensemble::start_with(3, options);
    let leader = ensemble.leader().expect("a leader");
    let client = connect(&ensemble.connect_string(&[leader]), SESSION).await;
    within(client.create("/big", b"", &persistent()))
        .await
        .unwrap();
    for i in 0..NODES {
        let path = format!("/big/n{i:03}");
        within(client.create(&path, &data_of(i), &persistent()))
            .await
            .unwrap();
    }
    drop(client);

    // A member gets a new disk. After a restart the leader's history starts
    // at its latest snapshot, so the empty member can only be sent a SNAP.
    let newcomer = (0..3).find(|i| *i != leader).unwrap();
    let others: Vec<usize> = (0..3).filter(|i| *i != newcomer).collect();
    for member in &mut ensemble.members {
        member.kill9();
    }
    ensemble.members[newcomer].wipe_data();
    for &i in &others {
        ensemble.members[i].restart();
    }
    ensemble.wait_until_serving(&others);
    let leader = ensemble.leader().expect("a leader of the two");
    let leader_pid = ensemble.members[leader].pid().expect("leader running");
    reset_peak(leader_pid);
    let leader_before = status_bytes(leader_pid, "VmRSS:");

    ensemble.members[newcomer].restart();
    ensemble.wait_until_serving(&[newcomer]);
    let newcomer_pid = ensemble.members[newcomer].pid().expect("newcomer running");
    let leader_peak = status_bytes(leader_pid, "VmHWM:");
    let newcomer_peak = status_bytes(newcomer_pid, "VmHWM:");

    let reader = connect(&ensemble.connect_string(&[newcomer]), SESSION).await;
    within(reader.sync("/big")).await.unwrap();
    for i in 0..NODES {
        let (data, _) = within(reader.get_data(&format!("/big/n{i:03}")))
            .await
            .unwrap();
        assert!(data == data_of(i), "node {i} arrived intact");
    }
    let leader_log = ensemble.members[leader].log();
    assert!(
        leader_log.contains("leader: snapshot sent"),
        "the leader synced the newcomer by SNAP:\n{leader_log}"
    );

    let mib = |b: u64| b / (1 << 20);
    eprintln!(
        "image {} MiB; leader grew by {} MiB at peak; newcomer peak {} MiB",
        mib(IMAGE_BYTES),
        mib(leader_peak.saturating_sub(leader_before)),
        mib(newcomer_peak)
    );
    // Building the image whole would add all of it to the leader.
    assert!(
        leader_peak.saturating_sub(leader_before) < IMAGE_BYTES / 4,
        "the leader held the image: grew by {} MiB",
        mib(leader_peak - leader_before)
    );
    // The newcomer must hold the tree itself (about the image's size) and a
    // process's base (about 30 MiB), and nothing near a second copy.
    assert!(
        newcomer_peak < IMAGE_BYTES + (64 << 20),
        "the newcomer held the image besides the tree: peak {} MiB",
        mib(newcomer_peak)
    );
}
