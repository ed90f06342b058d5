//! The tree's nodes: a slab of nodes addressed by id, indexed by path.
//!
//! Each node lives in one slot of a `Vec` and carries its own path, so the
//! path index holds a 4-byte id per node, not a key and a pointer, and a
//! child set holds ids, not shared path strings. A freed slot is reused by
//! the next node created. Against a map from shared paths to boxed nodes
//! this saved about a quarter of a tree's memory (issue 15).

use super::path_index::{PathIndex, Unindexed};
use super::DataNode;
use hashbrown::hash_table::Entry;

/// Where a node lives in its tree's [`NodeTable`]. Valid while that node
/// lives; a deleted node's id may be handed to the next node created.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) struct NodeId(u32);

/// The nodes of a tree, by id and by path.
#[derive(Clone, Debug, Default)]
pub(super) struct NodeTable {
    slots: Vec<Option<DataNode>>,
    /// Slots freed by deletes, reused first.
    free: Vec<NodeId>,
    index: PathIndex,
    /// aHash: several times SipHash's speed on paths, and keyed at random
    /// per process, so clients cannot pick colliding paths.
    hasher: ahash::RandomState,
}

impl NodeTable {
    /// Paths are hashed and compared as bytes: they are valid UTF-8
    /// already, and checking that again was a fifth of a snapshot's load.
    /// 32 bits, as each node keeps its own ([`DataNode::path_hash`]).
    fn hash(&self, path: &[u8]) -> u32 {
        self.hasher.hash_one(path) as u32
    }

    /// The id of the node at `path`.
    pub fn id(&self, path: &str) -> Option<NodeId> {
        self.id_of(path.as_bytes())
    }

    fn id_of(&self, path: &[u8]) -> Option<NodeId> {
        let slots = &self.slots;
        let is_path = |id: &NodeId| slot(slots, *id).is_some_and(|n| n.path_bytes() == path);
        self.index.find(self.hash(path), is_path)
    }

    /// The node at `path`.
    pub fn get(&self, path: &str) -> Option<&DataNode> {
        self.id(path).and_then(|id| self.node(id))
    }

    /// The node at `path`, to change. Its path must stay the same.
    pub fn get_mut(&mut self, path: &str) -> Option<&mut DataNode> {
        let id = self.id(path)?;
        self.node_mut(id)
    }

    /// Whether a node is at `path`.
    pub fn contains(&self, path: &str) -> bool {
        self.id(path).is_some()
    }

    /// The node with id `id`, if it lives.
    pub fn node(&self, id: NodeId) -> Option<&DataNode> {
        slot(&self.slots, id)
    }

    /// The node with id `id`, to change. Its path must stay the same.
    pub fn node_mut(&mut self, id: NodeId) -> Option<&mut DataNode> {
        self.slots.get_mut(id.0 as usize)?.as_mut()
    }

    /// Puts `node` at its path, replacing (and returning) a node already
    /// there, which keeps its id.
    pub fn insert(&mut self, mut node: DataNode) -> (NodeId, Option<DataNode>) {
        // One hash and one probe, whether the path is new or not.
        node.path_hash = self.hash(node.path_bytes());
        let vacant = match entry(&mut self.index, &self.slots, &node) {
            Entry::Occupied(taken) => {
                let id = *taken.get();
                return (id, self.slots[id.0 as usize].replace(node));
            }
            Entry::Vacant(vacant) => vacant,
        };
        let id = place(&mut self.slots, &mut self.free, node);
        vacant.insert(id);
        (id, None)
    }

    /// Puts `node` at its path if no node is there (one hash, one probe);
    /// otherwise leaves the table as it was and returns `None`.
    pub fn insert_new(&mut self, mut node: DataNode) -> Option<NodeId> {
        node.path_hash = self.hash(node.path_bytes());
        let Entry::Vacant(vacant) = entry(&mut self.index, &self.slots, &node) else {
            return None;
        };
        let id = place(&mut self.slots, &mut self.free, node);
        vacant.insert(id);
        Some(id)
    }

    /// Puts `node` in the slab but not in the index, and adds it to
    /// `unindexed`: a bulk load's nodes, indexed all at once by
    /// [`NodeTable::index_placed`]. Until then no lookup by path finds it.
    pub fn place_unindexed(&mut self, mut node: DataNode, unindexed: &mut Unindexed) -> NodeId {
        node.path_hash = self.hash(node.path_bytes());
        let hash = node.path_hash;
        let id = place(&mut self.slots, &mut self.free, node);
        unindexed.push(hash, id);
        id
    }

    /// Indexes the nodes [`NodeTable::place_unindexed`] put in the slab.
    /// `Err` if one has the path of a node indexed already: the index is
    /// then incomplete, and only [`NodeTable::take_all`] may follow.
    pub fn index_placed(&mut self, unindexed: Unindexed) -> Result<(), ()> {
        let slots = &self.slots;
        let path = |id: NodeId| slot(slots, id).map(DataNode::path_bytes);
        let same = |a: NodeId, b: NodeId| path(a) == path(b);
        self.index
            .insert_all(unindexed, same, |id| path_hash(slots, *id))
            .map_err(|_| ())
    }

    /// Takes every node out, in id order, leaving the table empty.
    pub fn take_all(&mut self) -> Vec<DataNode> {
        self.index.clear();
        self.free.clear();
        std::mem::take(&mut self.slots)
            .into_iter()
            .flatten()
            .collect()
    }

    /// Takes node `id` out of the table, freeing its id.
    pub fn take(&mut self, id: NodeId) -> Option<DataNode> {
        let hash = self.node(id)?.path_hash;
        let entry = self.index.find_entry(hash, |x| *x == id)?;
        entry.remove();
        self.free.push(id);
        self.slots[id.0 as usize].take()
    }

    /// Makes room for `more` nodes, so that many arrive without a rehash.
    pub fn reserve(&mut self, more: usize) {
        self.slots.reserve(more);
        let slots = &self.slots;
        self.index.reserve(more, |id| path_hash(slots, *id));
    }

    /// How many nodes there are.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// Every node, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = &DataNode> {
        self.slots.iter().flatten()
    }
}

/// The index's slot for `node`'s path (its hash set), taken or free.
fn entry<'a>(
    index: &'a mut PathIndex,
    slots: &[Option<DataNode>],
    node: &DataNode,
) -> Entry<'a, NodeId> {
    let path = node.path_bytes();
    let is_path = |id: &NodeId| slot(slots, *id).is_some_and(|n| n.path_bytes() == path);
    index.entry(node.path_hash, is_path, |id| path_hash(slots, *id))
}

/// The path hash node `id` keeps: what its index entry is rehashed by,
/// read from the slab alone.
fn path_hash(slots: &[Option<DataNode>], id: NodeId) -> u32 {
    slot(slots, id).map_or(0, |n| n.path_hash)
}

/// Puts `node` in a freed slot, or a new one, and returns its id.
fn place(slots: &mut Vec<Option<DataNode>>, free: &mut Vec<NodeId>, node: DataNode) -> NodeId {
    match free.pop() {
        Some(id) => {
            slots[id.0 as usize] = Some(node);
            id
        }
        None => {
            let id = NodeId(u32::try_from(slots.len()).expect("fewer than 2^32 znodes"));
            slots.push(Some(node));
            id
        }
    }
}

fn slot(slots: &[Option<DataNode>], id: NodeId) -> Option<&DataNode> {
    slots.get(id.0 as usize)?.as_ref()
}
