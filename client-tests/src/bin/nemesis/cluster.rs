//! The ensemble under test, zkd's or Apache ZooKeeper's, each member in a
//! network namespace of its own (see `zkd_client_tests::netns`), so faults
//! can cut any link: member to member, either way, or client to member.
//!
//! Links are cut with nftables rules in the members' namespaces (packets
//! dropped silently, as by a pulled cable); healing flushes them.

use std::process::Command;
use std::time::{Duration, Instant};
use zkd_client_tests::ensemble::Ensemble;
use zkd_client_tests::netns::Topology;
use zkd_client_tests::oracle_ensemble::ZooKeeperEnsemble;
use zkd_client_tests::ServerOptions;

/// Which server the run tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Server {
    /// zkd, this repository's server.
    Zkd,
    /// Apache ZooKeeper from Debian's `zookeeper` package: the baseline.
    Zookeeper,
}

/// The nftables table the harness owns in each member's namespace.
const TABLE: &str = "zkdnemesis";

/// A running ensemble.
pub enum Cluster {
    Zkd(Ensemble),
    ZooKeeper(ZooKeeperEnsemble),
}

impl Cluster {
    /// Starts `members` members of `server`, tick `tick_ms`, and waits until all serve.
    pub fn start(server: Server, members: usize, tick_ms: u64) -> Cluster {
        let cluster = match server {
            Server::Zkd => {
                let options = ServerOptions {
                    tick_time_ms: tick_ms,
                    ..ServerOptions::default()
                };
                let order: Vec<usize> = (0..members).collect();
                Cluster::Zkd(Ensemble::start_in_namespaces(
                    vec![options; members],
                    &order,
                ))
            }
            Server::Zookeeper => Cluster::ZooKeeper(ZooKeeperEnsemble::start_in_namespaces(
                Topology::new(members),
                tick_ms,
            )),
        };
        for i in 0..members {
            cluster.nft(i, &format!("add table inet {TABLE}"));
            for (chain, hook) in [("out", "output"), ("in", "input")] {
                cluster.nft(
                    i,
                    &format!(
                        "add chain inet {TABLE} {chain} {{ type filter hook {hook} priority 0 ; }}"
                    ),
                );
            }
        }
        cluster
    }

    /// Members.
    pub fn len(&self) -> usize {
        match self {
            Cluster::Zkd(e) => e.members.len(),
            Cluster::ZooKeeper(e) => e.members.len(),
        }
    }

    fn net(&self) -> &Topology {
        match self {
            Cluster::Zkd(e) => e.net(),
            Cluster::ZooKeeper(e) => e.net(),
        }
    }

    /// The connect string of every member.
    pub fn connect_string(&self) -> String {
        match self {
            Cluster::Zkd(e) => e.all(),
            Cluster::ZooKeeper(e) => e.all(),
        }
    }

    /// The member whose `srvr` says leader, if one does.
    pub fn leader(&self) -> Option<usize> {
        match self {
            Cluster::Zkd(e) => e.leader(),
            Cluster::ZooKeeper(e) => e.leader(),
        }
    }

    /// Whether member `i` serves clients (leader or follower).
    pub fn serving(&self, i: usize) -> bool {
        let mode = match self {
            Cluster::Zkd(e) => e.mode(i),
            Cluster::ZooKeeper(e) => e.mode(i),
        };
        matches!(mode.as_deref(), Some("leader" | "follower"))
    }

    /// Waits up to `limit` for every member to serve; whether they all do.
    pub fn wait_all_serving(&self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        loop {
            if (0..self.len()).all(|i| self.serving(i)) {
                return true;
            }
            if Instant::now() > deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// kill -9 member `i` (no effect if it is down).
    pub fn kill9(&mut self, i: usize) {
        match self {
            Cluster::Zkd(e) => e.members[i].kill9(),
            Cluster::ZooKeeper(e) => e.kill9(i),
        }
    }

    /// Starts member `i` again on its data (killing it first if it runs).
    pub fn restart(&mut self, i: usize) {
        match self {
            Cluster::Zkd(e) => e.members[i].restart(),
            Cluster::ZooKeeper(e) => e.restart(i),
        }
    }

    fn pid(&self, i: usize) -> Option<u32> {
        match self {
            Cluster::Zkd(e) => e.members[i].pid(),
            Cluster::ZooKeeper(e) => e.members[i].pid(),
        }
    }

    /// SIGSTOP member `i`.
    pub fn pause(&self, i: usize) {
        self.signal(i, "-STOP");
    }

    /// SIGCONT member `i`.
    pub fn resume(&self, i: usize) {
        self.signal(i, "-CONT");
    }

    fn signal(&self, i: usize, sig: &str) {
        if let Some(pid) = self.pid(i) {
            let _ = Command::new("kill").args([sig, &pid.to_string()]).status();
        }
    }

    /// Drops every packet from member `from` to member `to` (one way).
    pub fn cut(&self, from: usize, to: usize) {
        let ip = self.net().peer_ip(to);
        self.nft(
            from,
            &format!("add rule inet {TABLE} out ip daddr {ip} drop"),
        );
    }

    /// Drops every packet between member `i` and its clients, both ways.
    pub fn cut_clients(&self, i: usize) {
        self.nft(
            i,
            &format!("add rule inet {TABLE} in iifname \"cli0\" drop"),
        );
        self.nft(
            i,
            &format!("add rule inet {TABLE} out oifname \"cli0\" drop"),
        );
    }

    /// Removes every cut.
    pub fn heal(&self) {
        for i in 0..self.len() {
            for chain in ["out", "in"] {
                self.nft(i, &format!("flush chain inet {TABLE} {chain}"));
            }
        }
    }

    fn nft(&self, i: usize, rule: &str) {
        let ns = self.net().namespace(i);
        let mut args = vec!["netns", "exec", ns.as_str(), "nft"];
        args.extend(rule.split(' '));
        let out = Command::new("ip").args(&args).output().expect("run nft");
        assert!(
            out.status.success(),
            "nft {rule} in {ns}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Every member's log: (name, text).
    pub fn logs(&self) -> Vec<(String, String)> {
        match self {
            Cluster::Zkd(e) => e
                .members
                .iter()
                .enumerate()
                .map(|(i, m)| (format!("zkd-{}.log", i + 1), m.log()))
                .collect(),
            Cluster::ZooKeeper(e) => e
                .members
                .iter()
                .enumerate()
                .map(|(i, m)| (format!("zookeeper-{}.log", i + 1), m.log()))
                .collect(),
        }
    }
}
