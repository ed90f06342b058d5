//! The one driver of a member, for the runtime and the simulator alike: it
//! hands the member its inputs (peer events of links still open, storage
//! reports, timers, the node's commands, how full each link is) and carries
//! out the commands the member makes, in order, on the member's links and
//! storage thread. The runtime plugs in its peer network and the storage
//! thread's channel; the simulator its simulated links and disk.

use super::ServeError;
use crate::core::election::{Notification, ServerId};
use crate::core::member::{Ctx, Fatal, LinkLimits, Member, MemberCommand};
use crate::core::peer_event::{LearnerIntake, PeerEvent};
use crate::core::storage_job::{StorageJob, StorageReport};
use crate::core::zab::{Members, Timing, ZabMessage};
use crate::core::ServerSpec;
use crate::core::{Command, Node, Now};
use crate::failpoints::{active, Failpoint};
use bytes::Bytes;
use std::collections::{BTreeMap, VecDeque};
use zkd_protocol::Zxid;

/// A member's links to its peers, as the driver reaches them. Sends only
/// queue, and never block.
pub(crate) trait PeerLinks {
    /// Queues an election notification for `to`.
    fn send_notification(&mut self, to: ServerId, n: Notification);
    /// Follower: opens a fresh quorum link to `leader`.
    fn connect_zab(&mut self, leader: ServerId);
    /// Whether `event` came from a quorum link closed or replaced since.
    fn is_stale(&self, event: &PeerEvent) -> bool;
    /// Queues a Zab message on the quorum link with `to`.
    fn send_zab(&mut self, to: ServerId, message: ZabMessage);
    /// Starts a SNAP of the image as of `zxid` to `to`.
    fn send_snap_start(&mut self, to: ServerId, zxid: Zxid);
    /// The next chunk of the SNAP to `to`; the last carries `fuzzy_through`.
    fn send_snap_chunk(
        &mut self,
        to: ServerId,
        offset: u64,
        data: Bytes,
        fuzzy_through: Option<Zxid>,
    );
    /// Bytes queued for `to` and not yet written; None without a link.
    fn queued_bytes(&self, to: ServerId) -> Option<usize>;
    /// Whether learners' connections are taken, held or refused.
    fn set_learner_intake(&mut self, intake: LearnerIntake);
    /// Closes the quorum link with `peer`, if any.
    fn close_zab(&mut self, peer: ServerId);
    /// Closes every quorum link.
    fn close_all_zab(&mut self);
    /// Admits the links of these servers from now on, at their addresses.
    fn learn_servers(&mut self, servers: BTreeMap<u64, ServerSpec>);
}

/// A member's storage thread: jobs run strictly in the order submitted,
/// and their reports come back in that order.
pub(crate) trait StorageJobs {
    /// Queues `job`; an error means storage has stopped.
    fn submit(&mut self, job: StorageJob) -> Result<(), ServeError>;
}

/// What a member's commands reach.
pub(crate) struct MemberIo<'a> {
    pub links: &'a mut dyn PeerLinks,
    pub jobs: &'a mut dyn StorageJobs,
}

/// A member and its driver's state.
pub(crate) struct MemberDriver {
    member: Member,
    /// The member's commands being carried out: a list kept from one step
    /// to the next (see [`take_queued`](crate::core::take_queued)).
    commands: VecDeque<MemberCommand>,
    /// Storage reads submitted and not yet reported.
    reads_pending: usize,
}

impl From<Fatal> for ServeError {
    fn from(fatal: Fatal) -> ServeError {
        ServeError::Storage(fatal.0)
    }
}

impl MemberDriver {
    /// A member that has not looked for a leader yet.
    pub fn new(id: ServerId, voters: Members, timing: Timing, limits: LinkLimits) -> MemberDriver {
        MemberDriver::driving(Member::new(id, voters, timing, limits))
    }

    /// Drives `member` (the simulator sets some of its members up first).
    pub fn driving(member: Member) -> MemberDriver {
        MemberDriver {
            member,
            commands: VecDeque::new(),
            reads_pending: 0,
        }
    }

    /// The member, for what it tells about itself.
    pub fn member(&self) -> &Member {
        &self.member
    }

    /// Starts the first election round.
    pub fn look(&mut self, node: &mut Node, now: Now, io: MemberIo<'_>) -> Result<(), ServeError> {
        self.step(node, now, io, |m, ctx| {
            m.look(ctx);
            Ok(())
        })
    }

    /// A peer event. One of a quorum link closed or replaced since is dropped.
    pub fn handle_peer(
        &mut self,
        node: &mut Node,
        now: Now,
        io: MemberIo<'_>,
        event: PeerEvent,
    ) -> Result<(), ServeError> {
        // Planted (stale-link-events): what a closed link sent still counts.
        if io.links.is_stale(&event) && !active(Failpoint::StaleLinkEvents) {
            tracing::debug!(?event, "dropping an event of a quorum link closed since");
            return Ok(());
        }
        self.step(node, now, io, |m, ctx| m.handle_peer(ctx, event))
    }

    /// A storage report.
    pub fn handle_report(
        &mut self,
        node: &mut Node,
        now: Now,
        io: MemberIo<'_>,
        report: StorageReport,
    ) -> Result<(), ServeError> {
        if reports_a_read(&report) {
            self.reads_pending = self.reads_pending.saturating_sub(1);
        }
        self.step(node, now, io, |m, ctx| m.handle_report(ctx, report))
    }

    /// Planted (blocking-storage-reads): whether the node loop must wait for
    /// a storage read before it does anything else. Never otherwise: reads
    /// run on the storage thread while the loop goes on.
    pub fn blocked(&self) -> bool {
        self.reads_pending > 0 && active(Failpoint::BlockingStorageReads)
    }

    /// The member's timers.
    pub fn handle_timeout(
        &mut self,
        node: &mut Node,
        now: Now,
        io: MemberIo<'_>,
    ) -> Result<(), ServeError> {
        self.step(node, now, io, |m, ctx| m.handle_timeout(ctx))
    }

    /// Whether the member has work for a loop with nothing else to do.
    pub fn has_idle_work(&self) -> bool {
        self.member.has_idle_work()
    }

    /// The loop has nothing else to do: the member's idle work.
    pub fn handle_idle(
        &mut self,
        node: &mut Node,
        now: Now,
        io: MemberIo<'_>,
    ) -> Result<(), ServeError> {
        self.step(node, now, io, |m, ctx| m.handle_idle(ctx))
    }

    /// When [`handle_timeout`](Self::handle_timeout) next has work.
    pub fn poll_timeout(&self) -> Option<u64> {
        self.member.poll_timeout()
    }

    /// Carries out what the node asked of the ensemble and of storage; the
    /// frames and closes for client connections go to `for_clients`, in the
    /// order queued, for the caller to write.
    pub fn route_node_commands(
        &mut self,
        node: &mut Node,
        now: Now,
        io: MemberIo<'_>,
        for_clients: &mut VecDeque<Command>,
    ) -> Result<(), ServeError> {
        self.step(node, now, io, |m, ctx| {
            m.route_node_commands(ctx, for_clients)
        })
    }

    fn step(
        &mut self,
        node: &mut Node,
        now: Now,
        io: MemberIo<'_>,
        step: impl FnOnce(&mut Member, &mut Ctx<'_>) -> Result<(), Fatal>,
    ) -> Result<(), ServeError> {
        self.member
            .see_links(now.mono_ms, |peer| io.links.queued_bytes(peer));
        let stepped = step(&mut self.member, &mut Ctx { node, now });
        // What the member asked for before it failed is still carried out,
        // as it was when the member called its links directly.
        self.member.take_commands(&mut self.commands);
        self.reads_pending += self.commands.iter().filter(|c| asks_a_read(c)).count();
        let carried = self.carry_out(io);
        stepped?;
        carried
    }

    fn carry_out(&mut self, io: MemberIo<'_>) -> Result<(), ServeError> {
        carry_out(&mut self.commands, io)
    }
}

/// Whether `command` has the storage thread read (and report what it read).
fn asks_a_read(command: &MemberCommand) -> bool {
    matches!(
        command,
        MemberCommand::Storage(
            StorageJob::ReadDurableState { .. }
                | StorageJob::Rebuild
                | StorageJob::ReadLogged { .. }
                | StorageJob::ReadFor { .. }
        )
    )
}

/// Whether `report` answers a read ([`asks_a_read`]).
fn reports_a_read(report: &StorageReport) -> bool {
    matches!(
        report,
        StorageReport::DurableState(_)
            | StorageReport::Rebuilt(_)
            | StorageReport::Logged(_)
            | StorageReport::LoggedFor { .. }
    )
}

/// Carries out `commands` in order; a storage thread that stopped ends it
/// (the rest are dropped).
pub(crate) fn carry_out(
    commands: &mut VecDeque<MemberCommand>,
    io: MemberIo<'_>,
) -> Result<(), ServeError> {
    while let Some(command) = commands.pop_front() {
        let links = &mut *io.links;
        match command {
            MemberCommand::Notify { to, notification } => links.send_notification(to, notification),
            MemberCommand::ConnectZab(leader) => links.connect_zab(leader),
            MemberCommand::SendZab { to, message } => links.send_zab(to, message),
            MemberCommand::SnapStart { to, zxid } => links.send_snap_start(to, zxid),
            MemberCommand::SnapChunk {
                to,
                offset,
                data,
                fuzzy_through,
            } => links.send_snap_chunk(to, offset, data, fuzzy_through),
            MemberCommand::LearnerIntake(intake) => links.set_learner_intake(intake),
            MemberCommand::CloseZab(peer) => links.close_zab(peer),
            MemberCommand::LearnServers(servers) => links.learn_servers(servers),
            MemberCommand::CloseAllZab => links.close_all_zab(),
            MemberCommand::Storage(job) => {
                if let Err(e) = io.jobs.submit(job) {
                    commands.clear();
                    return Err(e);
                }
            }
        }
    }
    Ok(())
}

impl StorageJobs for super::storage_worker::JobSender {
    fn submit(&mut self, job: StorageJob) -> Result<(), ServeError> {
        self.send(job)
            .map_err(|_| ServeError::Storage("storage worker stopped".into()))
    }
}
