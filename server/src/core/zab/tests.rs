//! Zab's roles driven by hand: exact messages and storage operations.

use super::*;
use crate::core::election::ServerId;

const TIMING: Timing = Timing {
    tick_ms: 100,
    init_limit: 10,
    sync_limit: 5,
};

fn voters(n: u64) -> Members {
    Members::voting((1..=n).map(ServerId))
}

fn state(accepted: Epoch, current: Epoch, zxids: &[Zxid]) -> DurableState {
    let mut history = History::new(Zxid::ZERO, 1000);
    for z in zxids {
        history.push(*z, Bytes::from(format!("txn {z}")));
    }
    DurableState {
        accepted_epoch: accepted,
        current_epoch: current,
        history,
        log_base: Zxid::ZERO,
    }
}

/// The leader's commands but its reports of who is synced, which the
/// node keeps (see `synced_followers_are_reported`).
fn drain_leader(l: &mut Leader) -> Vec<ZabCommand> {
    (l.drain_commands())
        .filter(|c| !matches!(c, ZabCommand::Synced(_)))
        .collect()
}

fn drain_follower(f: &mut Follower) -> Vec<ZabCommand> {
    f.drain_commands().collect()
}

fn send(to: u64, message: ZabMessage) -> ZabCommand {
    ZabCommand::Send {
        to: ServerId(to),
        message,
    }
}

#[test]
fn the_leader_persists_each_epoch_before_anyone_hears_of_it() {
    let z = |c| Zxid::new(1, c);
    let mut l = Leader::new(
        ServerId(1),
        voters(3),
        TIMING,
        state(1, 1, &[z(1), z(2)]),
        z(2),
        0,
    );
    assert!(drain_leader(&mut l).is_empty(), "alone is no quorum");
    l.handle_message(
        1,
        ServerId(2),
        ZabMessage::FollowerInfo { accepted_epoch: 3 },
    );
    assert_eq!(
        drain_leader(&mut l),
        vec![
            ZabCommand::Storage(StorageOp::SetAcceptedEpoch(4)),
            ZabCommand::Storage(StorageOp::Barrier(1)),
        ],
        "epoch above every accepted one of the quorum, durable first"
    );
    l.handle_reached(0, 1);
    assert_eq!(
        drain_leader(&mut l),
        vec![send(2, ZabMessage::LeaderInfo { epoch: 4 })]
    );
    l.handle_message(
        2,
        ServerId(2),
        ZabMessage::AckEpoch {
            current_epoch: Some(1),
            last_zxid: z(1),
            log_base: Zxid::ZERO,
            wants_snapshot: false,
        },
    );
    assert_eq!(
        drain_leader(&mut l),
        vec![
            ZabCommand::Storage(StorageOp::SetCurrentEpoch(4)),
            ZabCommand::Storage(StorageOp::Barrier(2)),
        ]
    );
    l.handle_reached(0, 2);
    assert_eq!(
        drain_leader(&mut l),
        vec![
            send(2, ZabMessage::Diff { zxid: z(1) }),
            send(
                2,
                ZabMessage::Proposal {
                    zxid: z(2),
                    txn: Bytes::from(format!("txn {}", z(2)))
                }
            ),
            send(
                2,
                ZabMessage::Commit {
                    zxid: z(2),
                    digest: None
                }
            ),
            send(
                2,
                ZabMessage::NewLeader {
                    epoch: 4,
                    config: Bytes::new(),
                }
            ),
        ]
    );
    assert!(!l.is_established());
    l.handle_message(
        3,
        ServerId(2),
        ZabMessage::Ack {
            zxid: epoch_zxid(4),
        },
    );
    assert_eq!(
        drain_leader(&mut l),
        vec![ZabCommand::Serving, send(2, ZabMessage::UpToDate)]
    );
    assert_eq!(l.next_zxid(), Some(Zxid::new(4, 1)));
}

#[test]
fn a_follower_acks_newleader_only_after_its_log_and_then_its_epoch_are_durable() {
    let z = |c| Zxid::new(1, c);
    let mut f = Follower::new(ServerId(3), TIMING, state(1, 1, &[z(1)]), z(1), 0, false);
    assert_eq!(
        drain_follower(&mut f),
        vec![send(3, ZabMessage::FollowerInfo { accepted_epoch: 1 })]
    );
    f.handle_message(1, ServerId(3), ZabMessage::LeaderInfo { epoch: 2 });
    assert_eq!(
        drain_follower(&mut f),
        vec![
            ZabCommand::Storage(StorageOp::SetAcceptedEpoch(2)),
            ZabCommand::Storage(StorageOp::Barrier(11)),
        ]
    );
    f.handle_reached(11);
    assert_eq!(
        drain_follower(&mut f),
        vec![send(
            3,
            ZabMessage::AckEpoch {
                current_epoch: Some(1),
                last_zxid: z(1),
                log_base: Zxid::ZERO,
                wants_snapshot: false,
            }
        )]
    );
    let txn = Bytes::from_static(b"t2");
    for m in [
        ZabMessage::Diff { zxid: z(1) },
        ZabMessage::Proposal {
            zxid: z(2),
            txn: txn.clone(),
        },
        ZabMessage::Commit {
            zxid: z(2),
            digest: None,
        },
        ZabMessage::NewLeader {
            epoch: 2,
            config: Bytes::new(),
        },
    ] {
        f.handle_message(2, ServerId(3), m);
    }
    assert_eq!(
        drain_follower(&mut f),
        vec![
            ZabCommand::Storage(StorageOp::Append {
                zxid: z(2),
                txn: txn.clone()
            }),
            ZabCommand::Storage(StorageOp::SetCurrentEpoch(2)),
            ZabCommand::Storage(StorageOp::Barrier(12)),
        ],
        "nothing is applied or acknowledged before the barrier"
    );
    f.handle_persisted(z(2));
    assert!(
        drain_follower(&mut f).is_empty(),
        "no ACK before NEWLEADER's"
    );
    f.handle_reached(12);
    assert_eq!(
        drain_follower(&mut f),
        vec![
            send(
                3,
                ZabMessage::Ack {
                    zxid: epoch_zxid(2)
                }
            ),
            ZabCommand::Deliver {
                zxid: z(2),
                txn,
                digest: None
            },
        ]
    );
    f.handle_message(3, ServerId(3), ZabMessage::UpToDate);
    assert_eq!(drain_follower(&mut f), vec![ZabCommand::Serving]);
}

#[test]
fn a_leader_commits_on_a_quorum_of_durable_copies_in_order() {
    let mut l = Leader::new(
        ServerId(1),
        voters(3),
        TIMING,
        state(0, 0, &[]),
        Zxid::ZERO,
        0,
    );
    for (sid, m) in [
        (2, ZabMessage::FollowerInfo { accepted_epoch: 0 }),
        (3, ZabMessage::FollowerInfo { accepted_epoch: 0 }),
    ] {
        l.handle_message(0, ServerId(sid), m);
    }
    l.handle_reached(0, 1);
    for sid in [2, 3] {
        l.handle_message(
            0,
            ServerId(sid),
            ZabMessage::AckEpoch {
                current_epoch: Some(0),
                last_zxid: Zxid::ZERO,
                log_base: Zxid::ZERO,
                wants_snapshot: false,
            },
        );
    }
    l.handle_reached(0, 2);
    for sid in [2, 3] {
        l.handle_message(
            0,
            ServerId(sid),
            ZabMessage::Ack {
                zxid: epoch_zxid(1),
            },
        );
    }
    drain_leader(&mut l);
    let (a, b) = (Zxid::new(1, 1), Zxid::new(1, 2));
    for zxid in [a, b] {
        assert_eq!(l.next_zxid(), Some(zxid));
        l.propose(zxid, Bytes::new());
    }
    drain_leader(&mut l);
    // Follower 2 has both durable, the leader neither: 2 of 3 is not yet a quorum without us.
    l.handle_message(1, ServerId(2), ZabMessage::Ack { zxid: b });
    assert!(drain_leader(&mut l).is_empty(), "one durable copy of three");
    l.handle_persisted(a);
    let out = drain_leader(&mut l);
    assert_eq!(
        out,
        vec![
            ZabCommand::Deliver {
                zxid: a,
                txn: Bytes::new(),
                digest: None
            },
            send(
                2,
                ZabMessage::Commit {
                    zxid: a,
                    digest: None
                }
            ),
            send(
                3,
                ZabMessage::Commit {
                    zxid: a,
                    digest: None
                }
            ),
        ]
    );
}

/// A quorum is more than half of the voters: a voter listed twice counts
/// once, and a member that does not vote counts not at all.
#[test]
fn a_quorum_counts_each_voter_once() {
    let three = voters(3);
    let ids = |ids: &[u64]| ids.iter().map(|&i| ServerId(i)).collect::<Vec<_>>();
    assert!(three.is_quorum(&ids(&[1, 2])));
    assert!(three.is_quorum(&ids(&[3, 1, 2])));
    assert!(!three.is_quorum(&ids(&[1])));
    assert!(!three.is_quorum(&ids(&[1, 1])));
    assert!(!three.is_quorum(&ids(&[2, 4, 5])));
    assert!(!voters(4).is_quorum(&ids(&[1, 2])));
    assert!(voters(5).is_quorum(&ids(&[5, 3, 1])));
}

#[test]
fn a_leader_steps_down_before_the_zxid_counter_rolls_over() {
    // Four billion txns in one epoch, short-cut: the log ends a few txns
    // before the counter's end, in the epoch this leader is about to choose.
    let near_end = Zxid::new(2, u32::MAX - 2);
    let mut l = Leader::new(
        ServerId(1),
        voters(3),
        TIMING,
        state(1, 1, &[near_end]),
        near_end,
        0,
    );
    for sid in [2, 3] {
        l.handle_message(
            0,
            ServerId(sid),
            ZabMessage::FollowerInfo { accepted_epoch: 1 },
        );
    }
    l.handle_reached(0, 1);
    for sid in [2, 3] {
        let ack_epoch = ZabMessage::AckEpoch {
            current_epoch: Some(1),
            last_zxid: near_end,
            log_base: Zxid::ZERO,
            wants_snapshot: false,
        };
        l.handle_message(0, ServerId(sid), ack_epoch);
    }
    l.handle_reached(0, 2);
    for sid in [2, 3] {
        let ack = ZabMessage::Ack {
            zxid: epoch_zxid(2),
        };
        l.handle_message(0, ServerId(sid), ack);
    }
    drain_leader(&mut l);
    assert!(l.is_established());
    let last = Zxid::new(2, u32::MAX - 1);
    assert_eq!(l.next_zxid(), Some(last));
    l.propose(last, Bytes::new());
    drain_leader(&mut l);
    // The next would be counter 0xffffffff, and the one after it would wrap
    // into the next epoch's zxids: step down so the next epoch starts at 0.
    assert_eq!(l.next_zxid(), None);
    let out = drain_leader(&mut l);
    assert!(
        matches!(out.last(), Some(ZabCommand::Abandon { reason }) if reason.contains("roll over")),
        "{out:?}"
    );
    assert!(
        out.contains(&ZabCommand::Disconnect { peer: ServerId(2) }),
        "{out:?}"
    );
    assert!(!l.is_established());
}

/// A member that accepted an epoch above the one this leader established
/// (promised to a leader that never got a quorum) cannot follow it. A young
/// leader drops it and stays, so one connection claiming a member's sid
/// cannot depose it (issue 35, finding 11); a leader that has led for two
/// initLimits steps down, so the next election picks an epoch above it
/// instead of refusing it forever (simulator seed 461). One at or below the
/// established epoch is simply told the epoch.
#[test]
fn a_leader_yields_to_a_later_accepted_epoch_only_once_it_has_led_a_while() {
    let z = |c| Zxid::new(1, c);
    let mut l = Leader::new(
        ServerId(1),
        voters(3),
        TIMING,
        state(1, 1, &[z(1)]),
        z(1),
        0,
    );
    l.handle_message(
        0,
        ServerId(2),
        ZabMessage::FollowerInfo { accepted_epoch: 1 },
    );
    l.handle_reached(0, 1);
    let ack_epoch = ZabMessage::AckEpoch {
        current_epoch: Some(1),
        last_zxid: z(1),
        log_base: Zxid::ZERO,
        wants_snapshot: false,
    };
    l.handle_message(0, ServerId(2), ack_epoch);
    l.handle_reached(0, 2);
    let ack = ZabMessage::Ack {
        zxid: epoch_zxid(2),
    };
    l.handle_message(0, ServerId(2), ack);
    drain_leader(&mut l);
    assert!(l.is_established());

    l.handle_message(
        1,
        ServerId(3),
        ZabMessage::FollowerInfo { accepted_epoch: 2 },
    );
    assert_eq!(
        drain_leader(&mut l),
        vec![send(3, ZabMessage::LeaderInfo { epoch: 2 })],
        "an epoch it accepted already: it may follow"
    );
    for claim in [
        3,
        1000,
        zkd_protocol::MAX_EPOCH - 1,
        zkd_protocol::MAX_EPOCH,
    ] {
        l.handle_message(
            2,
            ServerId(3),
            ZabMessage::FollowerInfo {
                accepted_epoch: claim,
            },
        );
        assert_eq!(
            drain_leader(&mut l),
            vec![ZabCommand::Disconnect { peer: ServerId(3) }],
            "a young leader drops the claimant of {claim} and stays"
        );
        assert!(l.is_established());
    }
    let led_a_while = 2 * TIMING.init_ms();
    l.handle_message(
        led_a_while,
        ServerId(3),
        ZabMessage::FollowerInfo { accepted_epoch: 3 },
    );
    let out = drain_leader(&mut l);
    assert!(
        matches!(out.last(), Some(ZabCommand::Abandon { reason }) if reason.contains("accepted epoch 3")),
        "{out:?}"
    );
    assert!(!l.is_established());
}

/// Epochs never wrap (finding 11), and no peer can spend them (issue 49):
/// a follower claiming the last epoch, or one further ahead of the
/// leader's than [`EPOCH_LEAP`], is dropped in discovery; a claim within
/// the leap is taken; a leader whose own disk is at the last epoch cannot lead.
#[test]
fn no_epoch_is_chosen_past_the_last_nor_leapt_to() {
    use super::leader::EPOCH_LEAP;
    let last = zkd_protocol::MAX_EPOCH;
    let fresh = || {
        Leader::new(
            ServerId(1),
            voters(3),
            TIMING,
            state(1, 1, &[]),
            Zxid::ZERO,
            0,
        )
    };
    for claim in [last, last - 1, 2 + EPOCH_LEAP] {
        let mut l = fresh();
        let info = ZabMessage::FollowerInfo {
            accepted_epoch: claim,
        };
        l.handle_message(0, ServerId(2), info);
        assert_eq!(
            drain_leader(&mut l),
            vec![ZabCommand::Disconnect { peer: ServerId(2) }],
            "a claim of {claim} is dropped"
        );
    }
    let mut l = fresh();
    let info = ZabMessage::FollowerInfo {
        accepted_epoch: 1 + EPOCH_LEAP,
    };
    l.handle_message(0, ServerId(2), info);
    assert_eq!(
        drain_leader(&mut l),
        vec![
            ZabCommand::Storage(StorageOp::SetAcceptedEpoch(2 + EPOCH_LEAP)),
            ZabCommand::Storage(StorageOp::Barrier(1)),
        ],
        "a lead within the leap is followed"
    );

    let mut exhausted = Leader::new(
        ServerId(1),
        voters(3),
        TIMING,
        state(last, last, &[]),
        Zxid::ZERO,
        0,
    );
    exhausted.handle_message(
        0,
        ServerId(2),
        ZabMessage::FollowerInfo { accepted_epoch: 1 },
    );
    let out = drain_leader(&mut exhausted);
    assert!(
        matches!(out.last(), Some(ZabCommand::Abandon { reason }) if reason.contains("no epoch is left")),
        "{out:?}"
    );
}

/// A follower whose ACKEPOCH claims more than the leader has is dropped,
/// not obeyed: the leader stays (ZooKeeper ends that LearnerHandler only).
#[test]
fn a_follower_ahead_of_the_leader_is_dropped() {
    let z = |c| Zxid::new(1, c);
    let mut l = Leader::new(
        ServerId(1),
        voters(3),
        TIMING,
        state(1, 1, &[z(1)]),
        z(1),
        0,
    );
    l.handle_message(
        0,
        ServerId(2),
        ZabMessage::FollowerInfo { accepted_epoch: 1 },
    );
    l.handle_reached(0, 1);
    drain_leader(&mut l);
    let ahead = ZabMessage::AckEpoch {
        current_epoch: Some(1),
        last_zxid: z(9),
        log_base: Zxid::ZERO,
        wants_snapshot: false,
    };
    l.handle_message(0, ServerId(2), ahead);
    assert_eq!(
        drain_leader(&mut l),
        vec![ZabCommand::Disconnect { peer: ServerId(2) }]
    );
    l.handle_timeout(TIMING.init_ms() - 1);
    assert!(
        drain_leader(&mut l)
            .iter()
            .all(|c| !matches!(c, ZabCommand::Abandon { .. })),
        "it waits for a quorum until initLimit"
    );
}

/// Finding 3 of issue 35: with more proposals outstanding than the history
/// window keeps, a follower synced now gets every one of them, not only
/// those still in the window ("proposal out of order" otherwise).
#[test]
fn a_sync_sends_every_outstanding_proposal_beyond_the_window() {
    let mut l = established(4, &[2]);
    let ack_epoch = ZabMessage::AckEpoch {
        current_epoch: Some(0),
        last_zxid: Zxid::ZERO,
        log_base: Zxid::ZERO,
        wants_snapshot: false,
    };
    // Ten proposals nobody acks: all outstanding, six past the window.
    let proposed: Vec<Zxid> = (1..=10).map(|c| Zxid::new(1, c)).collect();
    for &zxid in &proposed {
        assert_eq!(l.next_zxid(), Some(zxid));
        l.propose(zxid, Bytes::from(format!("txn {zxid}")));
    }
    drain_leader(&mut l);
    l.handle_message(
        1,
        ServerId(3),
        ZabMessage::FollowerInfo { accepted_epoch: 1 },
    );
    l.handle_message(1, ServerId(3), ack_epoch);
    let sent: Vec<Zxid> = drain_leader(&mut l)
        .into_iter()
        .filter_map(|c| match c {
            ZabCommand::Send {
                to: ServerId(3),
                message: ZabMessage::Proposal { zxid, .. },
            } => Some(zxid),
            _ => None,
        })
        .collect();
    assert_eq!(sent, proposed);
}

/// Leader 1 of 3 established in epoch 1 with `followers` synced, its
/// history `window` txns long.
fn established(window: usize, followers: &[u64]) -> Leader {
    established_among(voters(3), window, followers)
}

/// [`established`] in an ensemble of `members`.
fn established_among(members: Members, window: usize, followers: &[u64]) -> Leader {
    let mut durable = state(0, 0, &[]);
    durable.history = History::new(Zxid::ZERO, window);
    let mut l = Leader::new(ServerId(1), members, TIMING, durable, Zxid::ZERO, 0);
    for &sid in followers {
        let info = ZabMessage::FollowerInfo { accepted_epoch: 0 };
        l.handle_message(0, ServerId(sid), info);
    }
    l.handle_reached(0, 1);
    for &sid in followers {
        let ack_epoch = ZabMessage::AckEpoch {
            current_epoch: Some(0),
            last_zxid: Zxid::ZERO,
            log_base: Zxid::ZERO,
            wants_snapshot: false,
        };
        l.handle_message(0, ServerId(sid), ack_epoch);
    }
    l.handle_reached(0, 2);
    for &sid in followers {
        let ack = ZabMessage::Ack {
            zxid: epoch_zxid(1),
        };
        l.handle_message(0, ServerId(sid), ack);
    }
    assert!(l.is_established());
    drain_leader(&mut l);
    l
}

/// An established leader with followers 2 and 3 synced, its flow marks
/// small: 100 bytes high, 40 low, batches of 50.
fn flowing_leader(window: usize) -> Leader {
    let marks = FlowMarks {
        high: 100,
        low: 40,
        batch: 50,
    };
    established(window, &[2, 3]).with_flow(marks)
}

/// Proposes `n` txns of 20 bytes; returns their zxids.
fn propose_n(l: &mut Leader, n: usize) -> Vec<Zxid> {
    (0..n)
        .map(|_| {
            let zxid = l.next_zxid().unwrap();
            l.propose(zxid, Bytes::from(vec![7; 20]));
            zxid
        })
        .collect()
}

/// What `to` was sent among `commands`: proposals' zxids and commits'.
fn sent_to(commands: &[ZabCommand], to: u64) -> (Vec<Zxid>, Vec<Zxid>) {
    let (mut proposals, mut commits) = (Vec::new(), Vec::new());
    for c in commands {
        match c {
            ZabCommand::Send { to: t, message } if *t == ServerId(to) => match message {
                ZabMessage::Proposal { zxid, .. } => proposals.push(*zxid),
                ZabMessage::Commit { zxid, .. } => commits.push(*zxid),
                _ => {}
            },
            _ => {}
        }
    }
    (proposals, commits)
}

/// Finding 2 of issue 35: a follower whose link backs up lags instead of
/// having more queued for it; once its link drains it catches up from the
/// leader's history a batch at a time, its COMMITs never past what it was
/// sent, and then gets live proposals again.
#[test]
fn a_follower_whose_link_backs_up_lags_and_catches_up_from_memory() {
    let mut l = flowing_leader(1000);
    let first = propose_n(&mut l, 2);
    drain_leader(&mut l);
    l.link_queue(ServerId(3), 101);
    let later = propose_n(&mut l, 4);
    let out = drain_leader(&mut l);
    assert_eq!(sent_to(&out, 2).0, later, "a live follower gets them");
    assert_eq!(sent_to(&out, 3).0, vec![], "a paused one does not");
    // Follower 2 makes them durable: committed, but follower 3 is not told.
    l.handle_persisted(later[3]);
    l.handle_message(1, ServerId(2), ZabMessage::Ack { zxid: later[3] });
    let out = drain_leader(&mut l);
    assert_eq!(sent_to(&out, 2).1, vec![later[3]]);
    assert_eq!(sent_to(&out, 3).1, vec![], "no COMMIT while paused");
    // Still above the low mark: nothing.
    l.link_queue(ServerId(3), 60);
    assert!(drain_leader(&mut l).is_empty());
    // Drained: a batch (50 bytes: three txns of 20), and its commit.
    l.link_queue(ServerId(3), 0);
    let out = drain_leader(&mut l);
    assert_eq!(sent_to(&out, 3), (later[..3].to_vec(), vec![later[2]]));
    l.link_queue(ServerId(3), 0);
    let out = drain_leader(&mut l);
    assert_eq!(sent_to(&out, 3), (vec![later[3]], vec![later[3]]));
    // Caught up: live again.
    let live = propose_n(&mut l, 1);
    assert_eq!(sent_to(&drain_leader(&mut l), 3).0, live);
    assert!(first.iter().all(|z| *z < later[0]));
}

/// Past the in-memory window a lagging follower catches up from the log:
/// the leader asks for a read and sends what it returns; a read that does
/// not follow what the follower has (the log was purged) drops it.
#[test]
fn a_follower_behind_the_window_catches_up_from_the_log() {
    let mut l = flowing_leader(4);
    l.link_queue(ServerId(3), 101);
    let zxids = propose_n(&mut l, 10);
    l.handle_persisted(zxids[9]);
    l.handle_message(1, ServerId(2), ZabMessage::Ack { zxid: zxids[9] });
    drain_leader(&mut l);
    // Synced before the epoch began: its cursor is where the log was then.
    let after = Zxid::ZERO;
    l.link_queue(ServerId(3), 0);
    assert_eq!(
        drain_leader(&mut l),
        vec![ZabCommand::ReadLog {
            to: ServerId(3),
            after,
            max_bytes: 50,
        }]
    );
    let read: Vec<(Zxid, Bytes)> = zxids[..3]
        .iter()
        .map(|z| (*z, Bytes::from(vec![7; 20])))
        .collect();
    l.logged_for(ServerId(3), after, read);
    let out = drain_leader(&mut l);
    assert_eq!(sent_to(&out, 3), (zxids[..3].to_vec(), vec![zxids[2]]));
    // The next read comes back with a gap: the follower syncs again.
    l.link_queue(ServerId(3), 0);
    assert!(matches!(
        drain_leader(&mut l)[..],
        [ZabCommand::ReadLog { after, .. }] if after == zxids[2]
    ));
    let gap = vec![(zxids[5], Bytes::from(vec![7; 20]))];
    l.logged_for(ServerId(3), zxids[2], gap);
    assert_eq!(
        drain_leader(&mut l),
        vec![ZabCommand::Disconnect { peer: ServerId(3) }]
    );
}

/// Issue 14, S4: a follower whose log cannot be cut as low as the TRUNC it
/// would get (no snapshot it can rebuild from lies below the cut) gets a
/// SNAP; with the cut within reach, the TRUNC.
#[test]
fn a_trunc_below_what_the_follower_can_rebuild_becomes_a_snap() {
    sync_of_a_follower_ahead(
        Zxid::ZERO,
        ZabMessage::Trunc {
            zxid: Zxid::new(1, 3),
        },
    );
    sync_of_a_follower_ahead(
        Zxid::new(1, 3),
        ZabMessage::Trunc {
            zxid: Zxid::new(1, 3),
        },
    );
    let snap = ZabCommand::SendSnapshot { to: ServerId(2) };
    let out = sync_of_a_follower_ahead(
        Zxid::new(1, 4),
        ZabMessage::Ping {
            zxid: Zxid::ZERO,
            touches: Vec::new(),
        },
    );
    assert!(out.contains(&snap), "{out:?}");
}

/// Leader 1, with txns 1..=3 of epoch 1 and the first of epoch 2, syncs
/// follower 2, which logged 1..=5 of epoch 1 (two lone txns of a leader
/// that never got them committed) and can cut its log back to `log_base`
/// at the lowest. Fails unless `first` is among the messages it sends 2,
/// unless `first` is a ping; returns all it did.
fn sync_of_a_follower_ahead(log_base: Zxid, first: ZabMessage) -> Vec<ZabCommand> {
    let z = |c| Zxid::new(1, c);
    let mut l = Leader::new(
        ServerId(1),
        voters(3),
        TIMING,
        state(2, 2, &[z(1), z(2), z(3), Zxid::new(2, 1)]),
        Zxid::new(2, 1),
        0,
    );
    l.handle_message(
        0,
        ServerId(2),
        ZabMessage::FollowerInfo { accepted_epoch: 1 },
    );
    l.handle_reached(0, 1);
    l.handle_message(0, ServerId(2), ack_epoch_of(1, z(5), log_base));
    l.handle_reached(0, 2);
    let out = drain_leader(&mut l);
    if !matches!(first, ZabMessage::Ping { .. }) {
        assert!(out.contains(&send(2, first)), "{out:?}");
    }
    out
}

#[cfg(feature = "failpoints")]
#[test]
fn planted_trunc_below_log_base_is_caught() {
    use crate::failpoints::{planted, Failpoint};
    let outcome = planted::with(Failpoint::TruncBelowLogBase, || {
        std::panic::catch_unwind(a_trunc_below_what_the_follower_can_rebuild_becomes_a_snap)
    });
    assert!(
        outcome.is_err(),
        "trunc-below-log-base planted, and nothing failed"
    );
}

/// Each wait of the establishment has initLimit of its own, as in
/// ZooKeeper's leader (`getEpochToPropose`, `waitForEpochAck`,
/// `waitForNewLeaderAck`): a leader whose whole establishment takes longer
/// than one initLimit (1 s here), each wait shorter, is established.
#[test]
fn each_wait_of_the_establishment_has_its_own_init_limit() {
    let z = |c| Zxid::new(1, c);
    let mut l = leader_after_epoch_1();
    l.handle_timeout(900);
    l.handle_message(
        900,
        ServerId(2),
        ZabMessage::FollowerInfo { accepted_epoch: 1 },
    );
    l.handle_reached(950, 1);
    l.handle_timeout(1_800);
    l.handle_message(1_800, ServerId(2), ack_epoch_of(1, z(1), Zxid::ZERO));
    l.handle_reached(1_850, 2);
    l.handle_timeout(2_700);
    l.handle_message(
        2_700,
        ServerId(2),
        ZabMessage::Ack {
            zxid: epoch_zxid(2),
        },
    );
    let out = drain_leader(&mut l);
    assert!(l.is_established(), "{out:?}");
    // A wait that passes its own initLimit still ends the role.
    let mut slow = leader_after_epoch_1();
    slow.handle_message(
        10,
        ServerId(2),
        ZabMessage::FollowerInfo { accepted_epoch: 1 },
    );
    slow.handle_reached(20, 1);
    slow.handle_timeout(1_020);
    let out = drain_leader(&mut slow);
    assert!(
        matches!(out.last(), Some(ZabCommand::Abandon { reason }) if reason.contains("initLimit")),
        "{out:?}"
    );
}

/// Leader 1 of 3 starting at 0, its log one txn of epoch 1 long.
fn leader_after_epoch_1() -> Leader {
    let z1 = Zxid::new(1, 1);
    Leader::new(ServerId(1), voters(3), TIMING, state(1, 1, &[z1]), z1, 0)
}

/// A follower's ACKEPOCH: its currentEpoch, last zxid and lowest cut; no SNAP asked for.
fn ack_epoch_of(current_epoch: u32, last_zxid: Zxid, log_base: Zxid) -> ZabMessage {
    ZabMessage::AckEpoch {
        current_epoch: Some(current_epoch),
        last_zxid,
        log_base,
        wants_snapshot: false,
    }
}

#[path = "observer_tests.rs"]
mod observer_tests;

#[cfg(test)]
#[path = "reconfig_tests.rs"]
mod reconfig_tests;

#[path = "sync_limit_tests.rs"]
mod sync_limit_tests;
