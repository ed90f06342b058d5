//! Serialized DataTree images, named by the zxid they include.

use crate::error::Result;
use bytes::Bytes;
use zkd_protocol::Zxid;

/// A store of snapshots.
///
/// Images are passed and returned whole (`Bytes`): a snapshot costs about
/// twice its size in memory while saved or loaded (the image and its sealed
/// copy). Streaming chunked images (for a leader's SNAP and a follower's
/// install of it) is not implemented yet; see the crate's notes.
///
/// Snapshots are *fuzzy* (see `data_tree::image`): the one named `Z` may
/// also hold the effects of txns applied after `Z` while it was written.
/// Those txns were applied, hence committed, so no TRUNC removes them.
pub trait SnapshotStore {
    /// Stores the image of the tree as of `zxid`. **Durable on return.**
    fn save_snapshot(&mut self, zxid: Zxid, image: Bytes) -> Result<()>;

    /// The newest snapshot with zxid at or below `zxid` whose checksum
    /// verifies, skipping damaged ones. Recovery asks for the newest one at
    /// or below the log's end, so a snapshot past a truncation is never
    /// loaded even if its deletion was cut short by a crash.
    fn latest_snapshot_at_or_before(&self, zxid: Zxid) -> Result<Option<(Zxid, Bytes)>>;

    /// The newest snapshot whose checksum verifies, skipping damaged ones.
    fn latest_snapshot(&self) -> Result<Option<(Zxid, Bytes)>> {
        self.latest_snapshot_at_or_before(Zxid(i64::MAX))
    }

    /// Deletes every snapshot with zxid greater than `zxid`. **Durable on
    /// return.** A TRUNC to `zxid` does this after cutting the log: a
    /// snapshot holding txns past the cut must never be reloaded
    /// (ZOOKEEPER-1549). Cost: one delete per snapshot removed.
    fn delete_snapshots_after(&mut self, zxid: Zxid) -> Result<()>;

    /// Keeps the newest `retain` snapshots and deletes older ones. Returns the
    /// zxid of the oldest snapshot kept, so the caller can purge the log up to it.
    fn purge_snapshots(&mut self, retain: usize) -> Result<Option<Zxid>>;
}

/// Wraps an image with a trailing FNV-1a checksum so damage is detected on load.
pub fn seal(image: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(image.len() + 8);
    out.extend_from_slice(image);
    out.extend_from_slice(&fnv1a(image).to_be_bytes());
    Bytes::from(out)
}

/// Verifies and strips the checksum added by [`seal`].
pub fn unseal(sealed: &Bytes) -> Option<Bytes> {
    if sealed.len() < 8 {
        return None;
    }
    let (image, sum) = sealed.split_at(sealed.len() - 8);
    (fnv1a(image).to_be_bytes() == sum).then(|| sealed.slice(..image.len()))
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ *b as u64).wrapping_mul(0x100_0000_01b3)
    })
}
