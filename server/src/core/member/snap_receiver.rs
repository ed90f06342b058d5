//! A follower's SNAP streaming in: each piece goes to the storage thread's
//! staging slot as it arrives, and the role gets the image once the last
//! piece is queued, as a staged image that its install copies into place.
//! Each piece holds its share of the bytes a member lets into flight until
//! the storage thread has written it, so the link reads no faster than the
//! disk writes.

use crate::core::peer_event::SnapPiece;
use crate::core::storage_job::StorageJob;
use crate::core::zab::{SnapshotSource, ZabMessage};
use crate::core::ReadPermit;
use zkd_protocol::Zxid;
use zkd_storage::snapshot::SnapshotSeal;

/// The SNAP being received.
pub(super) struct SnapReceiver {
    zxid: Zxid,
    seal: SnapshotSeal,
}

/// What a piece gave.
pub(super) struct Received {
    /// The storage job that stages the piece.
    pub job: StorageJob,
    /// The SNAP for the role, once the last piece arrived.
    pub snap: Option<ZabMessage>,
}

impl SnapReceiver {
    /// Takes the next piece of the image. The link's decoder has checked that
    /// pieces are contiguous from offset 0, so a piece at 0 starts a new image.
    pub fn receive(
        receiving: &mut Option<SnapReceiver>,
        piece: SnapPiece,
        permit: ReadPermit,
    ) -> Received {
        let receiver = match receiving {
            Some(r) if piece.offset != 0 && r.zxid == piece.zxid => r,
            _ => receiving.insert(SnapReceiver {
                zxid: piece.zxid,
                seal: SnapshotSeal::empty(),
            }),
        };
        receiver.seal.add(&piece.data);
        let job = StorageJob::StageSnapshotPiece {
            first: piece.offset == 0,
            data: piece.data,
            permit,
        };
        let Some(fuzzy_through) = piece.fuzzy_through else {
            return Received { job, snap: None };
        };
        let seal = receiver.seal;
        let zxid = receiver.zxid;
        *receiving = None;
        tracing::info!(%zxid, bytes = seal.len, "follower: snapshot received");
        Received {
            job,
            snap: Some(ZabMessage::Snap {
                zxid,
                image: SnapshotSource::Staged(seal),
                fuzzy_through,
            }),
        }
    }
}
