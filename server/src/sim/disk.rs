//! A whole member's disk and its process's end: the storage thread's jobs
//! run when their simulated time comes, appends are written at once and
//! synced when their batch ends a little later (a crash in between loses
//! them; a torn one keeps a prefix, never reported), and a write that
//! fails (EIO) ends the member, as the runtime's fatal storage error does.

use super::trap::{JobKind, Moment};
use super::{Violation, WholeSim, Wire};
use crate::core::election::ServerId;
use crate::core::storage_job::{StorageJob, StorageReport};
use crate::driver::recovery;

/// Bytes a simulated disk reads (and the storage thread decodes) per ms:
/// scaled down with the simulator's small txns and trees, so that a read
/// of a whole log or tree takes tens to hundreds of ms, as a large one
/// takes seconds at the runtime's sizes.
const READ_BYTES_PER_MS: usize = 512;

/// Bytes a tree node is counted as beyond its path and data.
const NODE_OVERHEAD: usize = 64;

/// How long the disk took to read what `report` carries; None if it is
/// not a read.
fn read_ms(report: &StorageReport) -> Option<u64> {
    let txns = |t: &[(zkd_protocol::Zxid, bytes::Bytes)]| t.iter().map(|(_, b)| b.len()).sum();
    let bytes: usize = match report {
        StorageReport::DurableState(read) => {
            let history = read.state.history.after(read.state.history.base());
            history.map(|(_, b)| b.len()).sum::<usize>() + txns(&read.after_tree)
        }
        StorageReport::Rebuilt(rebuilt) => {
            let tree = &rebuilt.tree;
            tree.approximate_data_size() + NODE_OVERHEAD * tree.node_count()
        }
        StorageReport::Logged(logged) | StorageReport::LoggedFor { txns: logged, .. } => {
            txns(logged)
        }
        _ => return None,
    };
    Some((bytes / READ_BYTES_PER_MS) as u64)
}

impl WholeSim {
    /// Runs member `id`'s storage jobs whose time has come, ends its batch
    /// when that is due, then hands the member the reports.
    pub(super) fn disk_due(&mut self, id: ServerId) -> Result<(), Violation> {
        let stalled = self.stalled.contains(&id);
        if !stalled {
            self.run_due_jobs(id)?;
        }
        let Some(Some(p)) = self.procs.get_mut(&id) else {
            return Ok(());
        };
        if !stalled && p.sync_at.is_some_and(|t| t <= self.now) {
            p.sync_at = None;
            p.worker
                .end_batch()
                .map_err(|e| Violation(format!("member {id}'s storage failed: {e}")))?;
        }
        let slow_reads = self.slow_reads.get(&id).copied().unwrap_or(0);
        while let Ok(report) = p.reports.try_recv() {
            let work = match read_ms(&report) {
                Some(ms) => ms + slow_reads,
                None => 0,
            };
            // The disk was busy reading: the jobs queued after wait for it.
            for (done, _) in p.disk.iter_mut() {
                *done += work;
            }
            let after = p.reported.back().map_or(self.now, |(t, _)| *t);
            p.reported.push_back((after.max(self.now) + work, report));
        }
        let due = p
            .reported
            .iter()
            .take_while(|(t, _)| *t <= self.now)
            .count();
        let reports: Vec<StorageReport> = p.reported.drain(..due).map(|(_, r)| r).collect();
        for report in reports {
            self.with_member(id, |m, node, now, io| {
                m.handle_report(node, now, io, report)
            })?;
        }
        Ok(())
    }

    /// Runs member `id`'s jobs whose time has come, in order, showing each
    /// to the traps just before and just after.
    fn run_due_jobs(&mut self, id: ServerId) -> Result<(), Violation> {
        loop {
            let Some(Some(p)) = self.procs.get_mut(&id) else {
                return Ok(());
            };
            let due = p.disk.front().is_some_and(|(t, _)| *t <= self.now);
            let Some((_, job)) = p.disk.pop_front_if(|_| due) else {
                return Ok(());
            };
            let kind = JobKind::of(&job);
            self.spring(&Moment::BeforeJob {
                member: id,
                job: kind,
            });
            self.run_job(id, job)?;
            if self.snapshot_to_check(kind) {
                self.check_snapshot(id)?;
            }
            self.spring(&Moment::AfterJob {
                member: id,
                job: kind,
            });
        }
    }

    /// Every SNAP installed is checked, and every fourth local snapshot (a
    /// member takes one each 40 txns, and each check rebuilds a tree).
    fn snapshot_to_check(&mut self, kind: JobKind) -> bool {
        match kind {
            JobKind::Install(..) => true,
            JobKind::Snapshot(_) => {
                self.local_snapshots += 1;
                self.local_snapshots.is_multiple_of(4)
            }
            _ => false,
        }
    }

    /// A snapshot just saved or installed on member `id`'s disk, with the
    /// log replayed over it (what a restart now would recover), equals the
    /// tree any member had at that zxid: a snapshot of a mix of trees, or
    /// a fuzzy image whose replay goes wrong, shows here.
    fn check_snapshot(&mut self, id: ServerId) -> Result<(), Violation> {
        if self.damaged.contains_key(&id) {
            // A tree a script damaged may be saved so until a SNAP replaces it.
            return Ok(());
        }
        let disk = self.disks[&id].power_cut_copy();
        let tree = recovery::rebuild(&disk)
            .map_err(|e| Violation(format!("member {id} cannot recover its disk: {e}")))?;
        let fuzzy = recovery::fuzzy_through(&disk, &tree)
            .map_err(|e| Violation(format!("member {id} cannot read its disk: {e}")))?;
        let (zxid, digest) = (tree.last_zxid(), tree.digest());
        match self.digests.get(&zxid) {
            // No exact tree was seen there (yet), or this one may be fuzzy.
            None => Ok(()),
            Some(_) if zxid < fuzzy => Ok(()),
            Some(seen) if *seen != digest => Err(Violation(format!(
                "snapshot: member {id}'s disk recovers a tree at {zxid} that differs from another's"
            ))),
            Some(_) => {
                self.counts.snapshots_checked += 1;
                Ok(())
            }
        }
    }

    /// Runs one of member `id`'s jobs (if it is still up), or fails it and
    /// ends the member if its disk is failing.
    fn run_job(&mut self, id: ServerId, job: StorageJob) -> Result<(), Violation> {
        let Some(Some(p)) = self.procs.get_mut(&id) else {
            return Ok(());
        };
        if self.failing.remove(&id) {
            // The failed write may or may not have reached the disk.
            if self.rng.below(2) == 0 {
                let _ = p.worker.run(job);
            }
            self.counts.disk_errors += 1;
            self.trace_line(format_args!("member {id}: disk write failed (EIO)"));
            self.crash(id, true);
            return Ok(());
        }
        p.worker
            .run(job)
            .map_err(|e| Violation(format!("member {id}'s storage failed: {e}")))?;
        if p.worker.has_unsynced() && p.sync_at.is_none() {
            p.sync_at = Some(self.now + 1 + self.rng.below(4));
        }
        Ok(())
    }

    /// Member `id`'s process ends (a crash, a power cut, an exit after a
    /// failed write): its connections break, what its disk had not synced
    /// is lost (`torn`: a random prefix of it is kept), and it restarts later.
    pub(super) fn crash(&mut self, id: ServerId, torn: bool) {
        let keep = if torn { self.rng.below(4) as usize } else { 0 };
        if self.crash_keeping(id, keep) > 0 {
            self.counts.torn_writes += 1;
        }
    }

    /// Member `id`'s process ends and the first `keep` of its unsynced
    /// appends survive it; returns how many did.
    pub(super) fn crash_keeping(&mut self, id: ServerId, keep: usize) -> usize {
        match keep {
            0 => self.trace_line(format_args!("member {id}: CRASH")),
            usize::MAX => self.trace_line(format_args!("member {id}: KILLED (its writes kept)")),
            n => self.trace_line(format_args!("member {id}: CRASH (torn, up to {n} kept)")),
        }
        self.counts.crashes += 1;
        self.paused.remove(&id);
        self.busy.remove(&id);
        self.failing.remove(&id);
        if let Some(Some(p)) = self.procs.insert(id, None) {
            for (peer, conn) in p.links.quorum {
                self.kill_conn(conn);
                let delay = 1 + self.rng.below(20);
                self.queue(id, peer, Wire::Closed { conn }, delay);
            }
        }
        let kept = self.disks[&id].crash_keeping(keep);
        self.in_flight.retain(|_, (from, to, w)| {
            *to != id && (*from != id || matches!(w, Wire::Closed { .. }))
        });
        self.link_clock.retain(|(_, to), _| *to != id);
        self.held.retain(|(from, to), _| *from != id && *to != id);
        self.last_notification.retain(|(from, _), _| *from != id);
        self.decided.remove(&id);
        self.clients.member_gone(id, self.now, &mut self.rng);
        self.restarts
            .insert(id, self.now + 200 + self.rng.below(2_000));
        kept
    }
}
