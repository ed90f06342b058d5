//! The role's txns in flight, decoded once. A leader keeps each txn it
//! proposes, a follower each proposal it checked before logging it; the
//! commit then applies the kept txn instead of decoding the bytes again
//! (decoding and re-encoding a txn three times on its way were a twelfth
//! of an ensemble's CPU per create, issue 15).

use std::collections::VecDeque;
use zkd_protocol::Zxid;
use zkd_storage::Txn;

/// At most this many are kept; past it the oldest go, to be decoded again
/// if they commit (proposals in flight are far fewer).
const KEPT: usize = 8192;

/// Decoded txns in zxid order, not yet committed.
#[derive(Debug, Default)]
pub(super) struct DecodedTxns {
    txns: VecDeque<Txn>,
    /// The zxids and time stamps of the kept txns not yet durable here (a
    /// txn may commit, and be taken, before this member's own sync ends).
    unsynced: VecDeque<(Zxid, i64)>,
}

impl DecodedTxns {
    /// Keeps `txn`, the newest proposal. One not above the last kept starts
    /// the list over, so it stays in zxid order.
    pub fn keep(&mut self, txn: Txn) {
        if self.txns.back().is_some_and(|t| t.zxid() >= txn.zxid()) {
            self.clear();
        }
        if self.txns.len() == KEPT {
            self.txns.pop_front();
        }
        if self.unsynced.len() == KEPT {
            self.unsynced.pop_front();
        }
        self.unsynced.push_back((txn.zxid(), txn.header.time));
        self.txns.push_back(txn);
    }

    /// Whether `zxid` is the newest kept (a leader's own proposal).
    pub fn holds(&self, zxid: Zxid) -> bool {
        self.txns.back().is_some_and(|t| t.zxid() == zxid)
    }

    /// The kept txn `zxid`, committing now; those before it are dropped, as
    /// commits come in zxid order.
    pub fn take(&mut self, zxid: Zxid) -> Option<Txn> {
        while self.txns.front().is_some_and(|t| t.zxid() < zxid) {
            self.txns.pop_front();
        }
        if self.txns.front()?.zxid() == zxid {
            return self.txns.pop_front();
        }
        None
    }

    /// The leader's time stamp of the kept txn `zxid`.
    pub fn time_of(&self, zxid: Zxid) -> Option<i64> {
        let at = self.txns.binary_search_by_key(&zxid, Txn::zxid).ok()?;
        Some(self.txns[at].header.time)
    }

    /// Calls `each` with the leader's time stamp of every kept txn the sync
    /// through `zxid` made durable.
    pub fn persisted(&mut self, zxid: Zxid, mut each: impl FnMut(i64)) {
        while let Some(&(_, time)) = self.unsynced.front().filter(|(z, _)| *z <= zxid) {
            self.unsynced.pop_front();
            each(time);
        }
    }

    /// Forgets every kept txn: the role ended, or the log was cut or replaced.
    pub fn clear(&mut self) {
        self.txns.clear();
        self.unsynced.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zkd_protocol::records::{ErrorTxn, TxnHeader};
    use zkd_storage::TxnBody;

    fn txn(zxid: i64) -> Txn {
        Txn {
            header: TxnHeader {
                client_id: 1,
                cxid: 0,
                zxid,
                time: 0,
                r#type: -1,
            },
            body: TxnBody::Error(ErrorTxn { err: -101 }),
        }
    }

    #[test]
    fn a_commit_takes_its_own_txn_or_none() {
        let mut kept = DecodedTxns::default();
        (1..=4).for_each(|z| kept.keep(txn(z)));
        assert!(kept.holds(Zxid(4)) && !kept.holds(Zxid(3)));
        assert_eq!(kept.take(Zxid(2)).map(|t| t.zxid()), Some(Zxid(2)));
        assert_eq!(kept.take(Zxid(2)), None, "taken once");
        // 3 is dropped on the way to 4; a zxid never kept is not found.
        assert_eq!(kept.take(Zxid(4)).map(|t| t.zxid()), Some(Zxid(4)));
        assert_eq!(kept.take(Zxid(3)), None);
        kept.keep(txn(9));
        assert_eq!(kept.take(Zxid(7)), None);
        kept.keep(txn(5));
        assert!(kept.holds(Zxid(5)), "a lower zxid started over");
        assert_eq!(kept.take(Zxid(5)).map(|t| t.zxid()), Some(Zxid(5)));
        assert_eq!(kept.take(Zxid(9)), None);
    }

    #[test]
    fn each_durable_txn_is_reported_once_and_a_lookup_finds_kept_ones() {
        let mut kept = DecodedTxns::default();
        (1..=6).for_each(|z| {
            kept.keep(Txn {
                header: TxnHeader {
                    time: z * 10,
                    ..txn(z).header
                },
                ..txn(z)
            })
        });
        let durable = |kept: &mut DecodedTxns, z| {
            let mut times = Vec::new();
            kept.persisted(Zxid(z), |t| times.push(t));
            times
        };
        assert_eq!(kept.take(Zxid(2)).map(|t| t.zxid()), Some(Zxid(2)));
        assert_eq!(
            durable(&mut kept, 3),
            [10, 20, 30],
            "committed before durable too"
        );
        assert_eq!(durable(&mut kept, 3), [] as [i64; 0], "reported once");
        assert_eq!(durable(&mut kept, 5), [40, 50]);
        assert_eq!(kept.time_of(Zxid(6)), Some(60));
        assert_eq!(kept.time_of(Zxid(7)), None);
        kept.keep(txn(2));
        assert_eq!(durable(&mut kept, 2), [0], "a new start reports again");
    }

    #[test]
    fn only_the_newest_are_kept() {
        let mut kept = DecodedTxns::default();
        (1..=KEPT as i64 + 10).for_each(|z| kept.keep(txn(z)));
        assert_eq!(kept.take(Zxid(10)), None);
        assert_eq!(kept.take(Zxid(11)).map(|t| t.zxid()), Some(Zxid(11)));
    }
}
