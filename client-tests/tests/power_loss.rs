//! Power loss: every acknowledged write survives losing everything that was
//! not fsynced.
//!
//! `kill -9` (tests/durability.rs) keeps the kernel page cache, so it passes
//! even if zkd never fsyncs. Here zkd's dataDir and dataLogDir are on
//! `zkd-lazyfs` (src/bin/lazyfs.rs), which keeps unsynced data in its own
//! memory: killing it is a power cut that leaves only what zkd fsynced. The
//! test goes red if zkd acknowledges a write before fsyncing it.
//!
//! Needs root and /dev/fuse; without them it fails (it does not skip), naming
//! client-tests/run-all.sh.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use zkd_client_tests::lazyfs::{check_fuse_available, LazyFsMount};
use zkd_client_tests::{connect, persistent, within, ServerOptions, ZkdProcess};
use zookeeper_client as zk;

const SESSION: Duration = Duration::from_secs(10);
/// Small creates per cycle.
const CREATES: usize = 300;
/// Large creates per quiet cycle: records of hundreds of KiB in the log.
const LARGE_CREATES: usize = 4;
const LARGE_BYTES: usize = 200 * 1024;
/// Power cuts: after quiet batches, then (the last) with writes in flight.
const CYCLES: usize = 3;
/// Concurrent writers in the in-flight cycle.
const WRITERS: usize = 4;
/// How long writers run before the in-flight power cut: long enough for
/// many group commits, so the cut lands among writes in flight.
const IN_FLIGHT_FOR: Duration = Duration::from_millis(1500);
/// Bound on waiting for the in-flight writers to make progress.
const PROGRESS_TIMEOUT: Duration = Duration::from_secs(20);

/// Path -> data of every create the server acknowledged.
type Acked = Arc<Mutex<BTreeMap<String, Vec<u8>>>>;

/// The data of the znode at `path`: recognisable, varied in length.
fn data_for(path: &str) -> Vec<u8> {
    format!("{path}:{}", "x".repeat(path.len() % 64)).into_bytes()
}

/// Large data for `path`.
fn large_data_for(path: &str) -> Vec<u8> {
    path.bytes().cycle().take(LARGE_BYTES).collect()
}

/// Sends `CREATES` small and `LARGE_CREATES` large creates under `parent`
/// back to back on one session, then collects the replies, recording the
/// acknowledged ones.
async fn pipelined_creates(client: &zk::Client, parent: &str, acked: &Acked) {
    let small = (0..CREATES).map(|i| {
        let path = format!("{parent}/n{i}");
        let data = data_for(&path);
        (path, data)
    });
    let large = (0..LARGE_CREATES).map(|i| {
        let path = format!("{parent}/large{i}");
        let data = large_data_for(&path);
        (path, data)
    });
    let nodes: Vec<(String, Vec<u8>)> = small.chain(large).collect();
    let options = persistent();
    // The client sends each request when `create` is called; awaiting only
    // collects the replies.
    let replies: Vec<_> = nodes
        .iter()
        .map(|(path, data)| client.create(path, data, &options))
        .collect();
    for ((path, data), reply) in nodes.iter().zip(replies) {
        within(reply)
            .await
            .unwrap_or_else(|e| panic!("create {path}: {e}"));
        acked.lock().unwrap().insert(path.clone(), data.clone());
    }
}

/// Starts writers that create under `parent` until their session breaks.
async fn start_writers(
    addr: &str,
    parent: &str,
    acked: &Acked,
) -> Vec<tokio::task::JoinHandle<()>> {
    let mut writers = Vec::new();
    for w in 0..WRITERS {
        let client = connect(addr, SESSION).await;
        let acked = acked.clone();
        let parent = parent.to_owned();
        writers.push(tokio::spawn(async move {
            for i in 0.. {
                let path = format!("{parent}/w{w}-{i}");
                let data = data_for(&path);
                let reply = tokio::time::timeout(
                    Duration::from_secs(5),
                    client.create(&path, &data, &persistent()),
                )
                .await;
                match reply {
                    Ok(Ok(_)) => {
                        acked.lock().unwrap().insert(path, data);
                    }
                    _ => break,
                }
            }
        }));
    }
    writers
}

/// Asserts that every acknowledged create is present with its data.
async fn assert_all_present(client: &zk::Client, acked: &BTreeMap<String, Vec<u8>>, cycle: usize) {
    let paths: Vec<&String> = acked.keys().collect();
    let replies: Vec<_> = paths.iter().map(|p| client.get_data(p)).collect();
    let mut lost = Vec::new();
    for (path, reply) in paths.iter().zip(replies) {
        match within(reply).await {
            Ok((data, _)) => assert_eq!(
                data, acked[*path],
                "cycle {cycle}: {path} came back with other data"
            ),
            Err(zk::Error::NoNode) => lost.push(*path),
            Err(e) => panic!("cycle {cycle}: get_data {path}: {e}"),
        }
    }
    assert!(
        lost.is_empty(),
        "cycle {cycle}: {} of {} acknowledged creates lost in the power cut, e.g. {:?}",
        lost.len(),
        acked.len(),
        &lost[..lost.len().min(5)]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_writes_survive_power_loss() {
    if let Err(e) = check_fuse_available() {
        panic!("{e}");
    }
    let started = Instant::now();
    let root = tempfile::tempdir().expect("tempdir");
    let backing = root.path().join("backing");
    let mnt = root.path().join("mnt");
    std::fs::create_dir(&backing).unwrap();
    std::fs::create_dir(&mnt).unwrap();
    // Declared before the server so that it drops after it: zkd dies first.
    let mut fs = LazyFsMount::mount(
        Path::new(env!("CARGO_BIN_EXE_zkd-lazyfs")),
        &backing,
        &mnt,
        &root.path().join("lazyfs.log"),
    );
    let options = ServerOptions::default()
        .with("dataDir", &mnt.join("data").display().to_string())
        .with("dataLogDir", &mnt.join("log").display().to_string());
    let mut server = ZkdProcess::start_with(options);

    let acked: Acked = Arc::default();
    for cycle in 0..CYCLES {
        let client = connect(&server.addr(), SESSION).await;
        let parent = format!("/c{cycle}");
        within(client.create(&parent, b"", &persistent()))
            .await
            .unwrap();
        acked.lock().unwrap().insert(parent.clone(), Vec::new());

        let in_flight = cycle == CYCLES - 1;
        let writers = if in_flight {
            let before = acked.lock().unwrap().len();
            let writers = start_writers(&server.addr(), &parent, &acked).await;
            let start = Instant::now();
            let deadline = start + PROGRESS_TIMEOUT;
            while (start.elapsed() < IN_FLIGHT_FOR
                || acked.lock().unwrap().len() < before + CREATES)
                && Instant::now() < deadline
            {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            writers
        } else {
            pipelined_creates(&client, &parent, &acked).await;
            Vec::new()
        };

        // The power cut: the filesystem first (the disk's cache is gone),
        // then the server, which can no longer reach any disk.
        let cut = Instant::now();
        fs.power_loss();
        server.kill9();
        for w in writers {
            within(w).await.expect("writer task");
        }
        let cut_took = cut.elapsed();
        let acked_now = acked.lock().unwrap().clone();
        let this_cycle = acked_now.keys().filter(|p| p.starts_with(&parent)).count();
        assert!(
            this_cycle > CREATES / 2,
            "cycle {cycle}: too little progress ({this_cycle} acknowledged) to test anything; \
             zkd log:\n{}",
            server.log()
        );
        eprintln!(
            "cycle {cycle}: {this_cycle} acknowledged creates{}, power cut took {cut_took:?}, \
             {:?} since the start",
            if in_flight {
                " (cut with writes in flight)"
            } else {
                ""
            },
            started.elapsed()
        );

        fs.remount();
        server.restart();
        let client = connect(&server.addr(), SESSION).await;
        assert_all_present(&client, &acked_now, cycle).await;
    }
}
