//! The changes of the one txn being prepared, by path, so a multi's later
//! sub-ops see its earlier ones.

use super::pending::NodeMeta;
use std::collections::BTreeMap;
use std::sync::Arc;
use zkd_storage::data_tree::QuotaUsage;

/// Past this many paths a txn's changes move from the list to a map.
const FEW: usize = 8;

/// Per path the node as this txn leaves it (`None`: deleted). Almost every
/// txn changes one or two paths, so they live in a short list: a
/// `BTreeMap`'s first node is 1.2 KB, and allocating one per create cost
/// more than a tenth of a create's CPU (issue 15). A large multi moves to a
/// map, so its lookups stay logarithmic. Paths are kept as the `Arc<str>`
/// the pending changes key by, so recording them copies none.
#[derive(Debug, Default)]
pub struct TxnChanges {
    few: Vec<(Arc<str>, Option<NodeMeta>)>,
    many: BTreeMap<Arc<str>, Option<NodeMeta>>,
    /// Quota usage as this txn leaves it, per path with a quota.
    quota_usage: Vec<(String, QuotaUsage)>,
}

impl TxnChanges {
    /// The node at `path` as this txn leaves it, if the txn touched it.
    pub fn get(&self, path: &str) -> Option<&Option<NodeMeta>> {
        if self.many.is_empty() {
            self.few.iter().find(|(p, _)| **p == *path).map(|(_, m)| m)
        } else {
            self.many.get(path)
        }
    }

    /// Records the node at `path` as this txn leaves it.
    pub fn insert(&mut self, path: Arc<str>, meta: Option<NodeMeta>) {
        if !self.many.is_empty() {
            self.many.insert(path, meta);
        } else if let Some(entry) = self.few.iter_mut().find(|(p, _)| *p == path) {
            entry.1 = meta;
        } else if self.few.len() < FEW {
            self.few.push((path, meta));
        } else {
            self.many.extend(self.few.drain(..));
            self.many.insert(path, meta);
        }
    }

    /// The usage of the quota on `root` as this txn leaves it, if it changed it.
    pub fn quota_usage(&self, root: &str) -> Option<QuotaUsage> {
        let entry = self.quota_usage.iter().find(|(r, _)| r == root);
        entry.map(|(_, usage)| *usage)
    }

    /// Records the usage of the quota on `root` as this txn leaves it.
    pub fn set_quota_usage(&mut self, root: &str, usage: QuotaUsage) {
        match self.quota_usage.iter_mut().find(|(r, _)| r == root) {
            Some(entry) => entry.1 = usage,
            None => self.quota_usage.push((root.to_owned(), usage)),
        }
    }

    /// Takes the quota usages this txn changed.
    pub fn take_quota_usage(&mut self) -> impl Iterator<Item = (String, QuotaUsage)> {
        std::mem::take(&mut self.quota_usage).into_iter()
    }

    /// Forgets every change (a multi that failed records none).
    pub fn clear(&mut self) {
        self.few.clear();
        self.many.clear();
        self.quota_usage.clear();
    }

    /// Every change, each path once.
    pub fn into_changes(self) -> impl Iterator<Item = (Arc<str>, Option<NodeMeta>)> {
        self.few.into_iter().chain(self.many)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zkd_protocol::records::StatPersisted;

    fn meta(version: i32) -> Option<NodeMeta> {
        Some(NodeMeta {
            stat: StatPersisted {
                version,
                ..StatPersisted::default()
            },
            num_children: 0,
            acl: Arc::new(Vec::new()),
            data_len: 0,
        })
    }

    #[test]
    fn the_last_change_of_a_path_wins_in_the_list_and_in_the_map() {
        let mut changes = TxnChanges::default();
        for round in 0..2 {
            for i in 0..20 {
                changes.insert(format!("/n{i}").into(), meta(round));
            }
            changes.insert("/gone".into(), None);
        }
        for i in 0..20 {
            assert_eq!(changes.get(&format!("/n{i}")), Some(&meta(1)));
        }
        assert_eq!(changes.get("/gone"), Some(&None));
        assert_eq!(changes.get("/never"), None);
        let all: Vec<_> = changes.into_changes().collect();
        assert_eq!(all.len(), 21, "each path once");
    }

    #[test]
    fn a_short_list_is_searched_and_cleared() {
        let mut changes = TxnChanges::default();
        changes.insert("/a".into(), meta(1));
        changes.insert("/a".into(), meta(2));
        changes.insert("/b".into(), None);
        assert_eq!(changes.get("/a"), Some(&meta(2)));
        assert_eq!(changes.get("/b"), Some(&None));
        changes.clear();
        assert_eq!(changes.get("/a"), None);
        assert_eq!(changes.into_changes().count(), 0);
    }
}
