//! Reads and other local requests, answered from the committed tree
//! (ZooKeeper's `FinalRequestProcessor` for non-txn ops).

use crate::core::acl::{mask_digests, user_of, AuthIds};
use crate::core::metrics::{java_length, Metrics, PerNamespace};
use crate::core::reply;
use crate::core::types::ConnId;
use crate::core::watch::{Mode, Table, WatchRegistry};
use crate::failpoints::{active, Failpoint};
use bytes::Bytes;
use zkd_protocol::records::*;
use zkd_protocol::request::ClientRequest;
use zkd_protocol::{jute, AddWatchMode, ErrorCode, EventType, Perms, Record, WatcherType};
use zkd_storage::{DataNode, DataTree};

/// What a read may touch.
pub struct ReadCtx<'a> {
    pub tree: &'a DataTree,
    pub watches: &'a mut WatchRegistry,
    pub auth: &'a AuthIds,
    pub conn: ConnId,
    pub session: i64,
    /// jute.maxbuffer: the largest reply a client accepts.
    pub max_reply_bytes: usize,
    /// The zxid replies carry: the last one this member processed.
    pub zxid: i64,
    /// Where a read's bytes are counted (`read_per_namespace`).
    pub metrics: &'a mut Metrics,
    pub now_ms: u64,
}

/// Bytes a multiRead result takes on the wire, near enough.
fn approximate_size(result: &MultiResult) -> usize {
    const HEADER_AND_STAT: usize = 9 + 68 + 4;
    HEADER_AND_STAT
        + match result {
            MultiResult::GetData { data, .. } => data.as_ref().map_or(0, |d| d.len()),
            MultiResult::GetChildren { children } => children.iter().map(|c| c.len() + 4).sum(),
            _ => 0,
        }
}

/// What a read produces: its reply, after the events SetWatches catches a
/// client up on (no list at all for any other read).
pub struct Frames {
    /// Notifications to send before the reply.
    pub events: Vec<Bytes>,
    /// The reply.
    pub reply: Bytes,
}

impl Frames {
    /// A reply alone.
    pub(in crate::core) fn reply(reply: Bytes) -> Frames {
        Frames {
            events: Vec::new(),
            reply,
        }
    }
}

impl ReadCtx<'_> {
    fn zxid(&self) -> i64 {
        self.zxid
    }

    fn err(&self, xid: i32, code: ErrorCode) -> Frames {
        Frames::reply(reply::bare(xid, self.zxid(), code.code()))
    }

    fn ok(&self, xid: i32, record: &impl Record) -> Frames {
        Frames::reply(reply::with_record(xid, self.zxid(), record))
    }

    /// A read of `path` that returned `bytes` (data or child names) and a stat.
    fn count_read(&mut self, path: &str, bytes: usize) {
        let set = PerNamespace::Read;
        self.metrics.observe_path(set, path, bytes, self.now_ms);
    }

    /// A node the connection may read, or the error ZooKeeper gives.
    fn readable(&self, path: &str) -> Result<&DataNode, ErrorCode> {
        let node = self.tree.node(path).ok_or(ErrorCode::NoNode)?;
        if self.auth.allows(&node.acl, Perms::READ) {
            Ok(node)
        } else {
            Err(ErrorCode::NoAuth)
        }
    }

    /// Answers one read request.
    pub fn execute(&mut self, xid: i32, req: &ClientRequest) -> Frames {
        use ClientRequest as R;
        match req {
            R::Exists(r) => self.exists(xid, &r.path, r.watch),
            R::GetData(r) => self.get_data(xid, &r.path, r.watch),
            R::GetChildren(r) => match self.children(&r.path, r.watch) {
                Ok((children, _)) => self.ok(xid, &GetChildrenResponse { children }),
                Err(code) => self.err(xid, code),
            },
            R::GetChildren2(r) => match self.children(&r.path, r.watch) {
                Ok((children, stat)) => self.ok(xid, &GetChildren2Response { children, stat }),
                Err(code) => self.err(xid, code),
            },
            R::GetAcl(r) => self.get_acl(xid, &r.path),
            R::Sync(r) => self.ok(
                xid,
                &SyncResponse {
                    path: r.path.clone(),
                },
            ),
            R::Ping => Frames::reply(reply::bare(reply::PING_XID, self.zxid(), 0)),
            R::GetEphemerals(r) => {
                let prefix = r.prefix_path.as_str();
                let all = prefix.is_empty() || prefix == "/";
                let ephemerals = ephemerals_in_zookeeper_order(self.tree, self.session)
                    .into_iter()
                    .filter(|p| all || p.starts_with(prefix))
                    .collect();
                self.ok(xid, &GetEphemeralsResponse { ephemerals })
            }
            R::GetAllChildrenNumber(r) => match self.readable(&r.path) {
                Ok(_) => {
                    let total_number = self.tree.descendant_count(&r.path) as i32;
                    self.ok(xid, &GetAllChildrenNumberResponse { total_number })
                }
                Err(code) => self.err(xid, code),
            },
            R::AddWatch(r) => self.add_watch(xid, r),
            R::CheckWatches(r) => self.check_or_remove(xid, &r.path, r.r#type, false),
            R::RemoveWatches(r) => self.check_or_remove(xid, &r.path, r.r#type, true),
            R::SetWatches(r) => {
                let all = SetWatches2 {
                    relative_zxid: r.relative_zxid,
                    data_watches: r.data_watches.clone(),
                    exist_watches: r.exist_watches.clone(),
                    child_watches: r.child_watches.clone(),
                    ..SetWatches2::default()
                };
                self.set_watches(xid, &all)
            }
            R::SetWatches2(r) => self.set_watches(xid, r),
            R::WhoAmI => {
                let client_info = self
                    .auth
                    .ids()
                    .iter()
                    .map(|id| ClientInfo {
                        auth_scheme: id.scheme.clone(),
                        user: user_of(id),
                    })
                    .collect();
                self.ok(xid, &WhoAmIResponse { client_info })
            }
            R::MultiRead(m) => {
                let mut results = Vec::with_capacity(m.ops.len());
                let mut size = 0usize;
                for op in &m.ops {
                    let result = self.multi_read_op(op);
                    size += approximate_size(&result);
                    // One request may name the same 1 MB node 60k times. ZooKeeper would
                    // build the reply and the client reject it as too long; refuse early
                    // instead of holding gigabytes.
                    if size > self.max_reply_bytes {
                        return self.err(xid, ErrorCode::MarshallingError);
                    }
                    results.push(result);
                }
                self.ok(xid, &MultiResponse { results })
            }
            // Writes never reach here; answer defensively rather than panic.
            _ => self.err(xid, ErrorCode::Unimplemented),
        }
    }

    fn exists(&mut self, xid: i32, path: &str, watch: bool) -> Frames {
        if path.contains('\0') {
            return self.err(xid, ErrorCode::BadArguments);
        }
        match self.tree.node(path) {
            // 3.9.2+ (ZOOKEEPER-2590): exists needs READ on an existing node; 3.8.0 did not check.
            Some(node) if !self.auth.allows(&node.acl, Perms::READ) => {
                self.err(xid, ErrorCode::NoAuth)
            }
            found => {
                let stat = found.map(DataNode::stat);
                if watch {
                    // A missing node still gets a watch: that is how NodeCreated fires.
                    self.watches
                        .add(Table::Data, path, self.conn, Mode::Standard);
                }
                match stat {
                    Some(stat) => {
                        self.count_read(path, 0);
                        self.ok(xid, &ExistsResponse { stat })
                    }
                    None => self.err(xid, ErrorCode::NoNode),
                }
            }
        }
    }

    fn get_data(&mut self, xid: i32, path: &str, watch: bool) -> Frames {
        // A GetDataResponse, encoded from the node: its data is not copied first.
        let (reply, bytes) = match self.readable(path) {
            Ok(node) => {
                let reply = reply::with_fields(xid, self.zxid(), |out| {
                    jute::encode_buffer(node.data(), out);
                    node.stat().encode(out);
                });
                (reply, node.data().map_or(0, <[u8]>::len))
            }
            Err(code) => return self.err(xid, code),
        };
        self.count_read(path, bytes);
        if watch {
            self.watches
                .add(Table::Data, path, self.conn, Mode::Standard);
        }
        Frames::reply(reply)
    }

    fn children(&mut self, path: &str, watch: bool) -> Result<(Vec<String>, Stat), ErrorCode> {
        let node = self.readable(path)?;
        let out: (Vec<String>, Stat) = (
            self.tree.child_names(node).map(str::to_owned).collect(),
            node.stat(),
        );
        let names = out.0.iter().map(|c| java_length(c) as usize).sum();
        self.count_read(path, names);
        if watch {
            self.watches
                .add(Table::Child, path, self.conn, Mode::Standard);
        }
        Ok(out)
    }

    fn get_acl(&self, xid: i32, path: &str) -> Frames {
        let Some(node) = self.tree.node(path) else {
            return self.err(xid, ErrorCode::NoNode);
        };
        let admin = self.auth.allows(&node.acl, Perms::ADMIN);
        if !admin && !self.auth.allows(&node.acl, Perms::READ) {
            return self.err(xid, ErrorCode::NoAuth);
        }
        let acl = if admin {
            node.acl.to_vec()
        } else {
            mask_digests(&node.acl)
        };
        self.ok(
            xid,
            &GetAclResponse {
                acl,
                stat: node.stat(),
            },
        )
    }

    fn add_watch(&mut self, xid: i32, r: &AddWatchRequest) -> Frames {
        match AddWatchMode::from_i32(r.mode) {
            Some(AddWatchMode::Persistent) => {
                self.watches
                    .add(Table::Data, &r.path, self.conn, Mode::Persistent);
                self.watches
                    .add(Table::Child, &r.path, self.conn, Mode::Persistent);
            }
            Some(AddWatchMode::PersistentRecursive) => {
                self.watches
                    .add(Table::Data, &r.path, self.conn, Mode::PersistentRecursive);
            }
            None => return self.err(xid, ErrorCode::MarshallingError),
        }
        self.ok(xid, &ErrorResponse { err: 0 })
    }

    fn check_or_remove(&mut self, xid: i32, path: &str, kind: i32, remove: bool) -> Frames {
        let Some(kind) = WatcherType::from_i32(kind) else {
            return self.err(xid, ErrorCode::MarshallingError);
        };
        let found = if remove {
            self.watches.remove(path, self.conn, kind)
        } else {
            self.watches.has(path, self.conn, kind)
        };
        if found {
            Frames::reply(reply::bare(xid, self.zxid(), 0))
        } else {
            self.err(xid, ErrorCode::NoWatcher)
        }
    }

    /// Re-registers watches after a reconnect, first sending the events the
    /// client missed (zxid -1), then the reply.
    fn set_watches(&mut self, xid: i32, r: &SetWatches2) -> Frames {
        let rel = r.relative_zxid;
        let mut events = Vec::new();
        let mut missed = |event, path: &str| events.push(reply::notification(-1, event, path));
        for path in &r.data_watches {
            match self.tree.node(path) {
                None => missed(EventType::NodeDeleted, path),
                // Planted (setwatches-rearm): the change since `rel` is
                // overlooked and the watch re-armed, so that event is lost.
                Some(n) if n.stat.mzxid > rel && !active(Failpoint::SetwatchesRearm) => {
                    missed(EventType::NodeDataChanged, path)
                }
                Some(_) => self
                    .watches
                    .add(Table::Data, path, self.conn, Mode::Standard),
            }
        }
        for path in &r.exist_watches {
            match self.tree.node(path) {
                Some(_) => missed(EventType::NodeCreated, path),
                None => self
                    .watches
                    .add(Table::Data, path, self.conn, Mode::Standard),
            }
        }
        for path in &r.child_watches {
            match self.tree.node(path) {
                None => missed(EventType::NodeDeleted, path),
                Some(n) if n.stat.pzxid > rel => missed(EventType::NodeChildrenChanged, path),
                Some(_) => self
                    .watches
                    .add(Table::Child, path, self.conn, Mode::Standard),
            }
        }
        for path in &r.persistent_watches {
            self.watches
                .add(Table::Data, path, self.conn, Mode::Persistent);
            self.watches
                .add(Table::Child, path, self.conn, Mode::Persistent);
        }
        for path in &r.persistent_recursive_watches {
            self.watches
                .add(Table::Data, path, self.conn, Mode::PersistentRecursive);
        }
        Frames {
            events,
            reply: reply::bare(xid, self.zxid(), 0),
        }
    }

    fn multi_read_op(&mut self, op: &MultiOp) -> MultiResult {
        // multiRead never sets watches, whatever the flag says.
        let (path, result) = match op {
            MultiOp::GetData(r) => (
                &r.path,
                self.readable(&r.path).map(|n| MultiResult::GetData {
                    data: n.data().map(Bytes::copy_from_slice),
                    stat: n.stat(),
                }),
            ),
            MultiOp::GetChildren(r) => (
                &r.path,
                self.readable(&r.path).map(|n| MultiResult::GetChildren {
                    children: self.tree.child_names(n).map(str::to_owned).collect(),
                }),
            ),
            _ => {
                return MultiResult::Error {
                    err: ErrorCode::MarshallingError.code(),
                }
            }
        };
        let read = match &result {
            Ok(MultiResult::GetData { data, .. }) => data.as_ref().map_or(0, |d| d.len()),
            Ok(MultiResult::GetChildren { children }) => {
                children.iter().map(|c| java_length(c) as usize).sum()
            }
            _ => return result.unwrap_or_else(|code| MultiResult::Error { err: code.code() }),
        };
        self.count_read(path, read);
        result.unwrap_or_else(|code| MultiResult::Error { err: code.code() })
    }
}

/// A session's ephemerals in the order ZooKeeper lists them: a clone of its
/// per-session hash set, filled in creation (czxid) order.
fn ephemerals_in_zookeeper_order(tree: &DataTree, session: i64) -> Vec<String> {
    let mut owned = tree.ephemerals_of(session);
    owned.sort_by_key(|p| tree.node(p).map_or(0, |n| n.stat.czxid));
    let names: Vec<&str> = owned.iter().map(String::as_str).collect();
    crate::core::java_order::hash_set_clone_order(&names)
        .into_iter()
        .map(|i| owned[i].clone())
        .collect()
}
