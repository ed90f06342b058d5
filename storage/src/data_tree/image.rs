//! The snapshot image of a `DataTree`: jute-encoded sessions, then nodes in
//! depth-first order (parents before children), then the last applied zxid.

use super::{DataNode, DataTree};
use crate::path;
use bytes::Bytes;
use std::collections::BTreeSet;
use std::sync::Arc;
use zkd_protocol::records::{Acl, StatPersisted};
use zkd_protocol::{DecodeError, Record, Zxid};

const MAGIC: i32 = 0x5a4b_4453; // "ZKDS"
const VERSION: i32 = 1;

impl DataTree {
    /// Serializes the whole tree and its sessions.
    pub fn to_image(&self) -> Bytes {
        let mut out = Vec::with_capacity(1024);
        MAGIC.encode(&mut out);
        VERSION.encode(&mut out);
        self.last_zxid.0.encode(&mut out);
        (self.sessions.len() as i32).encode(&mut out);
        for (id, timeout) in &self.sessions {
            id.encode(&mut out);
            timeout.encode(&mut out);
        }
        (self.nodes.len() as i32).encode(&mut out);
        for (p, node) in self.preorder("/") {
            p.encode(&mut out);
            node.data.encode(&mut out);
            node.acl.as_ref().encode(&mut out);
            node.stat.encode(&mut out);
        }
        Bytes::from(out)
    }

    /// Rebuilds a tree from [`DataTree::to_image`] output.
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
        };
        let sessions = i32::decode(&mut buf)?;
        for _ in 0..sessions {
            let id = i64::decode(&mut buf)?;
            tree.sessions.insert(id, i32::decode(&mut buf)?);
        }
        let count = i32::decode(&mut buf)?;
        let mut last_acl: Arc<Vec<Acl>> = Arc::new(Vec::new());
        for _ in 0..count {
            let p = String::decode(&mut buf)?;
            let data = Option::<Bytes>::decode(&mut buf)?;
            let acl = Vec::<Acl>::decode(&mut buf)?;
            let stat = StatPersisted::decode(&mut buf)?;
            if p != "/" && !tree.nodes.contains_key(path::parent(&p)) {
                return Err(DecodeError::Invalid("snapshot node before its parent"));
            }
            // Consecutive nodes usually share an ACL; keep one allocation for them.
            if *last_acl != acl {
                last_acl = Arc::new(acl);
            }
            let node = DataNode {
                data,
                acl: last_acl.clone(),
                stat,
                children: BTreeSet::new(),
            };
            tree.link(&p, node);
        }
        Ok(tree)
    }
}
