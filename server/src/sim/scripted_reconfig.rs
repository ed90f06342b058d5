//! Scripted reconfig runs with whole members, clients reading and writing
//! throughout: ZooKeeper's reconfig bugs, each reaching its dangerous
//! moment (or failing for missing it), while every invariant of the random
//! runs holds, the membership ones included (`membership`).

use super::membership::server_line;
use super::script::Script;
use super::{SyncKind, Wire};
use crate::core::election::ServerId;
use crate::core::zab::ZabMessage;
use zkd_protocol::records::ReconfigRequest;

/// A reconfig that removes `id`.
fn leaving(id: ServerId) -> ReconfigRequest {
    ReconfigRequest {
        leaving_servers: id.0.to_string(),
        cur_config_id: -1,
        ..ReconfigRequest::default()
    }
}

/// A reconfig that adds `id` back as a voter.
fn joining(id: ServerId) -> ReconfigRequest {
    ReconfigRequest {
        joining_servers: server_line(id.0, false),
        cur_config_id: -1,
        ..ReconfigRequest::default()
    }
}

/// ZOOKEEPER-2172: a reconfig proposed and committed while a follower
/// syncs, between its leader's NEWLEADER and UPTODATE. Of five members, F
/// restarts, and its ACK of NEWLEADER is held at the leader's door while a
/// reconfig removing another follower G commits (the other three are a
/// quorum of both configurations). F got the NEWLEADER from before the
/// change and the COMMITANDACTIVATE after it; once its ACK goes through
/// and it serves, it must count the members the others count. ZooKeeper's
/// learner kept NEWLEADER's configuration and served with the old one.
/// Plain writes commit in the window before and after the reconfig too:
/// the residual variant, where ZooKeeper's learner then also lost track of
/// which of its pending txns the reconfig was.
fn reconfig_while_a_follower_syncs(seed: u64) -> Result<(), String> {
    let mut s = Script::with_membership(seed, 5);
    let leader = s.settled_leader()?;
    let others = s.others(leader);
    let (f, g) = (others[0], others[1]);
    let before = s.config_version(leader);
    s.crash(f);
    // The ACK of NEWLEADER is the one for the epoch's first zxid.
    s.set_aside(move |from, to, wire| {
        let newleader_ack = matches!(
            wire,
            Wire::Zab { message: ZabMessage::Ack { zxid }, .. } if zxid.0 & 0xffff_ffff == 0
        );
        from == f && to == leader && newleader_ack
    });
    s.restart(f)?;
    s.run_until("F's ACK of NEWLEADER held", 5_000, |s| s.aside() > 0)?;
    // Plain writes commit in the window on either side of the reconfig
    // (the residual variant: F's tree then ends past the reconfig).
    s.more_writes(2, 400)?;
    s.reconfig(leaving(g));
    s.run_until("the reconfig commits on the leader", 900, |s| {
        s.config_version(leader) > before
    })?;
    s.more_writes(2, 400)?;
    if s.serving(f) || s.following(f) != Some(leader) {
        return Err(
            "F served, or left its sync, before the reconfig: the moment was missed".into(),
        );
    }
    s.release_aside();
    s.run_until("F serves", 5_000, |s| s.serving(f))?;
    let (ours, theirs) = (s.config_version(f), s.config_version(leader));
    if ours != theirs {
        return Err(format!(
            "ZOOKEEPER-2172: F serves with configuration {ours:x}, its leader with {theirs:x}"
        ));
    }
    s.finish()
}

/// ZOOKEEPER-4352: a new, empty member joins by reconfig after the leader's
/// history no longer starts at zero. Of three members, F is removed, gets
/// a new disk (as a new server in its place), asks to learn and is refused
/// while the configuration leaves it out (a learner is sent the whole
/// tree), and is added back: the reconfig counts on it, and it syncs once
/// the proposal names it. Its sync must be a SNAP; a DIFF of the leader's
/// history leaves it without the txns before that history, and the new
/// configuration's quorum with them. ZooKeeper's leader sent that DIFF when
/// its committed log's lower bound read 0.
fn an_empty_member_joins_after_the_history_moved_on(seed: u64) -> Result<(), String> {
    let mut s = Script::with_membership(seed, 3);
    let leader = s.leader_with_writes(150)?;
    let f = s.others(leader)[0];
    let before = s.config_version(leader);
    s.reconfig(leaving(f));
    s.run_until("F is removed", 2_000, |s| s.config_version(leader) > before)?;
    s.crash(f);
    s.wipe(f)?;
    let since = s.now();
    s.restart(f)?;
    s.run_for(2_000)?;
    if s.serving(f) || !s.syncs_to(f, since).is_empty() {
        return Err("a server the configuration leaves out was synced".into());
    }
    let removed = s.config_version(leader);
    s.reconfig(joining(f));
    s.run_until("F is added back", 2_000, |s| {
        s.config_version(leader) > removed
    })?;
    s.run_until("F, empty, syncs and serves", 5_000, |s| s.serving(f))?;
    match s.syncs_to(f, since).first() {
        Some((SyncKind::Snap, _)) => {}
        other => {
            return Err(format!(
                "ZOOKEEPER-4352: an empty learner was synced by {other:?}"
            ))
        }
    }
    s.run_until("F counts itself a voter again", 2_000, |s| {
        s.config_version(f) == s.config_version(leader)
    })?;
    s.finish()
}

#[test]
fn zk_4352_an_empty_member_joining_by_reconfig_is_synced_whole() {
    super::scripted::each_seed(an_empty_member_joins_after_the_history_moved_on);
}

#[cfg(feature = "failpoints")]
#[test]
fn planted_diff_for_empty_learner_caught() {
    super::scripted::assert_script_catches(
        crate::failpoints::Failpoint::DiffForEmptyLearner,
        an_empty_member_joins_after_the_history_moved_on,
        &["ZOOKEEPER-4352", "prefix consistency", "durability:"],
    );
}

/// ZOOKEEPER-2865's situation: a member down while the membership
/// changed comes back with the configuration it had. Of five members, F
/// is down while a reconfig removes two others (G and H), leaving L, A and
/// F; then L crashes. A alone is no quorum of the new configuration, and
/// F, restarted, counts the old five. F must learn the new configuration
/// from A's notifications (ZooKeeper's election carries it too), so that
/// A and F elect a leader and serve: zkd takes any newer configuration a
/// notification carries while looking.
fn a_member_down_during_a_change_rejoins(seed: u64) -> Result<(), String> {
    let mut s = Script::with_membership(seed, 5);
    let leader = s.leader_with_writes(20)?;
    let others = s.others(leader);
    let (a, f, g, h) = (others[0], others[1], others[2], others[3]);
    let before = s.config_version(leader);
    s.crash(f);
    s.reconfig(ReconfigRequest {
        leaving_servers: format!("{},{}", g.0, h.0),
        cur_config_id: -1,
        ..ReconfigRequest::default()
    });
    s.run_until("G and H are removed", 2_000, |s| {
        s.config_version(leader) > before && s.config_version(a) > before
    })?;
    for id in [leader, g, h] {
        s.crash(id);
    }
    s.restart(f)?;
    if s.config_version(f) >= s.config_version(a) {
        return Err("F came back with the new configuration: the moment was missed".into());
    }
    s.run_until("A and F elect and serve", 10_000, |s| {
        s.serving(a) && s.serving(f)
    })?;
    let (ours, theirs) = (s.config_version(f), s.config_version(a));
    if ours != theirs {
        return Err(format!(
            "F serves with configuration {ours:x}, A with {theirs:x}"
        ));
    }
    s.finish()
}

#[test]
fn zk_2865_a_member_down_during_a_change_learns_it_and_serves() {
    super::scripted::each_seed(a_member_down_during_a_change_rejoins);
}

#[cfg(feature = "failpoints")]
#[test]
fn planted_notified_config_ignored_caught_by_script() {
    super::scripted::assert_script_catches(
        crate::failpoints::Failpoint::NotifiedConfigIgnored,
        a_member_down_during_a_change_rejoins,
        &["A and F elect and serve", "F serves with configuration"],
    );
}

#[test]
fn zk_2172_a_reconfig_committed_during_a_followers_sync_takes_effect_there() {
    super::scripted::each_seed(reconfig_while_a_follower_syncs);
}

#[cfg(feature = "failpoints")]
#[test]
fn planted_uptodate_announced_only_caught() {
    super::scripted::assert_script_catches(
        crate::failpoints::Failpoint::UptodateAnnouncedOnly,
        reconfig_while_a_follower_syncs,
        &["ZOOKEEPER-2172", "membership:"],
    );
}

/// ZOOKEEPER-3829 (with -3814, -3830 and -3842): the membership changed by
/// a rolling restart, reconfig disabled. Members 1-3 start with the servers
/// 1,2,3 and member 4 with 1,2,3,4; 1, 2 and 3 restart one at a time with
/// 1,2,3,4; then leaders restart until member 4 leads. ZooKeeper's members
/// took their leader's configuration over their own zoo.cfg's (3814), and
/// such a leader 4 committed nothing (3829). Each must keep its own: member
/// 4 leads and commits, and every member counts the four.
///
/// zkd's leaders take only their configuration's members as learners (a
/// learner is sent the whole tree), so member 4 does not follow the
/// leader of 1,2,3 as ZooKeeper's does: it serves once a leader's
/// configuration names it (here, once the last of 1-3 restarted). The
/// ensemble commits after every step.
fn a_rolling_restart_adds_a_member(seed: u64) -> Result<(), String> {
    const OLD: [u64; 3] = [1, 2, 3];
    const NEW: [u64; 4] = [1, 2, 3, 4];
    let (four, three) = (ServerId(4), ServerId(3));
    let mut s = Script::with_static_configs(seed, 4, |id| match id {
        4 => NEW.to_vec(),
        _ => OLD.to_vec(),
    });
    s.more_writes(5, 5_000)?;
    s.run_for(2_000)?;
    if s.serving(four) {
        return Err("member 4 learned from a leader whose configuration leaves it out".into());
    }
    counts_its_own(&s, four, &NEW)?;
    for id in [1, 2].map(ServerId) {
        s.crash(id);
        s.restart_with_servers(id, &NEW)?;
        s.run_for(1_000)?;
        counts_its_own(&s, id, &NEW)?;
        s.more_writes(3, 10_000)?;
    }
    // Member 3, still on the old servers, follows a leader they name
    // (ZooKeeper's took its leader's configuration there).
    s.run_until("a leader", 10_000, |s| s.leader().is_some())?;
    if s.leader() != Some(three) {
        s.run_until("member 3 follows", 10_000, |s| s.serving(three))?;
        counts_its_own(&s, three, &OLD)?;
    }
    s.crash(three);
    s.restart_with_servers(three, &NEW)?;
    s.run_until("all four serve", 10_000, |s| {
        s.ids().iter().all(|id| s.serving(*id))
    })?;
    counts_its_own(&s, three, &NEW)?;
    s.more_writes(3, 5_000)?;
    for _ in 0..NEW.len() {
        let leader = s.settled_leader()?;
        if leader == four {
            break;
        }
        s.crash(leader);
        s.run_until("another leader", 10_000, |s| {
            s.leader().is_some_and(|l| l != leader)
        })?;
        s.restart(leader)?;
    }
    if s.leader() != Some(four) {
        return Err("member 4 never led: the moment was missed".into());
    }
    s.more_writes(5, 2_000)
        .map_err(|e| format!("ZOOKEEPER-3829: leader 4 commits nothing ({e})"))?;
    for id in s.ids() {
        counts_its_own(&s, id, &NEW)?;
    }
    s.finish()
}

/// Member `id`, without reconfig, counts the voters of its own zoo.cfg.
fn counts_its_own(s: &Script, id: ServerId, servers: &[u64]) -> Result<(), String> {
    let counted = s.voters_counted_by(id);
    if counted.iter().map(|v| v.0).ne(servers.iter().copied()) {
        return Err(format!(
            "ZOOKEEPER-3814: member {id} counts the voters {counted:?}, not its zoo.cfg's"
        ));
    }
    Ok(())
}

#[test]
fn zk_3829_a_rolling_restart_adds_a_member_that_then_leads() {
    super::scripted::each_seed(a_rolling_restart_adds_a_member);
}

#[cfg(feature = "failpoints")]
#[test]
fn planted_config_handed_on_without_reconfig_caught() {
    super::scripted::assert_script_catches(
        crate::failpoints::Failpoint::ConfigHandedOnWithoutReconfig,
        a_rolling_restart_adds_a_member,
        &["ZOOKEEPER-3814"],
    );
}
