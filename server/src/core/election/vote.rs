//! Votes and notifications of fast leader election, and ZooKeeper's total
//! order on votes (`totalOrderPredicate`): higher peer epoch, then higher
//! zxid, then higher server id.

use crate::core::EnsembleConfig;
use std::cmp::Ordering;
use std::fmt;
use zkd_protocol::Zxid;

/// A member's id: `myid`, the N of `server.N`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ServerId(pub u64);

impl fmt::Display for ServerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A member's role, as election notifications report it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ServerState {
    /// Electing a leader.
    Looking,
    /// Following the vote's leader.
    Following,
    /// Leading.
    Leading,
}

/// A proposal for leader: who, with how much history.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Vote {
    /// The proposed leader.
    pub leader: ServerId,
    /// The proposed leader's last logged zxid.
    pub zxid: Zxid,
    /// The proposed leader's currentEpoch (its last acknowledged NEWLEADER),
    /// compared before the zxid.
    pub peer_epoch: u32,
}

impl Vote {
    /// ZooKeeper's order: the better candidate has seen a later epoch, then
    /// more history, then has the higher id.
    pub fn rank(&self) -> (u32, Zxid, ServerId) {
        (self.peer_epoch, self.zxid, self.leader)
    }

    /// Whether this vote wins over `other`.
    pub fn beats(&self, other: &Vote) -> bool {
        self.rank().cmp(&other.rank()) == Ordering::Greater
    }
}

impl fmt::Display for Vote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "(leader {}, zxid {}, peer epoch {})",
            self.leader, self.zxid, self.peer_epoch
        )
    }
}

/// An election message: the sender's state, its vote and its round.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Notification {
    /// Who sent it.
    pub sender: ServerId,
    /// The sender's state.
    pub state: ServerState,
    /// The sender's current vote (its proposal, or the leader it settled on).
    pub vote: Vote,
    /// The sender's round (`logicalclock`), or, once decided, the round of
    /// its decision.
    pub election_epoch: u64,
    /// The sender's configuration in effect, with reconfig: a looking
    /// member with an older one takes it, as ZooKeeper's do.
    pub config: Option<EnsembleConfig>,
}

impl Notification {
    /// Whether this notification, counted for `vote` in round
    /// `election_epoch`, agrees with it. ZooKeeper's `Vote.equals`: while
    /// anyone is looking, everything must match; reports from members that
    /// settled agree on leader and peer epoch alone (zxid and round can
    /// legitimately differ by then).
    pub fn agrees_with(&self, vote: &Vote, election_epoch: u64, state: ServerState) -> bool {
        if self.state == ServerState::Looking || state == ServerState::Looking {
            self.vote == *vote && self.election_epoch == election_epoch
        } else {
            self.vote.leader == vote.leader && self.vote.peer_epoch == vote.peer_epoch
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vote(leader: u64, zxid: i64, peer_epoch: u32) -> Vote {
        Vote {
            leader: ServerId(leader),
            zxid: Zxid(zxid),
            peer_epoch,
        }
    }

    #[test]
    fn epoch_then_zxid_then_id() {
        assert!(vote(1, 0, 2).beats(&vote(3, 100, 1)), "epoch first");
        assert!(vote(1, 101, 1).beats(&vote(3, 100, 1)), "then zxid");
        assert!(vote(3, 100, 1).beats(&vote(1, 100, 1)), "then id");
        assert!(!vote(3, 100, 1).beats(&vote(3, 100, 1)), "not itself");
    }

    #[test]
    fn settled_reports_agree_on_leader_and_epoch_only() {
        let settled = Notification {
            sender: ServerId(2),
            state: ServerState::Following,
            vote: vote(3, 5, 2),
            election_epoch: 7,
            config: None,
        };
        assert!(settled.agrees_with(&vote(3, 99, 2), 1, ServerState::Leading));
        assert!(!settled.agrees_with(&vote(3, 5, 1), 7, ServerState::Leading));
        assert!(!settled.agrees_with(&vote(3, 99, 2), 7, ServerState::Looking));
    }
}
