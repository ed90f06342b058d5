//! Issue 35, finding 4: a member whose tree diverged from its leader's does
//! not lead until a leader's SNAP replaces its tree, across a restart too;
//! and it does not hold up an election that a member with its history can win.

use super::script::Script;
use super::scripted::each_seed;
use super::SyncKind;

/// How the diverged member meets the next election.
#[derive(Clone, Copy, Debug)]
pub(super) enum Next {
    /// Still running, its tree rebuilt from its disk.
    Running,
    /// Restarted from its disk, which holds the damage too.
    Restarted,
}

/// The follower that would win a tie goes wrong, on its disk too (a local
/// snapshot of the damaged tree), and finds out at the next COMMIT. Then
/// the leader stops: of the two left, the diverged one has the higher id
/// and as much history, so an election that forgot the divergence picks
/// it, and it would lead with the wrong tree.
pub(super) fn diverged_then_leader_stops(seed: u64, next: Next) -> Result<(), String> {
    let mut s = Script::new(seed, 3);
    let leader = s.leader_with_writes(20)?;
    let followers = s.others(leader);
    let (other, diverged) = (followers[0], followers[1]);
    s.hold_writes();
    s.run_until("every member at the same zxid", 5_000, |s| {
        let at = s.tree_at(leader);
        s.queued(leader) == 0 && s.ids().iter().all(|id| s.tree_at(*id) == at)
    })?;
    s.damage_tree(diverged);
    s.snapshot(diverged)?;
    let since = s.now();
    s.release_writes();
    s.run_until("the divergence is noted on its disk", 2_000, |s| {
        s.diverged_on_disk(diverged).is_some()
    })?;
    s.crash(leader);
    if let Next::Restarted = next {
        s.crash(diverged);
        s.restart(diverged)?;
    }
    let snapped = |s: &Script| {
        s.syncs_to(diverged, since)
            .iter()
            .any(|(kind, _)| *kind == SyncKind::Snap)
    };
    s.run_until_holding(
        "the other follower leads and the diverged one follows it",
        15_000,
        |s| s.leader() == Some(other) && s.serving(diverged),
        |s| match s.leader() {
            Some(id) if id == diverged && !snapped(s) => Err(format!(
                "member {diverged} leads before a SNAP replaced its diverged tree"
            )),
            _ => Ok(()),
        },
    )?;
    if s.diverged_on_disk(diverged).is_some() {
        return Err(format!(
            "member {diverged}'s SNAP left its divergence noted"
        ));
    }
    s.restart(leader)?;
    s.run_until("all three serve", 10_000, |s| {
        s.ids().iter().all(|id| s.serving(*id))
    })?;
    s.finish()
}

#[test]
fn a_diverged_member_does_not_lead() {
    each_seed(|seed| diverged_then_leader_stops(seed, Next::Running));
}

#[test]
fn a_diverged_member_does_not_lead_after_a_restart() {
    each_seed(|seed| diverged_then_leader_stops(seed, Next::Restarted));
}

#[cfg(feature = "failpoints")]
#[test]
fn planted_diverged_may_lead_caught() {
    for next in [Next::Running, Next::Restarted] {
        super::scripted::assert_script_catches(
            crate::failpoints::Failpoint::DivergedMayLead,
            |seed| diverged_then_leader_stops(seed, next),
            // Restarted, the diverged leader may first save its tree in a
            // local snapshot, which the disk check finds.
            &["prefix consistency", "leads before a SNAP", "snapshot:"],
        );
    }
}
