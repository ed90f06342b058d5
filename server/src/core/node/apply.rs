//! Applying durable txns: the tree changes, watches fire, and the waiting
//! client gets its reply, in that order, so a watch event always reaches a
//! client before any reply that reflects the change.

use super::{InFlight, Node, Origin};
use crate::core::connection::Queued;
use crate::core::metrics::{Count, Metrics, PerNamespace, Timing};
use crate::core::pipeline::outcome::write_reply;
use crate::core::reply;
use crate::core::session::SessionId;
use crate::core::types::{ConnId, Mode, Now};
use crate::failpoints::{active, Failpoint};
use bytes::Bytes;
use zkd_protocol::records::{ErrorTxn, SyncResponse};
use zkd_protocol::{ErrorCode, EventType, OpCode, Perms, Zxid};
use zkd_storage::{DataTree, Txn, TxnBody, TxnOutcome, WatchTrigger};

impl Node {
    /// Standalone: storage reports every txn up to `zxid` durable, so
    /// committed: apply them in order.
    pub(in crate::core) fn persisted(&mut self, now: Now, zxid: Zxid) {
        while self
            .writes
            .in_flight
            .front()
            .is_some_and(|f| f.txn.zxid() <= zxid)
        {
            let Some(InFlight { txn, origin }) = self.writes.in_flight.pop_front() else {
                break;
            };
            self.apply_committed(now, txn, Some(origin), None);
        }
    }

    /// Ensemble: the next committed txn, and the leader's digest after it
    /// if it sent one. The leader started the ones at the head of
    /// `in_flight`; any other came from the leader's proposals.
    pub(in crate::core) fn committed(&mut self, now: Now, txn: Txn, digest: Option<u64>) {
        let origin = match self.writes.in_flight.front() {
            Some(f) if f.txn.zxid() == txn.zxid() => {
                self.writes.in_flight.pop_front().map(|f| f.origin)
            }
            _ => None,
        };
        if let (Some(Origin::Forwarded { from }), Some(l)) = (&origin, self.mode.leading()) {
            l.forwarded_landed(*from);
        }
        self.apply_committed(now, txn, origin, digest);
    }

    /// Applies a committed txn: the tree changes, watches fire, then the
    /// waiting client (if it is ours) gets its reply. A txn whose apply
    /// disagrees with the leader's (it fails, or the tree's digest after it
    /// differs from `digest`) leaves nothing: no event, no reply, since the
    /// member stops serving and rebuilds its tree.
    fn apply_committed(&mut self, now: Now, txn: Txn, origin: Option<Origin>, digest: Option<u64>) {
        if txn.zxid() <= self.tree.last_zxid() {
            // Already in the tree (a member catching up replays from its snapshot).
            return;
        }
        let (outcome, triggers) = apply_to_tree(&mut self.tree, &txn);
        self.digests.applied(txn.zxid(), || self.tree.digest());
        if let Some(why) = self.disagreement(&txn, &outcome, digest) {
            tracing::error!(zxid = %txn.zxid(), why, "this member's tree diverged from the leader's");
            self.metrics.add(Count::DigestMismatches, 1);
            self.diverged_at.get_or_insert(txn.zxid());
        }
        self.count_commit(now, &txn);
        if self.diverged_at.is_some() && !active(Failpoint::DivergedTxnAnswers) {
            return;
        }
        self.writes.pending.applied(txn.zxid());
        self.activate_reconfig(&txn);
        self.fire(now, txn.zxid(), &triggers);
        self.track_session(now, &txn);
        match origin {
            Some(origin) => self.deliver(now, &txn, origin, &outcome),
            None => self.deliver_to_session(now, &txn, &outcome),
        }
        self.count_txn_for_snapshot(now);
        self.finish_reattaches(now, txn.zxid());
    }

    /// A commit in ZooKeeper's counters: the leader's own, or one a
    /// follower received; and how long the txn took to get here.
    fn count_commit(&mut self, now: Now, txn: &Txn) {
        match self.mode() {
            Mode::Leading => self.metrics.add(Count::Commits, 1),
            Mode::Following | Mode::Observing => self.metrics.add(Count::LearnerCommitsReceived, 1),
            Mode::Standalone | Mode::NotServing | Mode::ReadOnly => {}
        }
        self.metrics
            .observe_age(Timing::PropagationLatency, txn.header.time, now);
        count_writes(&mut self.metrics, now.mono_ms, &txn.body);
    }

    /// Why applying committed `txn` (with `outcome`) shows this tree is not
    /// the leader's, if it does.
    fn disagreement(&self, txn: &Txn, outcome: &TxnOutcome, digest: Option<u64>) -> Option<String> {
        // Below the end of a fuzzy image the tree already holds later txns:
        // a failed op is a replay of one, and the tree is not the state at
        // this zxid, so its digest means nothing (ZooKeeper's compareDigest
        // skips a fuzzy tree too).
        let fuzzy = txn.zxid() < self.fuzzy_through;
        if fuzzy && !active(Failpoint::DigestWhileFuzzy) {
            return None;
        }
        if let Some(code) = failed_op(&txn.body, outcome) {
            if !fuzzy && txn.zxid() > self.fuzzy_through {
                // Validated against this very state by the leader.
                return Some(format!("a committed txn failed with {code}"));
            }
        }
        let ours = self.tree.digest();
        match digest {
            Some(theirs) if theirs != ours => Some(format!(
                "its digest {ours:#x} differs from the leader's {theirs:#x}"
            )),
            _ => None,
        }
    }

    /// Every member tracks every session: created and closed by txns.
    fn track_session(&mut self, now: Now, txn: &Txn) {
        let session = SessionId(txn.header.client_id);
        match &txn.body {
            TxnBody::CreateSession(create) if !self.sessions.contains(session) => {
                self.sessions.add(session, create.time_out, now.mono_ms);
                tracing::debug!(%session, timeout_ms = create.time_out, "session created");
            }
            TxnBody::CloseSession(_) => {
                self.sessions.remove(session);
            }
            _ => {}
        }
    }

    /// Sends notifications for the txn's triggers to every watching connection
    /// allowed to READ the node (3.9.2+, ZOOKEEPER-4799).
    fn fire(&mut self, now: Now, zxid: Zxid, triggers: &[WatchTrigger]) {
        for trigger in triggers {
            let conns = self.watches.trigger(&trigger.path, trigger.event);
            if !conns.is_empty() {
                // As ZooKeeper's WatchManager: only a trigger that notified someone.
                let timing = match trigger.event {
                    EventType::NodeCreated => Timing::NodeCreatedWatchCount,
                    EventType::NodeDeleted => Timing::NodeDeletedWatchCount,
                    EventType::NodeDataChanged => Timing::NodeChangedWatchCount,
                    EventType::NodeChildrenChanged => Timing::NodeChildrenWatchCount,
                };
                self.metrics
                    .observe(timing, conns.len() as u64, now.mono_ms);
            }
            // Every watcher gets the same bytes: encoded once, shared.
            let mut frame = None;
            for conn in conns {
                let allowed = self
                    .clients
                    .conns
                    .get(&conn)
                    .is_some_and(|c| c.auth.allows(&trigger.acl, Perms::READ));
                if allowed {
                    // 3.9 sends the txn's zxid (ZOOKEEPER-4655); 3.8 sent -1.
                    let frame = frame.get_or_insert_with(|| {
                        reply::notification(zxid.0, trigger.event, &trigger.path)
                    });
                    self.metrics.add(Count::WatchBytes, frame.len() as u64);
                    self.send(conn, frame.clone());
                }
            }
        }
    }

    fn deliver(&mut self, now: Now, txn: &Txn, origin: Origin, outcome: &TxnOutcome) {
        let session = SessionId(txn.header.client_id);
        match origin {
            Origin::Client { conn, xid, .. } => self.answer_write(now, conn, xid, txn, outcome),
            Origin::CreateSession { conn, timeout_ms } => {
                self.session_ready(now, conn, session, timeout_ms)
            }
            Origin::Expiry => {
                if let Some(conn) = self.clients.session_conn.remove(&session) {
                    self.close(conn);
                }
            }
            Origin::ContainerSweep | Origin::Forwarded { .. } => {}
        }
    }

    /// A txn this member did not start: answer the local client whose
    /// request it is, matched by session and xid (a follower's forwarded
    /// requests), or close a connection whose session the leader closed.
    fn deliver_to_session(&mut self, now: Now, txn: &Txn, outcome: &TxnOutcome) {
        let session = SessionId(txn.header.client_id);
        if let TxnBody::CreateSession(create) = &txn.body {
            let creating = self.mode.following().map(|f| &mut f.creating);
            if let Some(conn) = creating.and_then(|c| c.remove(&session)) {
                self.forwarded_answered(conn);
                self.session_ready(now, conn, session, create.time_out);
            }
            return;
        }
        let Some(conn) = self.clients.session_conn.get(&session).copied() else {
            return;
        };
        let waiting = self.clients.conns.get(&conn).is_some_and(|c| {
            c.queue.iter().any(
                |q| matches!(q, Queued::Write { xid, reply: None, .. } if *xid == txn.header.cxid),
            )
        });
        if waiting {
            self.forwarded_answered(conn);
            self.answer_write(now, conn, txn.header.cxid, txn, outcome);
        } else if matches!(txn.body, TxnBody::CloseSession(_)) {
            // Expired by the leader while attached here.
            self.clients.session_conn.remove(&session);
            self.close(conn);
        }
    }

    /// The session exists: answer the connection that asked for it.
    fn session_ready(&mut self, now: Now, conn: ConnId, session: SessionId, timeout_ms: i32) {
        if self.clients.conns.contains_key(&conn) {
            self.send_connect_response(conn, timeout_ms, session);
            self.establish(now, conn, session);
        }
    }

    /// Fills the connection's reply slot for `xid` and sends what is ready.
    /// SESSIONMOVED is no answer: ZooKeeper closes the connection, which the
    /// session has left (ZOOKEEPER-710).
    fn answer_write(&mut self, now: Now, conn: ConnId, xid: i32, txn: &Txn, outcome: &TxnOutcome) {
        if matches!(&txn.body, TxnBody::Error(e) if e.err == ErrorCode::SessionMoved.code()) {
            tracing::info!(conn = conn.0, "closing a connection whose session moved");
            return self.close(conn);
        }
        let Some(c) = self.clients.conns.get_mut(&conn) else {
            return;
        };
        let slot = c.queue.iter_mut().find_map(|q| match q {
            Queued::Write {
                xid: x,
                op,
                sync_path,
                reply: reply @ None,
                ..
            } if *x == xid => Some((reply, *op, sync_path.take())),
            _ => None,
        });
        let Some((reply, op, sync_path)) = slot else {
            return;
        };
        let zxid = txn.header.zxid;
        *reply = Some(match sync_path {
            Some(path) => reply::with_record(xid, zxid, &SyncResponse { path }),
            None => write_reply(xid, zxid, op, &txn.body, outcome),
        });
        if op == OpCode::CloseSession {
            self.clients
                .session_conn
                .remove(&SessionId(txn.header.client_id));
            c.close_when_drained = true;
        }
        self.flush(now, conn);
    }
}

/// Applies `txn` to `tree`. Live apply and startup recovery both come
/// through here, so a planted bug in applying acts the same in both, as a
/// bug in ZooKeeper's `DataTree.processTxn` would.
pub(crate) fn apply_to_tree<'t>(
    tree: &mut DataTree,
    txn: &'t Txn,
) -> (TxnOutcome, Vec<WatchTrigger<'t>>) {
    if active(Failpoint::CloseKeepsEphemerals) && matches!(txn.body, TxnBody::CloseSession(_)) {
        // Planted: the close is applied as a txn that changes nothing but
        // the zxid, so the session's ephemerals stay (and so does its
        // entry in the tree's session table); the reply still says closed.
        let noop = Txn {
            header: txn.header.clone(),
            body: TxnBody::Error(ErrorTxn { err: 0 }),
        };
        tree.apply(&noop);
        return (TxnOutcome::SessionClosed, Vec::new());
    }
    tree.apply(txn)
}

/// The error of an operation that failed to apply although its txn is not
/// an ErrorTxn (replay over a fuzzy snapshot tolerates these; live apply must not see them).
fn failed_op(body: &TxnBody, outcome: &TxnOutcome) -> Option<i32> {
    match (body, outcome) {
        (TxnBody::Error(_), _) => None,
        (_, TxnOutcome::Error(code)) => Some(*code),
        (TxnBody::Multi(subs), TxnOutcome::Multi(outcomes)) => {
            subs.iter().zip(outcomes).find_map(|(b, o)| failed_op(b, o))
        }
        _ => None,
    }
}

/// The znodes a txn created, deleted or wrote, in `write_per_namespace`, as
/// ZooKeeper's DataTree counts them (the path and the data written).
fn count_writes(metrics: &mut Metrics, now_ms: u64, body: &TxnBody) {
    let len = |data: &Option<Bytes>| data.as_ref().map_or(0, Bytes::len);
    let (path, bytes) = match body {
        TxnBody::Create(_, t) => (&t.path, len(&t.data)),
        TxnBody::CreateContainer(t) => (&t.path, len(&t.data)),
        TxnBody::CreateTtl(t) => (&t.path, len(&t.data)),
        TxnBody::Delete(_, t) => (&t.path, 0),
        TxnBody::SetData(t) | TxnBody::Reconfig(t) => (&t.path, len(&t.data)),
        TxnBody::Multi(ops) => {
            return ops.iter().for_each(|op| count_writes(metrics, now_ms, op));
        }
        _ => return,
    };
    metrics.observe_path(PerNamespace::Write, path, bytes, now_ms);
}
