//! Apache ZooKeeper's snapshot files (`version-2/snapshot.<zxid>`), read
//! into a zkd tree: the file header (`ZKSN`, version 2, dbid), the sessions,
//! the ACL map (index to list), the nodes in preorder ending with the path
//! `/`, the Adler-32 seal, then the optional tree digest and (3.9) last
//! processed zxid, each with a seal of its own. Nodes are transcoded into
//! zkd's image records as they are read, so no step holds the file whole.

use super::jute_reader::{JuteReader, ReadError};
use super::FileError;
use crate::data_tree::{image_header, put_buffer, ImageDecoder};
use crate::DataTree;
use std::collections::HashMap;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use zkd_protocol::records::{Acl, Id};
use zkd_protocol::{Record, Zxid};

/// "ZKSN".
const SNAP_MAGIC: i32 = 0x5a4b_534e;
/// The one format version ZooKeeper writes.
const VERSION: i32 = 2;
/// A `StatPersisted`: six longs and three ints, in zkd's order too.
const STAT_LEN: usize = 6 * 8 + 3 * 4;
/// ZooKeeper's ACL map index for `world:anyone` with every permission.
const OPEN_ACL_UNSAFE: i64 = -1;
/// Image bytes handed to the decoder at a time.
const CHUNK: usize = 1 << 20;

/// The tree digest ZooKeeper stored with a snapshot, and the zxid it is of
/// (past the name's for a fuzzy snapshot).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ZxidDigest {
    pub zxid: Zxid,
    pub digest: i64,
}

/// A snapshot as read.
#[derive(Debug)]
pub struct Snapshot {
    /// The tree, at the zxid of the file's name.
    pub tree: DataTree,
    /// The digest it carried, if it carried one for a zxid at or past its name's.
    pub digest: Option<ZxidDigest>,
}

/// Whether `path` ends as every whole snapshot does (`/` as a jute string),
/// as ZooKeeper checks before it tries one (`SnapStream.isValidSnapshot`).
pub fn looks_whole(path: &Path) -> std::io::Result<bool> {
    let mut file = File::open(path)?;
    let len = file.metadata()?.len();
    if len < 10 {
        return Ok(false);
    }
    file.seek(SeekFrom::End(-5))?;
    let mut tail = [0u8; 5];
    file.read_exact(&mut tail)?;
    Ok(tail == [0, 0, 0, 1, b'/'])
}

/// Reads the snapshot at `path`, named for `zxid`.
pub fn read(path: &Path, zxid: Zxid) -> Result<Snapshot, FileError> {
    let file = File::open(path).map_err(|e| FileError::io(path, 0, e))?;
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let mut reader = JuteReader::new(file);
    let fail = |r: &JuteReader<File>, e: ReadError| FileError::read(path, r.offset(), e);
    let mut load = Load {
        reader: &mut reader,
        decoder: ImageDecoder::for_image_of(len),
        out: Vec::with_capacity(CHUNK + 4096),
    };
    let tree = match load.tree(zxid) {
        Ok(tree) => tree,
        Err(e) => return Err(fail(load.reader, e)),
    };
    seal(&mut reader).map_err(|e| fail(&reader, e))?;
    let digest = optional_digest(&mut reader, zxid).map_err(|e| fail(&reader, e))?;
    // 3.9 adds the last processed zxid, sealed too; older readers stop before it.
    if !reader.at_end().map_err(|e| fail(&reader, e))? {
        reader.long().map_err(|e| fail(&reader, e))?;
        seal(&mut reader).map_err(|e| fail(&reader, e))?;
    }
    Ok(Snapshot { tree, digest })
}

/// The transcoding of one snapshot's body into a zkd image.
struct Load<'a> {
    reader: &'a mut JuteReader<File>,
    decoder: ImageDecoder,
    out: Vec<u8>,
}

impl Load<'_> {
    fn tree(&mut self, zxid: Zxid) -> Result<DataTree, ReadError> {
        let r = &mut *self.reader;
        if r.int()? != SNAP_MAGIC {
            return Err(ReadError::Invalid(
                "not a ZooKeeper snapshot (its magic is not ZKSN)",
            ));
        }
        if r.int()? != VERSION {
            return Err(ReadError::Invalid("a snapshot format other than version 2"));
        }
        r.long()?; // dbid
        let sessions = r.int()?;
        if sessions < 0 {
            return Err(ReadError::Invalid("a negative session count"));
        }
        self.out.extend(image_header(zxid, sessions));
        for _ in 0..sessions {
            let (id, timeout) = (self.reader.long()?, self.reader.int()?);
            id.encode(&mut self.out);
            timeout.encode(&mut self.out);
            self.flush(false)?;
        }
        let acls = acl_map(self.reader)?;
        let open = vec![Acl::world(31)].to_bytes().to_vec();
        loop {
            let path = self.reader.string()?;
            if path == "/" {
                break;
            }
            let data = self.reader.buffer()?;
            let acl = self.reader.long()?;
            let stat = self.reader.exact(STAT_LEN)?;
            let acl = match acl {
                OPEN_ACL_UNSAFE => &open,
                index => acls.get(&index).ok_or(ReadError::Invalid(
                    "a node whose ACL index is not in the ACL map",
                ))?,
            };
            // ZooKeeper writes the root's path as "".
            let path = if path.is_empty() { "/" } else { path.as_str() };
            put_buffer(&mut self.out, Some(path.as_bytes()));
            put_buffer(&mut self.out, data.as_deref());
            self.out.extend_from_slice(acl);
            self.out.extend_from_slice(&stat);
            self.flush(false)?;
        }
        0i32.encode(&mut self.out);
        self.flush(true)?;
        let decoder = std::mem::take(&mut self.decoder);
        decoder.finish().map_err(decode_error)
    }

    /// Hands the image so far to the decoder once a chunk is ready (or at the end).
    fn flush(&mut self, last: bool) -> Result<(), ReadError> {
        if last || self.out.len() >= CHUNK {
            self.decoder.feed(&self.out).map_err(decode_error)?;
            self.out.clear();
        }
        Ok(())
    }
}

fn decode_error(e: zkd_protocol::DecodeError) -> ReadError {
    ReadError::Invalid(match e {
        zkd_protocol::DecodeError::Invalid(what) => what,
        _ => "a node record that does not decode",
    })
}

/// The ACL map: each index with its list, encoded as zkd's image holds it.
fn acl_map(r: &mut JuteReader<File>) -> Result<HashMap<i64, Vec<u8>>, ReadError> {
    let count = r.int()?;
    let mut map = HashMap::new();
    for _ in 0..count.max(0) {
        let index = r.long()?;
        let entries = r.int()?;
        let mut list = Vec::new();
        for _ in 0..entries.max(0) {
            let perms = r.int()?;
            let (scheme, id) = (r.string()?, r.string()?);
            list.push(Acl {
                perms,
                id: Id { scheme, id },
            });
        }
        map.insert(index, list.to_bytes().to_vec());
    }
    Ok(map)
}

/// A seal: the Adler-32 of everything before it, then the string `/`.
fn seal(r: &mut JuteReader<File>) -> Result<(), ReadError> {
    let expected = r.checksum();
    let stored = r.long()?;
    let slash = r.string()?;
    if stored != i64::from(expected) || slash != "/" {
        return Err(ReadError::Invalid(
            "its Adler-32 seal does not match its contents",
        ));
    }
    Ok(())
}

/// The digest section (zxid, version, digest) and its seal, if present; a
/// digest of zxid 0 is empty, and one before the name's zxid is not used.
fn optional_digest(r: &mut JuteReader<File>, named: Zxid) -> Result<Option<ZxidDigest>, ReadError> {
    if r.at_end()? {
        return Ok(None);
    }
    let zxid = Zxid(r.long()?);
    let version = r.int()?;
    let digest = if version < 2 {
        let hex = r.string()?;
        u64::from_str_radix(&hex, 16).unwrap_or(0) as i64
    } else {
        r.long()?
    };
    seal(r)?;
    Ok((zxid.0 > 0 && zxid >= named).then_some(ZxidDigest { zxid, digest }))
}
