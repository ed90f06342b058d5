//! `zkd ensemble`'s faults as an application sees them (issue 16): each test
//! starts `zkd ensemble`, drives faults through `zkd fault` and the HTTP API
//! (`zkd_client_tests::fault_ensemble`), and asserts what the stock Rust
//! client sees: connections lost and moved, sessions kept or expired,
//! watches fired, a minority that stops serving, writes that stay.
//!
//! Members run with tickTime 500 ms (syncLimit 5: a cut is noticed in about
//! 2.5 s); sessions last 10 s, so a session outlives a move between members.

use serde_json::Value;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};
use zkd_client_tests::fault_ensemble::{http_with, FaultEnsemble, Target};
use zkd_client_tests::process::four_letter_word_at;
use zkd_client_tests::{connect, ephemeral, persistent, within, ZkdProcess};
use zookeeper_client as zk;

#[path = "fault_api/membership.rs"]
mod membership;

const SESSION: Duration = Duration::from_secs(10);

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// The member (1-based) whose `cons` lists `session`.
fn member_of(ensemble: &FaultEnsemble, n: usize, session: &zk::SessionId) -> Option<usize> {
    let needle = format!("sid=0x{:x}", session.0);
    (1..=n).find(|i| {
        let addr = ensemble.address(*i);
        let (host, port) = addr.rsplit_once(':').unwrap();
        four_letter_word_at(host, port.parse().unwrap(), "cons").is_ok_and(|c| c.contains(&needle))
    })
}

/// A client on every member's address that sits on member `want`.
async fn client_on(ensemble: &FaultEnsemble, want: usize) -> zk::Client {
    for _ in 0..60 {
        let client = connect(ensemble.connect_string(), SESSION).await;
        if member_of(ensemble, 3, &client.session_id()) == Some(want) {
            return client;
        }
    }
    panic!("no session landed on node{want} in 60 tries");
}

/// Polls `check` every 100 ms until it holds or `limit` passes.
async fn eventually(limit: Duration, what: &str, mut check: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{what}: not within {limit:?}");
}

/// Every member, read after a `sync`, holds each acknowledged `w-N` child of `parent`.
async fn every_member_holds(ensemble: &FaultEnsemble, parent: &str, acked: &BTreeSet<i64>) {
    for i in 1..=3 {
        let reader = connect(&ensemble.address(i), SESSION).await;
        within(reader.sync(parent)).await.unwrap();
        let (children, _) = within(reader.get_children(parent)).await.unwrap();
        let seen: BTreeSet<i64> = children
            .iter()
            .map(|c| c.trim_start_matches("w-").parse().unwrap())
            .collect();
        let missing: Vec<_> = acked.difference(&seen).collect();
        assert!(
            missing.is_empty(),
            "node{i} lost acknowledged writes {missing:?}"
        );
    }
}

fn faults(status: &Value) -> usize {
    status["faults"].as_array().map_or(0, Vec::len)
}

fn processes(status: &Value) -> Vec<String> {
    status["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["process"].as_str().unwrap_or("").to_owned())
        .collect()
}

/// The isolated leader's clients lose their connection and move to a member
/// of the majority, keeping their session; after `heal` every member serves
/// and holds every write that was acknowledged, before, during and after.
#[test]
fn an_isolated_leaders_clients_move_and_no_acknowledged_write_is_lost() {
    let ensemble = FaultEnsemble::start(3);
    runtime().block_on(async {
        let leader = ensemble.leader().expect("a leader");
        let client = client_on(&ensemble, leader).await;
        let session = client.session_id();
        let mut states = client.state_watcher();
        within(client.create("/acked", b"", &persistent()))
            .await
            .unwrap();
        let seq = zk::CreateMode::PersistentSequential.with_acls(zk::Acls::anyone_all());
        let mut acked = BTreeSet::new();
        for _ in 0..20 {
            let (_, n) = within(client.create("/acked/w-", b"", &seq)).await.unwrap();
            acked.insert(n.into_i64());
        }
        let done = ensemble.isolate(Target::Leader).unwrap();
        assert!(
            done["done"]
                .as_str()
                .unwrap()
                .contains(&format!("node{leader}")),
            "{done}"
        );
        // The client notices: its member stops serving once it has no quorum.
        let lost = tokio::time::timeout(Duration::from_secs(15), states.changed()).await;
        assert_eq!(
            lost.expect("the isolated leader's client noticed"),
            zk::SessionState::Disconnected
        );
        // ... and moves, with its session, to a member of the majority.
        eventually(
            Duration::from_secs(20),
            "the client moved and writes",
            async || match client.create("/acked/w-", b"", &seq).await {
                Ok((_, n)) => {
                    acked.insert(n.into_i64());
                    true
                }
                Err(_) => false,
            },
        )
        .await;
        assert_eq!(
            client.session_id(),
            session,
            "the session survived the move"
        );
        let now_on = member_of(&ensemble, 3, &session);
        assert!(
            now_on.is_some_and(|m| m != leader),
            "on node{now_on:?}, not the isolated node{leader}"
        );
        let healed = ensemble.heal().unwrap();
        assert_eq!(healed["done"], "healed: every member serves", "{healed}");
        assert_eq!(faults(&healed["status"]), 0, "{healed}");
        for _ in 0..5 {
            let (_, n) = within(client.create("/acked/w-", b"", &seq)).await.unwrap();
            acked.insert(n.into_i64());
        }
        every_member_holds(&ensemble, "/acked", &acked).await;
    });
}

/// A follower partitioned from the other two stops serving: its client
/// loses the connection, and a new client cannot connect to it alone.
#[test]
fn a_partitioned_minority_stops_serving_until_healed() {
    let ensemble = FaultEnsemble::start(3);
    runtime().block_on(async {
        let leader = ensemble.leader().unwrap();
        let minority = (1..=3).find(|i| *i != leader).unwrap();
        let others: Vec<usize> = (1..=3).filter(|i| *i != minority).collect();
        let client = connect(&ensemble.address(minority), SESSION).await;
        let mut states = client.state_watcher();
        ensemble.partition(&[minority], &others).unwrap();
        let lost = tokio::time::timeout(Duration::from_secs(15), states.changed()).await;
        assert_eq!(
            lost.expect("the minority's client noticed"),
            zk::SessionState::Disconnected
        );
        let minority_addr = ensemble.address(minority);
        let alone = zk::Client::connector()
            .with_session_timeout(SESSION)
            .with_fail_eagerly()
            .connect(&minority_addr);
        let refused = tokio::time::timeout(Duration::from_secs(3), alone).await;
        assert!(
            !matches!(refused, Ok(Ok(_))),
            "the minority member served a new session"
        );
        // The majority goes on.
        let majority = connect(
            &format!(
                "{},{}",
                ensemble.address(others[0]),
                ensemble.address(others[1])
            ),
            SESSION,
        )
        .await;
        within(majority.create("/during", b"x", &persistent()))
            .await
            .unwrap();
        ensemble.heal().unwrap();
        let back = connect(&ensemble.address(minority), SESSION).await;
        within(back.sync("/during")).await.unwrap();
        assert!(within(back.check_stat("/during")).await.unwrap().is_some());
    });
}

/// `partition-one-way`: the leader's messages to the others are lost (theirs
/// still reach it). The followers stop hearing it and elect a new leader;
/// clients are served again, and after `heal` every member holds every
/// acknowledged write.
#[test]
fn a_one_way_partition_from_the_leader_moves_leadership_and_loses_nothing() {
    let ensemble = FaultEnsemble::start(3);
    runtime().block_on(async {
        let leader = ensemble.leader().unwrap();
        let others: Vec<usize> = (1..=3).filter(|i| *i != leader).collect();
        let client = connect(ensemble.connect_string(), SESSION).await;
        within(client.create("/oneway", b"", &persistent()))
            .await
            .unwrap();
        let seq = zk::CreateMode::PersistentSequential.with_acls(zk::Acls::anyone_all());
        let mut acked = BTreeSet::new();
        let done = ensemble.partition_one_way(&[leader], &others).unwrap();
        assert!(
            done["done"].as_str().unwrap().contains("are lost"),
            "{done}"
        );
        eventually(
            Duration::from_secs(30),
            "a new leader among the others",
            async || ensemble.leader().is_some_and(|l| l != leader),
        )
        .await;
        eventually(
            Duration::from_secs(20),
            "writes after the one-way cut",
            async || match client.create("/oneway/w-", b"", &seq).await {
                Ok((_, n)) => {
                    acked.insert(n.into_i64());
                    acked.len() >= 10
                }
                Err(_) => false,
            },
        )
        .await;
        ensemble.heal().unwrap();
        every_member_holds(&ensemble, "/oneway", &acked).await;
    });
}

/// `expire-session`: the session's ephemerals go, other sessions' watches on
/// them fire, and its own client learns it expired.
#[test]
fn an_expired_sessions_ephemerals_go_and_watches_fire() {
    let ensemble = FaultEnsemble::start(3);
    runtime().block_on(async {
        let doomed = connect(ensemble.connect_string(), SESSION).await;
        let mut states = doomed.state_watcher();
        within(doomed.create("/lock", b"", &ephemeral()))
            .await
            .unwrap();
        let observer = connect(ensemble.connect_string(), SESSION).await;
        let (stat, watch) = within(observer.check_and_watch_stat("/lock"))
            .await
            .unwrap();
        assert!(stat.is_some());
        let started = Instant::now();
        ensemble.expire_session(doomed.session_id().0).unwrap();
        let event = tokio::time::timeout(Duration::from_secs(5), watch.changed())
            .await
            .expect("the watch fired");
        assert_eq!(event.event_type, zk::EventType::NodeDeleted);
        assert_eq!(event.path, "/lock");
        let state = tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                let s = states.changed().await;
                if s.is_terminated() {
                    return s;
                }
            }
        })
        .await
        .expect("the doomed client learned its fate");
        assert_eq!(state, zk::SessionState::Expired);
        assert!(
            started.elapsed() < SESSION,
            "expired at once, not at its timeout"
        );
        assert!(within(observer.check_stat("/lock"))
            .await
            .unwrap()
            .is_none());
        // An id that is not live is refused, naming it.
        let refused = ensemble.expire_session(0x7777).unwrap_err();
        assert!(refused.contains("no live session 0x7777"), "{refused}");
    });
}

/// `close-connections` and `cut-clients`: the client moves, its session and
/// ephemeral intact.
#[test]
fn closed_or_cut_clients_move_with_their_sessions() {
    let ensemble = FaultEnsemble::start(3);
    runtime().block_on(async {
        let on = ensemble.leader().unwrap();
        let client = client_on(&ensemble, on).await;
        let session = client.session_id();
        within(client.create("/mine", b"", &ephemeral()))
            .await
            .unwrap();
        let closed = ensemble.close_connections(on).unwrap();
        assert!(
            closed["done"].as_str().unwrap().contains("closed=1"),
            "{closed}"
        );
        eventually(
            Duration::from_secs(10),
            "reconnected after the close",
            async || client.check_stat("/mine").await.is_ok_and(|s| s.is_some()),
        )
        .await;
        assert_eq!(client.session_id(), session);
        let sits = member_of(&ensemble, 3, &session).expect("connected somewhere");
        ensemble.cut_clients(sits).unwrap();
        eventually(
            Duration::from_secs(20),
            "moved off the cut member",
            async || {
                member_of(&ensemble, 3, &session).is_some_and(|m| m != sits)
                    && client.check_stat("/mine").await.is_ok_and(|s| s.is_some())
            },
        )
        .await;
        assert_eq!(client.session_id(), session);
        ensemble.heal().unwrap();
    });
}

/// kill, restart, pause, resume, slow-disk and disk-error, as a client sees
/// them; `heal` brings back every member a fault took down.
#[test]
fn process_and_disk_faults_and_heal() {
    let ensemble = FaultEnsemble::start(3);
    runtime().block_on(async {
        let client = connect(ensemble.connect_string(), SESSION).await;
        within(client.create("/n", b"", &persistent()))
            .await
            .unwrap();
        let old = ensemble.leader().unwrap();
        ensemble.kill(Target::Leader).unwrap();
        eventually(Duration::from_secs(20), "a new leader", async || {
            ensemble.leader().is_some_and(|l| l != old)
        })
        .await;
        eventually(
            Duration::from_secs(20),
            "writes after the leader's death",
            async || client.set_data("/n", b"1", None).await.is_ok(),
        )
        .await;
        assert_eq!(processes(&ensemble.status())[old - 1], "down");
        ensemble.restart(old).unwrap();
        let leader = ensemble.leader().unwrap();
        let follower = (1..=3).find(|i| *i != leader).unwrap();
        ensemble.pause(Target::Member(follower)).unwrap();
        assert_eq!(processes(&ensemble.status())[follower - 1], "paused");
        ensemble.resume(follower).unwrap();
        // Both followers' disks slow: a write's quorum needs one of their
        // fsyncs. (A slow leader alone is outvoted: its followers ack first.)
        let followers: Vec<usize> = (1..=3).filter(|i| *i != leader).collect();
        for f in &followers {
            ensemble.slow_disk(*f, 300).unwrap();
        }
        let started = Instant::now();
        within(client.set_data("/n", b"2", None)).await.unwrap();
        assert!(
            started.elapsed() >= Duration::from_millis(300),
            "{:?}",
            started.elapsed()
        );
        for f in &followers {
            ensemble.slow_disk(*f, 0).unwrap();
        }
        let started = Instant::now();
        within(client.set_data("/n", b"2", None)).await.unwrap();
        assert!(
            started.elapsed() < Duration::from_millis(300),
            "{:?}",
            started.elapsed()
        );
        // A failed fsync ends the member, as EIO would; the others go on.
        let victim = (1..=3).find(|i| *i != leader).unwrap();
        ensemble.disk_error(victim).unwrap();
        eventually(
            Duration::from_secs(20),
            "the member exits on its failed fsync",
            async || {
                let _ = client.set_data("/n", b"3", None).await;
                processes(&ensemble.status())[victim - 1] == "down"
            },
        )
        .await;
        within(client.set_data("/n", b"4", None)).await.unwrap();
        assert!(
            ensemble.log().contains("injected fsync failure"),
            "no fatal line in the log"
        );
        let healed = ensemble.heal().unwrap();
        assert_eq!(healed["done"], "healed: every member serves", "{healed}");
        assert_eq!(
            processes(&healed["status"]),
            ["running", "running", "running"]
        );
    });
}

/// Unknown members and verbs, a heal with nothing to heal, malformed bodies
/// and wrong paths get a clear error, and change nothing.
#[test]
fn bad_fault_requests_are_refused_and_change_nothing() {
    let ensemble = FaultEnsemble::start(3);
    let before = ensemble.status();
    let pids = |s: &Value| {
        s["members"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["pid"].as_u64())
            .collect::<Vec<_>>()
    };
    for (verb, args, expect) in [
        ("kill", &["4"][..], "\"4\" is not a member"),
        ("explode", &[][..], "unknown verb \"explode\""),
        ("heal", &[][..], "nothing to heal"),
        ("partition", &["1", "2", "3"][..], "two sides"),
        ("slow-disk", &["1", "fast"][..], "not a number of ms"),
        ("resume", &["2"][..], "node2 is not paused"),
        ("expire-session", &["nope"][..], "not a session id"),
        ("remove", &["1"][..], "started without --reconfig"),
    ] {
        let error = ensemble.fault(verb, args).unwrap_err();
        assert!(error.contains(expect), "{verb} {args:?}: {error}");
    }
    let cases = [
        ("POST", "/faults", "{not json", 400),
        ("POST", "/faults", r#"{"args": [1]}"#, 400),
        ("POST", "/faults", r#"{"verb": "kill", "args": "1"}"#, 400),
        ("GET", "/faults", "", 405),
        ("GET", "/nothing", "", 404),
    ];
    for (method, path, body, code) in cases {
        let (got, answer) = ensemble.http(method, path, body);
        assert_eq!(got, code, "{method} {path} {body}: {answer}");
        assert_eq!(answer["ok"], false, "{answer}");
        assert!(
            answer["error"].as_str().is_some_and(|e| !e.is_empty()),
            "{answer}"
        );
    }
    // Issue 50, item 6: what a web page could send is refused: a kill as
    // text or as a form, and any request under a foreign Host (DNS
    // rebinding).
    let api = ensemble.api().to_owned();
    let kill = r#"{"verb": "kill", "args": ["1"]}"#;
    for (headers, code) in [
        (
            vec![("host", api.as_str()), ("content-type", "text/plain")],
            415,
        ),
        (
            vec![
                ("host", api.as_str()),
                ("content-type", "application/x-www-form-urlencoded"),
            ],
            415,
        ),
        (vec![("host", api.as_str())], 415),
        (
            vec![
                ("host", "attacker.example:80"),
                ("content-type", "application/json"),
            ],
            403,
        ),
        (vec![("content-type", "application/json")], 403),
    ] {
        let (got, answer) = http_with(&api, "POST", "/faults", &headers, kill);
        assert_eq!(got, code, "{headers:?}: {answer}");
        assert_eq!(answer["ok"], false, "{answer}");
    }
    let (got, _) = http_with(&api, "GET", "/status", &[("host", "evil.example")], "");
    assert_eq!(got, 403);
    let after = ensemble.status();
    assert_eq!(faults(&after), 0, "{after}");
    assert_eq!(pids(&after), pids(&before), "no member was restarted");
    assert_eq!(processes(&after), ["running", "running", "running"]);
    // No ensemble in a directory: exit 2, with a message.
    let out = std::process::Command::new(zkd_client_tests::process::zkd_binary())
        .args(["fault", "--dir", "/nonexistent-zkd-dir", "status"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no ensemble is running"));
}

/// A plain `zkd serve` has no fault surface: no control socket in its
/// dataDir and no listener but its client port and its AdminServer's (on
/// by default, as ZooKeeper's is). With `zkd.faults.enable` the socket is
/// there (so the check above can fail).
#[test]
fn a_plain_server_has_no_fault_surface() {
    let admin = zkd_client_tests::process::free_port();
    let plain = ZkdProcess::start_with(
        zkd_client_tests::ServerOptions::default().with("admin.serverPort", &admin.to_string()),
    );
    let data_dir = data_dir_of(&plain);
    assert!(!data_dir.join("zkd-faults.sock").exists());
    let pid = plain.pid().unwrap();
    assert_eq!(
        listening_tcp_ports(pid),
        BTreeSet::from([plain.port, admin])
    );
    assert!(
        named_unix_sockets(pid).is_empty(),
        "{:?}",
        named_unix_sockets(pid)
    );

    let enabled = ZkdProcess::start_with(
        zkd_client_tests::ServerOptions::default().with("zkd.faults.enable", "true"),
    );
    let socket = data_dir_of(&enabled).join("zkd-faults.sock");
    assert!(socket.exists());
    assert_eq!(named_unix_sockets(enabled.pid().unwrap()).len(), 1);
    // Owner-only whatever the umask (issue 50, item 6).
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&socket).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "{mode:o}");
}

fn data_dir_of(server: &ZkdProcess) -> std::path::PathBuf {
    let cfg = std::fs::read_to_string(server.config_path()).unwrap();
    let dir = cfg
        .lines()
        .find_map(|l| l.strip_prefix("dataDir="))
        .unwrap();
    std::path::PathBuf::from(dir.trim())
}

/// The socket inodes process `pid` holds.
fn socket_inodes(pid: u32) -> BTreeSet<String> {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter_map(|l| {
            let l = l.to_string_lossy().into_owned();
            Some(l.strip_prefix("socket:[")?.strip_suffix(']')?.to_owned())
        })
        .collect()
}

/// TCP ports process `pid` listens on.
fn listening_tcp_ports(pid: u32) -> BTreeSet<u16> {
    let inodes = socket_inodes(pid);
    let mut ports = BTreeSet::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let text = std::fs::read_to_string(table).unwrap_or_default();
        for line in text.lines().skip(1) {
            let cols: Vec<&str> = line.split_whitespace().collect();
            if cols.len() > 9 && cols[3] == "0A" && inodes.contains(cols[9]) {
                let port = cols[1].rsplit(':').next().unwrap();
                ports.insert(u16::from_str_radix(port, 16).unwrap());
            }
        }
    }
    ports
}

/// Paths of the Unix sockets process `pid` holds.
fn named_unix_sockets(pid: u32) -> Vec<String> {
    let inodes = socket_inodes(pid);
    let text = std::fs::read_to_string("/proc/net/unix").unwrap();
    text.lines()
        .skip(1)
        .filter_map(|line| {
            let cols: Vec<&str> = line.split_whitespace().collect();
            (cols.len() > 7 && inodes.contains(cols[6])).then(|| cols[7].to_owned())
        })
        .collect()
}
