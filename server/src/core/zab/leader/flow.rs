//! A leader's flow control per follower (issue 35, finding 2): a follower
//! whose link backs up stops being sent live proposals and lags, and once
//! its link drains it catches up from the leader's history, from memory or,
//! past the in-memory window, from the log on disk. So a slow follower (a
//! slow disk, a long SNAP under writes) lags behind and catches up instead
//! of having its link closed at 256 MiB and pulling a whole new SNAP.
//!
//! ```text
//!  live ──queued > high──▶ paused ──queued < low──▶ catching up ──sent = last proposed──▶ live
//!                                                    (a batch per step: window, outstanding, or ReadLog)
//! ```

use super::{Leader, Phase};
use crate::core::election::ServerId;
use crate::core::zab::{LearnerHandler, ZabCommand, ZabMessage};
use crate::failpoints::{active, Failpoint};
use bytes::Bytes;
use zkd_protocol::Zxid;

impl Leader {
    /// Bytes wait on `sid`'s link (its queue, and behind a SNAP to it):
    /// past the high mark it is paused; below the low one, a paused or
    /// lagging follower is sent its next batch.
    pub fn link_queue(&mut self, sid: ServerId, queued: usize) {
        if active(Failpoint::UnpacedFollowers) {
            return;
        }
        let marks = self.flow;
        let Some(h) = self.learners.get_mut(&sid) else {
            return;
        };
        if !h.is_forwarding() {
            return;
        }
        if queued > marks.high && !h.paused {
            tracing::info!(peer = %sid, queued, sent = %h.sent, "leader: a follower's link backed up; it lags");
            h.paused = true;
            h.live = false;
        } else if h.paused && queued < marks.low {
            h.paused = false;
        }
        if !h.paused && !h.live && !h.reading && queued < marks.low {
            self.catch_up(sid);
        }
    }

    /// The followers whose link the driver reports with [`link_queue`](Self::link_queue).
    pub fn forwarding(&self) -> impl Iterator<Item = ServerId> + '_ {
        self.learners
            .values()
            .filter(|h| h.is_forwarding())
            .map(|h| h.sid)
    }

    /// The log's txns after `after` that [`ZabCommand::ReadLog`] asked for
    /// `sid`, in order. Sent on, unless they do not follow what it has (the
    /// log was purged past it): it is dropped, and syncs again.
    pub fn logged_for(&mut self, sid: ServerId, after: Zxid, txns: Vec<(Zxid, Bytes)>) {
        let Some(h) = self.learners.get_mut(&sid) else {
            return;
        };
        if !h.reading || h.sent != after {
            return;
        }
        h.reading = false;
        let gapless = txns
            .first()
            .is_some_and(|(first, _)| follows(after, *first));
        if !gapless {
            tracing::info!(peer = %sid, %after, "leader: a lagging follower's txns left the log; it syncs again");
            return self.drop_learner(sid);
        }
        self.send_batch(sid, txns);
    }

    /// Queues `txn` for every live follower: the others catch up later.
    pub(super) fn forward_proposal(&mut self, zxid: Zxid, txn: &Bytes) {
        for h in self
            .learners
            .values_mut()
            .filter(|h| h.is_forwarding() && h.live && !h.observer)
        {
            h.sent = zxid;
            let message = ZabMessage::Proposal {
                zxid,
                txn: txn.clone(),
            };
            let to = h.sid;
            self.commands.push_back(ZabCommand::Send { to, message });
        }
    }

    /// Queues the committed `txn` as an INFORM for every live observer.
    pub(super) fn inform_observers(&mut self, zxid: Zxid, txn: &Bytes) {
        let live = |h: &&mut LearnerHandler| h.is_forwarding() && h.live && h.observer;
        for h in self.learners.values_mut().filter(live) {
            if zxid > h.sent {
                h.sent = zxid;
                h.commit_sent = zxid;
                let txn = txn.clone();
                let message = ZabMessage::Inform { zxid, txn };
                let to = h.sid;
                self.commands.push_back(ZabCommand::Send { to, message });
            }
        }
    }

    /// Queues COMMIT for every follower that is not paused, never past
    /// what was sent to it (a follower abandons a commit beyond its log).
    pub(super) fn forward_commit(&mut self) {
        let committed = self.last_committed;
        for h in self
            .learners
            .values_mut()
            .filter(|h| h.is_forwarding() && !h.paused && !h.observer)
        {
            let zxid = committed.min(h.sent);
            if zxid > h.commit_sent {
                h.commit_sent = zxid;
                let message = ZabMessage::Commit { zxid, digest: None };
                let to = h.sid;
                self.commands.push_back(ZabCommand::Send { to, message });
            }
        }
    }

    /// The next batch for a lagging follower: from the window or the
    /// outstanding proposals if they reach back to its cursor, else a read
    /// of the log.
    fn catch_up(&mut self, sid: ServerId) {
        let Some((after, observer)) = self.learners.get(&sid).map(|h| (h.sent, h.observer)) else {
            return;
        };
        let target = self.target(observer);
        if after >= target || self.phase != Phase::Broadcast {
            if let Some(h) = self.learners.get_mut(&sid) {
                h.live = true;
            }
            return;
        }
        let batch = self.flow.batch;
        let history = &self.state.history;
        let txns: Vec<(Zxid, Bytes)> = if after >= history.base() {
            let window = history.after(after).take_while(|(z, _)| *z <= target);
            take_bytes(window.cloned(), batch)
        } else if after >= self.last_committed {
            let outstanding = self.outstanding.range(after..).filter(|(z, _)| **z > after);
            take_bytes(outstanding.map(|(z, t)| (*z, t.clone())), batch)
        } else {
            if let Some(h) = self.learners.get_mut(&sid) {
                h.reading = true;
            }
            let max_bytes = batch;
            let read = ZabCommand::ReadLog {
                to: sid,
                after,
                max_bytes,
            };
            return self.commands.push_back(read);
        };
        self.send_batch(sid, txns);
    }

    /// Sends `txns` (the next after `sid`'s cursor), and the COMMIT they
    /// allow; live again once it has every proposal.
    fn send_batch(&mut self, sid: ServerId, txns: Vec<(Zxid, Bytes)>) {
        let target = match self.learners.get(&sid) {
            Some(h) => self.target(h.observer),
            None => return,
        };
        let Some(h) = self.learners.get_mut(&sid) else {
            return;
        };
        // Nothing left after its cursor (the window and the outstanding
        // proposals end at the last one): it has everything.
        let done = txns.is_empty();
        for (zxid, txn) in txns.into_iter().take_while(|(z, _)| *z <= target) {
            h.sent = zxid;
            let message = match h.observer {
                true => ZabMessage::Inform { zxid, txn },
                false => ZabMessage::Proposal { zxid, txn },
            };
            self.commands
                .push_back(ZabCommand::Send { to: sid, message });
        }
        if done || h.sent >= target {
            tracing::info!(peer = %sid, sent = %h.sent, "leader: a lagging follower caught up");
            h.live = true;
        }
        self.forward_commit();
    }
}

impl Leader {
    /// How far a learner's cursor goes: every proposal, or for an observer
    /// every commit.
    fn target(&self, observer: bool) -> Zxid {
        match observer {
            true => self.last_committed,
            false => self.last_proposed,
        }
    }
}

/// Txns from `txns` until `max_bytes` of them (at least one).
fn take_bytes(txns: impl Iterator<Item = (Zxid, Bytes)>, max_bytes: usize) -> Vec<(Zxid, Bytes)> {
    let mut bytes = 0;
    let mut out = Vec::new();
    for (zxid, txn) in txns {
        bytes += txn.len();
        out.push((zxid, txn));
        if bytes >= max_bytes {
            break;
        }
    }
    out
}

/// Whether `next` may directly follow `prev` in a log: the next counter of
/// the same epoch, or the first of a later epoch.
fn follows(prev: Zxid, next: Zxid) -> bool {
    next == prev.next() || (next.epoch() > prev.epoch() && next.counter() <= 1)
}
