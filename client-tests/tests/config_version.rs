//! The version of `/zookeeper/config` with `reconfigEnabled=true`, side by
//! side with Apache ZooKeeper 3.8: the same zoo.cfg on both (three
//! participants, client ports in the server lines, no `version=`). The
//! first leader gives the configuration its epoch's zxid as version
//! (ZOOKEEPER-1783) and every member shows it, with that mzxid; a leader
//! elected later keeps it. Each member backs zoo.cfg up, records the
//! configuration in `zoo.cfg.dynamic.100000000` and points zoo.cfg at it,
//! so that after every member restarts the version is still the first
//! one. (Without reconfig it stays 0: tests/observers.rs.)

use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};
use zkd_client_tests::oracle::{launch, require_tool, QUORUM_PEER_MAIN, TEST_HEAP, ZOOKEEPER_JAR};
use zkd_client_tests::process::{four_letter_word, free_port, srvr_mode, ZkdProcess};
use zkd_client_tests::{connect, within};

const SESSION: Duration = Duration::from_secs(6);
const MEMBERS: usize = 3;
/// How long an election and sync may take (ZooKeeper's take seconds).
const SETTLE: Duration = Duration::from_secs(40);

/// Every member's ports: client, quorum, election.
struct Ports(Vec<[u16; 3]>);

impl Ports {
    fn fresh() -> Ports {
        Ports(
            (0..MEMBERS)
                .map(|_| [free_port(), free_port(), free_port()])
                .collect(),
        )
    }

    /// The zoo.cfg every member has, but for its dataDir.
    fn zoo_cfg(&self, data: &Path) -> String {
        let mut text = format!(
            "tickTime=500\ninitLimit=10\nsyncLimit=4\ndataDir={}\nreconfigEnabled=true\n\
             4lw.commands.whitelist=*\nadmin.enableServer=false\n",
            data.display()
        );
        for (i, [c, q, e]) in self.0.iter().enumerate() {
            text.push_str(&format!("server.{}=127.0.0.1:{q}:{e};{c}\n", i + 1));
        }
        text
    }

    /// `text` with each port named by its role and member (`C1`, `Q2`).
    fn named(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for (i, ports) in self.0.iter().enumerate() {
            for (kind, port) in ["C", "Q", "E"].iter().zip(ports) {
                out = out.replace(&port.to_string(), &format!("{kind}{}", i + 1));
            }
        }
        out
    }

    fn mode(&self, id: usize) -> Option<String> {
        srvr_mode(&four_letter_word(self.0[id - 1][0], "srvr").ok()?)
    }

    /// Waits until every member in `ids` serves; returns the leader.
    fn wait_serving(&self, ids: &[usize]) -> usize {
        let deadline = Instant::now() + SETTLE;
        loop {
            let modes: Vec<Option<String>> = ids.iter().map(|id| self.mode(*id)).collect();
            let leader = ids
                .iter()
                .zip(&modes)
                .find(|(_, m)| m.as_deref() == Some("leader"));
            if let (Some((id, _)), true) = (leader, modes.iter().all(Option::is_some)) {
                return *id;
            }
            assert!(
                Instant::now() < deadline,
                "members {ids:?} not serving: {modes:?}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// `/zookeeper/config` as member `id` shows it, with its mzxid and version.
    async fn config(&self, id: usize) -> String {
        let client = connect(&format!("127.0.0.1:{}", self.0[id - 1][0]), SESSION).await;
        let (data, stat) = within(client.get_data("/zookeeper/config"))
            .await
            .expect("get /zookeeper/config");
        format!(
            "member {id}: {}\n  mzxid {:#x} version {}",
            self.named(&String::from_utf8_lossy(&data)),
            stat.mzxid,
            stat.version
        )
    }
}

/// A member of one run, zkd's or ZooKeeper's: dropping it kills it.
trait Member: Send {
    fn kill(&mut self);
    /// Starts it again from its files.
    fn restart(&mut self);
    /// Its zoo.cfg.
    fn config(&self) -> PathBuf;
}

/// A ZooKeeper JVM, killed when dropped.
struct Jvm {
    child: Option<Child>,
    dir: tempfile::TempDir,
}

impl Jvm {
    fn launch(dir: tempfile::TempDir) -> Jvm {
        let log = dir.path().join("zookeeper.log");
        let config = dir.path().join("zoo.cfg");
        let child = Some(launch(QUORUM_PEER_MAIN, &config, &[], TEST_HEAP, &log));
        Jvm { child, dir }
    }
}

impl Member for Jvm {
    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn restart(&mut self) {
        self.kill();
        let (log, config) = (self.dir.path().join("zookeeper.log"), self.config());
        self.child = Some(launch(QUORUM_PEER_MAIN, &config, &[], TEST_HEAP, &log));
    }

    fn config(&self) -> PathBuf {
        self.dir.path().join("zoo.cfg")
    }
}

impl Drop for Jvm {
    fn drop(&mut self) {
        self.kill();
    }
}

impl Member for ZkdProcess {
    fn kill(&mut self) {
        self.kill9();
    }

    fn restart(&mut self) {
        ZkdProcess::restart(self);
    }

    fn config(&self) -> PathBuf {
        self.config_path().to_path_buf()
    }
}

/// The config files beside member `id`'s zoo.cfg: each name, and its lines
/// sorted (ZooKeeper writes zoo.cfg's in its hash order), paths and ports
/// named.
fn config_files(ports: &Ports, id: usize, member: &dyn Member) -> Vec<String> {
    let config = member.config();
    let dir = config.parent().expect("a directory");
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("the member's directory")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with("zoo.cfg"))
        .collect();
    names.sort();
    let mut out = Vec::new();
    for name in names {
        let text = std::fs::read_to_string(dir.join(&name)).unwrap_or_default();
        let text = text.replace(&dir.display().to_string(), "DIR");
        let mut lines: Vec<&str> = text.lines().collect();
        lines.sort_unstable();
        out.push(format!(
            "member {id} {name}: {}",
            ports.named(&lines.join(" | "))
        ));
    }
    out
}

fn start_zookeeper(ports: &Ports) -> Vec<Box<dyn Member>> {
    require_tool(ZOOKEEPER_JAR);
    (1..=MEMBERS)
        .map(|id| {
            let dir = tempfile::tempdir().expect("tempdir");
            let data = dir.path().join("data");
            std::fs::create_dir_all(&data).expect("data dir");
            std::fs::write(data.join("myid"), format!("{id}\n")).expect("myid");
            let config = dir.path().join("zoo.cfg");
            std::fs::write(&config, ports.zoo_cfg(&data)).expect("zoo.cfg");
            Box::new(Jvm::launch(dir)) as Box<dyn Member>
        })
        .collect()
}

fn start_zkd(ports: &Ports) -> Vec<Box<dyn Member>> {
    (1..=MEMBERS)
        .map(|id| {
            let config = |data: &Path| ports.zoo_cfg(data);
            let port = ports.0[id - 1][0];
            let p = ZkdProcess::try_start_from(config, "127.0.0.1", port, id as u64)
                .unwrap_or_else(|e| panic!("member {id}: {e}"));
            Box::new(p) as Box<dyn Member>
        })
        .collect()
}

/// Every member's config once all serve; the same after the leader dies;
/// the config files; the config once every member restarted.
async fn scenario(ports: &Ports, members: &mut [Box<dyn Member>]) -> Vec<String> {
    let all: Vec<usize> = (1..=MEMBERS).collect();
    let leader = ports.wait_serving(&all);
    let mut seen = Vec::new();
    for id in 1..=MEMBERS {
        seen.push(ports.config(id).await);
    }
    members[leader - 1].kill();
    let survivors: Vec<usize> = all.iter().copied().filter(|id| *id != leader).collect();
    ports.wait_serving(&survivors);
    seen.push("the first leader killed, a new one elected".into());
    for id in survivors {
        let line = ports.config(id).await;
        seen.push(line.replace(&format!("member {id}"), "a survivor"));
    }
    for (i, member) in members.iter().enumerate() {
        seen.extend(config_files(ports, i + 1, member.as_ref()));
    }
    for member in members.iter_mut() {
        member.kill();
    }
    for member in members.iter_mut() {
        member.restart();
    }
    ports.wait_serving(&all);
    seen.push("every member restarted".into());
    for id in 1..=MEMBERS {
        seen.push(ports.config(id).await);
    }
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_leader_versions_the_configuration_as_zookeepers_does() {
    let ports = Ports::fresh();
    let mut members = start_zookeeper(&ports);
    let theirs = scenario(&ports, &mut members).await;
    drop(members);

    let ports = Ports::fresh();
    let mut members = start_zkd(&ports);
    let ours = scenario(&ports, &mut members).await;
    assert_eq!(ours, theirs, "zkd (left) and ZooKeeper 3.8 (right) differ");
    assert!(
        ours.iter()
            .any(|l| l.contains("zoo.cfg.dynamic.100000000: server.1=")),
        "{ours:#?}"
    );
    assert!(
        ours[0].ends_with("version=100000000\n  mzxid 0x100000000 version -1"),
        "{ours:#?}"
    );
}
