//! ZooKeeper's `SyncLimitCheck`: a synced follower that acknowledges none of
//! the proposals it was sent for syncLimit is dropped, pings or not; one
//! whose acks keep moving, however far behind, stays.

use super::*;

fn disconnected(commands: &[ZabCommand], sid: u64) -> bool {
    (commands.iter())
        .any(|c| matches!(c, ZabCommand::Disconnect { peer } if *peer == ServerId(sid)))
}

/// Runs the leader's ticks from `from_ms` to `to_ms`, followers 2 and 3
/// answering each ping; the commands it gave.
fn ticks(l: &mut Leader, from_ms: u64, to_ms: u64) -> Vec<ZabCommand> {
    let mut out = Vec::new();
    for now in (from_ms..=to_ms).step_by(TIMING.ping_ms() as usize) {
        for sid in [2, 3] {
            let ping = ZabMessage::Ping {
                zxid: Zxid::ZERO,
                touches: Vec::new(),
            };
            l.handle_message(now, ServerId(sid), ping);
        }
        l.handle_timeout(now);
        out.extend(drain_leader(l));
    }
    out
}

#[test]
fn a_follower_that_acknowledges_nothing_within_sync_limit_is_dropped() {
    let mut l = established(1000, &[2, 3]);
    let zxids = propose_n(&mut l, 3);
    l.handle_persisted(zxids[2]);
    l.handle_message(10, ServerId(2), ZabMessage::Ack { zxid: zxids[2] });
    drain_leader(&mut l);
    // Follower 3 pings and acknowledges nothing: kept within syncLimit...
    let within = ticks(&mut l, 50, 50 + TIMING.sync_ms());
    assert!(!disconnected(&within, 3), "dropped within syncLimit");
    // ...and dropped a ping interval past it, as ZooKeeper drops it.
    let past = ticks(&mut l, 100 + TIMING.sync_ms(), 150 + TIMING.sync_ms());
    assert!(disconnected(&past, 3), "kept past syncLimit: {past:?}");
    assert!(
        !disconnected(&past, 2),
        "follower 2 acknowledged everything"
    );
    assert!(l.is_established(), "2 of 3 still make a quorum");
}

#[test]
fn a_slow_follower_whose_acks_keep_moving_stays() {
    let mut l = established(1000, &[2, 3]);
    let zxids = propose_n(&mut l, 40);
    // Follower 3 acknowledges one more proposal each tick: always behind.
    for (i, zxid) in zxids.iter().enumerate() {
        let now = 50 * (i as u64 + 1);
        l.handle_message(now, ServerId(3), ZabMessage::Ack { zxid: *zxid });
        let out = ticks(&mut l, now, now);
        assert!(!disconnected(&out, 3), "dropped at {now} ms, acks moving");
    }
}
