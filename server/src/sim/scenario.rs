//! Scripted fault scenarios on the simulator: the fault catalogue's
//! synchronisation and epoch rows, replayed step by step, with every
//! invariant checked along the way and convergence at the end.

use super::checker::Violation;
use super::{Schedule, Sim};
use crate::core::election::ServerId;
use zkd_protocol::Zxid;
use zkd_storage::TxnLog;

/// A simulation that a script drives; client writes keep flowing to
/// whoever leads.
pub struct Scenario {
    sim: Sim,
}

impl Scenario {
    /// `members` members; nothing happens that the script does not ask for.
    pub fn new(seed: u64, members: u64) -> Scenario {
        Scenario {
            sim: Sim::new(Schedule {
                seed,
                members,
                faults_until_ms: 0,
                end_ms: u64::MAX / 2,
                scripted: true,
            }),
        }
    }

    /// Runs until `done` holds, failing after `limit_ms` of virtual time.
    pub fn run_until(
        &mut self,
        what: &str,
        limit_ms: u64,
        done: impl Fn(&Scenario) -> bool,
    ) -> Result<(), String> {
        let deadline = self.sim.now + limit_ms;
        while !done(self) {
            if self.sim.now >= deadline {
                return Err(format!("{what}: not within {limit_ms} ms"));
            }
            self.sim.step().map_err(|Violation(v)| v)?;
        }
        Ok(())
    }

    /// Runs for `ms` of virtual time.
    pub fn run_for(&mut self, ms: u64) -> Result<(), String> {
        let until = self.sim.now + ms;
        self.run_until("time", ms + 1, |s| s.sim.now >= until)
    }

    /// The established leader.
    pub fn leader(&self) -> Option<ServerId> {
        self.sim.leader()
    }

    /// Writes acknowledged so far.
    pub fn acknowledged(&self) -> usize {
        self.sim.checker.acknowledged.len()
    }

    /// Cuts `id` off from every other member.
    pub fn isolate(&mut self, id: ServerId) {
        let others: Vec<ServerId> = self
            .sim
            .members
            .keys()
            .copied()
            .filter(|o| *o != id)
            .collect();
        for other in others {
            self.sim.cut_link(id, other);
        }
    }

    /// Restores every link.
    pub fn heal(&mut self) {
        self.sim.cut.clear();
    }

    /// Power loss on `id`: what its storage had not done yet is lost.
    pub fn crash(&mut self, id: ServerId) {
        self.sim.crash(id);
        self.sim.restarts.remove(&id);
    }

    /// Starts a crashed member again from its disk.
    pub fn restart(&mut self, id: ServerId) {
        self.sim.boot(id);
    }

    /// A client write on `id` while it believes it leads; its zxid.
    pub fn write_on(&mut self, id: ServerId) -> Option<Zxid> {
        let Some(Some(m)) = self.sim.members.get_mut(&id) else {
            return None;
        };
        self.sim.writes += 1;
        let path = format!("/scripted{}", self.sim.writes);
        let zxid = m.write(self.sim.now, &path)?;
        self.sim.collect(id);
        Some(zxid)
    }

    /// Power loss on every member at once.
    pub fn crash_all(&mut self) {
        let ids: Vec<ServerId> = self.sim.members.keys().copied().collect();
        for id in ids {
            self.crash(id);
        }
    }

    /// Whether `id` runs a leader that chose its epoch but is not established.
    pub fn establishing(&self, id: ServerId) -> bool {
        matches!(
            self.sim.members.get(&id),
            Some(Some(m)) if matches!(&m.role, super::member::Role::Leading(l) if !l.is_established() && l.epoch() > 0)
        )
    }

    /// The epoch of the established leader.
    pub fn epoch(&self) -> Option<u32> {
        self.sim
            .members
            .values()
            .flatten()
            .find_map(|m| match &m.role {
                super::member::Role::Leading(l) if l.is_established() => Some(l.epoch()),
                _ => None,
            })
    }

    /// Whether the path created at `zxid` is in `id`'s tree.
    pub fn in_tree(&self, id: ServerId, zxid: Zxid) -> bool {
        matches!(self.sim.members.get(&id), Some(Some(m)) if m.tree.preorder("/").any(|(_, n)| n.stat.czxid == zxid.0))
    }

    /// Whether `id`'s log holds `zxid` durably.
    pub fn logged(&self, id: ServerId, zxid: Zxid) -> bool {
        self.sim.disks[&id].contains(zxid).unwrap_or(false)
    }

    /// Heals, restarts everyone, runs quietly and checks convergence and durability.
    pub fn finish(mut self) -> Result<(), String> {
        self.heal();
        let down: Vec<ServerId> = self
            .sim
            .members
            .iter()
            .filter(|(_, m)| m.is_none())
            .map(|(id, _)| *id)
            .collect();
        for id in down {
            self.restart(id);
        }
        self.sim.schedule.end_ms = self.sim.now + 12_000;
        self.sim.schedule.faults_until_ms = self.sim.now;
        self.sim.run().map_err(|Violation(v)| v)
    }
}

#[cfg(test)]
mod tests;
