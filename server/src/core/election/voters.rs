//! Who votes in an election: the voters of the configuration in effect
//! and, while this member has a reconfig logged that is not in effect
//! (ZooKeeper's last-seen configuration), the voters of that one too. A
//! decision then needs a quorum of each (ZooKeeper's `getVoteTracker`), and
//! the voters of either are heard and told (`validVoter`).

use super::{Election, ServerId};
use std::collections::BTreeSet;

impl Election {
    /// The voters of the newest reconfig this member logged beyond the
    /// configuration in effect; None when there is none. Set before each
    /// round, cleared when a configuration takes effect.
    pub fn set_next_voters(&mut self, next: Option<BTreeSet<ServerId>>) {
        self.next_voters = next.filter(|n| *n != self.config.voters);
    }

    pub(super) fn is_voter(&self, id: ServerId) -> bool {
        self.config.voters.contains(&id)
            || self.next_voters.as_ref().is_some_and(|n| n.contains(&id))
    }

    /// A majority of the voters (`QuorumMaj`), and of the next ones too.
    pub(super) fn is_quorum(&self, members: impl Iterator<Item = ServerId>) -> bool {
        let members: BTreeSet<ServerId> = members.collect();
        let majority_of =
            |voters: &BTreeSet<ServerId>| members.intersection(voters).count() > voters.len() / 2;
        majority_of(&self.config.voters) && self.next_voters.as_ref().is_none_or(majority_of)
    }

    /// The voters of either configuration.
    pub(super) fn all_voters(&self) -> BTreeSet<ServerId> {
        let next = self.next_voters.iter().flatten();
        self.config.voters.iter().chain(next).copied().collect()
    }
}
