//! Scripted whole-member runs of issue 14's findings, with clients reading
//! and writing throughout: each script reaches its dangerous moment (and
//! fails if it does not), while every invariant of the random runs holds.

use super::script::Script;
use super::trap::{Action, Moment};
use super::SyncKind;
use crate::core::election::ServerId;
use crate::core::zab::ZabMessage;
use zkd_protocol::Zxid;

/// How a follower leaves and comes back.
#[derive(Clone, Copy, Debug)]
pub(super) enum Rejoin {
    /// Its link to the leader breaks and heals: its tree stays as it was.
    Blip,
    /// It loses power and restarts: recovery replays its whole log.
    Restart,
}

/// Finding 1 with whole members: 5 members, three followers' disks stall,
/// so the leader's proposals reach only its own disk and F1's and cannot
/// commit. F1 leaves and rejoins the same leader; its sync must be a TRUNC
/// below them, and while it serves, none of them may be visible there (the
/// visibility check runs every millisecond; F1's clients read meanwhile).
/// Then the disks resume and everything commits.
pub(super) fn rejoin_with_uncommitted(seed: u64, how: Rejoin) -> Result<(), String> {
    // The stalled members acknowledge nothing until the end: a leader drops
    // such a follower after syncLimit (ZooKeeper's SyncLimitCheck), so
    // syncLimit here (10 s) outlasts the row.
    let mut s = Script::with_sync_limit(seed, 5, 100);
    let leader = s.settled_leader()?;
    let others = s.others(leader);
    let (f1, slow) = (others[0], others[1..].to_vec());
    for id in &slow {
        s.stall_disk(*id);
    }
    // Nothing past what the stalled disks hold can commit.
    let committable = slow
        .iter()
        .map(|id| s.last_logged(*id))
        .max()
        .unwrap_or(Zxid::ZERO);
    s.run_until("the leader and F1 log five uncommitted txns", 3_000, |s| {
        let last = s.last_logged(leader);
        last.0 >= committable.0 + 5 && s.logged(f1, last)
    })?;
    let uncommitted = s.last_logged(leader);
    let rejoined_at = s.now();
    match how {
        Rejoin::Blip => {
            s.cut(leader, f1);
            s.heal();
        }
        Rejoin::Restart => {
            s.crash(f1);
            s.restart(f1)?;
        }
    }
    s.run_until("F1 stops serving", 1_000, |s| !s.serving(f1))?;
    s.run_until("F1 follows the same leader again and serves", 10_000, |s| {
        s.serving(f1) && s.following(f1) == Some(leader)
    })?;
    if s.leader() != Some(leader) {
        return Err("the leader stepped down: the moment was missed".into());
    }
    match s.syncs_to(f1, rejoined_at).first() {
        Some((SyncKind::Trunc, to)) if *to <= committable => {}
        other => {
            return Err(format!(
                "expected a TRUNC to at most {committable}, got {other:?}"
            ))
        }
    }
    s.run_for(500)?;
    for id in &slow {
        s.unstall_disk(*id);
    }
    s.run_until("the txns commit and F1 shows them", 5_000, |s| {
        s.tree_at(f1) >= uncommitted
    })?;
    s.finish()
}

/// Finding 3 with whole members: a follower's tree goes wrong in memory
/// while it serves and writes go on. The leader's next COMMIT carries its
/// digest; the follower must stop serving at once, rebuild from its disk
/// and resync by SNAP.
pub(super) fn a_damaged_follower_resyncs(seed: u64) -> Result<(), String> {
    let mut s = Script::new(seed, 3);
    let leader = s.settled_leader()?;
    let follower = s.others(leader)[0];
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
    s.finish()
}

/// A leader stopped past its followers' patience, its clients' requests
/// waiting in its sockets: the others elect a leader and go on writing.
/// When it runs again it reads what waited (its clients' reads and syncs,
/// acks of its old epoch, the close of its links) and must answer no sync
/// from its stale tree and commit nothing more of its own: it ends up
/// following the new leader, with the writes made meanwhile.
pub(super) fn a_paused_leader_rejoins(seed: u64) -> Result<(), String> {
    let mut s = Script::new(seed, 3);
    let old = s.leader_with_writes(20)?;
    let before = s.leading_epoch(old).ok_or("no epoch")?;
    s.pause(old, 4_000);
    let others = s.others(old);
    s.run_until("another leader, while the old one is stopped", 3_500, |s| {
        others.iter().any(|id| s.leader() == Some(*id))
    })?;
    if !s.is_paused(old) {
        return Err("the old leader ran again before another was elected".into());
    }
    let new = s.leader().ok_or("no new leader")?;
    s.more_writes(10, 3_000)?;
    s.run_until("the old leader follows the new one", 8_000, |s| {
        s.following(old) == Some(new)
    })?;
    match s.leading_epoch(new) {
        Some(epoch) if epoch > before => {}
        other => {
            return Err(format!(
                "the new leader's epoch is {other:?}, not above {before}"
            ))
        }
    }
    s.finish()
}

/// ZOOKEEPER-4712: a follower loses its leader (the leader is cut off from
/// everyone) right after it received a proposal, its append still queued.
/// Its role ends only after its storage queue ran, so its tree is on its
/// disk; it resyncs with the new leader, and nothing of the old role lands
/// afterwards: a restart later recovers every acknowledged create.
pub(super) fn a_follower_losing_its_leader_with_queued_appends(seed: u64) -> Result<(), String> {
    let mut s = Script::new(seed, 3);
    let old = s.leader_with_writes(20)?;
    let f = s.others(old)[(seed % 2) as usize];
    s.at(move |sim, moment| match moment {
        Moment::Received {
            from,
            to,
            message: ZabMessage::Proposal { .. },
        } if *from == old && *to == f && sim.serving(f) => Some(Action::Isolate(old)),
        _ => None,
    });
    s.until_sprung("the leader cut off while an append is queued", 5_000)?;
    if s.queued(f) == 0 {
        return Err("the follower's append was not queued when its leader went".into());
    }
    s.run_until("its role ends and its queue runs", 1_000, |s| {
        !s.serving(f) && s.queued(f) == 0
    })?;
    let tree = s.tree_at(f);
    if tree != Zxid::ZERO && !s.logged(f, tree) {
        return Err(format!("member {f}'s tree is at {tree}, beyond its disk"));
    }
    s.run_until("a new leader with it", 10_000, |s| {
        s.leader().is_some_and(|l| l != old) && s.serving(f)
    })?;
    s.more_writes(10, 10_000)?;
    s.restart_keeps_acked(f)?;
    s.finish()
}

/// A follower that went down in an old epoch, while the others moved on.
pub(super) struct Behind {
    pub s: Script,
    pub behind: ServerId,
    /// Where its disk ended when it went down.
    pub end: Zxid,
    /// Its currentEpoch, the old leader's.
    pub old_epoch: u32,
    /// The epoch of the leader it will sync with.
    pub new_epoch: u32,
    pub leader: ServerId,
}

/// Three members; `behind` loses power while the others commit `missed`
/// creates, then the leader loses power and restarts, the other two
/// establish a new epoch and commit `new_writes` more. `behind`, still
/// down, is about to restart and be synced into the new epoch. Members
/// snapshot after about `snap_count` txns.
pub(super) fn behind_in_new_epoch(
    seed: u64,
    missed: u64,
    new_writes: u64,
    snap_count: u64,
) -> Result<Behind, String> {
    let mut s = Script::snapshotting(seed, 3, snap_count);
    let old = s.leader_with_writes(20)?;
    let old_epoch = s.epoch().ok_or("no epoch")?;
    let behind = s.others(old)[(seed % 2) as usize];
    s.run_until("it serves", 5_000, |s| s.serving(behind))?;
    s.crash(behind);
    s.more_writes(missed, 20_000)?;
    s.crash(old);
    s.restart(old)?;
    s.run_until("a new epoch without it", 10_000, |s| {
        s.epoch().is_some_and(|e| e > old_epoch)
    })?;
    s.more_writes(new_writes, 10_000)?;
    let (new_epoch, leader) = (s.epoch().ok_or("no epoch")?, s.leader().ok_or("no leader")?);
    let end = s.disk_end(behind);
    if s.epochs_on_disk(behind).1 != old_epoch {
        return Err(format!(
            "member {behind} is not behind: epochs {:?}",
            s.epochs_on_disk(behind)
        ));
    }
    Ok(Behind {
        s,
        behind,
        end,
        old_epoch,
        new_epoch,
        leader,
    })
}

/// The one-line command that replays this test's script for `seed`, with
/// the members' logs and the simulator's faults.
pub(super) fn replay(seed: u64) -> String {
    let test = std::thread::current().name().unwrap_or("sim").to_owned();
    format!(
        "replay: ZKD_SIM_SEED={seed} ZKD_LOG=info ZKD_SIM_TRACE=1 cargo test -p zkd-server \
         --features failpoints --lib {test} -- --exact --nocapture"
    )
}

/// Runs `script` for seeds 1..=10 (or `ZKD_SIM_SEED`); a failure names its seed.
pub(super) fn each_seed(script: impl Fn(u64) -> Result<(), String>) {
    let seeds: Vec<u64> = match std::env::var("ZKD_SIM_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        Some(seed) => vec![seed],
        None => (1..=10).collect(),
    };
    // ZKD_LOG=info shows what the members log, as a zkd process does.
    if let Ok(filter) = tracing_subscriber::EnvFilter::try_from_env("ZKD_LOG") {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_test_writer()
            .try_init();
    }
    for seed in seeds {
        if let Err(e) = script(seed) {
            panic!("seed {seed}: {e}\n{}", replay(seed));
        }
    }
}

#[test]
fn a_follower_whose_link_blipped_serves_no_uncommitted_txn() {
    each_seed(|seed| rejoin_with_uncommitted(seed, Rejoin::Blip));
}

#[test]
fn a_restarted_follower_serves_no_uncommitted_txn() {
    each_seed(|seed| rejoin_with_uncommitted(seed, Rejoin::Restart));
}

#[test]
fn a_follower_whose_tree_diverged_stops_serving_and_resyncs_by_snap() {
    each_seed(a_damaged_follower_resyncs);
}

#[test]
fn zk_4712_a_follower_losing_its_leader_with_queued_appends_resyncs_cleanly() {
    each_seed(a_follower_losing_its_leader_with_queued_appends);
}

#[test]
fn a_leader_paused_past_its_followers_patience_rejoins_as_a_follower() {
    each_seed(a_paused_leader_rejoins);
}

/// Runs `script` over the first 10 seeds with `failpoint` planted: one of
/// them must fail, with a failure that names one of `kinds`.
#[cfg(feature = "failpoints")]
pub(super) fn assert_script_catches(
    failpoint: crate::failpoints::Failpoint,
    script: impl Fn(u64) -> Result<(), String>,
    kinds: &[&str],
) {
    use crate::failpoints::planted;
    let failure = (1..=10).find_map(|seed| planted::with(failpoint, || script(seed).err()));
    let Some(failure) = failure else {
        panic!("{} planted, and no seed caught it", failpoint.name());
    };
    assert!(kinds.iter().any(|k| failure.contains(k)), "{failure}");
    eprintln!("{} caught: {failure}", failpoint.name());
}

#[cfg(feature = "failpoints")]
#[test]
fn planted_serve_diverged_caught_with_whole_members() {
    assert_script_catches(
        crate::failpoints::Failpoint::ServeDiverged,
        a_damaged_follower_resyncs,
        // Serving on, it also saves its damaged tree in a local snapshot.
        &["stops serving", "snapshot:"],
    );
}

#[cfg(feature = "failpoints")]
#[test]
fn planted_diff_uncommitted_caught_with_whole_members() {
    assert_script_catches(
        crate::failpoints::Failpoint::DiffUncommitted,
        |seed| rejoin_with_uncommitted(seed, Rejoin::Restart),
        &["visibility:", "expected a TRUNC"],
    );
}
