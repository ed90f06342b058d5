//! Serialized DataTree images, named by the zxid they include, written and
//! read as a stream of pieces: an image is never needed whole in memory to
//! be saved, sent, received or loaded.
//!
//! A snapshot is written to a slot and then sealed with its
//! [`SnapshotSeal`] (length and checksum of the image). Until sealed
//! it is invisible to readers, so a save cut short by a crash is ignored
//! (and purged later). The [`SnapshotSlot::Staging`] slot holds a SNAP as it
//! streams in from the leader; sealing it makes it the saved snapshot at its
//! zxid without a copy, and the member's own snapshots stay intact until then.
//!
//! Snapshots are *fuzzy* (see `data_tree::image`): the one named `Z` may
//! also hold the effects of txns applied after `Z` while it was written.
//! Those txns were applied, hence committed, so no TRUNC removes them.

use crate::data_tree::DataTree;
use crate::error::{Result, StorageError};
use bytes::Bytes;
use zkd_protocol::Zxid;

/// The largest piece written or read at once (1 MiB), as a SNAP's chunks
/// on the wire.
pub const SNAPSHOT_CHUNK: usize = 1 << 20;

/// Where an unsealed snapshot is being written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum SnapshotSlot {
    /// A snapshot of this member's, to be named by its zxid.
    Saved(Zxid),
    /// A SNAP being received from the leader (one at a time).
    Staging,
}

/// What a complete image adds up to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SnapshotSeal {
    /// Bytes of the image.
    pub len: u64,
    /// The checksum of the image.
    pub checksum: Checksum,
}

/// An image's checksum, computed piece by piece.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Checksum {
    /// CRC-32 (IEEE), SIMD-accelerated: every new seal. FNV-1a went a byte
    /// at a time, about a sixth of a large snapshot's load.
    Crc32(u32),
    /// FNV-1a (64 bits): snapshots sealed by earlier versions, still read.
    Fnv1a(u64),
}

impl SnapshotSeal {
    /// The seal of an empty image, to [`add`](Self::add) pieces to.
    pub fn empty() -> SnapshotSeal {
        SnapshotSeal {
            len: 0,
            checksum: Checksum::Crc32(0),
        }
    }

    /// The seal of an empty image, checksummed as this seal is (to verify
    /// an image against it).
    pub fn empty_like(&self) -> SnapshotSeal {
        let checksum = match self.checksum {
            Checksum::Crc32(_) => Checksum::Crc32(0),
            Checksum::Fnv1a(_) => Checksum::Fnv1a(FNV_OFFSET),
        };
        SnapshotSeal { len: 0, checksum }
    }

    /// Accounts for the image's next piece.
    pub fn add(&mut self, piece: &[u8]) {
        self.len += piece.len() as u64;
        self.checksum = match self.checksum {
            Checksum::Crc32(crc) => {
                let mut hasher = crc32fast::Hasher::new_with_initial(crc);
                hasher.update(piece);
                Checksum::Crc32(hasher.finalize())
            }
            Checksum::Fnv1a(hash) => Checksum::Fnv1a(fnv1a(hash, piece)),
        };
    }
}

/// A sealed snapshot whose image verified when it was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SnapshotRef {
    /// The zxid the snapshot is named by.
    pub zxid: Zxid,
    /// Its seal.
    pub seal: SnapshotSeal,
}

/// A store of snapshots. Implementations provide the primitives; everything
/// a caller uses is built on them here.
pub trait SnapshotStore {
    /// Appends to the unsealed image in `slot`. Not durable until sealed.
    fn append_snapshot(&mut self, slot: SnapshotSlot, piece: &[u8]) -> Result<()>;

    /// Writes what was appended to `slot` out to the disk now (still not
    /// durable until sealed). A writer that calls this after each piece keeps
    /// little dirty data in the page cache, so the log's fsyncs never wait
    /// behind a whole image's writeback. A store without a page cache has
    /// nothing to do.
    fn write_out_snapshot(&mut self, _slot: SnapshotSlot) -> Result<()> {
        Ok(())
    }

    /// Up to `max` bytes from `offset` of the image in `slot`: a saved one
    /// only once sealed, the staged one as written so far. Empty past the end.
    fn read_snapshot_at(&self, slot: SnapshotSlot, offset: u64, max: usize) -> Result<Bytes>;

    /// Seals the image in `slot` as the snapshot at `zxid` (a staged image
    /// moves there), replacing one already there. **Durable on return.**
    fn seal_snapshot(&mut self, slot: SnapshotSlot, zxid: Zxid, seal: SnapshotSeal) -> Result<()>;

    /// Every sealed snapshot, oldest first.
    fn snapshot_seals(&self) -> Result<Vec<(Zxid, SnapshotSeal)>>;

    /// Every zxid with a sealed or unsealed saved snapshot, oldest first.
    fn snapshot_zxids(&self) -> Result<Vec<Zxid>>;

    /// Removes the image in `slot`, sealed or not. Not durable until synced.
    fn remove_snapshot(&mut self, slot: SnapshotSlot) -> Result<()>;

    /// Makes the removals so far durable.
    fn sync_snapshots(&mut self) -> Result<()>;

    /// Records that the snapshot at `zxid` is a leader's fuzzy image: it may
    /// already hold txns through `end`, which a replay applies again. Only
    /// the latest record is kept. **Durable on return.**
    fn set_fuzzy_image(&mut self, zxid: Zxid, end: Zxid) -> Result<()>;

    /// The latest fuzzy image recorded: its snapshot's zxid and end.
    fn fuzzy_image(&self) -> Result<Option<(Zxid, Zxid)>>;

    /// Stores the image of the tree as of `zxid`. **Durable on return.**
    fn save_snapshot(&mut self, zxid: Zxid, image: Bytes) -> Result<()> {
        let slot = SnapshotSlot::Saved(zxid);
        let mut writer = SnapshotWriter::new(self, slot)?;
        for piece in image.chunks(SNAPSHOT_CHUNK) {
            writer.write(self, piece)?;
        }
        writer.seal(self, zxid)
    }

    /// The newest sealed snapshot at or below `zxid` whose image verifies,
    /// skipping damaged ones. Recovery asks for the newest one at or below
    /// the log's end, so a snapshot past a truncation is never loaded even
    /// if its deletion was cut short by a crash. Cost: reads the snapshot
    /// once, a piece at a time.
    fn latest_snapshot_at_or_before(&self, zxid: Zxid) -> Result<Option<SnapshotRef>> {
        for (at, seal) in self.snapshot_seals()?.into_iter().rev() {
            if at <= zxid && snapshot_verifies(self, at, seal)? {
                return Ok(Some(SnapshotRef { zxid: at, seal }));
            }
        }
        Ok(None)
    }

    /// The newest snapshot whose image verifies, skipping damaged ones.
    fn latest_snapshot(&self) -> Result<Option<SnapshotRef>> {
        self.latest_snapshot_at_or_before(Zxid(i64::MAX))
    }

    /// Deletes every snapshot with zxid greater than `zxid`, unsealed ones
    /// too. **Durable on return.** A TRUNC to `zxid` does this after cutting
    /// the log: a snapshot holding txns past the cut must never be reloaded
    /// (ZOOKEEPER-1549).
    fn delete_snapshots_after(&mut self, zxid: Zxid) -> Result<()> {
        for at in self.snapshot_zxids()? {
            if at > zxid {
                self.remove_snapshot(SnapshotSlot::Saved(at))?;
            }
        }
        self.sync_snapshots()
    }

    /// Keeps the newest `retain` sealed snapshots and deletes older ones
    /// (and unsealed ones older than those). Returns the zxid of the oldest
    /// snapshot kept, so the caller can purge the log up to it.
    fn purge_snapshots(&mut self, retain: usize) -> Result<Option<Zxid>> {
        let seals = self.snapshot_seals()?;
        let excess = seals.len().saturating_sub(retain.max(1));
        let Some(&(oldest_kept, _)) = seals.get(excess) else {
            return Ok(None);
        };
        for at in self.snapshot_zxids()? {
            if at < oldest_kept {
                self.remove_snapshot(SnapshotSlot::Saved(at))?;
            }
        }
        self.sync_snapshots()?;
        Ok(Some(oldest_kept))
    }

    /// The newest snapshot, if the store decoded it ahead while it opened,
    /// taken out of the store (so a tree is never held twice):
    /// [`crate::store::load_snapshot`] uses it when it is the one asked
    /// for. None unless the store preloads.
    fn take_preloaded(&self) -> Option<(SnapshotRef, Result<DataTree>)> {
        None
    }
}

/// Writes an image to a slot piece by piece, computing its seal as it goes.
#[derive(Debug)]
pub struct SnapshotWriter {
    slot: SnapshotSlot,
    seal: SnapshotSeal,
}

impl SnapshotWriter {
    /// Starts `slot` afresh: whatever unsealed image it held is dropped.
    pub fn new<S: SnapshotStore + ?Sized>(store: &mut S, slot: SnapshotSlot) -> Result<Self> {
        store.remove_snapshot(slot)?;
        Ok(SnapshotWriter {
            slot,
            seal: SnapshotSeal::empty(),
        })
    }

    /// Writes the next piece (not durable).
    pub fn write<S: SnapshotStore + ?Sized>(&mut self, store: &mut S, piece: &[u8]) -> Result<()> {
        store.append_snapshot(self.slot, piece)?;
        self.seal.add(piece);
        Ok(())
    }

    /// The seal of everything written so far.
    pub fn seal_so_far(&self) -> SnapshotSeal {
        self.seal
    }

    /// Seals the image as the snapshot at `zxid`. **Durable on return.**
    pub fn seal<S: SnapshotStore + ?Sized>(self, store: &mut S, zxid: Zxid) -> Result<()> {
        store.seal_snapshot(self.slot, zxid, self.seal)
    }
}

/// Whether the sealed snapshot at `zxid` reads back whole and matches its
/// seal; a damaged one is logged and does not count. Reads it once, a
/// piece at a time.
pub fn snapshot_verifies<S: SnapshotStore + ?Sized>(
    store: &S,
    zxid: Zxid,
    seal: SnapshotSeal,
) -> Result<bool> {
    match read_snapshot(store, SnapshotSlot::Saved(zxid), seal).try_for_each(|c| c.map(drop)) {
        Ok(()) => Ok(true),
        Err(StorageError::Corrupt(e)) => {
            tracing::warn!(%zxid, "skipping damaged snapshot: {e}");
            Ok(false)
        }
        Err(e) => Err(e),
    }
}

/// The image in `slot` in pieces of at most [`SNAPSHOT_CHUNK`], one read at
/// a time. The last item is an error (`Corrupt`) if the image is shorter or
/// longer than `seal` says or its checksum does not match.
pub fn read_snapshot<S: SnapshotStore + ?Sized>(
    store: &S,
    slot: SnapshotSlot,
    seal: SnapshotSeal,
) -> impl Iterator<Item = Result<Bytes>> + '_ {
    read_snapshot_with(
        move |offset, max| store.read_snapshot_at(slot, offset, max),
        slot,
        seal,
    )
}

/// [`read_snapshot`] through `read_at(offset, max)`, a reader of `slot`.
pub(crate) fn read_snapshot_with<'a>(
    read_at: impl Fn(u64, usize) -> Result<Bytes> + 'a,
    slot: SnapshotSlot,
    seal: SnapshotSeal,
) -> impl Iterator<Item = Result<Bytes>> + 'a {
    let mut read = seal.empty_like();
    let mut done = false;
    std::iter::from_fn(move || {
        if done {
            return None;
        }
        let want = (seal.len.saturating_sub(read.len)).min(SNAPSHOT_CHUNK as u64) as usize;
        // At the sealed length, one more read proves the image ends there.
        let piece = match read_at(read.len, want.max(1)) {
            Ok(piece) => piece,
            Err(e) => {
                done = true;
                return Some(Err(e));
            }
        };
        if want == 0 || piece.is_empty() {
            done = true;
            let intact = piece.is_empty() && read == seal;
            return (!intact).then(|| {
                Err(StorageError::Corrupt(format!(
                    "snapshot {slot:?}: read {} bytes ({:x?}), sealed as {} ({:x?})",
                    read.len + piece.len() as u64,
                    read.checksum,
                    seal.len,
                    seal.checksum
                )))
            });
        }
        read.add(&piece);
        Some(Ok(piece))
    })
}

/// A whole snapshot in memory (tests and small tools only).
pub fn read_whole<S: SnapshotStore + ?Sized>(
    store: &S,
    slot: SnapshotSlot,
    seal: SnapshotSeal,
) -> Result<Bytes> {
    let mut image = Vec::new();
    for piece in read_snapshot(store, slot, seal) {
        image.extend_from_slice(&piece?);
    }
    Ok(Bytes::from(image))
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// FNV-1a, continued from `hash` over `bytes` (so pieces hash as the whole).
fn fnv1a(hash: u64, bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .fold(hash, |h, b| (h ^ *b as u64).wrapping_mul(0x100_0000_01b3))
}

/// FNV-1a of a whole image.
pub(crate) fn fnv1a_of(bytes: &[u8]) -> u64 {
    fnv1a(FNV_OFFSET, bytes)
}
