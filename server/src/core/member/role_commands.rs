//! The role's commands carried out: Zab messages and SNAPs to send,
//! storage jobs, committed txns delivered to the node, the moment it
//! serves, and the end of the role (its storage drained before the next
//! election round).

use super::*;

impl Member {
    pub(super) fn after_zab(&mut self, ctx: &mut Ctx<'_>) -> Result<(), Fatal> {
        self.report_links(ctx);
        let mut commands = std::mem::take(&mut self.zab_commands);
        loop {
            match &mut self.role {
                Role::Leading(l) => l.take_commands(&mut commands),
                Role::Following(f) => f.take_commands(&mut commands),
                Role::Looking => break,
            }
            if commands.is_empty() {
                break;
            }
            while let Some(command) = commands.pop_front() {
                if let Waiting::Reload { deferred, .. } = &mut self.waiting {
                    deferred.push_back(Deferred::Command(command));
                    continue;
                }
                self.run(ctx, command)?;
                if matches!(self.role, Role::Looking) {
                    // The role's commands after it ended are dropped with it.
                    commands.clear();
                    break;
                }
            }
        }
        self.zab_commands = commands;
        Ok(())
    }

    /// Carries out one command of the role.
    pub(super) fn run(&mut self, ctx: &mut Ctx<'_>, command: ZabCommand) -> Result<(), Fatal> {
        match command {
            ZabCommand::Send { to, message } => self.send_role_message(ctx, to, message),
            ZabCommand::Storage(op) => self.storage_op(ctx, op)?,
            ZabCommand::Deliver { zxid, txn, digest } => {
                let txn = match self.decoded.take(zxid) {
                    Some(txn) => txn,
                    None => Txn::from_bytes(txn)
                        .map_err(|e| Fatal(format!("committed txn {zxid}: {e}")))?,
                };
                if let Role::Leading(_) = self.role {
                    // The leader delivers a txn once a quorum acked it.
                    let timing = Timing::QuorumAckLatency;
                    let time = txn.header.time;
                    ctx.node.metrics_mut().observe_age(timing, time, ctx.now);
                }
                ctx.node
                    .handle_event(ctx.now, Event::Committed { txn, digest });
                if let Some(zxid) = ctx.node.take_divergence() {
                    return self.diverge(
                        ctx,
                        zxid,
                        "a committed txn disagreed with the leader's tree",
                    );
                }
                self.follow_config(ctx)?;
            }
            ZabCommand::SendSnapshot { to } => {
                self.snaps_out
                    .start(ctx.now.mono_ms, to, ctx.node.tree(), &mut self.out);
                let metrics = ctx.node.metrics_mut();
                metrics.add(Count::SnapSyncs, 1);
                let sending = self.snaps_out.streams() as u64;
                metrics.observe(Timing::InflightSnapCount, sending, ctx.now.mono_ms);
            }
            ZabCommand::ReadLog {
                to,
                after,
                max_bytes,
            } => {
                let peer = to;
                self.out.submit(StorageJob::ReadFor {
                    peer,
                    after,
                    max_bytes,
                });
            }
            ZabCommand::Disconnect { peer } => {
                self.snaps_out.cancel(peer);
                self.out.close_zab(peer);
            }
            ZabCommand::Serving => {
                self.serving(ctx);
                self.follow_config(ctx)?;
            }
            ZabCommand::Synced(synced) => ctx.node.set_synced(synced),
            ZabCommand::Abandon { reason } => return self.end_role(ctx, &reason),
        }
        Ok(())
    }

    /// Sends a message of the role, with what only the member knows added:
    /// a follower's session touches, the leader's digest after a commit.
    fn send_role_message(&mut self, ctx: &mut Ctx<'_>, to: ServerId, message: ZabMessage) {
        if message.is_learner_info() {
            // Each (re)try of the follower's handshake gets a fresh link.
            self.out.connect_zab(to);
        }
        let message = match message {
            ZabMessage::Ping { zxid, .. } if matches!(self.role, Role::Following(_)) => {
                ZabMessage::Ping {
                    zxid,
                    touches: ctx.node.take_touches(),
                }
            }
            // The leader's tree has just applied `zxid` (Deliver
            // runs before the COMMIT goes out): followers compare.
            ZabMessage::Commit { zxid, .. } if ctx.node.tree().last_zxid() == zxid => {
                ZabMessage::Commit {
                    zxid,
                    digest: Some(ctx.node.tree().digest()),
                }
            }
            ZabMessage::CommitAndActivate {
                zxid, designated, ..
            } if ctx.node.tree().last_zxid() == zxid => ZabMessage::CommitAndActivate {
                zxid,
                designated,
                digest: Some(ctx.node.tree().digest()),
            },
            ZabMessage::NewLeader { epoch, .. } => ZabMessage::NewLeader {
                epoch,
                config: Member::announced_config(ctx.node, epoch),
            },
            other => other,
        };
        if matches!(message, ZabMessage::Diff { .. } | ZabMessage::Trunc { .. }) {
            self.count_diff_sync(ctx);
        }
        self.snaps_out.send(to, message, &mut self.out);
    }

    /// A DIFF (or TRUNC) sync starts: counted, with the syncs under way
    /// that stream no SNAP.
    fn count_diff_sync(&self, ctx: &mut Ctx<'_>) {
        let Role::Leading(l) = &self.role else {
            return;
        };
        let syncing = l
            .learners()
            .filter(|h| h.phase == crate::core::zab::HandlerPhase::Syncing);
        let diffing = syncing
            .filter(|h| !self.snaps_out.sending_to(h.sid))
            .count();
        let metrics = ctx.node.metrics_mut();
        metrics.add(Count::DiffSyncs, 1);
        metrics.observe(Timing::InflightDiffCount, diffing as u64, ctx.now.mono_ms);
    }

    fn serving(&mut self, ctx: &mut Ctx<'_>) {
        let role = match &self.role {
            Role::Leading(_) => ServingAs::Leader,
            _ if self.members.is_observer(self.id) => ServingAs::Observer,
            _ => ServingAs::Follower,
        };
        self.clocks.serving(ctx, role);
        self.activate_announced(ctx);
        // Every member reports the new epoch to lookers from now on
        // (ZooKeeper's updateElectionVote), so late joiners see agreement.
        match &self.role {
            Role::Leading(l) => {
                let epoch = l.epoch();
                self.election.update_peer_epoch(epoch);
                ctx.node.start_leading(ctx.now, epoch);
                ctx.node.set_synced(l.synced());
                tracing::info!(epoch, zxid = %ctx.node.tree().last_zxid(), "leading: serving clients");
            }
            Role::Following(f) => {
                self.refusals = 0;
                let epoch = f.current_epoch();
                self.election.update_peer_epoch(epoch);
                ctx.node.start_following(ctx.now, f.is_observer());
                let role = if f.is_observer() {
                    "observing"
                } else {
                    "following"
                };
                tracing::info!(epoch, leader = %f.leader(), "{role}: serving clients");
            }
            Role::Looking => {}
        }
    }

    pub(super) fn end_role(&mut self, ctx: &mut Ctx<'_>, reason: &str) -> Result<(), Fatal> {
        tracing::info!(role = %self.describe(), reason, "role ended; back to election");
        self.role = Role::Looking;
        self.announced = None;
        self.clocks.role_ended(ctx.now.mono_ms);
        self.decoded.clear();
        // Until the drain ends and a round starts, lookers hear LOOKING.
        self.election.stand_down();
        ctx.node.stop_serving(ctx.now);
        self.snaps_out.clear();
        self.snap_in = None;
        self.out.close_all_zab();
        self.out.set_learner_intake(LearnerIntake::Held);
        self.waiting = Waiting::Drain;
        self.out.submit(StorageJob::Barrier(TOKEN_DRAINED));
        Ok(())
    }

    fn storage_op(&mut self, ctx: &mut Ctx<'_>, op: StorageOp) -> Result<(), Fatal> {
        let job = match op {
            StorageOp::Append { zxid, txn } => {
                // A leader's own proposal was kept as it was made; one from
                // a leader is checked before it is logged, as ZooKeeper
                // deserializes a proposal first.
                if !self.decoded.holds(zxid) {
                    let decoded = Txn::from_bytes(txn.clone())
                        .map_err(|e| Fatal(format!("txn {zxid}: {e}")))?;
                    if decoded.zxid() != zxid {
                        let inside = decoded.zxid();
                        return Err(Fatal(format!("txn {zxid} says {inside}")));
                    }
                    self.decoded.keep(decoded);
                }
                StorageJob::Persist {
                    zxid,
                    record: txn,
                    permit: self.arriving.take(),
                }
            }
            StorageOp::TruncateAndReload { after } => {
                tracing::info!(%after, "truncating the log");
                self.decoded.clear();
                self.out.submit(StorageJob::Truncate(after));
                let tree_at = ctx.node.tree().last_zxid();
                let reload = if tree_at <= after {
                    Reload::CatchUp {
                        tree_at,
                        cut: after,
                    }
                } else {
                    Reload::Rebuild { installed: false }
                };
                self.reload_after_storage(reload)
            }
            StorageOp::InstallSnapshot {
                zxid,
                image,
                fuzzy_through,
            } => {
                self.decoded.clear();
                self.out.submit(StorageJob::InstallSnapshot {
                    zxid,
                    image,
                    fuzzy_through,
                });
                self.reload_after_storage(Reload::Rebuild { installed: true })
            }
            // Planted (skip-epoch-write): the epoch changes in memory only;
            // the barrier after it still comes, so the role carries on.
            StorageOp::SetAcceptedEpoch(e) if active(Failpoint::SkipEpochWrite) => {
                self.unsaved_epochs.0 = Some(e);
                return Ok(());
            }
            StorageOp::SetCurrentEpoch(e) if active(Failpoint::SkipEpochWrite) => {
                self.unsaved_epochs.1 = Some(e);
                return Ok(());
            }
            StorageOp::SetAcceptedEpoch(e) => StorageJob::SetAcceptedEpoch(e),
            StorageOp::SetCurrentEpoch(e) => StorageJob::SetCurrentEpoch(e),
            StorageOp::Barrier(token) => StorageJob::Barrier(token),
        };
        self.out.submit(job);
        Ok(())
    }
}
