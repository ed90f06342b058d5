//! Pauses: a member stopped with its connections open (a long GC pause,
//! SIGSTOP, a VM freeze). Nothing of it runs while it is stopped, and
//! what was sent to it waits in its sockets, to be read, stale, when it
//! runs again.

use super::{each_seed, leader_with_writes, more_writes};
use crate::sim::scenario::Scenario;

/// A leader stopped past its followers' patience: they elect another and
/// go on writing. When it runs again it reads what waited (acks of its old
/// epoch, the close of its links) and must commit nothing more of its own:
/// it ends up following the new leader with the writes made meanwhile.
pub(super) fn a_paused_leader_rejoins(seed: u64) -> Result<(), String> {
    let mut s = Scenario::new(seed, 3);
    let old = leader_with_writes(&mut s, 20)?;
    let before = s.epoch().unwrap_or_default();
    s.pause(old, 4_000);
    let others = s.others(old);
    s.run_until("another leader, while the old one is stopped", 3_500, |s| {
        others.iter().any(|id| s.is_leader(*id))
    })?;
    if !s.is_paused(old) {
        return Err("the old leader ran again before another was elected".into());
    }
    let new = others.into_iter().find(|id| s.is_leader(*id));
    let new = new.ok_or("no new leader")?;
    more_writes(&mut s, 10, 3_000)?;
    s.run_until("the old leader follows the new one", 8_000, |s| {
        s.following(old) == Some(new)
    })?;
    if s.epoch().unwrap_or_default() <= before {
        return Err("the new leader's epoch is not above the old one's".into());
    }
    // Every acknowledged write on every member, equal trees: checked at the end.
    s.finish()
}

#[test]
fn a_leader_paused_past_its_followers_patience_rejoins_as_a_follower() {
    each_seed(a_paused_leader_rejoins);
}
