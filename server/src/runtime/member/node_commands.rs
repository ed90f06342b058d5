//! What the client-facing node asks of the ensemble: its writes are
//! proposed (leader) or forwarded (follower), sessions revalidated, local
//! snapshots stored. The runtime and the simulator both route the node's
//! commands through here, and only write to client connections themselves.

use super::*;
use crate::core::Command;

impl Member {
    /// Carries out every command the node has queued that concerns the
    /// ensemble or storage (and those they lead to); returns the rest, the
    /// frames and closes for client connections, in the order queued.
    pub fn route_node_commands(&mut self, ctx: &mut Ctx<'_>) -> Result<Vec<Command>, ServeError> {
        let mut for_clients = Vec::new();
        loop {
            // Proposing may end the role, which queues closes of connections.
            let commands: Vec<Command> = ctx.node.drain_commands().collect();
            if commands.is_empty() {
                return Ok(for_clients);
            }
            for command in commands {
                match command {
                    Command::Reply { .. } | Command::Send { .. } | Command::Close { .. } => {
                        for_clients.push(command)
                    }
                    Command::Persist { txn } => self.propose(ctx, txn)?,
                    Command::Forward(request) => {
                        self.send_to_leader(ctx.links, ZabMessage::Request(request))
                    }
                    Command::Revalidate {
                        session,
                        timeout_ms,
                    } => self.send_to_leader(
                        ctx.links,
                        ZabMessage::Revalidate {
                            session,
                            timeout_ms,
                        },
                    ),
                    Command::Revalidated { to, session, valid } => {
                        let reply = ZabMessage::RevalidateReply { session, valid };
                        self.send_to_follower(ctx.links, ServerId(to), reply)
                    }
                    Command::SnapshotPiece(piece) => {
                        ctx.jobs.submit(StorageJob::SnapshotPiece(piece))?
                    }
                }
            }
        }
    }

    /// The leader's node started a txn: propose it.
    fn propose(&mut self, ctx: &mut Ctx<'_>, txn: Txn) -> Result<(), ServeError> {
        if let Role::Leading(l) = &mut self.role {
            match l.next_zxid() {
                Some(next) if next == txn.zxid() => {
                    l.propose(next, txn.to_bytes());
                    self.decoded.keep(txn);
                }
                Some(next) => {
                    tracing::error!(node = %txn.zxid(), leader = %next, "zxids disagree; stepping down");
                    return self.end_role(ctx, "zxid mismatch");
                }
                // The counter is about to wrap: the role ends with a new epoch to come.
                None => {}
            }
        }
        self.after_zab(ctx)
    }

    /// The follower's node sends the leader a request or a revalidation.
    fn send_to_leader(&mut self, links: &mut dyn PeerLinks, message: ZabMessage) {
        if let Role::Following(f) = &self.role {
            links.send_zab(f.leader(), message);
        }
    }

    /// The leader's node answers a follower's revalidation.
    fn send_to_follower(&mut self, links: &mut dyn PeerLinks, to: ServerId, message: ZabMessage) {
        if let Role::Leading(_) = &self.role {
            self.snaps_out.send(to, message, links);
        }
    }
}
