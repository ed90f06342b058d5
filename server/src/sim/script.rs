//! Scripts for whole-member runs: no random faults and exact clocks; the
//! clients keep writing and reading, and a script places the faults and
//! waits for the moments it needs, asserting that each came. Every
//! invariant of the random runs is checked after every millisecond.

use super::membership::static_config;
use super::trap::{Action, Moment};
use super::{SyncKind, WholeSim, Wire};
use crate::core::election::ServerId;
use crate::core::storage_job::StorageJob;
use crate::core::types::SnapshotPiece;
use crate::core::Mode;
use crate::sim::Schedule;
use zkd_protocol::records::ReconfigRequest;
use zkd_protocol::Zxid;
use zkd_storage::MemStorage;

/// A scripted whole-member run.
pub struct Script {
    pub(super) sim: WholeSim,
}

impl Script {
    /// `members` whole members, booted, with the clients connecting.
    pub fn new(seed: u64, members: u64) -> Script {
        Script::snapshotting(seed, members, 40)
    }

    /// [`new`](Self::new) with a syncLimit of `ticks`: for a row whose
    /// followers must hold unacknowledged proposals longer than the
    /// default's half second without their leader dropping them.
    pub fn with_sync_limit(seed: u64, members: u64, ticks: u64) -> Script {
        let mut schedule = Script::schedule(seed, members, 40, false);
        schedule.timing.sync_limit = ticks;
        Script {
            sim: WholeSim::new(schedule),
        }
    }

    /// `members` whole members with reconfig enabled; their membership
    /// changes only by [`reconfig`](Self::reconfig).
    pub fn with_membership(seed: u64, members: u64) -> Script {
        let mut s = Script::build(seed, members, 40, true);
        s.sim.clients.script_reconfigs();
        s
    }

    /// `members` whole members without reconfig, each started with the
    /// server lines `servers_of` gives it: a rolling restart's ensemble.
    pub fn with_static_configs(
        seed: u64,
        members: u64,
        servers_of: impl Fn(u64) -> Vec<u64>,
    ) -> Script {
        let configs = (1..=members)
            .map(|id| (ServerId(id), static_config(&servers_of(id))))
            .collect();
        Script {
            sim: WholeSim::booted(Script::schedule(seed, members, 40, false), configs),
        }
    }

    /// Member `id`, down, starts again with the server lines `servers`
    /// in its zoo.cfg.
    pub fn restart_with_servers(&mut self, id: ServerId, servers: &[u64]) -> Result<(), String> {
        self.sim.configs.insert(id, static_config(servers));
        self.restart(id)
    }

    /// Asks for `change` through the membership client.
    pub fn reconfig(&mut self, change: ReconfigRequest) {
        self.sim.clients.queue_reconfig(change);
    }

    /// The version of the configuration in effect on member `id` (0 while
    /// it is down).
    pub fn config_version(&self, id: ServerId) -> i64 {
        match self.sim.procs.get(&id) {
            Some(Some(p)) => p.node.ensemble_config().map_or(0, |c| c.version),
            _ => 0,
        }
    }

    /// The voters member `id` counts now (the first ones while it is down).
    pub fn voters_counted_by(&self, id: ServerId) -> Vec<ServerId> {
        self.sim.counted_by(id).voters.into_iter().collect()
    }

    /// Members that snapshot (and purge their log) after about `snap_count` txns.
    pub fn snapshotting(seed: u64, members: u64, snap_count: u64) -> Script {
        Script::build(seed, members, snap_count, false)
    }

    fn build(seed: u64, members: u64, snap_count: u64, membership: bool) -> Script {
        let schedule = Script::schedule(seed, members, snap_count, membership);
        Script {
            sim: WholeSim::new(schedule),
        }
    }

    /// A script's schedule: no random faults, and no end until it finishes.
    fn schedule(seed: u64, members: u64, snap_count: u64, membership: bool) -> Schedule {
        Schedule {
            seed,
            members,
            observers: 0,
            faults_until_ms: 0,
            end_ms: u64::MAX / 4,
            scripted: true,
            snap_count,
            timing: super::SCRIPT_TIMING,
            membership,
            hostile: false,
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

    /// Runs until `done` holds, for at most `within_ms`, failing as soon as
    /// `hold` does not after a step.
    pub fn run_until_holding(
        &mut self,
        what: &str,
        within_ms: u64,
        done: impl Fn(&Script) -> bool,
        hold: impl Fn(&Script) -> Result<(), String>,
    ) -> Result<(), String> {
        let until = self.sim.now + within_ms;
        while !done(self) {
            if self.sim.now >= until {
                return Err(format!("{what}: not within {within_ms} ms"));
            }
            self.step()?;
            hold(self).map_err(|e| format!("{what}: at {} ms: {e}", self.sim.now))?;
        }
        Ok(())
    }

    /// Every member.
    pub fn ids(&self) -> Vec<ServerId> {
        self.sim.procs.keys().copied().collect()
    }

    /// Whether member `id`'s process runs.
    pub fn is_up(&self, id: ServerId) -> bool {
        matches!(self.sim.procs.get(&id), Some(Some(_)))
    }

    /// Whether member `id` serves clients.
    pub fn serving(&self, id: ServerId) -> bool {
        self.sim.serving(id)
    }

    /// Whether member `id` leads an epoch it chose and has not established.
    pub fn establishing(&self, id: ServerId) -> bool {
        matches!(self.sim.procs.get(&id), Some(Some(p)) if p.member().establishing())
    }

    /// The leader member `id` follows, if it follows one.
    pub fn following(&self, id: ServerId) -> Option<ServerId> {
        match self.sim.procs.get(&id) {
            Some(Some(p)) => p.member().following(),
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

    /// Storage jobs member `id` submitted and its disk has not run or
    /// reported (a read's report comes once the disk has read), and whether
    /// appends it ran wait for their sync.
    pub fn queued(&self, id: ServerId) -> usize {
        match self.sim.procs.get(&id) {
            Some(Some(p)) => {
                let unsynced = usize::from(p.worker.has_unsynced());
                p.submitted.len() + p.disk.len() + p.reported.len() + unsynced
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

    /// Each job member `id`'s disk runs from now on takes `ms` longer.
    pub fn slow_disk(&mut self, id: ServerId, ms: u64) {
        self.sim.slow_disks.insert(id, ms);
    }

    /// Each read member `id`'s disk does from now on (a round's durable
    /// state, a rebuild, a log read) takes `ms` longer.
    pub fn slow_reads(&mut self, id: ServerId, ms: u64) {
        self.sim.slow_reads.insert(id, ms);
    }

    /// Member `id`'s tree goes wrong in memory (a node no txn created
    /// appears), its zxid unchanged.
    pub fn damage_tree(&mut self, id: ServerId) {
        if let Some(Some(p)) = self.sim.procs.get_mut(&id) {
            let zxid = p.node.tree().last_zxid();
            let stray =
                crate::core::snapshot_tests::create(zxid.epoch(), zxid.counter(), "damaged");
            p.node.damage_tree(&stray);
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
            Some(Some(p)) => p.member().leading_epoch(),
            _ => None,
        }
    }

    /// Breaks the link between `a` and `b` until [`heal`](Self::heal).
    pub fn cut(&mut self, a: ServerId, b: ServerId) {
        self.sim.cut_link(a, b);
    }

    /// Cuts member `id` off from every other member until [`heal`](Self::heal).
    pub fn isolate(&mut self, id: ServerId) {
        for other in self.others(id) {
            self.sim.cut_link(id, other);
        }
    }

    /// Partitions member `id` from every other member silently, as a real
    /// partition looks: no connection closes, and what either side sends
    /// waits (as TCP holds it) until [`heal`](Self::heal).
    pub fn isolate_silently(&mut self, id: ServerId) {
        for other in self.others(id) {
            self.sim.one_way.insert((id, other));
            self.sim.one_way.insert((other, id));
        }
    }

    pub fn heal(&mut self) {
        self.sim.heal();
    }

    /// Packets `which` picks (from, to, what), as they are sent from now on,
    /// wait aside until [`release_aside`](Self::release_aside).
    pub fn set_aside(&mut self, which: impl FnMut(ServerId, ServerId, &Wire) -> bool + 'static) {
        self.sim.aside_when = Some(Box::new(which));
    }

    /// How many packets wait aside.
    pub fn aside(&self) -> usize {
        self.sim.aside.len()
    }

    /// What waits aside is sent now, in order, and nothing more is set aside.
    pub fn release_aside(&mut self) {
        self.sim.aside_when = None;
        for (from, to, wire) in std::mem::take(&mut self.sim.aside) {
            self.sim.queue(from, to, wire, 1);
        }
    }

    /// The clients start no new writes (creates, setData, closes) nor syncs
    /// until [`release_writes`](Self::release_writes).
    pub fn hold_writes(&mut self) {
        self.sim.writes_held = true;
    }

    pub fn release_writes(&mut self) {
        self.sim.writes_held = false;
    }

    /// Moves two clients to member `id`: they connect only to it while it
    /// is up, so writes go through it, until [`unpin_clients`](Self::unpin_clients).
    pub fn pin_clients(&mut self, id: ServerId) -> Result<(), String> {
        let events = self
            .sim
            .clients
            .pin(Some(id), self.sim.now, &mut self.sim.rng);
        self.sim
            .feed_nodes(events)
            .map_err(|v| format!("{} (at {} ms)", v.0, self.sim.now))
    }

    pub fn unpin_clients(&mut self) -> Result<(), String> {
        let events = self.sim.clients.pin(None, self.sim.now, &mut self.sim.rng);
        self.sim
            .feed_nodes(events)
            .map_err(|v| format!("{} (at {} ms)", v.0, self.sim.now))
    }

    /// Member `id` saves its tree as it is now as a local snapshot, as its
    /// node does every snapCount txns (then keeps the newest few and purges
    /// the log below them); runs until it is on the disk. Its zxid.
    pub fn snapshot(&mut self, id: ServerId) -> Result<Zxid, String> {
        let Some(Some(p)) = self.sim.procs.get_mut(&id) else {
            return Err(format!("member {id} is down"));
        };
        let tree = p.node.tree();
        let (zxid, image) = (tree.last_zxid(), tree.to_image());
        p.submitted
            .push_back(StorageJob::SnapshotPiece(SnapshotPiece::whole(zxid, image)));
        self.sim.flush(id);
        self.run_until("the snapshot saved", 1_000, |s| {
            s.snapshots(id).contains(&zxid)
        })?;
        Ok(zxid)
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

    /// Power loss on every member.
    pub fn crash_all(&mut self) {
        for id in self.ids() {
            self.crash(id);
        }
    }

    /// A member that is down gets an empty disk (a new machine).
    pub fn wipe(&mut self, id: ServerId) -> Result<(), String> {
        if self.is_up(id) {
            return Err(format!("member {id} is up; wipe it only while down"));
        }
        self.sim.disks.insert(id, MemStorage::new());
        Ok(())
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

    /// Runs until a leader and every member serve, then a second more so
    /// that the ensemble settles; returns the leader.
    pub fn settled_leader(&mut self) -> Result<ServerId, String> {
        self.run_until("every member serving", 10_000, |s| {
            s.leader().is_some() && s.ids().iter().all(|id| s.serving(*id))
        })?;
        self.run_for(1_000)?;
        self.leader().ok_or_else(|| "no leader".into())
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
        // A follower may be behind the quorum that acknowledged: let it catch up.
        let last = Zxid(acked.values().max().copied().unwrap_or(0));
        self.run_until("it has every acknowledged create durable", 5_000, |s| {
            s.durable(id, last)
        })?;
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

    /// Stops the faults, restarts who is down, lets the clients finish, and
    /// checks the end as a random run's: convergence and what the clients
    /// were told.
    pub fn finish(mut self) -> Result<(), String> {
        self.sim.traps.clear();
        self.unpin_clients()?;
        self.release_writes();
        self.sim.heal();
        self.sim.stalled.clear();
        self.sim.slow_disks.clear();
        self.sim.slow_reads.clear();
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
