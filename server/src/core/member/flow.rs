//! The leader's view of its followers' links, for its flow control
//! (`core::zab::Leader::link_queue`): what waits on each link, its queue as
//! the driver last saw it plus what the member queued since, and what waits
//! behind a SNAP to it. Reported at most once a millisecond, as the driver
//! looks at the links (a busy leader handles many events a millisecond, and
//! a millisecond of writes is far below the marks).

use super::{Ctx, Member, Role};

impl Member {
    /// Tells the leader how full each follower's link is.
    pub(super) fn report_links(&mut self, ctx: &mut Ctx<'_>) {
        let Role::Leading(l) = &mut self.role else {
            return;
        };
        if self.links_reported_ms == Some(ctx.now.mono_ms) {
            return;
        }
        self.links_reported_ms = Some(ctx.now.mono_ms);
        for sid in self.members.all().filter(|&v| v != self.id) {
            let queued = self.out.queued_bytes(sid).unwrap_or(0) + self.snaps_out.held_bytes(sid);
            l.link_queue(sid, queued);
        }
        // Learners outside the configuration (removed members) are not
        // paced; one paused while it was a member is let go, or it would
        // never catch up and serve a stale tree.
        let members = &self.members;
        let outside: Vec<_> = l.forwarding().filter(|s| !members.contains(*s)).collect();
        for sid in outside {
            l.link_queue(sid, 0);
        }
    }
}
