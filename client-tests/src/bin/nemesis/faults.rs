//! The nemeses: what fault to inject and how to heal it. Each injection
//! is one fault window in the history; choices (which member, which
//! split) come from the run's seeded random generator.

use crate::cluster::Cluster;
use crate::recorder::Recorder;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::Rng;
use std::time::Duration;

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
    /// Every member in turn: kill -9, restart, wait until it serves.
    RollingRestart,
    /// Any of the above, chosen afresh each time.
    Mix,
}

impl Nemesis {
    /// The kinds that inject faults (all but `None` and `Mix`).
    pub const FAULTS: [Nemesis; 13] = [
        Nemesis::KillRandom,
        Nemesis::KillLeader,
        Nemesis::KillAll,
        Nemesis::PauseRandom,
        Nemesis::PauseLeader,
        Nemesis::PauseAll,
        Nemesis::PartitionHalves,
        Nemesis::PartitionLeader,
        Nemesis::PartitionBridge,
        Nemesis::PartitionOneWay,
        Nemesis::PartitionRing,
        Nemesis::PartitionClient,
        Nemesis::RollingRestart,
    ];

    /// The name on the command line.
    pub fn name(self) -> String {
        clap::ValueEnum::to_possible_value(&self)
            .map(|v| v.get_name().to_owned())
            .unwrap_or_default()
    }
}

/// How to undo an injected fault.
pub enum Heal {
    Restart(Vec<usize>),
    Resume(Vec<usize>),
    Reconnect,
}

/// A fault in force.
pub struct Injected {
    window: usize,
    heal: Heal,
}

/// Injects `nemesis` (a concrete kind for `Mix`), recording its window.
pub fn inject(
    nemesis: Nemesis,
    cluster: &mut Cluster,
    rng: &mut StdRng,
    rec: &Recorder,
) -> Option<Injected> {
    let n = cluster.len();
    let mut members: Vec<usize> = (0..n).collect();
    members.shuffle(rng);
    let random = members[0];
    let leader = cluster.leader().unwrap_or(random);
    let (kind, hit, heal) = match nemesis {
        Nemesis::None => return None,
        Nemesis::Mix => {
            let pick = *Nemesis::FAULTS.choose(rng).expect("faults");
            return inject(pick, cluster, rng, rec);
        }
        Nemesis::KillRandom | Nemesis::KillLeader | Nemesis::KillAll => {
            let hit = match nemesis {
                Nemesis::KillRandom => vec![random],
                Nemesis::KillLeader => vec![leader],
                _ => members.clone(),
            };
            for &i in &hit {
                cluster.kill9(i);
            }
            ("kill -9", hit.clone(), Heal::Restart(hit))
        }
        Nemesis::PauseRandom | Nemesis::PauseLeader | Nemesis::PauseAll => {
            let hit = match nemesis {
                Nemesis::PauseRandom => vec![random],
                Nemesis::PauseLeader => vec![leader],
                _ => members.clone(),
            };
            for &i in &hit {
                cluster.pause(i);
            }
            ("SIGSTOP", hit.clone(), Heal::Resume(hit))
        }
        Nemesis::PartitionHalves => {
            let (a, b) = members.split_at(n / 2);
            cut_between(cluster, a, b);
            ("partition halves", a.to_vec(), Heal::Reconnect)
        }
        Nemesis::PartitionLeader => {
            // The largest minority: the leader alone of 3, with one other of 5.
            let mut minority = vec![leader];
            let others = members.iter().copied().filter(|m| *m != leader);
            minority.extend(others.take((n - 1) / 2 - 1));
            let rest: Vec<usize> = (0..n).filter(|m| !minority.contains(m)).collect();
            cut_between(cluster, &minority, &rest);
            ("partition leader", minority, Heal::Reconnect)
        }
        Nemesis::PartitionBridge => {
            // members[0] bridges; the rest split in two halves that only reach it.
            let bridge = members[0];
            let (a, b) = members[1..].split_at((n - 1) / 2);
            cut_between(cluster, a, b);
            ("partition bridge", vec![bridge], Heal::Reconnect)
        }
        Nemesis::PartitionOneWay => {
            let others: Vec<usize> = (0..n).filter(|m| *m != random).collect();
            let outbound = rng.gen_bool(0.5);
            for &o in &others {
                if outbound {
                    cluster.cut(random, o);
                } else {
                    cluster.cut(o, random);
                }
            }
            let kind = if outbound {
                "one-way from"
            } else {
                "one-way to"
            };
            (kind, vec![random], Heal::Reconnect)
        }
        Nemesis::PartitionRing => {
            ring(cluster, &members);
            ("partition ring", members.clone(), Heal::Reconnect)
        }
        Nemesis::PartitionClient => {
            cluster.cut_clients(random);
            ("clients cut", vec![random], Heal::Reconnect)
        }
        Nemesis::RollingRestart => {
            let window = rec.fault_started("rolling restart", members.clone());
            for &i in &members {
                cluster.restart(i);
                // Bounded: a member that does not rejoin is the checker's problem.
                let deadline = std::time::Instant::now() + Duration::from_secs(30);
                while !cluster.serving(i) && std::time::Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
            rec.fault_ended(window);
            return None;
        }
    };
    let window = rec.fault_started(kind, hit);
    Some(Injected { window, heal })
}

/// Undoes a fault and closes its window.
pub fn heal(injected: Injected, cluster: &mut Cluster, rec: &Recorder) {
    match injected.heal {
        Heal::Restart(members) => {
            for i in members {
                cluster.restart(i);
            }
        }
        Heal::Resume(members) => {
            for i in members {
                cluster.resume(i);
            }
        }
        Heal::Reconnect => cluster.heal(),
    }
    rec.fault_ended(injected.window);
}

/// Cuts every link between `a` and `b`, both ways.
fn cut_between(cluster: &Cluster, a: &[usize], b: &[usize]) {
    for &x in a {
        for &y in b {
            cluster.cut(x, y);
            cluster.cut(y, x);
        }
    }
}

/// Majorities ring: members in `order` around a ring. With five, each keeps
/// its two neighbours (itself and them, a majority) and loses the two across;
/// with three, each only sends to the next one, so each hears one member and
/// reaches another, never the same pair both ways.
fn ring(cluster: &Cluster, order: &[usize]) {
    let n = order.len();
    for (pos, &x) in order.iter().enumerate() {
        for (other, &y) in order.iter().enumerate() {
            if x == y {
                continue;
            }
            let ahead = (other + n - pos) % n;
            let keep = if n <= 3 {
                ahead == 1
            } else {
                ahead < n / 2 || ahead > n - n / 2
            };
            if !keep {
                cluster.cut(x, y);
            }
        }
    }
}
