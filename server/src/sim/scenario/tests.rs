//! The fault catalogue's rows as scripts (shared/spec/fault-catalogue.md §3.3).
//!
//! Each row runs over 20 seeds. A failure names the seed; to replay one
//! seed of one row with every step printed:
//! `ZKD_SIM_SEED=N ZKD_SIM_TRACE=1 cargo test -p zkd-server sim::scenario::tests::<row>`.
//!
//! Every script asserts that it reached its dangerous moment (the trap
//! sprang, the TRUNC or SNAP happened), so a change that makes it miss the
//! moment fails rather than passes vacuously.

use super::Scenario;
use crate::core::election::ServerId;
use std::panic::{catch_unwind, AssertUnwindSafe};
use zkd_protocol::Zxid;

mod election;
mod snapshots;
mod sync;
mod trunc;

/// The seeds of a row, or only `ZKD_SIM_SEED` when set.
fn seeds() -> Vec<u64> {
    match std::env::var("ZKD_SIM_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        Some(seed) => vec![seed],
        None => (1..=20).collect(),
    }
}

/// Runs `row` for every seed; a failure or a panic names the seed and how
/// to replay it with a trace.
fn each_seed(row: impl Fn(u64) -> Result<(), String>) {
    for seed in seeds() {
        let failure = match catch_unwind(AssertUnwindSafe(|| row(seed))) {
            Ok(Ok(())) => continue,
            Ok(Err(e)) => e,
            Err(panic) => {
                let text = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                format!("panicked: {text}")
            }
        };
        let test = std::thread::current()
            .name()
            .unwrap_or("sim::scenario")
            .to_owned();
        panic!(
            "seed {seed}: {failure}\nreplay: ZKD_SIM_SEED={seed} ZKD_SIM_TRACE=1 \
             cargo test -p zkd-server --lib {test} -- --exact --nocapture"
        );
    }
}

fn id(n: u64) -> ServerId {
    ServerId(n)
}

/// Runs until some trap sprang.
fn until_sprung(s: &mut Scenario, what: &str, limit_ms: u64) -> Result<(), String> {
    let before = s.sprung().len();
    s.run_until(what, limit_ms, |s| s.sprung().len() > before)
}

/// A leader, established, with `writes` acknowledged writes.
fn leader_with_writes(s: &mut Scenario, writes: usize) -> Result<ServerId, String> {
    s.run_until("a leader with writes", 10_000, |s| {
        s.leader().is_some() && s.acknowledged() > writes
    })?;
    s.leader().ok_or_else(|| "no leader".into())
}

/// Runs until `n` more writes are acknowledged.
fn more_writes(s: &mut Scenario, n: usize, limit_ms: u64) -> Result<(), String> {
    let before = s.acknowledged();
    s.run_until("more acknowledged writes", limit_ms, |s| {
        s.acknowledged() >= before + n
    })
}

/// Fails if `zxid`'s write is on `id`'s disk or in its tree.
fn holds_none(s: &Scenario, id: ServerId, zxids: &[Zxid]) -> Result<(), String> {
    let recovered = s.recovered(id)?;
    for zxid in zxids {
        if s.logged(id, *zxid)
            || s.in_tree(id, *zxid)
            || recovered.preorder("/").any(|(_, n)| n.stat.czxid == zxid.0)
        {
            return Err(format!("member {id} still holds the uncommitted {zxid}"));
        }
    }
    Ok(())
}

/// ZOOKEEPER-1154/1156: a leader logs a txn nobody else has, dies; the
/// others move on in a new epoch; on return its txn is truncated (TRUNC
/// before DIFF), never delivered anywhere, and it converges.
#[test]
fn zk_1154_a_dead_leaders_lone_txn_is_truncated_on_its_return() {
    each_seed(|seed| {
        let mut s = Scenario::new(seed, 3);
        s.run_until("a leader with writes", 10_000, |s| {
            s.leader().is_some() && s.acknowledged() > 20
        })?;
        let old = s.leader().ok_or("no leader")?;
        s.isolate(old);
        let orphan = s
            .write_on(old)
            .ok_or("the isolated leader refused a write")?;
        s.run_until("the lone txn durable on the old leader", 2_000, |s| {
            s.logged(old, orphan)
        })?;
        s.crash(old);
        s.heal();
        let before = s.acknowledged();
        s.run_until("a new leader commits", 10_000, |s| {
            s.leader().is_some_and(|l| l != old) && s.acknowledged() > before + 10
        })?;
        s.restart(old);
        s.run_for(3_000)?;
        if s.logged(old, orphan) || s.in_tree(old, orphan) {
            return Err(format!("member {old} still holds its lone txn {orphan}"));
        }
        s.finish()
    });
}

/// ZOOKEEPER-335/1081: leaders fail one after another, one of them after it
/// chose and persisted its epoch but before it was established: no epoch is
/// ever established twice (the checker holds one leader per epoch).
#[test]
fn zk_335_cascading_leader_failures_never_reuse_an_epoch() {
    each_seed(|seed| {
        let mut s = Scenario::new(seed, 3);
        s.run_until("a first leader", 10_000, |s| s.leader().is_some())?;
        let first = s.leader().ok_or("no leader")?;
        let first_epoch = s.epoch().ok_or("no epoch")?;
        s.crash(first);
        let ids = [1, 2, 3].map(id);
        s.run_until("a successor choosing its epoch", 10_000, |s| {
            ids.iter().any(|id| *id != first && s.establishing(*id))
        })?;
        let second = *ids
            .iter()
            .find(|id| **id != first && s.establishing(**id))
            .ok_or("none")?;
        s.crash(second);
        s.restart(first);
        s.run_until("a leader again", 20_000, |s| s.leader().is_some())?;
        let epoch = s.epoch().ok_or("no epoch")?;
        if epoch <= first_epoch {
            return Err(format!("epoch went from {first_epoch} to {epoch}"));
        }
        s.finish()
    });
}

/// ZOOKEEPER-3911/4643/4646: every member loses power right after a leader
/// is established and followers were synced: every acknowledged write
/// survives (followers made their sync durable before acknowledging it).
#[test]
fn zk_3911_a_correlated_outage_after_sync_loses_no_acknowledged_write() {
    each_seed(|seed| {
        let mut s = Scenario::new(seed, 3);
        s.run_until("writes acknowledged", 10_000, |s| s.acknowledged() > 30)?;
        let leader = s.leader().ok_or("no leader")?;
        s.crash(leader);
        s.run_until("a new leader", 10_000, |s| s.leader().is_some())?;
        // Right after its establishment: the followers' sync is fresh.
        s.crash_all();
        for n in [1, 2, 3] {
            s.restart(id(n));
        }
        s.finish()
    });
}

/// Three members; `behind` lost power while the others committed `missed`
/// writes, then the leader lost power and came back, the other two
/// established a new epoch and committed `new_writes` more. `behind`,
/// still down, is about to restart and be synced into the new epoch.
struct Behind {
    s: Scenario,
    behind: ServerId,
    /// Where `behind`'s disk ended when it went down.
    end: Zxid,
    /// `behind`'s currentEpoch, the old leader's.
    old_epoch: u32,
    /// The epoch of the leader `behind` will sync with.
    new_epoch: u32,
    leader: ServerId,
}

fn behind_in_new_epoch(seed: u64, missed: usize, new_writes: usize) -> Result<Behind, String> {
    let mut s = Scenario::new(seed, 3);
    let old = leader_with_writes(&mut s, 20)?;
    let old_epoch = s.epoch().ok_or("no epoch")?;
    let behind = s.others(old)[(seed % 2) as usize];
    s.run_until("it serves", 5_000, |s| s.serving(behind))?;
    s.crash(behind);
    more_writes(&mut s, missed, 5_000)?;
    s.crash(old);
    s.restart(old);
    s.run_until("a new epoch without it", 10_000, |s| {
        s.epoch().is_some_and(|e| e > old_epoch)
    })?;
    more_writes(&mut s, new_writes, 20_000)?;
    let (new_epoch, leader) = (s.epoch().ok_or("no epoch")?, s.leader().ok_or("no leader")?);
    let end = s.disk_end(behind);
    if s.epochs_on_disk(behind).1 != old_epoch || s.acknowledged_zxids().last() <= Some(&end) {
        return Err(format!(
            "member {behind} is not behind: epochs {:?}, disk at {end}",
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
