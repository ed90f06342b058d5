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
}

impl DecodedTxns {
    /// Keeps `txn`, the newest proposal. One not above the last kept starts
    /// the list over, so it stays in zxid order.
    pub fn keep(&mut self, txn: Txn) {
        if self.txns.back().is_some_and(|t| t.zxid() >= txn.zxid()) {
            self.txns.clear();
        }
        if self.txns.len() == KEPT {
            self.txns.pop_front();
        }
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

    /// Forgets every kept txn: the role ended, or the log was cut or replaced.
    pub fn clear(&mut self) {
        self.txns.clear();
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
    fn only_the_newest_are_kept() {
        let mut kept = DecodedTxns::default();
        (1..=KEPT as i64 + 10).for_each(|z| kept.keep(txn(z)));
        assert_eq!(kept.take(Zxid(10)), None);
        assert_eq!(kept.take(Zxid(11)).map(|t| t.zxid()), Some(Zxid(11)));
    }
}
