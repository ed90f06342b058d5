//! Observers in Zab: they sync as followers do, get committed txns as
//! INFORM, and never count towards a quorum.

use super::*;

/// Voters 1, 2 and 3, and observer 4.
fn with_observer() -> Members {
    Members {
        voters: (1..=3).map(ServerId).collect(),
        observers: [ServerId(4)].into(),
    }
}

fn ack_epoch() -> ZabMessage {
    ZabMessage::AckEpoch {
        current_epoch: Some(0),
        last_zxid: Zxid::ZERO,
        log_base: Zxid::ZERO,
        wants_snapshot: false,
    }
}

/// What `to` was sent among `commands`, as (kind, zxid).
fn kinds_sent_to(commands: &[ZabCommand], to: u64) -> Vec<(&'static str, Zxid)> {
    let sent = commands.iter().filter_map(|c| match c {
        ZabCommand::Send { to: t, message } if *t == ServerId(to) => Some(message),
        _ => None,
    });
    sent.filter_map(|m| match m {
        ZabMessage::Proposal { zxid, .. } => Some(("proposal", *zxid)),
        ZabMessage::Commit { zxid, .. } => Some(("commit", *zxid)),
        ZabMessage::Inform { zxid, .. } => Some(("inform", *zxid)),
        _ => None,
    })
    .collect()
}

#[test]
fn an_observer_is_informed_of_commits_and_never_makes_a_quorum() {
    let mut l = Leader::new(
        ServerId(1),
        with_observer(),
        TIMING,
        state(0, 0, &[]),
        Zxid::ZERO,
        0,
    );
    // A connection claiming the observer's id as a follower is dropped.
    l.handle_message(
        0,
        ServerId(4),
        ZabMessage::FollowerInfo { accepted_epoch: 0 },
    );
    assert_eq!(
        drain_leader(&mut l),
        vec![ZabCommand::Disconnect { peer: ServerId(4) }]
    );
    // The leader and an observer are no quorum: no epoch is chosen.
    l.handle_message(
        0,
        ServerId(4),
        ZabMessage::ObserverInfo { accepted_epoch: 0 },
    );
    assert!(drain_leader(&mut l).is_empty(), "an observer has no vote");
    l.handle_message(
        0,
        ServerId(2),
        ZabMessage::FollowerInfo { accepted_epoch: 0 },
    );
    l.handle_reached(0, 1);
    l.handle_message(0, ServerId(4), ack_epoch());
    l.handle_message(0, ServerId(2), ack_epoch());
    l.handle_reached(0, 2);
    drain_leader(&mut l);
    // The observer's ack of NEWLEADER does not establish the epoch.
    let new_leader = || ZabMessage::Ack {
        zxid: epoch_zxid(1),
    };
    l.handle_message(0, ServerId(4), new_leader());
    assert!(!l.is_established(), "an observer's ack makes no quorum");
    l.handle_message(0, ServerId(2), new_leader());
    assert!(l.is_established());
    drain_leader(&mut l);

    let zxid = l.next_zxid().unwrap();
    l.propose(zxid, Bytes::from_static(b"t"));
    l.handle_persisted(zxid);
    let proposed = drain_leader(&mut l);
    assert_eq!(kinds_sent_to(&proposed, 2), vec![("proposal", zxid)]);
    assert!(
        kinds_sent_to(&proposed, 4).is_empty(),
        "observers see no proposals"
    );
    // An observer's ack counts for nothing; the follower's commits, and the
    // observer hears of the txn then.
    l.handle_message(0, ServerId(4), ZabMessage::Ack { zxid });
    assert!(drain_leader(&mut l).is_empty());
    l.handle_message(0, ServerId(2), ZabMessage::Ack { zxid });
    let committed = drain_leader(&mut l);
    assert_eq!(kinds_sent_to(&committed, 2), vec![("commit", zxid)]);
    assert_eq!(kinds_sent_to(&committed, 4), vec![("inform", zxid)]);
}

#[test]
fn an_observer_syncs_committed_txns_only_and_catches_up_with_informs() {
    let mut l = established_among(with_observer(), 1000, &[2]);
    let committed = propose_n(&mut l, 2);
    for &z in &committed {
        l.handle_persisted(z);
        l.handle_message(0, ServerId(2), ZabMessage::Ack { zxid: z });
    }
    let outstanding = propose_n(&mut l, 1)[0];
    drain_leader(&mut l);
    l.handle_message(
        1,
        ServerId(4),
        ZabMessage::ObserverInfo { accepted_epoch: 0 },
    );
    l.handle_message(1, ServerId(4), ack_epoch());
    let sync = drain_leader(&mut l);
    assert_eq!(
        kinds_sent_to(&sync, 4),
        vec![
            ("proposal", committed[0]),
            ("proposal", committed[1]),
            ("commit", committed[1])
        ],
        "the sync holds no outstanding proposal"
    );
    l.handle_message(
        1,
        ServerId(4),
        ZabMessage::Ack {
            zxid: epoch_zxid(1),
        },
    );
    l.handle_persisted(outstanding);
    l.handle_message(1, ServerId(2), ZabMessage::Ack { zxid: outstanding });
    let after = drain_leader(&mut l);
    assert_eq!(kinds_sent_to(&after, 4), vec![("inform", outstanding)]);

    // A lagging observer catches up with INFORMs of committed txns only.
    l.link_queue(ServerId(4), usize::MAX);
    let lagged = propose_n(&mut l, 2);
    l.handle_persisted(lagged[1]);
    l.handle_message(1, ServerId(2), ZabMessage::Ack { zxid: lagged[0] });
    assert!(kinds_sent_to(&drain_leader(&mut l), 4).is_empty(), "paused");
    l.link_queue(ServerId(4), 0);
    assert_eq!(
        kinds_sent_to(&drain_leader(&mut l), 4),
        vec![("inform", lagged[0])],
        "never past the last commit"
    );
    l.handle_message(1, ServerId(2), ZabMessage::Ack { zxid: lagged[1] });
    assert_eq!(
        kinds_sent_to(&drain_leader(&mut l), 4),
        vec![("inform", lagged[1])]
    );
}

#[test]
fn an_observer_logs_and_applies_informs_and_acks_only_newleader() {
    let z = |c| Zxid::new(1, c);
    let mut f = Follower::new(ServerId(1), TIMING, state(1, 1, &[]), Zxid::ZERO, 0, true);
    assert_eq!(
        drain_follower(&mut f),
        vec![send(1, ZabMessage::ObserverInfo { accepted_epoch: 1 })]
    );
    f.handle_message(0, ServerId(1), ZabMessage::LeaderInfo { epoch: 1 });
    f.handle_message(0, ServerId(1), ZabMessage::Diff { zxid: Zxid::ZERO });
    f.handle_message(
        0,
        ServerId(1),
        ZabMessage::NewLeader {
            epoch: 1,
            config: Bytes::new(),
        },
    );
    f.handle_reached(12);
    f.handle_message(0, ServerId(1), ZabMessage::UpToDate);
    drain_follower(&mut f);
    let txn = Bytes::from_static(b"t");
    f.handle_message(
        1,
        ServerId(1),
        ZabMessage::Inform {
            zxid: z(1),
            txn: txn.clone(),
        },
    );
    let digest = None;
    assert_eq!(
        drain_follower(&mut f),
        vec![
            ZabCommand::Storage(StorageOp::Append {
                zxid: z(1),
                txn: txn.clone()
            }),
            ZabCommand::Deliver {
                zxid: z(1),
                txn,
                digest
            },
        ]
    );
    f.handle_persisted(z(1));
    assert!(drain_follower(&mut f).is_empty(), "an observer acks no txn");
}
