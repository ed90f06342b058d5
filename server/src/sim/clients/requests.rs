//! What a simulated client asks and what each answer must show.

use super::watches::Changes;
use super::{Clients, Load, State, PINNED, REQUEST_TIMEOUT_MS};
use crate::core::election::ServerId;
use crate::core::reply::NOTIFICATION_XID;
use crate::core::Event;
use crate::sim::rng::Rng;
use crate::sim::Violation;
use bytes::Bytes;
use zkd_protocol::records::{
    Acl, CreateRequest, ExistsRequest, ExistsResponse, GetDataRequest, GetDataResponse,
    ReconfigRequest, ReplyHeader, RequestHeader, SetDataRequest, SetDataResponse, SetWatches,
    SyncRequest, WatcherEvent,
};
use zkd_protocol::request::ClientRequest;
use zkd_protocol::{ErrorCode, OpCode, Record};

/// The xid a client's SetWatches carries, as the Java client's does.
const SET_WATCHES_XID: i32 = -8;

/// A request in flight and what its answer must show.
#[derive(Debug)]
pub(super) enum Op {
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
    /// getData that sets a data watch.
    Watch(String),
    SetData(String),
    /// After a reattach: the session's watches, set again from its last zxid.
    SetWatches,
    /// A change of membership (`reconfigs`).
    Reconfig(ReconfigRequest),
}

impl Clients {
    /// Sends client `i`'s next request, if it has one.
    pub(super) fn next_request(
        &mut self,
        i: usize,
        now: u64,
        rng: &mut Rng,
        load: Load,
        events: &mut Vec<(ServerId, Event)>,
    ) {
        let (member, follow_up) = match &mut self.clients[i].state {
            State::Open {
                member, follow_up, ..
            } => (*member, follow_up.take()),
            _ => return,
        };
        let op = match follow_up {
            Some(op) => op,
            None => match self.choose(i, member, now, rng, load) {
                Some(op) => op,
                None => return,
            },
        };
        let client = &mut self.clients[i];
        let (
            State::Open {
                conn, in_flight, ..
            },
            Some(session),
        ) = (&mut client.state, &mut client.session)
        else {
            return;
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
            Op::Watch(path) => ClientRequest::GetData(GetDataRequest {
                path: path.clone(),
                watch: true,
            }),
            Op::SetData(path) => ClientRequest::SetData(SetDataRequest {
                path: path.clone(),
                data: Some(Bytes::from_static(b"w")),
                version: -1,
            }),
            Op::SetWatches => ClientRequest::SetWatches(SetWatches {
                relative_zxid: session.last_zxid,
                data_watches: session.watches.keys().cloned().collect(),
                exist_watches: Vec::new(),
                child_watches: Vec::new(),
            }),
            Op::Reconfig(change) => ClientRequest::Reconfig(change.clone()),
        };
        let xid = match op {
            Op::SetWatches => SET_WATCHES_XID,
            _ => {
                session.next_xid += 1;
                session.next_xid
            }
        };
        let frame = encode(xid, &request);
        *in_flight = Some((xid, op, now));
        client.next_ms = now + REQUEST_TIMEOUT_MS;
        events.push((member, Event::Request { conn: *conn, frame }));
    }

    /// A new request for client `i`, connected to `member`.
    fn choose(
        &mut self,
        i: usize,
        member: ServerId,
        now: u64,
        rng: &mut Rng,
        load: Load,
    ) -> Option<Op> {
        let writing = load.writes;
        let last = i + 1 == self.clients.len();
        if let Some(reconfigs) = self.reconfigs.as_mut().filter(|_| last) {
            if let Some(op) = reconfigs.choose(now, writing, rng) {
                return Some(op);
            }
        }
        // A pinned client is there to write through its member.
        let pinned = i < PINNED && self.pinned == Some(member);
        let mine = &self.clients[i].session.as_ref()?.mine;
        let hot: Vec<&String> = Changes::hot(&self.acked).collect();
        let op = match if pinned { 0 } else { rng.below(20) } {
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
            10..=11 if load.syncs => Op::Sync(self.acked.keys().cloned().collect()),
            12 if writing => Op::CloseSession,
            13..=14 if !hot.is_empty() => {
                Op::Watch(hot[rng.below(hot.len() as u64) as usize].clone())
            }
            15..=16 if writing && !hot.is_empty() => {
                Op::SetData(hot[rng.below(hot.len() as u64) as usize].clone())
            }
            _ if !self.attempted.is_empty() => {
                let n = self.attempted.len() as u64;
                Op::Exists {
                    path: self.attempted[rng.below(n) as usize].clone(),
                    must_find: false,
                }
            }
            _ => return None,
        };
        Some(op)
    }

    /// A frame on client `i`'s connection: an answer or a notification.
    pub(super) fn answered(&mut self, i: usize, frame: Bytes, now: u64) -> Result<(), Violation> {
        let mut body = frame.clone();
        let header = ReplyHeader::decode(&mut body)
            .map_err(|e| Violation(format!("client: a reply that does not decode: {e}")))?;
        let client = &mut self.clients[i];
        let name = client.name;
        let (
            State::Open {
                member, in_flight, ..
            },
            Some(session),
        ) = (&mut client.state, &mut client.session)
        else {
            return Ok(());
        };
        let member = *member;
        if header.xid == NOTIFICATION_XID {
            let event = WatcherEvent::decode(&mut body)
                .map_err(|e| Violation(format!("client: a notification: {e}")))?;
            if session.watches.remove(&event.path).is_some() {
                self.counts.watches_fired += 1;
            }
            return Ok(());
        }
        if header.zxid < session.last_zxid {
            return Err(Violation(format!(
                "client {name}: member {member} answered session {:#x} with zxid {:#x} after {:#x}",
                session.id, header.zxid, session.last_zxid
            )));
        }
        session.last_zxid = header.zxid;
        self.changes.missed(name, session, header.zxid)?;
        let Some((_, op, _)) = in_flight.take_if(|(xid, _, _)| *xid == header.xid) else {
            // A ping's answer.
            return Ok(());
        };
        client.next_ms = now + 1;
        if header.err != ErrorCode::Ok.code() {
            return match op {
                Op::Exists {
                    path,
                    must_find: true,
                } if header.err == ErrorCode::NoNode.code() => Err(Violation(format!(
                    "client {name}: member {member} answered NONODE for {path}, acknowledged before the read (after a sync or in this session)"
                ))),
                Op::Reconfig(change) => {
                    if let Some(r) = self.reconfigs.as_mut() {
                        r.refused(&change, header.err);
                    }
                    Ok(())
                }
                _ => Ok(()),
            };
        }
        self.answered_ok(i, member, op, header.zxid, body)
    }

    /// The successful answer to `op`, at `zxid`.
    fn answered_ok(
        &mut self,
        i: usize,
        member: ServerId,
        op: Op,
        zxid: i64,
        mut body: Bytes,
    ) -> Result<(), Violation> {
        let client = &mut self.clients[i];
        let name = client.name;
        let (State::Open { follow_up, .. }, Some(session)) =
            (&mut client.state, &mut client.session)
        else {
            return Ok(());
        };
        let czxid = match op {
            Op::Create(path, ephemeral) => {
                self.counts.creates_acked += 1;
                self.counts.ephemerals_acked += u64::from(ephemeral);
                session.mine.push(path.clone());
                if !ephemeral {
                    self.acked.insert(path, zxid);
                }
                return Ok(());
            }
            Op::CloseSession => {
                // The member closes the connection next.
                self.counts.sessions_closed += 1;
                self.closed.push(session.id);
                client.session = None;
                return Ok(());
            }
            Op::Sync(acked) => {
                self.counts.syncs += 1;
                if !acked.is_empty() {
                    let path = acked[(zxid as usize) % acked.len()].clone();
                    *follow_up = Some(Op::Exists {
                        path,
                        must_find: true,
                    });
                }
                return Ok(());
            }
            Op::SetData(path) => {
                let stat = decode::<SetDataResponse>(&mut body, "setData")?.stat;
                self.counts.set_data_acked += 1;
                self.changes.record(path, stat.mzxid);
                return Ok(());
            }
            Op::SetWatches => return Ok(()),
            Op::Reconfig(change) => {
                let data = decode::<GetDataResponse>(&mut body, "reconfig")?.data;
                self.counts.reconfigs_acked += 1;
                return match self.reconfigs.as_mut() {
                    Some(r) => r.acknowledged(&change, data),
                    None => Ok(()),
                };
            }
            Op::Exists { path, .. } => {
                let stat = decode::<ExistsResponse>(&mut body, "exists")?.stat;
                (path, stat.czxid)
            }
            Op::Watch(path) => {
                let stat = decode::<GetDataResponse>(&mut body, "getData")?.stat;
                session.watches.entry(path.clone()).or_insert(zxid);
                (path, stat.czxid)
            }
        };
        let (path, czxid) = czxid;
        self.counts.reads_found += 1;
        match self.observed.insert(path.clone(), czxid) {
            Some(seen) if seen != czxid => Err(Violation(format!(
                "client {name}: {path} read from member {member} with czxid {czxid:#x}, earlier {seen:#x}"
            ))),
            _ => Ok(()),
        }
    }
}

fn decode<R: Record>(body: &mut Bytes, what: &str) -> Result<R, Violation> {
    R::decode(body).map_err(|e| Violation(format!("client: a {what} reply: {e}")))
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
