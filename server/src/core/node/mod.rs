//! `Node`: the state machine's state, its event entry points, handshakes and timeouts.

mod apply;
mod connections;
mod handshake;
mod member;
mod mode;
mod read_only;
mod reconfig;
mod request;
mod sasl;
mod snapshots;

pub(crate) use apply::apply_to_tree;

use super::connection::Conn;
use super::digest_log::DigestLog;
use super::metrics::{Count, Metrics};
use super::pipeline::pending::PendingChanges;
use super::session::{SessionId, SessionTable};
use super::stats::ServerStats;
use super::types::{Command, ConnId, CoreConfig, Event, Mode, Now};
use super::watch::WatchRegistry;
use mode::ModeState;
use snapshots::Snapshots;
use std::collections::{BTreeMap, VecDeque};
use zkd_protocol::Zxid;
use zkd_storage::{DataTree, Txn};

/// Requests waiting for storage beyond which a member takes no new ones
/// from its clients (ZooKeeper's globalOutstandingLimit): memory stays
/// bounded under a flood, and clients see the wait.
pub const MAX_OUTSTANDING: usize = 1_000;

/// Why a txn was started, so its outcome reaches the right place.
#[derive(Clone, Debug)]
pub(super) enum Origin {
    /// A client request on `conn`.
    Client { conn: ConnId, xid: i32 },
    /// A new session for the connection that asked for it.
    CreateSession { conn: ConnId, timeout_ms: i32 },
    /// The session table expired a session.
    Expiry,
    /// The container manager removing an empty container or expired TTL node.
    ContainerSweep,
    /// A request follower `from` forwarded: the follower answers its client.
    Forwarded { from: u64 },
}

/// A txn handed to storage and not yet applied.
#[derive(Debug)]
pub(super) struct InFlight {
    pub txn: Txn,
    pub origin: Origin,
}

/// The clients' connections, by id and by the session each serves.
#[derive(Debug, Default)]
pub(super) struct Clients {
    /// Boxed: a B-tree keeps its nodes part empty, and empty slots of a
    /// few bytes cost less than slots the size of a `Conn` (issue 52).
    pub(super) conns: BTreeMap<ConnId, Box<Conn>>,
    pub(super) session_conn: BTreeMap<SessionId, ConnId>,
    /// Connections in `ConnState::Reattaching`, so applying a txn checks only them.
    pub(super) reattaching: std::collections::BTreeSet<ConnId>,
}

/// Writes under way: the changes prepared and not yet applied (which later
/// requests' preps see), the txns handed to storage, and the last zxid given.
#[derive(Debug)]
pub(super) struct Writes {
    pub(super) pending: PendingChanges,
    pub(super) in_flight: VecDeque<InFlight>,
    pub(super) last_assigned: Zxid,
}

/// The whole server state of one member.
#[derive(Debug)]
pub struct Node {
    pub(super) config: CoreConfig,
    pub(super) tree: DataTree,
    pub(super) sessions: SessionTable,
    pub(super) watches: WatchRegistry,
    /// The clients' connections.
    pub(super) clients: Clients,
    /// Writes between their prep and their apply.
    pub(super) writes: Writes,
    pub(super) commands: VecDeque<Command>,
    pub(super) next_container_check_ms: u64,
    pub(super) stats: ServerStats,
    /// When snapshots are taken, and the one being written.
    pub(super) snapshots: Snapshots,
    /// What the member does with requests (its Zab role), with the state
    /// that belongs to that mode alone.
    pub(super) mode: ModeState,
    /// Txns up to this zxid may already be in the tree (it came from a fuzzy
    /// snapshot), so failing to apply one is expected, not divergence.
    pub(super) fuzzy_through: Zxid,
    /// A committed txn failed to apply here: the tree diverged from the
    /// leader's at this zxid (taken by the member, which ends its role).
    pub(super) diverged_at: Option<Zxid>,
    /// The tree's digest every 128th zxid (the AdminServer's `hash`).
    pub(super) digests: DigestLog,
    /// ZooKeeper's counters and summaries (`mntr`, Prometheus).
    pub(super) metrics: Metrics,
}

impl Node {
    /// A node serving `tree` (recovered from disk). Sessions recorded in the
    /// tree get a fresh timeout from `now`, as after a ZooKeeper restart.
    pub fn new(config: CoreConfig, tree: DataTree, now: Now) -> Node {
        let mut sessions = SessionTable::new(config.tick_ms, config.server_id, now.wall_ms as u64);
        for (id, timeout) in tree.sessions() {
            sessions.add(SessionId(*id), *timeout, now.mono_ms);
        }
        let mut node = Node {
            next_container_check_ms: now.mono_ms + config.container_check_interval_ms,
            snapshots: Snapshots::new(config.seed),
            writes: Writes {
                pending: PendingChanges::new(config.path_hasher.clone()),
                in_flight: VecDeque::new(),
                last_assigned: tree.last_zxid(),
            },
            clients: Clients::default(),
            config,
            tree,
            sessions,
            watches: WatchRegistry::default(),
            commands: VecDeque::new(),
            stats: ServerStats::default(),
            mode: ModeState::Standalone,
            fuzzy_through: Zxid::ZERO,
            diverged_at: None,
            digests: DigestLog::default(),
            metrics: Metrics::default(),
        };
        node.snapshots.schedule_next(node.config.snap_count);
        node
    }

    /// Feeds one event to the state machine.
    pub fn handle_event(&mut self, now: Now, event: Event) {
        match event {
            Event::Connected {
                conn,
                remote_ip,
                remote_port,
            } => {
                self.metrics.add(Count::ConnectionRequests, 1);
                let rules = self.config.acl_rules;
                self.clients
                    .conns
                    .insert(conn, Box::new(Conn::new(remote_ip, remote_port, rules)));
            }
            Event::Certified { conn, subject } => {
                if let Some(c) = self.clients.conns.get_mut(&conn) {
                    c.auth.certified(subject);
                }
            }
            Event::Handshake { conn, request } => self.handshake(now, conn, request),
            Event::Request { conn, frame } => self.request_frame(now, conn, frame),
            Event::Disconnected { conn } => self.forget_connection(conn),
            Event::Persisted { zxid } => self.persisted(now, zxid),
            Event::Committed { txn, digest } => self.committed(now, txn, digest),
            Event::Forwarded { from, request } => self.forwarded(now, from, request),
            Event::Revalidate {
                from,
                session,
                timeout_ms,
            } => self.revalidate(now, from, SessionId(session), timeout_ms),
            Event::Revalidated { session, valid } => {
                self.revalidated(now, SessionId(session), valid)
            }
            Event::Touched(touches) => self.touched_remotely(now, &touches),
        }
    }

    /// Takes the commands produced so far, in order.
    pub fn drain_commands(&mut self) -> impl Iterator<Item = Command> + '_ {
        self.commands.drain(..)
    }

    /// Moves the commands produced so far to the back of `into` (see [`take_queued`](super::take_queued)).
    pub fn take_commands(&mut self, into: &mut VecDeque<Command>) {
        super::take_queued(&mut self.commands, into);
    }

    /// The monotonic time at which `handle_timeout` next has work.
    pub fn poll_timeout(&self) -> Option<u64> {
        let mut due = u64::MAX;
        if let ModeState::NotServing(n) = &self.mode {
            if !n.held.is_empty() {
                due = n.hold_until_ms;
            }
        }
        if let Some(at) = self.read_only_due() {
            due = due.min(at);
        }
        if self.mode() == Mode::ReadOnly {
            due = due.min(self.sessions.next_expiry_ms().unwrap_or(u64::MAX));
        }
        if self.proposes() {
            due = self.next_container_check_ms;
            if let Some(expiry) = self.sessions.next_expiry_ms() {
                due = due.min(expiry);
            }
        }
        if let Some(snapshot) = &self.snapshots.in_progress {
            due = due.min(snapshot.due_ms);
        }
        (due != u64::MAX).then_some(due)
    }

    /// Expires sessions and sweeps containers whose time has come (only
    /// where writes start: standalone or leading); starts read-only mode,
    /// and expires its local sessions.
    pub fn handle_timeout(&mut self, now: Now) {
        self.refuse_held(now);
        self.step_read_only(now);
        if !self.proposes() {
            self.step_snapshot(now);
            return;
        }
        for session in self.sessions.expire(now.mono_ms) {
            tracing::info!(%session, "session expired");
            self.metrics.add(Count::SessionsExpired, 1);
            self.start_close_session(now, session, Origin::Expiry);
        }
        if now.mono_ms >= self.next_container_check_ms {
            self.next_container_check_ms = now.mono_ms + self.config.container_check_interval_ms;
            self.sweep_containers(now);
        }
        self.step_snapshot(now);
    }

    /// Expires `session` now, as its timeout would (a test's fault command).
    /// False unless this node starts writes (leads or stands alone) and the
    /// session is live.
    pub fn expire_session(&mut self, now: Now, session: SessionId) -> bool {
        if !self.proposes() || !self.sessions.is_live(session) {
            return false;
        }
        tracing::info!(%session, "session expired on request");
        self.start_close_session(now, session, Origin::Expiry);
        true
    }

    /// The last zxid this member processed, as replies, `srvr` and the
    /// handshake's lastZxidSeen check see it: the tree's, or on a new
    /// leader `epoch << 32` until the epoch's first txn.
    pub fn processed_zxid(&self) -> Zxid {
        match &self.mode {
            ModeState::Leading(l) => self.tree.last_zxid().max(l.epoch_base),
            _ => self.tree.last_zxid(),
        }
    }

    /// The committed tree.
    pub fn tree(&self) -> &DataTree {
        &self.tree
    }

    /// The session table.
    pub fn sessions(&self) -> &SessionTable {
        &self.sessions
    }

    /// The watch registry.
    pub fn watches(&self) -> &WatchRegistry {
        &self.watches
    }

    /// Live connections.
    pub fn connections(&self) -> &BTreeMap<ConnId, Box<Conn>> {
        &self.clients.conns
    }

    /// Server-wide counters.
    pub fn stats(&self) -> &ServerStats {
        &self.stats
    }

    /// ZooKeeper's counters and summaries kept here.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// The same, for the member and the runtime to add theirs.
    pub fn metrics_mut(&mut self) -> &mut Metrics {
        &mut self.metrics
    }

    /// The tree's digest every 128th zxid, the last 1,024 (`hash`).
    pub fn digests(&self) -> &DigestLog {
        &self.digests
    }

    /// Resets server-wide counters (`srst`).
    pub fn reset_stats(&mut self) {
        self.stats = ServerStats::default();
    }

    /// Resets per-connection counters (`crst`).
    pub fn reset_connection_stats(&mut self) {
        for conn in self.clients.conns.values_mut() {
            conn.stats = super::connection::ConnStats {
                established_ms: conn.stats.established_ms,
                ..Default::default()
            };
        }
    }

    /// Syncs waiting for their quorum round (the leader's `zk_pending_syncs`).
    pub fn pending_syncs(&self) -> usize {
        let sync = request::sync_txn();
        self.writes
            .in_flight
            .iter()
            .filter(|f| f.txn.body == sync)
            .count()
    }

    /// Leader: requests follower `from` forwarded that are in flight here.
    pub fn forwarded_in_flight(&self, from: u64) -> usize {
        match &self.mode {
            ModeState::Leading(l) => l.forwarded.get(&from).copied().unwrap_or(0),
            _ => 0,
        }
    }

    /// Number of requests waiting for their txn to be applied.
    pub fn outstanding(&self) -> usize {
        let forwarded = match &self.mode {
            ModeState::Following(f) => f.forwarded,
            _ => 0,
        };
        self.writes.in_flight.len() + forwarded
    }

    /// What the member does with client requests.
    pub fn mode(&self) -> Mode {
        self.mode.mode()
    }

    /// The configuration the core runs with.
    pub fn config(&self) -> &CoreConfig {
        &self.config
    }
}
