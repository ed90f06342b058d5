//! What a member tells about itself: its role for logs, `srvr` and `mntr`,
//! and, to the simulator's checks and scripts, where its election and role
//! stand (with the simulator's settings for its small trees).

use super::*;
use crate::core::zab::ZabState;

/// Where a member stands in its ensemble, as the AdminServer shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemberView {
    /// This member's id.
    pub id: ServerId,
    /// The leader it follows, or itself while it leads; None while looking.
    pub leader: Option<ServerId>,
    /// Its Zab phase.
    pub zab_state: ZabState,
    /// A leader's learners.
    pub followers: Option<LearnerCounts>,
}

/// A leader's learners, as ZooKeeper's leader counts them for `mntr`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LearnerCounts {
    /// Every connected learner, observers included.
    pub learners: usize,
    /// Voting followers that acknowledged NEWLEADER.
    pub synced_followers: usize,
    /// Observers that acknowledged NEWLEADER.
    pub synced_observers: usize,
}

impl Member {
    /// The role's name, for logs and `srvr`.
    pub fn describe(&self) -> String {
        match &self.role {
            Role::Looking => "looking".into(),
            Role::Leading(l) => format!("leading epoch {}", l.epoch()),
            Role::Following(f) if f.is_observer() => format!("observing {}", f.leader()),
            Role::Following(f) => format!("following {}", f.leader()),
        }
    }

    /// The epoch of this member's role: the one it leads, or the current
    /// epoch it follows under; None while looking.
    pub fn epoch(&self) -> Option<Epoch> {
        match &self.role {
            Role::Looking => None,
            Role::Leading(l) => Some(l.epoch()),
            Role::Following(f) => Some(f.current_epoch()),
        }
    }

    /// The epoch this member leads, if it is the leader (established or
    /// not): the simulator holds one established leader per epoch.
    #[cfg(test)]
    pub fn leading_epoch(&self) -> Option<Epoch> {
        match &self.role {
            Role::Leading(l) => Some(l.epoch()),
            _ => None,
        }
    }

    /// Streams SNAPs in chunks of `chunk` bytes (see `SnapSender::with_chunk`).
    #[cfg(test)]
    pub fn pace_snapshots(&mut self, chunk: usize) {
        self.snaps_out = SnapSender::with_chunk(chunk);
    }

    /// Keeps `window` txns in memory instead of [`HISTORY_WINDOW`]: the
    /// simulator's runs are short, and a small window makes its followers
    /// sync by SNAP and catch up from the log as the runtime's do.
    #[cfg(test)]
    pub fn keep_history(&mut self, window: usize) {
        self.history_window = window;
    }

    /// Whether this member leads an epoch it chose but has not established.
    #[cfg(test)]
    pub fn establishing(&self) -> bool {
        matches!(&self.role, Role::Leading(l) if !l.is_established() && l.epoch() > 0)
    }

    /// The election's decision while it stands (vote and round), and how
    /// many rounds the shortcut decided: the simulator checks each decision
    /// against what the members said.
    #[cfg(test)]
    pub fn election_decision(&self) -> (Option<(Vote, u64)>, u64) {
        (self.election.decision(), self.election.shortcuts())
    }

    /// The members this one counts, in its roles and elections: the
    /// simulator checks quorums against them.
    #[cfg(test)]
    pub fn members(&self) -> &Members {
        &self.members
    }

    /// Whether the role ended and the storage queue drains before the next
    /// round (lookers must hear LOOKING from it meanwhile).
    #[cfg(test)]
    pub fn draining(&self) -> bool {
        matches!(self.waiting, Waiting::Drain)
    }

    /// The last zxid this leader sent `follower` before NEWLEADER, while it
    /// syncs or follows.
    #[cfg(test)]
    pub fn sync_point(&self, follower: ServerId) -> Option<Zxid> {
        let Role::Leading(l) = &self.role else {
            return None;
        };
        l.learners()
            .find(|h| h.sid == follower && h.is_forwarding())
            .map(|h| h.sync_point)
    }

    /// The leader this member follows, if it is a follower.
    #[cfg(test)]
    pub fn following(&self) -> Option<ServerId> {
        match &self.role {
            Role::Following(f) => Some(f.leader()),
            _ => None,
        }
    }

    /// Where this member stands, for the AdminServer.
    pub fn view(&self) -> MemberView {
        let (leader, zab_state) = match &self.role {
            Role::Looking => (None, ZabState::Election),
            Role::Leading(l) => (Some(self.id), l.zab_state()),
            Role::Following(f) => (Some(f.leader()), f.zab_state()),
        };
        MemberView {
            id: self.id,
            leader,
            zab_state,
            followers: self.followers(),
        }
    }

    /// Learners the leader has, and how many of each role are synced (mntr).
    pub fn followers(&self) -> Option<LearnerCounts> {
        let Role::Leading(l) = &self.role else {
            return None;
        };
        let synced = l.synced();
        let synced = synced.iter().filter(|s| **s != self.id);
        let observers = synced.clone().filter(|s| self.members.is_observer(**s));
        Some(LearnerCounts {
            learners: l.learners().count(),
            synced_followers: synced.clone().count() - observers.clone().count(),
            synced_observers: observers.count(),
        })
    }
}
