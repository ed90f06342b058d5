//! Fault driving: restarts and heals when they are due, a random
//! schedule's faults at seeded times, and the crash and link cut that
//! scripts and traps use as well.

use super::Sim;
use crate::core::election::ServerId;

impl Sim {
    /// Crashes, restarts, partitions and heals, at seeded times.
    pub(super) fn faults(&mut self) {
        let due: Vec<ServerId> = self
            .restarts
            .iter()
            .filter(|(_, at)| **at <= self.now)
            .map(|(id, _)| *id)
            .collect();
        for id in due {
            self.restarts.remove(&id);
            self.boot(id);
        }
        if self.heals_at.is_some_and(|at| at <= self.now) {
            self.heals_at = None;
            self.cut.clear();
        }
        if self.schedule.scripted {
            self.next_fault_ms = u64::MAX;
            return;
        }
        if self.now < self.next_fault_ms {
            return;
        }
        self.next_fault_ms = self.now + 300 + self.rng.below(1500);
        if self.now >= self.schedule.faults_until_ms {
            // Heal everything and bring everyone back: the ensemble must recover.
            self.cut.clear();
            self.heals_at = None;
            let down: Vec<ServerId> = self.restarts.keys().copied().collect();
            for id in down {
                self.restarts.insert(id, self.now);
            }
            return;
        }
        let ids: Vec<ServerId> = self.members.keys().copied().collect();
        let victim = match self.leader() {
            Some(l) if self.rng.below(2) == 0 => l,
            _ => ids[self.rng.below(ids.len() as u64) as usize],
        };
        match self.rng.below(5) {
            0 if !self.restarts.contains_key(&victim) => self.crash(victim),
            // A correlated outage: every member loses power at once.
            1 if self.rng.below(3) == 0 => {
                for id in &ids {
                    if !self.restarts.contains_key(id) {
                        self.crash(*id);
                    }
                }
            }
            1 | 2 => {
                // Isolate the victim from everyone.
                for other in &ids {
                    if *other != victim {
                        self.cut_link(victim, *other);
                    }
                }
                self.heals_at = Some(self.now + 300 + self.rng.below(2500));
            }
            _ => {
                let other = ids[self.rng.below(ids.len() as u64) as usize];
                if other != victim {
                    self.cut_link(victim, other);
                    self.heals_at = Some(self.now + 300 + self.rng.below(2500));
                }
            }
        }
    }

    /// A partition breaks the connection, as TCP would: what it carried is
    /// lost and both ends learn that it closed.
    pub(super) fn cut_link(&mut self, a: ServerId, b: ServerId) {
        if self.trace {
            eprintln!("{:>6} ms  cut {a}-{b}", self.now);
        }
        self.cut.insert((a.min(b), a.max(b)));
        self.in_flight
            .retain(|_, (from, to, _)| !((*from == a && *to == b) || (*from == b && *to == a)));
        for (end, other) in [(a, b), (b, a)] {
            if let Some(Some(m)) = self.members.get_mut(&end) {
                m.disconnected(self.now, other);
                self.collect(end);
            }
        }
    }

    /// kill -9 and power loss: queued storage operations never happen.
    pub(super) fn crash(&mut self, id: ServerId) {
        if self.trace {
            eprintln!("{:>6} ms  member {id}: CRASH", self.now);
        }
        self.members.insert(id, None);
        if let Some(q) = self.queues.get_mut(&id) {
            q.clear();
        }
        self.disks[&id].crash();
        self.in_flight
            .retain(|_, (from, to, _)| *from != id && *to != id);
        self.link_clock
            .retain(|(from, to), _| *from != id && *to != id);
        self.restarts
            .insert(id, self.now + 200 + self.rng.below(2000));
    }
}
