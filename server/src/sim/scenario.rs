//! Scripted fault scenarios on the simulator: the fault catalogue's
//! synchronisation, epoch and election rows, replayed step by step, with
//! every invariant checked along the way and convergence at the end.
//!
//! Besides crashes, partitions and restarts between steps, a script can arm
//! a trap ([`Scenario::at`]) that crashes a member or breaks a link at an
//! exact moment inside a step: just before or after one storage operation
//! of a member, or right after a member handled one message. It can check
//! which sync a member got ([`Scenario::syncs_to`]), what a restart would
//! recover from a disk ([`Scenario::recovered`]), make a member snapshot its
//! tree ([`Scenario::snapshot`]), wipe a disk, and pause client writes.

use super::checker::Violation;
use super::member::Role;
use super::{Action, Moment, Schedule, Sim, SyncKind};
use crate::core::election::ServerId;
use crate::runtime::recovery;
use zkd_protocol::Zxid;
use zkd_storage::{DataTree, EpochStore, MemStorage, TxnLog};

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
    /// Besides the checker's invariants, every disk keeps its epoch files
    /// in order after every step: acceptedEpoch >= currentEpoch
    /// (ZOOKEEPER-2307).
    pub fn run_until(
        &mut self,
        what: &str,
        limit_ms: u64,
        done: impl Fn(&Scenario) -> bool,
    ) -> Result<(), String> {
        self.run_until_holding(what, limit_ms, done, |_| Ok(()))
    }

    /// Runs until `done` holds, like [`Scenario::run_until`], failing as
    /// soon as `invariant` fails after a step.
    pub fn run_until_holding(
        &mut self,
        what: &str,
        limit_ms: u64,
        done: impl Fn(&Scenario) -> bool,
        invariant: impl Fn(&Scenario) -> Result<(), String>,
    ) -> Result<(), String> {
        let deadline = self.sim.now + limit_ms;
        while !done(self) {
            if self.sim.now >= deadline {
                return Err(format!("{what}: not within {limit_ms} ms"));
            }
            self.sim.step().map_err(|Violation(v)| v)?;
            self.check_epoch_files()?;
            invariant(self).map_err(|e| format!("{what}: at {} ms: {e}", self.sim.now))?;
        }
        Ok(())
    }

    fn check_epoch_files(&self) -> Result<(), String> {
        for (id, disk) in &self.sim.disks {
            let (accepted, current) = epochs(disk);
            if accepted < current {
                return Err(format!(
                    "epoch files: member {id} has acceptedEpoch {accepted} < currentEpoch {current}"
                ));
            }
        }
        Ok(())
    }

    /// The virtual time.
    pub fn now(&self) -> u64 {
        self.sim.now
    }

    /// Arms a trap: `trap` sees every moment (each storage operation a
    /// member runs, before and after; each message a member handled) until
    /// it returns an action, which happens at once, inside the step (a crash
    /// between two storage operations that are due in the same millisecond,
    /// a crash of the leader right after a follower took its SNAP). What
    /// traps did is in [`Scenario::sprung`].
    pub(super) fn at(&mut self, trap: impl FnMut(&Sim, &Moment<'_>) -> Option<Action> + 'static) {
        self.sim.traps.push(Box::new(trap));
    }

    /// What the traps did so far, one line each.
    pub fn sprung(&self) -> &[String] {
        &self.sim.sprung
    }

    /// Disarms every trap.
    pub fn disarm(&mut self) {
        self.sim.traps.clear();
    }

    /// The syncs `id` received (DIFF, TRUNC, SNAP with their zxid), oldest
    /// first, from `since_ms` on.
    pub(super) fn syncs_to(&self, id: ServerId, since_ms: u64) -> Vec<(SyncKind, Zxid)> {
        self.sim
            .syncs
            .iter()
            .filter(|s| s.follower == id && s.at_ms >= since_ms)
            .map(|s| (s.kind, s.zxid))
            .collect()
    }

    /// Whether `id` runs a leader that is established and serving.
    pub fn is_leader(&self, id: ServerId) -> bool {
        self.sim.leader() == Some(id)
    }

    /// Whether `id` is up and serves: an established leader or an up-to-date follower.
    pub fn serving(&self, id: ServerId) -> bool {
        self.sim.serving(id)
    }

    /// Fails unless what `id` holds in memory is on its disk: a restart
    /// would recover its tree's zxid or later, and at that same zxid the
    /// same tree (ZOOKEEPER-5094: a memory ahead of the log).
    pub fn memory_within_disk(&self, id: ServerId) -> Result<(), String> {
        let Some(Some(m)) = self.sim.members.get(&id) else {
            return Err(format!("member {id} is down"));
        };
        let disk = self.recovered(id)?;
        let (memory, durable) = (m.tree.last_zxid(), disk.last_zxid());
        if durable < memory || (durable == memory && disk.digest() != m.tree.digest()) {
            return Err(format!(
                "member {id}'s tree at {memory} is ahead of its disk (which recovers to {durable})"
            ));
        }
        Ok(())
    }

    /// Whether `id` is up.
    pub fn is_up(&self, id: ServerId) -> bool {
        matches!(self.sim.members.get(&id), Some(Some(_)))
    }

    /// The members, in id order.
    pub fn ids(&self) -> Vec<ServerId> {
        self.sim.members.keys().copied().collect()
    }

    /// The members other than `id`.
    pub fn others(&self, id: ServerId) -> Vec<ServerId> {
        self.ids().into_iter().filter(|o| *o != id).collect()
    }

    /// `id`'s acceptedEpoch and currentEpoch files.
    pub fn epochs_on_disk(&self, id: ServerId) -> (u32, u32) {
        epochs(&self.sim.disks[&id])
    }

    /// The end of `id`'s history on disk: its last logged txn, or its
    /// snapshot's zxid when the log is empty past it.
    pub fn disk_end(&self, id: ServerId) -> Zxid {
        let disk = &self.sim.disks[&id];
        let last = disk.last_zxid().ok().flatten();
        let purged = disk.purged_through().ok().flatten();
        last.max(purged).unwrap_or(Zxid::ZERO)
    }

    /// The zxid `id`'s tree (in memory) is at.
    pub fn tree_zxid(&self, id: ServerId) -> Option<Zxid> {
        match self.sim.members.get(&id) {
            Some(Some(m)) => Some(m.tree.last_zxid()),
            _ => None,
        }
    }

    /// The tree a restart of `id` would recover from its disk now.
    pub fn recovered(&self, id: ServerId) -> Result<DataTree, String> {
        recovery::rebuild(&self.sim.disks[&id])
            .map_err(|e| format!("member {id} cannot recover its disk: {e}"))
    }

    /// Fails unless a restart of `id` would recover every txn of `zxids`.
    pub fn disk_holds(&self, id: ServerId, zxids: &[Zxid]) -> Result<(), String> {
        let tree = self.recovered(id)?;
        match zxids.iter().find(|z| !holds(&tree, **z)) {
            Some(lost) => Err(format!(
                "member {id}'s disk lost {lost} (it recovers to {})",
                tree.last_zxid()
            )),
            None => Ok(()),
        }
    }

    /// Fails unless `id`'s tree holds every txn of `zxids`.
    pub fn tree_holds(&self, id: ServerId, zxids: &[Zxid]) -> Result<(), String> {
        match zxids.iter().find(|z| !self.in_tree(id, **z)) {
            Some(lost) => Err(format!(
                "member {id}'s tree lacks {lost} (at {:?})",
                self.tree_zxid(id)
            )),
            None => Ok(()),
        }
    }

    /// The zxids of the writes acknowledged so far, in order.
    pub fn acknowledged_zxids(&self) -> Vec<Zxid> {
        self.sim.checker.acknowledged.keys().copied().collect()
    }

    /// `id` stores a snapshot of its tree now (see `Member::snapshot`),
    /// after running its queued storage operations; the snapshot's zxid.
    pub fn snapshot(&mut self, id: ServerId) -> Result<Zxid, String> {
        self.sim.flush_storage(id).map_err(|Violation(v)| v)?;
        match self.sim.members.get_mut(&id) {
            Some(Some(m)) => Ok(m.snapshot()),
            _ => Err(format!("member {id} is down")),
        }
    }

    /// A crashed member's disk is replaced by an empty one (a new machine).
    pub fn wipe(&mut self, id: ServerId) {
        assert!(!self.is_up(id), "wipe a member only while it is down");
        self.sim.disks.insert(id, MemStorage::new());
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

    /// Stops the client writes (a script's own `write_on` still works), so
    /// a member rejoining is not pushed past the history window.
    pub fn pause_writes(&mut self) {
        self.sim.writes_paused = true;
    }

    /// Client writes flow again.
    pub fn resume_writes(&mut self) {
        self.sim.writes_paused = false;
        self.sim.next_write_ms = self.sim.now;
    }

    /// Cuts `id` off from every other member.
    pub fn isolate(&mut self, id: ServerId) {
        for other in self.others(id) {
            self.sim.cut_link(id, other);
        }
    }

    /// Restores every link.
    pub fn heal(&mut self) {
        self.sim.heal_links();
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
        let now = self.sim.local(id);
        let Some(Some(m)) = self.sim.members.get_mut(&id) else {
            return None;
        };
        self.sim.writes += 1;
        let path = format!("/scripted{}", self.sim.writes);
        let zxid = m.write(now, &path)?;
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
        self.disarm();
        self.resume_writes();
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

fn epochs(disk: &MemStorage) -> (u32, u32) {
    (
        disk.accepted_epoch().unwrap_or(0),
        disk.current_epoch().unwrap_or(0),
    )
}

/// Whether `tree` holds the node created at `zxid`.
fn holds(tree: &DataTree, zxid: Zxid) -> bool {
    tree.preorder("/").any(|(_, n)| n.stat.czxid == zxid.0)
}

impl Sim {
    /// The last zxid `leader` sent `follower` before NEWLEADER, while it
    /// leads and the follower's sync is under way or done.
    fn sync_point(&self, leader: ServerId, follower: ServerId) -> Option<Zxid> {
        let Some(Some(m)) = self.members.get(&leader) else {
            return None;
        };
        let Role::Leading(l) = &m.role else {
            return None;
        };
        l.learners()
            .find(|h| h.sid == follower && h.is_forwarding())
            .map(|h| h.sync_point)
    }

    /// Whether `id` is up and serves (see `Scenario::serving`).
    pub(super) fn serving(&self, id: ServerId) -> bool {
        match self.members.get(&id) {
            Some(Some(m)) => match &m.role {
                Role::Leading(l) => l.is_established(),
                Role::Following(f) => f.is_serving(),
                Role::Looking => false,
            },
            _ => false,
        }
    }

    /// Runs `id`'s queued storage operations now, in order (as if its disk
    /// had been fast).
    fn flush_storage(&mut self, id: ServerId) -> Result<(), Violation> {
        if let Some(q) = self.queues.get_mut(&id) {
            for op in q.iter_mut() {
                op.0 = self.now;
            }
        }
        self.execute_due_storage()
    }
}

#[cfg(test)]
mod tests;
