//! Serialized DataTree images, named by the zxid they include.

use crate::error::Result;
use bytes::Bytes;
use zkd_protocol::Zxid;

/// A store of snapshots.
pub trait SnapshotStore {
    /// Stores the image of the tree as of `zxid`. **Durable on return.**
    fn save_snapshot(&mut self, zxid: Zxid, image: Bytes) -> Result<()>;

    /// The newest snapshot whose checksum verifies, skipping damaged ones.
    fn latest_snapshot(&self) -> Result<Option<(Zxid, Bytes)>>;

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
