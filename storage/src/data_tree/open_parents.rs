//! Children gathered while an image loads, each parent's set built at once.
//!
//! An image lists nodes in preorder, so the nodes whose children may still
//! arrive are the ancestors of the last node read.
//! With those on a stack, a child goes onto its parent's list, and the
//! parent's set is built in one bulk step when the walk leaves it (a fresh
//! table gives siblings rising ids in the order they arrive): no hash
//! lookup of the parent and no B-tree descent per node, which were a fifth
//! of a large snapshot's load. A node whose parent is not on the stack (an
//! image out of preorder) is linked into its parent directly.

use super::{DataNode, DataTree, NodeId};

/// The open ancestors of the last node read, with their children so far.
#[derive(Debug, Default)]
pub(super) struct OpenParents {
    stack: Vec<(NodeId, Vec<NodeId>)>,
}

/// Where a node's parent was found.
#[derive(Clone, Copy, Debug)]
pub(super) enum ParentAt {
    /// The innermost open node: its children are being gathered.
    Open,
    /// A node the walk is not in (an image out of preorder).
    Elsewhere(NodeId),
}

impl OpenParents {
    /// Whether `parent` is the innermost open node, after closing the open
    /// nodes the walk has left. If not, the caller looks it up by path.
    pub fn locate_open(&mut self, tree: &mut DataTree, parent: &str) -> bool {
        let parent_bytes = parent.as_bytes();
        while let Some((top, _)) = self.stack.last() {
            let top = tree.nodes.node(*top).map_or(&[][..], DataNode::path_bytes);
            if top == parent_bytes {
                return true;
            }
            if is_ancestor_or_self(top, parent_bytes) {
                break;
            }
            self.close(tree);
        }
        false
    }

    /// Records `child`, now in the tree, as a child of `parent`.
    pub fn add_child(&mut self, tree: &mut DataTree, parent: ParentAt, child: NodeId) {
        match (parent, self.stack.last_mut()) {
            (ParentAt::Open, Some((_, children))) => children.push(child),
            (ParentAt::Open, None) => {}
            (ParentAt::Elsewhere(id), _) => {
                if let Some(children) = tree.children_mut(id) {
                    children.insert(child);
                }
            }
        }
    }

    /// Opens `node`, just put in the tree, for children that may follow.
    pub fn open(&mut self, node: NodeId) {
        self.stack.push((node, Vec::new()));
    }

    /// Closes every open node: the image has ended.
    pub fn close_all(&mut self, tree: &mut DataTree) {
        while !self.stack.is_empty() {
            self.close(tree);
        }
    }

    fn close(&mut self, tree: &mut DataTree) {
        let Some((id, children)) = self.stack.pop() else {
            return;
        };
        if let Some(set) = tree.children_mut(id) {
            set.extend(children);
        }
    }
}

/// Whether `ancestor` is `path` or one of its ancestors.
fn is_ancestor_or_self(ancestor: &[u8], path: &[u8]) -> bool {
    match path.strip_prefix(ancestor) {
        Some(rest) => rest.is_empty() || ancestor == b"/" || rest.starts_with(b"/"),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ancestors_are_whole_components() {
        assert!(is_ancestor_or_self(b"/", b"/a"));
        assert!(is_ancestor_or_self(b"/a", b"/a"));
        assert!(is_ancestor_or_self(b"/a", b"/a/b"));
        assert!(!is_ancestor_or_self(b"/a", b"/ab"));
        assert!(!is_ancestor_or_self(b"/a/b", b"/a"));
    }
}
