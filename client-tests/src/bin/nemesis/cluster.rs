//! The ensemble under test, zkd's or Apache ZooKeeper's, each member in a
//! network namespace of its own (see `zkd_client_tests::netns`), so faults
//! can cut any link: member to member, either way, or client to member.
//!
//! Links are cut with nftables rules in the members' namespaces (packets
//! dropped silently, as by a pulled cable); healing flushes them. Each
//! member's dataDir is on a [`MemberDisk`] that the disk nemeses act on.

use crate::disk::{DiskPlan, MemberDisk};
use nix::sys::signal::Signal;
use nix::unistd::Pid;
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

/// The running members, of one server or the other.
enum Members {
    Zkd(Ensemble),
    ZooKeeper(ZooKeeperEnsemble),
}

/// A running ensemble and its members' disks.
pub struct Cluster {
    /// Declared first: the members die before their disks go.
    members: Members,
    disks: Vec<MemberDisk>,
}

impl Cluster {
    /// Starts `members` members of `server`, tick `tick_ms`, on disks as
    /// `plan` asks, with `reconfig` enabled (and `skipACL`) or not, and
    /// waits until all serve.
    pub fn start(
        server: Server,
        members: usize,
        tick_ms: u64,
        plan: DiskPlan,
        reconfig: bool,
    ) -> Cluster {
        let lazyfs = std::env::current_exe()
            .expect("own path")
            .with_file_name("zkd-lazyfs");
        let disks: Vec<MemberDisk> = (0..members)
            .map(|i| MemberDisk::new(plan, i + 1, &lazyfs))
            .collect();
        let options: Vec<ServerOptions> = disks
            .iter()
            .map(|d| ServerOptions {
                tick_time_ms: tick_ms,
                wrapper: d.wrapper(),
                data_dir: Some(d.data_dir().to_owned()),
                extra: match reconfig {
                    true => vec![
                        ("reconfigEnabled".into(), "true".into()),
                        ("skipACL".into(), "yes".into()),
                    ],
                    false => Vec::new(),
                },
                ..ServerOptions::default()
            })
            .collect();
        let running = match server {
            Server::Zkd => {
                let order: Vec<usize> = (0..members).collect();
                Members::Zkd(Ensemble::start_in_namespaces(options, &order))
            }
            Server::Zookeeper => Members::ZooKeeper(ZooKeeperEnsemble::start_in_namespaces(
                Topology::new(members),
                options,
            )),
        };
        let cluster = Cluster {
            members: running,
            disks,
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
        match &self.members {
            Members::Zkd(e) => e.members.len(),
            Members::ZooKeeper(e) => e.members.len(),
        }
    }

    fn net(&self) -> &Topology {
        match &self.members {
            Members::Zkd(e) => e.net(),
            Members::ZooKeeper(e) => e.net(),
        }
    }

    /// Member `i`'s server line, as a reconfig's joining list names it
    /// (the namespaces' ports: 2181 for clients, 2888 and 3888 for peers).
    pub fn server_line(&self, i: usize) -> String {
        let net = self.net();
        format!(
            "server.{}={}:2888:3888:participant;{}:2181",
            i + 1,
            net.peer_ip(i),
            net.client_ip(i)
        )
    }

    /// The connect string of every member.
    pub fn connect_string(&self) -> String {
        match &self.members {
            Members::Zkd(e) => e.all(),
            Members::ZooKeeper(e) => e.all(),
        }
    }

    /// The member whose `srvr` says leader, if one does.
    pub fn leader(&self) -> Option<usize> {
        match &self.members {
            Members::Zkd(e) => e.leader(),
            Members::ZooKeeper(e) => e.leader(),
        }
    }

    /// Whether member `i` serves clients (leader or follower).
    pub fn serving(&self, i: usize) -> bool {
        let mode = match &self.members {
            Members::Zkd(e) => e.mode(i),
            Members::ZooKeeper(e) => e.mode(i),
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

    /// kill -9 of every member in `which` at the same instant (one signal
    /// each, back to back, then they are reaped): a correlated outage, in
    /// which no member outlives another by the time a sync takes.
    pub fn kill9_all(&mut self, which: &[usize]) {
        for &i in which {
            self.signal(i, Signal::SIGKILL);
        }
        for &i in which {
            self.kill9(i);
        }
    }

    /// kill -9 member `i` (no effect if it is down).
    pub fn kill9(&mut self, i: usize) {
        match &mut self.members {
            Members::Zkd(e) => e.members[i].kill9(),
            Members::ZooKeeper(e) => e.kill9(i),
        }
    }

    /// Starts member `i` again on its data (killing it first if it runs);
    /// the error (with its log) if it exits or never answers.
    pub fn restart(&mut self, i: usize) -> Result<(), String> {
        match &mut self.members {
            Members::Zkd(e) => e.members[i].try_restart(),
            Members::ZooKeeper(e) => e.try_restart(i),
        }
    }

    /// A power cut of member `i`'s disk and kill -9 of the member: what it
    /// had not fsynced is gone. [`Cluster::power_on`] brings the disk back.
    pub fn power_loss(&mut self, i: usize) {
        self.power_loss_all(&[i]);
    }

    /// Power loss of every member in `which` at once: the disks go first,
    /// so an fsync in flight fails rather than completes (as a member killed
    /// first would let it), then the members are killed together.
    pub fn power_loss_all(&mut self, which: &[usize]) {
        // Every filesystem dies in the same instant; unmounting takes longer,
        // and the other members' syncs must not complete meanwhile.
        for pid in which.iter().filter_map(|&i| self.disks[i].lazyfs_pid()) {
            let _ = nix::sys::signal::kill(Pid::from_raw(pid as i32), Signal::SIGKILL);
        }
        for &i in which {
            self.disks[i].power_cut();
        }
        self.kill9_all(which);
    }

    /// Powers member `i`'s disk on again (the member stays down).
    pub fn power_on(&mut self, i: usize) {
        self.disks[i].power_on();
    }

    /// Member `i`'s disk.
    pub fn disk(&self, i: usize) -> &MemberDisk {
        &self.disks[i]
    }

    /// Member `i`'s disk, to change it.
    pub fn disk_mut(&mut self, i: usize) -> &mut MemberDisk {
        &mut self.disks[i]
    }

    /// Whether member `i`'s process runs (it may have exited by itself).
    pub fn running(&mut self, i: usize) -> bool {
        match &mut self.members {
            Members::Zkd(e) => e.members[i].running(),
            Members::ZooKeeper(e) => e.members[i].running(),
        }
    }

    /// Member `i`'s log so far.
    pub fn log(&self, i: usize) -> String {
        match &self.members {
            Members::Zkd(e) => e.members[i].log(),
            Members::ZooKeeper(e) => e.members[i].log(),
        }
    }

    /// Member `i`'s process id, while it runs.
    pub fn pid(&self, i: usize) -> Option<u32> {
        match &self.members {
            Members::Zkd(e) => e.members[i].pid(),
            Members::ZooKeeper(e) => e.members[i].pid(),
        }
    }

    /// SIGSTOP member `i`.
    pub fn pause(&self, i: usize) {
        self.signal(i, Signal::SIGSTOP);
    }

    /// SIGCONT member `i`.
    pub fn resume(&self, i: usize) {
        self.signal(i, Signal::SIGCONT);
    }

    fn signal(&self, i: usize, signal: Signal) {
        if let Some(pid) = self.pid(i) {
            // Fails only for a process already gone: nothing to do then.
            let _ = nix::sys::signal::kill(Pid::from_raw(pid as i32), signal);
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

    /// Drops `percent` % of the packets from member `from` to member `to`,
    /// at random.
    pub fn lose(&self, from: usize, to: usize, percent: u32) {
        let ip = self.net().peer_ip(to);
        self.nft(
            from,
            &format!(
                "add rule inet {TABLE} out ip daddr {ip} numgen random mod 100 < {percent} drop"
            ),
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

    /// Every member's log, and its filesystem's if it has one: (name, text).
    pub fn logs(&self) -> Vec<(String, String)> {
        let server = match &self.members {
            Members::Zkd(_) => "zkd",
            Members::ZooKeeper(_) => "zookeeper",
        };
        let mut logs = Vec::new();
        for i in 0..self.len() {
            logs.push((format!("{server}-{}.log", i + 1), self.log(i)));
            let lazyfs = self.disks[i].root().join("lazyfs.log");
            if let Ok(text) = std::fs::read_to_string(lazyfs) {
                logs.push((format!("lazyfs-{}.log", i + 1), text));
            }
        }
        logs
    }
}
