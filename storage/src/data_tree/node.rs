//! One znode.

use super::children::ChildSet;
use super::digest;
use std::sync::Arc;
use zkd_protocol::records::{Acl, Stat, StatPersisted};

/// ephemeralOwner marking a container node.
pub const CONTAINER_OWNER: i64 = i64::MIN;

/// ephemeralOwner for a TTL node: `0xff` in the top byte, the TTL (ms) in the low 40 bits.
pub fn ttl_owner(ttl_ms: i64) -> i64 {
    (0xffu64 << 56 | (ttl_ms as u64 & ((1 << 40) - 1))) as i64
}

/// The TTL of a node from its ephemeralOwner, if it is a TTL node.
pub fn ttl_of(owner: i64) -> Option<i64> {
    let raw = owner as u64;
    (raw >> 56 == 0xff && (raw >> 40) & 0xffff == 0).then_some((raw & ((1 << 40) - 1)) as i64)
}

/// The largest TTL a TTL node may carry (2^40 - 1 ms).
pub const MAX_TTL_MS: i64 = (1 << 40) - 1;

/// A znode: path, data, ACL, persisted stat and children.
///
/// Kept small, as a tree holds millions: the path and the data share one
/// exact-size allocation (the data is a copy, not a slice that could pin the
/// request buffer it came in), and a leaf's child set allocates nothing.
#[derive(Clone, Debug)]
pub struct DataNode {
    /// The path's bytes, then the data's.
    bytes: Box<[u8]>,
    /// The path's length, and in the top bit [`NULL_DATA`] (one word, so that
    /// `path_hash` fits in what was padding).
    path_len: u32,
    /// The path's hash in its table's index ([`NodeTable`](super::node_table::NodeTable)
    /// sets it), kept so that a growing index rehashes without reading paths.
    pub(super) path_hash: u32,
    /// The ACL, shared between nodes that were given the same list.
    pub acl: Arc<Vec<Acl>>,
    /// The stat as stored.
    pub stat: StatPersisted,
    /// The children.
    pub children: ChildSet,
    /// [`digest::content_hash`] of this node's path, data and ACL, kept so
    /// that a change to the stat alone (a parent's pzxid or cversion) does
    /// not re-hash the data. Whoever changes `data` or `acl` refreshes it.
    content_hash: u64,
}

/// The bit of `path_len` that marks null data, which clients tell from empty data.
const NULL_DATA: u32 = 1 << 31;

/// Equal nodes have equal paths, data, ACLs, stats and children; the path's
/// hash depends on the table's random keys, not on the node.
impl PartialEq for DataNode {
    fn eq(&self, other: &DataNode) -> bool {
        self.bytes == other.bytes
            && self.path_len == other.path_len
            && self.acl == other.acl
            && self.stat == other.stat
            && self.children == other.children
            && self.content_hash == other.content_hash
    }
}

impl Eq for DataNode {}

impl DataNode {
    /// A childless node at `path`, its content hash computed.
    pub(super) fn new(
        path: &str,
        data: Option<&[u8]>,
        acl: Arc<Vec<Acl>>,
        stat: StatPersisted,
    ) -> DataNode {
        let mut node = DataNode {
            bytes: Box::default(),
            path_len: u32::try_from(path.len())
                .ok()
                .filter(|len| len & NULL_DATA == 0)
                .expect("a path shorter than 2 GiB"),
            path_hash: 0,
            acl,
            stat,
            children: ChildSet::default(),
            content_hash: 0,
        };
        node.fill(path.as_bytes(), data);
        node
    }

    /// The path.
    pub fn path(&self) -> &str {
        std::str::from_utf8(self.path_bytes()).expect("a node's path was copied from a str")
    }

    /// The path's bytes: what lookups compare and hash, with no UTF-8 check.
    pub(super) fn path_bytes(&self) -> &[u8] {
        &self.bytes[..self.path_end()]
    }

    fn path_end(&self) -> usize {
        (self.path_len & !NULL_DATA) as usize
    }

    /// The data; `None` and empty stay apart, as clients can tell.
    pub fn data(&self) -> Option<&[u8]> {
        (self.path_len & NULL_DATA == 0).then(|| &self.bytes[self.path_end()..])
    }

    /// Replaces the data, and the content hash with it.
    pub(super) fn set_data(&mut self, data: Option<&[u8]>) {
        let old = std::mem::take(&mut self.bytes);
        self.fill(&old[..self.path_end()], data);
    }

    /// Replaces the ACL, and the content hash with it.
    pub(super) fn set_acl(&mut self, acl: Arc<Vec<Acl>>) {
        self.acl = acl;
        self.content_hash = digest::content_hash(self.path_bytes(), self.data(), &self.acl);
    }

    fn fill(&mut self, path: &[u8], data: Option<&[u8]>) {
        let data_len = data.map_or(0, <[u8]>::len);
        let mut bytes = Vec::with_capacity(path.len() + data_len);
        bytes.extend_from_slice(path);
        bytes.extend_from_slice(data.unwrap_or_default());
        self.bytes = bytes.into_boxed_slice();
        self.path_len = match data {
            Some(_) => self.path_len & !NULL_DATA,
            None => self.path_len | NULL_DATA,
        };
        self.content_hash = digest::content_hash(path, data, &self.acl);
    }

    /// This node's term in the tree digest (cheap: the content hash is
    /// cached); none for `/zookeeper/config` (see [`digest::counts`]).
    pub(super) fn digest_term(&self) -> u64 {
        match digest::counts(self.path_bytes()) {
            true => digest::node_hash(self.content_hash, &self.stat),
            false => 0,
        }
    }

    /// The stat a client sees (`DataNode.copyStat`).
    pub fn stat(&self) -> Stat {
        let s = &self.stat;
        let num_children = self.children.len() as i32;
        Stat {
            czxid: s.czxid,
            mzxid: s.mzxid,
            ctime: s.ctime,
            mtime: s.mtime,
            version: s.version,
            // The persisted cversion counts creations; clients see creations plus deletions.
            cversion: s.cversion.wrapping_mul(2).wrapping_sub(num_children),
            aversion: s.aversion,
            ephemeral_owner: self.ephemeral_session().unwrap_or(0),
            data_length: self.data().map_or(0, |d| d.len() as i32),
            num_children,
            pzxid: s.pzxid,
        }
    }

    /// The owning session if this is an ordinary ephemeral.
    pub fn ephemeral_session(&self) -> Option<i64> {
        let owner = self.stat.ephemeral_owner;
        (owner != 0 && owner != CONTAINER_OWNER && ttl_of(owner).is_none()).then_some(owner)
    }

    /// Whether this node is a container.
    pub fn is_container(&self) -> bool {
        self.stat.ephemeral_owner == CONTAINER_OWNER
    }

    /// The TTL in ms if this is a TTL node.
    pub fn ttl(&self) -> Option<i64> {
        ttl_of(self.stat.ephemeral_owner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tree holds millions of nodes inline in its slab: keep them small.
    #[test]
    fn a_node_is_112_bytes() {
        assert_eq!(std::mem::size_of::<Option<DataNode>>(), 112);
    }

    #[test]
    fn ttl_owner_round_trips() {
        assert_eq!(ttl_of(ttl_owner(5000)), Some(5000));
        assert_eq!(ttl_of(ttl_owner(MAX_TTL_MS)), Some(MAX_TTL_MS));
        assert_eq!(ttl_of(0x0100_0007_85ae_0000), None);
        assert_eq!(ttl_of(CONTAINER_OWNER), None);
    }
}
