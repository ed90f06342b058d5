//! A member's recent history: the txns it has logged, kept in memory so a
//! leader can bring a follower up to date by DIFF without reading its disk,
//! and the rule that picks DIFF, TRUNC+DIFF or SNAP for a follower.

use crate::failpoints::{active, Failpoint};
use bytes::Bytes;
use std::collections::VecDeque;
use zkd_protocol::Zxid;

/// Bytes of txns a history keeps at most. A DIFF is queued on the quorum
/// link at once, and a link whose queue passes 256 MiB closes: a DIFF
/// larger than that could never be sent, and the follower would be synced
/// again and again. Whoever is further behind gets a SNAP, which is paced.
const MAX_BYTES: usize = 64 << 20;

/// The newest logged txns, in zxid order, and what precedes them.
#[derive(Clone, Debug)]
pub struct History {
    /// The zxid just before the oldest kept txn: everything up to it is in
    /// the tree (or a snapshot) but no longer here one by one.
    base: Zxid,
    entries: VecDeque<(Zxid, Bytes)>,
    max_entries: usize,
    /// Bytes of the kept txns, and the most kept.
    bytes: usize,
    max_bytes: usize,
}

/// How a leader brings one follower to its history.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncPlan {
    /// The follower's log is a prefix of ours: send the txns after `after`.
    Diff { after: Zxid },
    /// The follower has txns we never had after `to`: it drops them, then
    /// gets the txns after `to`.
    TruncThenDiff { to: Zxid },
    /// Too far behind, or diverged in a way we cannot see: a snapshot of our
    /// tree, then what follows it.
    Snap,
}

impl History {
    /// A history whose txns up to `base` are no longer kept one by one.
    pub fn new(base: Zxid, max_entries: usize) -> History {
        History {
            base,
            entries: VecDeque::new(),
            max_entries: max_entries.max(1),
            bytes: 0,
            max_bytes: MAX_BYTES,
        }
    }

    /// The same history keeping at most `max_bytes` of txns.
    #[cfg(test)]
    pub fn with_max_bytes(mut self, max_bytes: usize) -> History {
        self.max_bytes = max_bytes;
        self
    }

    /// Adds the next logged txn; the oldest fall out beyond the window (in
    /// txns or in bytes).
    pub fn push(&mut self, zxid: Zxid, txn: Bytes) {
        debug_assert!(zxid > self.last_zxid(), "history must grow: {zxid}");
        self.bytes += txn.len();
        self.entries.push_back((zxid, txn));
        while self.entries.len() > self.max_entries || self.bytes > self.max_bytes {
            let Some((z, t)) = self.entries.pop_front() else {
                break;
            };
            self.base = z;
            self.bytes -= t.len();
        }
    }

    /// The newest logged zxid.
    pub fn last_zxid(&self) -> Zxid {
        self.entries.back().map_or(self.base, |(z, _)| *z)
    }

    /// The kept txns after `zxid`, newest first.
    pub fn newest_after(&self, zxid: Zxid) -> impl Iterator<Item = (Zxid, &Bytes)> {
        let entries = self.entries.iter().rev();
        entries
            .take_while(move |(z, _)| *z > zxid)
            .map(|(z, t)| (*z, t))
    }

    /// The zxid before the oldest kept txn.
    pub fn base(&self) -> Zxid {
        self.base
    }

    /// Drops every txn after `zxid` (a TRUNC). Below the window the base moves down.
    pub fn truncate_after(&mut self, zxid: Zxid) {
        while self.entries.back().is_some_and(|(z, _)| *z > zxid) {
            if let Some((_, t)) = self.entries.pop_back() {
                self.bytes -= t.len();
            }
        }
        if self.entries.is_empty() && self.base > zxid {
            self.base = zxid;
        }
    }

    /// Forgets every kept txn: the history now starts after `base` (a SNAP).
    pub fn reset(&mut self, base: Zxid) {
        self.entries.clear();
        self.bytes = 0;
        self.base = base;
    }

    /// The kept txns after `after`, in order.
    pub fn after(&self, after: Zxid) -> impl Iterator<Item = &(Zxid, Bytes)> + '_ {
        let start = self.entries.partition_point(|(z, _)| *z <= after);
        self.entries.range(start..)
    }

    /// The txn `zxid`, if kept.
    pub fn get(&self, zxid: Zxid) -> Option<&Bytes> {
        let i = self.entries.partition_point(|(z, _)| *z < zxid);
        self.entries
            .get(i)
            .filter(|(z, _)| *z == zxid)
            .map(|(_, t)| t)
    }

    /// The newest kept zxid at or before `zxid`, or the base.
    fn last_at_or_before(&self, zxid: Zxid) -> Zxid {
        let i = self.entries.partition_point(|(z, _)| *z <= zxid);
        match i {
            0 => self.base,
            i => self.entries[i - 1].0,
        }
    }

    /// How to bring a follower whose log ends at `peer_last` to this history.
    ///
    /// zxids name txns uniquely (one leader per epoch), so two logs that both
    /// hold Z agree up to Z. A follower that holds Z holds every earlier zxid
    /// of Z's epoch (logs are gapless within an epoch, or start at a snapshot
    /// that covers them). So the common point is the newest zxid we have at or
    /// before `peer_last`, provided it is in `peer_last`'s epoch; otherwise we
    /// cannot tell what the follower shares with us and send a snapshot. This
    /// is ZooKeeper's rule (ZOOKEEPER-1154: TRUNC before DIFF), with SNAP
    /// where ZooKeeper would TRUNC across an epoch (ZOOKEEPER-2832).
    pub fn plan_sync(&self, peer_last: Zxid) -> SyncPlan {
        let planted = peer_last == Zxid::ZERO && active(Failpoint::DiffForEmptyLearner);
        if peer_last == self.last_zxid() || planted {
            return SyncPlan::Diff { after: peer_last };
        }
        if peer_last < self.base {
            return SyncPlan::Snap;
        }
        let common = self.last_at_or_before(peer_last);
        if common == peer_last {
            return SyncPlan::Diff { after: peer_last };
        }
        if common == Zxid::ZERO || common.epoch() == peer_last.epoch() {
            SyncPlan::TruncThenDiff { to: common }
        } else {
            SyncPlan::Snap
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn z(epoch: u32, counter: u32) -> Zxid {
        Zxid::new(epoch, counter)
    }

    fn history(zxids: &[Zxid]) -> History {
        let mut h = History::new(Zxid::ZERO, 100);
        for zxid in zxids {
            h.push(*zxid, Bytes::new());
        }
        h
    }

    /// A DIFF never holds more bytes than the history keeps: a follower
    /// behind what fits gets a SNAP.
    #[test]
    fn a_follower_behind_more_bytes_than_kept_gets_a_snap() {
        let mut h = History::new(Zxid::ZERO, 100).with_max_bytes(250);
        for c in 1..=5 {
            h.push(z(1, c), Bytes::from(vec![0u8; 100]));
        }
        assert_eq!(h.base(), z(1, 3));
        assert_eq!(h.after(Zxid::ZERO).count(), 2);
        assert_eq!(h.plan_sync(z(1, 3)), SyncPlan::Diff { after: z(1, 3) });
        assert_eq!(h.plan_sync(z(1, 2)), SyncPlan::Snap);
        h.truncate_after(z(1, 4));
        h.push(z(2, 1), Bytes::from(vec![0u8; 100]));
        assert_eq!(h.base(), z(1, 3), "the cut gave its bytes back");
    }

    #[test]
    fn a_follower_with_a_prefix_gets_a_diff() {
        let h = history(&[z(1, 1), z(1, 2), z(2, 1)]);
        assert_eq!(h.plan_sync(z(1, 2)), SyncPlan::Diff { after: z(1, 2) });
        assert_eq!(h.plan_sync(z(2, 1)), SyncPlan::Diff { after: z(2, 1) });
        assert_eq!(
            h.plan_sync(Zxid::ZERO),
            SyncPlan::Diff { after: Zxid::ZERO }
        );
        let tail: Vec<Zxid> = h.after(z(1, 1)).map(|(z, _)| *z).collect();
        assert_eq!(tail, vec![z(1, 2), z(2, 1)]);
    }

    #[test]
    fn an_uncommitted_tail_of_an_old_epoch_is_truncated_first() {
        // ZOOKEEPER-1154: A logged <7,4> alone; B led epoch 8 from <7,3>.
        let h = history(&[z(7, 2), z(7, 3), z(8, 1)]);
        assert_eq!(
            h.plan_sync(z(7, 4)),
            SyncPlan::TruncThenDiff { to: z(7, 3) }
        );
        // A follower ahead of everything we have in its epoch.
        let h = history(&[z(7, 2), z(7, 3)]);
        assert_eq!(
            h.plan_sync(z(7, 9)),
            SyncPlan::TruncThenDiff { to: z(7, 3) }
        );
    }

    #[test]
    fn divergence_across_an_epoch_needs_a_snapshot() {
        // The follower has <5,2> from an epoch we never saw; our newest
        // before it is from epoch 4, which it may not share with us.
        let h = history(&[z(4, 7), z(6, 1)]);
        assert_eq!(h.plan_sync(z(5, 2)), SyncPlan::Snap);
    }

    #[test]
    fn a_follower_behind_the_window_gets_a_snapshot() {
        let mut h = History::new(Zxid::ZERO, 2);
        for c in 1..=5 {
            h.push(z(1, c), Bytes::new());
        }
        assert_eq!(h.base(), z(1, 3));
        assert_eq!(h.plan_sync(z(1, 2)), SyncPlan::Snap);
        assert_eq!(h.plan_sync(z(1, 3)), SyncPlan::Diff { after: z(1, 3) });
        assert_eq!(h.get(z(1, 4)), Some(&Bytes::new()));
        assert_eq!(h.get(z(1, 3)), None);
    }

    #[test]
    fn truncation_and_reset() {
        let mut h = history(&[z(1, 1), z(1, 2), z(1, 3)]);
        h.truncate_after(z(1, 1));
        assert_eq!(h.last_zxid(), z(1, 1));
        h.reset(z(3, 9));
        assert_eq!((h.base(), h.last_zxid()), (z(3, 9), z(3, 9)));
    }
}
