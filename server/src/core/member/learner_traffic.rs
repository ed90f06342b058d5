//! What a leading member does with a learner's message: the client
//! traffic a follower relays goes to the node, and only once the leader
//! synced that learner (ZooKeeper's LearnerHandler reads it only after the
//! sync: before, a connection has proved nothing but a sid); the protocol
//! goes to the leader's role, which never sees client traffic.

use super::{Ctx, Member, Role, MAX_FORWARDED_IN_FLIGHT};
use crate::core::election::ServerId;
use crate::core::metrics::Count;
use crate::core::zab::ZabMessage;
use crate::core::Event;
use crate::failpoints::{active, Failpoint};

impl Member {
    /// A message from learner `from` to this member, which leads.
    pub(super) fn learner_message(
        &mut self,
        ctx: &mut Ctx<'_>,
        from: ServerId,
        message: ZabMessage,
    ) {
        let Role::Leading(l) = &mut self.role else {
            return;
        };
        let now = ctx.now;
        // Planted (requests-before-sync): any learner's client traffic is taken.
        let synced = l.is_synced(from) || active(Failpoint::RequestsBeforeSync);
        match message {
            ZabMessage::Request(_) | ZabMessage::Revalidate { .. } if !synced => {
                tracing::warn!(peer = %from, "client traffic from a learner not synced; closing");
                l.drop_learner(from);
            }
            ZabMessage::Request(_)
                if ctx.node.forwarded_in_flight(from.0) >= MAX_FORWARDED_IN_FLIGHT =>
            {
                // A follower's own gate keeps it far below this: a peer past
                // it is not one, and would fill the leader's memory.
                tracing::warn!(peer = %from, "too many forwarded requests in flight; closing");
                self.out.close_zab(from);
            }
            ZabMessage::Request(request) => {
                let from = from.0;
                ctx.node
                    .handle_event(now, Event::Forwarded { from, request })
            }
            ZabMessage::Revalidate {
                session,
                timeout_ms,
            } => {
                ctx.node.metrics_mut().add(Count::Revalidates, 1);
                let from = from.0;
                let revalidate = Event::Revalidate {
                    from,
                    session,
                    timeout_ms,
                };
                ctx.node.handle_event(now, revalidate)
            }
            ZabMessage::Ping { zxid, touches } => {
                // A learner's sessions are kept alive only once it is synced.
                if synced {
                    ctx.node.handle_event(now, Event::Touched(touches));
                }
                let touches = Vec::new();
                l.handle_message(now.mono_ms, from, ZabMessage::Ping { zxid, touches });
            }
            message => {
                if message.is_learner_info() {
                    // A new handshake comes on a new link: an image still
                    // streaming to this follower belonged to the old one.
                    self.snaps_out.cancel(from);
                }
                l.handle_message(now.mono_ms, from, message)
            }
        }
    }
}
