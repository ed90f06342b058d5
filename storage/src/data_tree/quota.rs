//! Quotas, kept as ZooKeeper's `DataTree` keeps them.
//!
//! A path `P` has a quota while `/zookeeper/quota/P/zookeeper_limits`
//! exists; its data holds the limits (`StatsTrack` text). The tree counts the
//! nodes and data bytes of `P`'s subtree and writes them into
//! `/zookeeper/quota/P/zookeeper_stats` on every change, in place: the stats
//! node's stat does not move, as in ZooKeeper. Counting is part of `apply`,
//! so every member writes the same text and the digests agree.
//!
//! Unlike ZooKeeper, the count is kept exact whatever the history, so a
//! member that loads a snapshot and one that applied every txn hold the same
//! text: a node belongs to the deepest path with a quota above it (as
//! ZooKeeper counts live), adding or removing a quota recounts it and the
//! quota around it, and a client's write to a stats node is replaced by the
//! count. A stats node whose path has no quota (its limits node deleted
//! first, as `delquota` may) reads `count=0,bytes=0`. Paths under
//! `/zookeeper` and `/` itself never have a quota.

use super::{DataNode, DataTree};
use crate::path;
use std::collections::BTreeMap;

/// Where quotas are kept.
pub const QUOTA_DIR: &str = "/zookeeper/quota";
/// The name of the node that holds a path's limits.
pub const LIMITS_NODE: &str = "zookeeper_limits";
/// The name of the node that holds a path's usage.
pub const STATS_NODE: &str = "zookeeper_stats";

/// A subtree's usage: its nodes (its top included) and their data bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QuotaUsage {
    /// Nodes.
    pub count: i64,
    /// Bytes of data.
    pub bytes: i64,
}

impl QuotaUsage {
    /// The text of a `zookeeper_stats` node (`StatsTrack` with count and bytes).
    pub fn to_text(self) -> String {
        format!("count={},bytes={}", self.count, self.bytes)
    }
}

/// The limits a `zookeeper_limits` node sets; -1 means none.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QuotaLimits {
    /// Soft limit on nodes (`setquota -n`): only logged.
    pub count: i64,
    /// Soft limit on bytes (`setquota -b`): only logged.
    pub bytes: i64,
    /// Hard limit on nodes (`setquota -N`).
    pub count_hard: i64,
    /// Hard limit on bytes (`setquota -B`).
    pub bytes_hard: i64,
}

impl Default for QuotaLimits {
    fn default() -> Self {
        QuotaLimits {
            count: -1,
            bytes: -1,
            count_hard: -1,
            bytes_hard: -1,
        }
    }
}

/// A limit a write would pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QuotaExcess {
    /// Nodes (true) or bytes.
    pub of_count: bool,
    /// What the write would bring the usage to.
    pub would_be: i64,
    /// The limit.
    pub limit: i64,
    /// Whether the limit is hard, so the write is refused.
    pub hard: bool,
}

impl QuotaLimits {
    /// Reads `StatsTrack` text: `key=value` pairs split by runs of `,` and
    /// `;`, an empty value meaning -1, so zkCli's `count=-1,bytes=-1=;...`
    /// (the stray `=` keeps 3.4 parsers reading) parses. Pairs that do not
    /// parse are skipped, where ZooKeeper would throw.
    pub fn parse(data: &[u8]) -> QuotaLimits {
        let text = String::from_utf8_lossy(data);
        let mut limits = QuotaLimits::default();
        for pair in text.split([',', ';']).filter(|p| !p.is_empty()) {
            let mut parts = pair.split('=');
            let (Some(key), Some(value)) = (parts.next(), parts.next()) else {
                continue;
            };
            let Ok(value) = (if value.is_empty() {
                Ok(-1)
            } else {
                value.parse()
            }) else {
                continue;
            };
            match key {
                "count" => limits.count = value,
                "bytes" => limits.bytes = value,
                "countHardLimit" => limits.count_hard = value,
                "byteHardLimit" => limits.bytes_hard = value,
                _ => {}
            }
        }
        limits
    }

    /// The first limit that a write adding `count` nodes and `bytes` bytes to
    /// `usage` passes, by ZooKeeper's rule (`ZooKeeperServer.checkQuota`): a
    /// side the write does not change is not checked, and a hard limit, when
    /// set, replaces the soft one.
    pub fn excess(&self, usage: QuotaUsage, count: i64, bytes: i64) -> Option<QuotaExcess> {
        let side = |of_count: bool, now: i64, change: i64, soft: i64, hard: i64| {
            if change == 0 || (soft < 0 && hard < 0) {
                return None;
            }
            let limit = if hard > -1 { hard } else { soft };
            let would_be = now.saturating_add(change);
            (would_be > limit).then_some(QuotaExcess {
                of_count,
                would_be,
                limit,
                hard: hard > -1,
            })
        };
        side(true, usage.count, count, self.count, self.count_hard)
            .or_else(|| side(false, usage.bytes, bytes, self.bytes, self.bytes_hard))
    }
}

/// The quota that governs a path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Quota<'p> {
    /// The path with the quota: the governed path or a parent of it.
    pub path: &'p str,
    /// Its subtree's usage.
    pub usage: QuotaUsage,
    /// Its limits.
    pub limits: QuotaLimits,
}

/// The paths with a quota, their limits and usage: derived from the tree
/// (ZooKeeper's `pTrie`), rebuilt when a snapshot is loaded.
#[derive(Clone, Debug, Default)]
pub(super) struct QuotaIndex {
    roots: BTreeMap<String, (QuotaUsage, QuotaLimits)>,
}

impl QuotaIndex {
    /// The length of the deepest path with a quota that is `p` or above it.
    fn owner_len(&self, p: &str) -> Option<usize> {
        if self.roots.is_empty() || !may_have_quota(p) {
            return None;
        }
        let mut end = p.len();
        loop {
            if self.roots.contains_key(&p[..end]) {
                return Some(end);
            }
            end = p[..end].rfind('/').filter(|&i| i > 0)?;
        }
    }
}

/// A node of the quota bookkeeping, with the path it is for.
enum Bookkeeping<'p> {
    Limits(&'p str),
    Stats(&'p str),
}

fn bookkeeping(p: &str) -> Option<Bookkeeping<'_>> {
    let (root, name) = p.strip_prefix(QUOTA_DIR)?.rsplit_once('/')?;
    if !may_have_quota(root) {
        return None;
    }
    match name {
        LIMITS_NODE => Some(Bookkeeping::Limits(root)),
        STATS_NODE => Some(Bookkeeping::Stats(root)),
        _ => None,
    }
}

/// Whether `p` can have a quota: ZooKeeper keeps none on `/`, and under
/// `/zookeeper` the bookkeeping would count its own writes.
fn may_have_quota(p: &str) -> bool {
    p.len() > 1 && p.starts_with('/') && p != "/zookeeper" && !p.starts_with("/zookeeper/")
}

fn data_len(data: Option<&[u8]>) -> i64 {
    data.map_or(0, <[u8]>::len) as i64
}

impl DataTree {
    /// The quota that governs `p`, if any.
    pub fn quota_of<'p>(&self, p: &'p str) -> Option<Quota<'p>> {
        let len = self.quotas.owner_len(p)?;
        let (usage, limits) = self.quotas.roots.get(&p[..len])?;
        Some(Quota {
            path: &p[..len],
            usage: *usage,
            limits: *limits,
        })
    }

    /// Every path with a quota, in path order, with its usage and limits.
    pub fn quotas(&self) -> impl Iterator<Item = (&str, QuotaUsage, QuotaLimits)> + '_ {
        let roots = self.quotas.roots.iter();
        roots.map(|(p, (usage, limits))| (p.as_str(), *usage, *limits))
    }

    /// Bookkeeping for a node created at `p`.
    pub(super) fn quota_created(&mut self, p: &str, data: Option<&[u8]>) {
        match bookkeeping(p) {
            Some(Bookkeeping::Limits(root)) => {
                let limits = QuotaLimits::parse(data.unwrap_or_default());
                let entry = (QuotaUsage::default(), limits);
                self.quotas.roots.insert(root.to_owned(), entry);
                self.recount(root);
                self.recount_around(root);
            }
            Some(Bookkeeping::Stats(root)) => self.write_stats(root),
            None => self.charge(p, 1, data_len(data)),
        }
    }

    /// Bookkeeping for `node`, just deleted.
    pub(super) fn quota_deleted(&mut self, node: &DataNode) {
        match bookkeeping(node.path()) {
            Some(Bookkeeping::Limits(root)) => {
                self.quotas.roots.remove(root);
                self.write_stats(root);
                self.recount_around(root);
            }
            Some(Bookkeeping::Stats(_)) => {}
            None => self.charge(node.path(), -1, -data_len(node.data())),
        }
    }

    /// Bookkeeping for new data at `p`, which held `old_len` bytes.
    pub(super) fn quota_data_set(&mut self, p: &str, old_len: i64, data: Option<&[u8]>) {
        match bookkeeping(p) {
            Some(Bookkeeping::Limits(root)) => {
                if let Some((_, limits)) = self.quotas.roots.get_mut(root) {
                    *limits = QuotaLimits::parse(data.unwrap_or_default());
                }
            }
            Some(Bookkeeping::Stats(root)) => self.write_stats(root),
            None => self.charge(p, 0, data_len(data) - old_len),
        }
    }

    /// Finds every quota and counts it afresh (after loading a snapshot,
    /// whose stats nodes a fuzzy image may hold from any moment).
    pub(super) fn rebuild_quotas(&mut self) {
        let mut roots = BTreeMap::new();
        let mut stats = Vec::new();
        for (p, node) in self.preorder(QUOTA_DIR) {
            match bookkeeping(p) {
                Some(Bookkeeping::Limits(root)) => {
                    let limits = QuotaLimits::parse(node.data().unwrap_or_default());
                    roots.insert(root.to_owned(), (QuotaUsage::default(), limits));
                }
                Some(Bookkeeping::Stats(root)) => stats.push(root.to_owned()),
                None => {}
            }
        }
        self.quotas.roots = roots;
        for root in stats {
            self.write_stats(&root);
        }
        let roots: Vec<String> = self.quotas.roots.keys().cloned().collect();
        for root in roots {
            self.recount(&root);
        }
    }

    fn charge(&mut self, p: &str, count: i64, bytes: i64) {
        let Some(len) = self.quotas.owner_len(p) else {
            return;
        };
        let root = &p[..len];
        if let Some((usage, _)) = self.quotas.roots.get_mut(root) {
            usage.count += count;
            usage.bytes += bytes;
        }
        self.write_stats(root);
    }

    /// Recounts the quota above `root`, which gains or loses `root`'s subtree.
    fn recount_around(&mut self, root: &str) {
        if let Some(len) = self.quotas.owner_len(path::parent(root)) {
            self.recount(&root[..len]);
        }
    }

    /// Counts `root`'s subtree, less the subtrees of deeper quotas.
    fn recount(&mut self, root: &str) {
        let mut usage = QuotaUsage::default();
        let mut stack: Vec<&DataNode> = self.nodes.get(root).into_iter().collect();
        while let Some(node) = stack.pop() {
            usage.count += 1;
            usage.bytes += data_len(node.data());
            let children = node.children.ids().filter_map(|id| self.nodes.node(id));
            stack.extend(children.filter(|c| !self.quotas.roots.contains_key(c.path())));
        }
        if let Some((counted, _)) = self.quotas.roots.get_mut(root) {
            *counted = usage;
        }
        self.write_stats(root);
    }

    /// Writes `root`'s usage (none if it has no quota) into its stats node.
    fn write_stats(&mut self, root: &str) {
        let usage = self.quotas.roots.get(root).map(|(usage, _)| *usage);
        let text = usage.unwrap_or_default().to_text();
        let path = format!("{QUOTA_DIR}{root}/{STATS_NODE}");
        self.rewrite(&path, |node| node.set_data(Some(text.as_bytes())));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_parse_every_form_zkcli_writes() {
        let old = QuotaLimits::parse(b"count=10,bytes=-1");
        assert_eq!((old.count, old.bytes, old.count_hard), (10, -1, -1));
        let new = QuotaLimits::parse(b"count=-1,bytes=-1=;byteHardLimit=100;countHardLimit=5");
        assert_eq!(
            new,
            QuotaLimits {
                count: -1,
                bytes: -1,
                count_hard: 5,
                bytes_hard: 100
            }
        );
        let odd = QuotaLimits::parse(b"count=,bytes=x;;countHardLimit=3;junk");
        assert_eq!((odd.count, odd.bytes, odd.count_hard), (-1, -1, 3));
    }

    #[test]
    fn a_hard_limit_replaces_the_soft_one_and_unchanged_sides_pass() {
        let limits = QuotaLimits {
            count: 2,
            count_hard: 4,
            bytes: 10,
            ..QuotaLimits::default()
        };
        let usage = QuotaUsage {
            count: 4,
            bytes: 50,
        };
        let over = limits.excess(usage, 1, 0).unwrap();
        assert!(over.of_count && over.hard && over.would_be == 5 && over.limit == 4);
        assert_eq!(limits.excess(QuotaUsage { count: 3, bytes: 0 }, 1, 0), None);
        assert_eq!(limits.excess(usage, 0, 0), None, "a set of equal length");
        let soft = limits.excess(usage, 0, 1).unwrap();
        assert!(!soft.of_count && !soft.hard && soft.limit == 10);
    }

    #[test]
    fn only_paths_outside_zookeeper_have_quotas() {
        assert!(matches!(
            bookkeeping("/zookeeper/quota/a/b/zookeeper_limits"),
            Some(Bookkeeping::Limits("/a/b"))
        ));
        assert!(matches!(
            bookkeeping("/zookeeper/quota/a/zookeeper_stats"),
            Some(Bookkeeping::Stats("/a"))
        ));
        for p in [
            "/zookeeper/quota/zookeeper_limits",
            "/zookeeper/quota/zookeeper/zookeeper_limits",
            "/zookeeper/quotax/a/zookeeper_limits",
            "/zookeeper/quota/a/other",
        ] {
            assert!(bookkeeping(p).is_none(), "{p}");
        }
    }
}
