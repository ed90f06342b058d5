//! The snapshot image of a `DataTree`: jute-encoded header (magic, version,
//! the zxid the image starts at), the sessions, then nodes depth-first
//! (parents before children), ended by an empty path.
//!
//! Images are *fuzzy*, as ZooKeeper's are: a [`SnapshotCursor`] serializes a
//! bounded number of nodes per step while txns keep being applied between
//! steps, so a large tree never stalls the server. The image is labelled with
//! the zxid at which it started; recovery replays every txn after that, and
//! because `apply` is idempotent (creates of existing nodes only raise parent
//! counters, deletes of missing nodes do nothing, setData/setACL carry absolute
//! versions) the result is exactly the tree the log describes.

use super::{DataNode, DataTree};
use crate::path;
use bytes::Bytes;
use std::sync::Arc;
use zkd_protocol::records::{Acl, StatPersisted};
use zkd_protocol::{DecodeError, Record, Zxid};

const MAGIC: i32 = 0x5a4b_4453; // "ZKDS"
const VERSION: i32 = 2;

/// A snapshot being written a few nodes at a time.
#[derive(Debug)]
pub struct SnapshotCursor {
    zxid: Zxid,
    /// Paths still to visit; children are pushed as their parent is written.
    stack: Vec<String>,
    out: Vec<u8>,
}

impl SnapshotCursor {
    /// The zxid the image starts at: recovery replays txns after it.
    pub fn zxid(&self) -> Zxid {
        self.zxid
    }

    /// Writes up to `budget` nodes of `tree` as it is now. True when done.
    pub fn step(&mut self, tree: &DataTree, budget: usize) -> bool {
        for _ in 0..budget {
            let Some(p) = self.stack.pop() else {
                return true;
            };
            // Deleted since its parent was written: its delete is in the log.
            let Some(node) = tree.nodes.get(&p) else {
                continue;
            };
            p.encode(&mut self.out);
            node.data.encode(&mut self.out);
            node.acl.as_ref().encode(&mut self.out);
            node.stat.encode(&mut self.out);
            self.stack
                .extend(node.children.iter().rev().map(|c| path::join(&p, c)));
        }
        self.stack.is_empty()
    }

    /// Paths still to be written (tests place txns between particular slices).
    #[cfg(test)]
    pub(crate) fn pending_paths(&self) -> &[String] {
        &self.stack
    }

    /// The finished image.
    pub fn finish(mut self) -> Bytes {
        String::new().encode(&mut self.out);
        Bytes::from(self.out)
    }
}

impl DataTree {
    /// Starts a fuzzy snapshot of the tree as of its last applied zxid.
    pub fn start_snapshot(&self) -> SnapshotCursor {
        let mut out = Vec::with_capacity(1024);
        MAGIC.encode(&mut out);
        VERSION.encode(&mut out);
        self.last_zxid.0.encode(&mut out);
        (self.sessions.len() as i32).encode(&mut out);
        for (id, timeout) in &self.sessions {
            id.encode(&mut out);
            timeout.encode(&mut out);
        }
        SnapshotCursor {
            zxid: self.last_zxid,
            stack: vec!["/".to_owned()],
            out,
        }
    }

    /// Serializes the whole tree at once (an exact image).
    pub fn to_image(&self) -> Bytes {
        let mut cursor = self.start_snapshot();
        while !cursor.step(self, usize::MAX) {}
        cursor.finish()
    }

    /// Rebuilds a tree from an image; the caller replays the log after its zxid.
    pub fn from_image(mut buf: Bytes) -> Result<DataTree, DecodeError> {
        if i32::decode(&mut buf)? != MAGIC || i32::decode(&mut buf)? != VERSION {
            return Err(DecodeError::Invalid("snapshot magic or version"));
        }
        let last_zxid = Zxid(i64::decode(&mut buf)?);
        let mut tree = DataTree {
            nodes: Default::default(),
            ephemerals: Default::default(),
            sessions: Default::default(),
            expirable: Default::default(),
            last_zxid,
            digest: 0,
        };
        // The digest is built from scratch as sessions and nodes go in.
        let sessions = i32::decode(&mut buf)?;
        for _ in 0..sessions {
            let id = i64::decode(&mut buf)?;
            let timeout = i32::decode(&mut buf)?;
            tree.insert_session(id, timeout);
        }
        let mut last_acl: Arc<Vec<Acl>> = Arc::new(Vec::new());
        loop {
            let p = String::decode(&mut buf)?;
            if p.is_empty() {
                break;
            }
            let data = Option::<Bytes>::decode(&mut buf)?;
            let acl = Vec::<Acl>::decode(&mut buf)?;
            let stat = StatPersisted::decode(&mut buf)?;
            // A fuzzy image may hold a node whose parent was re-created after the
            // parent was visited; the log re-creates both, so skip the orphan.
            if p != "/" && !tree.nodes.contains_key(path::parent(&p)) {
                continue;
            }
            // Consecutive nodes usually share an ACL; keep one allocation for them.
            if *last_acl != acl {
                last_acl = Arc::new(acl);
            }
            tree.link(&p, DataNode::new(&p, data, last_acl.clone(), stat));
        }
        if !tree.nodes.contains_key("/") {
            return Err(DecodeError::Invalid("snapshot without a root"));
        }
        Ok(tree)
    }
}
