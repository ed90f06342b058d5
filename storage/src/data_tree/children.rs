//! The children of one znode: node ids in id order.
//!
//! ZooKeeper lists children in the order of a Java `HashSet`, which no
//! client may rely on; zkd lists them in the order of their ids in the
//! [`NodeTable`](super::node_table), which is creation order until deleted
//! slots are reused. Ordering by id, not name, keeps every search inside the
//! set's own integers: a search by name read a node and its path from the
//! table at each of ~17 probes of a wide parent, two cache misses each, and
//! was a tenth of an ensemble's CPU per create (issue 15). The order is all
//! a snapshot walk needs to resume where it stopped: an id keeps its place
//! while its node lives.
//!
//! The ids sit in sorted chunks of at most [`CHUNK`]: a search is a binary
//! search over the chunks' last ids and then within one chunk, and an insert
//! moves at most one chunk's ids, however many children there are.

use super::node_table::NodeId;

/// A chunk holds at most this many ids: one more splits it in two, or (past
/// the last) starts a new one.
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

impl ChildSet {
    /// How many children there are.
    pub fn len(&self) -> usize {
        self.0.as_ref().map_or(0, |c| c.len)
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_none()
    }

    /// The children's ids, in order.
    pub(super) fn ids(&self) -> impl DoubleEndedIterator<Item = NodeId> + '_ {
        self.0
            .iter()
            .flat_map(|c| c.chunks.iter().flatten().copied())
    }

    /// Adds `id` (nothing if it is there already).
    pub(super) fn insert(&mut self, id: NodeId) {
        let Some(set) = &mut self.0 else {
            self.0 = Some(Box::new(Chunks {
                len: 1,
                chunks: vec![vec![id]],
            }));
            return;
        };
        let (c, found) = set.search(id);
        let Err(at) = found else {
            return;
        };
        set.len += 1;
        let last = c + 1 == set.chunks.len();
        let chunk = &mut set.chunks[c];
        if chunk.len() < CHUNK {
            chunk.insert(at, id);
        } else if at == CHUNK && last {
            // Past the end (the usual create): a chunk of its own, so that
            // children created in order fill whole chunks.
            set.chunks.push(vec![id]);
        } else {
            // Split before the chunk grows past CHUNK: grown to twice that,
            // a head never refilled held 4 KiB for 1 KiB of ids.
            let tail = chunk.split_off(CHUNK / 2);
            set.chunks.insert(c + 1, tail);
            match at.checked_sub(CHUNK / 2) {
                Some(in_tail) if in_tail > 0 => set.chunks[c + 1].insert(in_tail, id),
                _ => set.chunks[c].insert(at, id),
            }
        }
    }

    /// Ids the chunks have room for, whether used or not (their memory).
    #[cfg(test)]
    pub(super) fn capacity(&self) -> usize {
        self.0
            .as_ref()
            .map_or(0, |set| set.chunks.iter().map(Vec::capacity).sum())
    }

    /// Adds many children at once: an empty set takes ids given in rising
    /// order (as an image's load assigns them) in whole chunks, without a
    /// search each.
    pub(super) fn extend(&mut self, ids: Vec<NodeId>) {
        if self.0.is_some() || !ids.windows(2).all(|w| w[0] < w[1]) {
            ids.into_iter().for_each(|id| self.insert(id));
            return;
        }
        if ids.is_empty() {
            return;
        }
        self.0 = Some(Box::new(Chunks {
            len: ids.len(),
            chunks: ids.chunks(CHUNK).map(<[NodeId]>::to_vec).collect(),
        }));
    }

    /// Removes `id`; frees the set once it is empty.
    pub(super) fn remove(&mut self, id: NodeId) {
        let Some(set) = &mut self.0 else {
            return;
        };
        let (c, found) = set.search(id);
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

    /// The children after `after` (all of them for `None`), in order, so a
    /// walk can resume where it stopped however the set changed since.
    pub(super) fn after(&self, after: Option<NodeId>) -> impl Iterator<Item = NodeId> + '_ {
        let (c, at) = match (&self.0, after) {
            (Some(set), Some(id)) => match set.search(id) {
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
    /// The chunk `id` belongs in, and where in it: `Ok` where it is, `Err`
    /// where it would go.
    fn search(&self, id: NodeId) -> (usize, Result<usize, usize>) {
        let c = self
            .chunks
            .partition_point(|chunk| chunk.last().is_some_and(|&last| last < id))
            .min(self.chunks.len() - 1);
        (c, self.chunks[c].binary_search(&id))
    }
}
