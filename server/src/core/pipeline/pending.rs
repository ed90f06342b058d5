//! Outstanding changes: the effect of txns that are prepared but not yet
//! applied, so pipelined requests are validated against each other
//! (ZooKeeper's `outstandingChanges`).

use super::txn_changes::TxnChanges;
use hashbrown::hash_table::Entry;
use hashbrown::HashTable;
use std::collections::VecDeque;
use std::sync::Arc;
use zkd_protocol::records::{Acl, StatPersisted};
use zkd_protocol::Zxid;
use zkd_storage::data_tree::QuotaUsage;
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
    /// Bytes of data, which a quota counts.
    pub data_len: i64,
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

/// A path's change by the newest prepared txn that made one.
#[derive(Debug)]
struct Change {
    path: Arc<str>,
    zxid: Zxid,
    meta: Option<NodeMeta>,
}

/// Per-path state after every prepared txn: `None` means deleted.
///
/// A hash table, not a `BTreeMap`: with writes streaming through, the map's
/// 1.4 KB nodes were allocated and freed over and over, and each such
/// allocation made malloc consolidate its small free chunks (a create cost
/// the core 2.8-2.9 us with it, 1.9-2.0 without; issue 15). Its hash keys
/// come from the config, so the core stays deterministic, and nothing is
/// read in table order. The queue lists what each txn recorded in zxid
/// order, so dropping applied changes visits only those.
#[derive(Debug)]
pub struct PendingChanges {
    changes: HashTable<Change>,
    recorded: VecDeque<(Zxid, Arc<str>)>,
    hasher: ahash::RandomState,
    /// Quota usage as prepared txns leave it, oldest first (only while
    /// quotas are enforced): few, so a list.
    quota_usage: VecDeque<(Zxid, String, QuotaUsage)>,
}

impl PendingChanges {
    /// No changes; paths hashed with `hasher`.
    pub fn new(hasher: ahash::RandomState) -> PendingChanges {
        PendingChanges {
            changes: HashTable::new(),
            recorded: VecDeque::new(),
            hasher,
            quota_usage: VecDeque::new(),
        }
    }

    fn hash(&self, path: &str) -> u64 {
        self.hasher.hash_one(path.as_bytes())
    }

    /// The node at `path` as the prepared txns will leave it.
    pub fn lookup(&self, tree: &DataTree, path: &str) -> Option<NodeMeta> {
        match self.changes.find(self.hash(path), |c| &*c.path == path) {
            Some(change) => change.meta.clone(),
            None => tree.node(path).map(|n| NodeMeta {
                stat: n.stat.clone(),
                num_children: n.children.len() as i32,
                acl: n.acl.clone(),
                data_len: n.data().map_or(0, <[u8]>::len) as i64,
            }),
        }
    }

    /// The usage of the quota on `root` as prepared txns leave it, if any
    /// changed it.
    pub fn quota_usage(&self, root: &str) -> Option<QuotaUsage> {
        let newest = self.quota_usage.iter().rev().find(|(_, r, _)| r == root);
        newest.map(|(_, _, usage)| *usage)
    }

    /// Records the changes of the txn `zxid`.
    pub fn record(&mut self, zxid: Zxid, mut changes: TxnChanges) {
        let usage = changes
            .take_quota_usage()
            .map(|(root, usage)| (zxid, root, usage));
        self.quota_usage.extend(usage);
        for (path, meta) in changes.into_changes() {
            let hash = self.hash(&path);
            let hasher = &self.hasher;
            let rehash = |c: &Change| hasher.hash_one(c.path.as_bytes());
            let key = match self.changes.entry(hash, |c| *c.path == *path, rehash) {
                Entry::Occupied(mut taken) => {
                    let change = taken.get_mut();
                    change.zxid = zxid;
                    change.meta = meta;
                    change.path.clone()
                }
                Entry::Vacant(free) => {
                    free.insert(Change {
                        path: path.clone(),
                        zxid,
                        meta,
                    });
                    path
                }
            };
            self.recorded.push_back((zxid, key));
        }
    }

    /// Drops changes the tree now reflects (every txn up to `zxid` applied).
    pub fn applied(&mut self, zxid: Zxid) {
        while self.quota_usage.front().is_some_and(|(z, _, _)| *z <= zxid) {
            self.quota_usage.pop_front();
        }
        while let Some((recorded, path)) = self.recorded.pop_front() {
            if recorded > zxid {
                self.recorded.push_front((recorded, path));
                break;
            }
            // A later txn's change of the same path stays.
            let hash = self.hash(&path);
            let same = |c: &Change| c.path == path && c.zxid == recorded;
            if let Ok(change) = self.changes.find_entry(hash, same) {
                change.remove();
            }
        }
    }

    /// Paths that prepared txns create as ephemerals of `session`, sorted.
    pub fn ephemerals_of(&self, session: i64) -> Vec<String> {
        let mut paths: Vec<String> = self
            .changes
            .iter()
            .filter(|c| c.meta.as_ref().and_then(NodeMeta::ephemeral_session) == Some(session))
            .map(|c| c.path.to_string())
            .collect();
        paths.sort_unstable();
        paths
    }

    /// Whether nothing is outstanding.
    pub fn is_empty(&self) -> bool {
        self.changes.is_empty()
    }
}
