//! Simulated clients of whole members: each speaks the jute wire protocol
//! to one member's node at a time, one request in flight, and checks what
//! it is answered as a ZooKeeper client may rely on:
//! - reply zxids never go backwards on a connection;
//! - a node this connection created is found by its later reads;
//! - after a `sync`, every create acknowledged (to anyone) before the sync
//!   was sent is found;
//! - a node read once is read with the same czxid ever after.
//!
//! At the end, every acknowledged create and every node ever read must be
//! in the converged tree as it was answered: a read of a txn that never
//! committed (an uncommitted read) shows there. Clients also create
//! ephemerals and close their sessions now and then (or lose them, which
//! then expire): at the end an ephemeral exists only if its session lives,
//! and no session whose close was acknowledged lives or owns a node.

use crate::core::election::ServerId;
use crate::core::{Command, ConnId, Event};
use crate::sim::rng::Rng;
use crate::sim::Violation;
use bytes::Bytes;
use std::collections::BTreeMap;
use zkd_protocol::records::{
    Acl, ConnectRequest, ConnectResponse, CreateRequest, ExistsRequest, ExistsResponse,
    ReplyHeader, RequestHeader, SyncRequest,
};
use zkd_protocol::request::ClientRequest;
use zkd_protocol::{ErrorCode, OpCode, Record};
use zkd_storage::DataTree;

/// A client gives up on a request after this long and reconnects, as a
/// real client's read timeout does.
const REQUEST_TIMEOUT_MS: u64 = 3_000;

/// A client gives up on a member that does not answer its handshake after
/// this long (the Java client's: the session timeout over the members).
const CONNECT_TIMEOUT_MS: u64 = 1_000;

/// The session timeout clients ask for.
const SESSION_TIMEOUT_MS: i32 = 4_000;

/// What the clients did, so a run cannot pass by doing nothing.
#[derive(Clone, Copy, Debug, Default)]
pub struct ClientCounts {
    pub creates_acked: u64,
    pub reads_found: u64,
    pub syncs: u64,
    pub reconnects: u64,
    pub ephemerals_acked: u64,
    pub sessions_closed: u64,
}

impl std::ops::AddAssign for ClientCounts {
    fn add_assign(&mut self, o: ClientCounts) {
        self.creates_acked += o.creates_acked;
        self.reads_found += o.reads_found;
        self.syncs += o.syncs;
        self.reconnects += o.reconnects;
        self.ephemerals_acked += o.ephemerals_acked;
        self.sessions_closed += o.sessions_closed;
    }
}

/// A request in flight and what its answer must show.
#[derive(Debug)]
enum Op {
    /// A create, ephemeral or not.
    Create(String, bool),
    CloseSession,
    /// `must_find`: the node was acknowledged before this read could start.
    Exists {
        path: String,
        must_find: bool,
    },
    /// The creates acknowledged when the sync was sent.
    Sync(Vec<String>),
}

#[derive(Debug)]
enum State {
    Disconnected,
    Connecting {
        member: ServerId,
        conn: ConnId,
    },
    Open {
        member: ServerId,
        conn: ConnId,
        session: i64,
        last_zxid: i64,
        /// Nodes created over this connection.
        mine: Vec<String>,
        in_flight: Option<(i32, Op, u64)>,
        next_xid: i32,
        /// A read the last answer calls for.
        follow_up: Option<Op>,
    },
}

struct Client {
    name: usize,
    state: State,
    next_ms: u64,
    created: u64,
}

/// Every simulated client, and what they were answered.
pub struct Clients {
    clients: Vec<Client>,
    next_conn: u64,
    /// Acknowledged creates: the path and its zxid.
    acked: BTreeMap<String, i64>,
    /// Nodes read: the path and the czxid it was read with.
    observed: BTreeMap<String, i64>,
    /// Every path a create was sent for.
    attempted: Vec<String>,
    /// Sessions whose close was acknowledged.
    closed: Vec<i64>,
    /// The member a script pinned the first [`PINNED`] clients to.
    pinned: Option<ServerId>,
    pub counts: ClientCounts,
}

/// How many clients a script's pin moves.
const PINNED: usize = 2;

impl Clients {
    /// `n` clients, not yet connected.
    pub fn new(n: usize) -> Clients {
        Clients {
            clients: (0..n)
                .map(|name| Client {
                    name,
                    state: State::Disconnected,
                    next_ms: 0,
                    created: 0,
                })
                .collect(),
            next_conn: 0,
            acked: BTreeMap::new(),
            observed: BTreeMap::new(),
            attempted: Vec::new(),
            closed: Vec::new(),
            pinned: None,
            counts: ClientCounts::default(),
        }
    }

    /// What the clients do at `now`: events for the members' nodes.
    /// `writing`: new creates may start; `up`: the members running.
    pub fn step(
        &mut self,
        now: u64,
        rng: &mut Rng,
        up: &[ServerId],
        writing: bool,
    ) -> Vec<(ServerId, Event)> {
        let mut events = Vec::new();
        for i in 0..self.clients.len() {
            if self.clients[i].next_ms > now {
                continue;
            }
            self.client_step(i, now, rng, up, writing, &mut events);
        }
        events
    }

    fn client_step(
        &mut self,
        i: usize,
        now: u64,
        rng: &mut Rng,
        up: &[ServerId],
        writing: bool,
        events: &mut Vec<(ServerId, Event)>,
    ) {
        let timed_out = match &self.clients[i].state {
            State::Open {
                in_flight: Some((_, _, sent)),
                ..
            } => now >= sent + REQUEST_TIMEOUT_MS,
            State::Connecting { .. } => true,
            _ => false,
        };
        match &self.clients[i].state {
            State::Disconnected => self.connect(i, now, rng, up, events),
            State::Connecting { member, conn } | State::Open { member, conn, .. } if timed_out => {
                events.push((*member, Event::Disconnected { conn: *conn }));
                self.disconnect(i, now, rng);
            }
            State::Open {
                in_flight: None, ..
            } => self.next_request(i, now, rng, writing, events),
            _ => {}
        }
    }

    fn connect(
        &mut self,
        i: usize,
        now: u64,
        rng: &mut Rng,
        up: &[ServerId],
        events: &mut Vec<(ServerId, Event)>,
    ) {
        let client = &mut self.clients[i];
        if up.is_empty() {
            client.next_ms = now + 100;
            return;
        }
        let member = match self.pinned {
            Some(pinned) if i < PINNED && up.contains(&pinned) => pinned,
            _ => up[rng.below(up.len() as u64) as usize],
        };
        self.next_conn += 1;
        let conn = ConnId(self.next_conn);
        let remote_ip = "127.0.0.1".to_string();
        let remote_port = (client.name % 60_000) as u16;
        events.push((
            member,
            Event::Connected {
                conn,
                remote_ip,
                remote_port,
            },
        ));
        let request = ConnectRequest {
            time_out: SESSION_TIMEOUT_MS,
            passwd: Bytes::from_static(&[0; 16]),
            read_only: Some(false),
            ..Default::default()
        };
        events.push((member, Event::Handshake { conn, request }));
        client.state = State::Connecting { member, conn };
        // Not answered by then: give up on this member and try another.
        client.next_ms = now + CONNECT_TIMEOUT_MS;
    }

    /// Pins the first [`PINNED`] clients to `member` (a script's writes
    /// through a chosen member), or unpins them (`None`): those connected
    /// elsewhere drop their connection and reconnect to it while it is up.
    /// Returns the events for the members they leave.
    pub fn pin(
        &mut self,
        member: Option<ServerId>,
        now: u64,
        rng: &mut Rng,
    ) -> Vec<(ServerId, Event)> {
        self.pinned = member;
        let mut events = Vec::new();
        for i in 0..PINNED.min(self.clients.len()) {
            match self.clients[i].state {
                State::Connecting { member: m, conn }
                | State::Open {
                    member: m, conn, ..
                } if member.is_some_and(|pinned| m != pinned) => {
                    events.push((m, Event::Disconnected { conn }));
                    self.disconnect(i, now, rng);
                }
                _ => {}
            }
        }
        events
    }

    /// The client's connection is gone: it reconnects a little later.
    fn disconnect(&mut self, i: usize, now: u64, rng: &mut Rng) {
        let client = &mut self.clients[i];
        if !matches!(client.state, State::Disconnected) {
            self.counts.reconnects += 1;
        }
        client.state = State::Disconnected;
        client.next_ms = now + 20 + rng.below(200);
    }

    fn next_request(
        &mut self,
        i: usize,
        now: u64,
        rng: &mut Rng,
        writing: bool,
        events: &mut Vec<(ServerId, Event)>,
    ) {
        let State::Open {
            member,
            conn,
            mine,
            follow_up,
            ..
        } = &mut self.clients[i].state
        else {
            return;
        };
        let (member, conn) = (*member, *conn);
        // A pinned client is there to write through its member.
        let pinned = i < PINNED && self.pinned == Some(member);
        let op = match follow_up.take() {
            Some(op) => op,
            None => match if pinned { 0 } else { rng.below(20) } {
                0..=7 if writing => {
                    let client = &mut self.clients[i];
                    client.created += 1;
                    let ephemeral = rng.below(4) == 0;
                    let kind = if ephemeral { 'e' } else { 'c' };
                    let path = format!("/{kind}{}-{}", client.name, client.created);
                    self.attempted.push(path.clone());
                    Op::Create(path, ephemeral)
                }
                8..=9 if !mine.is_empty() => Op::Exists {
                    path: mine[rng.below(mine.len() as u64) as usize].clone(),
                    must_find: true,
                },
                10..=11 => Op::Sync(self.acked.keys().cloned().collect()),
                12 if writing => Op::CloseSession,
                _ if !self.attempted.is_empty() => {
                    let n = self.attempted.len() as u64;
                    Op::Exists {
                        path: self.attempted[rng.below(n) as usize].clone(),
                        must_find: false,
                    }
                }
                _ => return,
            },
        };
        let request = match &op {
            Op::Create(path, ephemeral) => ClientRequest::Create(
                OpCode::Create,
                CreateRequest {
                    path: path.clone(),
                    data: Some(Bytes::from_static(b"v")),
                    acl: vec![Acl::world(31)],
                    flags: i32::from(*ephemeral),
                },
            ),
            Op::CloseSession => ClientRequest::CloseSession,
            Op::Exists { path, .. } => ClientRequest::Exists(ExistsRequest {
                path: path.clone(),
                watch: false,
            }),
            Op::Sync(_) => ClientRequest::Sync(SyncRequest { path: "/".into() }),
        };
        let client = &mut self.clients[i];
        let State::Open {
            in_flight,
            next_xid,
            ..
        } = &mut client.state
        else {
            return;
        };
        *next_xid += 1;
        let frame = encode(*next_xid, &request);
        *in_flight = Some((*next_xid, op, now));
        client.next_ms = now + REQUEST_TIMEOUT_MS;
        events.push((member, Event::Request { conn, frame }));
    }

    /// A member's node wrote `command` to one of its connections; returns
    /// events for that node (a close is seen by both ends).
    pub fn on_command(
        &mut self,
        member: ServerId,
        command: Command,
        now: u64,
        rng: &mut Rng,
    ) -> Result<Vec<(ServerId, Event)>, Violation> {
        let (conn, frame) = match command {
            Command::Reply { conn, frame } | Command::Send { conn, frame } => (conn, frame),
            Command::Close { conn } => {
                if let Some(i) = self.client_on(member, conn) {
                    self.disconnect(i, now, rng);
                }
                return Ok(vec![(member, Event::Disconnected { conn })]);
            }
            _ => return Ok(Vec::new()),
        };
        let Some(i) = self.client_on(member, conn) else {
            return Ok(Vec::new());
        };
        match self.clients[i].state {
            State::Connecting { .. } => self.connected(i, member, conn, frame, now, rng),
            _ => self.answered(i, frame, now),
        }
        .map(|()| Vec::new())
    }

    /// Member `member` went away (a crash): its clients' connections drop.
    pub fn member_gone(&mut self, member: ServerId, now: u64, rng: &mut Rng) {
        for i in 0..self.clients.len() {
            let on = match &self.clients[i].state {
                State::Connecting { member: m, .. } | State::Open { member: m, .. } => *m == member,
                State::Disconnected => false,
            };
            if on {
                self.disconnect(i, now, rng);
            }
        }
    }

    fn client_on(&self, member: ServerId, conn: ConnId) -> Option<usize> {
        self.clients.iter().position(|c| match &c.state {
            State::Connecting { member: m, conn: k }
            | State::Open {
                member: m, conn: k, ..
            } => *m == member && *k == conn,
            State::Disconnected => false,
        })
    }

    fn connected(
        &mut self,
        i: usize,
        member: ServerId,
        conn: ConnId,
        frame: Bytes,
        now: u64,
        rng: &mut Rng,
    ) -> Result<(), Violation> {
        let response = ConnectResponse::decode(&mut frame.clone()).map_err(|e| {
            Violation(format!(
                "client: a ConnectResponse that does not decode: {e}"
            ))
        })?;
        if response.time_out <= 0 {
            self.disconnect(i, now, rng);
            return Ok(());
        }
        let client = &mut self.clients[i];
        client.state = State::Open {
            member,
            conn,
            session: response.session_id,
            last_zxid: 0,
            mine: Vec::new(),
            in_flight: None,
            next_xid: 0,
            follow_up: None,
        };
        client.next_ms = now;
        Ok(())
    }

    fn answered(&mut self, i: usize, frame: Bytes, now: u64) -> Result<(), Violation> {
        let mut body = frame.clone();
        let header = ReplyHeader::decode(&mut body)
            .map_err(|e| Violation(format!("client: a reply that does not decode: {e}")))?;
        let client = &mut self.clients[i];
        let name = client.name;
        let State::Open {
            member,
            session,
            last_zxid,
            mine,
            in_flight,
            follow_up,
            ..
        } = &mut client.state
        else {
            return Ok(());
        };
        if header.zxid < *last_zxid {
            return Err(Violation(format!(
                "client {name}: member {member} answered with zxid {:#x} after {:#x} on one connection",
                header.zxid, *last_zxid
            )));
        }
        *last_zxid = header.zxid;
        let Some((xid, op, _)) = in_flight.take_if(|(xid, _, _)| *xid == header.xid) else {
            // A notification or a ping's answer.
            return Ok(());
        };
        debug_assert_eq!(xid, header.xid);
        client.next_ms = now + 1;
        let ok = header.err == ErrorCode::Ok.code();
        match op {
            Op::Create(path, ephemeral) if ok => {
                self.counts.creates_acked += 1;
                self.counts.ephemerals_acked += u64::from(ephemeral);
                mine.push(path.clone());
                if !ephemeral {
                    self.acked.insert(path, header.zxid);
                }
            }
            Op::CloseSession if ok => {
                // The member closes the connection next.
                self.counts.sessions_closed += 1;
                self.closed.push(*session);
            }
            Op::Sync(acked) if ok => {
                self.counts.syncs += 1;
                if !acked.is_empty() {
                    let path = acked[(header.zxid as usize) % acked.len()].clone();
                    *follow_up = Some(Op::Exists {
                        path,
                        must_find: true,
                    });
                }
            }
            Op::Exists { path, .. } if ok => {
                let stat = ExistsResponse::decode(&mut body)
                    .map_err(|e| Violation(format!("client: an exists reply: {e}")))?
                    .stat;
                self.counts.reads_found += 1;
                if let Some(seen) = self.observed.insert(path.clone(), stat.czxid) {
                    if seen != stat.czxid {
                        return Err(Violation(format!(
                            "client {name}: {path} read from member {member} with czxid {:#x}, earlier {seen:#x}",
                            stat.czxid
                        )));
                    }
                }
            }
            Op::Exists {
                path,
                must_find: true,
            } if header.err == ErrorCode::NoNode.code() => {
                return Err(Violation(format!(
                    "client {name}: member {member} answered NONODE for {path}, acknowledged before the read (after a sync or on this connection)"
                )));
            }
            _ => {}
        }
        Ok(())
    }

    /// The creates acknowledged so far: path and zxid.
    pub fn acked(&self) -> &BTreeMap<String, i64> {
        &self.acked
    }

    /// Every create acknowledged so far is in `tree` (a newly established
    /// leader's: Zab's leader completeness).
    pub fn check_holds_acked(&self, tree: &DataTree, who: &str) -> Result<(), Violation> {
        for (path, zxid) in &self.acked {
            if tree.node(path).map(|n| n.stat.czxid) != Some(*zxid) {
                return Err(Violation(format!(
                    "leader completeness: {who} lacks {path}, acknowledged at {zxid:#x}"
                )));
            }
        }
        Ok(())
    }

    /// After the run: every acknowledged create, and every node ever read,
    /// is in `tree` as it was answered; ephemerals belong to live sessions,
    /// and sessions closed are gone.
    pub fn check_final(&self, tree: &DataTree) -> Result<(), Violation> {
        for (path, zxid) in &self.acked {
            match tree.node(path).map(|n| n.stat.czxid) {
                Some(czxid) if czxid == *zxid => {}
                found => {
                    return Err(Violation(format!(
                        "durability: {path} was acknowledged at {zxid:#x}; the final tree has {found:?}"
                    )))
                }
            }
        }
        for (path, czxid) in &self.observed {
            // An ephemeral read once may have gone with its session since.
            let gone_with_session = path.starts_with("/e") && tree.node(path).is_none();
            if !gone_with_session && tree.node(path).map(|n| n.stat.czxid) != Some(*czxid) {
                return Err(Violation(format!(
                    "uncommitted read: {path} was read with czxid {czxid:#x}; the final tree does not hold it"
                )));
            }
        }
        for (path, node) in tree.preorder("/") {
            let owner = node.stat.ephemeral_owner;
            if owner != 0 && !tree.sessions().contains_key(&owner) {
                return Err(Violation(format!(
                    "ephemerals: {path} outlives its session {owner:#x}"
                )));
            }
        }
        if let Some(s) = self.closed.iter().find(|s| tree.sessions().contains_key(s)) {
            return Err(Violation(format!(
                "sessions: {s:#x} was closed and acknowledged, and lives on"
            )));
        }
        Ok(())
    }
}

/// A request frame: header and body, as a client writes it (without the length).
fn encode(xid: i32, request: &ClientRequest) -> Bytes {
    let mut out = RequestHeader {
        xid,
        r#type: request.op_code() as i32,
    }
    .to_bytes()
    .to_vec();
    request.encode_body(&mut out);
    Bytes::from(out)
}
