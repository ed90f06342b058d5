//! Deterministic simulation of an ensemble: the members' pure cores
//! (election, Zab, tree) in one thread, with seeded virtual time, a seeded
//! network of FIFO links (see `network`: delays; partitions drop what is in
//! flight, one-way ones hold it; reconnects deliver stale notifications),
//! failed disk writes that end their member, pauses (a stopped process: nothing of it runs, what is sent to it
//! waits), a clock per member that runs slow or fast from an origin of its
//! own (random schedules), and `MemStorage` disks whose queued, not yet durable, operations
//! a crash loses (a torn one keeps a prefix of them, never reported). Every random choice comes from the seed; a failure names it and a
//! one-line replay command.
//!
//! After every step the [`checker::Checker`] holds Zab's invariants: one
//! established leader per epoch, agreement and integrity of delivered txns,
//! equal tree digests at equal zxid, per-member total order, and no
//! acknowledged write missing from a newly established leader. After the
//! faults stop, a connected ensemble must elect, commit and converge.
//!
//! The random faults are in `faults`; the traps that scripts arm (see
//! `scenario`) are in `trap`.

pub mod checker;
mod clock;
mod faults;
pub use faults::FaultCounts;
pub mod member;
mod network;
pub mod rng;
pub mod scenario;
mod trap;
pub mod whole;

use crate::core::election::{Notification, ServerId};
use crate::core::zab::{StorageOp, Timing, Voters};
use checker::{Checker, Violation};
use clock::MemberClock;
use member::{Effect, Member, Wire};
use rng::Rng;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use trap::{sync_kind, Action, Moment, SyncKind, SyncSeen, Trap};
use zkd_protocol::Zxid;
use zkd_storage::MemStorage;

/// What a schedule does.
#[derive(Clone, Copy, Debug)]
pub struct Schedule {
    pub seed: u64,
    pub members: u64,
    /// Faults (crashes, partitions) happen until then.
    pub faults_until_ms: u64,
    /// The run ends then; the ensemble must have converged.
    pub end_ms: u64,
    /// A script places the faults (see `scenario`): no random ones.
    pub scripted: bool,
}

/// No client writes during the last stretch of a run.
const QUIESCE_MS: u64 = 2_000;

/// A message on its way.
#[derive(Debug)]
enum Packet {
    Wire(Wire),
    /// The sender closed the connection.
    Closed,
}

struct Sim {
    schedule: Schedule,
    now: u64,
    rng: Rng,
    voters: Voters,
    timing: Timing,
    members: BTreeMap<ServerId, Option<Member>>,
    disks: BTreeMap<ServerId, MemStorage>,
    /// Storage operations waiting for their (simulated) fsync, per member.
    queues: BTreeMap<ServerId, VecDeque<(u64, StorageOp)>>,
    /// (delivery time, sequence) -> (from, to, packet)
    in_flight: BTreeMap<(u64, u64), (ServerId, ServerId, Packet)>,
    seq: u64,
    link_clock: BTreeMap<(ServerId, ServerId), u64>,
    /// Links that are cut, as (lower id, higher id).
    cut: BTreeSet<(ServerId, ServerId)>,
    /// Directions (from, to) a one-way partition holds.
    one_way: BTreeSet<(ServerId, ServerId)>,
    /// What the one-way partitions hold, per direction, in order.
    held: BTreeMap<(ServerId, ServerId), VecDeque<Packet>>,
    /// The last election notification each member sent each other one: a
    /// new connection carries it again, as the runtime's does.
    last_notification: BTreeMap<(ServerId, ServerId), Notification>,
    /// The one sent before it, which a reconnect may deliver late.
    older_notification: BTreeMap<(ServerId, ServerId), Notification>,
    /// Members whose next storage operation fails (EIO): the member exits.
    failing_disks: BTreeSet<ServerId>,
    /// Crashed members and when they come back.
    restarts: BTreeMap<ServerId, u64>,
    heals_at: Option<u64>,
    next_fault_ms: u64,
    next_write_ms: u64,
    writes: u64,
    last_ack_ms: u64,
    checker: Checker,
    /// ZKD_SIM_TRACE=1 prints every effect.
    trace: bool,
    /// Scripted traps (none in random schedules).
    traps: Vec<Trap>,
    /// What the traps did: when, at which moment, what.
    sprung: Vec<String>,
    /// Every DIFF, TRUNC and SNAP received.
    syncs: Vec<SyncSeen>,
    /// A script stopped the client writes for a while.
    writes_paused: bool,
    /// Paused members (a stopped process, its connections open) and when
    /// they resume: nothing of theirs runs, what is sent to them waits.
    paused: BTreeMap<ServerId, u64>,
    counts: FaultCounts,
    /// Each member's clock (skewed in random schedules, exact in scripts).
    clocks: BTreeMap<ServerId, MemberClock>,
    /// Zxids seen durable on a quorum of disks (a wiped disk later does
    /// not make them invisible again).
    quorum_durable: BTreeSet<Zxid>,
}

/// Runs one schedule to its end; the first broken invariant is an error
/// naming the seed and how to replay it.
pub fn run(schedule: Schedule) -> Result<FaultCounts, String> {
    let mut sim = Sim::new(schedule);
    match sim.run() {
        Ok(()) => Ok(sim.counts),
        Err(Violation(v)) => Err(format!(
            "seed {}: {v} (at {} ms)\nreplay: ZKD_SIM_SEED={} cargo test --release -p zkd-server sim::tests::replay -- --ignored",
            schedule.seed, sim.now, schedule.seed
        )),
    }
}

impl Sim {
    fn new(schedule: Schedule) -> Sim {
        let ids: BTreeSet<ServerId> = (1..=schedule.members).map(ServerId).collect();
        let timing = Timing {
            tick_ms: 100,
            init_limit: 10,
            sync_limit: 5,
        };
        let mut sim = Sim {
            schedule,
            now: 0,
            rng: Rng::new(schedule.seed),
            voters: Voters(ids.clone()),
            timing,
            members: BTreeMap::new(),
            disks: ids.iter().map(|id| (*id, MemStorage::new())).collect(),
            queues: ids.iter().map(|id| (*id, VecDeque::new())).collect(),
            in_flight: BTreeMap::new(),
            seq: 0,
            link_clock: BTreeMap::new(),
            cut: BTreeSet::new(),
            one_way: BTreeSet::new(),
            held: BTreeMap::new(),
            last_notification: BTreeMap::new(),
            older_notification: BTreeMap::new(),
            failing_disks: BTreeSet::new(),
            restarts: BTreeMap::new(),
            heals_at: None,
            next_fault_ms: 500,
            next_write_ms: 0,
            writes: 0,
            last_ack_ms: 0,
            checker: Checker::default(),
            trace: std::env::var_os("ZKD_SIM_TRACE").is_some(),
            traps: Vec::new(),
            sprung: Vec::new(),
            syncs: Vec::new(),
            writes_paused: false,
            paused: BTreeMap::new(),
            counts: FaultCounts::default(),
            clocks: BTreeMap::new(),
            quorum_durable: BTreeSet::new(),
        };
        for id in &ids {
            let clock = match schedule.scripted {
                true => MemberClock::EXACT,
                false => MemberClock::skewed(&mut sim.rng),
            };
            sim.clocks.insert(*id, clock);
        }
        for id in ids {
            sim.boot(id);
        }
        sim
    }

    /// What member `id`'s own clock reads now.
    fn local(&self, id: ServerId) -> u64 {
        self.clocks[&id].local(self.now)
    }

    /// When member `id`'s next timer fires, in simulated time.
    fn next_timer(&self, m: &Member) -> Option<u64> {
        let clock = self.clocks[&m.id];
        m.next_timeout().map(|local| clock.sim_time(local))
    }

    fn boot(&mut self, id: ServerId) {
        let disk = self.disks[&id].clone();
        let now = self.local(id);
        let member = Member::start(id, self.voters.clone(), self.timing, disk, now);
        self.members.insert(id, Some(member));
        self.checker.restarted(id);
        self.collect(id);
    }

    fn run(&mut self) -> Result<(), Violation> {
        while self.now < self.schedule.end_ms {
            self.step()?;
        }
        self.check_converged()
    }

    /// Advances to the next event and handles everything due then.
    fn step(&mut self) -> Result<(), Violation> {
        self.now = self.next_event_ms().min(self.schedule.end_ms);
        self.resume_due();
        self.deliver_due()?;
        self.execute_due_storage()?;
        let ids: Vec<ServerId> = self.members.keys().copied().collect();
        for id in ids {
            if self.paused.contains_key(&id) {
                continue;
            }
            let now = self.local(id);
            let due = match self.members.get(&id) {
                Some(Some(m)) => self.next_timer(m).is_some_and(|t| t <= self.now),
                _ => false,
            };
            if let (true, Some(Some(m))) = (due, self.members.get_mut(&id)) {
                m.tick(now);
                self.collect_checked(id)?;
            }
        }
        self.faults();
        self.client_writes()?;
        self.check_visible_is_durable()
    }

    /// No read returns a txn that may never commit: whatever a serving
    /// member's tree holds is durable on a quorum of disks (logs agree up
    /// to a shared zxid, so the tree's newest txn stands for all of it).
    fn check_visible_is_durable(&mut self) -> Result<(), Violation> {
        let serving: Vec<(ServerId, Zxid)> = self
            .members
            .values()
            .flatten()
            .filter(|m| self.serving(m.id))
            .map(|m| (m.id, m.tree.last_zxid()))
            .collect();
        for (id, zxid) in serving {
            if zxid == Zxid::ZERO || self.quorum_durable.contains(&zxid) {
                continue;
            }
            let holders: Vec<ServerId> = self
                .disks
                .iter()
                .filter(|(_, disk)| disk_holds(disk, zxid))
                .map(|(id, _)| *id)
                .collect();
            if !self.voters.is_quorum(&holders) {
                return Err(Violation(format!(
                    "visibility: member {id} serves a tree at {zxid}, durable only on {holders:?}"
                )));
            }
            self.quorum_durable.insert(zxid);
        }
        Ok(())
    }

    /// The established leader, if any.
    fn leader(&self) -> Option<ServerId> {
        self.members
            .values()
            .flatten()
            .find(|m| matches!(&m.role, member::Role::Leading(l) if l.is_established()))
            .map(|m| m.id)
    }

    fn next_event_ms(&self) -> u64 {
        let message = self.in_flight.keys().next().map(|k| k.0);
        let storage = self
            .queues
            .iter()
            .filter(|(id, _)| !self.paused.contains_key(id))
            .filter_map(|(_, q)| q.front().map(|o| o.0))
            .min();
        let timers = self
            .members
            .values()
            .flatten()
            .filter(|m| !self.paused.contains_key(&m.id))
            .filter_map(|m| self.next_timer(m))
            .min();
        let restart = self.restarts.values().min().copied();
        let resume = self.paused.values().min().copied();
        [
            message,
            storage,
            timers,
            restart,
            resume,
            self.heals_at,
            Some(self.next_fault_ms),
            Some(self.next_write_ms),
        ]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(self.schedule.end_ms)
        .max(self.now)
    }

    fn deliver_due(&mut self) -> Result<(), Violation> {
        while let Some((&(at, seq), _)) = self.in_flight.first_key_value() {
            if at > self.now {
                break;
            }
            let Some((from, to, packet)) = self.in_flight.remove(&(at, seq)) else {
                break;
            };
            if let Some(&until) = self.paused.get(&to) {
                // Waits in the paused member's socket; the order stays (seq).
                self.in_flight.insert((until, seq), (from, to, packet));
                continue;
            }
            let now = self.local(to);
            let Some(Some(m)) = self.members.get_mut(&to) else {
                continue;
            };
            match packet {
                Packet::Wire(wire) => {
                    let seen = (!self.traps.is_empty() || sync_kind(&wire).is_some())
                        .then(|| wire.clone());
                    m.receive(now, from, wire);
                    self.collect_checked(to)?;
                    if let Some(wire) = seen {
                        self.note_sync(to, &wire);
                        self.spring(&Moment::Received {
                            from,
                            to,
                            wire: &wire,
                        });
                    }
                }
                Packet::Closed => {
                    m.disconnected(now, from);
                    self.collect_checked(to)?;
                }
            }
        }
        Ok(())
    }

    fn execute_due_storage(&mut self) -> Result<(), Violation> {
        let ids: Vec<ServerId> = self.queues.keys().copied().collect();
        for id in ids {
            while let Some(q) = self.queues.get_mut(&id) {
                let stalled = self.paused.contains_key(&id);
                if stalled || q.front().is_none_or(|(due, _)| *due > self.now) {
                    break;
                }
                let Some((_, op)) = q.pop_front() else { break };
                if self.failing_disks.remove(&id) {
                    self.disk_error(id, op);
                    break;
                }
                self.spring(&Moment::BeforeStorage {
                    member: id,
                    op: &op,
                });
                if let Some(Some(m)) = self.members.get_mut(&id) {
                    m.execute(op.clone());
                    self.spring(&Moment::AfterStorage {
                        member: id,
                        op: &op,
                    });
                }
                self.collect_checked(id)?;
            }
        }
        Ok(())
    }

    /// Routes a member's effects and checks the invariants they touch.
    fn collect_checked(&mut self, id: ServerId) -> Result<(), Violation> {
        let mut pending = VecDeque::from([id]);
        while let Some(id) = pending.pop_front() {
            let Some(Some(m)) = self.members.get_mut(&id) else {
                continue;
            };
            let effects = m.drain();
            for effect in effects {
                if self.trace {
                    eprintln!("{:>6} ms  member {id}: {}", self.now, trace_line(&effect));
                }
                match effect {
                    Effect::Send { to, wire } => self.send(id, to, Packet::Wire(wire)),
                    Effect::Disconnect { peer } => self.quorum_link_closed(id, peer),
                    Effect::Storage(op) => {
                        // fsync latency: mostly short, now and then a slow disk.
                        let latency = if self.rng.below(20) == 0 {
                            30 + self.rng.below(120)
                        } else {
                            self.rng.below(8)
                        };
                        let queue = self.queues.entry(id).or_default();
                        let after = queue.back().map_or(self.now, |o| o.0);
                        queue.push_back((after.max(self.now) + latency, op));
                    }
                    Effect::Delivered { zxid, txn, digest } => {
                        self.checker.delivered(id, zxid, &txn, digest)?
                    }
                    Effect::Established { epoch, last_zxid } => {
                        let digest = self.tree_digest(id);
                        self.checker.established(id, epoch, last_zxid, digest)?
                    }
                    Effect::Acknowledged { zxid, path } => {
                        self.last_ack_ms = self.now;
                        self.checker.acknowledged(id, zxid, path)
                    }
                    Effect::Diverged { .. } => {}
                    Effect::RoleEnded => {
                        // Like the runtime draining its storage thread before a new election.
                        let queued: Vec<StorageOp> = self
                            .queues
                            .get_mut(&id)
                            .map(|q| q.drain(..).map(|(_, op)| op).collect())
                            .unwrap_or_default();
                        for op in queued {
                            self.spring(&Moment::BeforeStorage {
                                member: id,
                                op: &op,
                            });
                            let Some(Some(m)) = self.members.get_mut(&id) else {
                                break;
                            };
                            m.execute(op.clone());
                            self.spring(&Moment::AfterStorage {
                                member: id,
                                op: &op,
                            });
                        }
                        let now = self.local(id);
                        if let Some(Some(m)) = self.members.get_mut(&id) {
                            m.drain();
                            m.look(now);
                        }
                        self.checker.restarted(id);
                        pending.push_back(id);
                    }
                }
            }
        }
        Ok(())
    }

    fn collect(&mut self, id: ServerId) {
        if let Err(Violation(v)) = self.collect_checked(id) {
            panic!("seed {}: {v}", self.schedule.seed);
        }
    }

    fn tree_digest(&self, id: ServerId) -> u64 {
        match self.members.get(&id) {
            Some(Some(m)) => m.tree.digest(),
            _ => 0,
        }
    }

    /// A client write every few milliseconds at whoever leads.
    fn client_writes(&mut self) -> Result<(), Violation> {
        // Quiet at the end, so that every member can catch up before the check.
        if self.now + QUIESCE_MS >= self.schedule.end_ms {
            self.next_write_ms = self.schedule.end_ms;
            return Ok(());
        }
        if self.writes_paused {
            self.next_write_ms = u64::MAX;
            return Ok(());
        }
        if self.now < self.next_write_ms {
            return Ok(());
        }
        self.next_write_ms = self.now + 2 + self.rng.below(20);
        let ids: Vec<ServerId> = self.members.keys().copied().collect();
        for id in ids {
            if self.paused.contains_key(&id) {
                continue;
            }
            let now = self.local(id);
            if let Some(Some(m)) = self.members.get_mut(&id) {
                self.writes += 1;
                if m.write(now, &format!("/w{}", self.writes)).is_some() {
                    self.collect_checked(id)?;
                }
            }
        }
        Ok(())
    }

    /// After the faults: one leader serving, every member at the same zxid
    /// and digest, every acknowledged write present everywhere.
    fn check_converged(&mut self) -> Result<(), Violation> {
        let live: Vec<&Member> = self.members.values().flatten().collect();
        if live.len() as u64 != self.schedule.members {
            return Err(Violation("members still down at the end".into()));
        }
        let leaders: Vec<ServerId> = live
            .iter()
            .filter(|m| matches!(&m.role, member::Role::Leading(l) if l.is_established()))
            .map(|m| m.id)
            .collect();
        if leaders.len() != 1 {
            let states: Vec<String> = live
                .iter()
                .map(|m| {
                    format!(
                        "{}; next timer at {:?} ms",
                        m.describe(),
                        self.next_timer(m)
                    )
                })
                .collect();
            return Err(Violation(format!(
                "liveness: {} established leaders after the faults stopped:\n  {}",
                leaders.len(),
                states.join("\n  ")
            )));
        }
        let last: BTreeSet<(Zxid, u64)> = live
            .iter()
            .map(|m| (m.tree.last_zxid(), m.tree.digest()))
            .collect();
        if last.len() != 1 {
            let states: Vec<String> = live.iter().map(|m| m.describe()).collect();
            return Err(Violation(format!(
                "convergence: members ended at different states:\n  {}",
                states.join("\n  ")
            )));
        }
        let m = live[0];
        for (zxid, (leader, path)) in &self.checker.acknowledged {
            let kept = m.tree.node(path).is_some_and(|n| n.stat.czxid == zxid.0);
            if !kept {
                return Err(Violation(format!(
                    "durability: acknowledged write {path} at {zxid} (leader {leader}) is gone"
                )));
            }
        }
        if self.last_ack_ms <= self.schedule.faults_until_ms {
            return Err(Violation(format!(
                "liveness: no write acknowledged after the faults stopped at {} ms",
                self.schedule.faults_until_ms
            )));
        }
        Ok(())
    }
}

/// Whether `disk` holds `zxid` durably: logged, or covered by its purge mark.
fn disk_holds(disk: &MemStorage, zxid: Zxid) -> bool {
    use zkd_storage::TxnLog;
    disk.contains(zxid).unwrap_or(false)
        || disk
            .purged_through()
            .ok()
            .flatten()
            .is_some_and(|p| p >= zxid)
}

/// One effect, briefly, for traces.
fn trace_line(effect: &Effect) -> String {
    match effect {
        Effect::Send {
            wire: Wire::Zab(m),
            to,
        } => {
            let text = format!("{m:?}");
            format!("-> {to} {}", &text[..text.len().min(90)])
        }
        Effect::Send {
            wire: Wire::Election(n),
            to,
        } => format!(
            "-> {to} {:?} {} {:?} round {}",
            n.state, n.vote, n.vote.zxid, n.election_epoch
        ),
        Effect::Delivered { zxid, digest, .. } => format!("delivered {zxid} digest {digest:x}"),
        other => format!("{other:?}").chars().take(120).collect(),
    }
}

#[cfg(test)]
mod tests;
