//! Scripts for whole-member runs: no random faults and exact clocks; the
//! clients keep writing and reading, and a script places the faults and
//! waits for the moments it needs, asserting that each came. Every
//! invariant of the random runs is checked after every millisecond.

use super::trap::{Action, Moment};
use super::{SyncKind, WholeSim};
use crate::core::election::ServerId;
use crate::core::Mode;
use crate::runtime::recovery;
use crate::sim::Schedule;
use std::collections::BTreeMap;
use zkd_protocol::Zxid;
use zkd_storage::{DataTree, EpochStore, TxnLog};

/// A scripted whole-member run.
pub struct Script {
    sim: WholeSim,
}

impl Script {
    /// `members` whole members, booted, with the clients connecting.
    pub fn new(seed: u64, members: u64) -> Script {
        let schedule = Schedule {
            seed,
            members,
            faults_until_ms: 0,
            end_ms: u64::MAX / 4,
            scripted: true,
        };
        Script {
            sim: WholeSim::new(schedule),
        }
    }

    pub fn now(&self) -> u64 {
        self.sim.now
    }

    /// Runs `ms` milliseconds.
    pub fn run_for(&mut self, ms: u64) -> Result<(), String> {
        let until = self.sim.now + ms;
        while self.sim.now < until {
            self.step()?;
        }
        Ok(())
    }

    /// Runs until `done` holds, for at most `within_ms`.
    pub fn run_until(
        &mut self,
        what: &str,
        within_ms: u64,
        done: impl Fn(&Script) -> bool,
    ) -> Result<(), String> {
        let until = self.sim.now + within_ms;
        while !done(self) {
            if self.sim.now >= until {
                return Err(format!(
                    "{what}: not within {within_ms} ms (at {} ms)",
                    self.sim.now
                ));
            }
            self.step()?;
        }
        Ok(())
    }

    fn step(&mut self) -> Result<(), String> {
        self.sim.now += 1;
        self.sim
            .step()
            .map_err(|v| format!("{} (at {} ms)", v.0, self.sim.now))
    }

    /// The established leader, if any.
    pub fn leader(&self) -> Option<ServerId> {
        self.sim
            .up()
            .into_iter()
            .find(|id| self.sim.mode(*id) == Some(Mode::Leading))
    }

    /// Whether member `id` serves clients.
    pub fn serving(&self, id: ServerId) -> bool {
        self.sim.serving(id)
    }

    /// The leader member `id` follows, if it follows one.
    pub fn following(&self, id: ServerId) -> Option<ServerId> {
        match self.sim.procs.get(&id) {
            Some(Some(p)) => p.member.following(),
            _ => None,
        }
    }

    /// Every member but `id`.
    pub fn others(&self, id: ServerId) -> Vec<ServerId> {
        self.sim
            .procs
            .keys()
            .copied()
            .filter(|m| *m != id)
            .collect()
    }

    /// The last txn on member `id`'s disk, synced or not.
    pub fn last_logged(&self, id: ServerId) -> Zxid {
        self.sim.disks[&id]
            .last_zxid()
            .ok()
            .flatten()
            .unwrap_or(Zxid::ZERO)
    }

    /// Whether member `id`'s disk holds `zxid`, synced or not.
    pub fn logged(&self, id: ServerId, zxid: Zxid) -> bool {
        self.sim.disks[&id].contains(zxid).unwrap_or(false)
    }

    /// Storage jobs member `id` submitted and its disk has not run, and
    /// whether appends it ran wait for their sync.
    pub fn queued(&self, id: ServerId) -> usize {
        match self.sim.procs.get(&id) {
            Some(Some(p)) => {
                p.submitted.len() + p.disk.len() + usize::from(p.worker.has_unsynced())
            }
            _ => 0,
        }
    }

    /// Member `id`'s tree's zxid.
    pub fn tree_at(&self, id: ServerId) -> Zxid {
        match self.sim.procs.get(&id) {
            Some(Some(p)) => p.node.tree().last_zxid(),
            _ => Zxid::ZERO,
        }
    }

    /// Member `id`'s disk runs nothing until unstalled.
    pub fn stall_disk(&mut self, id: ServerId) {
        self.sim.stalled.insert(id);
    }

    pub fn unstall_disk(&mut self, id: ServerId) {
        self.sim.stalled.remove(&id);
    }

    /// Member `id`'s tree goes wrong in memory (a node no txn created
    /// appears), its zxid unchanged.
    pub fn damage_tree(&mut self, id: ServerId) {
        if let Some(Some(p)) = self.sim.procs.get_mut(&id) {
            let zxid = p.node.tree().last_zxid();
            let txn = crate::sim::member::create_txn(zxid, 0, "/damaged");
            let txn = zkd_storage::Txn::from_bytes(txn).expect("a built txn decodes");
            p.node.damage_tree(&txn);
            self.sim.damaged.insert(id, self.sim.now);
        }
    }

    /// Stops member `id` for `ms` with its connections open (a GC pause,
    /// SIGSTOP): nothing of it runs, and what reaches it waits.
    pub fn pause(&mut self, id: ServerId, ms: u64) {
        self.sim
            .paused
            .insert(id, (self.sim.now + ms, Default::default()));
    }

    pub fn is_paused(&self, id: ServerId) -> bool {
        self.sim.paused.contains_key(&id)
    }

    /// Creates acknowledged to clients so far.
    pub fn acknowledged(&self) -> u64 {
        self.sim.clients.counts.creates_acked
    }

    /// The epoch member `id` leads, if it leads.
    pub fn leading_epoch(&self, id: ServerId) -> Option<u32> {
        match self.sim.procs.get(&id) {
            Some(Some(p)) => p.member.leading_epoch(),
            _ => None,
        }
    }

    /// Breaks the link between `a` and `b` until [`heal`](Self::heal).
    pub fn cut(&mut self, a: ServerId, b: ServerId) {
        self.sim.cut_link(a, b);
    }

    pub fn heal(&mut self) {
        self.sim.heal();
    }

    /// Power loss on member `id` (nothing unsynced survives); it boots again
    /// when the script says.
    pub fn crash(&mut self, id: ServerId) {
        self.sim.crash(id, false);
        self.sim.restarts.remove(&id);
    }

    pub fn restart(&mut self, id: ServerId) -> Result<(), String> {
        self.sim.boot(id).map_err(|v| v.0)
    }

    /// The syncs member `id` received since `since_ms`, in order.
    pub fn syncs_to(&self, id: ServerId, since_ms: u64) -> Vec<(SyncKind, Zxid)> {
        self.sim
            .syncs
            .iter()
            .filter(|(at, to, _, _)| *at >= since_ms && *to == id)
            .map(|(_, _, kind, zxid)| (*kind, *zxid))
            .collect()
    }

    /// Runs until a leader serves and more than `writes` creates were
    /// acknowledged; returns the leader.
    pub fn leader_with_writes(&mut self, writes: u64) -> Result<ServerId, String> {
        self.run_until("a leader with writes", 10_000, |s| {
            s.leader().is_some() && s.acknowledged() > writes
        })?;
        self.leader().ok_or_else(|| "no leader".into())
    }

    /// Runs until `n` more creates are acknowledged, for at most `within_ms`.
    pub fn more_writes(&mut self, n: u64, within_ms: u64) -> Result<(), String> {
        let before = self.acknowledged();
        self.run_until("more acknowledged writes", within_ms, |s| {
            s.acknowledged() >= before + n
        })
    }

    /// Member `id` loses power; its disk must recover every create
    /// acknowledged so far, and once it restarts and serves, so must its tree.
    pub fn restart_keeps_acked(&mut self, id: ServerId) -> Result<(), String> {
        let acked = self.acked();
        self.crash(id);
        self.disk_holds(id, &acked)?;
        self.restart(id)?;
        self.run_until("it serves again", 15_000, |s| s.serving(id))?;
        self.tree_holds(id, &acked)
    }

    /// Arms a trap: asked at every moment until it returns an action.
    pub fn at(&mut self, trap: impl FnMut(&WholeSim, &Moment<'_>) -> Option<Action> + 'static) {
        self.sim.traps.push(Box::new(trap));
    }

    /// Runs until a trap springs, for at most `within_ms`.
    pub fn until_sprung(&mut self, what: &str, within_ms: u64) -> Result<(), String> {
        let before = self.sim.sprung.len();
        self.run_until(what, within_ms, |s| s.sim.sprung.len() > before)
    }

    /// The epoch of the established leader, if any.
    pub fn epoch(&self) -> Option<u32> {
        self.leader().and_then(|l| self.leading_epoch(l))
    }

    /// Member `id`'s acceptedEpoch and currentEpoch, on disk.
    pub fn epochs_on_disk(&self, id: ServerId) -> (u32, u32) {
        let disk = &self.sim.disks[&id];
        let accepted = disk.accepted_epoch().unwrap_or_default();
        (accepted, disk.current_epoch().unwrap_or_default())
    }

    /// The end of member `id`'s history on disk: its last logged txn, or
    /// its snapshot's zxid when the log is empty past it.
    pub fn disk_end(&self, id: ServerId) -> Zxid {
        let disk = &self.sim.disks[&id];
        let purged = disk.purged_through().ok().flatten();
        disk.last_zxid()
            .ok()
            .flatten()
            .max(purged)
            .unwrap_or(Zxid::ZERO)
    }

    /// The creates acknowledged so far: path and zxid.
    pub fn acked(&self) -> BTreeMap<String, i64> {
        self.sim.clients.acked().clone()
    }

    /// Fails unless a restart of member `id` now would recover every create
    /// of `acked`.
    pub fn disk_holds(&self, id: ServerId, acked: &BTreeMap<String, i64>) -> Result<(), String> {
        let tree = recovery::rebuild(&self.sim.disks[&id].power_cut_copy())
            .map_err(|e| format!("member {id} cannot recover its disk: {e}"))?;
        holds(&tree, acked).map_err(|e| format!("member {id}'s disk: {e}"))
    }

    /// Fails unless member `id`'s tree holds every create of `acked`.
    pub fn tree_holds(&self, id: ServerId, acked: &BTreeMap<String, i64>) -> Result<(), String> {
        match self.sim.procs.get(&id) {
            Some(Some(p)) => {
                holds(p.node.tree(), acked).map_err(|e| format!("member {id}'s tree: {e}"))
            }
            _ => Err(format!("member {id} is down")),
        }
    }

    /// Stops the faults, restarts who is down, lets the clients finish, and
    /// checks the end as a random run's: convergence and what the clients
    /// were told.
    pub fn finish(mut self) -> Result<(), String> {
        self.sim.traps.clear();
        self.sim.heal();
        self.sim.stalled.clear();
        let down: Vec<ServerId> = self
            .sim
            .procs
            .iter()
            .filter(|(_, p)| p.is_none())
            .map(|(id, _)| *id)
            .collect();
        for id in down {
            self.restart(id)?;
        }
        self.sim.schedule.end_ms = self.sim.now + 4_000;
        self.sim
            .run()
            .map_err(|v| format!("{} (at {} ms)", v.0, self.sim.now))
    }
}

/// Fails unless `tree` holds each create of `acked` with its zxid.
fn holds(tree: &DataTree, acked: &BTreeMap<String, i64>) -> Result<(), String> {
    match acked
        .iter()
        .find(|(path, zxid)| tree.node(path).map(|n| n.stat.czxid) != Some(**zxid))
    {
        Some((path, zxid)) => Err(format!("{path}, acknowledged at {zxid:#x}, is missing")),
        None => Ok(()),
    }
}
