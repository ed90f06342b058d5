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
//!   the ensemble's leader is killed under it.

use std::collections::BTreeSet;
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
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

// ---------------------------------------------------------------------------
// (a) sync on a partitioned old leader (ZOOKEEPER-1675)
// ---------------------------------------------------------------------------

/// What one sync-then-read by the client of the old leader gave.
#[derive(Debug)]
enum Outcome {
    Read(Vec<u8>),
    Failed(String),
}

/// Client A is connected to the leader L only. L is cut off from the other two
/// members, which elect a new leader and acknowledge `/x = new`. From then on,
/// every `sync("/x")` + `get("/x")` A completes through L must see `new`;
/// failing (connection loss, timeout) is fine, the old value is not.
///
/// ZooKeeper 3.8 answers a sync on the leader locally, so in the window
/// between the new leader's first commit and L noticing it lost its quorum, A
/// reads the old value. To hold that window open for seconds rather than
/// hoping to hit it, L's syncLimit is 12 ticks (6 s before it gives up on its
/// followers) and the followers' is 2 (1 s before they give up on L). The test
/// checks that L still claimed to lead when the write was acknowledged, so a
/// run that missed the window fails instead of passing vacuously. A zkd whose
/// leader answers sync locally, as ZooKeeper's does, fails here with nearly
/// every sync + read after the acknowledgement returning `old`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sync_then_read_on_a_partitioned_old_leader_is_never_stale() {
    const FOLLOWER_SYNC_LIMIT: u64 = 2;
    const LEADER_SYNC_LIMIT: u64 = 12;
    let l = 2;
    let options = (0..3)
        .map(|i| {
            member_options(if i == l {
                LEADER_SYNC_LIMIT
            } else {
                FOLLOWER_SYNC_LIMIT
            })
        })
        .collect();
    // Member 3 first: with equal logs the largest myid of the first quorum leads.
    let mut ensemble = Ensemble::start_in_namespaces(options, &[2, 1, 0]);
    for _ in 0..3 {
        let leader = ensemble.leader().expect("a leader");
        if leader == l {
            break;
        }
        // Re-elect among the other two, which include member 3.
        ensemble.members[leader].restart();
        ensemble.wait_until_serving(&[0, 1, 2]);
    }
    assert_eq!(
        ensemble.leader(),
        Some(l),
        "member {} should lead; logs:\n{}",
        l + 1,
        ensemble.logs()
    );

    let a = connect(&ensemble.members[l].addr(), SESSION).await;
    within(a.create("/x", b"old", &persistent())).await.unwrap();
    let b = connect(&ensemble.connect_string(&[0, 1]), SESSION).await;
    within(b.sync("/x")).await.unwrap();
    assert_eq!(within(b.get_data("/x")).await.unwrap().0, b"old");
    within(a.sync("/x")).await.unwrap();

    // Watch L's srvr from a thread of its own: when does it stop serving?
    let (host, port) = (ensemble.members[l].host.clone(), ensemble.members[l].port);
    let done = Arc::new(AtomicBool::new(false));
    let partitioned = Instant::now();
    ensemble.isolate(l);
    let watcher = {
        let done = done.clone();
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) && partitioned.elapsed() < Duration::from_secs(30) {
                let serving = four_letter_word_at(&host, port, "srvr")
                    .is_ok_and(|r| r.lines().any(|l| l.starts_with("Mode: ")));
                if !serving {
                    return Some(partitioned.elapsed());
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            None
        })
    };

    // A new leader among the other two.
    let deadline = partitioned + Duration::from_secs(20);
    let new_leader = loop {
        if let Some(i) = [0, 1]
            .into_iter()
            .find(|i| ensemble.mode(*i).as_deref() == Some("leader"))
        {
            break i;
        }
        assert!(
            Instant::now() < deadline,
            "no new leader among members 1 and 2 within 20 s; logs:\n{}",
            ensemble.logs()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    eventually(Duration::from_secs(20), "set /x = new through B", || {
        b.set_data("/x", b"new", None)
    })
    .await;
    let acked = partitioned.elapsed();
    let old_leader_mode = ensemble.mode(l);
    assert_eq!(
        old_leader_mode.as_deref(),
        Some("leader"),
        "the old leader had stopped claiming to lead before the new leader (member {}) \
         acknowledged /x = new {acked:?} after the partition: this run could not catch a stale read",
        new_leader + 1
    );

    // A: sync + read through L, over and over, until a while after L should
    // have stepped down.
    let until = partitioned
        + Duration::from_millis((LEADER_SYNC_LIMIT + 2) * TICK_MS)
        + Duration::from_secs(2);
    let mut outcomes: Vec<(Duration, Outcome)> = Vec::new();
    while Instant::now() < until {
        let started = partitioned.elapsed();
        let outcome = match tokio::time::timeout(Duration::from_secs(1), a.sync("/x")).await {
            Ok(Ok(())) => {
                match tokio::time::timeout(Duration::from_secs(1), a.get_data("/x")).await {
                    Ok(Ok((data, _))) => Outcome::Read(data),
                    Ok(Err(e)) => Outcome::Failed(format!("get: {e}")),
                    Err(_) => Outcome::Failed("get timed out".into()),
                }
            }
            Ok(Err(e)) => Outcome::Failed(format!("sync: {e}")),
            Err(_) => Outcome::Failed("sync timed out".into()),
        };
        if matches!(outcome, Outcome::Failed(_)) {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        outcomes.push((started, outcome));
    }
    let stale: Vec<(Duration, String)> = outcomes
        .iter()
        .filter_map(|(t, o)| match o {
            Outcome::Read(d) if d != b"new" => Some((*t, String::from_utf8_lossy(d).into_owned())),
            _ => None,
        })
        .collect();
    assert!(
        stale.is_empty(),
        "{} of {} sync + reads through the partitioned old leader returned a value older than \
         /x = new, acknowledged {acked:?} after the partition; the first (started after, value): {:?}",
        stale.len(),
        outcomes.len(),
        &stale[..stale.len().min(5)]
    );
    assert!(!outcomes.is_empty());

    // L stops serving once it has been without its followers for its syncLimit.
    done.store(true, Ordering::Relaxed);
    let stopped = watcher.join().unwrap();
    let bound = Duration::from_millis((LEADER_SYNC_LIMIT + 2) * TICK_MS) + Duration::from_secs(1);
    assert!(
        stopped.is_some_and(|t| t <= bound),
        "the partitioned old leader stopped serving after {stopped:?}, bound {bound:?}; log:\n{}",
        ensemble.members[l].log()
    );
    let fresh = outcomes
        .iter()
        .filter(|(_, o)| matches!(o, Outcome::Read(_)))
        .count();
    let failures: BTreeSet<&str> = outcomes
        .iter()
        .filter_map(|(_, o)| match o {
            Outcome::Failed(why) => Some(why.as_str()),
            Outcome::Read(_) => None,
        })
        .collect();
    eprintln!(
        "new leader: member {}; /x = new acknowledged {acked:?} after the partition; the old leader \
         stopped serving after {stopped:?}; A: {} sync+reads, {fresh} fresh, failures {failures:?}",
        new_leader + 1,
        outcomes.len()
    );

    // Heal: one leader, everyone has /x = new.
    ensemble.heal(l);
    ensemble.wait_until_serving(&[0, 1, 2]);
    let modes: Vec<Option<String>> = (0..3).map(|i| ensemble.mode(i)).collect();
    assert_eq!(
        modes
            .iter()
            .filter(|m| m.as_deref() == Some("leader"))
            .count(),
        1,
        "{modes:?}"
    );
    assert_eq!(
        modes
            .iter()
            .filter(|m| m.as_deref() == Some("follower"))
            .count(),
        2,
        "{modes:?}"
    );
    for i in 0..3 {
        let reader = connect(&ensemble.members[i].addr(), SESSION).await;
        within(reader.sync("/x")).await.unwrap();
        assert_eq!(
            within(reader.get_data("/x")).await.unwrap().0,
            b"new",
            "member {} after healing",
            i + 1
        );
    }
    assert_no_panic(&ensemble);
}

// ---------------------------------------------------------------------------
// (b) bad input on the peer ports
// ---------------------------------------------------------------------------

/// One length-prefixed frame (zkd's peer framing: 4-byte big-endian length,
/// then the prost message).
fn frame<M: PeerMessage>(message: &M) -> Vec<u8> {
    let body = message.encode_to_vec();
    let mut out = (body.len() as u32).to_be_bytes().to_vec();
    out.extend_from_slice(&body);
    out
}

fn election_hello(sid: u64) -> Vec<u8> {
    frame(&ElectionMessage::from(ElectionHello {
        protocol_version: zkd_protocol::peer::election::PROTOCOL_VERSION_V1,
        sid,
        election_addr: "127.0.0.1:1".into(),
    }))
}

fn follower_info(sid: u64) -> Vec<u8> {
    frame(&QuorumPacket {
        body: Some(quorum_packet::Body::FollowerInfo(FollowerInfo {
            accepted_epoch: 0,
            sid,
            protocol_version: ZAB_PROTOCOL_VERSION,
            config_version: 0,
        })),
    })
}

/// An attack: a name and the bytes sent on a fresh connection.
struct Attack {
    name: String,
    bytes: Vec<u8>,
    /// The server may wait for more bytes (up to its handshake timeout)
    /// before closing.
    slow_close: bool,
}

fn attacks(port_kind: &str, target_sid: u64) -> Vec<Attack> {
    use rand::Rng;
    let mut rng = rand::thread_rng();
    let mut garbage = vec![0u8; 4096];
    rng.fill(&mut garbage[..]);
    // A whole frame of random bytes: undecodable or meaningless.
    let mut random_frame = 4092u32.to_be_bytes().to_vec();
    random_frame.extend_from_slice(&garbage[4..]);
    let hello = |sid| match port_kind {
        "election" => election_hello(sid),
        _ => follower_info(sid),
    };
    let mut header_then_stall = 1000u32.to_be_bytes().to_vec();
    header_then_stall.extend_from_slice(&hello(99)[4..8]);
    let mut two_hellos = hello(99);
    two_hellos.extend(hello(98));
    let quick = |name: &str, bytes: Vec<u8>| Attack {
        name: format!("{port_kind}: {name}"),
        bytes,
        slow_close: false,
    };
    let slow = |name: &str, bytes: Vec<u8>| Attack {
        name: format!("{port_kind}: {name}"),
        bytes,
        slow_close: true,
    };
    vec![
        slow("4 KiB of random bytes", garbage),
        quick("a frame of random bytes", random_frame),
        quick("length 2 GiB (0x80000000)", vec![0x80, 0, 0, 0, 1, 2, 3]),
        quick("length 2 GiB - 1", vec![0x7f, 0xff, 0xff, 0xff, 1, 2, 3]),
        quick("length 0xffffffff", vec![0xff; 8]),
        quick("an empty frame", vec![0, 0, 0, 0]),
        slow("a frame header, then a stall", header_then_stall),
        slow("nothing at all", Vec::new()),
        quick("hello from unknown sid 99", hello(99)),
        quick("hello from sid 0", hello(0)),
        quick("hello claiming the member's own sid", hello(target_sid)),
        quick("two hellos from strangers", two_hellos),
    ]
}

/// Sends `attack` to `port` and returns the open connection.
fn launch(port: u16, attack: &Attack) -> std::io::Result<TcpStream> {
    let mut s = TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_secs(2))?;
    s.write_all(&attack.bytes)?;
    Ok(s)
}

/// Whether the server has closed `s`, waiting up to `limit`.
fn closed_within(s: &mut TcpStream, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    let mut buf = [0u8; 4096];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        s.set_read_timeout(Some(left)).unwrap();
        match s.read(&mut buf) {
            Ok(0) => return true,
            // Whatever a stranger is told, the link must end.
            Ok(_) => continue,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return false
            }
            Err(_) => return true,
        }
    }
}

/// Bytes that are not a peer's, on both peer ports of the leader and of a
/// follower, round after round, while a client writes through the other
/// follower: every write succeeds, the leader and its epoch stay, every
/// member serves and none panics, and the server closes every such connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_and_strangers_on_the_peer_ports_end_only_their_own_connections() {
    let ensemble = Ensemble::start(3);
    let leader = ensemble.leader().expect("a leader");
    let followers: Vec<usize> = (0..3).filter(|i| *i != leader).collect();
    let (attacked, writer_member) = (followers[0], followers[1]);

    let writer = connect(&ensemble.connect_string(&[writer_member]), SESSION).await;
    within(writer.create("/w", b"", &persistent()))
        .await
        .unwrap();
    // The epoch shows in the zxid once the leader has committed something.
    let epoch_before = epoch(&ensemble, leader).expect("the leader's zxid");
    let stop = Arc::new(AtomicBool::new(false));
    let writes = {
        let stop = stop.clone();
        tokio::spawn(async move {
            let (mut ok, mut failed) = (0u32, Vec::new());
            while !stop.load(Ordering::Relaxed) {
                let started = Instant::now();
                match tokio::time::timeout(
                    Duration::from_secs(5),
                    writer.create(&format!("/w/n{ok}"), b"x", &persistent()),
                )
                .await
                {
                    Ok(Ok(_)) => ok += 1,
                    Ok(Err(e)) => failed.push(format!("n{ok}: {e}")),
                    Err(_) => {
                        failed.push(format!("n{ok}: timed out after {:?}", started.elapsed()))
                    }
                }
                if !failed.is_empty() {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
            (ok, failed)
        })
    };

    // The attacks, from a thread (blocking sockets): rounds for 10 s.
    let targets: Vec<(usize, &str, u16)> = [leader, attacked]
        .into_iter()
        .flat_map(|m| {
            let p = &ensemble.peers[m];
            [
                (m, "election", p.election_port),
                (m, "quorum", p.quorum_port),
            ]
        })
        .collect();
    let attacker = std::thread::spawn(move || {
        let mut problems = Vec::new();
        let mut slow_ones = Vec::new();
        let mut launched = 0;
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            for &(member, kind, port) in &targets {
                for attack in attacks(kind, member as u64 + 1) {
                    let what = format!("member {}, {}", member + 1, attack.name);
                    match launch(port, &attack) {
                        Ok(s) if attack.slow_close => slow_ones.push((Instant::now(), what, s)),
                        Ok(mut s) => {
                            if !closed_within(&mut s, Duration::from_secs(3)) {
                                problems.push(format!("{what}: still open after 3 s"));
                            }
                        }
                        // Refused or reset while sending: the server ended it.
                        Err(_) => {}
                    }
                    launched += 1;
                }
                // A burst of connections that close at once.
                for _ in 0..20 {
                    let _ = TcpStream::connect(("127.0.0.1", port));
                }
            }
            std::thread::sleep(Duration::from_millis(300));
        }
        // Handshake timeout (5 s) plus a margin.
        for (opened, what, mut s) in slow_ones {
            let left = (opened + Duration::from_secs(8)).saturating_duration_since(Instant::now());
            if !closed_within(&mut s, left.max(Duration::from_millis(100))) {
                problems.push(format!("{what}: still open after 8 s"));
            }
        }
        (launched, problems)
    });
    let (launched, problems) = tokio::task::spawn_blocking(move || attacker.join().unwrap())
        .await
        .unwrap();
    stop.store(true, Ordering::Relaxed);
    let (ok, failed) = writes.await.unwrap();

    assert!(
        failed.is_empty(),
        "writes through member {} failed while the peer ports were attacked ({ok} succeeded): {failed:?}\nlogs:\n{}",
        writer_member + 1,
        ensemble.logs()
    );
    assert!(ok > 50, "only {ok} writes in 10 s");
    eprintln!(
        "{launched} attacks on members {} and {}; {ok} writes through member {}, none failed",
        leader + 1,
        attacked + 1,
        writer_member + 1
    );
    assert!(
        problems.is_empty(),
        "connections the server should have closed: {problems:?}"
    );
    assert_eq!(
        ensemble.leader(),
        Some(leader),
        "the leader changed; logs:\n{}",
        ensemble.logs()
    );
    assert_eq!(
        epoch(&ensemble, leader),
        Some(epoch_before),
        "a new epoch began (re-election); logs:\n{}",
        ensemble.logs()
    );
    for i in 0..3 {
        assert!(
            ensemble.mode(i).is_some(),
            "member {} stopped serving",
            i + 1
        );
    }
    assert_no_panic(&ensemble);
    // The attacks reached the peer code (not only the sockets).
    let log = ensemble.members[leader].log();
    assert!(
        log.contains("sid 99"),
        "the leader never saw the stranger's hello ({launched} attacks):\n{log}"
    );
    // Every acknowledged write is on every member.
    for i in 0..3 {
        let reader = connect(&ensemble.connect_string(&[i]), SESSION).await;
        within(reader.sync("/w")).await.unwrap();
        let n = within(reader.list_children("/w")).await.unwrap().len();
        assert_eq!(n, ok as usize, "member {}", i + 1);
    }
}

// ---------------------------------------------------------------------------
// (c) zkServer.sh status
// ---------------------------------------------------------------------------

const ZKSERVER_SH: &str = "/usr/share/zookeeper/bin/zkServer.sh";

/// Runs `zkServer.sh status <cfg>` (bounded by 60 s): exit status and output.
fn zkserver_status(cfg: &std::path::Path) -> (bool, String) {
    let log_dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(ZKSERVER_SH)
        .arg("status")
        .arg(cfg)
        .env("ZOO_LOG_DIR", log_dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run zkServer.sh");
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("zkServer.sh status {} took over 60 s", cfg.display());
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    (status.success(), out)
}

/// Debian's `zkServer.sh status`, given each member's zoo.cfg, finds its
/// client port there, asks `srvr` through ZooKeeper's own Java client and
/// prints `Mode: leader` or `Mode: follower`; for a member that is down it
/// says so and fails.
#[test]
fn zkserver_sh_status_reports_each_members_mode() {
    require_tool(ZKSERVER_SH);
    require_tool(zkd_client_tests::oracle::ZOOKEEPER_JAR);
    let mut ensemble = Ensemble::start(3);
    let leader = ensemble.leader().expect("a leader");
    for (i, member) in ensemble.members.iter().enumerate() {
        let (ok, out) = zkserver_status(member.config_path());
        let want = if i == leader {
            "Mode: leader"
        } else {
            "Mode: follower"
        };
        assert!(ok, "member {}: zkServer.sh status failed:\n{out}", i + 1);
        assert!(
            out.lines().any(|l| l.trim() == want),
            "member {}: want {want:?}:\n{out}",
            i + 1
        );
        assert!(
            out.contains(&format!("Client port found: {}.", member.port)),
            "{out}"
        );
    }
    let follower = (0..3).find(|i| *i != leader).unwrap();
    ensemble.members[follower].kill9();
    let (ok, out) = zkserver_status(ensemble.members[follower].config_path());
    assert!(
        !ok && out.contains("Error contacting service"),
        "a stopped member:\n{out}"
    );
}

// ---------------------------------------------------------------------------
// (d) the election recipe while the ensemble's leader is killed
// ---------------------------------------------------------------------------

/// What the contenders share with the test.
#[derive(Default)]
struct Board {
    /// The contenders that believe they lead right now.
    leading: Mutex<BTreeSet<usize>>,
    /// Every claim, in order.
    claims: Mutex<Vec<usize>>,
    /// Two contenders believing they lead at once, and other impossibilities.
    violations: Mutex<Vec<String>>,
}

impl Board {
    fn claim(&self, who: usize) {
        let mut leading = self.leading.lock().unwrap();
        if !leading.is_empty() {
            self.violations
                .lock()
                .unwrap()
                .push(format!("contender {who} leads while {leading:?} also do"));
        }
        leading.insert(who);
        self.claims.lock().unwrap().push(who);
    }

    fn relinquish(&self, who: usize) {
        self.leading.lock().unwrap().remove(&who);
    }

    fn leaders(&self) -> Vec<usize> {
        self.leading.lock().unwrap().iter().copied().collect()
    }
}

/// How a contender's run ended.
#[derive(Debug, PartialEq, Eq)]
enum End {
    /// Told to stop: relinquished, then its session is closed.
    Stopped,
    /// Its node vanished or its session ended under it.
    Lost(String),
}

/// The recipe: a node under /election, watch only the next-lower one, lead
/// when lowest. A leader that loses its connection stops believing it leads
/// until it has checked again that its node is still the lowest.
async fn contend(
    who: usize,
    client: zk::Client,
    me: String,
    board: Arc<Board>,
    mut stop: watch::Receiver<bool>,
) -> End {
    let name = me.rsplit('/').next().unwrap().to_owned();
    let mut state = client.state_watcher();
    loop {
        if *stop.borrow() {
            board.relinquish(who);
            drop(client); // closes the session: the node goes
            return End::Stopped;
        }
        let kids =
            match tokio::time::timeout(Duration::from_secs(3), client.list_children("/election"))
                .await
            {
                Ok(Ok(kids)) => kids,
                Ok(Err(e @ (zk::Error::SessionExpired | zk::Error::ClientClosed))) => {
                    board.relinquish(who);
                    return End::Lost(e.to_string());
                }
                _ => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
        let mut kids = kids;
        kids.sort();
        let Some(pos) = kids.iter().position(|k| *k == name) else {
            board.relinquish(who);
            return End::Lost(format!("node {me} is gone"));
        };
        if pos == 0 {
            board.claim(who);
            // Lead until told to stop or the connection drops.
            loop {
                tokio::select! {
                    _ = stop.changed() => break,
                    s = state.changed() => {
                        if s != zk::SessionState::SyncConnected {
                            board.relinquish(who);
                            break;
                        }
                    }
                }
            }
            continue;
        }
        let pred = format!("/election/{}", kids[pos - 1]);
        let watcher =
            match tokio::time::timeout(Duration::from_secs(3), client.check_and_watch_stat(&pred))
                .await
            {
                Ok(Ok((Some(_), watcher))) => watcher,
                Ok(Ok((None, _))) => continue,
                _ => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
        tokio::select! {
            _ = stop.changed() => {}
            event = watcher.changed() => {
                if event.event_type == zk::EventType::Session {
                    // Expired or closed: the watch is gone, and with it the session.
                    board.relinquish(who);
                    return End::Lost(format!("session event {:?}", event.session_state));
                }
            }
        }
    }
}

/// The member whose `cons` lists `session`.
fn member_of(ensemble: &Ensemble, session: zk::SessionId) -> Option<usize> {
    let needle = format!("sid={session},");
    (0..ensemble.members.len()).find(|i| {
        let m = &ensemble.members[*i];
        four_letter_word_at(&m.host, m.port, "cons").is_ok_and(|c| c.contains(&needle))
    })
}

/// Waits until every session in `sessions` is on one of `survivors` again,
/// within the session timeout from `killed`.
async fn sessions_come_back(
    ensemble: &Ensemble,
    sessions: &[zk::SessionId],
    survivors: &[usize],
    killed: Instant,
) {
    for session in sessions {
        loop {
            if let Some(m) = member_of(ensemble, *session) {
                assert!(
                    survivors.contains(&m),
                    "session {session} on dead member {m}"
                );
                break;
            }
            assert!(
                killed.elapsed() < SESSION,
                "session {session} is on no surviving member {survivors:?} after {:?}; logs:\n{}",
                killed.elapsed(),
                ensemble.logs()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// Waits until exactly `who` believes it leads.
async fn wait_for_leader(board: &Board, who: usize, limit: Duration, context: &str) {
    let deadline = Instant::now() + limit;
    while board.leaders() != [who] {
        assert!(
            Instant::now() < deadline,
            "{context}: contender {who} does not lead within {limit:?}; leading {:?}, claims {:?}",
            board.leaders(),
            board.claims.lock().unwrap()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Five contenders, contender k connected first to member k % 3 with the
/// other members as fallbacks. At most one of them ever believes it leads;
/// after the ensemble's leader is killed with kill -9, every session survives
/// (the clients move to the other members within the session timeout), the
/// same contender leads, and closing each leader's session hands leadership
/// to the next in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn election_recipe_keeps_one_leader_while_the_ensembles_leader_is_killed() {
    let mut ensemble = Ensemble::start_with(3, member_options(2));
    let setup = connect(&ensemble.all(), SESSION).await;
    within(setup.create("/election", b"", &persistent()))
        .await
        .unwrap();
    drop(setup);
    let seq = zk::CreateMode::EphemeralSequential.with_acls(zk::Acls::anyone_all());
    let board = Arc::new(Board::default());
    let mut stops = Vec::new();
    let mut runs = Vec::new();
    let mut sessions = Vec::new();
    for k in 0..5 {
        let home = k % 3;
        let order = [home, (home + 1) % 3, (home + 2) % 3];
        // The client picks its first member at random: reconnect until it
        // lands on its home member.
        let mut attempt = 0;
        let client = loop {
            let client = connect(&ensemble.connect_string(&order), SESSION).await;
            if member_of(&ensemble, client.session_id()) == Some(home) {
                break client;
            }
            attempt += 1;
            assert!(
                attempt < 40,
                "contender {k} never landed on member {}",
                home + 1
            );
        };
        let (_, n) = within(client.create("/election/n-", b"", &seq))
            .await
            .unwrap();
        let me = format!("/election/n-{n}");
        sessions.push(client.session_id());
        let (tx, rx) = watch::channel(false);
        stops.push(tx);
        runs.push(Some(tokio::spawn(contend(
            k,
            client,
            me,
            board.clone(),
            rx,
        ))));
    }
    wait_for_leader(&board, 0, Duration::from_secs(10), "start").await;

    // 0 hands over to 1.
    stops[0].send(true).unwrap();
    assert_eq!(runs[0].take().unwrap().await.unwrap(), End::Stopped);
    wait_for_leader(&board, 1, Duration::from_secs(10), "0 closed its session").await;

    // kill -9 the ensemble's leader.
    let first = ensemble.leader().expect("a leader");
    let moved: Vec<usize> = (1..5).filter(|k| k % 3 == first).collect();
    ensemble.members[first].kill9();
    let killed = Instant::now();
    let survivors: Vec<usize> = (0..3).filter(|i| *i != first).collect();
    tokio::task::block_in_place(|| ensemble.wait_until_serving(&survivors));
    sessions_come_back(&ensemble, &sessions[1..], &survivors, killed).await;
    wait_for_leader(&board, 1, Duration::from_secs(10), "after the kill").await;
    for (k, run) in runs.iter().enumerate() {
        if let Some(run) = run {
            assert!(!run.is_finished(), "contender {k} ended after the kill");
        }
    }

    // Each leader closes its session, the next one leads.
    for k in 1..3 {
        stops[k].send(true).unwrap();
        assert_eq!(runs[k].take().unwrap().await.unwrap(), End::Stopped);
        let context = format!("{k} closed its session");
        wait_for_leader(&board, k + 1, Duration::from_secs(10), &context).await;
    }

    // The killed member returns; then the new ensemble leader is killed just
    // as contender 3 closes its session. Its closeSession may be lost with
    // the leader: then the session expires, and 4 leads after that.
    tokio::task::block_in_place(|| {
        ensemble.members[first].restart();
        ensemble.wait_until_serving(&[0, 1, 2]);
    });
    let second = ensemble.leader().expect("a leader");
    stops[3].send(true).unwrap();
    ensemble.members[second].kill9();
    let killed = Instant::now();
    assert_eq!(runs[3].take().unwrap().await.unwrap(), End::Stopped);
    let survivors: Vec<usize> = (0..3).filter(|i| *i != second).collect();
    tokio::task::block_in_place(|| ensemble.wait_until_serving(&survivors));
    sessions_come_back(&ensemble, &sessions[4..], &survivors, killed).await;
    wait_for_leader(
        &board,
        4,
        SESSION + Duration::from_secs(10),
        "3 closed its session as the ensemble's leader was killed",
    )
    .await;
    stops[4].send(true).unwrap();
    assert_eq!(runs[4].take().unwrap().await.unwrap(), End::Stopped);

    let violations = board.violations.lock().unwrap().clone();
    assert!(violations.is_empty(), "{violations:?}");
    let claims = board.claims.lock().unwrap().clone();
    let mut distinct = claims.clone();
    distinct.dedup();
    assert_eq!(distinct, [0, 1, 2, 3, 4], "claims in order: {claims:?}");
    eprintln!(
        "contenders {moved:?} were on member {}, killed first; member {} was killed second; claims {claims:?}",
        first + 1,
        second + 1
    );
    assert_no_panic(&ensemble);
}
