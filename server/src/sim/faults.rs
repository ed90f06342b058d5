//! Fault driving: restarts and heals when they are due, a random
//! schedule's faults at seeded times, and the crash and link cut that
//! scripts and traps use as well.

use super::Sim;
use crate::core::election::ServerId;
use crate::core::zab::StorageOp;
use zkd_storage::{EpochStore, TxnLog};

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
            self.heal_links();
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
            self.heal_links();
            self.heals_at = None;
            let paused: Vec<ServerId> = self.paused.keys().copied().collect();
            for id in paused {
                self.resume(id);
            }
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
        let up = !self.restarts.contains_key(&victim);
        match self.rng.below(7) {
            0 if up => self.crash(victim),
            // Stopped, its connections open (a GC pause, SIGSTOP): shorter
            // or longer than its peers' patience.
            5 if up && !self.paused.contains_key(&victim) => {
                let until = self.now + 100 + self.rng.below(2000);
                if until - self.now > self.timing.sync_ms() {
                    self.counts.long_pauses += 1;
                }
                if self.trace {
                    eprintln!(
                        "{:>6} ms  member {victim}: PAUSE until {until} ms",
                        self.now
                    );
                }
                self.paused.insert(victim, until);
            }
            6 if up => self.torn_crash(victim),
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
            if let Some(&until) = self.paused.get(&end) {
                // A stopped process learns of the close when it runs again.
                self.seq += 1;
                let closed = (other, end, super::Packet::Closed);
                self.in_flight.insert((until, self.seq), closed);
                continue;
            }
            let now = self.local(end);
            if let Some(Some(m)) = self.members.get_mut(&end) {
                m.disconnected(now, other);
                self.collect(end);
            }
        }
    }

    /// Every cut link works again. Each end's election link reconnects and
    /// carries the last notification it sent again (ZooKeeper's and the
    /// runtime's peer layer do): one sent into the partition is not lost.
    pub(super) fn heal_links(&mut self) {
        let healed = std::mem::take(&mut self.cut);
        for (a, b) in healed {
            for (from, to) in [(a, b), (b, a)] {
                let up = matches!(self.members.get(&from), Some(Some(_)));
                if let (true, Some(n)) = (up, self.last_notification.get(&(from, to)).copied()) {
                    self.send(from, to, super::Packet::Wire(super::Wire::Election(n)));
                }
            }
        }
    }

    /// Paused members whose pause is over run again, before anything else
    /// of this step: what waited for them comes first.
    pub(super) fn resume_due(&mut self) {
        let resumed: Vec<ServerId> = self
            .paused
            .iter()
            .filter(|(_, until)| **until <= self.now)
            .map(|(id, _)| *id)
            .collect();
        for id in resumed {
            self.resume(id);
        }
    }

    fn resume(&mut self, id: ServerId) {
        if self.trace {
            eprintln!("{:>6} ms  member {id}: RESUME", self.now);
        }
        self.paused.remove(&id);
    }

    /// A power cut in the middle of the storage queue: a random prefix of
    /// the queued appends and epoch writes reached the disk, and the member
    /// never learned it (it reported nothing, acknowledged nothing).
    fn torn_crash(&mut self, id: ServerId) {
        let queue = self
            .queues
            .get_mut(&id)
            .map(std::mem::take)
            .unwrap_or_default();
        let reached = self.rng.below(queue.len() as u64 + 1) as usize;
        let mut disk = self.disks[&id].clone();
        let mut written = 0;
        for (_, op) in queue.into_iter().take(reached) {
            let done = match op {
                StorageOp::Append { zxid, txn } => disk.append(zxid, txn).and_then(|_| disk.sync()),
                StorageOp::SetAcceptedEpoch(e) => disk.set_accepted_epoch(e),
                StorageOp::SetCurrentEpoch(e) => disk.set_current_epoch(e),
                StorageOp::Barrier(_) => continue,
                // A cut or an install ends the prefix the cut can keep.
                StorageOp::TruncateAndReload { .. } | StorageOp::InstallSnapshot { .. } => break,
            };
            done.expect("a memory disk takes every write");
            written += 1;
        }
        if written > 0 {
            self.counts.torn_writes += 1;
        }
        if self.trace {
            eprintln!(
                "{:>6} ms  member {id}: TORN power cut, {written} queued writes reached the disk",
                self.now
            );
        }
        self.crash(id);
    }

    /// kill -9 and power loss: queued storage operations never happen.
    pub(super) fn crash(&mut self, id: ServerId) {
        if self.trace {
            eprintln!("{:>6} ms  member {id}: CRASH", self.now);
        }
        self.paused.remove(&id);
        self.members.insert(id, None);
        if let Some(q) = self.queues.get_mut(&id) {
            q.clear();
        }
        self.disks[&id].crash();
        self.in_flight
            .retain(|_, (from, to, _)| *from != id && *to != id);
        self.link_clock
            .retain(|(from, to), _| *from != id && *to != id);
        // A new process remembers no notification it sent.
        self.last_notification.retain(|(from, _), _| *from != id);
        self.restarts
            .insert(id, self.now + 200 + self.rng.below(2000));
    }
}
