//! Outstanding changes: the effect of txns that are prepared but not yet
//! applied, so pipelined requests are validated against each other
//! (ZooKeeper's `outstandingChanges`).

use std::collections::BTreeMap;
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
#[derive(Debug, Default)]
pub struct PendingChanges {
    changes: BTreeMap<String, (Zxid, Option<NodeMeta>)>,
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
    pub fn record(&mut self, zxid: Zxid, changes: BTreeMap<String, Option<NodeMeta>>) {
        for (path, meta) in changes {
            self.changes.insert(path, (zxid, meta));
        }
    }

    /// Drops changes the tree now reflects (every txn up to `zxid` applied).
    pub fn applied(&mut self, zxid: Zxid) {
        self.changes.retain(|_, (z, _)| *z > zxid);
    }

    /// Paths that prepared txns create as ephemerals of `session`.
    pub fn ephemerals_of(&self, session: i64) -> Vec<String> {
        self.changes
            .iter()
            .filter(|(_, (_, meta))| {
                meta.as_ref().and_then(NodeMeta::ephemeral_session) == Some(session)
            })
            .map(|(p, _)| p.clone())
            .collect()
    }

    /// Whether nothing is outstanding.
    pub fn is_empty(&self) -> bool {
        self.changes.is_empty()
    }
}
