//! Outstanding changes: the effect of txns that are prepared but not yet
//! applied, so pipelined requests are validated against each other
//! (ZooKeeper's `outstandingChanges`).

use super::txn_changes::TxnChanges;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use zkd_protocol::records::{Acl, StatPersisted};
use zkd_protocol::Zxid;
use zkd_storage::DataTree;

/// What validation needs to know of a node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeMeta {
    /// The stat as stored (persisted cversion, owner, versions).
    pub stat: StatPersisted,
    /// Current number of children.
    pub num_children: i32,
    /// The ACL.
    pub acl: Arc<Vec<Acl>>,
}

impl NodeMeta {
    /// The owning session if the node is an ordinary ephemeral.
    pub fn ephemeral_session(&self) -> Option<i64> {
        let owner = self.stat.ephemeral_owner;
        let special = owner == zkd_storage::data_tree::CONTAINER_OWNER
            || zkd_storage::data_tree::ttl_of(owner).is_some();
        (owner != 0 && !special).then_some(owner)
    }
}

/// Per-path state after every prepared txn: `None` means deleted.
///
/// A hash map, not a `BTreeMap`: with writes streaming through, the map's
/// 1.4 KB nodes were allocated and freed over and over, and each such
/// allocation made malloc consolidate its small free chunks (with the
/// per-txn map, a tenth of a create's CPU, issue 15). The queue lists what
/// each txn recorded in zxid order, so dropping applied changes visits only
/// those.
#[derive(Debug, Default)]
pub struct PendingChanges {
    /// aHash, keyed at random per process as the tree's index is: several
    /// times SipHash's speed on paths, and clients cannot pick collisions.
    changes: HashMap<Arc<str>, (Zxid, Option<NodeMeta>), ahash::RandomState>,
    recorded: VecDeque<(Zxid, Arc<str>)>,
}

impl PendingChanges {
    /// The node at `path` as the prepared txns will leave it.
    pub fn lookup(&self, tree: &DataTree, path: &str) -> Option<NodeMeta> {
        match self.changes.get(path) {
            Some((_, meta)) => meta.clone(),
            None => tree.node(path).map(|n| NodeMeta {
                stat: n.stat.clone(),
                num_children: n.children.len() as i32,
                acl: n.acl.clone(),
            }),
        }
    }

    /// Records the changes of the txn `zxid`.
    pub fn record(&mut self, zxid: Zxid, changes: TxnChanges) {
        for (path, meta) in changes.into_changes() {
            let key = match self.changes.get_key_value(path.as_str()) {
                Some((key, _)) => key.clone(),
                None => Arc::from(path),
            };
            self.changes.insert(key.clone(), (zxid, meta));
            self.recorded.push_back((zxid, key));
        }
    }

    /// Drops changes the tree now reflects (every txn up to `zxid` applied).
    pub fn applied(&mut self, zxid: Zxid) {
        while let Some((recorded, path)) = self.recorded.front() {
            if *recorded > zxid {
                break;
            }
            // A later txn's change of the same path stays.
            if self.changes.get(path).is_some_and(|(z, _)| z == recorded) {
                self.changes.remove(path);
            }
            self.recorded.pop_front();
        }
    }

    /// Paths that prepared txns create as ephemerals of `session`.
    pub fn ephemerals_of(&self, session: i64) -> Vec<String> {
        self.changes
            .iter()
            .filter(|(_, (_, meta))| {
                meta.as_ref().and_then(NodeMeta::ephemeral_session) == Some(session)
            })
            .map(|(p, _)| p.to_string())
            .collect()
    }

    /// Whether nothing is outstanding.
    pub fn is_empty(&self) -> bool {
        self.changes.is_empty()
    }
}
