//! Serialized DataTree images, named by the zxid they include, stored and
//! read as chunks of at most [`SNAPSHOT_CHUNK`] bytes: an image is never
//! needed whole in memory to be saved, sent, received or loaded.
//!
//! A snapshot is its chunks plus a [`SnapshotSeal`] (count, length and an
//! FNV-1a checksum over the image), written last: chunks without a seal are
//! an incomplete snapshot, invisible to readers. The one [`SnapshotSlot::Staging`]
//! area holds a SNAP as it streams in from the leader, so the member's own
//! snapshots stay intact until the whole image arrived and is installed.
//!
//! Snapshots are *fuzzy* (see `data_tree::image`): the one named `Z` may
//! also hold the effects of txns applied after `Z` while it was written.
//! Those txns were applied, hence committed, so no TRUNC removes them.

use crate::error::{Result, StorageError};
use bytes::Bytes;
use zkd_protocol::Zxid;

/// The largest chunk [`SnapshotStore::save_snapshot`] writes (1 MiB), the
/// same as a SNAP's chunks on the wire.
pub const SNAPSHOT_CHUNK: usize = 1 << 20;

/// Where a snapshot's chunks live.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SnapshotSlot {
    /// A snapshot of this member's, named by its zxid.
    Saved(Zxid),
    /// A SNAP being received from the leader (one at a time).
    Staging,
}

/// What a complete snapshot's chunks add up to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SnapshotSeal {
    /// Chunks, numbered from 0.
    pub chunks: u32,
    /// Bytes of the image.
    pub len: u64,
    /// FNV-1a of the image.
    pub checksum: u64,
}

impl SnapshotSeal {
    /// The seal of an empty image, to [`add`](Self::add) chunks to.
    pub fn empty() -> SnapshotSeal {
        SnapshotSeal {
            chunks: 0,
            len: 0,
            checksum: FNV_OFFSET,
        }
    }

    /// Accounts for the image's next chunk.
    pub fn add(&mut self, chunk: &[u8]) {
        self.chunks += 1;
        self.len += chunk.len() as u64;
        self.checksum = fnv1a(self.checksum, chunk);
    }
}

/// A sealed snapshot whose chunks verified when it was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SnapshotRef {
    /// The zxid the snapshot is named by.
    pub zxid: Zxid,
    /// Its seal.
    pub seal: SnapshotSeal,
}

/// A store of snapshots. Implementations provide the chunk and seal
/// primitives; everything a caller uses is built on them here.
pub trait SnapshotStore {
    /// Writes chunk `index` of `slot`, replacing one there. Not durable until
    /// [`SnapshotStore::sync_snapshots`].
    fn put_snapshot_chunk(&mut self, slot: SnapshotSlot, index: u32, data: &[u8]) -> Result<()>;

    /// Chunk `index` of `slot`, if written.
    fn snapshot_chunk(&self, slot: SnapshotSlot, index: u32) -> Result<Option<Bytes>>;

    /// Records the seal of the snapshot at `zxid`. Not durable until synced.
    fn put_snapshot_seal(&mut self, zxid: Zxid, seal: SnapshotSeal) -> Result<()>;

    /// Every sealed snapshot, oldest first.
    fn snapshot_seals(&self) -> Result<Vec<(Zxid, SnapshotSeal)>>;

    /// Every zxid with a seal or chunks (incomplete ones too), oldest first.
    fn snapshot_zxids(&self) -> Result<Vec<Zxid>>;

    /// Removes the seal (first) and then the chunks of `slot`. Not durable
    /// until synced.
    fn remove_snapshot(&mut self, slot: SnapshotSlot) -> Result<()>;

    /// Makes every snapshot write and removal so far durable.
    fn sync_snapshots(&mut self) -> Result<()>;

    /// Stores the image of the tree as of `zxid`, in chunks. **Durable on return.**
    fn save_snapshot(&mut self, zxid: Zxid, image: Bytes) -> Result<()> {
        let slot = SnapshotSlot::Saved(zxid);
        self.remove_snapshot(slot)?;
        let mut writer = SnapshotWriter::new(slot);
        for start in (0..image.len()).step_by(SNAPSHOT_CHUNK) {
            let end = (start + SNAPSHOT_CHUNK).min(image.len());
            writer.write(self, &image[start..end])?;
        }
        let seal = writer.seal();
        self.put_snapshot_seal(zxid, seal)?;
        self.sync_snapshots()
    }

    /// The newest sealed snapshot at or below `zxid` whose chunks verify,
    /// skipping damaged ones. Recovery asks for the newest one at or below
    /// the log's end, so a snapshot past a truncation is never loaded even
    /// if its deletion was cut short by a crash. Cost: reads the snapshot
    /// once, a chunk at a time.
    fn latest_snapshot_at_or_before(&self, zxid: Zxid) -> Result<Option<SnapshotRef>> {
        for (at, seal) in self.snapshot_seals()?.into_iter().rev() {
            if at > zxid {
                continue;
            }
            let found = SnapshotRef { zxid: at, seal };
            match read_snapshot(self, SnapshotSlot::Saved(at), seal).try_for_each(|c| c.map(drop)) {
                Ok(()) => return Ok(Some(found)),
                Err(StorageError::Corrupt(e)) => {
                    tracing::warn!(zxid = %at, "skipping damaged snapshot: {e}")
                }
                Err(e) => return Err(e),
            }
        }
        Ok(None)
    }

    /// The newest snapshot whose chunks verify, skipping damaged ones.
    fn latest_snapshot(&self) -> Result<Option<SnapshotRef>> {
        self.latest_snapshot_at_or_before(Zxid(i64::MAX))
    }

    /// Deletes every snapshot with zxid greater than `zxid`, incomplete ones
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
    /// (and incomplete ones older than those). Returns the zxid of the oldest
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
}

/// Writes a snapshot's chunks in order and computes its seal as it goes.
#[derive(Debug)]
pub struct SnapshotWriter {
    slot: SnapshotSlot,
    seal: SnapshotSeal,
}

impl SnapshotWriter {
    /// A writer of `slot` from its first chunk on.
    pub fn new(slot: SnapshotSlot) -> SnapshotWriter {
        SnapshotWriter {
            slot,
            seal: SnapshotSeal::empty(),
        }
    }

    /// Writes the next chunk (not durable).
    pub fn write<S: SnapshotStore + ?Sized>(&mut self, store: &mut S, data: &[u8]) -> Result<()> {
        store.put_snapshot_chunk(self.slot, self.seal.chunks, data)?;
        self.seal.add(data);
        Ok(())
    }

    /// Bytes written so far.
    pub fn len(&self) -> u64 {
        self.seal.len
    }

    /// Whether nothing was written yet.
    pub fn is_empty(&self) -> bool {
        self.seal.chunks == 0
    }

    /// The seal of everything written.
    pub fn seal(&self) -> SnapshotSeal {
        self.seal
    }
}

/// The chunks of a sealed snapshot in order, one read at a time. The last
/// item is an error (`Corrupt`) if a chunk is missing or the length or
/// checksum do not match the seal.
pub fn read_snapshot<S: SnapshotStore + ?Sized>(
    store: &S,
    slot: SnapshotSlot,
    seal: SnapshotSeal,
) -> impl Iterator<Item = Result<Bytes>> + '_ {
    let mut read = SnapshotSeal::empty();
    let mut done = false;
    std::iter::from_fn(move || {
        if done {
            return None;
        }
        let index = read.chunks;
        if index == seal.chunks {
            done = true;
            return (read != seal).then(|| {
                Err(StorageError::Corrupt(format!(
                    "snapshot {slot:?}: read {read:?}, sealed as {seal:?}"
                )))
            });
        }
        let chunk = match store.snapshot_chunk(slot, index) {
            Ok(Some(chunk)) => chunk,
            Ok(None) => {
                done = true;
                return Some(Err(StorageError::Corrupt(format!(
                    "snapshot {slot:?}: chunk {index} of {} missing",
                    seal.chunks
                ))));
            }
            Err(e) => {
                done = true;
                return Some(Err(e));
            }
        };
        read.add(&chunk);
        Some(Ok(chunk))
    })
}

/// A whole snapshot in memory (tests and small tools only).
pub fn read_whole<S: SnapshotStore + ?Sized>(
    store: &S,
    slot: SnapshotSlot,
    seal: SnapshotSeal,
) -> Result<Bytes> {
    let mut image = Vec::with_capacity(seal.len.min(1 << 30) as usize);
    for chunk in read_snapshot(store, slot, seal) {
        image.extend_from_slice(&chunk?);
    }
    Ok(Bytes::from(image))
}

/// Copies the staged SNAP into the saved snapshot at `zxid` and seals it.
/// **Durable on return.** Cost: one read and one write of the image.
pub fn save_staged<S: SnapshotStore + ?Sized>(
    store: &mut S,
    zxid: Zxid,
    seal: SnapshotSeal,
) -> Result<()> {
    let slot = SnapshotSlot::Saved(zxid);
    store.remove_snapshot(slot)?;
    let mut writer = SnapshotWriter::new(slot);
    for index in 0..seal.chunks {
        let chunk = store
            .snapshot_chunk(SnapshotSlot::Staging, index)?
            .ok_or_else(|| {
                StorageError::Corrupt(format!("staged snapshot: chunk {index} missing"))
            })?;
        writer.write(store, &chunk)?;
    }
    if writer.seal() != seal {
        return Err(StorageError::Corrupt(format!(
            "staged snapshot: sealed as {seal:?}, holds {:?}",
            writer.seal()
        )));
    }
    store.put_snapshot_seal(zxid, seal)?;
    store.sync_snapshots()?;
    store.remove_snapshot(SnapshotSlot::Staging)
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// FNV-1a, continued from `hash` over `bytes` (so chunks hash as the whole).
fn fnv1a(hash: u64, bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .fold(hash, |h, b| (h ^ *b as u64).wrapping_mul(0x100_0000_01b3))
}

/// FNV-1a of a whole image.
pub(crate) fn fnv1a_of(bytes: &[u8]) -> u64 {
    fnv1a(FNV_OFFSET, bytes)
}
