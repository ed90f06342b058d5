//! A replicated Apache ZooKeeper 3.8 ensemble as the oracle: N members on
//! loopback, each a JVM with its own temp directory, zoo.cfg (`server.N`
//! lines), `myid` and log, started through [`crate::oracle::launch`]. The
//! surface mirrors [`crate::ensemble::Ensemble`] (zkd's), so a test or the
//! benchmark can drive either the same way.
//!
//! ```text
//!   start(n) ──> n JVMs (QuorumPeerMain) ──> wait_until_serving: every member's
//!                                            `srvr` says Mode: leader|follower
//! ```
//!
//! Every JVM is killed when its member drops, and every wait is bounded by
//! [`ZOOKEEPER_START_TIMEOUT`] (ZooKeeper's elections take seconds).

use crate::netns::Topology;
use crate::oracle::{
    base_config, base_config_at, launch_wrapped, require_tool, QUORUM_PEER_MAIN, TEST_HEAP,
    ZOOKEEPER_JAR, ZOOKEEPER_START_TIMEOUT,
};
use crate::process::{
    four_letter_word_at, free_port, port_clash, ServerOptions, PORT_CLASH_ATTEMPTS,
};
use std::path::PathBuf;
use std::process::Child;
use std::time::{Duration, Instant};

/// How long a restarted member may take to open its client port.
const LISTEN_TIMEOUT: Duration = Duration::from_secs(30);

/// One ZooKeeper ensemble member: a JVM that can be killed and restarted on
/// the same ports and data directory.
pub struct ZooKeeperMember {
    child: Option<Child>,
    /// The client port, on `host`.
    pub port: u16,
    /// The client port's address (127.0.0.1, or a namespace's client path).
    pub host: String,
    dir: tempfile::TempDir,
    config: PathBuf,
    properties: Vec<(String, String)>,
    /// The JVM heap, as `-Xmx` takes it.
    heap: &'static str,
    /// A command prefix the JVM runs under (`ip netns exec NS`), or none.
    wrapper: Vec<String>,
}

impl ZooKeeperMember {
    fn log_path(&self) -> PathBuf {
        self.dir.path().join("zookeeper.log")
    }

    fn spawn(&mut self) {
        let child = launch_wrapped(
            &self.wrapper,
            QUORUM_PEER_MAIN,
            &self.config,
            &self.properties,
            self.heap,
            &self.log_path(),
        );
        self.child = Some(child);
    }

    /// `host:port`.
    pub fn addr(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    /// The JVM's process id, while running.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// The member's log so far (every run of it, restarts appended).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    /// Sends a four-letter word to the client port.
    pub fn four_letter_word(&self, word: &str) -> String {
        four_letter_word_at(&self.host, self.port, word).expect("4lw")
    }

    /// The member's zoo.cfg.
    pub fn config_path(&self) -> &std::path::Path {
        &self.config
    }

    /// The member's dataDir (`myid`, `version-2/`).
    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// SIGSTOP: the JVM freezes with its sockets open (a kill -9 still ends it).
    pub fn pause(&self) {
        if let Some(pid) = self.pid() {
            crate::process::signal(pid, "-STOP");
        }
    }

    /// kill -9: the JVM gets no chance to flush or to say goodbye to peers.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the member again on the same ports and data directory, and
    /// waits (bounded) until its client port answers a four-letter word;
    /// whether it has rejoined is [`ZooKeeperEnsemble::wait_until_serving`]'s
    /// question.
    pub fn restart(&mut self) {
        self.try_restart().unwrap_or_else(|e| panic!("{e}"));
    }

    /// [`ZooKeeperMember::restart`], with a JVM that exits or never listens
    /// as an error (with its log) rather than a panic.
    pub fn try_restart(&mut self) -> Result<(), String> {
        self.kill9();
        self.spawn();
        let deadline = Instant::now() + LISTEN_TIMEOUT;
        while !four_letter_word_at(&self.host, self.port, "srvr").is_ok_and(|r| !r.is_empty()) {
            if let Some(status) = self.exit_status() {
                self.child = None;
                return Err(format!(
                    "ZooKeeper exited early with {status}; log:\n{}",
                    self.log()
                ));
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "restarted ZooKeeper member did not listen within {LISTEN_TIMEOUT:?}; log:\n{}",
                    self.log()
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }

    /// Whether the JVM runs (it may have exited by itself).
    pub fn running(&mut self) -> bool {
        self.child.is_some() && self.exit_status().is_none()
    }

    fn exit_status(&mut self) -> Option<std::process::ExitStatus> {
        self.child.as_mut()?.try_wait().ok().flatten()
    }
}

impl Drop for ZooKeeperMember {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// Running ZooKeeper members, indexed from 0 (member `i` has myid `i + 1`).
pub struct ZooKeeperEnsemble {
    pub members: Vec<ZooKeeperMember>,
    /// The namespaces the members run in, if any (after `members`, so the
    /// JVMs are killed before their namespaces go).
    net: Option<Topology>,
}

impl ZooKeeperEnsemble {
    /// Starts `n` members with a 500 ms tick (as zkd's [`crate::ensemble::Ensemble::start`])
    /// and waits until every one of them serves.
    pub fn start(n: usize) -> ZooKeeperEnsemble {
        ZooKeeperEnsemble::start_with(n, 500, &[])
    }

    /// Starts `n` members with `tickTime=tick_time_ms`, `initLimit=10`,
    /// `syncLimit=4` and the extra JVM system properties `properties`, and
    /// waits until every one serves. Fails the test (naming
    /// client-tests/run-all.sh) when ZooKeeper is not installed.
    pub fn start_with(
        n: usize,
        tick_time_ms: u64,
        properties: &[(&str, &str)],
    ) -> ZooKeeperEnsemble {
        ZooKeeperEnsemble::start_sized(n, tick_time_ms, properties, TEST_HEAP)
    }

    /// Like [`ZooKeeperEnsemble::start_with`], each member with a heap of
    /// `heap` (as `-Xmx` takes it, e.g. [`crate::oracle::BENCH_HEAP`]).
    pub fn start_sized(
        n: usize,
        tick_time_ms: u64,
        properties: &[(&str, &str)],
        heap: &'static str,
    ) -> ZooKeeperEnsemble {
        ZooKeeperEnsemble::start_configured(n, tick_time_ms, properties, heap, &|_| String::new())
    }

    /// Starts `n` members with a 500 ms tick, member `i`'s AdminServer on
    /// 127.0.0.1:`admin_ports[i]`, and waits until every one serves.
    pub fn start_with_admin(admin_ports: &[u16]) -> ZooKeeperEnsemble {
        let lines = |i: usize| {
            format!(
                "admin.enableServer=true\nadmin.serverAddress=127.0.0.1\nadmin.serverPort={}\n",
                admin_ports[i]
            )
        };
        ZooKeeperEnsemble::start_configured(admin_ports.len(), 500, &[], TEST_HEAP, &lines)
    }

    /// Starts `n` members with a 500 ms tick, every zoo.cfg ending with
    /// `lines` and every JVM given `properties`, and waits until every one
    /// serves.
    pub fn start_with_lines(
        n: usize,
        lines: &str,
        properties: &[(&str, &str)],
    ) -> ZooKeeperEnsemble {
        ZooKeeperEnsemble::start_configured(n, 500, properties, TEST_HEAP, &|_| lines.to_owned())
    }

    /// Starts `n` members with `tickTime=tick_time_ms`, a heap of `heap`
    /// (as `-Xmx` takes it), every zoo.cfg ending with `lines`, and waits
    /// until every one serves.
    pub fn start_sized_with_lines(
        n: usize,
        tick_time_ms: u64,
        heap: &'static str,
        lines: &str,
    ) -> ZooKeeperEnsemble {
        ZooKeeperEnsemble::start_configured(n, tick_time_ms, &[], heap, &|_| lines.to_owned())
    }

    /// Starts `n` members with `tickTime=tick_time_ms`, every zoo.cfg ending
    /// with `lines`, and waits until every one serves.
    pub fn start_ticked_with_lines(n: usize, tick_time_ms: u64, lines: &str) -> ZooKeeperEnsemble {
        ZooKeeperEnsemble::start_configured(n, tick_time_ms, &[], TEST_HEAP, &|_| lines.to_owned())
    }

    /// Members on copies of the dataDirs `data` (member `i` on `data[i]`'s
    /// `version-2/`, with myid `i + 1`), on new ports, every zoo.cfg ending
    /// with `lines`; none is started: start each with
    /// [`ZooKeeperMember::restart`], in the order the test needs, then
    /// [`ZooKeeperEnsemble::wait_until_serving`].
    pub fn on_copies_of(data: &[PathBuf], tick_time_ms: u64, lines: &str) -> ZooKeeperEnsemble {
        require_tool(ZOOKEEPER_JAR);
        ZooKeeperEnsemble::configure_all(data.len(), tick_time_ms, &[], TEST_HEAP, &|_| {
            lines.to_owned()
        })
        .with_data_from(data)
    }

    /// Replaces every member's (empty) `version-2/` with a copy of `data[i]`'s.
    fn with_data_from(self, data: &[PathBuf]) -> ZooKeeperEnsemble {
        for (member, from) in self.members.iter().zip(data) {
            crate::oracle::copy_version_2(from, &member.data_dir());
        }
        self
    }

    /// Starts `n` members, member `i`'s zoo.cfg ending with `extra(i)`
    /// (whose keys override the base config's), and waits until every one serves.
    fn start_configured(
        n: usize,
        tick_time_ms: u64,
        properties: &[(&str, &str)],
        heap: &'static str,
        extra: &dyn Fn(usize) -> String,
    ) -> ZooKeeperEnsemble {
        require_tool(ZOOKEEPER_JAR);
        assert!(n >= 2, "an ensemble needs two or more members, not {n}");
        let properties: Vec<(String, String)> = properties
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        for attempt in 1..=PORT_CLASH_ATTEMPTS {
            let mut ensemble =
                ZooKeeperEnsemble::spawn_all(n, tick_time_ms, &properties, heap, extra);
            match ensemble.wait_serving(&(0..n).collect::<Vec<_>>()) {
                Ok(_) => return ensemble,
                // Another process bound one of the ports first: new ports.
                Err(e) if attempt < PORT_CLASH_ATTEMPTS && port_clash(&ensemble.logs()) => {
                    eprintln!("ZooKeeper ensemble start {attempt} lost a port, retrying: {e}");
                }
                Err(e) => panic!("{e}"),
            }
        }
        unreachable!("the last attempt returns or panics")
    }

    /// Writes every member's directory and config and starts its JVM, without waiting.
    fn spawn_all(
        n: usize,
        tick_time_ms: u64,
        properties: &[(String, String)],
        heap: &'static str,
        extra: &dyn Fn(usize) -> String,
    ) -> ZooKeeperEnsemble {
        let mut ensemble =
            ZooKeeperEnsemble::configure_all(n, tick_time_ms, properties, heap, extra);
        ensemble.members.iter_mut().for_each(ZooKeeperMember::spawn);
        ensemble
    }

    /// Writes every member's directory and config, on new ports; starts none.
    fn configure_all(
        n: usize,
        tick_time_ms: u64,
        properties: &[(String, String)],
        heap: &'static str,
        extra: &dyn Fn(usize) -> String,
    ) -> ZooKeeperEnsemble {
        let mut servers = String::from("initLimit=10\nsyncLimit=4\n");
        for id in 1..=n {
            servers.push_str(&format!(
                "server.{id}=127.0.0.1:{}:{}\n",
                free_port(),
                free_port()
            ));
        }
        let members = (1..=n)
            .map(|id| {
                let dir = tempfile::tempdir().expect("tempdir");
                let data = dir.path().join("data");
                std::fs::create_dir_all(&data).expect("data dir");
                std::fs::write(data.join("myid"), format!("{id}\n")).expect("write myid");
                let port = free_port();
                let config = dir.path().join("zoo.cfg");
                let text = base_config(tick_time_ms, &data, port) + &servers + &extra(id - 1);
                std::fs::write(&config, text).expect("write zoo.cfg");
                ZooKeeperMember {
                    child: None,
                    port,
                    host: "127.0.0.1".into(),
                    dir,
                    config,
                    properties: properties.to_vec(),
                    heap,
                    wrapper: Vec::new(),
                }
            })
            .collect();
        ZooKeeperEnsemble { members, net: None }
    }

    /// Starts one member per member of `net`, each in its namespace: peers on
    /// the namespaces' peer network, the client port on the member's client
    /// path, all on the same ports (as zkd's
    /// [`crate::ensemble::Ensemble::start_in_namespaces`]). Member `i` takes
    /// its tick, dataDir, command wrapper and `extra` zoo.cfg lines from
    /// `options[i]`. Waits until every one serves.
    pub fn start_in_namespaces(net: Topology, options: Vec<ServerOptions>) -> ZooKeeperEnsemble {
        require_tool(ZOOKEEPER_JAR);
        let (client_port, quorum_port, election_port) = (2181, 2888, 3888);
        let n = net.members();
        assert_eq!(options.len(), n, "options for every member");
        let mut servers = String::from("initLimit=10\nsyncLimit=4\n");
        for i in 0..n {
            let ip = net.peer_ip(i);
            servers.push_str(&format!(
                "server.{}={ip}:{quorum_port}:{election_port}\n",
                i + 1
            ));
        }
        let members = (0..n)
            .map(|i| {
                let dir = tempfile::tempdir().expect("tempdir");
                let data = options[i]
                    .data_dir
                    .clone()
                    .unwrap_or_else(|| dir.path().join("data"));
                std::fs::create_dir_all(&data).expect("data dir");
                std::fs::write(data.join("myid"), format!("{}\n", i + 1)).expect("write myid");
                let host = net.client_ip(i).to_string();
                let config = dir.path().join("zoo.cfg");
                let tick = options[i].tick_time_ms;
                let extra: String = (options[i].extra.iter())
                    .map(|(k, v)| format!("{k}={v}\n"))
                    .collect();
                let text = base_config_at(tick, &data, &host, client_port) + &servers + &extra;
                std::fs::write(&config, text).expect("write zoo.cfg");
                let mut member = ZooKeeperMember {
                    child: None,
                    port: client_port,
                    host,
                    dir,
                    config,
                    properties: Vec::new(),
                    heap: TEST_HEAP,
                    wrapper: net
                        .wrapper(i)
                        .into_iter()
                        .chain(options[i].wrapper.iter().cloned())
                        .collect(),
                };
                member.spawn();
                member
            })
            .collect();
        let mut ensemble = ZooKeeperEnsemble {
            members,
            net: Some(net),
        };
        ensemble.wait_until_serving(&(0..n).collect::<Vec<_>>());
        ensemble
    }

    /// The namespaces, for an ensemble started in them.
    pub fn net(&self) -> &Topology {
        self.net
            .as_ref()
            .expect("an ensemble started with ZooKeeperEnsemble::start_in_namespaces")
    }

    /// The connect string of the members listed.
    pub fn connect_string(&self, which: &[usize]) -> String {
        crate::process::connect_string(which.iter().map(|i| self.members[*i].addr()))
    }

    /// The connect string of every member.
    pub fn all(&self) -> String {
        self.connect_string(&(0..self.members.len()).collect::<Vec<_>>())
    }

    /// Member `i`'s `Mode:` as `srvr` reports it, or None if it does not
    /// serve (a LOOKING member answers "not currently serving requests").
    pub fn mode(&self, i: usize) -> Option<String> {
        let member = &self.members[i];
        let reply = four_letter_word_at(&member.host, member.port, "srvr").ok()?;
        crate::process::srvr_mode(&reply)
    }

    /// The index of the member that reports `Mode: leader`, if one does.
    pub fn leader(&self) -> Option<usize> {
        (0..self.members.len()).find(|i| self.mode(*i).as_deref() == Some("leader"))
    }

    /// Waits (bounded) until there is a leader and the listed members all
    /// serve as leader or follower; returns the leader's index. Fails with
    /// every member's log if that does not happen in time or a listed
    /// member's JVM exits.
    pub fn wait_until_serving(&mut self, which: &[usize]) -> usize {
        self.wait_serving(which).unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`ZooKeeperEnsemble::wait_until_serving`], with the failure as an error.
    fn wait_serving(&mut self, which: &[usize]) -> Result<usize, String> {
        let deadline = Instant::now() + ZOOKEEPER_START_TIMEOUT;
        loop {
            let modes: Vec<Option<String>> = which.iter().map(|i| self.mode(*i)).collect();
            let serving = modes
                .iter()
                .all(|m| matches!(m.as_deref(), Some("leader" | "follower")));
            if let Some(leader) = self.leader().filter(|_| serving) {
                return Ok(leader);
            }
            for i in which {
                if let Some(status) = self.members[*i].exit_status() {
                    return Err(format!(
                        "ZooKeeper member {} exited with {status}; logs:\n{}",
                        i + 1,
                        self.logs()
                    ));
                }
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "ZooKeeper members {which:?} not all serving after {ZOOKEEPER_START_TIMEOUT:?} (modes {modes:?}); logs:\n{}",
                    self.logs()
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// kill -9 member `i`.
    pub fn kill9(&mut self, i: usize) {
        self.members[i].kill9();
    }

    /// Restarts member `i` on its ports and data; see [`ZooKeeperMember::restart`].
    pub fn restart(&mut self, i: usize) {
        self.members[i].restart();
    }

    /// Restarts member `i`; see [`ZooKeeperMember::try_restart`].
    pub fn try_restart(&mut self, i: usize) -> Result<(), String> {
        self.members[i].try_restart()
    }

    /// Every member's log, labelled, for failure messages.
    pub fn logs(&self) -> String {
        self.members
            .iter()
            .enumerate()
            .map(|(i, m)| format!("---- ZooKeeper member {} ----\n{}", i + 1, m.log()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_killed_leader_is_replaced_and_a_restarted_member_rejoins() {
        let mut zk = ZooKeeperEnsemble::start(3);
        let leader = zk.leader().expect("a leader");
        let modes: Vec<Option<String>> = (0..3).map(|i| zk.mode(i)).collect();
        assert_eq!(
            modes
                .iter()
                .filter(|m| m.as_deref() == Some("follower"))
                .count(),
            2,
            "{modes:?}"
        );
        assert_eq!(zk.all().split(',').count(), 3);

        zk.kill9(leader);
        assert_eq!(zk.mode(leader), None, "a killed member does not answer");
        let others: Vec<usize> = (0..3).filter(|i| *i != leader).collect();
        let new_leader = zk.wait_until_serving(&others);
        assert_ne!(new_leader, leader);

        zk.restart(leader);
        assert_eq!(zk.wait_until_serving(&[0, 1, 2]), new_leader);
        assert_eq!(zk.mode(leader).as_deref(), Some("follower"));
        assert!(
            zk.members[leader].log().contains("FOLLOWING"),
            "the restarted member's log says it follows:\n{}",
            zk.logs()
        );
    }
}
