//! Issue 51, an ensemble moves: a 3-member ZooKeeper 3.8 ensemble runs a
//! seed's ops (snapshots every few txns, so they are fuzzy), then stops
//! under writes so that its members hold different histories:
//! - a follower is killed first (it lags: the others commit more, past a
//!   snapshot or two, so only the history kept before the new leader's
//!   snapshot can DIFF it);
//! - the other follower freezes (SIGSTOP) while the leader logs a write it
//!   can no longer commit, then both are killed: the leader holds a txn
//!   nobody acknowledged.
//!
//! zkd members then start in place, each on its ZooKeeper member's zoo.cfg
//! and data directory: the two followers first (the newer one leads and
//! brings the laggard up by DIFF), then the old leader (cut back by TRUNC,
//! no member gets a SNAP). Apache ZooKeeper restarted the same way on copies
//! of the same directories must serve the same tree (data, ACLs, every
//! Stat, the live sessions' ephemerals); every write ZooKeeper acknowledged
//! is there; a client connected to the ZooKeeper ensemble throughout goes
//! on with its session on zkd; ZooKeeper's files are the same bytes.

use super::comparison::same_trees;
use super::ops::random_op;
use super::*;
use zkd_client_tests::oracle_ensemble::ZooKeeperEnsemble;
use zkd_client_tests::process::files_under;

const OPS_BEFORE: usize = 300;
const TICK_MS: u64 = 2000;
/// Long enough that no session expires before the trees are compared.
const SESSIONS_MS: [u64; SESSIONS] = [60_000, 61_000, 62_000];
const RAW_MS: i32 = 63_000;
/// Both ensembles: a snapshot every 10 to 20 txns (`SNAP_COUNT`), TTL
/// nodes on, sessions of up to 90 s.
const LINES: &str = "snapCount=20\nextendedTypesEnabled=true\nmaxSessionTimeout=90000\n";
const SNAP_COUNT: usize = 20;

/// Creates `/w/<i>` through `port` until aborted, recording each create the
/// ensemble acknowledged.
fn acknowledged_writes(port: u16, acked: Arc<Mutex<Vec<String>>>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let addr = format!("127.0.0.1:{port}");
        let c = zkd_client_tests::connect_detached(&addr, Duration::from_secs(12)).await;
        let persistent = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
        let _ = c.create("/w", &[], &persistent).await;
        for i in 0.. {
            let path = format!("/w/{i}");
            if c.create(&path, &[7; 40], &persistent).await.is_err() {
                break;
            }
            acked.lock().unwrap().push(path);
        }
    })
}

/// How many writes were acknowledged, once more than `after` are.
async fn more_than(acked: &Mutex<Vec<String>>, after: usize) -> usize {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let n = acked.lock().unwrap().len();
        if n > after {
            return n;
        }
        assert!(
            Instant::now() < deadline,
            "no write acknowledged after {after}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Stops the ensemble as the crate doc says; returns the members in the
/// order they stopped (laggard, frozen follower, leader) and the writes
/// that were acknowledged.
async fn stop_under_writes(zk: &mut ZooKeeperEnsemble) -> ([usize; 3], Vec<String>) {
    let leader = zk.leader().expect("a leader");
    let followers: Vec<usize> = (0..3).filter(|i| *i != leader).collect();
    let order = [followers[0], followers[1], leader];
    let acked = Arc::new(Mutex::new(Vec::new()));
    let port = zk.members[leader].port;
    let writes = acknowledged_writes(port, acked.clone());
    let addr = format!("127.0.0.1:{port}");
    let late = zkd_client_tests::connect_detached(&addr, Duration::from_secs(20)).await;
    let n = more_than(&acked, 0).await;
    zk.kill9(order[0]);
    // The other two go on committing without it, past a snapshot or two
    // (one every 10 to 20 txns): the laggard is then behind the new
    // leader's snapshot, and only its logged history can DIFF it.
    more_than(&acked, n + 2 * SNAP_COUNT).await;
    zk.members[order[1]].pause();
    // The leader logs this write (behind the writer's, which the frozen
    // follower may have logged); no one else does, so it is never acknowledged.
    let persistent = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
    let unacknowledged = tokio::spawn(async move {
        let _ = late.create("/never-acknowledged", &[], &persistent).await;
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    zk.kill9(order[2]);
    zk.kill9(order[1]);
    writes.abort();
    unacknowledged.abort();
    let acked = acked.lock().unwrap().clone();
    (order, acked)
}

/// Starts zkd on member `i`'s zoo.cfg and dataDir, in place.
fn zkd_in_place_of(zk: &ZooKeeperEnsemble, i: usize) -> ZkdProcess {
    let m = &zk.members[i];
    ZkdProcess::try_start_on(m.config_path(), &m.data_dir(), (&m.host, m.port))
        .unwrap_or_else(|e| panic!("{e}"))
}

/// Waits (bounded) until `members` all serve as leader or follower, one leading.
fn wait_serving(members: &[&ZkdProcess]) -> usize {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let modes: Vec<Option<String>> = members
            .iter()
            .map(|m| zkd_client_tests::process::srvr_mode(&m.four_letter_word("srvr")))
            .collect();
        let serving = modes
            .iter()
            .all(|m| matches!(m.as_deref(), Some("leader" | "follower")));
        if let Some(leader) = modes.iter().position(|m| m.as_deref() == Some("leader")) {
            if serving {
                return leader;
            }
        }
        assert!(
            Instant::now() < deadline,
            "zkd members not serving: {modes:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A `mntr` value of `member`.
fn mntr(member: &ZkdProcess, key: &str) -> Option<u64> {
    let reply = member.four_letter_word("mntr");
    let line = reply.lines().find_map(|l| l.strip_prefix(key))?;
    line.trim().parse().ok()
}

/// zkd members in place of `zk`'s, started in `order`: the first two, then
/// once they serve the last.
fn zkd_in_place(zk: &ZooKeeperEnsemble, order: [usize; 3]) -> [ZkdProcess; 3] {
    let a = zkd_in_place_of(zk, order[0]);
    let b = zkd_in_place_of(zk, order[1]);
    wait_serving(&[&a, &b]);
    let c = zkd_in_place_of(zk, order[2]);
    wait_serving(&[&a, &b, &c]);
    [a, b, c]
}

/// ZooKeeper restarted on copies of `data` in the same `order`.
fn zookeeper_on_copies(data: &[std::path::PathBuf], order: [usize; 3]) -> ZooKeeperEnsemble {
    let mut oracle = ZooKeeperEnsemble::on_copies_of(data, TICK_MS, LINES);
    oracle.restart(order[0]);
    oracle.restart(order[1]);
    oracle.wait_until_serving(&[order[0], order[1]]);
    oracle.restart(order[2]);
    oracle.wait_until_serving(&[0, 1, 2]);
    oracle
}

async fn run_move_seed(seed: u64) -> Result<usize, String> {
    let mut zk = tokio::task::block_in_place(|| {
        ZooKeeperEnsemble::start_ticked_with_lines(3, TICK_MS, LINES)
    });
    let leader_port = zk.members[zk.leader().expect("a leader")].port;
    let mut rng = StdRng::seed_from_u64(seed);
    let before = Target::connect_for(&[leader_port], seed, SESSIONS_MS, RAW_MS).await;
    for _ in 0..OPS_BEFORE {
        before.exec(&random_op(&mut rng)).await;
    }
    let stays = stays_connected(&zk.all()).await;
    let (order, acked) = stop_under_writes(&mut zk).await;
    drop(before);
    let data: Vec<_> = zk.members.iter().map(|m| m.data_dir()).collect();
    let files: Vec<_> = (data.iter())
        .map(|d| files_under(&d.join("version-2")))
        .collect();
    let zkd = tokio::task::block_in_place(|| zkd_in_place(&zk, order));
    session_went_on(&stays, &zkd, seed).await;
    let oracle = tokio::task::block_in_place(|| zookeeper_on_copies(&data, order));
    let theirs_ports: Vec<u16> = oracle.members.iter().map(|m| m.port).collect();
    let ours_ports: Vec<u16> = zkd.iter().map(|m| m.port).collect();
    let theirs = Target::connect(&theirs_ports, seed).await;
    let ours = Target::connect(&ours_ports, seed).await;
    theirs.settle().await;
    ours.settle().await;
    let replay = format!(
        "ZKD_MOVE_SEEDS_ONLY={seed} cargo test -p zkd-client-tests --test differential an_ensemble_moves"
    );
    let what = format!("seed {seed}: the trees differ after the move");
    same_trees(&theirs, &ours, &what, &replay).await?;
    let tree = ours.dump().await;
    for path in &acked {
        let prefix = format!("{path} ");
        assert!(
            tree.iter().any(|n| n.starts_with(&prefix)),
            "seed {seed}: {path}, acknowledged by ZooKeeper, is missing on zkd"
        );
    }
    synced_by_diff_and_trunc(&zkd, seed);
    let persistent = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
    within(stays.create("/after-the-move", b"", &persistent))
        .await
        .unwrap_or_else(|e| panic!("seed {seed}: a write in the session that stayed: {e}"));
    for (d, before) in data.iter().zip(&files) {
        let after = files_under(&d.join("version-2"));
        assert!(after == *before, "zkd changed ZooKeeper's files in {d:?}");
    }
    Ok(acked.len())
}

/// A client of the whole ensemble, with an ephemeral, that stays connected
/// through the move.
async fn stays_connected(all: &str) -> zk::Client {
    let stays = zk::Client::connector()
        .with_session_timeout(Duration::from_millis(SESSIONS_MS[0]))
        .connect(all);
    let stays = within(stays).await.expect("connect to ZooKeeper");
    let ephemeral = zk::CreateMode::Ephemeral.with_acls(zk::Acls::anyone_all());
    within(stays.create("/stays", b"x", &ephemeral))
        .await
        .expect("create /stays");
    stays
}

/// The laggard (`zkd[0]`) came up by DIFF and the old leader (`zkd[2]`) by
/// TRUNC; no member got a SNAP.
fn synced_by_diff_and_trunc(zkd: &[ZkdProcess; 3], seed: u64) {
    let leader = &zkd[1];
    assert_eq!(
        (mntr(leader, "zk_diff_count"), mntr(leader, "zk_snap_count")),
        (Some(2), Some(0)),
        "seed {seed}: both followers synced by DIFF (or TRUNC), none by SNAP; the leader's log:\n{}",
        leader.log()
    );
    assert!(
        zkd[2].log().contains("follower: truncating its log"),
        "seed {seed}: the old leader dropped its unacknowledged txn by TRUNC; its log:\n{}",
        zkd[2].log()
    );
}

/// The client connected to ZooKeeper throughout is connected to zkd now,
/// in the same session, which still owns its ephemeral.
async fn session_went_on(stays: &zk::Client, zkd: &[ZkdProcess; 3], seed: u64) {
    let logs = || {
        zkd.iter()
            .map(|m| m.log())
            .collect::<Vec<_>>()
            .join("\n----\n")
    };
    let stat = tokio::time::timeout(Duration::from_secs(20), stays.check_stat("/stays"));
    let stat = match stat.await {
        Ok(Ok(stat)) => stat,
        Ok(Err(e)) => panic!(
            "seed {seed}: the session that stayed: {e}; zkd's logs:\n{}",
            logs()
        ),
        Err(_) => panic!(
            "seed {seed}: the session that stayed did not reconnect; zkd's logs:\n{}",
            logs()
        ),
    };
    let owner = stat.map(|s| s.ephemeral_owner);
    let session = stays.session_id().0;
    assert_eq!(
        owner,
        Some(session),
        "seed {seed}: /stays is still its session's"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ensemble_moves_from_zookeeper_to_zkd_in_place() {
    // More seeds on demand: ZKD_MOVE_SEEDS=10 (each runs three ensembles).
    let (acked, divergences) = every_seed("ZKD_MOVE_SEEDS", 1, run_move_seed).await;
    assert!(divergences.is_empty(), "{}", divergences.join("\n\n"));
    assert!(acked > 0, "no acknowledged write was checked");
}
