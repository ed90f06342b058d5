//! The path index of a [`NodeTable`](super::node_table::NodeTable): node ids
//! by the hash of their path, in many small hash tables rather than one.
//!
//! A hash table grows all at once, rehashing every entry, and rehashing a
//! node means reading its path from the slab: a cache miss each. One table
//! stalled the node loop for 15 ms when a tree grew past 115k znodes, 30 ms
//! past 229k and 60 ms past 459k, every write waiting behind it (issue 15).
//! Split 256 ways, each table grows on its own, at a 256th of that cost,
//! and the whole index takes as much memory as one table. Each node now
//! keeps its 32-bit path hash besides (in what was padding), so a growing
//! table reads the slab but no path, and hashes nothing.

use super::node_table::NodeId;
use hashbrown::hash_table::{Entry, OccupiedEntry};
use hashbrown::HashTable;

/// How many tables the index is split into.
const SHARDS: usize = 256;

/// Node ids by path hash.
#[derive(Clone, Debug)]
pub(super) struct PathIndex {
    shards: Box<[HashTable<NodeId>]>,
}

impl Default for PathIndex {
    fn default() -> Self {
        PathIndex {
            shards: (0..SHARDS).map(|_| HashTable::new()).collect(),
        }
    }
}

/// A node's 32-bit path hash spread over the 64 bits hashbrown takes (a
/// bucket from the low bits, a tag from the top seven): multiplied by an odd
/// constant, every bit of the product above bit 31 depends on all 32.
fn spread(hash: u32) -> u64 {
    u64::from(hash).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// The table a spread hash belongs to. Bits 32-39: hashbrown's bucket and
/// tag bits stay random within each table.
fn shard(spread: u64) -> usize {
    (spread >> 32) as usize % SHARDS
}

impl PathIndex {
    /// The id with hash `hash` that `is_it` accepts.
    pub fn find(&self, hash: u32, is_it: impl FnMut(&NodeId) -> bool) -> Option<NodeId> {
        let hash = spread(hash);
        self.shards[shard(hash)].find(hash, is_it).copied()
    }

    /// The slot for `hash` that `is_it` accepts, taken or free; `rehash`
    /// gives the hash of an id already in the index, should its table grow.
    pub fn entry(
        &mut self,
        hash: u32,
        is_it: impl FnMut(&NodeId) -> bool,
        rehash: impl Fn(&NodeId) -> u32,
    ) -> Entry<'_, NodeId> {
        let hash = spread(hash);
        self.shards[shard(hash)].entry(hash, is_it, |id| spread(rehash(id)))
    }

    /// The taken slot for `hash` that `is_it` accepts.
    pub fn find_entry(
        &mut self,
        hash: u32,
        is_it: impl FnMut(&NodeId) -> bool,
    ) -> Option<OccupiedEntry<'_, NodeId>> {
        let hash = spread(hash);
        self.shards[shard(hash)].find_entry(hash, is_it).ok()
    }

    /// Makes room for about `more` ids, spread over the tables, with
    /// slack for the unevenness of the spread.
    pub fn reserve(&mut self, more: usize, rehash: impl Fn(&NodeId) -> u32) {
        let each = more.div_ceil(SHARDS);
        let each = each + each / 8 + each.min(8);
        for table in self.shards.iter_mut() {
            table.reserve(each, |id| spread(rehash(id)));
        }
    }

    /// How many ids the index holds.
    pub fn len(&self) -> usize {
        self.shards.iter().map(HashTable::len).sum()
    }
}
