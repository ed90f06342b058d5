//! The nemeses: what fault to inject and how to heal it. Each injection
//! is one fault window in the history; choices (which member, which
//! split) come from the run's seeded random generator.

use crate::cluster::Cluster;
use crate::disk::{self, DiskPlan, IoFault};
use crate::membership;
use crate::partition;
use crate::recorder::Recorder;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::Rng;
use std::time::{Duration, Instant};

/// A kind of fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Nemesis {
    /// No faults: the workload and its checker alone.
    None,
    /// kill -9 of a random member, restarted on heal.
    KillRandom,
    /// kill -9 of the leader.
    KillLeader,
    /// kill -9 of every member at once.
    KillAll,
    /// The leader is cut off from its peers for a moment (its clients still
    /// reach it, so it logs writes no other member has), then every member
    /// gets kill -9 at once. On heal the others come back first, and the old
    /// leader only once they serve and take writes. Its extra txns must be
    /// truncated when it rejoins, never kept (ZOOKEEPER-1154): that takes a
    /// new leader's epoch above every epoch used before, the epochs on disk
    /// included.
    KillAllLeaderLast,
    /// SIGSTOP of a random member, SIGCONT on heal.
    PauseRandom,
    /// SIGSTOP of the leader.
    PauseLeader,
    /// SIGSTOP of every member.
    PauseAll,
    /// The members split in two halves that cannot reach each other.
    PartitionHalves,
    /// The leader (with fewer than half of the others) cut from the rest.
    PartitionLeader,
    /// Two halves joined only through one bridge member.
    PartitionBridge,
    /// One member's packets to the others dropped, or theirs to it.
    PartitionOneWay,
    /// Every member reaches a majority, but no two the same one.
    PartitionRing,
    /// A member cut from its clients (its peers still reach it).
    PartitionClient,
    /// Every peer link drops 10-40% of its packets at random, each way.
    PacketLoss,
    /// Every member in turn: kill -9, restart, wait until it serves.
    RollingRestart,
    /// Power loss of a random member: what it had not fsynced is gone.
    PowerLossRandom,
    /// Power loss of the leader.
    PowerLossLeader,
    /// Power loss of every member at once (a correlated outage).
    PowerLossAll,
    /// A member gets a new, empty disk, and loses power within its first
    /// seconds back (while it syncs and writes its first snapshot).
    PowerLossNewMember,
    /// fsync or write fails with EIO on a random member or the leader; on
    /// heal the member loses power (a failed fsync persisted nothing) and
    /// restarts.
    DiskError,
    /// A random member's or the leader's disk fills up; freed on heal.
    DiskFull,
    /// A random member's or the leader's fsyncs take 100 ms to 1 s each;
    /// back to normal on heal.
    SlowDisk,
    /// Power loss of a random member that tears: each file keeps a random
    /// prefix of what it had not fsynced. The member must start by itself
    /// (an unacknowledged torn tail is cut off).
    TornWrite,
    /// kill -9 of a member, then its newest log loses up to 4 KiB at its end,
    /// bytes that were synced: the member must refuse to start (then gets
    /// a new disk, as an operator would do) or have lost nothing.
    TruncatedLog,
    /// kill -9 of a member, then one byte of its newest log is flipped near
    /// the end: as for a truncated log.
    CorruptLog,
    /// A random member's wall clock jumps by a minute to a day, either way;
    /// set right on heal.
    ClockJump,
    /// A random member or the leader removed by `reconfig` (a leader left
    /// out hands over), added back on heal, as Jepsen's membership nemesis
    /// does. The ensemble runs with reconfig enabled for it.
    Membership,
    /// Any of the above, chosen afresh each time.
    Mix,
}

impl Nemesis {
    /// The kinds that inject faults (all but `None` and `Mix`).
    pub const FAULTS: [Nemesis; 27] = [
        Nemesis::KillRandom,
        Nemesis::KillLeader,
        Nemesis::KillAll,
        Nemesis::KillAllLeaderLast,
        Nemesis::PauseRandom,
        Nemesis::PauseLeader,
        Nemesis::PauseAll,
        Nemesis::PartitionHalves,
        Nemesis::PartitionLeader,
        Nemesis::PartitionBridge,
        Nemesis::PartitionOneWay,
        Nemesis::PartitionRing,
        Nemesis::PartitionClient,
        Nemesis::PacketLoss,
        Nemesis::RollingRestart,
        Nemesis::PowerLossRandom,
        Nemesis::PowerLossLeader,
        Nemesis::PowerLossAll,
        Nemesis::PowerLossNewMember,
        Nemesis::DiskError,
        Nemesis::DiskFull,
        Nemesis::SlowDisk,
        Nemesis::TornWrite,
        Nemesis::TruncatedLog,
        Nemesis::CorruptLog,
        Nemesis::ClockJump,
        Nemesis::Membership,
    ];

    /// The name on the command line.
    pub fn name(self) -> String {
        clap::ValueEnum::to_possible_value(&self)
            .map(|v| v.get_name().to_owned())
            .unwrap_or_default()
    }

    /// How long a fault is held before it heals, in ms.
    pub fn hold_ms(self) -> std::ops::Range<u64> {
        match self {
            // A client moves to another member only after hearing nothing
            // for 2/3 of its session timeout (4 s): a shorter cut only
            // delays it, and the reconnect (with SetWatches) is the point.
            Nemesis::PartitionClient => 5000..9000,
            _ => 2000..6000,
        }
    }

    /// Whether the ensemble runs with `reconfigEnabled` (and `skipACL`, so
    /// the nemesis needs no super user) for this nemesis.
    pub fn reconfig(self) -> bool {
        matches!(self, Nemesis::Membership | Nemesis::Mix)
    }

    /// What the members' disks must support for this nemesis.
    pub fn disk_plan(self) -> DiskPlan {
        let none = DiskPlan::default();
        match self {
            Nemesis::PowerLossRandom
            | Nemesis::PowerLossLeader
            | Nemesis::PowerLossAll
            | Nemesis::PowerLossNewMember
            | Nemesis::TornWrite
            | Nemesis::SlowDisk => DiskPlan {
                lazyfs: true,
                ..none
            },
            Nemesis::DiskError => DiskPlan {
                lazyfs: true,
                fiu: true,
                ..none
            },
            Nemesis::DiskFull => DiskPlan {
                tmpfs: true,
                ..none
            },
            Nemesis::ClockJump => DiskPlan {
                faketime: true,
                ..none
            },
            Nemesis::Mix => DiskPlan::ALL,
            _ => none,
        }
    }
}

/// How to undo an injected fault.
enum Heal {
    Restart(Vec<usize>),
    RestartLast { first: Vec<usize>, last: usize },
    PowerOn(Vec<usize>),
    Resume(Vec<usize>),
    Reconnect,
    DiskError(usize),
    DiskFull(usize),
    FsyncLatency(usize),
    RestartDamaged(usize),
    Clock(usize),
    AddBack(usize),
}

/// A fault applied: what it was, whom it hit, and how it heals.
type Applied = (String, Vec<usize>, Heal);

/// Who a fault may hit: see [`Faults::targets`].
struct Targets {
    members: Vec<usize>,
    random: usize,
    leader: usize,
    random_or_leader: usize,
}

impl Targets {
    /// A random, leader or all variant's members.
    fn pick(&self, nemesis: Nemesis) -> Vec<usize> {
        match nemesis {
            Nemesis::KillRandom | Nemesis::PauseRandom | Nemesis::PowerLossRandom => {
                vec![self.random]
            }
            Nemesis::KillLeader | Nemesis::PauseLeader | Nemesis::PowerLossLeader => {
                vec![self.leader]
            }
            _ => self.members.clone(),
        }
    }
}

/// A fault in force.
pub struct Injected {
    window: usize,
    heal: Heal,
}

/// The nemesis's hands: the cluster, the seeded choices, the recorder, and
/// the problems met while healing (a member that does not come back).
pub struct Faults<'a> {
    pub cluster: &'a mut Cluster,
    pub rng: &'a mut StdRng,
    pub rec: &'a Recorder,
    /// One line per member that could not be brought back.
    pub problems: Vec<String>,
}

impl Faults<'_> {
    /// Injects `nemesis` (a concrete kind for `Mix`), recording its window.
    pub fn inject(&mut self, nemesis: Nemesis) -> Option<Injected> {
        let t = self.targets();
        let (kind, hit, heal) = match nemesis {
            Nemesis::None => return None,
            Nemesis::Mix => {
                let pick = *Nemesis::FAULTS.choose(self.rng).expect("faults");
                return self.inject(pick);
            }
            Nemesis::RollingRestart => {
                self.rolling_restart(&t.members);
                return None;
            }
            Nemesis::Membership => return Some(self.remove_member(t.random_or_leader)),
            Nemesis::PowerLossNewMember => {
                let window = self
                    .rec
                    .fault_started("new disk, power loss", vec![t.random]);
                self.new_member_power_loss(t.random, window);
                let heal = Heal::PowerOn(vec![t.random]);
                return Some(Injected { window, heal });
            }
            Nemesis::KillRandom | Nemesis::KillLeader | Nemesis::KillAll => {
                let hit = t.pick(nemesis);
                self.cluster.kill9_all(&hit);
                ("kill -9".into(), hit.clone(), Heal::Restart(hit))
            }
            Nemesis::KillAllLeaderLast => self.kill_all_leader_last(&t),
            Nemesis::PauseRandom | Nemesis::PauseLeader | Nemesis::PauseAll => {
                let hit = t.pick(nemesis);
                for &i in &hit {
                    self.cluster.pause(i);
                }
                ("SIGSTOP".into(), hit.clone(), Heal::Resume(hit))
            }
            Nemesis::PartitionHalves
            | Nemesis::PartitionLeader
            | Nemesis::PartitionBridge
            | Nemesis::PartitionOneWay
            | Nemesis::PartitionRing
            | Nemesis::PartitionClient
            | Nemesis::PacketLoss => {
                let cut = partition::cut(self.cluster, nemesis, &t.members, t.leader, self.rng);
                (cut.0, cut.1, Heal::Reconnect)
            }
            Nemesis::PowerLossRandom | Nemesis::PowerLossLeader | Nemesis::PowerLossAll => {
                let hit = t.pick(nemesis);
                self.cluster.power_loss_all(&hit);
                ("power loss".into(), hit.clone(), Heal::PowerOn(hit))
            }
            Nemesis::DiskError => self.disk_error(t.random_or_leader),
            Nemesis::DiskFull => {
                let i = t.random_or_leader;
                let filled = self.cluster.disk(i).fill();
                (format!("disk full ({filled})"), vec![i], Heal::DiskFull(i))
            }
            Nemesis::SlowDisk => self.slow_disk(t.random_or_leader),
            Nemesis::TornWrite => {
                let torn = self.cluster.disk_mut(t.random).torn_power_cut();
                self.cluster.kill9(t.random);
                let heal = Heal::PowerOn(vec![t.random]);
                (format!("torn power loss: {torn}"), vec![t.random], heal)
            }
            Nemesis::TruncatedLog | Nemesis::CorruptLog => self.damage_log(nemesis, t.random),
            Nemesis::ClockJump => self.clock_jump(t.random),
        };
        let window = self.rec.fault_started(&kind, hit);
        Some(Injected { window, heal })
    }

    /// Who a fault may hit this time: every member (shuffled), one at
    /// random, the leader (else the random one), and one of those two.
    fn targets(&mut self) -> Targets {
        let mut members: Vec<usize> = (0..self.cluster.len()).collect();
        members.shuffle(self.rng);
        let random = members[0];
        let leader = self.cluster.leader().unwrap_or(random);
        let random_or_leader = if self.rng.gen_bool(0.5) {
            random
        } else {
            leader
        };
        Targets {
            members,
            random,
            leader,
            random_or_leader,
        }
    }

    /// The leader cut off for less than its followers wait, then every
    /// member killed; it restarts last, so no new leader committed meanwhile.
    fn kill_all_leader_last(&mut self, t: &Targets) -> Applied {
        let leader = t.leader;
        let first: Vec<usize> = t.members.iter().copied().filter(|&i| i != leader).collect();
        partition::cut_between(self.cluster, &[leader], &first);
        let alone = self.rng.gen_range(200..1000);
        std::thread::sleep(Duration::from_millis(alone));
        self.cluster.kill9_all(&t.members);
        self.cluster.heal();
        let kind = format!("leader {} cut off {alone} ms, kill -9 all", leader + 1);
        let heal = Heal::RestartLast {
            first,
            last: leader,
        };
        (kind, t.members.clone(), heal)
    }

    /// EIO on member `i`'s next fsync or write.
    fn disk_error(&mut self, i: usize) -> Applied {
        let fault = if self.rng.gen_bool(0.5) {
            IoFault::Sync
        } else {
            IoFault::Write
        };
        if let Some(pid) = self.cluster.pid(i) {
            disk::fail_io(pid, fault);
        }
        let kind = format!("EIO on {fault:?}").to_lowercase();
        (kind, vec![i], Heal::DiskError(i))
    }

    /// Member `i`'s fsyncs take 0.1 to 1 s.
    fn slow_disk(&mut self, i: usize) -> Applied {
        let ms = self.rng.gen_range(100..=1000);
        self.cluster.disk(i).set_fsync_latency(ms);
        (
            format!("slow disk: {ms} ms fsyncs"),
            vec![i],
            Heal::FsyncLatency(i),
        )
    }

    /// Member `i` loses power and comes back with its log cut short or
    /// corrupted.
    fn damage_log(&mut self, nemesis: Nemesis, i: usize) -> Applied {
        self.cluster.power_loss(i);
        let disk = self.cluster.disk(i);
        let damage = if nemesis == Nemesis::TruncatedLog {
            disk.truncate_log(self.rng)
        } else {
            disk.corrupt_log(self.rng)
        };
        self.cluster.power_on(i);
        (damage, vec![i], Heal::RestartDamaged(i))
    }

    /// Member `i`'s clock jumps a minute to a day, either way.
    fn clock_jump(&mut self, i: usize) -> Applied {
        let sign = if self.rng.gen_bool(0.5) { 1 } else { -1 };
        let seconds = self.rng.gen_range(60..86_400) * sign;
        self.cluster.disk(i).set_clock_offset(seconds);
        (format!("clock {seconds:+} s"), vec![i], Heal::Clock(i))
    }

    /// Removes member `i` by reconfig; its window notes the configuration
    /// that follows, or the refusal.
    fn remove_member(&mut self, i: usize) -> Injected {
        let window = self.rec.fault_started("reconfig: removed", vec![i]);
        let note = match membership::remove(self.cluster, i) {
            Ok(config) => format!("now {config}"),
            Err(e) => format!("refused: {e}"),
        };
        self.rec.fault_note(window, &note);
        Injected {
            window,
            heal: Heal::AddBack(i),
        }
    }

    /// Undoes a fault and closes its window.
    pub fn heal(&mut self, injected: Injected) {
        let window = injected.window;
        match injected.heal {
            Heal::Restart(members) => {
                for i in members {
                    self.restart(i, window);
                }
            }
            Heal::RestartLast { first, last } => {
                for &i in &first {
                    self.restart(i, window);
                }
                self.await_serving(&first);
                // Let the others take writes in their new epoch first.
                std::thread::sleep(Duration::from_secs(2));
                self.restart(last, window);
            }
            Heal::PowerOn(members) => {
                for &i in &members {
                    self.cluster.power_on(i);
                }
                for i in members {
                    self.restart(i, window);
                }
            }
            Heal::Resume(members) => {
                for i in members {
                    self.cluster.resume(i);
                }
            }
            Heal::Reconnect => self.cluster.heal(),
            Heal::DiskError(i) => {
                self.note_if_exited(i, window);
                // The restarted process starts with no failures enabled.
                self.cluster.power_loss(i);
                self.cluster.power_on(i);
                self.restart(i, window);
            }
            Heal::DiskFull(i) => {
                self.note_if_exited(i, window);
                self.cluster.disk(i).free();
                if !self.cluster.running(i) {
                    self.restart(i, window);
                }
            }
            Heal::FsyncLatency(i) => self.cluster.disk(i).set_fsync_latency(disk::FSYNC_MS),
            Heal::RestartDamaged(i) => {
                if let Err(refusal) = self.cluster.restart(i) {
                    // The operator's move: a new disk, synced from the leader.
                    self.rec
                        .fault_note(window, &format!("refused: {}", last_line(&refusal)));
                    self.cluster.disk_mut(i).replace();
                    self.restart(i, window);
                }
            }
            Heal::Clock(i) => self.cluster.disk(i).set_clock_offset(0),
            Heal::AddBack(i) => match membership::add_back(self.cluster, i) {
                Ok(config) => self
                    .rec
                    .fault_note(window, &format!("added back: {config}")),
                Err(e) => self
                    .problems
                    .push(format!("member {} not added back: {e}", i + 1)),
            },
        }
        self.rec.fault_ended(window);
    }

    /// Restarts member `i`; one that does not come back is a problem.
    fn restart(&mut self, i: usize, window: usize) {
        if let Err(e) = self.cluster.restart(i) {
            let kind = self.rec.fault_kind(window);
            self.problems.push(format!(
                "member {} did not restart after {kind}: {}",
                i + 1,
                last_line(&e)
            ));
        }
    }

    /// Notes in the window whether member `i` exited on its own.
    fn note_if_exited(&mut self, i: usize, window: usize) {
        if !self.cluster.running(i) {
            let log = self.cluster.log(i);
            let why = log
                .lines()
                .rev()
                .find(|l| l.contains("fatal"))
                .unwrap_or("no fatal line");
            self.rec
                .fault_note(window, &format!("member stopped: {why}"));
        }
    }

    /// Every member in turn: kill -9, restart, wait (bounded) until it serves.
    fn rolling_restart(&mut self, members: &[usize]) {
        let window = self.rec.fault_started("rolling restart", members.to_vec());
        for &i in members {
            self.restart(i, window);
            self.await_serving(&[i]);
        }
        self.rec.fault_ended(window);
    }

    /// Waits until `members` all serve, for at most 30 s: a member that
    /// does not rejoin is the final check's problem.
    fn await_serving(&self, members: &[usize]) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !members.iter().all(|&i| self.cluster.serving(i)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Member `i` gets a new disk, starts, and loses power again a moment
    /// later: within its first seconds (catching up and writing its first
    /// snapshot).
    fn new_member_power_loss(&mut self, i: usize, window: usize) {
        self.cluster.power_loss(i);
        self.cluster.disk_mut(i).replace();
        self.restart(i, window);
        let first_seconds = Duration::from_millis(self.rng.gen_range(0..3000));
        std::thread::sleep(first_seconds);
        self.cluster.power_loss(i);
        self.rec.fault_note(
            window,
            &format!("cut {} ms after the start", first_seconds.as_millis()),
        );
    }
}

/// The last non-empty line of `text` (a log, or an error ending in one).
fn last_line(text: &str) -> &str {
    text.lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
}
