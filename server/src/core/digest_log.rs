//! The tree's digest at every 128th zxid, the last 1,024 of them, as
//! ZooKeeper's `DataTree` keeps its digest log for the AdminServer's
//! `hash` command. Two members' entries at one zxid must agree. The
//! digest is zkd's own (see `zkd_storage::data_tree::digest`), so the
//! values are not comparable with ZooKeeper's.

use std::collections::VecDeque;
use zkd_protocol::Zxid;

/// Every this many zxids a digest is kept (ZooKeeper's DIGEST_LOG_INTERVAL).
const INTERVAL: i64 = 128;

/// How many are kept (ZooKeeper's DIGEST_LOG_LIMIT).
const LIMIT: usize = 1024;

/// zkd's digest version, which ZooKeeper's `hash` shows beside each digest
/// (ZooKeeper's own is 2): a tool that compares digests across servers
/// can tell zkd's apart.
pub const ZKD_DIGEST_VERSION: i32 = 1000;

/// The kept (zxid, digest) pairs, oldest first.
#[derive(Clone, Debug, Default)]
pub struct DigestLog {
    entries: VecDeque<(Zxid, u64)>,
}

impl DigestLog {
    /// Notes the tree's digest after applying `zxid`, if it is one kept.
    pub fn applied(&mut self, zxid: Zxid, digest: impl FnOnce() -> u64) {
        if zxid.0 % INTERVAL != 0 {
            return;
        }
        if self.entries.len() == LIMIT {
            self.entries.pop_front();
        }
        self.entries.push_back((zxid, digest()));
    }

    /// The kept pairs, oldest first.
    pub fn entries(&self) -> impl Iterator<Item = &(Zxid, u64)> {
        self.entries.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_every_128th_zxid_and_the_last_1024() {
        let mut log = DigestLog::default();
        for n in 1..=(INTERVAL * 1030) {
            log.applied(Zxid(n), || n as u64 * 7);
        }
        let kept: Vec<_> = log.entries().copied().collect();
        assert_eq!(kept.len(), LIMIT);
        assert_eq!(kept[0], (Zxid(INTERVAL * 7), INTERVAL as u64 * 49));
        assert_eq!(kept[LIMIT - 1].0, Zxid(INTERVAL * 1030));
    }
}
