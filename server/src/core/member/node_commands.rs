//! What the client-facing node asks of the ensemble: its writes are
//! proposed (leader) or forwarded (follower), sessions revalidated, local
//! snapshots stored. The runtime and the simulator both route the node's
//! commands through here, and only write to client connections themselves.

use super::*;

impl Member {
    /// Carries out every command the node has queued that concerns the
    /// ensemble or storage (and those they lead to); the rest, the frames
    /// and closes for client connections, go to `for_clients` in the order
    /// queued.
    pub fn route_node_commands(
        &mut self,
        ctx: &mut Ctx<'_>,
        for_clients: &mut VecDeque<Command>,
    ) -> Result<(), Fatal> {
        let mut commands = std::mem::take(&mut self.node_commands);
        loop {
            // Proposing may end the role, which queues closes of connections.
            ctx.node.take_commands(&mut commands);
            if commands.is_empty() {
                self.node_commands = commands;
                return Ok(());
            }
            while let Some(command) = commands.pop_front() {
                match command {
                    Command::Reply { .. }
                    | Command::Send { .. }
                    | Command::Close { .. }
                    | Command::RecordEnsembleConfig(_) => for_clients.push_back(command),
                    Command::Persist { txn } => self.propose(ctx, txn)?,
                    Command::Forward(request) => self.send_to_leader(ZabMessage::Request(request)),
                    Command::Revalidate {
                        session,
                        timeout_ms,
                    } => self.send_to_leader(ZabMessage::Revalidate {
                        session,
                        timeout_ms,
                    }),
                    Command::Revalidated { to, session, valid } => {
                        let reply = ZabMessage::RevalidateReply { session, valid };
                        self.send_to_follower(ServerId(to), reply)
                    }
                    Command::SnapshotPiece(piece) => {
                        self.out.submit(StorageJob::SnapshotPiece(piece))
                    }
                }
            }
        }
    }

    /// The leader's node started a txn: propose it.
    fn propose(&mut self, ctx: &mut Ctx<'_>, txn: Txn) -> Result<(), Fatal> {
        if let Role::Leading(l) = &mut self.role {
            match l.next_zxid() {
                Some(next) if next == txn.zxid() => {
                    super::config_change::propose(l, &mut self.out, next, &txn);
                    ctx.node.metrics_mut().add(Count::Proposals, 1);
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
    fn send_to_leader(&mut self, message: ZabMessage) {
        if let Role::Following(f) = &self.role {
            self.out.send_zab(f.leader(), message);
        }
    }

    /// The leader's node answers a follower's revalidation.
    fn send_to_follower(&mut self, to: ServerId, message: ZabMessage) {
        if let Role::Leading(_) = &self.role {
            self.snaps_out.send(to, message, &mut self.out);
        }
    }
}
