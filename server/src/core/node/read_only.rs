//! Read-only mode (ZooKeeper's `ReadOnlyZooKeeperServer`, with
//! `readonlymode.enabled`): a member that has looked for a leader for a
//! while without finding one serves reads to clients that ask for a
//! read-only session, until its election decides.
//!
//! ```text
//! NotServing ──looking, max(2 s, tickTime) without a decision──▶ ReadOnly
//!     ▲                                                            │
//!     └──────── the election decided: every connection closes ─────┘
//! ```
//!
//! Its sessions are local, as ZooKeeper's are (so `localSessionsEnabled`
//! is needed): they exist on this member only, are never written to the
//! tree, and expire here. A connect without the readOnly flag is closed; a
//! global session (one the tree knows) may not reconnect here. Writes,
//! `sync` and `check` get NOTREADONLY; reads see the tree as the member
//! last had it.

use super::mode::ModeState;
use super::Node;
use crate::core::connection::Queued;
use crate::core::reply;
use crate::core::session::{session_password, SessionId, SessionTable};
use crate::core::types::{ConnId, Mode, Now};
use zkd_protocol::records::ConnectRequest;
use zkd_protocol::request::ClientRequest;
use zkd_protocol::ErrorCode;

/// How long a member looks for a leader before it serves read-only
/// sessions: ZooKeeper's max(2 s, tickTime).
fn read_only_delay_ms(tick_ms: u64) -> u64 {
    tick_ms.max(2000)
}

impl Node {
    /// The member starts looking for a leader: with read-only mode on, it
    /// serves read-only sessions if it finds none soon.
    pub fn looking(&mut self, now: Now) {
        let delay = read_only_delay_ms(self.config.tick_ms);
        if let (true, ModeState::NotServing(n)) = (self.config.read_only_mode, &mut self.mode) {
            n.read_only_at_ms.get_or_insert(now.mono_ms + delay);
        }
    }

    /// The election decided: read-only sessions end (their clients move on
    /// to a member with a quorum), and nothing is served until the role is.
    pub fn election_decided(&mut self, now: Now) {
        match &mut self.mode {
            ModeState::ReadOnly => self.stop_serving(now),
            ModeState::NotServing(n) => n.read_only_at_ms = None,
            _ => {}
        }
    }

    /// When read-only mode begins, while the member looks.
    pub(in crate::core) fn read_only_due(&self) -> Option<u64> {
        match &self.mode {
            ModeState::NotServing(n) => n.read_only_at_ms,
            _ => None,
        }
    }

    /// Read-only mode begins if its time has come; in it, local sessions
    /// expire here.
    pub(in crate::core) fn step_read_only(&mut self, now: Now) {
        if self.mode() == Mode::ReadOnly {
            return self.expire_local_sessions(now);
        }
        if self.read_only_due().is_none_or(|at| now.mono_ms < at) {
            return;
        }
        tracing::info!("no leader found: serving read-only sessions");
        let (tick, id) = (self.config.tick_ms, self.config.server_id);
        self.sessions = SessionTable::new(tick, id, now.wall_ms as u64);
        let held = self.take_held();
        self.mode = ModeState::ReadOnly;
        self.answer_held(now, held);
    }

    fn expire_local_sessions(&mut self, now: Now) {
        for session in self.sessions.expire(now.mono_ms) {
            tracing::info!(%session, "read-only session expired");
            self.sessions.remove(session);
            if let Some(conn) = self.clients.session_conn.get(&session).copied() {
                self.close(conn);
            }
        }
    }

    /// A handshake in read-only mode.
    pub(in crate::core) fn read_only_handshake(
        &mut self,
        now: Now,
        conn: ConnId,
        request: ConnectRequest,
    ) {
        if request.read_only != Some(true) {
            tracing::debug!(
                conn = conn.0,
                "refusing a read-write client in read-only mode"
            );
            return self.close(conn);
        }
        if !self.config.local_sessions {
            // ZooKeeper refuses to create the global session such a connect
            // asks for: a bare NOTREADONLY where the ConnectResponse would be.
            let refusal = reply::bare(0, 0, ErrorCode::NotReadOnly.code());
            self.send(conn, refusal);
            return self.close(conn);
        }
        let timeout_ms = self.negotiate_timeout(request.time_out);
        let session = match request.session_id {
            0 => {
                let session = self.sessions.next_session_id();
                self.sessions.add(session, timeout_ms, now.mono_ms);
                session
            }
            id if self.tree.sessions().contains_key(&id) => {
                tracing::info!(session = %SessionId(id), "refusing a global session in read-only mode");
                return self.close(conn);
            }
            id => {
                let session = SessionId(id);
                let valid = request.passwd.as_ref() == session_password(id)
                    && self.sessions.renegotiate(session, timeout_ms, now.mono_ms);
                if !valid {
                    self.send_connect_response(conn, 0, SessionId(0));
                    return self.close(conn);
                }
                session
            }
        };
        self.send_connect_response(conn, timeout_ms, session);
        self.establish(now, conn, session);
    }

    /// Answers `request` if read-only mode answers it itself: writes,
    /// `sync` and `check` get NOTREADONLY, and closing the session ends it
    /// here. False for what is served as usual (reads, watches, auth).
    pub(in crate::core) fn read_only_request(
        &mut self,
        conn: ConnId,
        session: SessionId,
        xid: i32,
        request: &ClientRequest,
    ) -> bool {
        if self.mode() != Mode::ReadOnly {
            return false;
        }
        let zxid = self.processed_zxid().0;
        match request {
            ClientRequest::CloseSession => {
                self.sessions.remove(session);
                self.answer_then_close(conn, xid, zxid, ErrorCode::Ok);
            }
            r if r.is_write() || matches!(r, ClientRequest::Sync(_) | ClientRequest::Check(_)) => {
                let refusal = reply::bare(xid, zxid, ErrorCode::NotReadOnly.code());
                self.enqueue(conn, Queued::Ready(refusal));
            }
            _ => return false,
        }
        true
    }
}
