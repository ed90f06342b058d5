//! What a member serves is committed: a follower that logged proposals the
//! leader has not committed yet, and rejoins, must not show them to its
//! clients before they commit (issue 14, finding 1; ZooKeeper's leader
//! TRUNCs such a follower to its last committed zxid). The simulator's
//! visibility invariant (a serving tree holds only txns durable on a
//! quorum) is checked after every step as well.

use super::{each_seed, leader_with_writes};
use crate::core::election::ServerId;
use crate::sim::scenario::Scenario;
use crate::sim::SyncKind;
use zkd_protocol::Zxid;

/// How the follower leaves and comes back.
#[derive(Clone, Copy, Debug)]
pub(super) enum Rejoin {
    /// Its link to the leader breaks and heals: its tree stays as it was.
    Blip,
    /// It loses power and restarts: recovery applies its whole log.
    Restart,
}

/// 5 members: the leader proposes five writes that only one follower
/// (F1) logs, the other three disks being slow. F1 leaves and rejoins the
/// same leader. Until the slow disks catch up, none of the five may be in
/// F1's tree, though F1 serves; then all five are.
pub(super) fn rejoin_with_uncommitted(seed: u64, how: Rejoin) -> Result<(), String> {
    let mut s = Scenario::new(seed, 5);
    let leader = leader_with_writes(&mut s, 20)?;
    s.pause_writes();
    s.run_for(500)?;
    let others = s.others(leader);
    let (f1, slow) = (others[0], others[1..].to_vec());
    for id in &slow {
        s.stall_disk(*id);
    }
    let mut uncommitted = Vec::new();
    for _ in 0..5 {
        uncommitted.push(s.write_on(leader).ok_or("the leader refused a write")?);
    }
    s.run_until("the leader and F1 log the five", 2_000, |s| {
        uncommitted
            .iter()
            .all(|z| s.logged(leader, *z) && s.logged(f1, *z))
    })?;
    let rejoined_at = s.now();
    match how {
        Rejoin::Blip => {
            s.cut(leader, f1);
            s.heal();
        }
        Rejoin::Restart => {
            s.crash(f1);
            s.restart(f1);
        }
    }
    s.run_until("F1 follows the same leader again and serves", 10_000, |s| {
        s.now() > rejoined_at && s.serving(f1) && s.following(f1) == Some(leader)
    })?;
    if !s.is_leader(leader) {
        return Err("the leader stepped down: the moment was missed".into());
    }
    match s.syncs_to(f1, rejoined_at).first() {
        Some((SyncKind::Trunc, to)) if *to < uncommitted[0] => {}
        other => return Err(format!("expected a TRUNC below the five, got {other:?}")),
    }
    shows_none(&s, f1, &uncommitted)?;
    s.run_for(300)?;
    shows_none(&s, f1, &uncommitted)?;
    for id in &slow {
        s.unstall_disk(*id);
    }
    s.run_until("the five commit and F1 shows them", 5_000, |s| {
        uncommitted.iter().all(|z| s.in_tree(f1, *z))
    })?;
    s.finish()
}

#[test]
fn a_follower_whose_link_blipped_serves_no_uncommitted_txn() {
    each_seed(|seed| rejoin_with_uncommitted(seed, Rejoin::Blip));
}

#[test]
fn a_restarted_follower_serves_no_uncommitted_txn() {
    each_seed(|seed| rejoin_with_uncommitted(seed, Rejoin::Restart));
}

fn shows_none(s: &Scenario, id: ServerId, zxids: &[Zxid]) -> Result<(), String> {
    match zxids.iter().find(|z| s.in_tree(id, **z)) {
        Some(z) => Err(format!("member {id} serves the uncommitted {z}")),
        None => Ok(()),
    }
}
