//! An ensemble member: fast leader election, the member's Zab role, and
//! what it asks of its peer links and its storage thread, as commands (see
//! `outbox`). The runtime's node loop and the simulator drive it with the
//! same driver (`runtime::member_driver`). The client-facing `Node` follows
//! the role: it serves clients only while the role says `Serving`.
//!
//! ```text
//! PeerEvent ─▶ Election ─outcome─▶ Leader | Follower ─ZabCommand─▶ MemberCommand (peers, storage),
//!                                                                  Node (Committed, mode)
//! ```
//!
//! When a role ends, the storage queue is drained before the next election
//! round, so the vote is made from what is durable, and nothing the old role
//! queued can land under the new one.

use crate::core::election::{
    Election, ElectionCommand, ElectionConfig, ServerId, ServerState, Vote,
};
use crate::core::peer_event::{LearnerIntake, PeerEvent, SnapPiece};
use crate::core::storage_job::{LoggedTxns, ReadState, RebuiltTree, StorageJob, StorageReport};
use crate::core::zab::{
    DurableState, Epoch, Follower, Leader, StorageOp, Timing, Voters, ZabCommand, ZabMessage,
};
use crate::core::{Command, Event, Node, Now, ReadPermit, MAX_OUTSTANDING};
use crate::failpoints::{active, Failpoint};
#[cfg(test)]
pub(crate) use outbox::weight;
pub(crate) use outbox::Outbox;
pub use outbox::{LinkLimits, MemberCommand};
use snap_receiver::SnapReceiver;
pub(crate) use snap_sender::SnapSender;
use std::collections::VecDeque;
use zkd_protocol::Zxid;
use zkd_storage::Txn;

mod decoded;
mod flow;
mod node_commands;
mod outbox;
mod snap_receiver;
mod snap_sender;
mod sync;

use decoded::DecodedTxns;

use sync::{Deferred, Divergence, Loaded, Reload};

/// Why a member cannot go on: its storage failed, or holds or was sent
/// what it cannot use. The process stops, to restart from disk.
#[derive(Debug)]
pub struct Fatal(pub String);

impl std::fmt::Display for Fatal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Txns a member keeps in memory to bring a follower up to date by DIFF;
/// one further behind gets a SNAP.
const HISTORY_WINDOW: usize = 10_000;

/// Barrier tokens of the member itself (the Zab roles use 1-2 and 11-12).
const TOKEN_DRAINED: u64 = 1001;

/// Requests one follower may have in flight at the leader: its own gate
/// holds it to `MAX_OUTSTANDING`, and requests of an earlier link may still
/// be in flight when it reconnects.
const MAX_FORWARDED_IN_FLIGHT: usize = 2 * MAX_OUTSTANDING;

/// ZooKeeper's finalize wait and notification backoff cap.
const FINALIZE_WAIT_MS: u64 = 200;
const MAX_NOTIFICATION_INTERVAL_MS: u64 = 1600;

/// The member's Zab role.
enum Role {
    Looking,
    Leading(Leader),
    Following(Follower),
}

/// What the member waits for before it goes on.
enum Waiting {
    Nothing,
    /// The storage thread reads what is durable; then a round starts.
    State,
    /// The role ended; the storage queue drains before the next round.
    Drain,
    /// A TRUNC or a SNAP install: once storage is done, the tree is brought
    /// to what it holds; the role's later commands and messages wait until then.
    Reload {
        deferred: VecDeque<Deferred>,
        reload: Reload,
    },
}

/// What a member step needs from its driver: the client-facing node and
/// the time.
pub(crate) struct Ctx<'a> {
    pub node: &'a mut Node,
    pub now: Now,
}

/// One member of an ensemble.
pub(crate) struct Member {
    id: ServerId,
    voters: Voters,
    timing: Timing,
    election: Election,
    role: Role,
    waiting: Waiting,
    /// Leader: SNAPs streaming out.
    snaps_out: SnapSender,
    /// Follower: a SNAP streaming in.
    snap_in: Option<SnapReceiver>,
    /// What was durable when this election round started (read by the
    /// storage thread): the role it decides starts from it, since nothing
    /// is written while looking.
    looked: Option<ReadState>,
    /// The tree diverged from a leader's: it is rebuilt from disk once the
    /// role's storage is drained, and syncs by SNAP until one is installed.
    diverged: Divergence,
    /// The share of the bytes in flight of the peer message being handled:
    /// the append it leads to holds it until the txn is durable, so a
    /// follower takes in proposals no faster than its disk makes them durable.
    arriving: Option<ReadPermit>,
    /// The role's txns in flight, decoded once, for their commits.
    decoded: DecodedTxns,
    /// The node's commands being routed, and the role's being run: lists
    /// kept from one event to the next (see [`take_queued`](crate::core::take_queued)).
    node_commands: VecDeque<Command>,
    zab_commands: VecDeque<ZabCommand>,
    /// Planted (skip-epoch-write): the acceptedEpoch and currentEpoch this
    /// process meant to persist and did not. Always `(None, None)` otherwise.
    unsaved_epochs: (Option<Epoch>, Option<Epoch>),
    /// Leader: when its followers' links were last reported (see `flow`).
    links_reported_ms: Option<u64>,
    /// Txns kept in memory for DIFFs and catch-ups ([`HISTORY_WINDOW`]).
    history_window: usize,
    /// What the member asks of its driver, and how full its links are.
    out: Outbox,
}

impl Member {
    /// A member that has not looked for a leader yet.
    pub fn new(id: ServerId, voters: Voters, timing: Timing, limits: LinkLimits) -> Self {
        let config = ElectionConfig {
            my_id: id,
            voters: voters.0.clone(),
            finalize_wait_ms: FINALIZE_WAIT_MS,
            max_notification_interval_ms: MAX_NOTIFICATION_INTERVAL_MS,
        };
        let own = Vote {
            leader: id,
            zxid: Zxid::ZERO,
            peer_epoch: 0,
        };
        Member {
            id,
            voters,
            timing,
            election: Election::new(config, own),
            role: Role::Looking,
            waiting: Waiting::Nothing,
            snaps_out: SnapSender::default(),
            snap_in: None,
            looked: None,
            diverged: Divergence::None,
            arriving: None,
            decoded: DecodedTxns::default(),
            node_commands: VecDeque::new(),
            zab_commands: VecDeque::new(),
            unsaved_epochs: (None, None),
            links_reported_ms: None,
            history_window: HISTORY_WINDOW,
            out: Outbox::new(limits),
        }
    }

    /// Moves what the member asked for since the last call to the end of
    /// `into`, in the order asked: the driver carries it out.
    pub fn take_commands(&mut self, into: &mut VecDeque<MemberCommand>) {
        self.out.take(into);
    }

    /// A leader paces each follower to what its link holds: before a step
    /// at `now_ms`, the driver says how many bytes are queued on the quorum
    /// link to each peer (`level`: None without a link). It is asked once a
    /// millisecond at most, and only while leading; in between the member
    /// counts what it queues itself.
    pub fn see_links(&mut self, now_ms: u64, level: impl FnMut(ServerId) -> Option<usize>) {
        if matches!(self.role, Role::Leading(_)) && self.out.levels_stale(now_ms) {
            let me = self.id;
            let peers = self.voters.0.iter().copied().filter(move |&v| v != me);
            self.out.set_levels(now_ms, peers, level);
        }
    }

    /// What is durable, as a role starts from it. Under skip-epoch-write the
    /// epochs come from memory, as if written: the bug shows only after a
    /// restart, as a lost epoch write would.
    fn with_unsaved_epochs(&self, mut state: DurableState) -> DurableState {
        if active(Failpoint::SkipEpochWrite) {
            let (accepted, current) = self.unsaved_epochs;
            state.accepted_epoch = accepted.unwrap_or(state.accepted_epoch);
            state.current_epoch = current.unwrap_or(state.current_epoch);
        }
        state
    }

    /// The role's name, for logs and `srvr`.
    pub fn describe(&self) -> String {
        match &self.role {
            Role::Looking => "looking".into(),
            Role::Leading(l) => format!("leading epoch {}", l.epoch()),
            Role::Following(f) => format!("following {}", f.leader()),
        }
    }

    /// The epoch of this member's role: the one it leads, or the current
    /// epoch it follows under; None while looking.
    pub fn epoch(&self) -> Option<Epoch> {
        match &self.role {
            Role::Looking => None,
            Role::Leading(l) => Some(l.epoch()),
            Role::Following(f) => Some(f.current_epoch()),
        }
    }

    /// The epoch this member leads, if it is the leader (established or
    /// not): the simulator holds one established leader per epoch.
    #[cfg(test)]
    pub fn leading_epoch(&self) -> Option<Epoch> {
        match &self.role {
            Role::Leading(l) => Some(l.epoch()),
            _ => None,
        }
    }

    /// Streams SNAPs in chunks of `chunk` bytes (see `SnapSender::with_chunk`).
    #[cfg(test)]
    pub fn pace_snapshots(&mut self, chunk: usize) {
        self.snaps_out = SnapSender::with_chunk(chunk);
    }

    /// Keeps `window` txns in memory instead of [`HISTORY_WINDOW`]: the
    /// simulator's runs are short, and a small window makes its followers
    /// sync by SNAP and catch up from the log as the runtime's do.
    #[cfg(test)]
    pub fn keep_history(&mut self, window: usize) {
        self.history_window = window;
    }

    /// Whether this member leads an epoch it chose but has not established.
    #[cfg(test)]
    pub fn establishing(&self) -> bool {
        matches!(&self.role, Role::Leading(l) if !l.is_established() && l.epoch() > 0)
    }

    /// The election's decision while it stands (vote and round), and how
    /// many rounds the shortcut decided: the simulator checks each decision
    /// against what the members said.
    #[cfg(test)]
    pub fn election_decision(&self) -> (Option<(Vote, u64)>, u64) {
        (self.election.decision(), self.election.shortcuts())
    }

    /// Whether the role ended and the storage queue drains before the next
    /// round (lookers must hear LOOKING from it meanwhile).
    #[cfg(test)]
    pub fn draining(&self) -> bool {
        matches!(self.waiting, Waiting::Drain)
    }

    /// The last zxid this leader sent `follower` before NEWLEADER, while it
    /// syncs or follows.
    #[cfg(test)]
    pub fn sync_point(&self, follower: ServerId) -> Option<Zxid> {
        let Role::Leading(l) = &self.role else {
            return None;
        };
        l.learners()
            .find(|h| h.sid == follower && h.is_forwarding())
            .map(|h| h.sync_point)
    }

    /// The leader this member follows, if it is a follower.
    #[cfg(test)]
    pub fn following(&self) -> Option<ServerId> {
        match &self.role {
            Role::Following(f) => Some(f.leader()),
            _ => None,
        }
    }

    /// Followers the leader has, and how many of them are synced (mntr).
    pub fn followers(&self) -> Option<(usize, usize)> {
        match &self.role {
            Role::Leading(l) => Some((
                l.learners().count(),
                l.synced().iter().filter(|s| **s != self.id).count(),
            )),
            _ => None,
        }
    }

    /// Starts an election round from what is durable now, once the storage
    /// thread has read it (the log since the last snapshot may be long; the
    /// node loop keeps serving pings and lookers meanwhile).
    pub fn look(&mut self, ctx: &mut Ctx<'_>) {
        self.role = Role::Looking;
        self.waiting = Waiting::State;
        self.looked = None;
        self.election.stand_down();
        let tree_at = ctx.node.tree().last_zxid();
        self.out.submit(StorageJob::ReadDurableState {
            window: self.history_window,
            tree_at,
        });
    }

    /// What is durable was read: the round starts with this member's vote.
    fn start_round(&mut self, ctx: &mut Ctx<'_>, mut read: ReadState) -> Result<(), Fatal> {
        self.waiting = Waiting::Nothing;
        *read.state = self.with_unsaved_epochs(*read.state);
        let own = Vote {
            leader: self.id,
            zxid: read.state.history.last_zxid(),
            peer_epoch: read.state.current_epoch,
        };
        self.note_divergence(read.diverged_at);
        self.looked = Some(read);
        tracing::info!(vote = %own, "looking for a leader");
        self.election.look(ctx.now.mono_ms, own);
        self.after_election(ctx)
    }

    /// When `handle_timeout` next has work.
    pub fn poll_timeout(&self) -> Option<u64> {
        let role = match &self.role {
            Role::Leading(l) => l.poll_timeout(),
            Role::Following(f) => f.poll_timeout(),
            Role::Looking => None,
        };
        [
            self.election.poll_timeout(),
            role,
            self.snaps_out.poll_timeout(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Timers of the election and of the role.
    pub fn handle_timeout(&mut self, ctx: &mut Ctx<'_>) -> Result<(), Fatal> {
        self.election.handle_timeout(ctx.now.mono_ms);
        self.after_election(ctx)?;
        match &mut self.role {
            Role::Leading(l) => l.handle_timeout(ctx.now.mono_ms),
            Role::Following(f) => {
                // The member's own storage work (a SNAP's install, a rebuild)
                // is not the leader's silence: the link's reader may wait for
                // the read budget meanwhile, the leader's pings behind it.
                if matches!(self.waiting, Waiting::Reload { .. }) {
                    f.heard_from_leader(ctx.now.mono_ms);
                }
                f.handle_timeout(ctx.now.mono_ms)
            }
            Role::Looking => {}
        }
        let moved = self
            .snaps_out
            .step(ctx.now.mono_ms, ctx.node.tree(), &mut self.out);
        if let Role::Leading(l) = &mut self.role {
            for peer in moved {
                l.heard_from(peer, ctx.now.mono_ms);
            }
        }
        self.after_zab(ctx)
    }

    /// Something from a peer, on a link that is still open (the driver
    /// drops what links closed or replaced since sent).
    pub fn handle_peer(&mut self, ctx: &mut Ctx<'_>, event: PeerEvent) -> Result<(), Fatal> {
        match event {
            PeerEvent::Notification(n) => {
                self.election.handle_notification(ctx.now.mono_ms, n);
                self.after_election(ctx)
            }
            PeerEvent::Unreachable(peer) => {
                self.election.peer_unreachable(peer);
                self.after_election(ctx)
            }
            PeerEvent::Zab {
                from,
                message,
                permit,
                ..
            } => {
                self.out.link_up(from);
                if matches!(self.waiting, Waiting::Reload { .. }) {
                    return self.defer(ctx, from, message, permit);
                }
                self.zab_message_held(ctx, from, message, permit)
            }
            PeerEvent::SnapChunk {
                from,
                piece,
                permit,
                ..
            } => {
                self.out.link_up(from);
                self.snap_piece(ctx, from, piece, permit)
            }
            PeerEvent::ZabClosed { peer, .. } => {
                self.out.link_down(peer);
                self.snaps_out.cancel(peer);
                match &mut self.role {
                    Role::Leading(l) => l.peer_disconnected(peer),
                    Role::Following(f) if f.leader() == peer => f.leader_disconnected(),
                    _ => {}
                }
                self.after_zab(ctx)
            }
        }
    }

    /// [`zab_message`](Self::zab_message), with the message's share of the
    /// bytes in flight passed to the append it leads to, if any.
    fn zab_message_held(
        &mut self,
        ctx: &mut Ctx<'_>,
        from: ServerId,
        message: ZabMessage,
        permit: ReadPermit,
    ) -> Result<(), Fatal> {
        // Planted (unbounded-intake): given back at once.
        self.arriving = (!active(Failpoint::UnboundedIntake)).then_some(permit);
        let handled = self.zab_message(ctx, from, message);
        // A message that led to no append is done with.
        self.arriving = None;
        handled
    }

    fn zab_message(
        &mut self,
        ctx: &mut Ctx<'_>,
        from: ServerId,
        message: ZabMessage,
    ) -> Result<(), Fatal> {
        match (&mut self.role, message) {
            (Role::Looking, _) => self.out.close_zab(from),
            // Client traffic a follower relays goes to the node; the
            // leader's role sees only the protocol.
            (Role::Leading(_), ZabMessage::Request(_))
                if ctx.node.forwarded_in_flight(from.0) >= MAX_FORWARDED_IN_FLIGHT =>
            {
                // A follower's own gate keeps it far below this: a peer past
                // it is not one, and would fill the leader's memory.
                tracing::warn!(peer = %from, "too many forwarded requests in flight; closing");
                self.out.close_zab(from);
            }
            (Role::Leading(_), ZabMessage::Request(request)) => ctx.node.handle_event(
                ctx.now,
                Event::Forwarded {
                    from: from.0,
                    request,
                },
            ),
            (Role::Leading(l), ZabMessage::Ping { zxid, touches }) => {
                ctx.node.handle_event(ctx.now, Event::Touched(touches));
                let touches = Vec::new();
                l.handle_message(ctx.now.mono_ms, from, ZabMessage::Ping { zxid, touches });
            }
            (
                Role::Leading(_),
                ZabMessage::Revalidate {
                    session,
                    timeout_ms,
                },
            ) => ctx.node.handle_event(
                ctx.now,
                Event::Revalidate {
                    from: from.0,
                    session,
                    timeout_ms,
                },
            ),
            (Role::Leading(l), message) => {
                if let ZabMessage::FollowerInfo { .. } = message {
                    // A new handshake comes on a new link: an image still
                    // streaming to this follower belonged to the old one.
                    self.snaps_out.cancel(from);
                }
                l.handle_message(ctx.now.mono_ms, from, message)
            }
            (Role::Following(_), ZabMessage::RevalidateReply { session, valid }) => ctx
                .node
                .handle_event(ctx.now, Event::Revalidated { session, valid }),
            (Role::Following(f), message) => f.handle_message(ctx.now.mono_ms, from, message),
        }
        self.after_zab(ctx)
    }

    /// A storage report.
    pub fn handle_report(&mut self, ctx: &mut Ctx<'_>, report: StorageReport) -> Result<(), Fatal> {
        match report {
            StorageReport::Failed(e) => return Err(Fatal(e)),
            StorageReport::Reached(TOKEN_DRAINED) if matches!(self.waiting, Waiting::Drain) => {
                if self.diverged == Divergence::Rebuild {
                    // The diverged tree is rebuilt from disk before the vote.
                    self.out.submit(StorageJob::Rebuild);
                } else {
                    self.look(ctx);
                }
                return Ok(());
            }
            StorageReport::Rebuilt(rebuilt) => return self.rebuilt(ctx, rebuilt),
            StorageReport::DurableState(read) => {
                if matches!(self.waiting, Waiting::State) {
                    return self.start_round(ctx, read);
                }
                return Ok(());
            }
            StorageReport::Logged(logged) => return self.reloaded(ctx, Loaded::Logged(logged)),
            _ if matches!(self.waiting, Waiting::Drain) => {}
            StorageReport::LoggedFor { peer, after, txns } => {
                if let Role::Leading(l) = &mut self.role {
                    l.logged_for(peer, after, txns);
                }
            }
            StorageReport::Persisted(zxid) => match &mut self.role {
                Role::Leading(l) => l.handle_persisted(zxid),
                Role::Following(f) => f.handle_persisted(zxid),
                Role::Looking => {}
            },
            StorageReport::Reached(token) => match &mut self.role {
                Role::Leading(l) => l.handle_reached(ctx.now.mono_ms, token),
                Role::Following(f) => f.handle_reached(token),
                Role::Looking => {}
            },
        }
        self.after_zab(ctx)
    }

    fn after_election(&mut self, ctx: &mut Ctx<'_>) -> Result<(), Fatal> {
        for ElectionCommand::Send { to, notification } in
            self.election.drain_commands().collect::<Vec<_>>()
        {
            if to != self.id {
                self.out.send_notification(to, notification);
            }
        }
        let Some(outcome) = self.election.take_outcome() else {
            return Ok(());
        };
        if !matches!(self.role, Role::Looking) || !matches!(self.waiting, Waiting::Nothing) {
            return Ok(());
        }
        tracing::info!(
            state = ?outcome.state,
            leader = %outcome.vote.leader,
            round = outcome.election_epoch,
            "election decided"
        );
        let leading = outcome.state == ServerState::Leading;
        let Some(ReadState {
            state, after_tree, ..
        }) = self.looked.take()
        else {
            // A decision comes only in a round `start_round` began.
            return Err(Fatal(
                "an election decided without the durable state it started from".into(),
            ));
        };
        let state = *state;
        // A leader's whole log becomes committed with its epoch, so its tree
        // takes all of it. A follower's tree stays at what it saw committed:
        // the rest of its log waits for the leader's COMMIT (only the part
        // below the in-memory window is applied, which the sync's TRUNC to
        // the leader's last commit would take back if it must).
        let through = if leading {
            state.history.last_zxid()
        } else {
            state.history.base()
        };
        self.catch_up_tree(ctx, after_tree, through)?;
        if matches!(self.waiting, Waiting::Drain) {
            return Ok(());
        }
        let follow = (!leading).then_some(outcome.vote.leader);
        self.take_role(ctx, follow, state);
        self.after_zab(ctx)
    }

    /// The role the election decided starts from what was durable: leading,
    /// or following the leader in `follow`.
    fn take_role(&mut self, ctx: &mut Ctx<'_>, follow: Option<ServerId>, state: DurableState) {
        let tree_zxid = ctx.node.tree().last_zxid();
        let now_ms = ctx.now.mono_ms;
        self.role = if let Some(leader) = follow {
            let follower = Follower::new(leader, self.timing, state, tree_zxid, now_ms);
            Role::Following(match self.diverged {
                Divergence::None => follower,
                _ => follower.asking_for_snapshot(),
            })
        } else {
            let leader = Leader::new(
                self.id,
                self.voters.clone(),
                self.timing,
                state,
                tree_zxid,
                now_ms,
            );
            Role::Leading(leader.with_flow(self.out.flow_marks()))
        };
        self.out.set_learner_intake(match self.role {
            Role::Leading(_) => LearnerIntake::Taken,
            _ => LearnerIntake::Refused,
        });
    }

    fn after_zab(&mut self, ctx: &mut Ctx<'_>) -> Result<(), Fatal> {
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
    fn run(&mut self, ctx: &mut Ctx<'_>, command: ZabCommand) -> Result<(), Fatal> {
        match command {
            ZabCommand::Send { to, message } => {
                if let ZabMessage::FollowerInfo { .. } = message {
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
                    other => other,
                };
                self.snaps_out.send(to, message, &mut self.out);
            }
            ZabCommand::Storage(op) => self.storage_op(ctx, op)?,
            ZabCommand::Deliver { zxid, txn, digest } => {
                let txn = match self.decoded.take(zxid) {
                    Some(txn) => txn,
                    None => Txn::from_bytes(txn)
                        .map_err(|e| Fatal(format!("committed txn {zxid}: {e}")))?,
                };
                ctx.node
                    .handle_event(ctx.now, Event::Committed { txn, digest });
                if let Some(zxid) = ctx.node.take_divergence() {
                    return self.diverge(
                        ctx,
                        zxid,
                        "a committed txn disagreed with the leader's tree",
                    );
                }
            }
            ZabCommand::SendSnapshot { to } => {
                self.snaps_out
                    .start(ctx.now.mono_ms, to, ctx.node.tree(), &mut self.out)
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
            ZabCommand::Serving => self.serving(ctx),
            ZabCommand::Abandon { reason } => return self.end_role(ctx, &reason),
        }
        Ok(())
    }

    fn serving(&mut self, ctx: &mut Ctx<'_>) {
        // Every member reports the new epoch to lookers from now on
        // (ZooKeeper's updateElectionVote), so late joiners see agreement.
        match &self.role {
            Role::Leading(l) => {
                let epoch = l.epoch();
                self.election.update_peer_epoch(epoch);
                ctx.node.start_leading(ctx.now, epoch);
                tracing::info!(epoch, zxid = %ctx.node.tree().last_zxid(), "leading: serving clients");
            }
            Role::Following(f) => {
                let epoch = f.current_epoch();
                self.election.update_peer_epoch(epoch);
                ctx.node.start_following(ctx.now);
                tracing::info!(epoch, leader = %f.leader(), "following: serving clients");
            }
            Role::Looking => {}
        }
    }

    fn end_role(&mut self, ctx: &mut Ctx<'_>, reason: &str) -> Result<(), Fatal> {
        tracing::info!(role = %self.describe(), reason, "role ended; back to election");
        self.role = Role::Looking;
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
