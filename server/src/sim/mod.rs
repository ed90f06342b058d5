//! Deterministic simulation of an ensemble, in one thread, with seeded
//! virtual time, a seeded network, seeded faults and clients speaking jute.
//! Every random choice comes from the seed; a failure names it and a
//! one-line replay command.
//!
//! Each member is what a `zkd` process runs, the runtime's own member
//! lifecycle (`core::member::Member`, driven by `driver::member_driver`: election rounds from durable
//! state, the Zab role, TRUNC and SNAP reloads, the drain barrier,
//! divergence) around the client-facing `core::Node` (sessions, reads,
//! `sync`, watches, forwarding, local snapshots), with the storage thread's
//! own job handling (`InlineWorker`) on a `MemStorage` disk. The simulation
//! only replaces the runtime's I/O: links (`links`, `network`), the link
//! readers and their read budgets (`reader`), the disk's latency (`disk`)
//! and the clock, all seeded. Clients (`clients`) speak jute to the nodes
//! and check what they are answered.
//!
//! After every millisecond (`checks`): trees at equal zxid have equal
//! digests, a serving member's tree is durable on a quorum of disks
//! (nothing a client can read may be lost), no disk's currentEpoch is above
//! its acceptedEpoch, one leader is established per epoch and holds every
//! acknowledged create. A member whose role ended answers LOOKING. After
//! snapshots (`disk`): what a restart would recover equals the tree members
//! had there. At the end the ensemble has converged and holds every
//! acknowledged write and every node any client read. Membership runs
//! (`membership`) change the voters by reconfig under the same faults.

mod checks;
mod clients;
mod clock;
mod disk;
mod hostile;
mod links;
mod membership;
mod network;
mod reader;
pub mod rng;
mod schedule;
mod script;
mod script_disk;
mod scripted;
mod scripted_deposed;
mod scripted_diverged;
mod scripted_election;
mod scripted_flow;
mod scripted_links;
mod scripted_reconfig;
mod scripted_snap;
mod scripted_sync;
mod tests;
mod trap;

use crate::core::acl::AclRules;
use crate::core::election::{Notification, ServerId};
use crate::core::member::Member;
use crate::core::peer_event::PeerEvent;
use crate::core::storage_job::{StorageJob, StorageReport};
use crate::core::zab::{Members, Timing};
use crate::core::{Command, CoreConfig, EnsembleConfig, Event, Mode, Node, Now};
use crate::driver::member_driver::{MemberDriver, MemberIo, StorageJobs};
use crate::driver::storage_worker::InlineWorker;
use crate::driver::{recovery, ServeError};
use clients::{ClientCounts, Clients, Load};
use clock::MemberClock;
use links::{SimLinks, Wire};
use reader::Readers;
use rng::Rng;
pub use schedule::{Schedule, SyncKind, Violation, SCRIPT_TIMING};
use std::collections::{BTreeMap, BTreeSet, HashSet, VecDeque};
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver};
use zkd_protocol::Zxid;
use zkd_storage::MemStorage;

/// Clients of the ensemble.
const CLIENTS: usize = 6;

/// No new creates during the last stretch of a run.
const QUIESCE_MS: u64 = 3_000;

/// How long after the end the members have to agree.
const SETTLE_MS: u64 = 3_000;

/// What a run did, so a test can tell it did something.
#[derive(Clone, Copy, Debug, Default)]
pub struct WholeCounts {
    pub crashes: u64,
    pub partitions: u64,
    pub one_way_partitions: u64,
    pub bridges: u64,
    /// Messages a one-way partition held and delivered late.
    pub late_packets: u64,
    /// Pauses longer than the sync limit.
    pub long_pauses: u64,
    /// Torn power cuts that kept an unsynced append.
    pub torn_writes: u64,
    /// Disk writes that failed and ended their member.
    pub disk_errors: u64,
    /// Messages of a closed connection that still reached their member.
    pub late_reads: u64,
    /// Messages a member's link reader held, its read budget spent.
    pub budget_waits: u64,
    /// SNAP images received that held txns past their zxid (fuzzy).
    pub fuzzy_snaps: u64,
    /// Snapshots saved or installed that recovered a tree some member had.
    pub snapshots_checked: u64,
    /// Election connections refused by a crashed member.
    pub refusals: u64,
    /// Election decisions checked against the notifications sent.
    pub decisions: u64,
    /// Of them, rounds the shortcut decided without the full finalize wait.
    pub shortcuts: u64,
    /// Leaders' reads of their log for a follower catching up.
    pub catch_up_reads: u64,
    /// Frames hostile peers sent, and their connections admission refused.
    pub hostile_frames: u64,
    pub hostile_refused: u64,
    pub clients: ClientCounts,
}

impl std::ops::AddAssign for WholeCounts {
    fn add_assign(&mut self, o: WholeCounts) {
        self.crashes += o.crashes;
        self.partitions += o.partitions;
        self.one_way_partitions += o.one_way_partitions;
        self.bridges += o.bridges;
        self.late_packets += o.late_packets;
        self.long_pauses += o.long_pauses;
        self.torn_writes += o.torn_writes;
        self.disk_errors += o.disk_errors;
        self.late_reads += o.late_reads;
        self.fuzzy_snaps += o.fuzzy_snaps;
        self.budget_waits += o.budget_waits;
        self.snapshots_checked += o.snapshots_checked;
        self.refusals += o.refusals;
        self.decisions += o.decisions;
        self.catch_up_reads += o.catch_up_reads;
        self.shortcuts += o.shortcuts;
        self.hostile_frames += o.hostile_frames;
        self.hostile_refused += o.hostile_refused;
        self.clients += o.clients;
    }
}

/// What reached a paused member, delivered when it resumes.
enum Held {
    /// A peer's packet, and whether its connection had closed (read late).
    Packet(ServerId, Wire, bool),
    Client(Event),
}

/// One running `zkd` process.
struct Process {
    driver: MemberDriver,
    node: Node,
    links: SimLinks,
    readers: Readers,
    /// Jobs submitted in the current step, not yet queued on the disk.
    submitted: VecDeque<StorageJob>,
    /// Jobs queued on the disk, each with when it is done.
    disk: VecDeque<(u64, StorageJob)>,
    /// When the appends written so far are synced (the batch ends).
    sync_at: Option<u64>,
    worker: InlineWorker<MemStorage>,
    reports: UnboundedReceiver<StorageReport>,
    /// Reports made, each with when it reaches the member: a read's comes
    /// once the disk has read what it holds (`disk::read_ms`), and the
    /// reports after it wait behind it.
    reported: VecDeque<(u64, StorageReport)>,
}

impl Process {
    fn member(&self) -> &Member {
        self.driver.member()
    }
}

impl StorageJobs for VecDeque<StorageJob> {
    fn submit(&mut self, job: StorageJob) -> Result<(), ServeError> {
        self.push_back(job);
        Ok(())
    }
}

struct WholeSim {
    schedule: Schedule,
    now: u64,
    rng: Rng,
    voters: Members,
    timing: Timing,
    procs: BTreeMap<ServerId, Option<Process>>,
    disks: BTreeMap<ServerId, MemStorage>,
    /// Each member's recorded configuration (`membership` runs), or its
    /// zoo.cfg's server lines (a rolling restart's): it survives restarts,
    /// as its dynamic config file does.
    configs: BTreeMap<ServerId, EnsembleConfig>,
    incarnations: u64,
    /// (delivery time, sequence) -> (from, to, what)
    in_flight: BTreeMap<(u64, u64), (ServerId, ServerId, Wire)>,
    seq: u64,
    link_clock: BTreeMap<(ServerId, ServerId), u64>,
    /// Cut links, as (lower id, higher id).
    cut: BTreeSet<(ServerId, ServerId)>,
    /// Directions (from, to) a one-way partition holds, and what it holds.
    one_way: BTreeSet<(ServerId, ServerId)>,
    held: BTreeMap<(ServerId, ServerId), VecDeque<Wire>>,
    /// What a script sets aside as it is sent, for it to release later.
    aside_when: Option<network::Aside>,
    aside: Vec<(ServerId, ServerId, Wire)>,
    /// Quorum connections closed or broken: what is on its way on them is
    /// lost, except the packets read just before (`late_reads`, by their
    /// place in `in_flight`), which arrive by the time `late_until` gives.
    dead: BTreeSet<u64>,
    late_reads: BTreeSet<(u64, u64)>,
    late_until: BTreeMap<u64, u64>,
    /// The last notification each member sent each other one, carried again
    /// when a cut link heals, as the runtime's election links do.
    last_notification: BTreeMap<(ServerId, ServerId), Notification>,
    /// Every notification any member sent: each election decision must
    /// rest on a quorum of them (`check_decision`).
    announced: HashSet<Notification>,
    /// Each member's decision last checked, and its election's shortcut count.
    decided: BTreeMap<ServerId, checks::Decided>,
    restarts: BTreeMap<ServerId, u64>,
    /// Members whose disk fails its next write (EIO).
    failing: BTreeSet<ServerId>,
    /// A script holds the clients' new creates back.
    writes_held: bool,
    /// Members whose disk a script stalled: its jobs wait.
    stalled: BTreeSet<ServerId>,
    /// Members whose disk a script slowed: each job takes this much longer (ms).
    slow_disks: BTreeMap<ServerId, u64>,
    /// Members whose disk a script made slow to read (a cold cache): each
    /// read takes this much longer (ms).
    slow_reads: BTreeMap<ServerId, u64>,
    /// Members whose tree a script damaged, and since when: exempt from the
    /// digest check until they serve again after a SNAP.
    damaged: BTreeMap<ServerId, u64>,
    /// Every DIFF, TRUNC and SNAP a member received: when, who, which, zxid.
    syncs: Vec<(u64, ServerId, SyncKind, Zxid)>,
    /// Scripts' traps (none in random runs), and what they did.
    traps: Vec<trap::Trap>,
    sprung: Vec<String>,
    /// Paused members (a stopped process, its connections open): when they
    /// resume, and what reached them meanwhile, in order.
    paused: BTreeMap<ServerId, (u64, VecDeque<Held>)>,
    /// Paused members whose loop waits for a storage read (planted
    /// blocking-storage-reads only): their disk goes on, and they resume
    /// once it has reported the read.
    busy: BTreeSet<ServerId>,
    /// Each member's clock (its machine's: it survives restarts).
    clocks: BTreeMap<ServerId, MemberClock>,
    heals_at: Option<u64>,
    next_fault_ms: u64,
    clients: Clients,
    /// The member established as leader in each epoch.
    leaders: BTreeMap<u32, ServerId>,
    /// Local snapshots saved so far, every fourth of which is checked.
    local_snapshots: u64,
    /// Prefix consistency: the digest of any tree at each zxid.
    digests: BTreeMap<Zxid, u64>,
    quorum_durable: BTreeSet<Zxid>,
    counts: WholeCounts,
    /// Hostile peers (`hostile` runs).
    hostile: Option<hostile::Hostile>,
    trace: bool,
}

/// SNAP chunks small enough that a simulated tree's image takes several
/// round trips, as a large tree's does: writes land while it streams, and
/// images come out fuzzy.
const SNAP_CHUNK: usize = 512;

/// Nodes per local snapshot slice: small enough that a simulated tree's
/// snapshot spans many steps (a slice every few ms), and so syncs, TRUNC
/// reloads and SNAP installs, as a large tree's does.
const SNAPSHOT_SLICE_NODES: usize = 16;

/// Txns a simulated member keeps in memory: a few hundred, so that within
/// a run followers fall out of it and catch up from the leader's log.
const SIM_HISTORY_WINDOW: usize = 100;

/// A simulated member: small SNAP chunks, a short history, and link limits
/// scaled to its small txns (`links`).
fn sim_member(id: ServerId, voters: Members, timing: Timing) -> MemberDriver {
    let mut member = Member::new(id, voters, timing, links::SIM_LIMITS);
    member.pace_snapshots(SNAP_CHUNK);
    member.keep_history(SIM_HISTORY_WINDOW);
    MemberDriver::driving(member)
}

/// Runs one schedule with whole members; the first broken invariant is an
/// error naming the seed.
pub fn run(schedule: Schedule) -> Result<WholeCounts, String> {
    let mut sim = WholeSim::new(schedule);
    match sim.run() {
        Ok(()) => Ok(WholeCounts {
            clients: sim.clients.counts,
            hostile_frames: sim.hostile.as_ref().map_or(0, |h| h.frames),
            hostile_refused: sim.hostile.as_ref().map_or(0, |h| h.refused),
            ..sim.counts
        }),
        Err(Violation(v)) => Err(format!(
            "seed {}: {v} (at {} ms)\nreplay: ZKD_SIM_SEED={}{}{} cargo test -p zkd-server sim::tests::replay -- --ignored",
            schedule.seed, sim.now, schedule.seed,
            if schedule.membership { " ZKD_SIM_MEMBERSHIP=1" } else { "" },
            if schedule.hostile { " ZKD_SIM_HOSTILE=1" } else { "" }
        )),
    }
}

impl WholeSim {
    fn new(schedule: Schedule) -> WholeSim {
        let all = schedule.members + schedule.observers;
        let first = membership::first_config(schedule.members, schedule.observers);
        let configs = match schedule.membership {
            true => (1..=all).map(|id| (ServerId(id), first.clone())).collect(),
            false => BTreeMap::new(),
        };
        WholeSim::booted(schedule, configs)
    }

    /// Boots every member, each with its configuration in `configs` (its
    /// zoo.cfg's server lines, or its dynamic file) if it has one there.
    fn booted(schedule: Schedule, configs: BTreeMap<ServerId, EnsembleConfig>) -> WholeSim {
        let all = schedule.members + schedule.observers;
        let ids: BTreeSet<ServerId> = (1..=all).map(ServerId).collect();
        let voters = Members {
            voters: (1..=schedule.members).map(ServerId).collect(),
            observers: (schedule.members + 1..=all).map(ServerId).collect(),
        };
        let mut sim = WholeSim {
            schedule,
            configs,
            now: 0,
            rng: Rng::new(schedule.seed),
            voters,
            timing: schedule.timing,
            procs: BTreeMap::new(),
            disks: ids.iter().map(|id| (*id, MemStorage::new())).collect(),
            incarnations: 0,
            in_flight: BTreeMap::new(),
            seq: 0,
            link_clock: BTreeMap::new(),
            cut: BTreeSet::new(),
            one_way: BTreeSet::new(),
            held: BTreeMap::new(),
            aside_when: None,
            aside: Vec::new(),
            dead: BTreeSet::new(),
            late_reads: BTreeSet::new(),
            late_until: BTreeMap::new(),
            last_notification: BTreeMap::new(),
            announced: HashSet::new(),
            decided: BTreeMap::new(),
            restarts: BTreeMap::new(),
            failing: BTreeSet::new(),
            writes_held: false,
            stalled: BTreeSet::new(),
            slow_disks: BTreeMap::new(),
            slow_reads: BTreeMap::new(),
            damaged: BTreeMap::new(),
            syncs: Vec::new(),
            traps: Vec::new(),
            sprung: Vec::new(),
            paused: BTreeMap::new(),
            busy: BTreeSet::new(),
            clocks: BTreeMap::new(),
            heals_at: None,
            next_fault_ms: 1_000,
            clients: Clients::new(
                CLIENTS,
                (schedule.membership).then_some((schedule.members, schedule.observers)),
            ),
            leaders: BTreeMap::new(),
            digests: BTreeMap::new(),
            local_snapshots: 0,
            quorum_durable: BTreeSet::new(),
            counts: WholeCounts::default(),
            hostile: schedule.hostile.then(hostile::Hostile::default),
            trace: std::env::var_os("ZKD_SIM_TRACE").is_some(),
        };
        for id in ids {
            let clock = match schedule.scripted {
                true => MemberClock::EXACT,
                false => MemberClock::skewed(&mut sim.rng),
            };
            sim.clocks.insert(id, clock);
            sim.procs.insert(id, None);
            sim.boot(id).expect("a fresh disk boots");
        }
        sim
    }

    /// What member `id`'s clock reads now.
    fn at(&self, id: ServerId) -> Now {
        let local = self.clocks[&id].local(self.now);
        Now {
            mono_ms: local,
            wall_ms: 1_700_000_000_000 + local as i64,
        }
    }

    /// Starts member `id` on its disk, as `zkd` starts: recover the tree,
    /// then look for a leader.
    fn boot(&mut self, id: ServerId) -> Result<(), Violation> {
        let mut disk = self.disks[&id].clone();
        let tree = recovery::recover(&mut disk)
            .map_err(|e| Violation(format!("member {id} cannot recover its disk: {e}")))?;
        let config = CoreConfig {
            server_id: id.0 as u8,
            tick_ms: self.timing.tick_ms,
            min_session_timeout_ms: 200,
            max_session_timeout_ms: 20_000,
            snap_count: self.schedule.snap_count,
            snapshot_slice_nodes: SNAPSHOT_SLICE_NODES,
            seed: id.0 + self.incarnations,
            ensemble_config: self.configs.get(&id).cloned(),
            reconfig_enabled: self.schedule.membership,
            // The clients' reconfigs need no super user.
            acl_rules: AclRules {
                sasl_scheme: false,
                skip: self.schedule.membership,
            },
            ..CoreConfig::default()
        };
        let fuzzy_through = recovery::fuzzy_through(&disk, &tree)
            .map_err(|e| Violation(format!("member {id} cannot read its disk: {e}")))?;
        let node = Node::new_member(config, tree, fuzzy_through, self.at(id));
        let (reports_tx, reports) = unbounded_channel();
        self.incarnations += 1;
        let process = Process {
            driver: sim_member(id, self.members_at_boot(id), self.timing),
            node,
            links: SimLinks::new(self.incarnations << 32),
            readers: Readers::new(),
            submitted: VecDeque::new(),
            disk: VecDeque::new(),
            sync_at: None,
            worker: InlineWorker::new(
                disk,
                3,
                Box::new(move |report| {
                    let _ = reports_tx.send(report);
                }),
            ),
            reports,
            reported: VecDeque::new(),
        };
        self.procs.insert(id, Some(process));
        self.trace_line(format_args!("member {id}: boots"));
        self.with_member(id, |m, node, now, io| m.look(node, now, io))?;
        self.resend_to_booted(id);
        Ok(())
    }

    fn run(&mut self) -> Result<(), Violation> {
        while self.now < self.schedule.end_ms {
            self.now += 1;
            self.step()?;
        }
        // Clients stop; what is in flight lands, and the members agree.
        let settled_by = self.now + SETTLE_MS;
        loop {
            match self.converged() {
                Err(_) if self.now < settled_by => {
                    self.now += 1;
                    self.step()?;
                }
                Err(e) => return Err(e),
                Ok(tree) => {
                    self.clients.check_final(tree)?;
                    return self.check_final_config();
                }
            }
        }
    }

    fn step(&mut self) -> Result<(), Violation> {
        self.restarts_due()?;
        self.resume_due()?;
        self.deliver_due()?;
        let ids: Vec<ServerId> = self.procs.keys().copied().collect();
        for &id in &ids {
            // A stopped process does nothing; its disk's jobs finish late.
            // A busy one's disk goes on.
            if self.busy.contains(&id) {
                self.disk_due(id)?;
                self.end_busy(id);
            } else if !self.paused.contains_key(&id) {
                self.disk_due(id)?;
                self.reads_due(id)?;
                self.timers_due(id)?;
            }
        }
        let up = self.up();
        // Syncs go on through the quiet end (they create nothing), not
        // while a script holds writes (each is a txn).
        let load = Load {
            writes: self.now + QUIESCE_MS < self.schedule.end_ms && !self.writes_held,
            syncs: !self.writes_held,
        };
        if self.now <= self.schedule.end_ms {
            let events = self.clients.step(self.now, &mut self.rng, &up, load);
            self.feed_nodes(events)?;
        }
        self.faults()?;
        self.hostile_due()?;
        for id in ids {
            self.check_epochs(id)?;
            self.check_member(id)?;
        }
        Ok(())
    }

    fn up(&self) -> Vec<ServerId> {
        self.procs
            .iter()
            .filter(|(_, p)| p.is_some())
            .map(|(id, _)| *id)
            .collect()
    }

    /// Runs one step of member `id` (if it is up), then carries out what it
    /// and its node asked for.
    fn with_member(
        &mut self,
        id: ServerId,
        step: impl FnOnce(&mut MemberDriver, &mut Node, Now, MemberIo<'_>) -> Result<(), ServeError>,
    ) -> Result<(), Violation> {
        let now = self.at(id);
        let Some(Some(p)) = self.procs.get_mut(&id) else {
            return Ok(());
        };
        let io = MemberIo {
            links: &mut p.links,
            jobs: &mut p.submitted,
        };
        let mut for_clients = std::collections::VecDeque::new();
        let result = step(&mut p.driver, &mut p.node, now, io).and_then(|()| {
            let io = MemberIo {
                links: &mut p.links,
                jobs: &mut p.submitted,
            };
            p.driver
                .route_node_commands(&mut p.node, now, io, &mut for_clients)
        });
        result.map_err(|e| Violation(format!("member {id} stopped: {e}")))?;
        checks::check_answers(id, p)?;
        let blocked = p.driver.blocked();
        self.flush(id);
        if blocked && self.busy.insert(id) {
            self.paused.entry(id).or_insert((u64::MAX, VecDeque::new()));
        }
        self.check_decision(id)?;
        let mut events = Vec::new();
        for command in for_clients {
            if let Command::RecordEnsembleConfig(config) = command {
                self.record_config(id, config);
                continue;
            }
            events.extend(
                self.clients
                    .on_command(id, command, self.now, &mut self.rng)?,
            );
        }
        self.feed_nodes(events)
    }

    /// Feeds client events to the members' nodes.
    fn feed_nodes(&mut self, events: Vec<(ServerId, Event)>) -> Result<(), Violation> {
        for (id, event) in events {
            if let Some(held) = self.paused.get_mut(&id) {
                held.1.push_back(Held::Client(event));
                continue;
            }
            let now = self.at(id);
            self.with_member(id, |_, node, _, _| {
                node.handle_event(now, event);
                Ok(())
            })?;
        }
        Ok(())
    }

    /// Moves what member `id` sent onto the network and what it submitted
    /// onto its disk's queue (each job done 1-5 ms after the one before).
    fn flush(&mut self, id: ServerId) {
        let Some(Some(p)) = self.procs.get_mut(&id) else {
            return;
        };
        let outbox = std::mem::take(&mut p.links.outbox);
        let over_bound = std::mem::take(&mut p.links.over_bound);
        let slow = self.slow_disks.get(&id).copied().unwrap_or(0);
        let mut done = p.disk.back().map_or(self.now, |(t, _)| *t);
        while let Some(job) = p.submitted.pop_front() {
            self.counts.catch_up_reads += u64::from(matches!(job, StorageJob::ReadFor { .. }));
            done = done.max(self.now) + 1 + self.rng.below(5) + slow;
            p.disk.push_back((done, job));
        }
        for (to, wire) in outbox {
            self.send(id, to, wire);
        }
        for (peer, conn) in over_bound {
            self.queue(peer, id, Wire::Closed { conn }, 1);
        }
    }

    /// A busy member whose read has been reported resumes, what reached it
    /// meanwhile delivered next.
    fn end_busy(&mut self, id: ServerId) {
        let blocked = matches!(self.procs.get(&id), Some(Some(p)) if p.driver.blocked());
        if !blocked && self.busy.remove(&id) {
            if let Some((until, _)) = self.paused.get_mut(&id) {
                *until = self.now;
            }
        }
    }

    fn timers_due(&mut self, id: ServerId) -> Result<(), Violation> {
        let now = self.at(id);
        let Some(Some(p)) = self.procs.get_mut(&id) else {
            return Ok(());
        };
        p.node.snapshot_stored(p.worker.snapshot_stored());
        let due = |t: Option<u64>| t.is_some_and(|t| t <= now.mono_ms);
        let (node_due, member_due) = (due(p.node.poll_timeout()), due(p.driver.poll_timeout()));
        if node_due {
            self.with_member(id, |_, node, _, _| {
                node.handle_timeout(now);
                Ok(())
            })?;
        }
        if member_due {
            self.with_member(id, |m, node, now, io| m.handle_timeout(node, now, io))?;
        }
        Ok(())
    }

    /// A peer event for member `id`, with a permit as a link's reader gives.
    fn peer_event(&mut self, id: ServerId, event: PeerEvent) -> Result<(), Violation> {
        self.with_member(id, |m, node, now, io| m.handle_peer(node, now, io, event))
    }

    /// The last zxid leader `leader` sent `follower` before NEWLEADER, while
    /// it syncs or follows.
    fn sync_point(&self, leader: ServerId, follower: ServerId) -> Option<Zxid> {
        match self.procs.get(&leader) {
            Some(Some(p)) => p.member().sync_point(follower),
            _ => None,
        }
    }

    /// Whether member `id` serves clients.
    fn serving(&self, id: ServerId) -> bool {
        matches!(
            self.mode(id),
            Some(Mode::Leading | Mode::Following | Mode::Observing)
        )
    }

    fn mode(&self, id: ServerId) -> Option<Mode> {
        match self.procs.get(&id) {
            Some(Some(p)) => Some(p.node.mode()),
            _ => None,
        }
    }

    fn trace_line(&self, what: std::fmt::Arguments<'_>) {
        if self.trace {
            eprintln!("{:>6} ms  {what}", self.now);
        }
    }
}
