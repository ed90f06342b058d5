//! Applying durable txns: the tree changes, watches fire, and the waiting
//! client gets its reply, in that order, so a watch event always reaches a
//! client before any reply that reflects the change.

use super::connection::Queued;
use super::node::{InFlight, Node, Origin};
use super::pipeline::outcome::write_reply;
use super::reply;
use super::session::SessionId;
use super::types::{ConnId, Now};
use zkd_protocol::{OpCode, Perms, Zxid};
use zkd_storage::{TxnOutcome, WatchTrigger};

impl Node {
    /// Storage reports every txn up to `zxid` durable: apply them in order.
    pub(super) fn persisted(&mut self, now: Now, zxid: Zxid) {
        while self.in_flight.front().is_some_and(|f| f.txn.zxid() <= zxid) {
            let Some(InFlight { txn, origin }) = self.in_flight.pop_front() else {
                break;
            };
            let (outcome, triggers) = self.tree.apply(&txn);
            self.pending.applied(txn.zxid());
            self.fire(txn.zxid(), &triggers);
            self.deliver(now, &txn, origin, &outcome);
            self.count_txn_for_snapshot(now);
            self.finish_reattaches(now, txn.zxid());
        }
    }

    /// Sends notifications for the txn's triggers to every watching connection
    /// allowed to READ the node (3.9.2+, ZOOKEEPER-4799).
    fn fire(&mut self, zxid: Zxid, triggers: &[WatchTrigger]) {
        for trigger in triggers {
            let conns = self.watches.trigger(&trigger.path, trigger.event);
            for conn in conns {
                let allowed = self
                    .conns
                    .get(&conn)
                    .is_some_and(|c| c.auth.allows(&trigger.acl, Perms::READ));
                if allowed {
                    // 3.9 sends the txn's zxid (ZOOKEEPER-4655); 3.8 sent -1.
                    self.send(
                        conn,
                        reply::notification(zxid.0, trigger.event, &trigger.path),
                    );
                }
            }
        }
    }

    fn deliver(&mut self, now: Now, txn: &zkd_storage::Txn, origin: Origin, outcome: &TxnOutcome) {
        let session = SessionId(txn.header.client_id);
        match origin {
            Origin::Client { conn, xid, op } => {
                let frame = write_reply(xid, txn.header.zxid, op, &txn.body, outcome);
                self.complete_write(now, conn, txn.zxid(), frame);
                if op == OpCode::CloseSession {
                    self.session_closed(session);
                    if let Some(c) = self.conns.get_mut(&conn) {
                        c.close_when_drained = true;
                    }
                    self.flush(now, conn);
                }
            }
            Origin::CreateSession { conn, timeout_ms } => {
                self.sessions.add(session, timeout_ms, now.mono_ms);
                tracing::debug!(%session, timeout_ms, "session created");
                if self.conns.contains_key(&conn) {
                    self.send_connect_response(conn, timeout_ms, session);
                    self.establish(now, conn, session);
                }
            }
            Origin::Expiry => {
                if let Some(conn) = self.session_closed(session) {
                    self.close(conn);
                }
            }
            Origin::ContainerSweep => {}
        }
    }

    /// Forgets a closed session; returns its connection, if one is attached.
    fn session_closed(&mut self, session: SessionId) -> Option<ConnId> {
        self.sessions.remove(session);
        self.session_conn.remove(&session)
    }

    fn complete_write(&mut self, now: Now, conn: ConnId, zxid: Zxid, frame: bytes::Bytes) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        let slot = c.queue.iter_mut().find_map(|q| match q {
            Queued::Write { zxid: z, reply, .. } if *z == zxid => Some(reply),
            _ => None,
        });
        if let Some(reply) = slot {
            *reply = Some(frame);
        }
        self.flush(now, conn);
    }
}
