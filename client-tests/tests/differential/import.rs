//! Issue 51: Apache ZooKeeper's data directory served by zkd. A seed's ops
//! run on ZooKeeper 3.8 taking a snapshot every few txns (so snapshots are
//! fuzzy), which is then killed (kill -9) under writes with its sessions
//! live; zkd starts on that data directory and ZooKeeper on a copy of it.
//! Both must serve the same tree (data, ACLs, every Stat field, the live
//! sessions' ephemerals), expire those sessions, and then answer the
//! seed's next ops the same: the same zxids, sequence numbers and Stats
//! after the import. ZooKeeper's files are the same bytes afterwards.
//! The way back the same: a seed's ops on zkd, killed with live sessions,
//! `zkd export`, and ZooKeeper started on the export against zkd restarted.

use super::comparison::{compare_next, same_trees};
use super::ops::random_op;
use super::*;
use zkd_client_tests::process::{files_under, four_letter_word};

/// Ops on ZooKeeper before the import, and compared after it.
const OPS_BEFORE: usize = 300;
const OPS_AFTER: usize = 150;
/// The killed ZooKeeper's sessions' timeouts (the raw session's last): long
/// enough to outlive both starts and the first comparison, short enough to
/// wait out, and two ticks apart, so that both servers expire them one at a
/// time in the same order (the order their closeSessions take zxids in).
const SESSIONS_MS: [u64; SESSIONS] = [20_000, 25_000, 30_000];
const RAW_MS: i32 = 35_000;

/// `mntr`'s ephemerals count on `port`.
fn ephemerals(port: u16) -> Option<u64> {
    let mntr = four_letter_word(port, "mntr").ok()?;
    let line = mntr
        .lines()
        .find_map(|l| l.strip_prefix("zk_ephemerals_count"))?;
    line.trim().parse().ok()
}

/// Waits (bounded) until the killed server's sessions expired on both: no
/// ephemeral is left, and the last session's timeout (the raw one's, which
/// may hold none) and two ticks have passed since `started`, by which both
/// servers had started. Else one that expires later would take its zxid
/// among the compared ops, at another point on each server.
async fn expired(ports: [u16; 2], started: Instant) -> Result<(), String> {
    let all_gone = started + Duration::from_millis(RAW_MS as u64 + 4_000);
    let deadline = Instant::now() + Duration::from_millis(RAW_MS as u64 * 2);
    while Instant::now() < deadline {
        if ports.iter().all(|p| ephemerals(*p) == Some(0)) && Instant::now() >= all_gone {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Err(format!(
        "the imported sessions' ephemerals did not expire: {:?}",
        ports.map(ephemerals)
    ))
}

/// Creates znodes under `/w` from a session of its own until aborted. The
/// session (it holds no ephemerals) expires before the others, so its
/// closeSession takes its zxid before theirs on both servers.
fn writer(port: u16) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let c =
            zkd_client_tests::connect(&format!("127.0.0.1:{port}"), Duration::from_secs(12)).await;
        let persistent = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
        let _ = c.create("/w", &[], &persistent).await;
        for i in 0.. {
            if c.create(&format!("/w/{i}"), &[7; 40], &persistent)
                .await
                .is_err()
            {
                break;
            }
        }
    })
}

async fn run_import_seed(seed: u64) -> Result<usize, String> {
    // ZooKeeper snapshots every 10 to 20 txns, in a thread of its own.
    let mut zk = ZooKeeperProcess::start_configured(2000, &[], "snapCount=20\n");
    let mut rng = StdRng::seed_from_u64(seed);
    let before = Target::connect_for(&[zk.port], seed, SESSIONS_MS, RAW_MS).await;
    for _ in 0..OPS_BEFORE {
        before.exec(&random_op(&mut rng)).await;
    }
    let live = ephemerals(zk.port).unwrap_or(0);
    let writes = writer(zk.port);
    tokio::time::sleep(Duration::from_millis(300)).await;
    zk.stop(true);
    writes.abort();
    drop(before);
    let data = zk.data_dir();
    let files = files_under(&data.join("version-2"));
    let restarted = ZooKeeperProcess::start_on_copy_of(2000, &data);
    let options = ServerOptions {
        data_dir: Some(data.clone()),
        ..ServerOptions::default()
    };
    let zkd = ZkdProcess::start_with(options.with("extendedTypesEnabled", "true"));
    let replay = format!(
        "ZKD_IMPORT_SEEDS_ONLY={seed} cargo test -p zkd-client-tests --test differential a_zookeeper_data_dir"
    );
    let ports = (restarted.port, zkd.port);
    let compared = served_alike(ports, (&mut rng, seed), Some(live), &replay).await?;
    assert!(
        files_under(&data.join("version-2")) == files,
        "zkd changed ZooKeeper's files"
    );
    Ok(compared)
}

/// The imported (or exported) trees, right after both servers start: the
/// same nodes, and the live sessions' ephemerals; then both expire those
/// sessions, and the seed's next ops are compared on both.
async fn served_alike(
    (theirs_port, ours_port): (u16, u16),
    (rng, seed): (&mut StdRng, u64),
    live: Option<u64>,
    replay: &str,
) -> Result<usize, String> {
    let started = Instant::now();
    let (theirs, ours) = (
        Target::connect(&[theirs_port], seed).await,
        Target::connect(&[ours_port], seed).await,
    );
    let what = format!("seed {seed}: the trees differ as the servers start");
    same_trees(&theirs, &ours, &what, replay).await?;
    assert_eq!(
        ephemerals(ours_port),
        live,
        "the live sessions' ephemerals are there"
    );
    expired([theirs_port, ours_port], started).await?;
    // The trees after the expiries are compared below; the order in which one
    // expired session's ephemerals went is not: ZooKeeper lists them from a
    // hash set it refilled from the snapshot's walk, which zkd does not
    // replay (without a restart zkd lists them in ZooKeeper's order).
    theirs.forget_events();
    ours.forget_events();
    compare_next(&theirs, &ours, (rng, OPS_AFTER), seed, replay).await
}

/// ZooKeeper's own `SnapshotFormatter` (what `zkSnapShotToolkit.sh` runs)
/// reads the exported snapshot through, its digest included.
fn formatter_reads(version_2: &std::path::Path) {
    let snapshot = std::fs::read_dir(version_2)
        .expect("version-2")
        .map(|e| e.expect("entry").path())
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("snapshot."))
        })
        .expect("a snapshot");
    let out = std::process::Command::new("java")
        .args(["-cp", &zkd_client_tests::oracle::java_classpath()])
        .args(["org.apache.zookeeper.server.SnapshotFormatter", "-d"])
        .arg(&snapshot)
        .output()
        .expect("run SnapshotFormatter");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("Last zxid") && !text.contains("CRC"),
        "SnapshotFormatter on {}: {text}{}",
        snapshot.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

async fn run_export_seed(seed: u64) -> Result<usize, String> {
    let options = ServerOptions::default().with("extendedTypesEnabled", "true");
    let mut first = ZkdProcess::start_with(options);
    let mut rng = StdRng::seed_from_u64(seed);
    let before = Target::connect_for(&[first.port], seed, SESSIONS_MS, RAW_MS).await;
    for _ in 0..OPS_BEFORE {
        before.exec(&random_op(&mut rng)).await;
    }
    let live = ephemerals(first.port);
    first.kill9();
    drop(before);
    let to = tempfile::tempdir().expect("tempdir");
    let exported = std::process::Command::new(zkd_client_tests::process::zkd_binary())
        .args(["export", "--config"])
        .arg(first.config_path())
        .arg("--to")
        .arg(to.path())
        .output()
        .expect("run zkd export");
    assert!(
        exported.status.success(),
        "zkd export: {}",
        String::from_utf8_lossy(&exported.stderr)
    );
    formatter_reads(&to.path().join("version-2"));
    let zk = ZooKeeperProcess::start_on_copy_of(2000, to.path());
    // zkd again on a copy of its files, on a new port as ZooKeeper is: the
    // killed sessions' clients must not find either server and reattach.
    let copy = tempfile::tempdir().expect("tempdir");
    for (path, bytes) in files_under(first.data_dir()) {
        let rel = path
            .strip_prefix(first.data_dir())
            .expect("under the data dir");
        let to = copy.path().join(rel);
        std::fs::create_dir_all(to.parent().expect("a parent")).expect("mkdir");
        std::fs::write(to, bytes).expect("copy");
    }
    let options = ServerOptions {
        data_dir: Some(copy.path().to_owned()),
        ..ServerOptions::default()
    };
    let zkd = ZkdProcess::start_with(options.with("extendedTypesEnabled", "true"));
    let replay = format!(
        "ZKD_EXPORT_SEEDS_ONLY={seed} cargo test -p zkd-client-tests --test differential zkds_export"
    );
    served_alike((zk.port, zkd.port), (&mut rng, seed), live, &replay).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zkds_export_is_served_by_zookeeper_as_zkd_serves_it() {
    // More seeds on demand: ZKD_EXPORT_SEEDS=20.
    let (compared, divergences) = every_seed("ZKD_EXPORT_SEEDS", 1, run_export_seed).await;
    report(&divergences, compared, "Apache ZooKeeper on zkd's export");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zookeeper_data_dir_is_served_as_zookeeper_serves_it() {
    // More seeds on demand: ZKD_IMPORT_SEEDS=20.
    let (compared, divergences) = every_seed("ZKD_IMPORT_SEEDS", 1, run_import_seed).await;
    report(&divergences, compared, "Apache ZooKeeper on the same files");
}
