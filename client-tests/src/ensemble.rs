//! A 3- or 5-member zkd ensemble of real processes on loopback, each with
//! its own zoo.cfg (`server.N` lines), myid and data directory.

use crate::process::{free_port, ServerOptions, ZkdProcess};
use std::time::{Duration, Instant};

/// How long an ensemble may take to elect a leader and sync.
pub const ELECTION_TIMEOUT: Duration = Duration::from_secs(30);

/// Running members, indexed from 0 (member `i` has myid `i + 1`).
pub struct Ensemble {
    pub members: Vec<ZkdProcess>,
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
                ZkdProcess::start_configured(
                    options.clone(),
                    free_port(),
                    &servers,
                    Some(id as u64),
                )
            })
            .collect();
        let ensemble = Ensemble { members };
        ensemble.wait_until_serving(&(0..n).collect::<Vec<_>>());
        ensemble
    }

    /// The connect string of the members listed.
    pub fn connect_string(&self, which: &[usize]) -> String {
        which
            .iter()
            .map(|i| self.members[*i].addr())
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The connect string of every member.
    pub fn all(&self) -> String {
        self.connect_string(&(0..self.members.len()).collect::<Vec<_>>())
    }

    /// Member `i`'s `Mode:` as `srvr` reports it, or None if it does not serve.
    pub fn mode(&self, i: usize) -> Option<String> {
        let reply = crate::process::four_letter_word(self.members[i].port, "srvr").ok()?;
        reply
            .lines()
            .find_map(|l| l.strip_prefix("Mode: "))
            .map(str::to_owned)
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

    /// Every member's log, labelled, for failure messages.
    pub fn logs(&self) -> String {
        self.members
            .iter()
            .enumerate()
            .map(|(i, m)| format!("---- member {} ----\n{}", i + 1, m.log()))
            .collect()
    }
}
