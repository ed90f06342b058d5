//! zkd's tree written as Apache ZooKeeper's data directory: a `version-2/`
//! holding one snapshot at the tree's last zxid (the format the reader in
//! this module takes: header, sessions, ACL map, nodes in preorder, seal,
//! ZooKeeper's digest and a second seal) and the epoch files, so ZooKeeper
//! starts from it and serves the same tree.

use super::{zookeeper_digest, VERSION_DIR};
use crate::error::StorageError;
use crate::DataTree;
use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use zkd_protocol::Record;

/// "ZKSN", and the format version ZooKeeper writes.
const SNAP_MAGIC: i32 = 0x5a4b_534e;
const VERSION: i32 = 2;
/// ZooKeeper's digest format version.
const DIGEST_VERSION: i32 = 2;

/// Writes `tree` and the epochs into `dir/version-2`, which must not hold
/// ZooKeeper's files yet; the snapshot's path.
pub fn export(
    tree: &DataTree,
    accepted: u32,
    current: u32,
    dir: &Path,
) -> Result<PathBuf, StorageError> {
    let v2 = dir.join(VERSION_DIR);
    let io = |p: &Path, e: std::io::Error| StorageError::Db(format!("{}: {e}", p.display()));
    if std::fs::read_dir(&v2).is_ok_and(|mut d| d.next().is_some()) {
        return Err(StorageError::Foreign(format!(
            "{} is not empty: export into a directory without ZooKeeper's files",
            v2.display()
        )));
    }
    std::fs::create_dir_all(&v2).map_err(|e| io(&v2, e))?;
    let name = format!("snapshot.{:x}", tree.last_zxid().0);
    let (partial, path) = (v2.join(format!("{name}.partial")), v2.join(name));
    let file = File::create(&partial).map_err(|e| io(&partial, e))?;
    let mut out = SnapshotOut {
        inner: BufWriter::with_capacity(1 << 20, file),
        adler: adler2::Adler32::new(),
    };
    snapshot(tree, &mut out).map_err(|e| io(&partial, e))?;
    let file = out
        .inner
        .into_inner()
        .map_err(|e| io(&partial, e.into_error()))?;
    file.sync_all().map_err(|e| io(&partial, e))?;
    std::fs::rename(&partial, &path).map_err(|e| io(&path, e))?;
    for (name, epoch) in [("acceptedEpoch", accepted), ("currentEpoch", current)] {
        let file = v2.join(name);
        std::fs::write(&file, epoch.to_string()).map_err(|e| io(&file, e))?;
    }
    File::open(&v2)
        .and_then(|d| d.sync_all())
        .map_err(|e| io(&v2, e))?;
    Ok(path)
}

/// A snapshot file being written, with the Adler-32 of what went in.
struct SnapshotOut {
    inner: BufWriter<File>,
    adler: adler2::Adler32,
}

impl SnapshotOut {
    fn bytes(&mut self, b: &[u8]) -> std::io::Result<()> {
        self.adler.write_slice(b);
        self.inner.write_all(b)
    }

    fn record(&mut self, r: &impl Record) -> std::io::Result<()> {
        self.bytes(&r.to_bytes())
    }

    fn string(&mut self, s: &str) -> std::io::Result<()> {
        self.record(&(s.len() as i32))?;
        self.bytes(s.as_bytes())
    }

    /// The seal: the Adler-32 of everything before it, then `/`.
    fn seal(&mut self) -> std::io::Result<()> {
        let sum = i64::from(self.adler.checksum());
        self.record(&sum)?;
        self.string("/")
    }
}

fn snapshot(tree: &DataTree, out: &mut SnapshotOut) -> std::io::Result<()> {
    out.record(&SNAP_MAGIC)?;
    out.record(&VERSION)?;
    out.record(&-1i64)?; // dbid, as ZooKeeper writes it
    out.record(&(tree.sessions().len() as i32))?;
    for (id, timeout) in tree.sessions() {
        out.record(id)?;
        out.record(timeout)?;
    }
    // The ACL map: each distinct list once, numbered from 1 as ZooKeeper numbers them.
    let mut indices: HashMap<Vec<u8>, i64> = HashMap::new();
    let mut lists = Vec::new();
    for (_, node) in tree.preorder("/") {
        let encoded = node.acl.as_ref().to_bytes().to_vec();
        if !indices.contains_key(&encoded) {
            indices.insert(encoded.clone(), lists.len() as i64 + 1);
            lists.push(encoded);
        }
    }
    out.record(&(lists.len() as i32))?;
    for (i, list) in lists.iter().enumerate() {
        out.record(&(i as i64 + 1))?;
        out.bytes(list)?;
    }
    for (path, node) in tree.preorder("/") {
        out.string(if path == "/" { "" } else { path })?;
        match node.data() {
            None => out.record(&-1i32)?,
            Some(data) => {
                out.record(&(data.len() as i32))?;
                out.bytes(data)?;
            }
        }
        let index = indices[&node.acl.as_ref().to_bytes().to_vec()];
        out.record(&index)?;
        out.record(&node.stat)?;
    }
    out.string("/")?;
    out.seal()?;
    out.record(&tree.last_zxid().0)?;
    out.record(&DIGEST_VERSION)?;
    out.record(&zookeeper_digest(tree))?;
    out.seal()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::txn::{Txn, TxnBody};
    use zkd_protocol::records::{Acl, CreateSessionTxn, CreateTxn, TxnHeader};
    use zkd_protocol::{OpCode, Zxid};

    fn txn(zxid: i64, body: TxnBody) -> Txn {
        let r#type = body.type_code();
        let header = TxnHeader {
            client_id: 0x77,
            cxid: 1,
            zxid,
            time: 1_700_000_000_000 + zxid,
            r#type,
        };
        Txn { header, body }
    }

    fn create(path: &str, data: Option<&[u8]>, acl: Vec<Acl>, ephemeral: bool) -> TxnBody {
        TxnBody::Create(
            OpCode::Create,
            CreateTxn {
                path: path.into(),
                data: data.map(bytes::Bytes::copy_from_slice),
                acl: acl.into(),
                ephemeral,
                parent_c_version: 1,
            },
        )
    }

    #[test]
    fn an_exported_snapshot_reads_back_as_the_same_tree() {
        let mut tree = DataTree::new();
        let session = TxnBody::CreateSession(CreateSessionTxn { time_out: 9000 });
        let digest_acl = vec![Acl {
            perms: 31,
            id: zkd_protocol::records::Id {
                scheme: "digest".into(),
                id: "u:x".into(),
            },
        }];
        for t in [
            txn(0x100000001, session),
            txn(
                0x100000002,
                create("/a", Some(b"one"), vec![Acl::world(31)], false),
            ),
            txn(0x100000003, create("/a/b", None, digest_acl.clone(), false)),
            txn(0x100000004, create("/a/e", Some(b""), digest_acl, true)),
        ] {
            tree.apply(&t);
        }
        let dir = tempfile::tempdir().unwrap();
        let path = export(&tree, 1, 1, dir.path()).unwrap();
        assert!(path.ends_with("version-2/snapshot.100000004"), "{path:?}");
        let back = super::super::snapshot::read(&path, Zxid(0x100000004)).unwrap();
        assert_eq!(back.digest.map(|d| d.digest), Some(zookeeper_digest(&tree)));
        assert_eq!(zookeeper_digest(&back.tree), zookeeper_digest(&tree));
        assert_eq!(
            back.tree.digest(),
            tree.digest(),
            "zkd's own digest: sessions too"
        );
        assert_eq!(back.tree.ephemerals_of(0x77), vec!["/a/e".to_string()]);
        let err = export(&tree, 1, 1, dir.path()).unwrap_err();
        assert!(err.to_string().contains("not empty"), "{err}");
    }
}
