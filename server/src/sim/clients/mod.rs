//! Simulated clients of the members: each speaks the jute wire protocol to
//! one member's node at a time, one request in flight, as a ZooKeeper
//! client does: a session outlives its connections (a lost connection is
//! followed by a reattach, to any member, with the last zxid seen and the
//! watches held, until the session is closed or a member says it expired).
//! What each answer must show is in `requests`, the watches' rules in
//! `watches`:
//! - reply zxids never go backwards within a session, across members;
//! - a node this session created is found by its later reads;
//! - after a `sync`, every create acknowledged (to anyone) before the sync
//!   was sent is found;
//! - a node read once is read with the same czxid ever after;
//! - a data watch fires before any answer that shows its node changed.
//!
//! At the end, every acknowledged create and setData and every node ever
//! read must be in the converged tree as it was answered: a read of a txn
//! that never committed (an uncommitted read) shows there. Clients also
//! create ephemerals and close their sessions now and then (or lose them,
//! which then expire): at the end an ephemeral exists only if its session
//! lives, and no session whose close was acknowledged lives or owns a node.

mod reconfigs;
mod requests;
mod watches;

use crate::core::election::ServerId;
use crate::core::{Command, ConnId, Event};
use crate::sim::rng::Rng;
use crate::sim::Violation;
use bytes::Bytes;
use reconfigs::Reconfigs;
use requests::Op;
use std::collections::BTreeMap;
use watches::Changes;
use zkd_protocol::records::{ConnectRequest, ConnectResponse};
use zkd_protocol::Record;
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
    /// Connections that reattached a session (on any member).
    pub reattached: u64,
    /// Sessions a member said had expired when the client came back.
    pub expired: u64,
    pub set_data_acked: u64,
    /// Data watches that fired (a notification for a watch the client held).
    pub watches_fired: u64,
    /// Reconfigs acknowledged (`membership` runs).
    pub reconfigs_acked: u64,
}

impl std::ops::AddAssign for ClientCounts {
    fn add_assign(&mut self, o: ClientCounts) {
        self.creates_acked += o.creates_acked;
        self.reads_found += o.reads_found;
        self.syncs += o.syncs;
        self.reconnects += o.reconnects;
        self.ephemerals_acked += o.ephemerals_acked;
        self.sessions_closed += o.sessions_closed;
        self.reattached += o.reattached;
        self.expired += o.expired;
        self.set_data_acked += o.set_data_acked;
        self.watches_fired += o.watches_fired;
        self.reconfigs_acked += o.reconfigs_acked;
    }
}

/// What new requests clients may start.
#[derive(Clone, Copy, Debug)]
pub struct Load {
    /// Creates, setData and closes.
    pub writes: bool,
    /// Syncs: each is a txn here (a no-op through Zab).
    pub syncs: bool,
}

/// A client's session, kept across its connections until it is closed or
/// a member says it expired.
#[derive(Debug)]
struct Session {
    id: i64,
    passwd: Bytes,
    /// The highest zxid any of its connections was answered with.
    last_zxid: i64,
    /// Nodes this session created.
    mine: Vec<String>,
    /// The last xid it used: xids are never reused within a session (a
    /// member matches a committed txn to its request by session and xid,
    /// and a request sent before a reconnect may still commit).
    next_xid: i32,
    /// Data watches it holds: path, and the zxid of the read that set it.
    watches: BTreeMap<String, i64>,
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
        in_flight: Option<(i32, Op, u64)>,
        /// A request the last answer (or the reattach) calls for.
        follow_up: Option<Op>,
    },
}

struct Client {
    name: usize,
    state: State,
    session: Option<Session>,
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
    /// Acknowledged setData, by path.
    changes: Changes,
    /// Sessions whose close was acknowledged.
    closed: Vec<i64>,
    /// The member a script pinned the first [`PINNED`] clients to.
    pinned: Option<ServerId>,
    /// The last client's reconfigs, in `membership` runs.
    reconfigs: Option<Reconfigs>,
    pub counts: ClientCounts,
}

/// How many clients a script's pin moves.
const PINNED: usize = 2;

impl Clients {
    /// `n` clients, not yet connected; with `membership` (the voters and
    /// observers the run starts with), the last of them changes the
    /// membership too.
    pub fn new(n: usize, membership: Option<(u64, u64)>) -> Clients {
        Clients {
            clients: (0..n)
                .map(|name| Client {
                    name,
                    state: State::Disconnected,
                    session: None,
                    next_ms: 0,
                    created: 0,
                })
                .collect(),
            next_conn: 0,
            acked: BTreeMap::new(),
            observed: BTreeMap::new(),
            attempted: Vec::new(),
            changes: Changes::default(),
            closed: Vec::new(),
            pinned: None,
            reconfigs: membership.map(Reconfigs::new),
            counts: ClientCounts::default(),
        }
    }

    /// What the clients do at `now`: events for the members' nodes.
    /// `load`: what new requests may start; `up`: the members running.
    pub fn step(
        &mut self,
        now: u64,
        rng: &mut Rng,
        up: &[ServerId],
        load: Load,
    ) -> Vec<(ServerId, Event)> {
        let mut events = Vec::new();
        for i in 0..self.clients.len() {
            if self.clients[i].next_ms > now {
                continue;
            }
            self.client_step(i, now, rng, up, load, &mut events);
        }
        events
    }

    fn client_step(
        &mut self,
        i: usize,
        now: u64,
        rng: &mut Rng,
        up: &[ServerId],
        load: Load,
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
            } => self.next_request(i, now, rng, load, events),
            _ => {}
        }
    }

    /// Opens a connection to a member: a new session, or the client's own
    /// reattached with the last zxid it saw.
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
        let (session_id, passwd, last_zxid_seen) = match &client.session {
            Some(s) => (s.id, s.passwd.clone(), s.last_zxid),
            None => (0, Bytes::from_static(&[0; 16]), 0),
        };
        let request = ConnectRequest {
            time_out: SESSION_TIMEOUT_MS,
            session_id,
            passwd,
            last_zxid_seen,
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
    /// elsewhere drop their connection and reconnect to it while it is up,
    /// with new sessions (one moved there could be refused: the member may
    /// be behind it). Returns the events for the members they leave.
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
                    self.clients[i].session = None;
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

    /// The handshake's answer: a session (new or reattached), or the news
    /// that the session expired, after which the client starts a new one.
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
        let client = &mut self.clients[i];
        if response.time_out <= 0 {
            // The member closes the connection next.
            if client.session.take().is_some() {
                self.counts.expired += 1;
            }
            self.disconnect(i, now, rng);
            return Ok(());
        }
        let follow_up = match &mut client.session {
            Some(s) if s.id == response.session_id => {
                self.counts.reattached += 1;
                // Watches live per connection: the client sets them again.
                (!s.watches.is_empty()).then_some(Op::SetWatches)
            }
            Some(s) => {
                return Err(Violation(format!(
                    "client {}: member {member} answered the reattach of session {:#x} with session {:#x}",
                    client.name, s.id, response.session_id
                )))
            }
            None => {
                client.session = Some(Session {
                    id: response.session_id,
                    passwd: response.passwd,
                    last_zxid: 0,
                    mine: Vec::new(),
                    next_xid: 0,
                    watches: BTreeMap::new(),
                });
                None
            }
        };
        client.state = State::Open {
            member,
            conn,
            in_flight: None,
            follow_up,
        };
        client.next_ms = now;
        Ok(())
    }

    /// The membership client makes only the changes a script asks for.
    pub fn script_reconfigs(&mut self) {
        if let Some(r) = self.reconfigs.as_mut() {
            r.scripted();
        }
    }

    /// A script's change of membership, sent by the membership client
    /// once it is idle.
    pub fn queue_reconfig(&mut self, change: zkd_protocol::records::ReconfigRequest) {
        if let Some(r) = self.reconfigs.as_mut() {
            r.queue(change);
        }
    }

    /// The newest configuration a reconfig was acknowledged with: its
    /// version and text.
    pub fn last_acked_config(&self) -> Option<(&i64, &Bytes)> {
        self.reconfigs.as_ref()?.acked().last_key_value()
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

    /// After the run: every acknowledged create and setData, and every
    /// node ever read, is in `tree` as it was answered; ephemerals belong
    /// to live sessions, and sessions closed are gone.
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
        self.changes.check_final(tree)?;
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
        self.check_live_sessions_keep_ephemerals(tree)?;
        if let Some(s) = self.closed.iter().find(|s| tree.sessions().contains_key(s)) {
            return Err(Violation(format!(
                "sessions: {s:#x} was closed and acknowledged, and lives on"
            )));
        }
        Ok(())
    }

    /// Every ephemeral a session that still lives created (and was told
    /// so) is in `tree`, owned by it: an ephemeral exists if and only if
    /// its session lives.
    fn check_live_sessions_keep_ephemerals(&self, tree: &DataTree) -> Result<(), Violation> {
        let live = self.clients.iter().filter_map(|c| c.session.as_ref());
        for session in live.filter(|s| tree.sessions().contains_key(&s.id)) {
            for path in session.mine.iter().filter(|p| p.starts_with("/e")) {
                let owner = tree.node(path).map(|n| n.stat.ephemeral_owner);
                if owner != Some(session.id) {
                    return Err(Violation(format!(
                        "ephemerals: {path} of live session {:#x} is gone (owner {owner:?})",
                        session.id
                    )));
                }
            }
        }
        Ok(())
    }
}
