//! A reconfig in Zab: from the reconfig txn on, commits need a quorum of
//! the old and of the next configuration; its commit goes out as
//! COMMITANDACTIVATE naming the next leader; a leader left out hands over.

use super::*;

/// Every message of `commands` sent to `to`, as (kind, zxid, designated).
fn sent(commands: &[ZabCommand], to: u64) -> Vec<(&'static str, Zxid, Option<u64>)> {
    let sent = commands.iter().filter_map(|c| match c {
        ZabCommand::Send { to: t, message } if *t == ServerId(to) => Some(message),
        _ => None,
    });
    sent.filter_map(|m| match m {
        ZabMessage::Commit { zxid, .. } => Some(("commit", *zxid, None)),
        ZabMessage::CommitAndActivate {
            zxid, designated, ..
        } => Some(("activate", *zxid, Some(designated.0))),
        _ => None,
    })
    .collect()
}

fn ack(l: &mut Leader, from: u64, zxid: Zxid) {
    l.handle_message(0, ServerId(from), ZabMessage::Ack { zxid });
}

/// Leader 1 of voters 1-3, followers 2 and 3 synced, proposes a reconfig
/// whose configuration is `next`, then one more txn; its own log durable.
fn reconfiguring(next: &[u64]) -> (Leader, Zxid, Zxid) {
    let mut l = established(8, &[2, 3]);
    let reconfig = l.next_zxid().unwrap();
    let next = Members::voting(next.iter().copied().map(ServerId));
    l.propose_reconfig(reconfig, Bytes::from_static(b"reconfig"), next);
    let after = l.next_zxid().unwrap();
    l.propose(after, Bytes::from_static(b"after"));
    l.handle_persisted(after);
    drain_leader(&mut l);
    (l, reconfig, after)
}

#[test]
fn a_reconfig_commits_on_a_quorum_of_the_old_and_of_the_next_members() {
    // Voters 1-3 become 1 and 2: 3's ack is a quorum of the old, not of the next.
    let (mut l, reconfig, after) = reconfiguring(&[1, 2]);
    let before = l.last_committed();
    ack(&mut l, 3, after);
    assert_eq!(l.last_committed(), before, "the next members lack a quorum");
    ack(&mut l, 2, after);
    assert_eq!(l.last_committed(), after);
    let commands = drain_leader(&mut l);
    // The leader still votes: it designates itself, and leads on.
    for follower in [2, 3] {
        assert_eq!(
            sent(&commands, follower),
            [("activate", reconfig, Some(1)), ("commit", after, None)]
        );
    }
    assert!(l.members().is_voter(ServerId(2)) && !l.members().contains(ServerId(3)));
    assert!(l.next_zxid().is_some());
    // Quorums are the next members' from now on: 1 and 2, not 1 and 3.
    let z = l.next_zxid().unwrap();
    l.propose(z, Bytes::from_static(b"later"));
    l.handle_persisted(z);
    ack(&mut l, 3, z);
    assert_eq!(l.last_committed(), after, "3 no longer votes");
    ack(&mut l, 2, z);
    assert_eq!(l.last_committed(), z);
}

#[test]
fn a_leader_the_reconfig_leaves_out_designates_a_voter_and_hands_over() {
    let (mut l, reconfig, after) = reconfiguring(&[2, 3]);
    // 3 acknowledged only the reconfig, 2 everything: 2 is the most up to date.
    ack(&mut l, 3, reconfig);
    ack(&mut l, 2, after);
    assert_eq!(
        l.last_committed(),
        reconfig,
        "nothing after the reconfig commits"
    );
    let commands = drain_leader(&mut l);
    for follower in [2, 3] {
        assert_eq!(sent(&commands, follower), [("activate", reconfig, Some(2))]);
    }
    assert_eq!(l.next_zxid(), None, "it proposes nothing more");
    // At its next tick it steps down.
    l.handle_timeout(TIMING.ping_ms() + 1);
    let commands = drain_leader(&mut l);
    assert!(
        matches!(commands.last(), Some(ZabCommand::Abandon { .. })),
        "{commands:?}"
    );
}

#[test]
fn a_follower_takes_commitandactivate_as_a_commit() {
    let mut f = Follower::new(ServerId(1), TIMING, state(1, 1, &[]), Zxid::ZERO, 0, false);
    f.handle_message(0, ServerId(1), ZabMessage::LeaderInfo { epoch: 2 });
    f.handle_reached(11);
    f.handle_message(0, ServerId(1), ZabMessage::Diff { zxid: Zxid::ZERO });
    let epoch = 2;
    let config = Bytes::new();
    f.handle_message(0, ServerId(1), ZabMessage::NewLeader { epoch, config });
    f.handle_reached(12);
    f.handle_message(0, ServerId(1), ZabMessage::UpToDate);
    let zxid = Zxid::new(2, 1);
    let txn = Bytes::from_static(b"reconfig");
    f.handle_message(0, ServerId(1), ZabMessage::Proposal { zxid, txn });
    drain_follower(&mut f);
    let (designated, digest) = (ServerId(3), None);
    let activate = ZabMessage::CommitAndActivate {
        zxid,
        designated,
        digest,
    };
    f.handle_message(0, ServerId(1), activate);
    let delivered = drain_follower(&mut f);
    assert!(
        matches!(delivered[..], [ZabCommand::Deliver { zxid: z, .. }] if z == zxid),
        "{delivered:?}"
    );
}

#[test]
fn synced_followers_are_reported() {
    let mut l = established(8, &[3]);
    l.handle_message(
        0,
        ServerId(2),
        ZabMessage::FollowerInfo { accepted_epoch: 0 },
    );
    let ack_epoch = ZabMessage::AckEpoch {
        current_epoch: Some(0),
        last_zxid: Zxid::ZERO,
        log_base: Zxid::ZERO,
        wants_snapshot: false,
    };
    l.handle_message(0, ServerId(2), ack_epoch);
    let zxid = epoch_zxid(1);
    l.handle_message(0, ServerId(2), ZabMessage::Ack { zxid });
    let reported = |l: &mut Leader| -> Vec<Vec<ServerId>> {
        (l.drain_commands())
            .filter_map(|c| match c {
                ZabCommand::Synced(s) => Some(s),
                _ => None,
            })
            .collect()
    };
    let all = [1, 2, 3].map(ServerId).to_vec();
    assert_eq!(reported(&mut l), [all]);
    l.peer_disconnected(ServerId(2));
    assert_eq!(reported(&mut l), [vec![ServerId(1), ServerId(3)]]);
}
