//! The network nemeses: which links to cut for each kind of partition.
//! Healing flushes every cut at once ([`Cluster::heal`]).

use crate::cluster::Cluster;
use crate::faults::Nemesis;
use rand::rngs::StdRng;
use rand::Rng;

/// Cuts links as `nemesis` (a partition kind) says, with `members` in a
/// seeded random order; returns the fault's description and the members
/// it names.
pub fn cut(
    cluster: &Cluster,
    nemesis: Nemesis,
    members: &[usize],
    leader: usize,
    rng: &mut StdRng,
) -> (String, Vec<usize>) {
    let n = members.len();
    let random = members[0];
    match nemesis {
        Nemesis::PartitionHalves => {
            let (a, b) = members.split_at(n / 2);
            cut_between(cluster, a, b);
            ("partition halves".into(), a.to_vec())
        }
        Nemesis::PartitionLeader => {
            // The largest minority: the leader alone of 3, with one other of 5.
            let mut minority = vec![leader];
            let others = members.iter().copied().filter(|m| *m != leader);
            minority.extend(others.take((n - 1) / 2 - 1));
            let rest: Vec<usize> = (0..n).filter(|m| !minority.contains(m)).collect();
            cut_between(cluster, &minority, &rest);
            ("partition leader".into(), minority)
        }
        Nemesis::PartitionBridge => {
            // members[0] bridges; the rest split in two halves that only reach it.
            let bridge = members[0];
            let (a, b) = members[1..].split_at((n - 1) / 2);
            cut_between(cluster, a, b);
            ("partition bridge".into(), vec![bridge])
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
            (kind.into(), vec![random])
        }
        Nemesis::PartitionRing => {
            ring(cluster, members);
            ("partition ring".into(), members.to_vec())
        }
        Nemesis::PartitionClient => {
            cluster.cut_clients(random);
            ("clients cut".into(), vec![random])
        }
        Nemesis::PacketLoss => {
            let percent = rng.gen_range(10..=40);
            for &x in members {
                for &y in members.iter().filter(|y| **y != x) {
                    cluster.lose(x, y, percent);
                }
            }
            (format!("{percent}% packet loss"), members.to_vec())
        }
        _ => unreachable!("{nemesis:?} is not a partition"),
    }
}

/// Cuts every link between `a` and `b`, both ways.
pub fn cut_between(cluster: &Cluster, a: &[usize], b: &[usize]) {
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
