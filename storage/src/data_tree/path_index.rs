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
//!
//! A snapshot's load indexes its nodes a table at a time ([`Unindexed`]):
//! in the image's order each insert went to a table picked at random, a
//! cache miss or two each (about 250 ns a node, over half of a load).

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

    /// Indexes every id of `unindexed`, one table after the other, so that
    /// each table stays in cache while its ids go in. `same` tells whether
    /// two ids have one path; `rehash` gives an indexed id's hash. Stops at
    /// the first id whose path is indexed already and returns it (the
    /// index then holds some of the ids).
    pub fn insert_all(
        &mut self,
        unindexed: Unindexed,
        same: impl Fn(NodeId, NodeId) -> bool,
        rehash: impl Fn(&NodeId) -> u32,
    ) -> Result<(), NodeId> {
        let (grouped, ends) = unindexed.by_table();
        let mut start = 0;
        for (table, end) in self.shards.iter_mut().zip(ends) {
            for &(hash, id) in &grouped[start..end] {
                let hash = spread(hash);
                match table.entry(
                    hash,
                    |other| same(*other, id),
                    |other| spread(rehash(other)),
                ) {
                    Entry::Occupied(_) => return Err(id),
                    Entry::Vacant(slot) => {
                        slot.insert(id);
                    }
                }
            }
            start = end;
        }
        Ok(())
    }

    /// Forgets every id.
    pub fn clear(&mut self) {
        self.shards.iter_mut().for_each(HashTable::clear);
    }

    /// How many ids the index holds.
    pub fn len(&self) -> usize {
        self.shards.iter().map(HashTable::len).sum()
    }
}

/// Ids put in a slab but not yet in its index, with their path hashes, in
/// one buffer (large enough to be mapped on its own and returned whole when
/// freed, where 256 small ones would leave a hole in the heap).
#[derive(Debug)]
pub(super) struct Unindexed {
    entries: Vec<(u32, NodeId)>,
}

impl Unindexed {
    /// Room for about `expected` ids.
    pub fn with_capacity(expected: usize) -> Unindexed {
        Unindexed {
            entries: Vec::with_capacity(expected),
        }
    }

    /// Adds `id`, whose path hashes to `hash`.
    pub fn push(&mut self, hash: u32, id: NodeId) {
        self.entries.push((hash, id));
    }

    /// The entries grouped by table (a counting sort, keeping their order
    /// within a table), and where each table's group ends.
    fn by_table(self) -> (Vec<(u32, NodeId)>, [usize; SHARDS]) {
        let table = |hash: u32| shard(spread(hash));
        let mut ends = [0usize; SHARDS];
        for &(hash, _) in &self.entries {
            ends[table(hash)] += 1;
        }
        let mut next = [0usize; SHARDS];
        let mut total = 0;
        for (next, end) in next.iter_mut().zip(ends.iter_mut()) {
            *next = total;
            total += *end;
            *end = total;
        }
        let Some(&first) = self.entries.first() else {
            return (Vec::new(), ends);
        };
        let mut grouped = vec![first; self.entries.len()];
        for entry in self.entries {
            let at = &mut next[table(entry.0)];
            grouped[*at] = entry;
            *at += 1;
        }
        (grouped, ends)
    }
}
