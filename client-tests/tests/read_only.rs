//! Read-only mode side by side with Apache ZooKeeper 3.8: three members with
//! `readonlymode.enabled` (ZooKeeper takes it as a system property, zkd as a
//! zoo.cfg key) and `localSessionsEnabled`. Two are killed; the one left
//! answers `isro` with `ro`, refuses a read-write client, and serves kazoo's
//! `read_only=True` session reads while refusing its writes
//! (`kazoo/read_only.py`). The two come back: the session moves to a
//! read-write member and writes. Each step's outcome must be the same on both.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use zkd_client_tests::ensemble::Ensemble;
use zkd_client_tests::oracle_ensemble::ZooKeeperEnsemble;
use zkd_client_tests::process::srvr_mode;
use zkd_client_tests::raw::{RawClient, Read1};
use zkd_client_tests::{connect, persistent, within, ServerOptions};
use zkd_protocol::records::ConnectRequest;
use zkd_protocol::Record;
use zookeeper_client as zk;

const SESSION: Duration = Duration::from_secs(6);
/// How long a lone member may take to start serving read-only sessions,
/// and a restarted quorum to serve again.
const SETTLE: Duration = Duration::from_secs(40);

/// What the scenario needs of an ensemble, zkd's or ZooKeeper's.
trait Cluster {
    fn addr(&self, i: usize) -> String;
    fn word(&self, i: usize, word: &str) -> String;
    fn kill(&mut self, i: usize);
    fn restart(&mut self, i: usize);
}

impl Cluster for Ensemble {
    fn addr(&self, i: usize) -> String {
        self.members[i].addr()
    }
    fn word(&self, i: usize, word: &str) -> String {
        self.members[i].four_letter_word(word)
    }
    fn kill(&mut self, i: usize) {
        self.members[i].kill9();
    }
    fn restart(&mut self, i: usize) {
        self.members[i].restart();
    }
}

impl Cluster for ZooKeeperEnsemble {
    fn addr(&self, i: usize) -> String {
        self.members[i].addr()
    }
    fn word(&self, i: usize, word: &str) -> String {
        self.members[i].four_letter_word(word)
    }
    fn kill(&mut self, i: usize) {
        self.kill9(i);
    }
    fn restart(&mut self, i: usize) {
        ZooKeeperEnsemble::restart(self, i);
    }
}

/// Waits (bounded) until `check` holds of member `i`'s answer to `word`.
fn wait_for(cluster: &dyn Cluster, i: usize, word: &str, check: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + SETTLE;
    loop {
        let answer = cluster.word(i, word);
        if check(&answer) {
            return answer;
        }
        assert!(
            Instant::now() < deadline,
            "member {i}: {word} still says {answer:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `kazoo/read_only.py` on `hosts`, stopped at its first phase.
struct Kazoo(std::process::Child, BufReader<std::process::ChildStdout>);

impl Kazoo {
    fn start(hosts: &str) -> Kazoo {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/kazoo/read_only.py");
        let mut child = Command::new("timeout")
            .args(["180", "python3"])
            .arg(script)
            .arg(hosts)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3");
        let out = BufReader::new(child.stdout.take().expect("stdout"));
        Kazoo(child, out)
    }

    /// Its lines up to and including `last`.
    fn lines_through(&mut self, last: &str) -> Vec<String> {
        let mut lines = Vec::new();
        for line in (&mut self.1).lines() {
            let line = line.expect("kazoo output");
            let done = line == last;
            lines.push(line);
            if done {
                return lines;
            }
        }
        panic!("kazoo ended before {last:?}: {lines:#?}");
    }

    fn go_on(&mut self) {
        let stdin = self.0.stdin.as_mut().expect("stdin");
        stdin.write_all(b"go\n").expect("kazoo stdin");
    }
}

impl Drop for Kazoo {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The module doc's scenario; what it saw, line by line.
async fn scenario(cluster: &mut dyn Cluster) -> Vec<String> {
    let mut seen = Vec::new();
    let client = connect(&cluster.addr(0), SESSION).await;
    within(client.create("/ro", b"before", &persistent()))
        .await
        .expect("create /ro");
    drop(client);
    cluster.kill(1);
    cluster.kill(2);
    seen.push(format!(
        "isro: {}",
        wait_for(cluster, 0, "isro", |a| a == "ro")
    ));
    seen.push(format!("srvr: {:?}", srvr_mode(&cluster.word(0, "srvr"))));
    let lone = cluster.addr(0);
    let rw = zk::Client::connector()
        .with_session_timeout(SESSION)
        .with_fail_eagerly()
        .connect(&lone);
    let rw = tokio::time::timeout(Duration::from_secs(10), rw).await;
    seen.push(format!(
        "a read-write client connects: {}",
        matches!(rw, Ok(Ok(_)))
    ));

    let hosts: Vec<String> = (0..3).map(|i| cluster.addr(i)).collect();
    let mut kazoo = Kazoo::start(&hosts.join(","));
    seen.extend(kazoo.lines_through("phase 1 done"));
    cluster.restart(1);
    cluster.restart(2);
    seen.push(format!(
        "isro after: {}",
        wait_for(cluster, 0, "isro", |a| a == "rw")
    ));
    kazoo.go_on();
    seen.extend(kazoo.lines_through("kazoo read-only: ok"));
    seen
}

fn read_only_options() -> ServerOptions {
    ServerOptions {
        tick_time_ms: 500,
        ..ServerOptions::default()
    }
    .with("readonlymode.enabled", "true")
    .with("localSessionsEnabled", "true")
    .with("localSessionsUpgradingEnabled", "true")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_without_a_quorum_serves_read_only_sessions_as_zookeeper_does() {
    let lines = "localSessionsEnabled=true\nlocalSessionsUpgradingEnabled=true\n";
    let mut theirs =
        ZooKeeperEnsemble::start_with_lines(3, lines, &[("readonlymode.enabled", "true")]);
    let expected = scenario(&mut theirs).await;
    drop(theirs);

    let mut ours = Ensemble::start_with(3, read_only_options());
    let seen = scenario(&mut ours).await;
    assert_eq!(
        seen, expected,
        "zkd (left) and ZooKeeper 3.8 (right) differ"
    );
    for line in [
        "state: CONNECTED_RO",
        "read: before",
        "create: NotReadOnlyCallError",
        "state: CONNECTED",
        "read after: after",
    ] {
        assert!(
            seen.iter().any(|l| l == line),
            "{line:?} missing: {seen:#?}"
        );
    }
}

/// What the first frame of a connect with `read_only` gets from member 0,
/// and whether the member then closes the connection.
fn raw_connect(cluster: &dyn Cluster, read_only: bool) -> String {
    let port: u16 = cluster.addr(0).rsplit(':').next().unwrap().parse().unwrap();
    let mut raw = RawClient::connect(port);
    let request = ConnectRequest {
        protocol_version: 0,
        last_zxid_seen: 0,
        time_out: 6000,
        session_id: 0,
        passwd: bytes::Bytes::from_static(&[0; 16]),
        read_only: Some(read_only),
    };
    raw.send_frame(&request.to_bytes());
    match raw.read() {
        Read1::Frame(frame) => format!("frame {frame:02x?}"),
        other => format!("{other:?}"),
    }
}

/// Without `localSessionsEnabled` ZooKeeper's read-only member cannot give
/// a read-only client a session: it answers the connect with a bare
/// NOTREADONLY reply. A read-write connect is closed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_local_sessions_a_read_only_connect_is_refused_as_zookeeper_refuses_it() {
    let mut seen = Vec::new();
    let mut theirs =
        ZooKeeperEnsemble::start_with_lines(3, "", &[("readonlymode.enabled", "true")]);
    let mut ours = Ensemble::start_with(
        3,
        ServerOptions {
            tick_time_ms: 500,
            ..ServerOptions::default()
        }
        .with("readonlymode.enabled", "true"),
    );
    for cluster in [&mut theirs as &mut dyn Cluster, &mut ours] {
        cluster.kill(1);
        cluster.kill(2);
        wait_for(cluster, 0, "isro", |a| a == "ro");
        seen.push([raw_connect(cluster, true), raw_connect(cluster, false)]);
    }
    assert_eq!(
        seen[1], seen[0],
        "zkd (left) and ZooKeeper 3.8 (right) differ"
    );
    assert_eq!(seen[1][1], "Closed", "a read-write connect is closed");
}
