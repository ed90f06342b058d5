//! The fault catalogue's rows as scripts (shared/spec/fault-catalogue.md §3.3).

use super::Scenario;

fn seeds() -> impl Iterator<Item = u64> {
    1..=20
}

/// ZOOKEEPER-1154/1156: a leader logs a txn nobody else has, dies; the
/// others move on in a new epoch; on return its txn is truncated (TRUNC
/// before DIFF), never delivered anywhere, and it converges.
#[test]
fn zk_1154_a_dead_leaders_lone_txn_is_truncated_on_its_return() {
    for seed in seeds() {
        let run = || -> Result<(), String> {
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
        };
        run().unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    }
}

/// ZOOKEEPER-335/1081: leaders fail one after another, one of them after it
/// chose and persisted its epoch but before it was established: no epoch is
/// ever established twice (the checker holds one leader per epoch).
#[test]
fn zk_335_cascading_leader_failures_never_reuse_an_epoch() {
    for seed in seeds() {
        let run = || -> Result<(), String> {
            let mut s = Scenario::new(seed, 3);
            s.run_until("a first leader", 10_000, |s| s.leader().is_some())?;
            let first = s.leader().ok_or("no leader")?;
            let first_epoch = s.epoch().ok_or("no epoch")?;
            s.crash(first);
            let ids = [1, 2, 3].map(crate::core::election::ServerId);
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
        };
        run().unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    }
}

/// ZOOKEEPER-3911/4643/4646: every member loses power right after a leader
/// is established and followers were synced: every acknowledged write
/// survives (followers made their sync durable before acknowledging it).
#[test]
fn zk_3911_a_correlated_outage_after_sync_loses_no_acknowledged_write() {
    for seed in seeds() {
        let run = || -> Result<(), String> {
            let mut s = Scenario::new(seed, 3);
            s.run_until("writes acknowledged", 10_000, |s| s.acknowledged() > 30)?;
            let leader = s.leader().ok_or("no leader")?;
            s.crash(leader);
            s.run_until("a new leader", 10_000, |s| s.leader().is_some())?;
            // Right after its establishment: the followers' sync is fresh.
            s.crash_all();
            for id in [1, 2, 3] {
                s.restart(crate::core::election::ServerId(id));
            }
            s.finish()
        };
        run().unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    }
}
