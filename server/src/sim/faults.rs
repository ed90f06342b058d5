//! Fault driving: restarts and heals when they are due, a random
//! schedule's faults at seeded times (crashes, torn power cuts, failed
//! disk writes, pauses, partitions: whole, one-way, bridged), and the
//! crash that scripts and traps use as well.

use super::Sim;
use crate::core::election::ServerId;
use crate::core::zab::StorageOp;
use zkd_storage::{EpochStore, TxnLog};

/// How often a schedule's random faults did what they are there for.
#[derive(Clone, Copy, Debug, Default)]
pub struct FaultCounts {
    /// Torn power cuts that left queued, unreported writes on the disk.
    pub torn_writes: u64,
    /// Pauses longer than the sync limit: the peers gave up on the member
    /// while its connections stayed open.
    pub long_pauses: u64,
    /// Messages a one-way partition held and delivered late.
    pub late_packets: u64,
    /// Older election notifications read after a reconnect's newer one.
    pub stale_notifications: u64,
    /// Partitions in two with a member linked to both sides.
    pub bridges: u64,
    /// Storage operations that failed (EIO) and ended their member.
    pub disk_errors: u64,
}

impl std::ops::AddAssign for FaultCounts {
    fn add_assign(&mut self, other: FaultCounts) {
        self.torn_writes += other.torn_writes;
        self.long_pauses += other.long_pauses;
        self.late_packets += other.late_packets;
        self.stale_notifications += other.stale_notifications;
        self.bridges += other.bridges;
        self.disk_errors += other.disk_errors;
    }
}

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
        match self.rng.below(10) {
            0 if up => self.crash(victim),
            // Stopped, its connections open (a GC pause, SIGSTOP): shorter
            // or longer than its peers' patience.
            5 if up && !self.paused.contains_key(&victim) => self.pause(victim),
            6 if up => self.torn_crash(victim),
            // The victim's next storage operation fails.
            7 if up => {
                self.failing_disks.insert(victim);
            }
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
                self.heal_later();
            }
            8 => {
                // The victim hears everyone and nobody hears it, or the reverse.
                let outbound = self.rng.below(2) == 0;
                for other in &ids {
                    match (*other != victim, outbound) {
                        (true, true) => self.cut_one_way(victim, *other),
                        (true, false) => self.cut_one_way(*other, victim),
                        (false, _) => {}
                    }
                }
                self.heal_later();
            }
            9 => self.bridge(victim, &ids),
            _ => {
                let other = ids[self.rng.below(ids.len() as u64) as usize];
                if other != victim {
                    self.cut_link(victim, other);
                    self.heal_later();
                }
            }
        }
    }

    fn heal_later(&mut self) {
        self.heals_at = Some(self.now + 300 + self.rng.below(2500));
    }

    fn pause(&mut self, victim: ServerId) {
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

    /// The others split in two sides that cannot reach each other, and
    /// `bridge` reaches both (a quorum may form on either side through it).
    fn bridge(&mut self, bridge: ServerId, ids: &[ServerId]) {
        let (mut left, mut right) = (Vec::new(), Vec::new());
        for id in ids.iter().filter(|id| **id != bridge) {
            match self.rng.below(2) == 0 {
                true => left.push(*id),
                false => right.push(*id),
            }
        }
        if left.is_empty() || right.is_empty() {
            return;
        }
        if self.trace {
            eprintln!(
                "{:>6} ms  bridge {bridge} between {left:?} and {right:?}",
                self.now
            );
        }
        for a in &left {
            for b in &right {
                self.cut_link(*a, *b);
            }
        }
        self.counts.bridges += 1;
        self.heal_later();
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
        let mut written = 0;
        for (_, op) in queue.into_iter().take(reached) {
            match self.write_unreported(id, op) {
                Some(true) => written += 1,
                Some(false) => {}
                None => break,
            }
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

    /// The storage operation `op` of member `id` fails with EIO: it may or
    /// may not have reached the disk, and the member exits at once, as the
    /// runtime's storage thread ends the process on a failed write.
    pub(super) fn disk_error(&mut self, id: ServerId, op: StorageOp) {
        let reached = self.rng.below(2) == 0 && self.write_unreported(id, op).is_some();
        self.counts.disk_errors += 1;
        if self.trace {
            eprintln!(
                "{:>6} ms  member {id}: EIO, the failed write {} the disk",
                self.now,
                if reached { "reached" } else { "did not reach" }
            );
        }
        self.crash(id);
    }

    /// Writes `op` to member `id`'s disk without telling the member: whether
    /// it wrote anything, or None for a cut or an install (which end the
    /// prefix a power cut can keep).
    fn write_unreported(&mut self, id: ServerId, op: StorageOp) -> Option<bool> {
        let mut disk = self.disks[&id].clone();
        let done = match op {
            StorageOp::Append { zxid, txn } => disk.append(zxid, txn).and_then(|_| disk.sync()),
            StorageOp::SetAcceptedEpoch(e) => disk.set_accepted_epoch(e),
            StorageOp::SetCurrentEpoch(e) => disk.set_current_epoch(e),
            StorageOp::Barrier(_) => return Some(false),
            StorageOp::TruncateAndReload { .. } | StorageOp::InstallSnapshot { .. } => return None,
        };
        done.expect("a memory disk takes every write");
        Some(true)
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
        self.failing_disks.remove(&id);
        self.forget_links(id);
        self.restarts
            .insert(id, self.now + 200 + self.rng.below(2000));
    }
}
