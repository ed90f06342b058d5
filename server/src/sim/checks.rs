//! The invariants a whole-member run checks after every simulated
//! millisecond (epoch files in order, prefix consistency, visibility, one
//! leader per epoch holding every acknowledged create), on every
//! election notification a member sends (no stale LEADING or FOLLOWING),
//! on every election decision (a quorum said it) and at its end
//! (convergence).

use super::{Process, SyncKind, Violation, WholeSim, Wire};
use crate::core::election::{Notification, ServerId, ServerState, Vote};
use crate::core::Mode;
use std::collections::BTreeSet;
use zkd_protocol::Zxid;
use zkd_storage::{DataTree, EpochStore};

impl WholeSim {
    /// A disk's currentEpoch never passes its acceptedEpoch (a member takes
    /// an epoch as current only after it accepted it).
    pub(super) fn check_epochs(&self, id: ServerId) -> Result<(), Violation> {
        let disk = &self.disks[&id];
        let accepted = disk.accepted_epoch().unwrap_or_default();
        let current = disk.current_epoch().unwrap_or_default();
        if accepted < current {
            return Err(Violation(format!(
                "epoch files: member {id} has acceptedEpoch {accepted} < currentEpoch {current}"
            )));
        }
        Ok(())
    }

    /// Invariants of member `id` after a step.
    pub(super) fn check_member(&mut self, id: ServerId) -> Result<(), Violation> {
        let Some(Some(p)) = self.procs.get(&id) else {
            return Ok(());
        };
        let tree = p.node.tree();
        let (zxid, digest) = (tree.last_zxid(), tree.digest());
        if let Some(&since) = self.damaged.get(&id) {
            let snap = self
                .syncs
                .iter()
                .any(|(at, to, kind, _)| *at >= since && *to == id && *kind == SyncKind::Snap);
            // A leader's tree is the reference, damaged or not: a damaged
            // member that leads is checked as any other.
            let resynced = snap && p.node.mode() == Mode::Following;
            if !resynced && p.node.mode() != Mode::Leading {
                return Ok(());
            }
            self.damaged.remove(&id);
        }
        // A tree from a fuzzy image holds later txns until it reaches them
        // (also one recovered from that image: the node must know).
        let exact = zxid >= p.node.fuzzy_through();
        if let Some(seen) = exact.then(|| self.digests.insert(zxid, digest)).flatten() {
            if seen != digest {
                return Err(Violation(format!(
                    "prefix consistency: member {id}'s tree at {zxid} differs from another's"
                )));
            }
        }
        let leading = (p.node.mode() == Mode::Leading)
            .then(|| p.member().leading_epoch())
            .flatten();
        if let Some(epoch) = leading {
            self.check_leader(id, epoch)?;
        }
        self.check_visible(id, zxid)
    }

    /// Memory is never ahead of disk, for the ensemble: whatever a client
    /// can read is durable on a quorum. (A member's own disk may lag its
    /// tree: a COMMIT, a quorum's ACKs, can come before its own fsync.)
    fn check_visible(&mut self, id: ServerId, zxid: Zxid) -> Result<(), Violation> {
        if !self.serving(id) || zxid == Zxid::ZERO || self.quorum_durable.contains(&zxid) {
            return Ok(());
        }
        let holders: Vec<ServerId> = self
            .disks
            .iter()
            .filter(|(_, disk)| disk.holds_durably(zxid))
            .map(|(id, _)| *id)
            .collect();
        if !self.committed_by(id).is_quorum(&holders) {
            return Err(Violation(format!(
                "visibility: member {id} serves a tree at {zxid}, durable only on {holders:?}\n{}",
                self.members_now()
            )));
        }
        self.quorum_durable.insert(zxid);
        Ok(())
    }

    /// One established leader per epoch; a new one holds every write
    /// acknowledged before it.
    fn check_leader(&mut self, id: ServerId, epoch: u32) -> Result<(), Violation> {
        match self.leaders.insert(epoch, id) {
            Some(other) if other != id => Err(Violation(format!(
                "leadership: members {other} and {id} both established in epoch {epoch}"
            ))),
            Some(_) => Ok(()),
            None => {
                let Some(Some(p)) = self.procs.get(&id) else {
                    return Ok(());
                };
                let who = format!("leader {id} of epoch {epoch}");
                self.clients.check_holds_acked(p.node.tree(), &who)
            }
        }
    }

    /// Whether every member serves one tree (which then is returned). A
    /// server the leader's configuration leaves out (removed by reconfig
    /// while it was away, and not added back) learns nothing, and is not
    /// asked to serve.
    pub(super) fn converged(&self) -> Result<&DataTree, Violation> {
        let mut trees = Vec::new();
        let leading = self
            .procs
            .values()
            .flatten()
            .find(|p| p.node.mode() == Mode::Leading);
        let left_out = |id: &ServerId| leading.is_some_and(|l| !l.member().members().contains(*id));
        for (id, p) in &self.procs {
            if left_out(id) {
                continue;
            }
            let Some(p) = p else {
                return Err(Violation(format!(
                    "liveness: member {id} is down at the end"
                )));
            };
            if !matches!(
                p.node.mode(),
                Mode::Leading | Mode::Following | Mode::Observing
            ) {
                return Err(Violation(format!(
                    "liveness: member {id} is not serving at the end ({})\n{}",
                    p.member().describe(),
                    self.members_now()
                )));
            }
            trees.push((*id, p.node.tree()));
        }
        let key = |t: &DataTree| (t.last_zxid(), t.digest());
        if trees.windows(2).any(|w| key(w[0].1) != key(w[1].1)) {
            let ends: Vec<_> = trees.iter().map(|(id, t)| (*id, key(t))).collect();
            return Err(Violation(format!(
                "convergence: the members end at {ends:?}\n{}",
                self.members_now()
            )));
        }
        trees
            .first()
            .map(|(_, t)| *t)
            .ok_or_else(|| Violation("no members".into()))
    }
}

impl WholeSim {
    /// Each member's role, the members it counts, its configuration and
    /// its tree's zxid: what a failure report needs to be read.
    fn members_now(&self) -> String {
        let line = |(id, p): (&ServerId, &Option<Process>)| match p {
            None => format!("  {id}: down"),
            Some(p) => format!(
                "  {id}: {}, voters {:?}, configuration {:x}, tree at {}",
                p.member().describe(),
                p.member().members().voters,
                p.node.ensemble_config().map_or(0, |c| c.version),
                p.node.tree().last_zxid()
            ),
        };
        self.procs.iter().map(line).collect::<Vec<_>>().join("\n")
    }
}

/// A member's election decision already checked (leader and round), and
/// how many rounds its election had decided by the shortcut then.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Decided {
    decision: Option<(ServerId, u64)>,
    shortcuts: u64,
}

impl WholeSim {
    /// A member decides only what a quorum said: a majority of the voters
    /// (observers count for nothing) sent a notification voting for the decided vote in its round, or
    /// reporting that they follow or lead its leader in its epoch. However
    /// the finalize wait is cut short, this must hold.
    pub(super) fn check_decision(&mut self, id: ServerId) -> Result<(), Violation> {
        let Some(Some(p)) = self.procs.get(&id) else {
            return Ok(());
        };
        let (decision, shortcuts) = p.member().election_decision();
        let seen = self.decided.entry(id).or_default();
        let new = decision.map(|(vote, round)| (vote.leader, round));
        let fresh = new.is_some() && new != seen.decision;
        seen.decision = new;
        self.counts.shortcuts += shortcuts.saturating_sub(seen.shortcuts);
        seen.shortcuts = shortcuts;
        let Some((vote, round)) = decision.filter(|_| fresh) else {
            return Ok(());
        };
        self.counts.decisions += 1;
        let backers: BTreeSet<ServerId> = self
            .announced
            .iter()
            .filter(|n| backs(n, &vote, round))
            .map(|n| n.sender)
            .collect();
        if !self.counted_by(id).is_quorum(&backers) {
            return Err(Violation(format!(
                "election: member {id} decided on leader {} in round {round} with only {backers:?} for it",
                vote.leader
            )));
        }
        Ok(())
    }
}

/// Whether `n` says its sender is for `vote` decided in `round`: the same
/// vote in that round, or following or leading that leader in its epoch.
fn backs(n: &Notification, vote: &Vote, round: u64) -> bool {
    n.agrees_with(vote, round, ServerState::Looking)
        || (n.state != ServerState::Looking
            && n.vote.leader == vote.leader
            && n.vote.peer_epoch == vote.peer_epoch)
}

/// Finding 8: a member whose role ended answers LOOKING until its next
/// round, so no looker follows a leader that is gone.
pub(super) fn check_answers(id: ServerId, p: &Process) -> Result<(), Violation> {
    if !p.member().draining() {
        return Ok(());
    }
    for (to, wire) in &p.links.outbox {
        if let Wire::Notification(n) = wire {
            if n.state != ServerState::Looking {
                return Err(Violation(format!(
                    "stale answer: member {id}, its role ended, told member {to} it is {:?}",
                    n.state
                )));
            }
        }
    }
    Ok(())
}
