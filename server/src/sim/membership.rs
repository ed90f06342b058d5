//! Membership in a simulated run: the configuration members start with,
//! each member's recorded configuration (its dynamic config file, which
//! survives its restarts, and with which it boots), and, at the end, one
//! configuration on every member that is no older than any a reconfig
//! was acknowledged with.

use super::{Violation, WholeSim};
use crate::core::election::ServerId;
use crate::core::zab::Members;
use crate::core::EnsembleConfig;
use bytes::Bytes;

/// Member `id`'s server line, as a reconfig's joining list names it: each
/// member has an address of its own (the simulator's links do not use it).
pub(super) fn server_line(id: u64, observer: bool) -> String {
    let role = if observer { "observer" } else { "participant" };
    format!("server.{id}=10.0.0.{id}:2888:3888:{role};2181")
}

/// The configuration every member starts with, unversioned (the first
/// leader stamps it): `voters` participants, then `observers`.
pub(super) fn first_config(voters: u64, observers: u64) -> EnsembleConfig {
    let ids: Vec<u64> = (1..=voters + observers).collect();
    config_of(&ids, |id| id > voters)
}

/// A zoo.cfg's static configuration of the participants `ids`, as a
/// rolling restart's members have it (no reconfig, no version).
pub(super) fn static_config(ids: &[u64]) -> EnsembleConfig {
    config_of(ids, |_| false)
}

/// The unversioned configuration of `ids`, those `observer` picks observing.
fn config_of(ids: &[u64], observer: impl Fn(u64) -> bool) -> EnsembleConfig {
    let mut text = String::new();
    for id in ids {
        text.push_str(&server_line(*id, observer(*id)));
        text.push('\n');
    }
    text.push_str("version=0");
    EnsembleConfig {
        text: Bytes::from(text),
        version: 0,
    }
}

impl WholeSim {
    /// The members `id` counts when it boots: those of the configuration
    /// it recorded, as a `zkd` reads its dynamic config file.
    pub(super) fn members_at_boot(&self, id: ServerId) -> Members {
        match self.configs.get(&id) {
            Some(config) => Members::of(&config.servers()),
            None => self.voters.clone(),
        }
    }

    /// Member `id` recorded `config` (a `zoo.cfg.dynamic.<version>`).
    pub(super) fn record_config(&mut self, id: ServerId, config: EnsembleConfig) {
        let ids: Vec<u64> = config.servers().into_keys().collect();
        self.trace_line(format_args!(
            "member {id}: records configuration {:x} of {ids:?}",
            config.version
        ));
        self.configs.insert(id, config);
    }

    /// The members a member counts now: a quorum of them must hold what
    /// it serves, and back what its election decides.
    pub(super) fn counted_by(&self, id: ServerId) -> Members {
        match self.procs.get(&id) {
            Some(Some(p)) => p.member().members().clone(),
            _ => self.voters.clone(),
        }
    }

    /// The members whose quorum commits what member `id` serves: its own.
    /// Without reconfig, its leader's while it follows one that is up: a
    /// rolling restart's members count the servers of their own zoo.cfg,
    /// and the leader's commit. (With reconfig, a follower counting other
    /// members than its leader is what the checks must catch.)
    pub(super) fn committed_by(&self, id: ServerId) -> Members {
        let leader = match self.procs.get(&id) {
            Some(Some(p)) if !self.schedule.membership => p.member().following(),
            _ => None,
        };
        match leader {
            Some(l) if matches!(self.procs.get(&l), Some(Some(_))) => self.counted_by(l),
            _ => self.counted_by(id),
        }
    }

    /// At the end: every member has one configuration in effect, which
    /// is no older than any a reconfig was acknowledged with (a committed
    /// configuration is never lost), and the same as it if as new.
    pub(super) fn check_final_config(&self) -> Result<(), Violation> {
        if !self.schedule.membership {
            return Ok(());
        }
        let mut in_effect = self.procs.iter().filter_map(|(id, p)| {
            let config = p.as_ref()?.node.ensemble_config()?;
            Some((*id, config.clone()))
        });
        let Some((first, config)) = in_effect.next() else {
            return Err(Violation(
                "membership: no member has a configuration".into(),
            ));
        };
        if let Some((other, c)) = in_effect.find(|(_, c)| *c != config) {
            return Err(Violation(format!(
                "membership: members {first} and {other} end in configurations {:x} and {:x}",
                config.version, c.version
            )));
        }
        match self.clients.last_acked_config() {
            Some((&version, text)) if version > config.version || (version == config.version && *text != config.text) => {
                Err(Violation(format!(
                    "membership: configuration {version:x} was acknowledged; the members end in {:x}",
                    config.version
                )))
            }
            _ => Ok(()),
        }
    }
}
