//! `DataTree`: the znode tree, pure and in memory.
//!
//! `apply(txn)` is the only mutator. It never reads a clock or validates a
//! request: the leader did that when it built the txn, so every member that
//! applies the same txns builds the same tree. Applying is idempotent for
//! replay (a create that finds its node only raises the parent's counters).
//!
//! The tree keeps a [`digest`](DataTree::digest) of its whole replicated state
//! up to date on every apply, so members can be compared in O(1); see the
//! `digest` module for why and how it is defined.

mod children;
mod digest;
mod image;
mod node;
mod node_table;
mod open_parents;
mod path_index;
mod quota;

pub use children::ChildSet;
pub use image::{image_header, put_buffer, ImageDecoder, SnapshotCursor};
pub use node::{ttl_of, ttl_owner, DataNode, CONTAINER_OWNER, MAX_TTL_MS};
pub use quota::{Quota, QuotaExcess, QuotaLimits, QuotaUsage, LIMITS_NODE, QUOTA_DIR, STATS_NODE};

use crate::path;
use crate::txn::{Txn, TxnBody};
use bytes::Bytes;
use node_table::{NodeId, NodeTable};
use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use zkd_protocol::records::{Acl, CloseSessionTxn, SharedAcl, Stat, StatPersisted, TxnHeader};
use zkd_protocol::{EventType, Perms, Zxid};

/// A change that may fire watches: `(path, event)`, with the ACL that decides
/// who may hear of it (the node's, or the parent's for NodeChildrenChanged).
/// The path is borrowed from the txn applied, which outlives the triggers,
/// except the paths of a closing session's ephemerals, which are owned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WatchTrigger<'t> {
    /// The path the event names.
    pub path: Cow<'t, str>,
    /// What happened.
    pub event: EventType,
    /// The ACL a receiver needs READ on.
    pub acl: Arc<Vec<Acl>>,
}

/// What applying a txn produced, for the reply to its client.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TxnOutcome {
    /// A node was created at `path`.
    Created { path: String, stat: Stat },
    /// A node was deleted.
    Deleted,
    /// Data was set.
    DataSet { stat: Stat },
    /// The ACL was set.
    AclSet { stat: Stat },
    /// A check passed.
    Checked,
    /// One outcome per sub-op of a multi.
    Multi(Vec<TxnOutcome>),
    /// A session was created.
    SessionCreated,
    /// A session was closed and its ephemerals deleted.
    SessionClosed,
    /// The request failed validation with this code.
    Error(i32),
}

/// The znode tree plus the session table it persists with.
///
/// Each node holds its own path; the child, ephemeral and expirable sets
/// refer to nodes by [`NodeId`].
#[derive(Clone, Debug)]
pub struct DataTree {
    nodes: NodeTable,
    ephemerals: BTreeMap<i64, BTreeSet<NodeId>>,
    sessions: BTreeMap<i64, i32>,
    /// Containers and TTL nodes, which the container manager scans.
    expirable: BTreeSet<NodeId>,
    last_zxid: Zxid,
    /// Wrapping sum of every node's and session's digest term.
    digest: u64,
    /// The paths with a quota and their usage.
    quotas: quota::QuotaIndex,
}

impl Default for DataTree {
    fn default() -> Self {
        Self::new()
    }
}

impl DataTree {
    /// A fresh tree: `/`, `/zookeeper`, `/zookeeper/quota`, `/zookeeper/config`.
    pub fn new() -> DataTree {
        let mut tree = DataTree {
            nodes: NodeTable::default(),
            ephemerals: BTreeMap::new(),
            sessions: BTreeMap::new(),
            expirable: BTreeSet::new(),
            last_zxid: Zxid::ZERO,
            digest: 0,
            quotas: Default::default(),
        };
        let open = Arc::new(vec![Acl::world(Perms::ALL)]);
        tree.insert_system("/", open.clone(), StatPersisted::default());
        tree.insert_system("/zookeeper", open.clone(), StatPersisted::default());
        tree.insert_system("/zookeeper/quota", open, StatPersisted::default());
        // /zookeeper/config is world-readable only and shows aversion -1.
        let config_stat = StatPersisted {
            aversion: -1,
            ..StatPersisted::default()
        };
        tree.insert_system(
            "/zookeeper/config",
            Arc::new(vec![Acl::world(Perms::READ)]),
            config_stat,
        );
        tree
    }

    /// Puts an ensemble's membership into `/zookeeper/config`, as ZooKeeper
    /// does whenever it loads its database: the data is the quorum config
    /// (`server.N=...` lines and `version=`), the data version -1, the
    /// mzxid the config's version. Not a txn, and outside the digest: each
    /// member sets it from its own configuration.
    pub fn set_ensemble_config(&mut self, config: Bytes, version: i64) {
        self.rewrite("/zookeeper/config", |node| {
            node.set_data(Some(&config));
            node.stat.version = -1;
            node.stat.mzxid = version;
        });
    }

    /// Changes the node at `p` in place, if there, outside any txn (its
    /// stat's zxids do not move), keeping the digest up to date.
    fn rewrite(&mut self, p: &str, change: impl FnOnce(&mut DataNode)) {
        let Some(node) = self.nodes.get_mut(p) else {
            return;
        };
        let before = node.digest_term();
        change(node);
        self.digest = self
            .digest
            .wrapping_sub(before)
            .wrapping_add(node.digest_term());
    }

    fn insert_system(&mut self, p: &str, acl: Arc<Vec<Acl>>, stat: StatPersisted) {
        self.link(DataNode::new(p, Some(b""), acl, stat));
    }

    /// Inserts a node, records it in its parent's children and adds it to the digest.
    fn link(&mut self, node: DataNode) {
        let p = node.path();
        let parent = if p == "/" {
            None
        } else {
            self.nodes.id(path::parent(p))
        };
        let id = self.index(node);
        if let Some(children) = parent.and_then(|p| self.children_mut(p)) {
            children.insert(id);
        }
    }

    /// Puts a node in the table, the ephemeral and expirable sets and the
    /// digest, but not in its parent's children. A node it replaces (a
    /// damaged image may list a path twice) hands over its children.
    fn index(&mut self, node: DataNode) -> NodeId {
        let (term, session, expirable) = Self::index_terms(&node);
        let (id, replaced) = self.nodes.insert(node);
        if let Some(old) = replaced {
            self.forget(id, &old);
            if let Some(node) = self.nodes.node_mut(id) {
                node.children = old.children;
            }
        }
        self.remember(id, term, session, expirable);
        id
    }

    /// [`DataTree::index`] but for the path index: the node goes into
    /// `unindexed`, for [`NodeTable::index_placed`] to index in bulk.
    fn place_unindexed(&mut self, node: DataNode, unindexed: &mut path_index::Unindexed) -> NodeId {
        let (term, session, expirable) = Self::index_terms(&node);
        let id = self.nodes.place_unindexed(node, unindexed);
        self.remember(id, term, session, expirable);
        id
    }

    /// Takes every node out, in id order, each childless, and out of the
    /// digest and the ephemeral and expirable sets (the sessions stay).
    fn take_all_nodes(&mut self) -> Vec<DataNode> {
        let mut nodes = self.nodes.take_all();
        for node in &mut nodes {
            self.digest = self.digest.wrapping_sub(node.digest_term());
            node.children = ChildSet::default();
        }
        self.ephemerals.clear();
        self.expirable.clear();
        nodes
    }

    /// [`DataTree::index`] for a path not in the tree: `None`, and nothing
    /// changed, if a node is there already.
    fn index_new(&mut self, node: DataNode) -> Option<NodeId> {
        let (term, session, expirable) = Self::index_terms(&node);
        let id = self.nodes.insert_new(node)?;
        self.remember(id, term, session, expirable);
        Some(id)
    }

    /// What indexing `node` adds beside the table: its digest term, the
    /// session owning it if ephemeral, and whether it may expire.
    fn index_terms(node: &DataNode) -> (u64, Option<i64>, bool) {
        let expirable = node.is_container() || node.ttl().is_some();
        (node.digest_term(), node.ephemeral_session(), expirable)
    }

    /// Adds node `id`, just put in the table, to the digest and its sets.
    fn remember(&mut self, id: NodeId, term: u64, session: Option<i64>, expirable: bool) {
        self.digest = self.digest.wrapping_add(term);
        if let Some(session) = session {
            self.ephemerals.entry(session).or_default().insert(id);
        }
        if expirable {
            self.expirable.insert(id);
        }
    }

    /// Takes node `id` out of the table, the ephemeral and expirable sets
    /// and the digest (not out of its parent's children).
    fn unindex(&mut self, id: NodeId) -> Option<DataNode> {
        let node = self.nodes.take(id)?;
        self.forget(id, &node);
        Some(node)
    }

    /// Takes `node`, which was at `id`, out of the ephemeral and expirable
    /// sets and the digest.
    fn forget(&mut self, id: NodeId, node: &DataNode) {
        self.digest = self.digest.wrapping_sub(node.digest_term());
        if let Some(session) = node.ephemeral_session() {
            if let Some(set) = self.ephemerals.get_mut(&session) {
                set.remove(&id);
                if set.is_empty() {
                    self.ephemerals.remove(&session);
                }
            }
        }
        self.expirable.remove(&id);
    }

    /// The children of node `id`, to change.
    fn children_mut(&mut self, id: NodeId) -> Option<&mut ChildSet> {
        self.nodes.node_mut(id).map(|node| &mut node.children)
    }

    /// The digest of the replicated state: every node (path, data, ACL and
    /// persisted stat; system nodes included) and every session (id, timeout).
    /// Kept incrementally by `apply`, so this is O(1). Two trees that applied
    /// the same txns, live or from a snapshot plus replay, have equal digests;
    /// compare them at equal [`last_zxid`](Self::last_zxid) (the zxid itself is
    /// not part of the digest). The definition is in the `digest` module and
    /// is stable across platforms and builds.
    pub fn digest(&self) -> u64 {
        self.digest
    }

    /// The digest computed from scratch, ignoring every cached hash: O(n).
    /// For tests and debug checks that the incremental [`digest`](Self::digest)
    /// has not drifted.
    pub fn recompute_digest(&self) -> u64 {
        let counted = self.nodes.iter().filter(|n| digest::counts(n.path_bytes()));
        let nodes = counted.fold(0u64, |sum, n| {
            let content = digest::content_hash(n.path_bytes(), n.data(), &n.acl);
            sum.wrapping_add(digest::node_hash(content, &n.stat))
        });
        self.sessions.iter().fold(nodes, |sum, (&id, &timeout)| {
            sum.wrapping_add(digest::session_hash(id, timeout))
        })
    }

    /// The node at `path`.
    pub fn node(&self, p: &str) -> Option<&DataNode> {
        self.nodes.get(p)
    }

    /// The names of `node`'s children, in order.
    pub fn child_names<'a>(&'a self, node: &'a DataNode) -> impl Iterator<Item = &'a str> + 'a {
        let children = node.children.ids().filter_map(|id| self.nodes.node(id));
        children.map(|child| path::name(child.path()))
    }

    /// The zxid of the last applied txn.
    pub fn last_zxid(&self) -> Zxid {
        self.last_zxid
    }

    /// Number of nodes, counting the root twice as ZooKeeper's `Node count` does.
    pub fn node_count(&self) -> usize {
        self.nodes.len() + 1
    }

    /// Sum of path and data lengths (`zk_approximate_data_size`).
    pub fn approximate_data_size(&self) -> usize {
        self.nodes
            .iter()
            .map(|n| n.path().len() + n.data().map_or(0, <[u8]>::len))
            .sum()
    }

    /// Live sessions and their timeouts, as persisted.
    pub fn sessions(&self) -> &BTreeMap<i64, i32> {
        &self.sessions
    }

    /// The ephemerals owned by `session`, sorted.
    pub fn ephemerals_of(&self, session: i64) -> Vec<String> {
        let mut paths = self.paths_of(self.ephemerals.get(&session).into_iter().flatten());
        paths.sort_unstable();
        paths
    }

    fn paths_of<'a>(&self, ids: impl Iterator<Item = &'a NodeId>) -> Vec<String> {
        let nodes = ids.filter_map(|id| self.nodes.node(*id));
        nodes.map(|n| n.path().to_owned()).collect()
    }

    /// Total number of ephemerals.
    pub fn ephemeral_count(&self) -> usize {
        self.ephemerals.values().map(BTreeSet::len).sum()
    }

    /// Number of descendants of `path`, excluding itself.
    pub fn descendant_count(&self, p: &str) -> usize {
        self.preorder(p).count().saturating_sub(1)
    }

    /// Paths of `p` and all its descendants, parents before children, each
    /// level in the children's order. Iterative: a path may be hundreds of thousands of
    /// levels deep, far past what recursion on the stack survives.
    pub fn preorder<'a>(&'a self, p: &str) -> impl Iterator<Item = (&'a str, &'a DataNode)> + 'a {
        let mut stack: Vec<&'a DataNode> = self.nodes.get(p).into_iter().collect();
        std::iter::from_fn(move || {
            let node = stack.pop()?;
            let children = node.children.ids().rev();
            stack.extend(children.filter_map(|id| self.nodes.node(id)));
            Some((node.path(), node))
        })
    }

    /// Containers and TTL nodes the container manager should delete at `now_ms`:
    /// childless containers that once had a child, and childless TTL nodes whose
    /// data has not changed for longer than their TTL.
    pub fn expired_containers(&self, now_ms: i64) -> Vec<String> {
        let expired = self.expirable.iter().filter(|&&id| {
            let Some(node) = self.nodes.node(id) else {
                return false;
            };
            if !node.children.is_empty() {
                return false;
            }
            match node.ttl() {
                Some(ttl) => now_ms - node.stat.mtime > ttl,
                None => node.stat.cversion > 0,
            }
        });
        let mut paths = self.paths_of(expired);
        paths.sort_unstable();
        paths
    }

    /// Applies one txn, returning the outcome for its client and the watch
    /// triggers in firing order.
    pub fn apply<'t>(&mut self, txn: &'t Txn) -> (TxnOutcome, Vec<WatchTrigger<'t>>) {
        let mut triggers = Vec::new();
        let outcome = self.apply_body(&txn.body, txn, &mut triggers);
        if txn.zxid() > self.last_zxid {
            self.last_zxid = txn.zxid();
        }
        (outcome, triggers)
    }

    fn apply_body<'t>(
        &mut self,
        body: &'t TxnBody,
        txn: &Txn,
        out: &mut Vec<WatchTrigger<'t>>,
    ) -> TxnOutcome {
        let h = &txn.header;
        match body {
            TxnBody::Create(_, t) => {
                let owner = if t.ephemeral { h.client_id } else { 0 };
                self.create(
                    &t.path,
                    &t.data,
                    &t.acl,
                    owner,
                    t.parent_c_version,
                    txn,
                    out,
                )
            }
            TxnBody::CreateContainer(t) => self.create(
                &t.path,
                &t.data,
                &t.acl,
                CONTAINER_OWNER,
                t.parent_c_version,
                txn,
                out,
            ),
            TxnBody::CreateTtl(t) => self.create(
                &t.path,
                &t.data,
                &t.acl,
                ttl_owner(t.ttl),
                t.parent_c_version,
                txn,
                out,
            ),
            TxnBody::Delete(_, t) => self.delete(Cow::Borrowed(&t.path), h.zxid, out),
            TxnBody::SetData(t) | TxnBody::Reconfig(t) => self.set_data(t, txn, out),
            TxnBody::SetAcl(t) => self.set_acl(&t.path, &t.acl, t.version),
            TxnBody::Check(_) => TxnOutcome::Checked,
            TxnBody::Error(e) => TxnOutcome::Error(e.err),
            TxnBody::Multi(subs) => {
                TxnOutcome::Multi(subs.iter().map(|s| self.apply_body(s, txn, out)).collect())
            }
            TxnBody::CreateSession(t) => {
                self.insert_session(h.client_id, t.time_out);
                TxnOutcome::SessionCreated
            }
            TxnBody::CloseSession(t) => self.close_session(h, t, out),
        }
    }

    /// A session's end: its ephemerals deleted in the txn's order (its
    /// leader's, which ZooKeeper's deletes in too), then any others it
    /// still owns here; then the session itself.
    fn close_session<'t>(
        &mut self,
        h: &TxnHeader,
        t: &CloseSessionTxn,
        out: &mut Vec<WatchTrigger<'t>>,
    ) -> TxnOutcome {
        let listed: BTreeSet<&String> = t.paths2_delete.iter().collect();
        let mut local: Vec<String> = self.ephemerals_of(h.client_id);
        local.retain(|p| !listed.contains(p));
        local.sort();
        let mut seen = BTreeSet::new();
        let doomed = t.paths2_delete.iter().cloned().chain(local);
        for p in doomed.filter(|p| seen.insert(p.clone())) {
            // Only the session's own ephemerals: a listed path may have been
            // deleted and re-created by another session since (replay, races).
            let owned = self.node(&p).and_then(DataNode::ephemeral_session) == Some(h.client_id);
            if owned {
                self.delete(Cow::Owned(p), h.zxid, out);
            } else {
                self.raise_parent_pzxid(&p, h.zxid);
            }
        }
        self.ephemerals.remove(&h.client_id);
        if let Some(timeout) = self.sessions.remove(&h.client_id) {
            let term = digest::session_hash(h.client_id, timeout);
            self.digest = self.digest.wrapping_sub(term);
        }
        TxnOutcome::SessionClosed
    }

    /// Adds or replaces a session in the table and the digest.
    fn insert_session(&mut self, id: i64, timeout: i32) {
        if let Some(old) = self.sessions.insert(id, timeout) {
            self.digest = self.digest.wrapping_sub(digest::session_hash(id, old));
        }
        self.digest = self.digest.wrapping_add(digest::session_hash(id, timeout));
    }

    #[allow(clippy::too_many_arguments)]
    fn create<'t>(
        &mut self,
        p: &'t str,
        data: &Option<Bytes>,
        acl: &SharedAcl,
        owner: i64,
        parent_cversion: i32,
        txn: &Txn,
        out: &mut Vec<WatchTrigger<'t>>,
    ) -> TxnOutcome {
        let zxid = txn.header.zxid;
        let parent_path = path::parent(p);
        // The parent is looked up once and the child's path hashed once: on a
        // large tree each lookup is a few cache misses.
        let Some(parent_id) = self.nodes.id(parent_path) else {
            return TxnOutcome::Error(zkd_protocol::ErrorCode::NoNode.code());
        };
        let Some(parent) = self.nodes.node_mut(parent_id) else {
            return TxnOutcome::Error(zkd_protocol::ErrorCode::NoNode.code());
        };
        let before = parent.digest_term();
        // Counters only move forward, which makes replay over a snapshot idempotent.
        parent.stat.cversion = parent.stat.cversion.max(parent_cversion);
        parent.stat.pzxid = parent.stat.pzxid.max(zxid);
        self.digest = self
            .digest
            .wrapping_sub(before)
            .wrapping_add(parent.digest_term());
        let parent_acl = parent.acl.clone();
        // A child mostly has its parent's ACL: share that rather than keep
        // another; else keep the txn's own.
        let acl = if Arc::ptr_eq(&parent_acl, acl) || parent_acl == *acl {
            parent_acl.clone()
        } else {
            acl.clone()
        };
        let stat = StatPersisted {
            czxid: zxid,
            mzxid: zxid,
            ctime: txn.header.time,
            mtime: txn.header.time,
            ephemeral_owner: owner,
            pzxid: zxid,
            ..StatPersisted::default()
        };
        let node = DataNode::new(p, data.as_deref(), acl.clone(), stat);
        let client_stat = node.stat();
        let Some(id) = self.index_new(node) else {
            return TxnOutcome::Error(zkd_protocol::ErrorCode::NodeExists.code());
        };
        if let Some(children) = self.children_mut(parent_id) {
            children.insert(id);
        }
        self.quota_created(p, data.as_deref());
        out.push(WatchTrigger {
            path: Cow::Borrowed(p),
            event: EventType::NodeCreated,
            acl,
        });
        out.push(WatchTrigger {
            path: Cow::Borrowed(parent_path),
            event: EventType::NodeChildrenChanged,
            acl: parent_acl,
        });
        TxnOutcome::Created {
            path: p.to_owned(),
            stat: client_stat,
        }
    }

    fn delete<'t>(
        &mut self,
        p: Cow<'t, str>,
        zxid: i64,
        out: &mut Vec<WatchTrigger<'t>>,
    ) -> TxnOutcome {
        // Before the existence check, as ZooKeeper's deleteNode: replay over a
        // fuzzy snapshot may find the child already gone, and the parent must
        // still end with this pzxid.
        let parent = self.nodes.id(path::parent(&p));
        if let Some(parent) = parent {
            self.raise_pzxid(parent, zxid);
        }
        let Some(id) = self.nodes.id(&p) else {
            return TxnOutcome::Error(zkd_protocol::ErrorCode::NoNode.code());
        };
        let parent_acl = match parent {
            Some(parent) => {
                if let Some(children) = self.children_mut(parent) {
                    children.remove(id);
                }
                self.nodes.node(parent).map(|n| n.acl.clone())
            }
            None => None,
        };
        let Some(node) = self.unindex(id) else {
            return TxnOutcome::Error(zkd_protocol::ErrorCode::NoNode.code());
        };
        self.quota_deleted(&node);
        let parent_path = match &p {
            Cow::Borrowed(p) => Cow::Borrowed(path::parent(p)),
            Cow::Owned(p) => Cow::Owned(path::parent(p).to_owned()),
        };
        out.push(WatchTrigger {
            path: p,
            event: EventType::NodeDeleted,
            acl: node.acl,
        });
        out.push(WatchTrigger {
            path: parent_path,
            event: EventType::NodeChildrenChanged,
            acl: parent_acl.unwrap_or_default(),
        });
        TxnOutcome::Deleted
    }

    fn raise_parent_pzxid(&mut self, p: &str, zxid: i64) {
        if let Some(parent) = self.nodes.id(path::parent(p)) {
            self.raise_pzxid(parent, zxid);
        }
    }

    /// Raises node `id`'s pzxid to `zxid`, if lower.
    fn raise_pzxid(&mut self, id: NodeId, zxid: i64) {
        if let Some(node) = self.nodes.node_mut(id) {
            if zxid > node.stat.pzxid {
                let before = node.digest_term();
                node.stat.pzxid = zxid;
                self.digest = self
                    .digest
                    .wrapping_sub(before)
                    .wrapping_add(node.digest_term());
            }
        }
    }

    fn set_data<'t>(
        &mut self,
        t: &'t zkd_protocol::records::SetDataTxn,
        txn: &Txn,
        out: &mut Vec<WatchTrigger<'t>>,
    ) -> TxnOutcome {
        let (p, data, version) = (t.path.as_str(), &t.data, t.version);
        let Some(node) = self.nodes.get_mut(p) else {
            return TxnOutcome::Error(zkd_protocol::ErrorCode::NoNode.code());
        };
        let before = node.digest_term();
        let old_len = node.data().map_or(0, <[u8]>::len) as i64;
        node.set_data(data.as_deref());
        node.stat.version = version;
        node.stat.mzxid = txn.header.zxid;
        node.stat.mtime = txn.header.time;
        self.digest = self
            .digest
            .wrapping_sub(before)
            .wrapping_add(node.digest_term());
        out.push(WatchTrigger {
            path: Cow::Borrowed(p),
            event: EventType::NodeDataChanged,
            acl: node.acl.clone(),
        });
        let stat = node.stat();
        self.quota_data_set(p, old_len, data.as_deref());
        TxnOutcome::DataSet { stat }
    }

    fn set_acl(&mut self, p: &str, acl: &[Acl], version: i32) -> TxnOutcome {
        let Some(node) = self.nodes.get_mut(p) else {
            return TxnOutcome::Error(zkd_protocol::ErrorCode::NoNode.code());
        };
        let before = node.digest_term();
        node.set_acl(Arc::new(acl.to_vec()));
        node.stat.aversion = version;
        self.digest = self
            .digest
            .wrapping_sub(before)
            .wrapping_add(node.digest_term());
        TxnOutcome::AclSet { stat: node.stat() }
    }
}

#[cfg(test)]
mod tests;
