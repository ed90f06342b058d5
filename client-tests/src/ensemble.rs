//! A 3- or 5-member zkd ensemble of real processes, each with its own zoo.cfg
//! (`server.N` lines), myid and data directory: on loopback
//! ([`Ensemble::start`]), or each member in a network namespace of its own
//! ([`Ensemble::start_in_namespaces`]), where a member can be cut off from the
//! others while the test still reaches its client port.

use crate::netns::Topology;
use crate::process::{
    four_letter_word_at, free_port, port_clash, ServerOptions, ZkdProcess, PORT_CLASH_ATTEMPTS,
};
use std::time::{Duration, Instant};

/// How long an ensemble may take to elect a leader and sync.
pub const ELECTION_TIMEOUT: Duration = Duration::from_secs(30);

/// Client, quorum and election ports of members in namespaces (each member has
/// addresses of its own there, so the ports can be the usual ones).
const NETNS_PORTS: (u16, u16, u16) = (2181, 2888, 3888);

/// Running members, indexed from 0 (member `i` has myid `i + 1`).
pub struct Ensemble {
    pub members: Vec<ZkdProcess>,
    /// Member `i`'s peer addresses, as in its `server.N` line.
    pub peers: Vec<PeerAddr>,
    /// The namespaces of [`Ensemble::start_in_namespaces`]; dropped after the
    /// members (fields drop in declaration order).
    pub net: Option<Topology>,
}

/// Member `i`'s loopback address in [`Ensemble::start_spread`].
pub fn spread_host(i: usize) -> String {
    format!("127.0.0.{}", 11 + i)
}

/// The peer endpoints of one member (`server.N=host:quorum_port:election_port`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerAddr {
    pub host: String,
    pub quorum_port: u16,
    pub election_port: u16,
}

impl PeerAddr {
    fn server_line(&self, id: usize) -> String {
        format!(
            "server.{id}={}:{}:{}\n",
            self.host, self.quorum_port, self.election_port
        )
    }
}

/// initLimit and syncLimit lines, unless `options` sets them itself.
fn limits(options: &ServerOptions) -> String {
    let mut out = String::new();
    for (key, default) in [("initLimit", "10"), ("syncLimit", "4")] {
        if !options.extra.iter().any(|(k, _)| k == key) {
            out.push_str(&format!("{key}={default}\n"));
        }
    }
    out
}

impl Ensemble {
    /// Starts `n` members with a short tick (so failure detection is quick)
    /// and waits until every one of them serves.
    pub fn start(n: usize) -> Ensemble {
        Ensemble::start_with(
            n,
            ServerOptions {
                tick_time_ms: 500,
                ..ServerOptions::default()
            },
        )
    }

    /// Starts `n` members with `options` and waits until every one serves.
    pub fn start_with(n: usize, options: ServerOptions) -> Ensemble {
        Ensemble::start_each(vec![options; n])
    }

    /// Starts one member per entry of `options` (which share their
    /// `tick_time_ms` and limits: the first member's) on loopback, and
    /// waits until every one serves. After a [`port_clash`] every member
    /// starts again on other ports.
    pub fn start_each(options: Vec<ServerOptions>) -> Ensemble {
        Ensemble::start_on(options, |_| "127.0.0.1".into())
    }

    /// As [`Ensemble::start`], each member on a loopback address of its own
    /// ([`spread_host`]: 127.0.0.11, .12, ...), as on hosts of their own: its
    /// peers tell its connections from anyone else's by their address.
    pub fn start_spread(n: usize) -> Ensemble {
        let options = ServerOptions {
            tick_time_ms: 500,
            ..ServerOptions::default()
        };
        Ensemble::start_spread_with(n, options)
    }

    /// As [`start_spread`](Self::start_spread), each member with `options`.
    pub fn start_spread_with(n: usize, options: ServerOptions) -> Ensemble {
        Ensemble::start_on(vec![options; n], spread_host)
    }

    fn start_on(options: Vec<ServerOptions>, host: fn(usize) -> String) -> Ensemble {
        let mut attempt = 1;
        loop {
            match Ensemble::try_start_each(options.clone(), host) {
                Ok(ensemble) => break ensemble,
                Err(e) if port_clash(&e) && attempt < PORT_CLASH_ATTEMPTS => attempt += 1,
                Err(e) => panic!("{e}"),
            }
        }
    }

    /// As [`Ensemble::start_each`], once; the error says which member did
    /// not start and why (the members started are killed).
    fn try_start_each(
        options: Vec<ServerOptions>,
        host: fn(usize) -> String,
    ) -> Result<Ensemble, String> {
        let n = options.len();
        let peers: Vec<PeerAddr> = (0..n)
            .map(|i| PeerAddr {
                host: host(i),
                quorum_port: free_port(),
                election_port: free_port(),
            })
            .collect();
        let mut servers = limits(&options[0]);
        for (i, peer) in peers.iter().enumerate() {
            servers.push_str(&peer.server_line(i + 1));
        }
        let members = options
            .into_iter()
            .enumerate()
            .map(|(i, member)| {
                let myid = Some(i as u64 + 1);
                ZkdProcess::try_start_at(member, &host(i), free_port(), &servers, myid)
                    .map_err(|e| format!("member {}: {e}", i + 1))
            })
            .collect::<Result<_, _>>()?;
        let ensemble = Ensemble {
            members,
            peers,
            net: None,
        };
        ensemble.wait_until_serving(&(0..n).collect::<Vec<_>>());
        Ok(ensemble)
    }

    /// Starts one member per entry of `options`, each in a network namespace
    /// of its own (see [`crate::netns`]), in `start_order` (every index once;
    /// with equal logs, fast leader election picks the largest myid among the
    /// first quorum up), and waits until every one serves. The members' peer
    /// ports are on the namespaces' peer network; their client ports are
    /// reachable from the test process at [`ZkdProcess::addr`].
    pub fn start_in_namespaces(options: Vec<ServerOptions>, start_order: &[usize]) -> Ensemble {
        let n = options.len();
        let mut order = start_order.to_vec();
        order.sort_unstable();
        assert_eq!(order, (0..n).collect::<Vec<_>>(), "start_order");
        let net = Topology::new(n);
        let (client_port, quorum_port, election_port) = NETNS_PORTS;
        let peers: Vec<PeerAddr> = (0..n)
            .map(|i| PeerAddr {
                host: net.peer_ip(i).to_string(),
                quorum_port,
                election_port,
            })
            .collect();
        let servers: String = peers
            .iter()
            .enumerate()
            .map(|(i, p)| p.server_line(i + 1))
            .collect();
        // Declared after `net`: dropped (members killed) before it on a panic.
        let mut started: Vec<Option<ZkdProcess>> = (0..n).map(|_| None).collect();
        for &i in start_order {
            let mut member = options[i].clone();
            member.wrapper = net.wrapper(i).into_iter().chain(member.wrapper).collect();
            let more = format!("{}{servers}", limits(&member));
            started[i] = Some(ZkdProcess::start_at(
                member,
                &net.client_ip(i).to_string(),
                client_port,
                &more,
                Some(i as u64 + 1),
            ));
        }
        let ensemble = Ensemble {
            members: started.into_iter().map(Option::unwrap).collect(),
            peers,
            net: Some(net),
        };
        ensemble.wait_until_serving(&(0..n).collect::<Vec<_>>());
        ensemble
    }

    /// The namespaces, for an ensemble started in them.
    pub fn net(&self) -> &Topology {
        self.net
            .as_ref()
            .expect("an ensemble started with Ensemble::start_in_namespaces")
    }

    /// Cuts member `i` off the other members (its client port stays reachable).
    pub fn isolate(&self, i: usize) {
        self.net().isolate(i);
    }

    /// Puts member `i` back in touch with the others.
    pub fn heal(&self, i: usize) {
        self.net().heal(i);
    }

    /// The connect string of the members listed.
    pub fn connect_string(&self, which: &[usize]) -> String {
        crate::process::connect_string(which.iter().map(|i| self.members[*i].addr()))
    }

    /// The connect string of every member.
    pub fn all(&self) -> String {
        self.connect_string(&(0..self.members.len()).collect::<Vec<_>>())
    }

    /// Member `i`'s `Mode:` as `srvr` reports it, or None if it does not serve.
    pub fn mode(&self, i: usize) -> Option<String> {
        let member = &self.members[i];
        let reply = four_letter_word_at(&member.host, member.port, "srvr").ok()?;
        crate::process::srvr_mode(&reply)
    }

    /// The member that leads, once it and the listed ones all serve.
    pub fn wait_until_serving(&self, which: &[usize]) -> usize {
        let deadline = Instant::now() + ELECTION_TIMEOUT;
        loop {
            let modes: Vec<Option<String>> = which.iter().map(|i| self.mode(*i)).collect();
            if let Some(leader) = self.leader() {
                if modes.iter().all(|m| m.is_some()) {
                    return leader;
                }
            }
            if Instant::now() > deadline {
                panic!(
                    "members {which:?} not all serving after {ELECTION_TIMEOUT:?} (modes {modes:?}); logs:\n{}",
                    self.logs()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The index of the member that reports `Mode: leader`, if one does.
    pub fn leader(&self) -> Option<usize> {
        (0..self.members.len()).find(|i| self.mode(*i).as_deref() == Some("leader"))
    }

    /// Kills member `i`, rewrites its zoo.cfg with `keys` set (a None value
    /// removes the key), and starts it again on its data.
    pub fn restart_with_keys(&mut self, i: usize, keys: &[(&str, Option<String>)]) {
        let process = &mut self.members[i];
        process.kill9();
        let path = process.config_path().to_owned();
        let text = std::fs::read_to_string(&path).expect("zoo.cfg");
        let mut lines: Vec<String> = text
            .lines()
            .filter(|l| !keys.iter().any(|(k, _)| l.starts_with(&format!("{k}="))))
            .map(str::to_owned)
            .collect();
        for (k, v) in keys {
            if let Some(v) = v {
                lines.push(format!("{k}={v}"));
            }
        }
        std::fs::write(&path, lines.join("\n") + "\n").expect("zoo.cfg");
        process.restart();
    }

    /// Asserts that member `i` stays out of the ensemble (never serves)
    /// for several election rounds while every other member serves.
    pub fn assert_kept_out(&self, i: usize, why: &str) {
        let deadline = Instant::now() + Duration::from_secs(8);
        while Instant::now() < deadline {
            assert_eq!(
                self.mode(i),
                None,
                "member {} ({why}) joined:\n{}",
                i + 1,
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(250));
        }
        let others: Vec<usize> = (0..self.members.len()).filter(|o| *o != i).collect();
        assert!(others.iter().all(|o| self.mode(*o).is_some()));
    }

    /// Creates `path` through member `i`, then finds every path in
    /// `expected` on every serving member after a sync.
    pub async fn write_and_read_everywhere(&self, i: usize, path: &str, expected: &[&str]) {
        let session = Duration::from_secs(6);
        let writer = crate::connect(&self.connect_string(&[i]), session).await;
        crate::within(writer.create(path, b"x", &crate::persistent()))
            .await
            .unwrap_or_else(|e| panic!("create {path} on member {}: {e}", i + 1));
        for reader in 0..self.members.len() {
            if self.mode(reader).is_none() {
                continue;
            }
            let client = crate::connect(&self.connect_string(&[reader]), session).await;
            crate::within(client.sync("/")).await.expect("sync");
            for p in expected {
                let found = crate::within(client.check_stat(p)).await.expect("exists");
                assert!(found.is_some(), "{p} missing on member {}", reader + 1);
            }
        }
    }

    /// Writes through every member in turn, SIGKILLs the leader, writes
    /// through a survivor once a new leader serves, restarts the killed
    /// member and writes through it: after each write, every write so far
    /// is read on every serving member.
    pub async fn writes_survive_the_leaders_death(&mut self) {
        let n = self.members.len();
        let mut written: Vec<String> = Vec::new();
        for i in 0..n {
            self.write_one_more(i, format!("/m{i}"), &mut written).await;
        }
        let leader = self.leader().expect("a leader");
        self.members[leader].kill9();
        let rest: Vec<usize> = (0..n).filter(|i| *i != leader).collect();
        self.wait_until_serving(&rest);
        self.write_one_more(rest[0], "/after-failover".into(), &mut written)
            .await;
        self.members[leader].restart();
        self.wait_until_serving(&(0..n).collect::<Vec<_>>());
        self.write_one_more(leader, "/rejoined".into(), &mut written)
            .await;
    }

    /// Creates `path` through member `via` and adds it to `written`, all
    /// of which every serving member must then hold.
    async fn write_one_more(&self, via: usize, path: String, written: &mut Vec<String>) {
        written.push(path);
        let paths: Vec<&str> = written.iter().map(String::as_str).collect();
        self.write_and_read_everywhere(via, paths[paths.len() - 1], &paths)
            .await;
    }

    /// Every member's log, labelled, for failure messages.
    pub fn logs(&self) -> String {
        self.members
            .iter()
            .enumerate()
            .map(|(i, m)| format!("---- member {} ----\n{}", i + 1, m.log()))
            .collect()
    }
}
