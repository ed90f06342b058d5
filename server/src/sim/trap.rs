//! Scripts' traps in whole-member runs: the moments a trap sees (each
//! storage job just before and just after it runs, each Zab message a
//! member received and handled, a SNAP received whole) and what it does
//! then, at once, inside the step.

use super::WholeSim;
use crate::core::election::ServerId;
use crate::core::storage_job::StorageJob;
use crate::core::zab::ZabMessage;
use zkd_protocol::Zxid;

/// A storage job, as a trap sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobKind {
    /// An append (written by the job, synced when its batch ends).
    Append(Zxid),
    /// A leader's SNAP installed (durable when the job is done): its zxid,
    /// and the last txn it may hold (fuzzy if later).
    Install(Zxid, Zxid),
    Truncate(Zxid),
    /// A local snapshot of the tree at this zxid (saved when the job is done).
    Snapshot(Zxid),
    AcceptedEpoch(u32),
    CurrentEpoch(u32),
    Other,
}

impl JobKind {
    pub fn of(job: &StorageJob) -> JobKind {
        match job {
            StorageJob::Persist { zxid, .. } => JobKind::Append(*zxid),
            StorageJob::InstallSnapshot {
                zxid,
                fuzzy_through,
                ..
            } => JobKind::Install(*zxid, *fuzzy_through),
            StorageJob::Truncate(zxid) => JobKind::Truncate(*zxid),
            StorageJob::SnapshotPiece(piece) if piece.last => JobKind::Snapshot(piece.zxid),
            StorageJob::SetAcceptedEpoch(e) => JobKind::AcceptedEpoch(*e),
            StorageJob::SetCurrentEpoch(e) => JobKind::CurrentEpoch(*e),
            _ => JobKind::Other,
        }
    }
}

/// A moment a script's trap sees.
#[derive(Debug)]
pub enum Moment<'a> {
    BeforeJob {
        member: ServerId,
        job: JobKind,
    },
    AfterJob {
        member: ServerId,
        job: JobKind,
    },
    /// `to` received `message` from `from` and handled it.
    Received {
        from: ServerId,
        to: ServerId,
        message: &'a ZabMessage,
    },
    /// `to` received the last piece of a SNAP from `from` and handled it.
    SnapReceived {
        from: ServerId,
        to: ServerId,
    },
}

/// What a sprung trap does.
#[derive(Clone, Copy, Debug)]
pub enum Action {
    /// Power loss on the member; only the script restarts it.
    Crash(ServerId),
    /// The member's process is killed: what it wrote survives (the page
    /// cache outlives it), synced or not; only the script restarts it.
    Kill(ServerId),
    /// Every link of the member breaks until the script heals them.
    Isolate(ServerId),
    /// The link between the two breaks until the script heals it.
    Cut(ServerId, ServerId),
}

/// A script's trap: asked at every [`Moment`] until it returns an action,
/// which is carried out at once; then it is gone.
pub type Trap = Box<dyn FnMut(&WholeSim, &Moment<'_>) -> Option<Action>>;

impl WholeSim {
    /// Shows `moment` to the armed traps and carries out what they ask.
    pub(super) fn spring(&mut self, moment: &Moment<'_>) {
        if self.traps.is_empty() {
            return;
        }
        let mut traps = std::mem::take(&mut self.traps);
        let mut actions = Vec::new();
        traps.retain_mut(|trap| match trap(self, moment) {
            Some(action) => {
                actions.push(action);
                false
            }
            None => true,
        });
        self.traps.extend(traps);
        for action in actions {
            self.sprung
                .push(format!("{} ms: {action:?} at {moment:?}", self.now));
            self.trace_line(format_args!("trap: {action:?} at {moment:?}"));
            match action {
                Action::Crash(id) => {
                    self.crash(id, false);
                    self.restarts.remove(&id);
                }
                Action::Kill(id) => {
                    self.crash_keeping(id, usize::MAX);
                    self.restarts.remove(&id);
                }
                Action::Cut(a, b) => self.cut_link(a, b),
                Action::Isolate(id) => {
                    let others: Vec<ServerId> =
                        self.procs.keys().copied().filter(|o| *o != id).collect();
                    for other in others {
                        self.cut_link(id, other);
                    }
                }
            }
        }
    }
}
