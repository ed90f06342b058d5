//! Fast leader election (ZooKeeper's `FastLeaderElection.lookForLeader` and
//! its receiver thread) as a pure state machine.
//!
//! ```text
//! look(now, own vote) ──▶ LOOKING ──notifications──▶ quorum for the proposal
//!                            ▲  │                        │ finalize wait, no better vote
//!                            │  └─ settled reports ──────┤ (a quorum follows a leader that says LEADING)
//!                            │                           ▼
//!                            └──────── look() ──── LEADING / FOLLOWING (answers lookers)
//! ```
//!
//! Events go in (`handle_notification`, `handle_timeout`); notifications to
//! send come out of `drain_commands`, the decision out of `take_outcome`.
//! Time is a parameter: the finalize wait and the re-send backoff are
//! deadlines reported by `poll_timeout`. Our own notifications are delivered
//! to ourselves at once, as ZooKeeper loops them back.
//!
//! **The shortcut.** The finalize wait exists for a better vote still on its
//! way. Once a quorum agrees and every other voter has either voted the same
//! in this round or cannot answer at all (`peer_unreachable`: its address
//! refused our connection), no better vote can come: each looker's vote in a
//! round is at least its own, so the proposal is the best of every member
//! that can speak. The decision is then taken at once. The quorum stays
//! required; an unreachable peer is never counted as a vote.
//!
//! **Standing aside.** A member whose tree was found diverged from a leader's
//! must not lead until a leader's SNAP replaced it (issue 35, finding 4). It
//! cannot simply drop out: its log may hold committed txns that the rest of a
//! quorum lacks. So it proposes nobody (as ZooKeeper's observers do) and backs
//! only a candidate whose history is at least its own: it never leads, and its
//! vote never helps elect a leader that would take back a txn it logged. If no
//! such candidate is up, no quorum forms without one, which is the price of
//! not serving a tree known to be wrong.
//!
//! **Observers.** A member that is not a voter proposes nobody too. It sends
//! its notifications to the voters and follows their answers (their votes,
//! or who leads). Nobody counts its vote, and it never leads.

mod vote;
mod voters;

pub use vote::{Notification, ServerId, ServerState, Vote};

use crate::core::EnsembleConfig;
use crate::failpoints::{active, Failpoint};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use zkd_protocol::Zxid;

/// Settings of one member's election.
#[derive(Clone, Debug)]
pub struct ElectionConfig {
    /// This member.
    pub my_id: ServerId,
    /// Every voting member, this one included.
    pub voters: BTreeSet<ServerId>,
    /// How long a quorum for the proposal must go unchallenged before it is
    /// decided, and the first re-send interval (ZooKeeper: 200 ms).
    pub finalize_wait_ms: u64,
    /// The re-send interval doubles up to this while nothing arrives.
    pub max_notification_interval_ms: u64,
}

/// What the election asks the runtime to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ElectionCommand {
    /// Send `notification` to `to`. Only the newest unsent one per peer
    /// matters, as in ZooKeeper's send queues of capacity one.
    Send {
        to: ServerId,
        notification: Notification,
    },
}

/// A decided election.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// `Leading` or `Following`.
    pub state: ServerState,
    /// The vote decided on.
    pub vote: Vote,
    /// The round it was decided in.
    pub election_epoch: u64,
}

/// One member's fast leader election.
#[derive(Debug)]
pub struct Election {
    config: ElectionConfig,
    /// The vote this member starts each round with: itself, its last logged
    /// zxid and its currentEpoch.
    own: Vote,
    /// `logicalclock`: the round, in memory only.
    logical_clock: u64,
    state: ServerState,
    /// The proposal while looking; the decided vote after.
    vote: Vote,
    /// The round `vote` was decided in, which replies to lookers carry.
    vote_epoch: u64,
    /// Votes of this round (`recvset`).
    received: BTreeMap<ServerId, Notification>,
    /// Reports from settled members of any round (`outofelection`).
    out_of_election: BTreeMap<ServerId, Notification>,
    /// A quorum backs the proposal: decide at this time unless a better vote comes.
    finalize_at: Option<u64>,
    resend_at: Option<u64>,
    resend_interval_ms: u64,
    commands: VecDeque<ElectionCommand>,
    outcome: Option<Outcome>,
    /// The role ended and no round has started yet (the member drains its
    /// storage first): lookers hear LOOKING with this member's own vote,
    /// never the leader it no longer follows, and nothing is counted.
    standing_down: bool,
    /// The latest vote of each looker heard while standing down: counted
    /// when the next round starts, as ZooKeeper's queued notifications are
    /// (a looker already in that round does not send its vote again soon).
    held: BTreeMap<ServerId, Notification>,
    /// Peers that refused our connection and have not been heard from since:
    /// they cannot answer, so the finalize wait need not wait for them.
    unreachable: BTreeSet<ServerId>,
    /// Rounds decided by the shortcut.
    shortcuts: u64,
    /// The member stands aside (see the module doc): it proposes nobody.
    aside: bool,
    /// The last round in which it declined to back a candidate.
    refused_in_round: u64,
    /// The configuration in effect, sent with every notification when
    /// reconfig is enabled (None otherwise).
    ensemble: Option<EnsembleConfig>,
    /// The voters of a reconfig logged and not in effect (`voters`).
    next_voters: Option<BTreeSet<ServerId>>,
}

/// The proposal of a member that stands aside: no member has id 0, so
/// peers count it for nobody and answer with their own vote.
const NOBODY: Vote = Vote {
    leader: ServerId(0),
    zxid: Zxid::ZERO,
    peer_epoch: 0,
};

impl Election {
    /// A member that has not started looking yet; `own` is its vote for itself.
    pub fn new(config: ElectionConfig, own: Vote) -> Election {
        Election {
            resend_interval_ms: config.finalize_wait_ms,
            config,
            own,
            logical_clock: 0,
            state: ServerState::Looking,
            vote: own,
            vote_epoch: 0,
            received: BTreeMap::new(),
            out_of_election: BTreeMap::new(),
            finalize_at: None,
            resend_at: None,
            commands: VecDeque::new(),
            outcome: None,
            standing_down: false,
            held: BTreeMap::new(),
            unreachable: BTreeSet::new(),
            shortcuts: 0,
            aside: false,
            refused_in_round: 0,
            ensemble: None,
            next_voters: None,
        }
    }

    /// Whether the next rounds stand aside (see the module doc); set before
    /// [`look`](Self::look).
    pub fn stand_aside(&mut self, aside: bool) {
        if aside != self.aside {
            tracing::info!(me = %self.config.my_id, aside, "election: standing aside changed");
        }
        self.aside = aside;
    }

    /// The member's role ended; until the next [`look`](Self::look) it
    /// answers as a looker with its own last vote, so no looker is sent to
    /// a leader that is gone, and it counts no votes yet (lookers' votes
    /// are held for the next round).
    pub fn stand_down(&mut self) {
        self.state = ServerState::Looking;
        self.vote = self.opening();
        self.standing_down = true;
        self.held.clear();
        self.received.clear();
        self.out_of_election.clear();
        self.finalize_at = None;
        self.resend_at = None;
        self.outcome = None;
    }

    /// Starts a new round with `own` (this member, its last logged zxid and
    /// its currentEpoch), as `lookForLeader` does on entry.
    pub fn look(&mut self, now_ms: u64, own: Vote) {
        self.standing_down = false;
        self.own = own;
        self.logical_clock += 1;
        self.state = ServerState::Looking;
        self.vote = self.opening();
        self.received.clear();
        self.out_of_election.clear();
        self.finalize_at = None;
        self.outcome = None;
        self.resend_interval_ms = self.config.finalize_wait_ms;
        self.resend_at = Some(now_ms + self.resend_interval_ms);
        self.broadcast(now_ms);
        for n in std::mem::take(&mut self.held).into_values() {
            self.handle_notification(now_ms, n);
        }
    }

    /// `peer` refused our connection: nothing listens at its address, so it
    /// cannot vote until it is heard from again. A round whose quorum waits
    /// only for such peers is decided at once.
    pub fn peer_unreachable(&mut self, peer: ServerId) {
        if peer == self.config.my_id || !self.is_voter(peer) {
            return;
        }
        if self.unreachable.insert(peer) {
            tracing::debug!(me = %self.config.my_id, %peer, "election: peer unreachable");
        }
        self.check_shortcut();
    }

    /// Feeds a notification from a peer.
    pub fn handle_notification(&mut self, now_ms: u64, n: Notification) {
        self.unreachable.remove(&n.sender);
        if !self.is_voter(n.sender) || !self.is_voter(n.vote.leader) {
            // ZooKeeper answers a non-voter with its current vote and counts nothing.
            return self.send(n.sender, self.notification());
        }
        if self.standing_down {
            if n.state == ServerState::Looking {
                self.send(n.sender, self.notification());
                self.held.insert(n.sender, n);
            }
            return;
        }
        if self.state != ServerState::Looking {
            // Settled: tell a looker who leads, with the round of that decision.
            if n.state == ServerState::Looking {
                self.send(n.sender, self.notification());
            }
            return;
        }
        if n.state == ServerState::Looking && n.election_epoch < self.logical_clock {
            // A looker behind us: the receiver thread answers, the round ignores it.
            return self.send(n.sender, self.notification());
        }
        // ZooKeeper's poll returned a message: the re-send timer starts over.
        self.resend_at = Some(now_ms + self.resend_interval_ms);
        if self.finalize_at.is_some() {
            if !self.adopts(n.vote, self.vote) {
                // While finalizing, a vote that changes nothing starts the
                // wait over; one of this round is kept for the shortcut.
                self.finalize_at = Some(now_ms + self.config.finalize_wait_ms);
                if n.state == ServerState::Looking && n.election_epoch == self.logical_clock {
                    self.received.insert(n.sender, n);
                    self.check_shortcut();
                }
                return;
            }
            self.finalize_at = None;
        }
        match n.state {
            ServerState::Looking => self.on_looking(now_ms, n),
            ServerState::Following | ServerState::Leading => self.on_settled(n),
        }
    }

    /// Decides or re-sends when their time has come.
    pub fn handle_timeout(&mut self, now_ms: u64) {
        if self.state != ServerState::Looking || self.standing_down {
            return;
        }
        if self.finalize_at.is_some_and(|at| now_ms >= at) {
            return self.finalize();
        }
        if self.resend_at.is_some_and(|at| now_ms >= at) {
            // Nothing heard for a while: say it again, and wait longer next time.
            self.resend_interval_ms =
                (self.resend_interval_ms * 2).min(self.config.max_notification_interval_ms);
            self.resend_at = Some(now_ms + self.resend_interval_ms);
            self.broadcast(now_ms);
        }
    }

    /// When `handle_timeout` next has work.
    pub fn poll_timeout(&self) -> Option<u64> {
        if self.state != ServerState::Looking || self.standing_down {
            return None;
        }
        match (self.finalize_at, self.resend_at) {
            (Some(f), Some(r)) => Some(f.min(r)),
            (f, r) => f.or(r),
        }
    }

    /// Notifications to send, in order.
    pub fn drain_commands(&mut self) -> impl Iterator<Item = ElectionCommand> + '_ {
        self.commands.drain(..)
    }

    /// The decision, once, when the election has one.
    pub fn take_outcome(&mut self) -> Option<Outcome> {
        self.outcome.take()
    }

    /// After the new leader is established its epoch is the peer epoch that
    /// members report to lookers (ZooKeeper's `updateElectionVote`).
    pub fn update_peer_epoch(&mut self, epoch: u32) {
        self.vote.peer_epoch = epoch;
    }

    /// This member's state.
    pub fn state(&self) -> ServerState {
        self.state
    }

    /// The proposal while looking, the decided vote after.
    pub fn vote(&self) -> Vote {
        self.vote
    }

    /// The current round.
    pub fn logical_clock(&self) -> u64 {
        self.logical_clock
    }

    /// The decided vote and the round it was decided in, once decided.
    pub fn decision(&self) -> Option<(Vote, u64)> {
        (self.state != ServerState::Looking).then_some((self.vote, self.vote_epoch))
    }

    /// Rounds this member decided by the shortcut, without the full finalize wait.
    pub fn shortcuts(&self) -> u64 {
        self.shortcuts
    }

    /// The proposal a round starts from: this member, or nobody when it
    /// stands aside or is an observer (ZooKeeper's `getInitId`: a voter of
    /// the configuration in effect).
    fn opening(&self) -> Vote {
        if self.aside || !self.config.voters.contains(&self.config.my_id) {
            NOBODY
        } else {
            self.own
        }
    }

    /// Whether `candidate` replaces `current` as the proposal: it ranks
    /// higher, and a member standing aside backs only another member with
    /// at least its own history (an observer's backing counts for nothing).
    fn adopts(&mut self, candidate: Vote, current: Vote) -> bool {
        let backed = !self.aside
            || !self.is_voter(self.config.my_id)
            || (candidate.leader != self.config.my_id
                && (candidate.peer_epoch, candidate.zxid) >= (self.own.peer_epoch, self.own.zxid));
        if !backed && self.refused_in_round != self.logical_clock {
            // Once a round: an operator sees why no leader comes.
            self.refused_in_round = self.logical_clock;
            tracing::warn!(
                me = %self.config.my_id, candidate = %candidate, own = %self.own,
                "election: standing aside (this tree diverged), backing no member with less history"
            );
        }
        backed && candidate.beats(&current)
    }

    fn on_looking(&mut self, now_ms: u64, n: Notification) {
        if n.election_epoch > self.logical_clock {
            // A later round: join it, starting again from the better of its
            // vote and our own.
            self.logical_clock = n.election_epoch;
            self.received.clear();
            let opening = self.opening();
            self.vote = if self.adopts(n.vote, opening) {
                n.vote
            } else {
                opening
            };
            self.broadcast(now_ms);
        } else if self.adopts(n.vote, self.vote) {
            self.vote = n.vote;
            self.broadcast(now_ms);
        }
        self.received.insert(n.sender, n);
        self.check_proposal_quorum(now_ms);
    }

    /// A report from a member that follows or leads: join its leader once a
    /// quorum agrees and the leader itself says it leads.
    fn on_settled(&mut self, n: Notification) {
        if n.election_epoch == self.logical_clock {
            self.received.insert(n.sender, n.clone());
            if self.settled_quorum(&self.received, &n) {
                return self.decide_for(n);
            }
        }
        // Joining an established ensemble: reports from any round count.
        self.out_of_election.insert(n.sender, n.clone());
        if self.settled_quorum(&self.out_of_election, &n) {
            self.logical_clock = n.election_epoch;
            self.decide_for(n);
        }
    }

    fn decide_for(&mut self, n: Notification) {
        if self.aside && n.vote.leader == self.config.my_id {
            return;
        }
        let state = if n.vote.leader == self.config.my_id {
            ServerState::Leading
        } else {
            ServerState::Following
        };
        self.decide(state, n.vote, n.election_epoch);
    }

    /// Whether a quorum of `votes` agrees with `n` and its leader is
    /// confirmed (ZooKeeper's `checkLeader`): someone else must have told us
    /// itself that it leads; we lead only a decision of our own round.
    fn settled_quorum(&self, votes: &BTreeMap<ServerId, Notification>, n: &Notification) -> bool {
        let agreeing = votes
            .values()
            .filter(|v| v.agrees_with(&n.vote, n.election_epoch, n.state))
            .map(|v| v.sender);
        if !self.is_quorum(agreeing) {
            return false;
        }
        let leader = n.vote.leader;
        if leader == self.config.my_id {
            self.logical_clock == n.election_epoch
        } else {
            votes
                .get(&leader)
                .is_some_and(|v| v.state == ServerState::Leading)
        }
    }

    /// Starts the finalize wait once a quorum of this round votes for the proposal.
    fn check_proposal_quorum(&mut self, now_ms: u64) {
        if self.state != ServerState::Looking || !self.is_voter(self.vote.leader) {
            return;
        }
        let (vote, round) = (self.vote, self.logical_clock);
        let agreeing = self
            .received
            .values()
            .filter(|v| v.agrees_with(&vote, round, ServerState::Looking))
            .map(|v| v.sender);
        if self.is_quorum(agreeing) && self.finalize_at.is_none() {
            self.finalize_at = Some(now_ms + self.config.finalize_wait_ms);
        }
        self.check_shortcut();
    }

    /// Decides the proposal now if the finalize wait could only end one way:
    /// a quorum agrees, and every other voter agrees too or is unreachable.
    fn check_shortcut(&mut self) {
        let quorum = self.finalize_at.is_some() || active(Failpoint::ShortcutWithoutQuorum);
        if self.state != ServerState::Looking || self.standing_down || !quorum {
            return;
        }
        let (vote, round) = (self.vote, self.logical_clock);
        let settled = self.all_voters().iter().all(|v| {
            self.unreachable.contains(v)
                || self
                    .received
                    .get(v)
                    .is_some_and(|n| n.agrees_with(&vote, round, ServerState::Looking))
        });
        if settled {
            self.shortcuts += 1;
            tracing::debug!(me = %self.config.my_id, "election: every voter that can answer agrees");
            self.finalize();
        }
    }

    /// Decides the proposal of this round (never nobody's).
    fn finalize(&mut self) {
        if !self.is_voter(self.vote.leader) {
            self.finalize_at = None;
            return;
        }
        let state = if self.vote.leader == self.config.my_id {
            ServerState::Leading
        } else {
            ServerState::Following
        };
        self.decide(state, self.vote, self.logical_clock);
    }

    /// The voters of the configuration now in effect (a reconfig committed,
    /// or one taken from a notification), and that configuration, which
    /// its notifications carry with reconfig (`ensemble`).
    pub fn set_config(&mut self, voters: BTreeSet<ServerId>, ensemble: Option<EnsembleConfig>) {
        self.config.voters = voters;
        self.ensemble = ensemble;
        self.next_voters = None;
    }

    /// Starts the round over, with the same vote for itself: the voters
    /// changed under it (a newer configuration taken from a notification).
    pub fn restart(&mut self, now_ms: u64) {
        if self.state == ServerState::Looking && !self.standing_down {
            self.look(now_ms, self.own);
        }
    }

    fn decide(&mut self, state: ServerState, vote: Vote, election_epoch: u64) {
        tracing::info!(
            me = %self.config.my_id,
            leader = %vote.leader,
            ?state,
            round = election_epoch,
            zxid = %vote.zxid,
            peer_epoch = vote.peer_epoch,
            "election decided"
        );
        self.state = state;
        self.vote = vote;
        self.vote_epoch = election_epoch;
        self.finalize_at = None;
        self.resend_at = None;
        self.received.clear();
        self.out_of_election.clear();
        self.outcome = Some(Outcome {
            state,
            vote,
            election_epoch,
        });
    }

    /// Our current state and vote, as a notification.
    fn notification(&self) -> Notification {
        Notification {
            sender: self.config.my_id,
            state: self.state,
            vote: self.vote,
            election_epoch: if self.state == ServerState::Looking {
                self.logical_clock
            } else {
                self.vote_epoch
            },
            config: self.ensemble.clone(),
        }
    }

    /// Our proposal to every voter; our own copy is counted at once.
    fn broadcast(&mut self, now_ms: u64) {
        let n = self.notification();
        let peers: Vec<ServerId> = self
            .all_voters()
            .into_iter()
            .filter(|v| *v != self.config.my_id)
            .collect();
        for to in peers {
            self.send(to, n.clone());
        }
        if self.is_voter(self.config.my_id) {
            self.received.insert(self.config.my_id, n);
            self.check_proposal_quorum(now_ms);
        }
    }

    fn send(&mut self, to: ServerId, notification: Notification) {
        self.commands
            .push_back(ElectionCommand::Send { to, notification });
    }
}

#[cfg(test)]
mod tests;
