//! ZooKeeper's `SyncLimitCheck`: a synced follower that was sent proposals
//! and acknowledges none of them for syncLimit is dropped, whoever it is,
//! as ZooKeeper's leader drops it ("transaction timeout"). Its pings alone
//! do not keep it: a follower that answers pings while its log is wedged
//! would otherwise hold a link, and a queue, for as long as it stays so.
//! A slow follower whose acks keep moving stays; flow control paces it.

use super::Leader;
use crate::core::election::ServerId;
use crate::core::zab::learner_handler::HandlerPhase;

impl Leader {
    /// Starts the wait of each synced follower with proposals outstanding
    /// (a ping interval late at most), and drops those whose wait passed
    /// syncLimit.
    pub(super) fn drop_unacknowledging(&mut self, now_ms: u64) {
        let limit = self.timing.sync_ms();
        let mut stalled: Vec<ServerId> = Vec::new();
        for h in self.learners.values_mut() {
            if h.phase != HandlerPhase::Synced || h.observer || h.sent <= h.acked {
                h.acks_awaited_since_ms = None;
                continue;
            }
            let since = *h.acks_awaited_since_ms.get_or_insert(now_ms);
            if now_ms.saturating_sub(since) > limit {
                stalled.push(h.sid);
            }
        }
        for sid in stalled {
            tracing::info!(peer = %sid, "leader: dropping a follower that acknowledged nothing within syncLimit");
            self.drop_learner(sid);
        }
    }
}
