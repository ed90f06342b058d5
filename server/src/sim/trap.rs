//! Scripts' traps: the moments a trap sees, the actions it takes, and the
//! syncs a member received, which scripts check (see `scenario`).

use super::member::Wire;
use super::Sim;
use crate::core::election::ServerId;
use crate::core::zab::{SnapshotSource, StorageOp, ZabMessage};
use zkd_protocol::Zxid;

/// A moment a script's trap sees (see `scenario::Scenario::at`): each
/// storage operation a member runs, just before and just after it, and each
/// message a member received and handled (its replies already on their way).
#[derive(Debug)]
pub(super) enum Moment<'a> {
    BeforeStorage {
        member: ServerId,
        op: &'a StorageOp,
    },
    AfterStorage {
        member: ServerId,
        op: &'a StorageOp,
    },
    Received {
        from: ServerId,
        to: ServerId,
        wire: &'a Wire,
    },
}

/// What a sprung trap does, at once, inside the step.
#[derive(Clone, Copy, Debug)]
pub(super) enum Action {
    /// Power loss on the member; only the script restarts it.
    Crash(ServerId),
    /// Breaks the link between two members, as a partition does.
    Cut(ServerId, ServerId),
}

/// A script's trap: asked at every [`Moment`] until it returns an action,
/// which is carried out at once; then it is gone.
pub(super) type Trap = Box<dyn FnMut(&Sim, &Moment<'_>) -> Option<Action>>;

/// The way a leader began a follower's sync, as the follower received it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum SyncKind {
    Diff,
    Trunc,
    Snap,
}

/// A DIFF, TRUNC or SNAP a member received, for scripts to check that the
/// sync they aimed at happened.
#[derive(Clone, Copy, Debug)]
pub(super) struct SyncSeen {
    pub(super) at_ms: u64,
    pub(super) follower: ServerId,
    pub(super) kind: SyncKind,
    pub(super) zxid: Zxid,
}

impl Sim {
    pub(super) fn note_sync(&mut self, follower: ServerId, wire: &Wire) {
        if let Some((kind, zxid)) = sync_kind(wire) {
            self.syncs.push(SyncSeen {
                at_ms: self.now,
                follower,
                kind,
                zxid,
            });
        }
    }

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
        self.traps = traps;
        for action in actions {
            let line = format!("{} ms: {} -> {action:?}", self.now, describe(moment));
            if self.trace {
                eprintln!("{:>6} ms  trap: {line}", self.now);
            }
            self.sprung.push(line);
            match action {
                Action::Crash(id) => {
                    if matches!(self.members.get(&id), Some(Some(_))) {
                        self.crash(id);
                        self.restarts.remove(&id);
                    }
                }
                Action::Cut(a, b) => self.cut_link(a, b),
            }
        }
    }
}

/// The sync a message begins, if it begins one.
pub(super) fn sync_kind(wire: &Wire) -> Option<(SyncKind, Zxid)> {
    match wire {
        Wire::Zab(ZabMessage::Diff { zxid }) => Some((SyncKind::Diff, *zxid)),
        Wire::Zab(ZabMessage::Trunc { zxid }) => Some((SyncKind::Trunc, *zxid)),
        Wire::Zab(ZabMessage::Snap { zxid, .. }) => Some((SyncKind::Snap, *zxid)),
        _ => None,
    }
}

/// A storage operation, briefly (without txns and images).
fn op_line(op: &StorageOp) -> String {
    match op {
        StorageOp::Append { zxid, .. } => format!("Append {zxid}"),
        StorageOp::InstallSnapshot { zxid, .. } => format!("InstallSnapshot {zxid}"),
        other => format!("{other:?}"),
    }
}

/// A trap's moment, briefly.
fn describe(moment: &Moment<'_>) -> String {
    match moment {
        Moment::BeforeStorage { member, op } => format!("member {member} about to {}", op_line(op)),
        Moment::AfterStorage { member, op } => format!("member {member} did {}", op_line(op)),
        Moment::Received { from, to, wire } => {
            let text = match wire {
                Wire::Zab(ZabMessage::Snap {
                    zxid,
                    image: SnapshotSource::Whole(image),
                    ..
                }) => format!("Snap {zxid} ({} bytes)", image.len()),
                Wire::Zab(m) => format!("{m:?}"),
                Wire::Election(n) => format!("{n:?}"),
            };
            format!(
                "member {to} got from {from}: {}",
                &text[..text.len().min(90)]
            )
        }
    }
}
