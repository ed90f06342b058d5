//! Snapshots as plain files beside sled's databases, one per snapshot as
//! ZooKeeper names them: `dataDir/zkd/snapshots/snapshot.<zxid in hex>`.
//! sled keeps what it writes in memory well past its cache size when values
//! are large, so a 100 MB image written through it cost a few hundred MB of
//! resident memory; files stream in and out a piece at a time.
//!
//! A file is written as `<name>.part` by appends, then sealed: a trailer
//! (magic, image length, checksum) is appended, the file fsynced, renamed to
//! its final name and the directory fsynced. A staged SNAP is sealed the
//! same way, so installing it is a rename, not a copy.

use super::gradual_removal;
use crate::error::{Result, StorageError};
use crate::snapshot::{Checksum, SnapshotSeal, SnapshotSlot};
use bytes::Bytes;
use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use zkd_protocol::Zxid;

const PREFIX: &str = "snapshot.";
const PART: &str = ".part";
const STAGING: &str = "snapshot.staging.part";
/// A trailer whose checksum is CRC-32 (zero-extended to 8 bytes).
const TRAILER_MAGIC: &[u8; 8] = b"ZKDSEAL2";
/// A trailer of earlier versions, whose checksum is FNV-1a: still read.
const TRAILER_MAGIC_FNV: &[u8; 8] = b"ZKDSEAL1";
const TRAILER_LEN: u64 = 24;

/// The snapshot directory of one member.
#[derive(Clone, Debug)]
pub(super) struct SnapshotFiles {
    dir: PathBuf,
}

fn io_error(path: &Path, e: std::io::Error) -> StorageError {
    StorageError::Db(format!("{}: {e}", path.display()))
}

impl SnapshotFiles {
    /// Opens (creating) the directory.
    pub fn open(dir: PathBuf) -> Result<SnapshotFiles> {
        std::fs::create_dir_all(&dir).map_err(|e| io_error(&dir, e))?;
        gradual_removal::sweep(&dir);
        let files = SnapshotFiles { dir };
        files.sync_dir()?;
        Ok(files)
    }

    fn sealed_path(&self, zxid: Zxid) -> PathBuf {
        self.dir.join(format!("{PREFIX}{:x}", zxid.0 as u64))
    }

    fn part_path(&self, slot: SnapshotSlot) -> PathBuf {
        match slot {
            SnapshotSlot::Saved(zxid) => {
                self.dir.join(format!("{PREFIX}{:x}{PART}", zxid.0 as u64))
            }
            SnapshotSlot::Staging => self.dir.join(STAGING),
        }
    }

    pub fn append(&self, slot: SnapshotSlot, piece: &[u8]) -> Result<()> {
        let path = self.part_path(slot);
        OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut f| f.write_all(piece))
            .map_err(|e| io_error(&path, e))
    }

    /// fdatasync of the unsealed file: its dirty pages go to the disk now,
    /// a piece at a time, not all at the seal.
    pub fn write_out(&self, slot: SnapshotSlot) -> Result<()> {
        let path = self.part_path(slot);
        File::open(&path)
            .and_then(|f| f.sync_data())
            .map_err(|e| io_error(&path, e))
    }

    pub fn read_at(&self, slot: SnapshotSlot, offset: u64, max: usize) -> Result<Bytes> {
        let (path, trailer) = match slot {
            SnapshotSlot::Saved(zxid) => (self.sealed_path(zxid), TRAILER_LEN),
            SnapshotSlot::Staging => (self.part_path(slot), 0),
        };
        let file = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Bytes::new()),
            Err(e) => return Err(io_error(&path, e)),
        };
        let size = file.metadata().map_err(|e| io_error(&path, e))?.len();
        let end = size.saturating_sub(trailer);
        let want = end.saturating_sub(offset).min(max as u64) as usize;
        let mut buf = vec![0; want];
        let mut filled = 0;
        while filled < want {
            match file.read_at(&mut buf[filled..], offset + filled as u64) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(io_error(&path, e)),
            }
        }
        buf.truncate(filled);
        Ok(Bytes::from(buf))
    }

    pub fn seal(&self, slot: SnapshotSlot, zxid: Zxid, seal: SnapshotSeal) -> Result<()> {
        let part = self.part_path(slot);
        let mut trailer = Vec::with_capacity(TRAILER_LEN as usize);
        let (magic, checksum) = match seal.checksum {
            Checksum::Crc32(crc) => (TRAILER_MAGIC, u64::from(crc)),
            Checksum::Fnv1a(hash) => (TRAILER_MAGIC_FNV, hash),
        };
        trailer.extend_from_slice(magic);
        trailer.extend_from_slice(&seal.len.to_be_bytes());
        trailer.extend_from_slice(&checksum.to_be_bytes());
        OpenOptions::new()
            .create(true)
            .append(true)
            .open(&part)
            .and_then(|mut f| {
                f.write_all(&trailer)?;
                f.sync_all()
            })
            .map_err(|e| io_error(&part, e))?;
        let sealed = self.sealed_path(zxid);
        std::fs::rename(&part, &sealed).map_err(|e| io_error(&sealed, e))?;
        self.sync_dir()
    }

    /// The seal in a sealed file's trailer; None (with a warning) if the
    /// trailer is damaged or disagrees with the file's length.
    fn trailer(&self, zxid: Zxid) -> Result<Option<SnapshotSeal>> {
        let path = self.sealed_path(zxid);
        let file = File::open(&path).map_err(|e| io_error(&path, e))?;
        let size = file.metadata().map_err(|e| io_error(&path, e))?.len();
        let mut raw = [0u8; TRAILER_LEN as usize];
        let readable =
            size >= TRAILER_LEN && file.read_exact_at(&mut raw, size - TRAILER_LEN).is_ok();
        let field =
            |r: std::ops::Range<usize>| u64::from_be_bytes(raw[r].try_into().unwrap_or_default());
        let checksum = match (&raw[..8], field(16..24)) {
            (magic, sum) if magic == TRAILER_MAGIC => u32::try_from(sum).ok().map(Checksum::Crc32),
            (magic, sum) if magic == TRAILER_MAGIC_FNV => Some(Checksum::Fnv1a(sum)),
            _ => None,
        };
        let len = field(8..16);
        let Some(checksum) = checksum.filter(|_| readable && len == size - TRAILER_LEN) else {
            tracing::warn!(%zxid, path = %path.display(), "snapshot file without a valid trailer");
            return Ok(None);
        };
        Ok(Some(SnapshotSeal { len, checksum }))
    }

    /// Sealed snapshots, oldest first.
    pub fn seals(&self) -> Result<Vec<(Zxid, SnapshotSeal)>> {
        let mut seals = Vec::new();
        for (zxid, sealed) in self.list()? {
            if sealed {
                if let Some(seal) = self.trailer(zxid)? {
                    seals.push((zxid, seal));
                }
            }
        }
        seals.sort_by_key(|(z, _)| *z);
        Ok(seals)
    }

    /// Zxids with a sealed or unsealed file, oldest first.
    pub fn zxids(&self) -> Result<Vec<Zxid>> {
        let mut zxids: Vec<Zxid> = self.list()?.into_iter().map(|(z, _)| z).collect();
        zxids.sort();
        zxids.dedup();
        Ok(zxids)
    }

    /// The newest sealed snapshot's zxid and its file's mtime in Unix seconds.
    pub fn newest_sealed(&self) -> Option<(Zxid, u64)> {
        let list = self.list().ok()?;
        let zxid = list
            .iter()
            .filter(|(_, sealed)| *sealed)
            .map(|(z, _)| *z)
            .max()?;
        let modified = std::fs::metadata(self.sealed_path(zxid))
            .ok()?
            .modified()
            .ok()?;
        let since = modified.duration_since(std::time::UNIX_EPOCH).ok()?;
        Some((zxid, since.as_secs()))
    }

    /// (zxid, sealed) of every snapshot file.
    fn list(&self) -> Result<Vec<(Zxid, bool)>> {
        let mut found = Vec::new();
        let entries = std::fs::read_dir(&self.dir).map_err(|e| io_error(&self.dir, e))?;
        for entry in entries {
            let entry = entry.map_err(|e| io_error(&self.dir, e))?;
            let name = entry.file_name();
            let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(PREFIX)) else {
                continue;
            };
            let (hex, sealed) = match rest.strip_suffix(PART) {
                Some(hex) => (hex, false),
                None => (rest, true),
            };
            if let Ok(z) = u64::from_str_radix(hex, 16) {
                found.push((Zxid(z as i64), sealed));
            }
        }
        Ok(found)
    }

    pub fn remove(&self, slot: SnapshotSlot) -> Result<()> {
        let mut paths = vec![self.part_path(slot)];
        if let SnapshotSlot::Saved(zxid) = slot {
            paths.push(self.sealed_path(zxid));
        }
        for path in paths {
            match gradual_removal::remove(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                Err(e) => return Err(io_error(&path, e)),
            }
        }
        Ok(())
    }

    /// Makes renames and removals in the directory durable.
    pub fn sync_dir(&self) -> Result<()> {
        File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| io_error(&self.dir, e))
    }

    /// Flips a byte of the sealed image at `zxid` (tests of the checks on load).
    #[cfg(test)]
    pub fn damage(&self, zxid: Zxid, at: u64) {
        let path = self.sealed_path(zxid);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .unwrap();
        let mut byte = [0u8; 1];
        file.read_exact_at(&mut byte, at).unwrap();
        file.write_all_at(&[byte[0] ^ 0xff], at).unwrap();
    }
}
