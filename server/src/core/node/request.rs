//! Client requests: decoding, starting writes, queueing reads, and flushing
//! each connection's replies in request order.

use super::{InFlight, Node, Origin};
use crate::core::connection::{ConnState, Queued};
use crate::core::metrics::{Count, Timing};
use crate::core::pipeline::prep::Prep;
use crate::core::pipeline::read::{Frames, ReadCtx};
use crate::core::pipeline::txn_changes::TxnChanges;
use crate::core::reply;
use crate::core::session::SessionId;
use crate::core::types::{Command, ConnId, Mode, Now};
use crate::failpoints::{active, Failpoint};
use bytes::Bytes;
use zkd_protocol::records::{CreateRequest, ErrorTxn, TxnHeader};
use zkd_protocol::request::{ClientRequest, RequestError};
use zkd_protocol::{ErrorCode, OpCode};
use zkd_storage::{Txn, TxnBody};

/// Frames a connection may send before its session exists; more is abuse.
const MAX_BACKLOG: usize = 1000;

impl Node {
    pub(in crate::core) fn request_frame(&mut self, now: Now, conn: ConnId, frame: Bytes) {
        let Some(c) = self.clients.conns.get_mut(&conn) else {
            return;
        };
        let session = match c.state {
            // After an answer that closes the connection, ZooKeeper reads nothing more.
            ConnState::Established(_) if c.close_when_drained => return,
            ConnState::Established(s) => s,
            ConnState::CreatingSession(_)
            | ConnState::Reattaching { .. }
            | ConnState::Revalidating { .. }
                if c.backlog.len() < MAX_BACKLOG =>
            {
                // ZooKeeper stops reading until the session exists; the runtime
                // keeps reading, so hold the frames here in order.
                c.backlog.push_back(frame);
                return;
            }
            _ => return self.close(conn),
        };
        c.stats.received += 1;
        self.stats.packets_received += 1;
        // The frame and its 4-byte length prefix.
        self.metrics
            .add(Count::BytesReceived, frame.len() as u64 + 4);
        self.sessions.touch(session, now.mono_ms);
        if let Some(f) = self.mode.following() {
            if let Some(timeout) = self.sessions.timeout_ms(session) {
                f.touched.insert(session, timeout);
            }
        }
        match ClientRequest::decode_frame(frame) {
            Ok((header, request)) => self.request(now, conn, session, header.xid, request),
            Err(RequestError::NoHeader) => self.close(conn),
            Err(RequestError::Unimplemented { xid, .. }) => {
                self.answer_then_close(conn, xid, -1, ErrorCode::Unimplemented)
            }
            Err(RequestError::Marshalling { xid, .. }) => {
                let zxid = self.processed_zxid().0;
                self.enqueue(
                    conn,
                    Queued::Ready(reply::bare(xid, zxid, ErrorCode::MarshallingError.code())),
                );
            }
        }
        self.flush(now, conn);
    }

    pub(in crate::core) fn answer_then_close(
        &mut self,
        conn: ConnId,
        xid: i32,
        zxid: i64,
        code: ErrorCode,
    ) {
        self.send_then_close(conn, reply::bare(xid, zxid, code.code()));
    }

    /// Queues `frame` for `conn`, which is closed once it is written.
    pub(in crate::core) fn send_then_close(&mut self, conn: ConnId, frame: bytes::Bytes) {
        self.enqueue(conn, Queued::Ready(frame));
        if let Some(c) = self.clients.conns.get_mut(&conn) {
            c.close_when_drained = true;
        }
    }

    pub(in crate::core) fn enqueue(&mut self, conn: ConnId, item: Queued) {
        if let Some(c) = self.clients.conns.get_mut(&conn) {
            c.queue.push_back(item);
        }
    }

    fn request(
        &mut self,
        now: Now,
        conn: ConnId,
        session: SessionId,
        xid: i32,
        request: ClientRequest,
    ) {
        let op = request.op_code();
        if let Some(c) = self.clients.conns.get_mut(&conn) {
            c.stats.last_op = op.short_name();
            c.stats.last_cxid = xid;
        }
        if !self.sessions.is_live(session) {
            let zxid = self.processed_zxid().0;
            return self.enqueue(
                conn,
                Queued::Ready(reply::bare(xid, zxid, ErrorCode::SessionExpired.code())),
            );
        }
        let exempt = matches!(request, ClientRequest::Auth(_) | ClientRequest::Sasl(_));
        if !exempt && !self.auth_enforced(conn) {
            return self.answer_then_close(conn, xid, 0, ErrorCode::SessionClosedRequireSaslAuth);
        }
        if self.read_only_request(conn, session, xid, &request) {
            return;
        }
        match request {
            ClientRequest::Auth(packet) => {
                self.authenticate(conn, xid, &packet.scheme, &packet.auth)
            }
            ClientRequest::Sasl(request) => self.sasl_step(conn, xid, &request.token),
            // 3.9.3+ (ZOOKEEPER-2623): a top-level check is refused and the connection closed.
            ClientRequest::Check(_) => {
                self.answer_then_close(conn, xid, -1, ErrorCode::Unimplemented)
            }
            r if r.is_write() => self.start_write(now, conn, session, xid, r),
            // In an ensemble a sync goes through the leader's quorum.
            // Planted (deposed-leader-serves): the leader answers it locally,
            // as ZooKeeper 3.8 does, so a deposed one answers it too.
            r @ ClientRequest::Sync(_)
                if self.mode() != Mode::Standalone
                    && !(self.mode() == Mode::Leading
                        && active(Failpoint::DeposedLeaderServes)) =>
            {
                self.start_write(now, conn, session, xid, r)
            }
            r => self.enqueue(
                conn,
                Queued::Read {
                    xid,
                    request: r,
                    received_ms: now.mono_ms,
                },
            ),
        }
    }

    fn authenticate(&mut self, conn: ConnId, xid: i32, scheme: &str, auth: &[u8]) {
        let super_digest = self.config.super_digest.clone();
        let Some(c) = self.clients.conns.get_mut(&conn) else {
            return;
        };
        match c
            .auth
            .authenticate(scheme, auth, super_digest.as_ref().map(|s| s.expose()))
        {
            Ok(()) => self.enqueue(conn, Queued::Ready(reply::bare(xid, 0, 0))),
            Err(code) => {
                self.stats.auth_failed += 1;
                self.answer_then_close(conn, xid, 0, code)
            }
        }
    }

    fn start_write(
        &mut self,
        now: Now,
        conn: ConnId,
        session: SessionId,
        xid: i32,
        request: ClientRequest,
    ) {
        let op = request.op_code();
        let sync_path = match &request {
            ClientRequest::Sync(r) => Some(r.path.clone()),
            _ => None,
        };
        self.enqueue(
            conn,
            Queued::Write {
                xid,
                op,
                sync_path,
                reply: None,
                received_ms: now.mono_ms,
            },
        );
        if let ClientRequest::CloseSession = request {
            self.sessions.set_closing(session);
        }
        if self.mode().is_learner() {
            return self.forward(conn, session, xid, &request);
        }
        // Borrow the identities out of the connection for the check, without a copy.
        let auth = self
            .clients
            .conns
            .get_mut(&conn)
            .map(|c| std::mem::take(&mut c.auth))
            .unwrap_or_default();
        let me = u64::from(self.config.server_id);
        let body = if self.mode() == Mode::Leading && !self.claim(session, me) {
            // The session reattached to another member since.
            TxnBody::Error(ErrorTxn {
                err: zkd_protocol::ErrorCode::SessionMoved.code(),
            })
        } else {
            self.prepare_request(now, &auth, session, &request)
        };
        if let Some(c) = self.clients.conns.get_mut(&conn) {
            c.auth = auth;
        }
        self.start_txn(now, session.0, xid, body, Origin::Client { conn, xid });
    }

    /// The txn body of a write, or the error txn it fails with.
    pub(in crate::core) fn prepare_request(
        &mut self,
        now: Now,
        auth: &crate::core::acl::AuthIds,
        session: SessionId,
        request: &ClientRequest,
    ) -> TxnBody {
        let body = match request {
            ClientRequest::CloseSession => {
                self.prepare(now, auth, session.0, |prep| Ok(prep.close_session()))
            }
            // An ensemble's sync is a quorum round of its own: a txn that
            // changes nothing, answered once committed (ZOOKEEPER-1675).
            ClientRequest::Sync(_) => Ok(sync_txn()),
            ClientRequest::Reconfig(r) => {
                let ensemble = self.reconfig_context();
                self.prepare(now, auth, session.0, |prep| prep.reconfig(r, &ensemble))
            }
            _ => self.prepare(now, auth, session.0, |prep| prep_request(prep, request)),
        };
        body.unwrap_or_else(|code| TxnBody::Error(ErrorTxn { err: code.code() }))
    }

    /// Validates a write for the next zxid against the tree and the pending
    /// changes, and records its own changes as pending when it succeeds.
    fn prepare(
        &mut self,
        now: Now,
        auth: &crate::core::acl::AuthIds,
        session: i64,
        validate: impl FnOnce(&mut Prep<'_>) -> Result<TxnBody, ErrorCode>,
    ) -> Result<TxnBody, ErrorCode> {
        let zxid = self.writes.last_assigned.next();
        let mut prep = Prep {
            tree: &self.tree,
            pending: &self.writes.pending,
            auth,
            session,
            zxid: zxid.0,
            time: now.wall_ms,
            extended_types: self.config.extended_types,
            enforce_quota: self.config.enforce_quota,
            scratch: TxnChanges::default(),
        };
        let body = validate(&mut prep);
        let changes = std::mem::take(&mut prep.scratch);
        if body.is_ok() {
            self.writes.pending.record(zxid, changes);
        }
        body
    }

    /// Assigns the next zxid, stamps the time and hands the txn to storage.
    pub(in crate::core) fn start_txn(
        &mut self,
        now: Now,
        session: i64,
        cxid: i32,
        body: TxnBody,
        origin: Origin,
    ) {
        self.writes.last_assigned = self.writes.last_assigned.next();
        let header = TxnHeader {
            client_id: session,
            cxid,
            zxid: self.writes.last_assigned.0,
            time: now.wall_ms,
            r#type: body.type_code(),
        };
        let txn = Txn { header, body };
        self.commands
            .push_back(Command::Persist { txn: txn.clone() });
        if let (Origin::Forwarded { from }, Some(l)) = (&origin, self.mode.leading()) {
            *l.forwarded.entry(*from).or_default() += 1;
        }
        self.writes.in_flight.push_back(InFlight { txn, origin });
    }

    pub(in crate::core) fn start_close_session(
        &mut self,
        now: Now,
        session: SessionId,
        origin: Origin,
    ) {
        self.sessions.set_closing(session);
        let auth = crate::core::acl::AuthIds::default();
        if let Ok(body) = self.prepare(now, &auth, session.0, |prep| Ok(prep.close_session())) {
            self.start_txn(now, session.0, 0, body, origin);
        }
    }

    /// Deletes empty containers and expired TTL nodes, as the leader's ContainerManager does.
    pub(in crate::core) fn sweep_containers(&mut self, now: Now) {
        let auth = crate::core::acl::AuthIds::default();
        for path in self.tree.expired_containers(now.wall_ms) {
            // Validation against pending changes skips nodes a client is already changing.
            let Ok(body) = self.prepare(now, &auth, 0, |prep| prep.delete(&path, -1, true)) else {
                continue;
            };
            tracing::debug!(path, "deleting expired container or TTL node");
            self.start_txn(now, 0, 0, body, Origin::ContainerSweep);
        }
    }

    /// Sends every reply at the head of the connection's queue that is ready,
    /// executing reads when their turn comes.
    pub(in crate::core) fn flush(&mut self, now: Now, conn: ConnId) {
        loop {
            let Some(c) = self.clients.conns.get_mut(&conn) else {
                return;
            };
            let (frames, received_ms) = match c.queue.front_mut() {
                None => {
                    // An idle session holds no queue (issue 52).
                    c.queue = std::collections::VecDeque::new();
                    break;
                }
                Some(Queued::Write { reply: None, .. }) => return,
                Some(Queued::Write { reply: Some(_), .. }) | Some(Queued::Ready(_)) => {
                    match c.queue.pop_front() {
                        Some(Queued::Write {
                            reply: Some(frame),
                            received_ms,
                            ..
                        }) => (
                            Frames::reply(frame),
                            Some((received_ms, Timing::UpdateLatency)),
                        ),
                        Some(Queued::Ready(frame)) => (Frames::reply(frame), None),
                        _ => return,
                    }
                }
                Some(Queued::Read { .. }) => {
                    let Some(Queued::Read {
                        xid,
                        request,
                        received_ms,
                    }) = c.queue.pop_front()
                    else {
                        return;
                    };
                    let Some(frames) = self.execute_read(now, conn, xid, &request) else {
                        return;
                    };
                    (frames, Some((received_ms, Timing::ReadLatency)))
                }
            };
            if let Some((received, kind)) = received_ms {
                self.note_reply(now, conn, received, kind);
            }
            for event in frames.events {
                self.send(conn, event);
            }
            self.reply(conn, frames.reply);
        }
        if self
            .clients
            .conns
            .get(&conn)
            .is_some_and(|c| c.close_when_drained)
        {
            self.close(conn);
        }
    }

    fn note_reply(&mut self, now: Now, conn: ConnId, received_ms: u64, kind: Timing) {
        let latency = now.mono_ms.saturating_sub(received_ms);
        self.stats.latency.record(latency);
        self.metrics.observe(kind, latency, now.mono_ms);
        let zxid = self.processed_zxid().0;
        if let Some(c) = self.clients.conns.get_mut(&conn) {
            c.stats.latency.record(latency);
            c.stats.last_zxid = zxid;
            c.stats.last_response_ms = now.wall_ms;
        }
    }

    fn execute_read(
        &mut self,
        now: Now,
        conn: ConnId,
        xid: i32,
        request: &ClientRequest,
    ) -> Option<Frames> {
        let c = self.clients.conns.get(&conn)?;
        let session = c.session().map_or(0, |s| s.0);
        let zxid = self.processed_zxid().0;
        let mut ctx = ReadCtx {
            zxid,
            tree: &self.tree,
            watches: &mut self.watches,
            auth: &c.auth,
            conn,
            session,
            max_reply_bytes: self.config.max_frame_bytes,
            metrics: &mut self.metrics,
            now_ms: now.mono_ms,
        };
        Some(ctx.execute(xid, request))
    }
}

/// The txn of an ensemble's sync: an ErrorTxn that reports no error and
/// changes nothing but the zxid.
pub(in crate::core) fn sync_txn() -> TxnBody {
    TxnBody::Error(ErrorTxn { err: 0 })
}

/// Validates a write request into its txn body.
fn prep_request(prep: &mut Prep<'_>, request: &ClientRequest) -> Result<TxnBody, ErrorCode> {
    use ClientRequest as R;
    match request {
        R::Create(op, r) => prep.create(*op, r, -1),
        R::CreateTtl(r) => {
            let plain = CreateRequest {
                path: r.path.clone(),
                data: r.data.clone(),
                acl: r.acl.clone(),
                flags: r.flags,
            };
            prep.create(OpCode::CreateTtl, &plain, r.ttl)
        }
        R::Delete(r) => prep.delete(&r.path, r.version, false),
        R::DeleteContainer(p) => prep.delete(p, -1, true),
        R::SetData(r) => prep.set_data(&r.path, &r.data, r.version),
        R::SetAcl(r) => prep.set_acl(&r.path, &r.acl, r.version),
        R::Multi(m) => Ok(prep.multi(&m.ops)),
        _ => Err(ErrorCode::Unimplemented),
    }
}
