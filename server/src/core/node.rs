//! `Node`: the state machine's state, its event entry points, handshakes and timeouts.

use super::connection::{Conn, ConnState};
use super::digest_log::DigestLog;
use super::local_snapshot::LocalSnapshot;
use super::metrics::{Count, Metrics};
use super::node_mode::ModeState;
use super::pipeline::pending::PendingChanges;
use super::session::{session_password, SessionId, SessionTable};
use super::stats::ServerStats;
use super::types::{Command, ConnId, CoreConfig, Event, Mode, Now};
use super::watch::WatchRegistry;
use crate::failpoints::{active, Failpoint};
use bytes::Bytes;
use std::collections::{BTreeMap, VecDeque};
use zkd_protocol::records::{ConnectRequest, ConnectResponse};
use zkd_protocol::{Record, Zxid};
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

/// The whole server state of one member.
#[derive(Debug)]
pub struct Node {
    pub(super) config: CoreConfig,
    pub(super) tree: DataTree,
    pub(super) sessions: SessionTable,
    pub(super) watches: WatchRegistry,
    pub(super) pending: PendingChanges,
    pub(super) conns: BTreeMap<ConnId, Conn>,
    pub(super) session_conn: BTreeMap<SessionId, ConnId>,
    pub(super) in_flight: VecDeque<InFlight>,
    pub(super) last_assigned: Zxid,
    pub(super) commands: VecDeque<Command>,
    pub(super) txns_since_snapshot: u64,
    pub(super) snapshot_after: u64,
    pub(super) rng: u64,
    pub(super) next_container_check_ms: u64,
    pub(super) stats: ServerStats,
    /// A fuzzy snapshot being written.
    pub(super) snapshot: Option<LocalSnapshot>,
    /// Bytes of snapshot pieces ever handed to storage, and of those
    /// storage is done with: the difference waits for the disk.
    pub(super) snapshot_handed: u64,
    pub(super) snapshot_stored: u64,
    /// Connections in `ConnState::Reattaching`, so applying a txn checks only them.
    pub(super) reattaching: std::collections::BTreeSet<ConnId>,
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
            last_assigned: tree.last_zxid(),
            next_container_check_ms: now.mono_ms + config.container_check_interval_ms,
            rng: config.seed | 1,
            pending: PendingChanges::new(config.path_hasher.clone()),
            config,
            tree,
            sessions,
            watches: WatchRegistry::default(),
            conns: BTreeMap::new(),
            session_conn: BTreeMap::new(),
            in_flight: VecDeque::new(),
            commands: VecDeque::new(),
            txns_since_snapshot: 0,
            snapshot_after: 0,
            stats: ServerStats::default(),
            snapshot: None,
            snapshot_handed: 0,
            snapshot_stored: 0,
            reattaching: std::collections::BTreeSet::new(),
            mode: ModeState::Standalone,
            fuzzy_through: Zxid::ZERO,
            diverged_at: None,
            digests: DigestLog::default(),
            metrics: Metrics::default(),
        };
        node.snapshot_after = node.next_snapshot_threshold();
        node
    }

    /// ZooKeeper snapshots after `snapCount/2 + rand[0, snapCount/2)` txns so
    /// members do not all snapshot at once; the randomness here is seeded.
    fn next_snapshot_threshold(&mut self) -> u64 {
        // xorshift64: deterministic for a given seed.
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        let half = (self.config.snap_count / 2).max(1);
        half + self.rng % half
    }

    /// Counts an applied txn and starts a snapshot when enough have been.
    /// Only while serving: a member not serving may hold txns a sync takes
    /// back or replaces with another tree (ZOOKEEPER-1549/1558).
    pub(super) fn count_txn_for_snapshot(&mut self, now: Now) {
        self.txns_since_snapshot += 1;
        let due = self.txns_since_snapshot > self.snapshot_after;
        let serving = self.mode() != Mode::NotServing || active(Failpoint::SnapshotAnyTree);
        if due && serving && self.snapshot.is_none() {
            self.txns_since_snapshot = 0;
            self.snapshot_after = self.next_snapshot_threshold();
            let snapshot = LocalSnapshot::start(&self.tree, now.mono_ms);
            tracing::info!(zxid = %snapshot.zxid(), "taking snapshot");
            self.snapshot = Some(snapshot);
        }
    }

    /// Writes the next slice of a snapshot in progress. Slices are small and
    /// spaced out, so even a huge tree never stalls clients for long.
    fn step_snapshot(&mut self, now: Now) {
        let backlog = self.snapshot_backlog();
        let Some(snapshot) = self.snapshot.as_mut() else {
            return;
        };
        let slice = self.config.snapshot_slice_nodes;
        let before = self.commands.len();
        if snapshot.step(&self.tree, now.mono_ms, slice, backlog, &mut self.commands) {
            if let Some(done) = self.snapshot.take() {
                done.finish(&mut self.commands);
            }
        }
        for command in self.commands.range(before..) {
            if let Command::SnapshotPiece(piece) = command {
                self.snapshot_handed += piece.data.len() as u64;
            }
        }
    }

    /// Storage is done with `bytes` of snapshot pieces in all (written, or
    /// dropped): a snapshot waits while too much of its image waits for it.
    pub fn snapshot_stored(&mut self, bytes: u64) {
        self.snapshot_stored = bytes;
    }

    /// Bytes of snapshot pieces handed to storage and not yet written.
    pub fn snapshot_backlog(&self) -> u64 {
        self.snapshot_handed.saturating_sub(self.snapshot_stored)
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
                self.conns
                    .insert(conn, Conn::new(remote_ip, remote_port, rules));
            }
            Event::Certified { conn, subject } => {
                if let Some(c) = self.conns.get_mut(&conn) {
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
        if let Some(snapshot) = &self.snapshot {
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

    /// Sends a frame that answers no request (notification, ConnectResponse).
    pub(super) fn send(&mut self, conn: ConnId, frame: Bytes) {
        if self.count_sent(conn, &frame) {
            self.commands.push_back(Command::Send { conn, frame });
        }
    }

    /// Sends the reply to one of the connection's requests.
    pub(super) fn reply(&mut self, conn: ConnId, frame: Bytes) {
        // ZooKeeper answers pings before the stage that records sizes.
        if !frame.starts_with(&super::reply::PING_XID.to_be_bytes()) {
            self.stats.client_responses.record(frame.len());
        }
        if self.count_sent(conn, &frame) {
            self.commands.push_back(Command::Reply { conn, frame });
        }
    }

    fn count_sent(&mut self, conn: ConnId, frame: &Bytes) -> bool {
        let Some(c) = self.conns.get_mut(&conn) else {
            return false;
        };
        c.stats.sent += 1;
        self.stats.packets_sent += 1;
        self.metrics.add(Count::ResponseBytes, frame.len() as u64);
        true
    }

    /// Closes a connection and forgets it (its watches go with it).
    pub(super) fn close(&mut self, conn: ConnId) {
        if self.conns.contains_key(&conn) {
            self.commands.push_back(Command::Close { conn });
            self.forget_connection(conn);
        }
    }

    fn forget_connection(&mut self, conn: ConnId) {
        self.reattaching.remove(&conn);
        if let Some(c) = self.conns.remove(&conn) {
            match &mut self.mode {
                ModeState::Following(f) => {
                    // Its forwarded requests will find nobody to answer.
                    f.forwarded = f.forwarded.saturating_sub(c.forwarded);
                    if let ConnState::CreatingSession(s) = c.state {
                        f.creating.remove(&s);
                    }
                }
                ModeState::NotServing(n) => n.held.retain(|(held, _)| *held != conn),
                ModeState::Standalone | ModeState::Leading(_) | ModeState::ReadOnly => {}
            }
            if let Some(session) = c.session() {
                if self.session_conn.get(&session) == Some(&conn) {
                    self.session_conn.remove(&session);
                }
            }
        }
        self.watches.remove_connection(conn);
    }

    pub(super) fn negotiate_timeout(&self, requested: i32) -> i32 {
        requested.clamp(
            self.config.min_session_timeout_ms,
            self.config.max_session_timeout_ms,
        )
    }

    pub(super) fn handshake(&mut self, now: Now, conn: ConnId, request: ConnectRequest) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        if c.state != ConnState::AwaitingHandshake {
            return self.close(conn);
        }
        c.read_only_flag = request.read_only;
        if let ModeState::NotServing(n) = &mut self.mode {
            if now.mono_ms < n.hold_until_ms {
                // A failover is under way: answer once it is over.
                n.held.push((conn, request));
                return;
            }
            // As ZooKeeper while it elects or syncs: no session is served.
            return self.close(conn);
        }
        // A client that has seen a later zxid must not go back in time here.
        if request.last_zxid_seen > self.processed_zxid().0 {
            tracing::info!(conn = conn.0, "refusing client with a newer zxid than ours");
            return self.close(conn);
        }
        if self.mode() == Mode::ReadOnly {
            return self.read_only_handshake(now, conn, request);
        }
        let timeout_ms = self.negotiate_timeout(request.time_out);
        if request.session_id == 0 {
            let session = self.sessions.next_session_id();
            if let Some(c) = self.conns.get_mut(&conn) {
                c.state = ConnState::CreatingSession(session);
            }
            if self.mode().is_learner() {
                return self.forward_create_session(conn, session, timeout_ms);
            }
            let body =
                zkd_storage::TxnBody::CreateSession(zkd_protocol::records::CreateSessionTxn {
                    time_out: timeout_ms,
                });
            self.start_txn(
                now,
                session.0,
                0,
                body,
                Origin::CreateSession { conn, timeout_ms },
            );
        } else {
            self.reattach(now, conn, &request, timeout_ms);
        }
    }

    fn reattach(&mut self, now: Now, conn: ConnId, request: &ConnectRequest, timeout_ms: i32) {
        let session = SessionId(request.session_id);
        // ZooKeeper closes every other connection of the session before checking
        // the password: the attached one and any still waiting to reattach.
        let waiting = self.reattaching.iter().copied().filter(|c| {
            *c != conn && matches!(self.conns.get(c).map(|c| c.state), Some(ConnState::Reattaching { session: s, .. }) if s == session)
        });
        let others: Vec<ConnId> = waiting
            .chain(
                self.session_conn
                    .get(&session)
                    .copied()
                    .filter(|c| *c != conn),
            )
            .collect();
        for old in others {
            self.close(old);
        }
        if self.mode().is_learner() && request.passwd.as_ref() == session_password(session.0) {
            // The leader owns sessions: it says whether this one lives, and
            // from now on it belongs here.
            if let Some(c) = self.conns.get_mut(&conn) {
                c.state = ConnState::Revalidating {
                    session,
                    timeout_ms,
                };
            }
            self.commands.push_back(Command::Revalidate {
                session: session.0,
                timeout_ms,
            });
            return;
        }
        let valid = request.passwd.as_ref() == session_password(session.0)
            && self.sessions.is_live(session);
        if !valid {
            tracing::info!(%session, "refusing reattach: session expired or wrong password");
            self.send_connect_response(conn, 0, SessionId(0));
            return self.close(conn);
        }
        self.sessions.renegotiate(session, timeout_ms, now.mono_ms);
        if let Some(l) = self.mode.leading() {
            l.owners.insert(session, u64::from(self.config.server_id));
        }
        let in_flight = self
            .in_flight
            .iter()
            .rev()
            .find(|f| f.txn.header.client_id == session.0);
        match in_flight.map(|f| f.txn.zxid()) {
            Some(after) => {
                if let Some(c) = self.conns.get_mut(&conn) {
                    c.state = ConnState::Reattaching {
                        session,
                        after,
                        timeout_ms,
                    };
                    self.reattaching.insert(conn);
                }
            }
            None => {
                self.send_connect_response(conn, timeout_ms, session);
                self.establish(now, conn, session);
            }
        }
    }

    /// Completes reattaches that were waiting for their session's writes up to `applied`.
    pub(super) fn finish_reattaches(&mut self, now: Now, applied: Zxid) {
        if self.reattaching.is_empty() {
            return;
        }
        let ready: Vec<(ConnId, SessionId, i32)> = self
            .reattaching
            .iter()
            .filter_map(|id| Some((id, self.conns.get(id)?)))
            .filter_map(|(id, c)| match c.state {
                ConnState::Reattaching {
                    session,
                    after,
                    timeout_ms,
                } if after <= applied => Some((*id, session, timeout_ms)),
                _ => None,
            })
            .collect();
        for (conn, session, timeout_ms) in ready {
            self.reattaching.remove(&conn);
            if self.sessions.is_live(session) {
                // The wait may have been long: expiry counts from the answer.
                self.sessions.renegotiate(session, timeout_ms, now.mono_ms);
                self.send_connect_response(conn, timeout_ms, session);
                self.establish(now, conn, session);
            } else {
                self.send_connect_response(conn, 0, SessionId(0));
                self.close(conn);
            }
        }
    }

    pub(super) fn send_connect_response(
        &mut self,
        conn: ConnId,
        timeout_ms: i32,
        session: SessionId,
    ) {
        let Some(c) = self.conns.get(&conn) else {
            return;
        };
        let passwd = if session.0 == 0 {
            [0u8; 16]
        } else {
            session_password(session.0)
        };
        let response = ConnectResponse {
            protocol_version: 0,
            time_out: timeout_ms,
            session_id: session.0,
            passwd: Bytes::copy_from_slice(&passwd),
            // Answer in the form the client used: the byte only if it sent one.
            read_only: c.read_only_flag.map(|_| self.mode() == Mode::ReadOnly),
        };
        self.send(conn, response.to_bytes());
    }

    pub(super) fn establish(&mut self, now: Now, conn: ConnId, session: SessionId) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        c.state = ConnState::Established(session);
        c.stats.established_ms = now.wall_ms;
        let backlog = std::mem::take(&mut c.backlog);
        // One connection per session: whoever held it before goes.
        if let Some(old) = self
            .session_conn
            .insert(session, conn)
            .filter(|old| *old != conn)
        {
            self.close(old);
        }
        for frame in backlog {
            self.request_frame(now, conn, frame);
        }
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
    pub fn connections(&self) -> &BTreeMap<ConnId, Conn> {
        &self.conns
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
        for conn in self.conns.values_mut() {
            conn.stats = super::connection::ConnStats {
                established_ms: conn.stats.established_ms,
                ..Default::default()
            };
        }
    }

    /// Syncs waiting for their quorum round (the leader's `zk_pending_syncs`).
    pub fn pending_syncs(&self) -> usize {
        let sync = super::node_request::sync_txn();
        self.in_flight.iter().filter(|f| f.txn.body == sync).count()
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
        self.in_flight.len() + forwarded
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
