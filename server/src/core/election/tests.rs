//! Fast leader election driven by hand and over a seeded simulated network.

use super::*;
use zkd_protocol::Zxid;

fn config(me: u64, n: u64) -> ElectionConfig {
    ElectionConfig {
        my_id: ServerId(me),
        voters: (1..=n).map(ServerId).collect(),
        finalize_wait_ms: 200,
        max_notification_interval_ms: 1600,
    }
}

fn vote(leader: u64, zxid: i64, peer_epoch: u32) -> Vote {
    Vote {
        leader: ServerId(leader),
        zxid: Zxid(zxid),
        peer_epoch,
    }
}

fn sends(e: &mut Election) -> Vec<(ServerId, Notification)> {
    e.drain_commands()
        .map(|ElectionCommand::Send { to, notification }| (to, notification))
        .collect()
}

/// A report from `sender` that it is in `state` with `leader`, decided in `round`.
fn settled(sender: u64, state: ServerState, leader: u64, round: u64) -> Notification {
    Notification {
        sender: ServerId(sender),
        state,
        vote: vote(leader, 0, 1),
        election_epoch: round,
        config: None,
    }
}

#[test]
fn looking_proposes_itself_to_every_peer() {
    let mut e = Election::new(config(1, 3), vote(1, 5, 1));
    e.look(0, vote(1, 5, 1));
    let out = sends(&mut e);
    assert_eq!(out.len(), 2);
    assert!(out.iter().all(|(_, n)| n.vote == vote(1, 5, 1)
        && n.election_epoch == 1
        && n.state == ServerState::Looking));
    assert_eq!(
        e.poll_timeout(),
        Some(200),
        "re-send after the first interval"
    );
}

#[test]
fn a_better_vote_is_adopted_and_a_quorum_decides_after_the_finalize_wait() {
    let mut e = Election::new(config(1, 3), vote(1, 5, 1));
    e.look(0, vote(1, 5, 1));
    sends(&mut e);
    let from3 = Notification {
        sender: ServerId(3),
        state: ServerState::Looking,
        vote: vote(3, 5, 1),
        election_epoch: 1,
        config: None,
    };
    e.handle_notification(10, from3);
    let out = sends(&mut e);
    assert!(
        out.iter().all(|(_, n)| n.vote == vote(3, 5, 1)),
        "adopts and re-broadcasts 3: {out:?}"
    );
    // Our own vote and 3's now agree: a quorum of three, pending the finalize wait.
    assert_eq!(e.poll_timeout(), Some(210));
    e.handle_timeout(209);
    assert!(e.take_outcome().is_none());
    e.handle_timeout(210);
    let outcome = e.take_outcome().expect("decided");
    assert_eq!(outcome.state, ServerState::Following);
    assert_eq!(outcome.vote.leader, ServerId(3));
    assert_eq!(e.poll_timeout(), None);
}

fn looking(sender: u64, leader: u64, round: u64) -> Notification {
    Notification {
        sender: ServerId(sender),
        state: ServerState::Looking,
        vote: vote(leader, 5, 1),
        election_epoch: round,
        config: None,
    }
}

#[test]
fn a_quorum_decides_at_once_when_every_other_voter_is_unreachable() {
    let mut e = Election::new(config(1, 3), vote(1, 5, 1));
    e.look(0, vote(1, 5, 1));
    e.handle_notification(10, looking(3, 3, 1));
    assert!(e.take_outcome().is_none(), "2 may still send a better vote");
    e.peer_unreachable(ServerId(2));
    let outcome = e.take_outcome().expect("decided without the finalize wait");
    assert_eq!(outcome.state, ServerState::Following);
    assert_eq!(outcome.vote.leader, ServerId(3));
    assert_eq!(e.shortcuts(), 1);
}

#[test]
fn a_round_where_every_voter_agrees_is_decided_at_once() {
    let mut e = Election::new(config(3, 3), vote(3, 5, 1));
    e.look(0, vote(3, 5, 1));
    e.handle_notification(5, looking(1, 3, 1));
    assert!(e.take_outcome().is_none(), "2 has not voted");
    // Votes that arrive during the finalize wait count for the shortcut.
    e.handle_notification(8, looking(2, 3, 1));
    let outcome = e.take_outcome().expect("every voter agrees");
    assert_eq!(outcome.state, ServerState::Leading);
}

#[test]
fn the_shortcut_still_needs_a_quorum() {
    let mut e = Election::new(config(1, 3), vote(1, 5, 1));
    e.look(0, vote(1, 5, 1));
    e.peer_unreachable(ServerId(2));
    e.peer_unreachable(ServerId(3));
    e.handle_timeout(10_000);
    assert!(e.take_outcome().is_none(), "alone is no quorum");
}

#[test]
fn an_unreachable_peer_heard_from_again_is_waited_for() {
    let mut e = Election::new(config(1, 3), vote(1, 5, 1));
    e.look(0, vote(1, 5, 1));
    e.peer_unreachable(ServerId(2));
    // 2 is back, still voting for itself in an older round: it will hear
    // our proposal and may answer with a better one.
    e.handle_notification(5, looking(2, 2, 0));
    e.handle_notification(10, looking(3, 3, 1));
    assert!(e.take_outcome().is_none(), "2 has not voted in this round");
    assert_eq!(e.poll_timeout(), Some(210), "the finalize wait applies");
    e.handle_timeout(210);
    assert_eq!(e.take_outcome().map(|o| o.vote.leader), Some(ServerId(3)));
    assert_eq!(e.shortcuts(), 0);
}

#[test]
fn a_better_vote_during_the_finalize_wait_reopens_the_round() {
    let mut e = Election::new(config(2, 5), vote(2, 5, 1));
    e.look(0, vote(2, 5, 1));
    for s in [1, 3] {
        e.handle_notification(
            5,
            Notification {
                sender: ServerId(s),
                state: ServerState::Looking,
                vote: vote(2, 5, 1),
                election_epoch: 1,
                config: None,
            },
        );
    }
    assert_eq!(e.poll_timeout(), Some(205), "three of five back 2");
    // Member 5 has more history: the decision waits for the new proposal.
    e.handle_notification(
        100,
        Notification {
            sender: ServerId(5),
            state: ServerState::Looking,
            vote: vote(5, 9, 1),
            election_epoch: 1,
            config: None,
        },
    );
    e.handle_timeout(205);
    assert!(e.take_outcome().is_none(), "2 is no longer the proposal");
    assert_eq!(e.vote(), vote(5, 9, 1));
}

#[test]
fn a_later_round_restarts_from_the_better_of_its_vote_and_our_own() {
    let mut e = Election::new(config(3, 3), vote(3, 9, 2));
    e.look(0, vote(3, 9, 2));
    sends(&mut e);
    e.handle_notification(
        1,
        Notification {
            sender: ServerId(1),
            state: ServerState::Looking,
            vote: vote(1, 4, 1),
            election_epoch: 7,
            config: None,
        },
    );
    assert_eq!(e.logical_clock(), 7);
    assert_eq!(e.vote(), vote(3, 9, 2), "our own vote is better");
    assert!(sends(&mut e).iter().all(|(_, n)| n.election_epoch == 7));
}

#[test]
fn a_looker_from_an_older_round_gets_our_proposal_and_is_not_counted() {
    let mut e = Election::new(config(1, 3), vote(1, 5, 1));
    e.look(0, vote(1, 5, 1));
    e.look(300, vote(1, 5, 1));
    sends(&mut e);
    e.handle_notification(
        301,
        Notification {
            sender: ServerId(2),
            state: ServerState::Looking,
            vote: vote(1, 5, 1),
            election_epoch: 1,
            config: None,
        },
    );
    let out = sends(&mut e);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].0, ServerId(2));
    assert_eq!(out[0].1.election_epoch, 2);
    assert_eq!(e.poll_timeout(), Some(500), "no quorum from an old round");
}

#[test]
fn a_late_joiner_follows_an_established_leader_only_once_the_leader_says_so() {
    let mut e = Election::new(config(1, 3), vote(1, 0, 0));
    e.look(0, vote(1, 0, 0));
    sends(&mut e);
    // Follower 2 reports leader 3 (decided in round 4): one report is no quorum.
    e.handle_notification(10, settled(2, ServerState::Following, 3, 4));
    assert!(e.take_outcome().is_none());
    // A second follower report makes a quorum of reports, but 3 has not said it leads.
    let mut e5 = Election::new(config(1, 5), vote(1, 0, 0));
    e5.look(0, vote(1, 0, 0));
    for s in [2, 4, 5] {
        e5.handle_notification(10, settled(s, ServerState::Following, 3, 4));
    }
    assert!(
        e5.take_outcome().is_none(),
        "checkLeader: 3 itself must report LEADING"
    );
    e5.handle_notification(11, settled(3, ServerState::Leading, 3, 4));
    let outcome = e5.take_outcome().expect("joins the established leader");
    assert_eq!(
        (outcome.state, outcome.vote.leader, outcome.election_epoch),
        (ServerState::Following, ServerId(3), 4)
    );
    assert_eq!(e5.logical_clock(), 4);
}

#[test]
fn a_settled_member_answers_lookers_with_its_decision_and_the_new_epoch() {
    let mut e = Election::new(config(2, 3), vote(2, 0, 0));
    e.look(0, vote(2, 0, 0));
    sends(&mut e);
    e.handle_notification(1, settled(1, ServerState::Following, 3, 1));
    e.handle_notification(1, settled(3, ServerState::Leading, 3, 1));
    assert!(e.take_outcome().is_some());
    e.update_peer_epoch(2);
    e.handle_notification(
        50,
        Notification {
            sender: ServerId(1),
            state: ServerState::Looking,
            vote: vote(1, 0, 0),
            election_epoch: 9,
            config: None,
        },
    );
    let out = sends(&mut e);
    assert_eq!(out.len(), 1);
    let (to, n) = out[0].clone();
    assert_eq!(to, ServerId(1));
    assert_eq!(n.state, ServerState::Following);
    assert_eq!((n.vote.leader, n.vote.peer_epoch), (ServerId(3), 2));
    assert_eq!(
        n.election_epoch, 1,
        "the round of the decision, not the looker's"
    );
    assert!(
        e.take_outcome().is_none(),
        "a looker does not disturb a settled member"
    );
}

#[test]
fn notifications_from_non_voters_are_answered_not_counted() {
    let mut e = Election::new(config(1, 3), vote(1, 0, 0));
    e.look(0, vote(1, 0, 0));
    sends(&mut e);
    for stranger in [9, 10] {
        e.handle_notification(
            1,
            Notification {
                sender: ServerId(stranger),
                state: ServerState::Looking,
                vote: vote(1, 0, 0),
                election_epoch: 1,
                config: None,
            },
        );
    }
    assert_eq!(sends(&mut e).len(), 2, "each stranger gets our vote");
    e.handle_timeout(10_000);
    assert!(e.take_outcome().is_none(), "strangers make no quorum");
}

#[test]
fn re_sends_back_off_to_the_maximum() {
    let mut e = Election::new(config(1, 3), vote(1, 0, 0));
    e.look(0, vote(1, 0, 0));
    sends(&mut e);
    let mut deadlines = Vec::new();
    while let Some(at) = e.poll_timeout().filter(|at| *at < 20_000) {
        e.handle_timeout(at);
        assert_eq!(sends(&mut e).len(), 2, "re-sent to both peers");
        deadlines.push(at);
    }
    assert_eq!(&deadlines[..6], &[200, 600, 1400, 3000, 4600, 6200]);
}

/// A seeded network of FIFO links (TCP between each pair), with random
/// delays, lost messages (a link that breaks loses what it carried) and
/// restarts.
mod simulated {
    use super::*;
    use crate::sim::rng::Rng;
    use std::collections::BTreeMap;

    struct Net {
        rng: Rng,
        members: BTreeMap<ServerId, Election>,
        /// (delivery time, sequence) -> (to, notification)
        in_flight: BTreeMap<(u64, u64), (ServerId, Notification)>,
        seq: u64,
        /// The last delivery time on each link, so links stay FIFO.
        link_clock: BTreeMap<(ServerId, ServerId), u64>,
        drop_percent: u64,
        decided: BTreeMap<ServerId, Outcome>,
    }

    impl Net {
        fn collect(&mut self, now: u64, from: ServerId) {
            let member = self.members.get_mut(&from).unwrap();
            let out: Vec<_> = member.drain_commands().collect();
            if let Some(outcome) = member.take_outcome() {
                self.decided.insert(from, outcome);
            }
            for ElectionCommand::Send { to, notification } in out {
                if self.rng.below(100) < self.drop_percent {
                    continue;
                }
                let link = self.link_clock.entry((from, to)).or_insert(0);
                let at = (now + 1 + self.rng.below(80)).max(*link);
                *link = at;
                self.seq += 1;
                self.in_flight.insert((at, self.seq), (to, notification));
            }
        }

        /// Runs until every member decided or `limit_ms` of virtual time passed.
        fn run(&mut self, mut now: u64, limit_ms: u64) -> u64 {
            while self.decided.len() < self.members.len() && now < limit_ms {
                let next_message = self.in_flight.keys().next().map(|k| k.0);
                let next_timer = self
                    .members
                    .values()
                    .filter_map(Election::poll_timeout)
                    .min();
                now = match (next_message, next_timer) {
                    (Some(m), Some(t)) => m.min(t),
                    (m, t) => m.or(t).expect("nothing left to happen"),
                };
                while let Some((&(at, seq), _)) = self.in_flight.first_key_value() {
                    if at > now {
                        break;
                    }
                    let (to, n) = self.in_flight.remove(&(at, seq)).unwrap();
                    if let Some(member) = self.members.get_mut(&to) {
                        member.handle_notification(now, n);
                        self.collect(now, to);
                    }
                }
                let ids: Vec<ServerId> = self.members.keys().copied().collect();
                for id in ids {
                    self.members.get_mut(&id).unwrap().handle_timeout(now);
                    self.collect(now, id);
                }
            }
            now
        }
    }

    fn start(seed: u64, n: u64, drop_percent: u64) -> (Net, BTreeMap<ServerId, Vote>) {
        start_with(seed, n, drop_percent, None)
    }

    /// As [`start`], member `aside` (if any) standing aside.
    fn start_with(
        seed: u64,
        n: u64,
        drop_percent: u64,
        aside: Option<ServerId>,
    ) -> (Net, BTreeMap<ServerId, Vote>) {
        let mut rng = Rng::new(seed);
        let mut net = Net {
            rng: Rng::new(rng.below(u64::MAX)),
            members: BTreeMap::new(),
            in_flight: BTreeMap::new(),
            seq: 0,
            link_clock: BTreeMap::new(),
            drop_percent,
            decided: BTreeMap::new(),
        };
        let mut own = BTreeMap::new();
        for id in 1..=n {
            let v = vote(id, rng.below(4) as i64, rng.below(2) as u32);
            own.insert(ServerId(id), v);
            let mut e = Election::new(config(id, n), v);
            e.stand_aside(aside == Some(ServerId(id)));
            e.look(rng.below(100), v);
            net.members.insert(ServerId(id), e);
            net.collect(0, ServerId(id));
        }
        (net, own)
    }

    fn assert_agreement(seed: u64, net: &Net) {
        let leaders: BTreeSet<ServerId> = net.decided.values().map(|o| o.vote.leader).collect();
        assert_eq!(
            leaders.len(),
            1,
            "seed {seed}: members decided on different leaders {:?}\nreplay: cargo test -p zkd-server election::tests::simulated",
            net.decided
        );
        let leader = *leaders.first().unwrap();
        assert_eq!(
            net.decided.get(&leader).map(|o| o.state),
            Some(ServerState::Leading),
            "seed {seed}: the leader must know it leads"
        );
    }

    /// Over reliable links every member settles on the same leader. (When
    /// messages are lost, two members can each decide to lead, in
    /// ZooKeeper too: Zab's epoch establishment keeps at most one of them.)
    #[test]
    fn connected_members_agree_on_one_leader_within_bounded_time() {
        for seed in 1..=500 {
            let n = if seed % 2 == 0 { 3 } else { 5 };
            let (mut net, own) = start(seed, n, 0);
            let ended = net.run(0, 30_000);
            assert_eq!(
                net.decided.len() as u64,
                n,
                "seed {seed}: undecided after {ended} ms of virtual time\nreplay: cargo test -p zkd-server election::tests::simulated"
            );
            assert_agreement(seed, &net);
            // The leader has the best history of some quorum: no quorum saw a better one.
            let leader = net.decided.values().next().unwrap().vote;
            let better = own.values().filter(|v| v.beats(&leader)).count() as u64;
            assert!(
                better <= n / 2,
                "seed {seed}: {better} members beat the leader {leader}"
            );
        }
    }

    /// Losing a third of all messages delays decisions (re-sends back off)
    /// but every member still decides.
    #[test]
    fn lossy_links_still_end_every_election() {
        for seed in 1..=300 {
            let n = if seed % 2 == 0 { 3 } else { 5 };
            let (mut net, _) = start(seed, n, 33);
            let ended = net.run(0, 120_000);
            assert_eq!(
                net.decided.len() as u64,
                n,
                "seed {seed}: undecided after {ended} ms\nreplay: cargo test -p zkd-server election::tests::simulated"
            );
        }
    }

    /// The member that would win stands aside: it never leads, every
    /// member still decides when another has at least its history, and
    /// the one elected then has it.
    #[test]
    fn a_member_standing_aside_never_leads_and_backs_no_one_behind_it() {
        for seed in 1..=300 {
            let n = if seed % 2 == 0 { 3 } else { 5 };
            let (net, _) = start(seed, n, 0);
            let best = net
                .members
                .values()
                .map(|e| e.vote())
                .max_by_key(Vote::rank);
            let aside = best.expect("members").leader;
            let (mut net, own) = start_with(seed, n, 0, Some(aside));
            let ended = net.run(0, 30_000);
            let history = |v: &Vote| (v.peer_epoch, v.zxid);
            let matched = own
                .values()
                .any(|v| v.leader != aside && history(v) >= history(&own[&aside]));
            let replay = "replay: cargo test -p zkd-server election::tests::simulated";
            if matched {
                assert_eq!(
                    net.decided.len() as u64,
                    n,
                    "seed {seed}: undecided after {ended} ms\n{replay}"
                );
                assert_agreement(seed, &net);
                let leader = net.decided.values().next().unwrap().vote;
                assert!(
                    history(&own[&leader.leader]) >= history(&own[&aside]),
                    "seed {seed}: {leader} is behind {aside}, which stood aside\n{replay}"
                );
            }
            assert!(
                net.decided
                    .get(&aside)
                    .is_none_or(|o| o.state != ServerState::Leading),
                "seed {seed}: {aside} stood aside and leads\n{replay}"
            );
        }
    }

    #[test]
    fn a_restarted_member_rejoins_the_established_leader() {
        for seed in 1..=200 {
            let (mut net, _) = start(seed, 3, 0);
            let now = net.run(0, 30_000);
            assert_eq!(net.decided.len(), 3, "seed {seed}");
            let leader = net.decided.values().next().unwrap().vote.leader;
            let before = net.decided.clone();
            // A follower restarts: round 1 again, its own vote, nothing remembered.
            let victim = *net.decided.keys().find(|id| **id != leader).unwrap();
            let own = vote(victim.0, 0, 0);
            let mut fresh = Election::new(config(victim.0, 3), own);
            fresh.look(now, own);
            net.members.insert(victim, fresh);
            net.decided.remove(&victim);
            net.collect(now, victim);
            net.run(now, now + 30_000);
            assert_eq!(net.decided[&victim].vote.leader, leader, "seed {seed}");
            for (id, outcome) in &before {
                if *id != victim {
                    assert_eq!(net.decided[id], *outcome, "seed {seed}: {id} was disturbed");
                }
            }
        }
    }
}

#[test]
fn a_member_standing_aside_proposes_nobody_and_backs_only_a_match_for_its_history() {
    let mut e = Election::new(config(3, 3), vote(3, 5, 1));
    e.stand_aside(true);
    e.look(0, vote(3, 5, 1));
    let out = sends(&mut e);
    assert!(
        out.iter().all(|(_, n)| n.vote.leader == ServerId(0)),
        "proposes nobody: {out:?}"
    );
    // Behind its history: not backed, whatever the id.
    let mut behind = looking(2, 2, 1);
    behind.vote.zxid = Zxid(4);
    e.handle_notification(10, behind);
    assert!(sends(&mut e).is_empty(), "member 2 is behind");
    assert_eq!(
        e.poll_timeout(),
        Some(210),
        "only the re-send: nothing to finalize"
    );
    // As much history and a lower id: backed, and decided with it.
    e.handle_notification(20, looking(1, 1, 1));
    let out = sends(&mut e);
    assert!(out.iter().all(|(_, n)| n.vote == vote(1, 5, 1)), "{out:?}");
    e.handle_timeout(220);
    let outcome = e.take_outcome().expect("decided");
    assert_eq!(
        (outcome.state, outcome.vote.leader),
        (ServerState::Following, ServerId(1))
    );
}

#[test]
fn a_member_standing_aside_follows_no_report_that_it_leads() {
    let mut e = Election::new(config(3, 3), vote(3, 5, 1));
    e.stand_aside(true);
    e.look(0, vote(3, 5, 1));
    sends(&mut e);
    e.handle_notification(10, settled(1, ServerState::Following, 3, 1));
    e.handle_notification(10, settled(2, ServerState::Following, 3, 1));
    assert!(e.take_outcome().is_none(), "it must not lead");
}

/// Member 2 of 3, which followed 3 in round 1; its role just ended.
fn stood_down_after_following_3() -> Election {
    let mut e = Election::new(config(2, 3), vote(2, 7, 1));
    e.look(0, vote(2, 7, 1));
    sends(&mut e);
    e.handle_notification(1, settled(1, ServerState::Following, 3, 1));
    e.handle_notification(1, settled(3, ServerState::Leading, 3, 1));
    assert!(e.take_outcome().is_some());
    e.stand_down();
    e
}

/// Issue 14, finding 8: between the end of a role and the next round (the
/// member drains its storage first), a looker must not be told to follow
/// the leader this member no longer follows, and no vote is counted then.
#[test]
fn a_member_whose_role_ended_answers_lookers_as_a_looker() {
    let mut e = stood_down_after_following_3();
    let looker = Notification {
        sender: ServerId(1),
        state: ServerState::Looking,
        vote: vote(1, 9, 1),
        election_epoch: 2,
        config: None,
    };
    e.handle_notification(50, looker);
    let out = sends(&mut e);
    assert_eq!(out.len(), 1);
    let (to, n) = out[0].clone();
    assert_eq!(to, ServerId(1));
    assert_eq!(n.state, ServerState::Looking, "not FOLLOWING a gone leader");
    assert_eq!(n.vote.leader, ServerId(2), "its own vote, not leader 3");
    e.handle_notification(60, settled(3, ServerState::Leading, 3, 1));
    assert_eq!(e.poll_timeout(), None, "no round runs until the next look");
    assert!(
        e.take_outcome().is_none(),
        "nothing is decided while standing down"
    );
    e.look(100, vote(2, 8, 1));
    assert_eq!(e.poll_timeout(), Some(300), "the next round runs as usual");
}

/// A looker's vote heard while standing down counts when the next round
/// starts: that looker, already in the round, would not send it again
/// before its re-send timer (found as a 500 ms longer failover).
#[test]
fn a_lookers_vote_heard_while_standing_down_counts_in_the_next_round() {
    let mut e = stood_down_after_following_3();
    let ahead = Notification {
        sender: ServerId(3),
        state: ServerState::Looking,
        vote: vote(3, 9, 1),
        election_epoch: 2,
        config: None,
    };
    e.handle_notification(50, ahead);
    sends(&mut e);
    e.look(100, vote(2, 9, 1));
    assert_eq!(e.vote().leader, ServerId(3), "the held vote is better");
    e.handle_timeout(300);
    let outcome = e.take_outcome().expect("decided after one finalize wait");
    assert_eq!(
        (outcome.state, outcome.vote.leader),
        (ServerState::Following, ServerId(3))
    );
}

/// An observer (4, not among the voters 1 to 3) proposes nobody, to the
/// voters only, backs the best vote it hears, and follows the leader a
/// quorum of voters settles on; it never leads.
#[test]
fn an_observer_proposes_nobody_and_follows_what_the_voters_decide() {
    let mut e = Election::new(config(4, 3), vote(4, 9, 2));
    e.look(0, vote(4, 9, 2));
    let out = sends(&mut e);
    let peers: Vec<u64> = out.iter().map(|(to, _)| to.0).collect();
    assert_eq!(peers, vec![1, 2, 3], "to the voters");
    assert!(
        out.iter().all(|(_, n)| n.vote.leader == ServerId(0)),
        "nobody"
    );
    // Less history than its own is still backed: its backing counts for nothing.
    e.handle_notification(1, looking(2, 2, 1));
    assert!(sends(&mut e)
        .iter()
        .all(|(_, n)| n.vote.leader == ServerId(2)));
    e.handle_notification(2, settled(2, ServerState::Following, 3, 5));
    assert!(e.take_outcome().is_none(), "one voter is no quorum");
    e.handle_notification(3, settled(3, ServerState::Leading, 3, 5));
    let outcome = e.take_outcome().expect("decided");
    assert_eq!(
        (outcome.state, outcome.vote.leader),
        (ServerState::Following, ServerId(3))
    );
}

/// With a reconfig logged and not in effect (voters 1-3 now, 3-5 next), a
/// vote needs a majority of each: 1 and 3 agreeing are not enough, as 3
/// alone is no majority of 3-5; with 4 as well they are. The next voters
/// are told too, and what they say counts.
#[test]
fn a_logged_reconfig_makes_the_election_need_both_quorums() {
    let mut e = Election::new(config(1, 3), vote(1, 5, 1));
    e.set_next_voters(Some([3, 4, 5].map(ServerId).into()));
    e.look(0, vote(1, 5, 1));
    let told: BTreeSet<ServerId> = sends(&mut e).into_iter().map(|(to, _)| to).collect();
    assert_eq!(told, [2, 3, 4, 5].map(ServerId).into());
    e.handle_notification(10, looking(3, 3, 1));
    sends(&mut e);
    e.handle_timeout(1_000);
    assert!(e.take_outcome().is_none(), "3 alone is no majority of 3-5");
    e.handle_notification(1_001, looking(4, 3, 1));
    e.handle_timeout(2_000);
    let outcome = e.take_outcome().expect("decided with both majorities");
    assert_eq!(outcome.vote.leader, ServerId(3));
}
