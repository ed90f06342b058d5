//! Children gathered while an image loads, each parent's set built at once.
//!
//! An image lists nodes in preorder, siblings in name order, so the nodes
//! whose children may still arrive are the ancestors of the last node read.
//! With those on a stack, a child goes onto its parent's list, and the
//! parent's set is built in one bulk step when the walk leaves it: no hash
//! lookup of the parent and no B-tree descent per node, which were a fifth
//! of a large snapshot's load. A node whose parent is not on the stack (an
//! image out of preorder) is linked into its parent directly.

use super::DataTree;
use std::sync::Arc;

/// The open ancestors of the last node read, with their children so far.
#[derive(Debug, Default)]
pub(super) struct OpenParents {
    stack: Vec<(Arc<str>, Vec<Arc<str>>)>,
}

impl OpenParents {
    /// Records `child` as a child of `parent`; false if `parent` is not in
    /// the tree (a fuzzy image's orphan, to be skipped).
    pub fn add_child(&mut self, tree: &mut DataTree, parent: &str, child: &Arc<str>) -> bool {
        // The walk has left every open node that is not `parent` or above it.
        while let Some((top, _)) = self.stack.last() {
            if is_ancestor_or_self(top, parent) {
                break;
            }
            self.close(tree);
        }
        match self.stack.last_mut() {
            Some((top, children)) if **top == *parent => {
                children.push(child.clone());
                true
            }
            _ => match tree.nodes.get_mut(parent) {
                Some(node) => {
                    node.children.insert(child.clone());
                    true
                }
                None => false,
            },
        }
    }

    /// Opens `node`, just put in the tree, for children that may follow.
    pub fn open(&mut self, node: Arc<str>) {
        self.stack.push((node, Vec::new()));
    }

    /// Closes every open node: the image has ended.
    pub fn close_all(&mut self, tree: &mut DataTree) {
        while !self.stack.is_empty() {
            self.close(tree);
        }
    }

    fn close(&mut self, tree: &mut DataTree) {
        let Some((path, children)) = self.stack.pop() else {
            return;
        };
        if children.is_empty() {
            return;
        }
        if let Some(node) = tree.nodes.get_mut(&*path) {
            node.children.extend(children);
        }
    }
}

/// Whether `ancestor` is `path` or one of its ancestors.
fn is_ancestor_or_self(ancestor: &str, path: &str) -> bool {
    match path.strip_prefix(ancestor) {
        Some(rest) => rest.is_empty() || ancestor == "/" || rest.starts_with('/'),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ancestors_are_whole_components() {
        assert!(is_ancestor_or_self("/", "/a"));
        assert!(is_ancestor_or_self("/a", "/a"));
        assert!(is_ancestor_or_self("/a", "/a/b"));
        assert!(!is_ancestor_or_self("/a", "/ab"));
        assert!(!is_ancestor_or_self("/a/b", "/a"));
    }
}
