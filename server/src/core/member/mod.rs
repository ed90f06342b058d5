//! An ensemble member: fast leader election, the member's Zab role, and
//! what it asks of its peer links and its storage thread, as commands (see
//! `outbox`). The runtime's node loop and the simulator drive it with the
//! same driver (`driver::member_driver`). The client-facing `Node` follows
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
use crate::core::metrics::{Count, Timing};
use crate::core::peer_event::{LearnerIntake, PeerEvent, SnapPiece};
use crate::core::storage_job::{LoggedTxns, ReadState, RebuiltTree, StorageJob, StorageReport};
use crate::core::zab::{
    DurableState, Epoch, Follower, Leader, Members, StorageOp, ZabCommand, ZabMessage,
};
use crate::core::{Command, Event, Node, Now, ReadPermit, MAX_OUTSTANDING};
use crate::failpoints::{active, Failpoint};
pub use inspect::MemberView;
#[cfg(test)]
pub(crate) use outbox::weight;
pub(crate) use outbox::Outbox;
pub use outbox::{LinkLimits, MemberCommand};
use snap_receiver::SnapReceiver;
pub(crate) use snap_sender::SnapSender;
use std::collections::VecDeque;
use zkd_protocol::Zxid;
use zkd_storage::Txn;

mod announced_config;
mod config_change;
mod decoded;
mod flow;
mod inspect;
mod learner_traffic;
mod node_commands;
mod outbox;
mod role_clocks;
mod role_commands;
mod snap_receiver;
mod snap_sender;
mod sync;

use decoded::DecodedTxns;
use role_clocks::{RoleClocks, ServingAs};

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

/// The first and the longest pause before a round after a leader-elect
/// closed the link before LEADERINFO; it doubles each time in a row.
const REFUSED_BACKOFF_MIN_MS: u64 = 100;
const REFUSED_BACKOFF_MAX_MS: u64 = 3_200;

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
    /// Its leader-elect closed the link before LEADERINFO (refused it, or
    /// could not be reached): the next round waits until then, so a
    /// member no leader takes does not spin through elections.
    Backoff {
        until_ms: u64,
    },
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
    members: Members,
    timing: crate::core::zab::Timing,
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
    /// When its election, role and unavailability began (for the metrics).
    clocks: RoleClocks,
    /// Follower: the ensemble configuration its leader's NEWLEADER carried,
    /// activated at UPTODATE (see `announced_config`).
    announced: Option<crate::core::EnsembleConfig>,
    /// The version of the configuration `members` was read from; None: the
    /// members it started with.
    members_version: Option<i64>,
    /// Following roles in a row whose leader closed the link before
    /// LEADERINFO (reset once a role serves): the next round's pause.
    refusals: u32,
}

impl Member {
    /// A member that has not looked for a leader yet.
    pub fn new(
        id: ServerId,
        members: Members,
        timing: crate::core::zab::Timing,
        limits: LinkLimits,
    ) -> Self {
        let config = ElectionConfig {
            my_id: id,
            voters: members.voters.clone(),
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
            members,
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
            clocks: RoleClocks::default(),
            announced: None,
            members_version: None,
            refusals: 0,
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
        let Role::Leading(l) = &self.role else {
            return;
        };
        if self.out.levels_stale(now_ms) {
            let me = self.id;
            // Learners outside the configuration (a removed member) too.
            let learners = l.learners().map(|h| h.sid);
            let peers = self.members.all().chain(learners).filter(move |&v| v != me);
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

    /// Starts an election round from what is durable now, once the storage
    /// thread has read it (the log since the last snapshot may be long; the
    /// node loop keeps serving pings and lookers meanwhile).
    pub fn look(&mut self, ctx: &mut Ctx<'_>) {
        if let Waiting::Backoff { until_ms } = self.waiting {
            if ctx.now.mono_ms < until_ms {
                return;
            }
        }
        self.clocks.looking(ctx);
        self.role = Role::Looking;
        self.waiting = Waiting::State;
        self.looked = None;
        self.election.stand_down();
        ctx.node.looking(ctx.now);
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
        // The election counts the voters of the configuration in effect,
        // and those of a reconfig logged beyond it.
        self.follow_config(ctx)?;
        let next = Self::logged_next_voters(ctx, &read.state.history);
        self.election.set_next_voters(next);
        self.looked = Some(read);
        tracing::info!(vote = %own, "looking for a leader");
        self.election.look(ctx.now.mono_ms, own);
        self.after_election(ctx)
    }

    /// After following roles whose leader-elect closed the link before
    /// LEADERINFO, the next round waits (see [`Waiting::Backoff`]).
    fn back_off(&mut self, now_ms: u64) {
        if self.refusals == 0 {
            return;
        }
        // A leader in discovery that gave up looks the same: the pause stays
        // well within the initLimit the next one gives its followers.
        let most = REFUSED_BACKOFF_MAX_MS.min(self.timing.init_ms() / 4);
        let pause = (REFUSED_BACKOFF_MIN_MS << (self.refusals - 1).min(5)).min(most);
        let until_ms = now_ms + pause;
        tracing::debug!(
            refusals = self.refusals,
            pause,
            "the last leader-elect closed the link before LEADERINFO; waiting"
        );
        self.waiting = Waiting::Backoff { until_ms };
    }

    /// When `handle_timeout` next has work.
    pub fn poll_timeout(&self) -> Option<u64> {
        let role = match &self.role {
            Role::Leading(l) => l.poll_timeout(),
            Role::Following(f) => f.poll_timeout(),
            Role::Looking => None,
        };
        let backoff = match self.waiting {
            Waiting::Backoff { until_ms } => Some(until_ms),
            _ => None,
        };
        [
            self.election.poll_timeout(),
            role,
            self.snaps_out.poll_timeout(),
            backoff,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Timers of the election and of the role.
    pub fn handle_timeout(&mut self, ctx: &mut Ctx<'_>) -> Result<(), Fatal> {
        if matches!(self.waiting, Waiting::Backoff { .. }) {
            self.look(ctx);
        }
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
        self.snaps_moved(ctx, moved)
    }

    /// Whether work waits that a loop with nothing else to do should run
    /// now ([`handle_idle`](Self::handle_idle)) rather than on its timer: a
    /// SNAP being streamed.
    pub fn has_idle_work(&self) -> bool {
        self.snaps_out.has_idle_work()
    }

    /// The loop has nothing else to do: the SNAPs in flight take a turn.
    pub fn handle_idle(&mut self, ctx: &mut Ctx<'_>) -> Result<(), Fatal> {
        let moved = self
            .snaps_out
            .idle_turn(ctx.now.mono_ms, ctx.node.tree(), &mut self.out);
        self.snaps_moved(ctx, moved)
    }

    /// Followers that read their SNAP are alive.
    fn snaps_moved(&mut self, ctx: &mut Ctx<'_>, moved: Vec<ServerId>) -> Result<(), Fatal> {
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
                self.take_newer_config(ctx, &n)?;
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
                    Role::Following(f) if f.leader() == peer => {
                        if f.awaiting_leader_info() {
                            self.refusals = self.refusals.saturating_add(1);
                        }
                        f.leader_disconnected()
                    }
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
        if let ZabMessage::NewLeader { config, .. } = &message {
            self.note_announced(from, config);
        }
        match (&mut self.role, message) {
            (Role::Looking, _) => self.out.close_zab(from),
            (Role::Leading(_), message) => self.learner_message(ctx, from, message),
            (Role::Following(_), ZabMessage::RevalidateReply { session, valid }) => ctx
                .node
                .handle_event(ctx.now, Event::Revalidated { session, valid }),
            (Role::Following(f), message) => {
                if f.is_serving() {
                    Self::count_broadcast(ctx, &self.decoded, &message);
                }
                f.handle_message(ctx.now.mono_ms, from, message)
            }
        }
        self.after_zab(ctx)
    }

    /// A follower's broadcast traffic in ZooKeeper's counters: proposals
    /// received, and how long after the leader stamped a txn its PROPOSAL,
    /// and its COMMIT (or INFORM), got here.
    fn count_broadcast(ctx: &mut Ctx<'_>, decoded: &DecodedTxns, message: &ZabMessage) {
        let (metrics, now) = (ctx.node.metrics_mut(), ctx.now);
        let (timing, stamped) = match message {
            ZabMessage::Proposal { txn, .. } => {
                metrics.add(Count::LearnerProposalsReceived, 1);
                (Timing::ProposalLatency, Txn::stamped_time(txn))
            }
            ZabMessage::Commit { zxid, .. } | ZabMessage::CommitAndActivate { zxid, .. } => {
                (Timing::CommitPropagationLatency, decoded.time_of(*zxid))
            }
            ZabMessage::Inform { txn, .. } | ZabMessage::InformAndActivate { txn, .. } => {
                (Timing::CommitPropagationLatency, Txn::stamped_time(txn))
            }
            _ => return,
        };
        if let Some(time) = stamped {
            metrics.observe_age(timing, time, now);
        }
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
                    self.back_off(ctx.now.mono_ms);
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
            StorageReport::Persisted(zxid) => {
                // The ack this sync allows is created now.
                let (metrics, now) = (ctx.node.metrics_mut(), ctx.now);
                let timing = Timing::ProposalAckCreationLatency;
                self.decoded
                    .persisted(zxid, |time| metrics.observe_age(timing, time, now));
                match &mut self.role {
                    Role::Leading(l) => l.handle_persisted(zxid),
                    Role::Following(f) => f.handle_persisted(zxid),
                    Role::Looking => {}
                }
            }
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
        ctx.node.election_decided(ctx.now);
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
        self.clocks.decided(ctx);
        self.take_role(ctx, follow, state);
        self.after_zab(ctx)
    }

    /// The role the election decided starts from what was durable: leading,
    /// or following the leader in `follow`.
    fn take_role(&mut self, ctx: &mut Ctx<'_>, follow: Option<ServerId>, state: DurableState) {
        let tree_zxid = ctx.node.tree().last_zxid();
        let now_ms = ctx.now.mono_ms;
        self.role = if let Some(leader) = follow {
            let observer = self.members.is_observer(self.id);
            let follower = Follower::new(leader, self.timing, state, tree_zxid, now_ms, observer);
            Role::Following(match self.diverged {
                Divergence::None => follower,
                _ => follower.asking_for_snapshot(),
            })
        } else {
            let next = self.logged_next_config(ctx);
            let leader = Leader::new(
                self.id,
                self.members.clone(),
                self.timing,
                state,
                tree_zxid,
                now_ms,
            )
            .with_next_config(next);
            Role::Leading(leader.with_flow(self.out.flow_marks()))
        };
        self.out.set_learner_intake(match self.role {
            Role::Leading(_) => LearnerIntake::Taken,
            _ => LearnerIntake::Refused,
        });
    }
}
