//! What the node sends its connections, and forgetting one: every frame
//! out is counted here, for `stat`, `cons` and the metrics.

use super::mode::ModeState;
use super::Node;
use crate::core::connection::ConnState;
use crate::core::metrics::Count;
use crate::core::types::{Command, ConnId};
use bytes::Bytes;

impl Node {
    /// Sends a frame that answers no request (notification, ConnectResponse).
    pub(in crate::core) fn send(&mut self, conn: ConnId, frame: Bytes) {
        if self.count_sent(conn, &frame) {
            self.commands.push_back(Command::Send { conn, frame });
        }
    }

    /// Sends the reply to one of the connection's requests.
    pub(in crate::core) fn reply(&mut self, conn: ConnId, frame: Bytes) {
        // ZooKeeper answers pings before the stage that records sizes.
        if !frame.starts_with(&crate::core::reply::PING_XID.to_be_bytes()) {
            self.stats.client_responses.record(frame.len());
        }
        if self.count_sent(conn, &frame) {
            self.commands.push_back(Command::Reply { conn, frame });
        }
    }

    fn count_sent(&mut self, conn: ConnId, frame: &Bytes) -> bool {
        let Some(c) = self.clients.conns.get_mut(&conn) else {
            return false;
        };
        c.stats.sent += 1;
        self.stats.packets_sent += 1;
        self.metrics.add(Count::ResponseBytes, frame.len() as u64);
        true
    }

    /// Closes a connection and forgets it (its watches go with it).
    pub(in crate::core) fn close(&mut self, conn: ConnId) {
        if self.clients.conns.contains_key(&conn) {
            self.commands.push_back(Command::Close { conn });
            self.forget_connection(conn);
        }
    }

    pub(super) fn forget_connection(&mut self, conn: ConnId) {
        self.clients.reattaching.remove(&conn);
        if let Some(c) = self.clients.conns.remove(&conn) {
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
                if self.clients.session_conn.get(&session) == Some(&conn) {
                    self.clients.session_conn.remove(&session);
                }
            }
        }
        self.watches.remove_connection(conn);
    }
}
