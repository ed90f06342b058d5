//! Connecting a client: a new session, or a reattach to an existing one
//! (held until this member's tree has the session's last zxid), and the
//! ConnectResponse.

use super::mode::ModeState;
use super::{Node, Origin};
use crate::core::connection::ConnState;
use crate::core::metrics::Count;
use crate::core::session::{session_password, SessionId};
use crate::core::types::{Command, ConnId, Mode, Now};
use bytes::Bytes;
use zkd_protocol::records::{ConnectRequest, ConnectResponse};
use zkd_protocol::{Record, Zxid};

impl Node {
    pub(in crate::core) fn negotiate_timeout(&self, requested: i32) -> i32 {
        requested.clamp(
            self.config.min_session_timeout_ms,
            self.config.max_session_timeout_ms,
        )
    }

    pub(in crate::core) fn handshake(&mut self, now: Now, conn: ConnId, request: ConnectRequest) {
        let Some(c) = self.clients.conns.get_mut(&conn) else {
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
            if let Some(c) = self.clients.conns.get_mut(&conn) {
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
        self.metrics.add(Count::ConnectionRevalidates, 1);
        let session = SessionId(request.session_id);
        // ZooKeeper closes every other connection of the session before checking
        // the password: the attached one and any still waiting to reattach.
        let waiting = self.clients.reattaching.iter().copied().filter(|c| {
            *c != conn && matches!(self.clients.conns.get(c).map(|c| c.state), Some(ConnState::Reattaching { session: s, .. }) if s == session)
        });
        let others: Vec<ConnId> = waiting
            .chain(
                self.clients
                    .session_conn
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
            if let Some(c) = self.clients.conns.get_mut(&conn) {
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
            .writes
            .in_flight
            .iter()
            .rev()
            .find(|f| f.txn.header.client_id == session.0);
        match in_flight.map(|f| f.txn.zxid()) {
            Some(after) => {
                if let Some(c) = self.clients.conns.get_mut(&conn) {
                    c.state = ConnState::Reattaching {
                        session,
                        after,
                        timeout_ms,
                    };
                    self.clients.reattaching.insert(conn);
                }
            }
            None => {
                self.send_connect_response(conn, timeout_ms, session);
                self.establish(now, conn, session);
            }
        }
    }

    /// Completes reattaches that were waiting for their session's writes up to `applied`.
    pub(in crate::core) fn finish_reattaches(&mut self, now: Now, applied: Zxid) {
        if self.clients.reattaching.is_empty() {
            return;
        }
        let ready: Vec<(ConnId, SessionId, i32)> = self
            .clients
            .reattaching
            .iter()
            .filter_map(|id| Some((id, self.clients.conns.get(id)?)))
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
            self.clients.reattaching.remove(&conn);
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

    pub(in crate::core) fn send_connect_response(
        &mut self,
        conn: ConnId,
        timeout_ms: i32,
        session: SessionId,
    ) {
        let Some(c) = self.clients.conns.get(&conn) else {
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

    pub(in crate::core) fn establish(&mut self, now: Now, conn: ConnId, session: SessionId) {
        let Some(c) = self.clients.conns.get_mut(&conn) else {
            return;
        };
        c.state = ConnState::Established(session);
        c.stats.established_ms = now.wall_ms;
        let backlog = std::mem::take(&mut c.backlog);
        // One connection per session: whoever held it before goes.
        if let Some(old) = self
            .clients
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
}
