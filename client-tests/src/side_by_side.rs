//! One scenario run on Apache ZooKeeper 3.8 and then on zkd, from the same
//! zoo.cfg: the members of each run on loopback, and their ports.

use crate::oracle::{launch, require_tool, QUORUM_PEER_MAIN, TEST_HEAP, ZOOKEEPER_JAR};
use crate::process::{connect_string, four_letter_word, free_port, srvr_mode, ZkdProcess};
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

/// Every member's ports, member `id` at `id - 1`: client, quorum, election.
pub struct MemberPorts(pub Vec<[u16; 3]>);

impl MemberPorts {
    /// Fresh ports for `n` members.
    pub fn fresh(n: usize) -> MemberPorts {
        MemberPorts(
            (0..n)
                .map(|_| [free_port(), free_port(), free_port()])
                .collect(),
        )
    }

    /// Member `id`'s 3.5+ server line, its client port in it.
    pub fn server_line(&self, id: usize) -> String {
        let [c, q, e] = self.0[id - 1];
        format!("server.{id}=127.0.0.1:{q}:{e};{c}\n")
    }

    /// `text` with each port named by its role and member (`C1`, `Q2`, `E3`),
    /// so that two runs' transcripts compare.
    pub fn named(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for (i, ports) in self.0.iter().enumerate() {
            for (kind, port) in ["C", "Q", "E"].iter().zip(ports) {
                out = out.replace(&port.to_string(), &format!("{kind}{}", i + 1));
            }
        }
        out
    }

    /// The connect string of the members `ids`.
    pub fn clients(&self, ids: &[usize]) -> String {
        connect_string(
            ids.iter()
                .map(|id| format!("127.0.0.1:{}", self.0[id - 1][0])),
        )
    }

    /// Member `id`'s mode, as `srvr` says it; None while it serves nobody.
    pub fn mode(&self, id: usize) -> Option<String> {
        srvr_mode(&four_letter_word(self.0[id - 1][0], "srvr").ok()?)
    }

    /// Waits up to `limit` until every member in `ids` serves; the leader.
    pub fn wait_serving(&self, ids: &[usize], limit: Duration) -> usize {
        let deadline = Instant::now() + limit;
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
}

/// A member of one run, zkd's or ZooKeeper's: dropping it kills it.
pub trait Member: Send {
    /// kill -9.
    fn kill(&mut self);
    /// Starts it again from its files.
    fn restart(&mut self);
    /// Its zoo.cfg.
    fn config(&self) -> PathBuf;
}

/// A ZooKeeper JVM on the zoo.cfg in its directory, killed when dropped.
pub struct Jvm {
    child: Option<Child>,
    dir: tempfile::TempDir,
}

impl Jvm {
    fn start(&mut self) {
        let log = self.dir.path().join("zookeeper.log");
        let child = launch(QUORUM_PEER_MAIN, &self.config(), &[], TEST_HEAP, &log);
        self.child = Some(child);
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
        self.start();
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

/// ZooKeeper members 1 to `n`, each on `zoo_cfg(its dataDir)` with its myid.
pub fn start_zookeeper(n: usize, zoo_cfg: impl Fn(&Path) -> String) -> Vec<Box<dyn Member>> {
    require_tool(ZOOKEEPER_JAR);
    (1..=n)
        .map(|id| {
            let dir = tempfile::tempdir().expect("tempdir");
            let data = dir.path().join("data");
            std::fs::create_dir_all(&data).expect("data dir");
            std::fs::write(data.join("myid"), format!("{id}\n")).expect("myid");
            std::fs::write(dir.path().join("zoo.cfg"), zoo_cfg(&data)).expect("zoo.cfg");
            let mut jvm = Jvm { child: None, dir };
            jvm.start();
            Box::new(jvm) as Box<dyn Member>
        })
        .collect()
}

/// zkd members on `ports`, each on `zoo_cfg(its dataDir)` with its myid.
pub fn start_zkd(ports: &MemberPorts, zoo_cfg: impl Fn(&Path) -> String) -> Vec<Box<dyn Member>> {
    (1..=ports.0.len())
        .map(|id| {
            let port = ports.0[id - 1][0];
            let p = ZkdProcess::try_start_from(&zoo_cfg, "127.0.0.1", port, id as u64)
                .unwrap_or_else(|e| panic!("member {id}: {e}"));
            Box::new(p) as Box<dyn Member>
        })
        .collect()
}
