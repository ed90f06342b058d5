//! A client connection as the core sees it: its session, identities, and the
//! queue that keeps replies in request order.

use crate::core::acl::{AclRules, AuthIds};
use crate::core::session::SessionId;
use bytes::Bytes;
use std::collections::VecDeque;
use zkd_protocol::request::ClientRequest;
use zkd_protocol::Zxid;

/// Where a connection is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConnState {
    /// No ConnectRequest yet.
    AwaitingHandshake,
    /// The createSession txn is in flight.
    CreatingSession(SessionId),
    /// Reattaching a session whose writes from its previous connection are
    /// still in flight: the session's FIFO order holds across connections, so
    /// the ConnectResponse waits until `after` is applied.
    Reattaching {
        session: SessionId,
        after: Zxid,
        timeout_ms: i32,
    },
    /// A follower asked the leader whether this session may attach here.
    Revalidating { session: SessionId, timeout_ms: i32 },
    /// Serving requests for this session.
    Established(SessionId),
}

/// One entry of the reply queue. Replies leave strictly in this order.
#[derive(Debug)]
pub enum Queued {
    /// A read to execute once everything before it has been answered, so it
    /// sees its own session's earlier writes.
    Read {
        xid: i32,
        request: ClientRequest,
        received_ms: u64,
    },
    /// A write (or an ensemble's sync) whose reply is known once its txn
    /// is applied; the txn is matched by the session and this xid, since a
    /// follower learns the zxid only from the leader.
    Write {
        xid: i32,
        op: zkd_protocol::OpCode,
        /// A sync's path, echoed in its reply.
        sync_path: Option<String>,
        reply: Option<Bytes>,
        received_ms: u64,
    },
    /// A reply that is already built.
    Ready(Bytes),
}

/// Counters `cons` and `stat` show.
#[derive(Clone, Debug, Default)]
pub struct ConnStats {
    pub received: u64,
    pub sent: u64,
    pub last_op: &'static str,
    pub last_cxid: i32,
    pub last_zxid: i64,
    pub last_response_ms: i64,
    pub latency: super::stats::Latency,
    pub established_ms: i64,
}

/// The core's view of a connection.
#[derive(Debug)]
pub struct Conn {
    pub remote_ip: String,
    pub remote_port: u16,
    pub auth: AuthIds,
    pub state: ConnState,
    /// Whether the ConnectRequest carried the readOnly byte.
    pub read_only_flag: Option<bool>,
    /// Frames that arrived before the session was established.
    pub backlog: VecDeque<Bytes>,
    pub queue: VecDeque<Queued>,
    /// Close once the queue has drained (auth failure, unimplemented op, closeSession).
    pub close_when_drained: bool,
    /// Requests forwarded to the leader for it and not answered yet.
    pub forwarded: usize,
    pub stats: ConnStats,
    /// The connection's SASL exchange, from its first SASL request (boxed:
    /// most connections never have one).
    pub sasl: Option<Box<super::sasl::digest_md5::DigestMd5>>,
}

impl Conn {
    /// A fresh connection from `remote_ip`, on a server that checks ACLs
    /// by `rules`.
    pub fn new(remote_ip: String, remote_port: u16, rules: AclRules) -> Conn {
        Conn {
            remote_port,
            auth: AuthIds::for_remote(&remote_ip).with_rules(rules),
            remote_ip,
            state: ConnState::AwaitingHandshake,
            read_only_flag: None,
            backlog: VecDeque::new(),
            queue: VecDeque::new(),
            close_when_drained: false,
            forwarded: 0,
            stats: ConnStats::default(),
            sasl: None,
        }
    }

    /// The session, once established.
    pub fn session(&self) -> Option<SessionId> {
        match self.state {
            ConnState::Established(s) => Some(s),
            _ => None,
        }
    }
}
