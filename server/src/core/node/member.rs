//! The node as a member of an ensemble: its mode follows the Zab role, a
//! follower forwards writes and session creation to the leader and relays
//! its clients' touches, and the leader takes forwarded requests in.

use super::mode::{Following, Leading, ModeState, NotServing, HOLD_HANDSHAKES_MS};
use super::{Node, Origin};
use crate::core::acl::AuthIds;
use crate::core::connection::ConnState;
use crate::core::pipeline::pending::PendingChanges;
use crate::core::session::{SessionId, SessionTable};
use crate::core::types::{Command, ConnId, ForwardedRequest, Mode, Now, SessionTouch};
use crate::failpoints::{active, Failpoint};
use bytes::{Buf, Bytes, BytesMut};
use std::sync::Arc;
use zkd_protocol::records::{ConnectRequest, CreateSessionTxn, ErrorTxn, Id};
use zkd_protocol::request::ClientRequest;
use zkd_protocol::{ErrorCode, OpCode, Zxid};
use zkd_storage::{DataTree, TxnBody};

impl Node {
    /// A member of an ensemble, serving nobody until its role says so.
    /// Txns through `fuzzy_through` may already be in `tree` (it was
    /// recovered from a leader's fuzzy image; `Zxid::ZERO` if exact).
    pub fn new_member(
        config: super::CoreConfig,
        tree: DataTree,
        fuzzy_through: Zxid,
        now: Now,
    ) -> Node {
        let mut node = Node::new(config, tree, now);
        node.mode = ModeState::NotServing(NotServing {
            hold_until_ms: now.mono_ms + HOLD_HANDSHAKES_MS,
            ..NotServing::default()
        });
        node.fuzzy_through = fuzzy_through;
        node.show_ensemble_config();
        node
    }

    /// The role ended (or has not begun): every client connection is
    /// closed, as ZooKeeper's members do when they stop serving, and
    /// everything a leader had prepared is forgotten. New clients are held
    /// for a moment from the first stop (a failover is usually over by then),
    /// and stay held through a role that ends before it served.
    pub fn stop_serving(&mut self, now: Now) {
        let (hold_until_ms, held) = match &mut self.mode {
            ModeState::NotServing(n) => (n.hold_until_ms, std::mem::take(&mut n.held)),
            serving => {
                tracing::info!(mode = serving.mode().name(), "no longer serving clients");
                (now.mono_ms + HOLD_HANDSHAKES_MS, Vec::new())
            }
        };
        let conns: Vec<ConnId> = self.clients.conns.keys().copied().collect();
        for conn in conns {
            if !held.iter().any(|(h, _)| *h == conn) {
                self.close(conn);
            }
        }
        self.mode = ModeState::NotServing(NotServing {
            hold_until_ms,
            held,
            read_only_at_ms: None,
        });
        self.writes.in_flight.clear();
        self.writes.pending = PendingChanges::new(self.config.path_hasher.clone());
        self.clients.reattaching.clear();
        // A snapshot in progress may not survive a truncation or a SNAP.
        self.snapshots.in_progress = None;
        self.writes.last_assigned = self.tree.last_zxid();
    }

    /// Connections whose handshake was held while not serving: answered
    /// now that the member serves.
    pub(in crate::core) fn take_held(&mut self) -> Vec<(ConnId, ConnectRequest)> {
        match &mut self.mode {
            ModeState::NotServing(n) => std::mem::take(&mut n.held),
            _ => Vec::new(),
        }
    }

    /// Not serving past the hold: held handshakes are refused, as ZooKeeper
    /// refuses them while it elects or syncs, so their clients move on.
    pub(in crate::core) fn refuse_held(&mut self, now: Now) {
        let ModeState::NotServing(n) = &mut self.mode else {
            return;
        };
        if now.mono_ms < n.hold_until_ms || n.held.is_empty() {
            return;
        }
        for (conn, _) in std::mem::take(&mut n.held) {
            self.close(conn);
        }
    }

    /// Replaces the tree (a SNAP, or a reload after TRUNC); only while not
    /// serving. Txns up to `fuzzy_through` may already be in it.
    pub fn replace_tree(&mut self, tree: DataTree, fuzzy_through: Zxid) {
        debug_assert_eq!(self.mode(), Mode::NotServing);
        if !active(Failpoint::SnapshotAnyTree) {
            // A snapshot of the old tree must not go on over the new one.
            self.snapshots.in_progress = None;
        }
        self.writes.last_assigned = tree.last_zxid();
        self.fuzzy_through = fuzzy_through;
        self.tree = tree;
        self.show_ensemble_config();
    }

    /// Applies `txn` to the tree outside Zab, as a bug or a bit flip would
    /// change it: the simulator's divergence scripts damage a tree so.
    #[cfg(test)]
    pub fn damage_tree(&mut self, txn: &zkd_storage::Txn) {
        self.tree.apply(txn);
    }

    /// Txns up to this zxid may already be in the tree (it came from a fuzzy
    /// snapshot): until the tree reaches it, it is not the state at its zxid.
    pub fn fuzzy_through(&self) -> Zxid {
        self.fuzzy_through
    }

    /// The established leader of `epoch`: its zxids start at `epoch << 32`,
    /// and it tracks every session with a fresh timeout, as ZooKeeper's
    /// leader does on taking over.
    pub fn start_leading(&mut self, now: Now, epoch: u32) {
        let epoch_base = Zxid::new(epoch, 0);
        self.writes.last_assigned = epoch_base.max(self.tree.last_zxid());
        self.rebuild_sessions(now);
        self.next_container_check_ms = now.mono_ms + self.config.container_check_interval_ms;
        let held = self.take_held();
        self.mode = ModeState::Leading(Leading {
            epoch_base,
            ..Leading::default()
        });
        self.answer_held(now, held);
    }

    /// An up-to-date follower, or observer.
    pub fn start_following(&mut self, now: Now, observer: bool) {
        self.rebuild_sessions(now);
        let held = self.take_held();
        self.mode = ModeState::Following(Following {
            observer,
            ..Following::default()
        });
        self.answer_held(now, held);
    }

    pub(in crate::core) fn answer_held(&mut self, now: Now, held: Vec<(ConnId, ConnectRequest)>) {
        for (conn, request) in held {
            self.handshake(now, conn, request);
        }
    }

    fn rebuild_sessions(&mut self, now: Now) {
        let mut sessions = SessionTable::new(
            self.config.tick_ms,
            self.config.server_id,
            now.wall_ms as u64,
        );
        for (id, timeout) in self.tree.sessions() {
            sessions.add(SessionId(*id), *timeout, now.mono_ms);
        }
        self.sessions = sessions;
    }

    /// Where a committed txn failed to apply since the last call: the tree
    /// diverged from the leader's, and must not serve on.
    pub fn take_divergence(&mut self) -> Option<Zxid> {
        self.diverged_at.take()
    }

    /// Follower: the sessions touched since the last call, for the next PING.
    pub fn take_touches(&mut self) -> Vec<SessionTouch> {
        let touched = self
            .mode
            .following()
            .map(|f| std::mem::take(&mut f.touched));
        touched
            .unwrap_or_default()
            .into_iter()
            .map(|(session, timeout_ms)| SessionTouch {
                session: session.0,
                timeout_ms,
            })
            .collect()
    }

    /// Whether writes start here (standalone or leading): only then do
    /// sessions expire and containers get swept.
    pub(in crate::core) fn proposes(&self) -> bool {
        matches!(self.mode(), Mode::Standalone | Mode::Leading)
    }

    /// Follower: asks the leader to create `session` for `conn`.
    pub(in crate::core) fn forward_create_session(
        &mut self,
        conn: ConnId,
        session: SessionId,
        timeout_ms: i32,
    ) {
        if let Some(f) = self.mode.following() {
            f.creating.insert(session, conn);
        }
        self.count_forwarded(conn);
        self.commands.push_back(Command::Forward(ForwardedRequest {
            session: session.0,
            cxid: 0,
            op_type: OpCode::CreateSession as i32,
            body: Bytes::copy_from_slice(&timeout_ms.to_be_bytes()),
            auth: Vec::new(),
        }));
    }

    /// Follower: sends a client's write (or sync) to the leader, with the
    /// connection's identities in the order they were added.
    pub(in crate::core) fn forward(
        &mut self,
        conn: ConnId,
        session: SessionId,
        xid: i32,
        request: &ClientRequest,
    ) {
        let auth = self.clients.conns.get(&conn).map_or_else(Vec::new, |c| {
            c.auth
                .added()
                .iter()
                .map(|id| (id.scheme.clone(), id.id.clone()))
                .collect()
        });
        // Room for a typical write, so encoding it seldom grows the buffer.
        let mut body = BytesMut::with_capacity(256);
        request.encode_body(&mut body);
        self.count_forwarded(conn);
        self.commands.push_back(Command::Forward(ForwardedRequest {
            session: session.0,
            cxid: xid,
            op_type: request.op_code() as i32,
            body: body.freeze(),
            auth,
        }));
    }

    fn count_forwarded(&mut self, conn: ConnId) {
        if let (Some(c), Some(f)) = (self.clients.conns.get_mut(&conn), self.mode.following()) {
            c.forwarded += 1;
            f.forwarded += 1;
        }
    }

    /// Follower: one of `conn`'s forwarded requests was answered.
    pub(in crate::core) fn forwarded_answered(&mut self, conn: ConnId) {
        if let (Some(c), Some(f)) = (self.clients.conns.get_mut(&conn), self.mode.following()) {
            if c.forwarded > 0 {
                c.forwarded -= 1;
                f.forwarded -= 1;
            }
        }
    }

    /// Leader: a request the follower `from` forwarded becomes a txn like a
    /// local one; the follower answers its client when it is committed.
    pub(in crate::core) fn forwarded(&mut self, now: Now, from: u64, request: ForwardedRequest) {
        if self.mode() != Mode::Leading {
            return;
        }
        let session = SessionId(request.session);
        if request.op_type == OpCode::CreateSession as i32 {
            let mut body = request.body.clone();
            if body.remaining() < 4 || self.sessions.contains(session) {
                return;
            }
            if let Some(l) = self.mode.leading() {
                l.owners.insert(session, from);
            }
            let time_out = body.get_i32();
            let txn = TxnBody::CreateSession(CreateSessionTxn { time_out });
            return self.start_txn(now, session.0, 0, txn, Origin::Forwarded { from });
        }
        let error = |code: ErrorCode| TxnBody::Error(ErrorTxn { err: code.code() });
        let body = match decode_forwarded(&request) {
            None => error(ErrorCode::MarshallingError),
            Some(_) if !self.sessions.is_live(session) => error(ErrorCode::SessionExpired),
            Some(_) if !self.claim(session, from) => error(ErrorCode::SessionMoved),
            Some(client_request) => {
                if let ClientRequest::CloseSession = client_request {
                    self.sessions.set_closing(session);
                }
                let auth = self.forwarded_auth(&request.auth);
                self.prepare_request(now, &auth, session, &client_request)
            }
        };
        self.start_txn(
            now,
            session.0,
            request.cxid,
            body,
            Origin::Forwarded { from },
        );
    }

    /// Leader: the identities a forwarded request carries (in the order
    /// they were added), built once for a run of requests carrying the same.
    fn forwarded_auth(&mut self, added: &[(String, String)]) -> Arc<AuthIds> {
        let rules = self.config.acl_rules;
        let build = || {
            let ids = added.iter().map(|(scheme, id)| Id {
                scheme: scheme.clone(),
                id: id.clone(),
            });
            Arc::new(AuthIds::from_added(ids).with_rules(rules))
        };
        let Some(l) = self.mode.leading() else {
            return build();
        };
        match &l.forwarded_auth {
            Some((last, auth)) if last.as_slice() == added => auth.clone(),
            _ => {
                let auth = build();
                l.forwarded_auth = Some((added.to_vec(), auth.clone()));
                auth
            }
        }
    }

    /// Leader: whether `member` may act for `session`. A session nobody has
    /// claimed since this leader took over becomes `member`'s.
    pub(in crate::core) fn claim(&mut self, session: SessionId, member: u64) -> bool {
        match self.mode.leading() {
            Some(l) => *l.owners.entry(session).or_insert(member) == member,
            None => true,
        }
    }

    /// Leader: the follower `from` asks whether `session` may attach there.
    /// A live session moves to it (ZooKeeper's REVALIDATE).
    pub(in crate::core) fn revalidate(
        &mut self,
        now: Now,
        from: u64,
        session: SessionId,
        timeout_ms: i32,
    ) {
        let valid = self.mode() == Mode::Leading && self.sessions.is_live(session);
        if let Some(l) = self.mode.leading().filter(|_| valid) {
            l.owners.insert(session, from);
            self.sessions.renegotiate(session, timeout_ms, now.mono_ms);
            if let Some(conn) = self.clients.session_conn.remove(&session) {
                // Attached here before: that connection is the session's no more.
                self.close(conn);
            }
        }
        self.commands.push_back(Command::Revalidated {
            to: from,
            session: session.0,
            valid,
        });
    }

    /// Follower: the leader answered whether `session` may attach here.
    pub(in crate::core) fn revalidated(&mut self, now: Now, session: SessionId, valid: bool) {
        let waiting: Vec<(ConnId, i32)> = self
            .clients
            .conns
            .iter()
            .filter_map(|(id, c)| match c.state {
                ConnState::Revalidating {
                    session: s,
                    timeout_ms,
                } if s == session => Some((*id, timeout_ms)),
                _ => None,
            })
            .collect();
        for (conn, timeout_ms) in waiting {
            if valid {
                if !self.sessions.contains(session) {
                    self.sessions.add(session, timeout_ms, now.mono_ms);
                }
                self.sessions.renegotiate(session, timeout_ms, now.mono_ms);
                self.send_connect_response(conn, timeout_ms, session);
                self.establish(now, conn, session);
            } else {
                tracing::info!(%session, "refusing reattach: the leader says the session is gone");
                self.send_connect_response(conn, 0, SessionId(0));
                self.close(conn);
            }
        }
    }

    /// Leader: a follower's clients touched these sessions.
    pub(in crate::core) fn touched_remotely(&mut self, now: Now, touches: &[SessionTouch]) {
        if self.mode() != Mode::Leading {
            return;
        }
        for touch in touches {
            let session = SessionId(touch.session);
            if self.sessions.timeout_ms(session) != Some(touch.timeout_ms) {
                self.sessions
                    .renegotiate(session, touch.timeout_ms, now.mono_ms);
            } else {
                self.sessions.touch(session, now.mono_ms);
            }
        }
    }
}

/// The client request inside a forwarded REQUEST, if it decodes.
fn decode_forwarded(request: &ForwardedRequest) -> Option<ClientRequest> {
    ClientRequest::decode_forwarded(request.op_type, request.body.clone())
}
