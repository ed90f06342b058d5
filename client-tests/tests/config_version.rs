//! The version of `/zookeeper/config` with `reconfigEnabled=true`, side by
//! side with Apache ZooKeeper 3.8: the same zoo.cfg on both (three
//! participants, client ports in the server lines, no `version=`). The
//! first leader gives the configuration its epoch's zxid as version
//! (ZOOKEEPER-1783) and every member shows it, with that mzxid; a leader
//! elected later keeps it. (Without reconfig it stays 0: tests/observers.rs.)

use std::path::Path;
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

/// A ZooKeeper JVM, killed when dropped.
struct Jvm {
    child: Child,
    _dir: tempfile::TempDir,
}

impl Drop for Jvm {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A member of one run, zkd's or ZooKeeper's: dropping it kills it.
type Member = Box<dyn Send>;

fn start_zookeeper(ports: &Ports) -> Vec<Option<Member>> {
    require_tool(ZOOKEEPER_JAR);
    (1..=MEMBERS)
        .map(|id| {
            let dir = tempfile::tempdir().expect("tempdir");
            let data = dir.path().join("data");
            std::fs::create_dir_all(&data).expect("data dir");
            std::fs::write(data.join("myid"), format!("{id}\n")).expect("myid");
            let config = dir.path().join("zoo.cfg");
            std::fs::write(&config, ports.zoo_cfg(&data)).expect("zoo.cfg");
            let log = dir.path().join("zookeeper.log");
            let child = launch(QUORUM_PEER_MAIN, &config, &[], TEST_HEAP, &log);
            Some(Box::new(Jvm { child, _dir: dir }) as Member)
        })
        .collect()
}

fn start_zkd(ports: &Ports) -> Vec<Option<Member>> {
    (1..=MEMBERS)
        .map(|id| {
            let config = |data: &Path| ports.zoo_cfg(data);
            let port = ports.0[id - 1][0];
            let p = ZkdProcess::try_start_from(config, "127.0.0.1", port, id as u64)
                .unwrap_or_else(|e| panic!("member {id}: {e}"));
            Some(Box::new(p) as Member)
        })
        .collect()
}

/// Every member's config once all serve; the same after the leader dies.
async fn scenario(ports: &Ports, members: &mut [Option<Member>]) -> Vec<String> {
    let all: Vec<usize> = (1..=MEMBERS).collect();
    let leader = ports.wait_serving(&all);
    let mut seen = Vec::new();
    for id in 1..=MEMBERS {
        seen.push(ports.config(id).await);
    }
    members[leader - 1] = None;
    let survivors: Vec<usize> = all.iter().copied().filter(|id| *id != leader).collect();
    ports.wait_serving(&survivors);
    seen.push("the first leader killed, a new one elected".into());
    for id in survivors {
        let line = ports.config(id).await;
        seen.push(line.replace(&format!("member {id}"), "a survivor"));
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
        ours[0].ends_with("version=100000000\n  mzxid 0x100000000 version -1"),
        "{ours:#?}"
    );
}
