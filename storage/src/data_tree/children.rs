//! The children of one znode: node ids in name order.
//!
//! Ids are 4 bytes where a shared path was 16, and the names they are
//! ordered by are read from the nodes themselves in the [`NodeTable`]. The
//! ids sit in sorted chunks of at most [`CHUNK`]: a search is a binary
//! search over the chunks' last names and then within one chunk, and an
//! insert moves at most one chunk's ids, however many children there are.

use super::node_table::{NodeId, NodeTable};
use super::DataNode;
use std::cmp::Ordering;

/// A chunk is split in two past this many ids.
const CHUNK: usize = 512;

/// A node's children; a leaf (most nodes) holds no allocation at all.
// Boxed: 8 bytes in every node; only parents pay for the chunks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ChildSet(Option<Box<Chunks>>);

#[derive(Clone, Debug, PartialEq, Eq)]
struct Chunks {
    len: usize,
    /// Never empty, and no chunk in it is empty.
    chunks: Vec<Vec<NodeId>>,
}

/// The name of the live node `id` as bytes, which order as the string
/// does (the empty name if it is gone, which a consistent tree never asks).
fn name_of(table: &NodeTable, id: NodeId) -> &[u8] {
    let path = table.node(id).map_or(&[][..], DataNode::path_bytes);
    let slash = path.iter().rposition(|&b| b == b'/');
    &path[slash.map_or(0, |i| i + 1)..]
}

impl ChildSet {
    /// How many children there are.
    pub fn len(&self) -> usize {
        self.0.as_ref().map_or(0, |c| c.len)
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_none()
    }

    /// The children's ids, in name order.
    pub(super) fn ids(&self) -> impl DoubleEndedIterator<Item = NodeId> + '_ {
        self.0
            .iter()
            .flat_map(|c| c.chunks.iter().flatten().copied())
    }

    /// Adds `id`, a node already in `table` whose parent this set belongs to.
    pub(super) fn insert(&mut self, id: NodeId, table: &NodeTable) {
        let name = name_of(table, id);
        let Some(set) = &mut self.0 else {
            self.0 = Some(Box::new(Chunks {
                len: 1,
                chunks: vec![vec![id]],
            }));
            return;
        };
        let (c, found) = set.search(name, table);
        let Err(at) = found else {
            return;
        };
        let chunk = &mut set.chunks[c];
        chunk.insert(at, id);
        set.len += 1;
        if chunk.len() > CHUNK {
            let tail = chunk.split_off(chunk.len() / 2);
            set.chunks.insert(c + 1, tail);
        }
    }

    /// Adds many children at once, given in name order (as an image lists
    /// them): an empty set takes them in whole chunks, without a search each.
    pub(super) fn extend(&mut self, mut ids: Vec<NodeId>, table: &NodeTable) {
        if self.0.is_some() || !is_sorted(&ids, table) {
            ids.into_iter().for_each(|id| self.insert(id, table));
            return;
        }
        ids.dedup();
        if ids.is_empty() {
            return;
        }
        self.0 = Some(Box::new(Chunks {
            len: ids.len(),
            chunks: ids.chunks(CHUNK).map(<[NodeId]>::to_vec).collect(),
        }));
    }

    /// Removes the child named `name` (still in `table`); frees the set once it is empty.
    pub(super) fn remove(&mut self, name: &str, table: &NodeTable) {
        let Some(set) = &mut self.0 else {
            return;
        };
        let (c, found) = set.search(name.as_bytes(), table);
        let Ok(at) = found else {
            return;
        };
        set.chunks[c].remove(at);
        set.len -= 1;
        if set.chunks[c].is_empty() {
            set.chunks.remove(c);
        }
        if set.len == 0 {
            self.0 = None;
        }
    }

    /// The children named after `after` (all of them for `None`), in order,
    /// so a walk can resume where it stopped however the set changed since.
    pub(super) fn after<'a>(
        &'a self,
        after: Option<&str>,
        table: &NodeTable,
    ) -> impl Iterator<Item = NodeId> + 'a {
        let (c, at) = match (&self.0, after) {
            (Some(set), Some(name)) => match set.search(name.as_bytes(), table) {
                (c, Ok(at)) => (c, at + 1),
                (c, Err(at)) => (c, at),
            },
            _ => (0, 0),
        };
        let chunks = self.0.as_ref().map_or(&[][..], |set| &set.chunks[c..]);
        chunks
            .iter()
            .enumerate()
            .flat_map(move |(i, chunk)| chunk[if i == 0 { at } else { 0 }..].iter().copied())
    }
}

impl Chunks {
    /// The chunk `name` belongs in, and where in it: `Ok` where it is,
    /// `Err` where it would go.
    fn search(&self, name: &[u8], table: &NodeTable) -> (usize, Result<usize, usize>) {
        let before = |chunk: &Vec<NodeId>| {
            chunk
                .last()
                .is_some_and(|&last| name_of(table, last) < name)
        };
        let c = self
            .chunks
            .partition_point(before)
            .min(self.chunks.len() - 1);
        let found = self.chunks[c].binary_search_by(|&id| name_of(table, id).cmp(name));
        (c, found)
    }
}

/// Whether `ids` are in name order (equal names, a repeated id, allowed).
fn is_sorted(ids: &[NodeId], table: &NodeTable) -> bool {
    ids.windows(2)
        .all(|w| name_of(table, w[0]).cmp(name_of(table, w[1])) != Ordering::Greater)
}
