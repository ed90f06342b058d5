//! The member while a sync changes its storage under it: a TRUNC or a SNAP
//! install reloads the tree (the role's later work waits, the leader's pings
//! are answered meanwhile), a SNAP streams in piece by piece, and a tree
//! found diverged from the leader's is rebuilt and resynced by SNAP.

use super::*;

/// How the tree follows storage after a TRUNC or a SNAP install.
#[derive(Clone, Copy)]
pub(super) enum Reload {
    /// The log was cut after `cut`, at or above the tree (at `tree_at`):
    /// the tree is a prefix of what is left and takes the log's next txns,
    /// which the storage thread reads.
    CatchUp { tree_at: Zxid, cut: Zxid },
    /// The storage thread rebuilds the tree from disk (a cut below the tree,
    /// or a leader's image: `installed`), and says where it is fuzzy.
    Rebuild { installed: bool },
}

/// What the storage thread read for a reload.
pub(super) enum Loaded {
    /// The tree, rebuilt from disk.
    Tree(RebuiltTree),
    /// The logged txns a catch-up applies.
    Logged(LoggedTxns),
}

/// A role's command, or a peer's message, held while the tree reloads.
pub(super) enum Deferred {
    Command(ZabCommand),
    Message {
        from: ServerId,
        message: ZabMessage,
        permit: ReadPermit,
    },
}

/// Whether the tree diverged from a leader's, and what is left to repair.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Divergence {
    None,
    /// Found: the tree is rebuilt from disk after the role's drain.
    Rebuild,
    /// Rebuilt: the next sync as a follower must be a SNAP.
    AwaitingSnapshot,
}

impl Member {
    /// A message that came during a reload waits for it; the leader is not
    /// silent meanwhile, and its pings are answered at once, so a long
    /// install does not look like a dead link to either side.
    pub(super) fn defer(
        &mut self,
        ctx: &mut Ctx<'_>,
        from: ServerId,
        message: ZabMessage,
        permit: ReadPermit,
    ) -> Result<(), Fatal> {
        if let Role::Following(f) = &mut self.role {
            if f.leader() == from {
                f.heard_from_leader(ctx.now.mono_ms);
                if let ZabMessage::Ping { .. } = message {
                    f.handle_message(ctx.now.mono_ms, from, message);
                    let replies: Vec<ZabCommand> = f.drain_commands().collect();
                    for reply in replies {
                        self.run(ctx, reply)?;
                    }
                    return Ok(());
                }
            }
        }
        if let Waiting::Reload { deferred, .. } = &mut self.waiting {
            deferred.push_back(Deferred::Message {
                from,
                message,
                permit,
            });
        }
        Ok(())
    }

    /// A piece of the leader's SNAP: staged as it comes, then the role gets it.
    pub(super) fn snap_piece(
        &mut self,
        ctx: &mut Ctx<'_>,
        from: ServerId,
        piece: SnapPiece,
        permit: ReadPermit,
    ) -> Result<(), Fatal> {
        let from_leader = matches!(&self.role, Role::Following(f) if f.leader() == from);
        if !from_leader || !matches!(self.waiting, Waiting::Nothing) {
            // A SNAP only comes first in a sync, before anything is reloaded.
            tracing::warn!(peer = %from, "snapshot piece from a member that is not syncing us; closing");
            self.snap_in = None;
            self.out.close_zab(from);
            return Ok(());
        }
        if let Role::Following(f) = &mut self.role {
            f.heard_from_leader(ctx.now.mono_ms);
        }
        let received = SnapReceiver::receive(&mut self.snap_in, piece, permit);
        self.out.submit(received.job);
        match received.snap {
            Some(snap) => self.zab_message(ctx, from, snap),
            None => Ok(()),
        }
    }

    /// Applies the logged txns beyond the tree through `through` (logged in
    /// an earlier role and not applied there; the storage thread read them
    /// from the tree's zxid on). A txn that fails to apply ends the role as
    /// a divergence does.
    pub(super) fn catch_up_tree(
        &mut self,
        ctx: &mut Ctx<'_>,
        logged: LoggedTxns,
        through: Zxid,
    ) -> Result<(), Fatal> {
        let after = ctx.node.tree().last_zxid();
        for (zxid, bytes) in logged {
            if zxid <= after {
                continue;
            }
            if zxid > through {
                break;
            }
            let txn = Txn::from_bytes(bytes).map_err(|e| Fatal(e.to_string()))?;
            let digest = None;
            ctx.node
                .handle_event(ctx.now, Event::Committed { txn, digest });
        }
        match ctx.node.take_divergence() {
            Some(zxid) => self.diverge(ctx, zxid, "a logged txn failed to apply"),
            None => Ok(()),
        }
    }

    /// The tree diverged from the leader's: stop serving at once, rebuild
    /// the tree from disk, and sync again by SNAP (a broken invariant must
    /// not be served on; ZOOKEEPER-2846).
    pub(super) fn diverge(
        &mut self,
        ctx: &mut Ctx<'_>,
        zxid: Zxid,
        why: &str,
    ) -> Result<(), Fatal> {
        if active(Failpoint::ServeDiverged) {
            tracing::error!(%zxid, why, "this member's tree diverged; serving on (failpoint)");
            return Ok(());
        }
        tracing::error!(%zxid, why, "this member's tree diverged from the leader's; resyncing by snapshot");
        self.diverged = Divergence::Rebuild;
        // Durable before the next vote (the drain waits for it), so a
        // restart does not forget that this member must not lead.
        self.out.submit(StorageJob::MarkDiverged(zxid));
        self.end_role(ctx, "tree diverged")
    }

    /// A round starts: a divergence noted on disk before a restart counts
    /// as one found in memory, and a member with either stands aside in
    /// the election until a leader's SNAP replaces its tree.
    pub(super) fn note_divergence(&mut self, on_disk: Option<Zxid>) {
        if let (Some(zxid), Divergence::None) = (on_disk, self.diverged) {
            tracing::warn!(%zxid, "this member's tree diverged before it restarted; awaiting a snapshot");
            self.diverged = Divergence::AwaitingSnapshot;
        }
        // Planted (diverged-may-lead): the divergence is forgotten by the vote.
        let aside = self.diverged != Divergence::None && !active(Failpoint::DivergedMayLead);
        self.election.stand_aside(aside);
    }

    /// Holds the role's later work until the storage jobs queued so far are
    /// done; then [`reloaded`](Self::reloaded) brings the tree to storage.
    pub(super) fn reload_after_storage(&mut self, reload: Reload) -> StorageJob {
        self.waiting = Waiting::Reload {
            deferred: VecDeque::new(),
            reload,
        };
        match reload {
            Reload::CatchUp { tree_at, cut } => StorageJob::ReadLogged {
                after: tree_at,
                through: cut,
            },
            Reload::Rebuild { .. } => StorageJob::Rebuild,
        }
    }

    /// The storage thread rebuilt the tree from disk: for a reload, or for
    /// a diverged tree after the role's drain (then the vote follows). A
    /// rebuild that comes after its role ended is still what is on disk.
    pub(super) fn rebuilt(&mut self, ctx: &mut Ctx<'_>, rebuilt: RebuiltTree) -> Result<(), Fatal> {
        match self.waiting {
            Waiting::Reload { .. } => self.reloaded(ctx, Loaded::Tree(rebuilt)),
            Waiting::Drain => {
                ctx.node.replace_tree(*rebuilt.tree, rebuilt.fuzzy_through);
                if self.diverged == Divergence::Rebuild {
                    self.diverged = Divergence::AwaitingSnapshot;
                    self.look(ctx);
                }
                Ok(())
            }
            Waiting::Nothing | Waiting::State | Waiting::Backoff { .. } => Ok(()),
        }
    }

    /// The log is cut or a snapshot installed: the tree follows storage
    /// (caught up on the logged txns, or rebuilt, which the storage thread
    /// read), then what waited carries on. The time the reload took is the
    /// member's own, not the leader's silence.
    pub(super) fn reloaded(&mut self, ctx: &mut Ctx<'_>, loaded: Loaded) -> Result<(), Fatal> {
        let Waiting::Reload { deferred, reload } =
            std::mem::replace(&mut self.waiting, Waiting::Nothing)
        else {
            return Ok(());
        };
        match (reload, loaded) {
            (Reload::CatchUp { cut, .. }, Loaded::Logged(logged)) => {
                self.catch_up_tree(ctx, logged, cut)?
            }
            (Reload::Rebuild { installed }, Loaded::Tree(rebuilt)) => {
                ctx.node.replace_tree(*rebuilt.tree, rebuilt.fuzzy_through);
                if installed {
                    self.diverged = Divergence::None;
                }
            }
            // Reports come in job order: a reload gets what its own job read.
            _ => {
                return Err(Fatal(
                    "a reload got what another kind of storage job read".into(),
                ))
            }
        }
        if let Role::Following(f) = &mut self.role {
            f.heard_from_leader(ctx.now.mono_ms);
        }
        if matches!(self.waiting, Waiting::Drain) {
            return Ok(());
        }
        for item in deferred {
            match item {
                Deferred::Command(command) => self.run(ctx, command)?,
                Deferred::Message {
                    from,
                    message,
                    permit,
                } => self.zab_message_held(ctx, from, message, permit)?,
            }
            if !matches!(self.waiting, Waiting::Nothing) || matches!(self.role, Role::Looking) {
                // Another wait began (or the role ended): later items are moot
                // for a role that ended, and a sync has one TRUNC or SNAP.
                break;
            }
        }
        self.after_zab(ctx)
    }
}
