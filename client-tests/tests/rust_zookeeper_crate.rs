//! The sync Rust `zookeeper` crate (bonifaido/rust-zookeeper 0.8) and its
//! recipes, run against Apache ZooKeeper 3.8 (the oracle) and against zkd.
//!
//! This crate has no createContainer: `create(.., CreateMode::Container)`
//! sends opcode 1 (create) with flags 4, and its queue and leader-latch
//! recipes create their directories that way. ZooKeeper makes a container only
//! for opcode 19; opcodes 1 and 15 with flags 4 give an ordinary persistent
//! node that the container reaper never removes (inside a multi, by contrast,
//! ZooKeeper rebuilds each create from its flags). Each scenario runs on both
//! servers with a 100 ms container check interval, waits well past several
//! checks, and requires:
//!
//! - the outcomes the recipes depend on, stated explicitly (they hold on the
//!   oracle), and
//! - the same observations on both servers, zxids included (zkd assigns the
//!   same zxids as ZooKeeper to the same ops from a fresh server).
//!
//! Every wait is bounded: a whole scenario runs on its own thread with a
//! deadline, and a queue `take()` (which blocks for ever when its directory
//! is gone) runs on a thread of its own.

use std::fmt::Debug;
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};
use zkd_client_tests::oracle::ZooKeeperProcess;
use zkd_client_tests::{ServerOptions, ZkdProcess};
use zookeeper::recipes::leader::LeaderLatch;
use zookeeper::recipes::queue::ZkQueue;
use zookeeper::{Acl, CreateMode, Stat, ZkResult, ZooKeeper};
use zookeeper_client as zkc;

/// The container check interval given to both servers, in milliseconds.
const CHECK_INTERVAL_MS: &str = "100";
/// An idle period spanning ten container checks.
const PAST_CHECKS: Duration = Duration::from_millis(1000);
/// Bound for one blocking recipe call (`take`, gaining leadership).
const RECIPE_TIMEOUT: Duration = Duration::from_secs(5);
/// Bound for a whole scenario against one server.
const SCENARIO_TIMEOUT: Duration = Duration::from_secs(60);
/// Session timeout requested by the clients.
const SESSION_TIMEOUT: Duration = Duration::from_secs(10);
/// The `ephemeralOwner` a server stores for a real container. Clients never
/// see it: ZooKeeper reports 0 for containers and TTL nodes.
const CONTAINER_OWNER: i64 = i64::MIN;

/// Observations of one scenario against one server: ordered `(label, value)` pairs.
#[derive(Default)]
struct Obs(Vec<(String, String)>);

impl Obs {
    fn push(&mut self, label: &str, value: impl Into<String>) {
        self.0.push((label.to_owned(), value.into()));
    }

    /// Records `exists(path)` as two entries: `label` (the shape of the node,
    /// checked explicitly) and `label zxids` (compared between servers only).
    fn stat(&mut self, label: &str, zk: &ZooKeeper, path: &str) {
        match zk.exists(path, false) {
            Ok(Some(stat)) => {
                self.push(label, shape(&stat));
                self.push(
                    &format!("{label} zxids"),
                    format!(
                        "czxid={:#x} mzxid={:#x} pzxid={:#x}",
                        stat.czxid, stat.mzxid, stat.pzxid
                    ),
                );
            }
            other => {
                self.push(label, format!("{other:?}"));
                self.push(&format!("{label} zxids"), "-");
            }
        }
    }

    fn get(&self, label: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(l, _)| l == label)
            .map(|(_, v)| v.as_str())
    }
}

/// A stat without its zxids and times; session ids masked as `session`.
fn shape(stat: &Stat) -> String {
    let owner = match stat.ephemeral_owner {
        0 => "0".to_owned(),
        CONTAINER_OWNER => "container".to_owned(),
        _ => "session".to_owned(),
    };
    format!(
        "owner={owner} version={} cversion={} aversion={} len={} children={}",
        stat.version, stat.cversion, stat.aversion, stat.data_length, stat.num_children
    )
}

/// `Ok(..)`/`Err(..)` of a crate call, for the record.
fn show<T: Debug>(result: ZkResult<T>) -> String {
    format!("{result:?}")
}

/// A queue item as text, for the record.
fn show_item(result: ZkResult<Vec<u8>>) -> String {
    show(result.map(|data| String::from_utf8_lossy(&data).into_owned()))
}

/// Runs `f` on its own thread; None if it has not finished within `limit`
/// (the thread is then left blocked: it holds only client handles).
fn bounded<T: Send + 'static>(
    limit: Duration,
    f: impl FnOnce() -> T + Send + 'static,
) -> Option<T> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(limit).ok()
}

/// Polls `pred` every 10 ms for at most `limit`.
fn wait_until(limit: Duration, pred: impl Fn() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while !pred() {
        if Instant::now() > deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(10));
    }
    true
}

/// Connects the crate's client and waits (within the scenario's bound) until
/// its session is established, so sessions are created in program order.
fn connect(addr: &str) -> Arc<ZooKeeper> {
    let zk = ZooKeeper::connect(addr, SESSION_TIMEOUT, |_| {}).expect("zookeeper::connect");
    zk.exists("/", false).expect("first request");
    Arc::new(zk)
}

/// `queue.take()` bounded by [`RECIPE_TIMEOUT`].
fn take(queue: &Arc<ZkQueue>) -> String {
    let queue = Arc::clone(queue);
    bounded(RECIPE_TIMEOUT, move || show_item(queue.take()))
        .unwrap_or_else(|| format!("take still blocked after {RECIPE_TIMEOUT:?}"))
}

/// (a) `ZkQueue`: fill, drain, leave a `take()` blocked on the empty queue,
/// idle past several container checks, then offer again.
fn queue_scenario(addr: &str) -> Obs {
    let mut obs = Obs::default();
    let zk = connect(addr);
    let queue = Arc::new(ZkQueue::new(Arc::clone(&zk), "/queue".into()).expect("ZkQueue::new"));
    obs.stat("/queue created", &zk, "/queue");
    for item in ["a", "b", "c"] {
        obs.push(&format!("offer {item}"), show(queue.offer(item.into())));
    }
    for i in 1..=3 {
        obs.push(&format!("take #{i}"), take(&queue));
    }
    obs.stat("/queue drained", &zk, "/queue");
    let blocked = {
        let queue = Arc::clone(&queue);
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            let _ = tx.send(show_item(queue.take()));
        });
        rx
    };
    thread::sleep(PAST_CHECKS);
    obs.stat("/queue after idle", &zk, "/queue");
    obs.push("offer d after idle", show(queue.offer("d".into())));
    obs.push(
        "take blocked across idle",
        blocked
            .recv_timeout(RECIPE_TIMEOUT)
            .unwrap_or_else(|_| format!("still blocked after {RECIPE_TIMEOUT:?}")),
    );
    obs.push("offer e", show(queue.offer("e".into())));
    obs.push("take e", take(&queue));
    obs.stat("/queue at end", &zk, "/queue");
    obs
}

/// (b) `LeaderLatch` under `/leader/group` (both levels created with flags 4):
/// the first latch leads, stops, the second takes over and stops; with no
/// participants left the parents stay, and a newcomer numbers on from them.
fn leader_scenario(addr: &str) -> Obs {
    let mut obs = Obs::default();
    let zk1 = connect(addr);
    let zk2 = connect(addr);
    let group = "/leader/group".to_owned();
    let first = LeaderLatch::new(Arc::clone(&zk1), "first".into(), group.clone());
    let second = LeaderLatch::new(Arc::clone(&zk2), "second".into(), group.clone());
    obs.push("first start", show(first.start()));
    obs.push("first path", format!("{:?}", first.path()));
    obs.push("second start", show(second.start()));
    obs.push("second path", format!("{:?}", second.path()));
    obs.push(
        "leadership with both",
        format!(
            "first={} second={}",
            first.has_leadership(),
            second.has_leadership()
        ),
    );
    obs.stat("/leader/group with both", &zk1, "/leader/group");
    obs.push("first stop", show(first.stop()));
    obs.push(
        "second leads after first stops",
        wait_until(RECIPE_TIMEOUT, || second.has_leadership()).to_string(),
    );
    obs.push("second stop", show(second.stop()));
    obs.stat("/leader/group empty", &zk1, "/leader/group");
    thread::sleep(PAST_CHECKS);
    obs.stat("/leader/group after idle", &zk1, "/leader/group");
    obs.stat("/leader after idle", &zk1, "/leader");
    let third = LeaderLatch::new(Arc::clone(&zk2), "third".into(), group);
    obs.push("third start", show(third.start()));
    obs.push("third path", format!("{:?}", third.path()));
    obs.push("third leads", third.has_leadership().to_string());
    obs.push("third stop", show(third.stop()));
    obs
}

/// A real container (createContainer, opcode 19, via `zookeeper-client`)
/// with one child created and deleted: the control showing the reaper runs.
fn make_real_container(addr: &str, path: &str) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    runtime.block_on(async {
        let client = zkd_client_tests::connect(addr, SESSION_TIMEOUT).await;
        let container = zkc::CreateMode::Container.with_acls(zkc::Acls::anyone_all());
        let child = format!("{path}/child");
        zkd_client_tests::within(client.create(path, b"", &container))
            .await
            .expect("createContainer");
        zkd_client_tests::within(client.create(&child, b"", &zkd_client_tests::persistent()))
            .await
            .expect("create child");
        zkd_client_tests::within(client.delete(&child, None))
            .await
            .expect("delete child");
    });
}

/// (c) Plain `create(.., CreateMode::Container)` (opcode 1, flags 4): used
/// and drained, or never used, the node stays an ordinary persistent node,
/// while a real container drained alongside it is reaped. ZooKeeper reports
/// `ephemeralOwner` 0 for containers too, so outliving the reaper is what
/// tells the two apart.
fn plain_create_scenario(addr: &str) -> Obs {
    let mut obs = Obs::default();
    let zk = connect(addr);
    let open = || Acl::open_unsafe().clone();
    obs.push(
        "create /plain flags 4",
        show(zk.create("/plain", b"p".to_vec(), open(), CreateMode::Container)),
    );
    obs.stat("/plain created", &zk, "/plain");
    obs.push(
        "create /plain/child",
        show(zk.create("/plain/child", vec![], open(), CreateMode::Persistent)),
    );
    obs.push("delete /plain/child", show(zk.delete("/plain/child", None)));
    obs.stat("/plain drained", &zk, "/plain");
    obs.push(
        "create /unused flags 4",
        show(zk.create("/unused", vec![], open(), CreateMode::Container)),
    );
    // Not looked at now: the reaper may take it at any moment.
    make_real_container(addr, "/real");
    thread::sleep(PAST_CHECKS);
    // The reaper has run since the drain once the real container is gone.
    obs.push(
        "/real reaped (control)",
        wait_until(RECIPE_TIMEOUT, || {
            matches!(zk.exists("/real", false), Ok(None))
        })
        .to_string(),
    );
    obs.stat("/plain after idle", &zk, "/plain");
    obs.stat("/unused after idle", &zk, "/unused");
    obs.push(
        "create /plain/again after idle",
        show(zk.create("/plain/again", vec![], open(), CreateMode::Persistent)),
    );
    obs
}

/// Apache ZooKeeper 3.8 with the short container check interval (the test
/// fails, naming client-tests/run-all.sh, when it is not installed).
fn start_oracle() -> ZooKeeperProcess {
    ZooKeeperProcess::start_with(
        2000,
        &[("znode.container.checkIntervalMs", CHECK_INTERVAL_MS)],
    )
}

/// zkd with the short container check interval.
fn start_zkd() -> ZkdProcess {
    ZkdProcess::start_with(
        ServerOptions::default().with("znode.container.checkIntervalMs", CHECK_INTERVAL_MS),
    )
}

/// Runs `scenario` against a fresh server at `addr`, bounded by [`SCENARIO_TIMEOUT`].
fn run(server: &str, addr: String, scenario: fn(&str) -> Obs) -> Obs {
    bounded(SCENARIO_TIMEOUT, move || scenario(&addr)).unwrap_or_else(|| {
        panic!("the scenario did not finish against {server} within {SCENARIO_TIMEOUT:?}")
    })
}

/// Runs `scenario` against the oracle and against zkd, then requires every
/// `(label, value)` of `expected` on both and identical observations; all
/// mismatches are reported together.
fn check(scenario: fn(&str) -> Obs, expected: &[(&str, &str)]) {
    let oracle = start_oracle();
    let zkd = start_zkd();
    let on_oracle = run("ZooKeeper", oracle.addr(), scenario);
    let on_zkd = run("zkd", zkd.addr(), scenario);
    let mut failures = Vec::new();
    for (server, obs) in [("ZooKeeper", &on_oracle), ("zkd", &on_zkd)] {
        for (label, want) in expected {
            let got = obs.get(label);
            if got != Some(want) {
                failures.push(format!("{server}: {label}: expected {want}, got {got:?}"));
            }
        }
    }
    let labels = |o: &Obs| o.0.iter().map(|(l, _)| l.clone()).collect::<Vec<_>>();
    assert_eq!(
        labels(&on_oracle),
        labels(&on_zkd),
        "scenario labels differ"
    );
    for ((label, want), (_, got)) in on_oracle.0.iter().zip(&on_zkd.0) {
        if want != got {
            failures.push(format!("differs: {label}: ZooKeeper {want} | zkd {got}"));
        }
    }
    let table = |o: &Obs| {
        o.0.iter()
            .map(|(l, v)| format!("  {l}: {v}"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert!(
        failures.is_empty(),
        "{} mismatch(es):\n{}\n\nZooKeeper:\n{}\n\nzkd:\n{}\n\nzkd log:\n{}",
        failures.len(),
        failures.join("\n"),
        table(&on_oracle),
        table(&on_zkd),
        zkd.log()
    );
}

#[test]
fn queue_directory_survives_draining_and_idling() {
    check(
        queue_scenario,
        &[
            (
                "/queue created",
                "owner=0 version=0 cversion=0 aversion=0 len=1 children=0",
            ),
            ("offer a", "Ok(\"/queue/qn-0000000000\")"),
            ("offer b", "Ok(\"/queue/qn-0000000001\")"),
            ("offer c", "Ok(\"/queue/qn-0000000002\")"),
            ("take #1", "Ok(\"a\")"),
            ("take #2", "Ok(\"b\")"),
            ("take #3", "Ok(\"c\")"),
            (
                "/queue after idle",
                "owner=0 version=0 cversion=6 aversion=0 len=1 children=0",
            ),
            ("offer d after idle", "Ok(\"/queue/qn-0000000003\")"),
            ("take blocked across idle", "Ok(\"d\")"),
            ("offer e", "Ok(\"/queue/qn-0000000004\")"),
            ("take e", "Ok(\"e\")"),
            (
                "/queue at end",
                "owner=0 version=0 cversion=10 aversion=0 len=1 children=0",
            ),
        ],
    );
}

#[test]
fn leader_latch_parent_survives_without_participants() {
    check(
        leader_scenario,
        &[
            ("first start", "Ok(())"),
            (
                "first path",
                "Some(\"/leader/group/latch-first-0000000000\")",
            ),
            ("second start", "Ok(())"),
            (
                "second path",
                "Some(\"/leader/group/latch-second-0000000001\")",
            ),
            ("leadership with both", "first=true second=false"),
            ("second leads after first stops", "true"),
            (
                "/leader/group after idle",
                "owner=0 version=0 cversion=4 aversion=0 len=0 children=0",
            ),
            (
                "/leader after idle",
                "owner=0 version=0 cversion=1 aversion=0 len=0 children=1",
            ),
            ("third start", "Ok(())"),
            (
                "third path",
                "Some(\"/leader/group/latch-third-0000000002\")",
            ),
            ("third leads", "true"),
        ],
    );
}

#[test]
fn plain_create_with_container_flag_is_persistent() {
    check(
        plain_create_scenario,
        &[
            ("create /plain flags 4", "Ok(\"/plain\")"),
            (
                "/plain created",
                "owner=0 version=0 cversion=0 aversion=0 len=1 children=0",
            ),
            (
                "/plain after idle",
                "owner=0 version=0 cversion=2 aversion=0 len=1 children=0",
            ),
            (
                "/unused after idle",
                "owner=0 version=0 cversion=0 aversion=0 len=0 children=0",
            ),
            ("/real reaped (control)", "true"),
            ("create /plain/again after idle", "Ok(\"/plain/again\")"),
        ],
    );
}
