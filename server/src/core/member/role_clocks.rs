//! When a member's election, role and time without serving began, for
//! ZooKeeper's `looking_count`, `election_time`, `follower_sync_time`,
//! `observer_sync_time`, `unavailable_time` and `leader_unavailable_time`.

use super::Ctx;
use crate::core::metrics::{Count, Timing};

/// The role a member serves in, for the time its sync took.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ServingAs {
    Leader,
    Follower,
    Observer,
}

/// Monotonic start times (ms) of what is under way.
#[derive(Debug, Default)]
pub(super) struct RoleClocks {
    /// The election round being looked for.
    looking_since: Option<u64>,
    /// The role decided, until it serves.
    role_since: Option<u64>,
    /// Not serving clients (from start, or since the last role ended).
    unavailable_since: Option<u64>,
}

impl RoleClocks {
    /// The role ended: clients are not served from now.
    pub(super) fn role_ended(&mut self, now_ms: u64) {
        self.unavailable_since.get_or_insert(now_ms);
    }

    /// The member goes LOOKING.
    pub(super) fn looking(&mut self, ctx: &mut Ctx<'_>) {
        let now = ctx.now.mono_ms;
        ctx.node.metrics_mut().add(Count::Looking, 1);
        self.looking_since = Some(now);
        self.role_since = None;
        self.unavailable_since.get_or_insert(now);
    }

    /// The election decided this member's role.
    pub(super) fn decided(&mut self, ctx: &mut Ctx<'_>) {
        let now = ctx.now.mono_ms;
        if let Some(since) = self.looking_since.take() {
            ctx.node
                .metrics_mut()
                .observe(Timing::ElectionTime, now - since, now);
        }
        self.role_since = Some(now);
    }

    /// The role serves clients: a learner synced, a leader established.
    pub(super) fn serving(&mut self, ctx: &mut Ctx<'_>, role: ServingAs) {
        let now = ctx.now.mono_ms;
        let metrics = ctx.node.metrics_mut();
        let leading = role == ServingAs::Leader;
        let synced = match role {
            ServingAs::Leader => None,
            ServingAs::Follower => Some(Timing::FollowerSyncTime),
            ServingAs::Observer => Some(Timing::ObserverSyncTime),
        };
        if let (Some(since), Some(timing)) = (self.role_since.take(), synced) {
            metrics.observe(timing, now - since, now);
        }
        if let Some(since) = self.unavailable_since.take() {
            metrics.observe(Timing::UnavailableTime, now - since, now);
            if leading {
                metrics.observe(Timing::LeaderUnavailableTime, now - since, now);
            }
        }
    }
}
