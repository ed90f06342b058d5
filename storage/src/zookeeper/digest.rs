//! Apache ZooKeeper's tree digest (`DigestCalculator`, digest version 2),
//! computed over a zkd tree to check an import against the digests
//! ZooKeeper stored: the sum (wrapping) over the nodes of a CRC-32 of the
//! path (`""` for the root), the data, and the stat's fields in a fixed
//! order. Nodes under `/zookeeper/` are left out, as ZooKeeper leaves them.

use crate::DataTree;

/// ZooKeeper's digest of `tree`.
pub fn zookeeper_digest(tree: &DataTree) -> i64 {
    tree.preorder("/")
        .filter(|(path, _)| !path.starts_with("/zookeeper/"))
        .fold(0i64, |sum, (path, node)| {
            let path = if path == "/" { "" } else { path };
            let s = &node.stat;
            let mut crc = crc32fast::Hasher::new();
            crc.update(path.as_bytes());
            if let Some(data) = node.data() {
                crc.update(data);
            }
            for long in [s.czxid, s.mzxid, s.pzxid, s.ctime, s.mtime] {
                crc.update(&long.to_be_bytes());
            }
            for int in [s.version, s.cversion, s.aversion] {
                crc.update(&int.to_be_bytes());
            }
            crc.update(&s.ephemeral_owner.to_be_bytes());
            sum.wrapping_add(i64::from(crc.finalize()))
        })
}
