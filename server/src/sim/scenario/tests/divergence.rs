//! A member whose tree diverged from the leader's stops serving at once and
//! resyncs (issue 14, finding 3; ZOOKEEPER-2846): the leader's COMMIT
//! carries its tree's digest, and a follower whose tree differs at the same
//! zxid rebuilds from its disk and asks for a SNAP.

use super::{each_seed, leader_with_writes};
use crate::sim::scenario::Scenario;
use crate::sim::SyncKind;

/// A follower's tree goes wrong in memory while it serves; writes go on.
pub(super) fn a_damaged_follower_resyncs(seed: u64) -> Result<(), String> {
    let mut s = Scenario::new(seed, 3);
    let leader = leader_with_writes(&mut s, 20)?;
    let follower = s.others(leader)[0];
    s.run_until("the follower serves", 5_000, |s| s.serving(follower))?;
    let since = s.now();
    s.damage_tree(follower);
    s.run_until("the follower stops serving", 500, |s| !s.serving(follower))?;
    s.run_until("the follower serves again", 10_000, |s| s.serving(follower))?;
    match s.syncs_to(follower, since).first() {
        Some((SyncKind::Snap, _)) => {}
        other => {
            return Err(format!(
                "expected a SNAP after the divergence, got {other:?}"
            ))
        }
    }
    // Convergence (equal digests at equal zxids) is checked at the end.
    s.finish()
}

#[test]
fn a_follower_whose_tree_diverged_stops_serving_and_resyncs_by_snap() {
    each_seed(a_damaged_follower_resyncs);
}
