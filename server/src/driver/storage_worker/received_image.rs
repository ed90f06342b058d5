//! A follower's SNAP decoded as it streams in, beside the staged file it is
//! written to: once installed, the rebuild that follows takes this tree
//! instead of reading the file back and decoding it again. At 2M znodes that
//! reload was 1.9 s of a 6.3 s rejoin (issue 52), spent after the last byte
//! had arrived; decoding as the pieces come overlaps it with the transfer.

use bytes::Bytes;
use std::sync::mpsc::{sync_channel, SyncSender};
use std::thread::JoinHandle;
use zkd_protocol::{DecodeError, Zxid};
use zkd_storage::data_tree::ImageDecoder;
use zkd_storage::DataTree;

/// Pieces waiting for the decoding thread (1 MiB each from a runtime
/// leader): past them the storage thread waits for it.
const QUEUED_PIECES: usize = 8;

/// The image streaming in, then the tree it made.
#[derive(Debug, Default)]
pub(super) enum ReceivedImage {
    /// None, or one that could not be decoded: the rebuild reads the file.
    #[default]
    Nothing,
    Decoding(Decoding),
    /// The tree of the image installed as the snapshot at this zxid.
    Installed(Zxid, Box<DataTree>),
}

/// A thread of its own decodes the pieces, so the storage thread goes on
/// writing them out meanwhile: on the storage thread, decoding slowed a
/// 2M-znode SNAP's transfer from 2.7 s to 4.8 s.
#[derive(Debug)]
pub(super) struct Decoding {
    pieces: SyncSender<Bytes>,
    decoder: JoinHandle<Result<DataTree, DecodeError>>,
}

impl Decoding {
    fn start() -> Option<Decoding> {
        let (pieces, arriving) = sync_channel::<Bytes>(QUEUED_PIECES);
        let decode = move || {
            let mut decoder = ImageDecoder::new();
            for piece in arriving {
                decoder.feed(&piece)?;
            }
            decoder.finish()
        };
        let spawned = std::thread::Builder::new()
            .name("zkd-snap-decode".into())
            .spawn(decode);
        match spawned {
            Ok(decoder) => Some(Decoding { pieces, decoder }),
            Err(e) => {
                tracing::warn!(
                    "cannot start a thread to decode a SNAP ({e}); the rebuild will read the file"
                );
                None
            }
        }
    }

    /// The tree, once every piece was given (the sender is dropped here).
    fn finish(self) -> Result<DataTree, String> {
        drop(self.pieces);
        match self.decoder.join() {
            Ok(decoded) => decoded.map_err(|e| e.to_string()),
            Err(_) => Err("the decoding thread panicked".to_string()),
        }
    }
}

impl ReceivedImage {
    /// A piece of the image, appended to the staged file (`first` starts a
    /// new one).
    pub fn piece(&mut self, first: bool, data: &Bytes) {
        if first {
            // An image cut short, if any, ends with an error nobody needs.
            if let ReceivedImage::Decoding(old) = std::mem::take(self) {
                let _ = old.finish();
            }
            *self = Decoding::start().map_or(ReceivedImage::Nothing, ReceivedImage::Decoding);
        }
        let ReceivedImage::Decoding(decoding) = self else {
            return;
        };
        if decoding.pieces.send(data.clone()).is_err() {
            // The decoder stopped: the piece before did not decode.
            if let ReceivedImage::Decoding(failed) = std::mem::take(self) {
                let e = failed.finish().err().unwrap_or_default();
                // The file is the record; the install checks it and the rebuild reads it.
                tracing::warn!("a SNAP piece did not decode ({e}); the rebuild will read the file");
            }
        }
    }

    /// The staged image was installed as the snapshot at `zxid`.
    pub fn installed(&mut self, zxid: Zxid) {
        *self = match std::mem::take(self) {
            ReceivedImage::Decoding(decoding) => match decoding.finish() {
                Ok(tree) if tree.last_zxid() == zxid => {
                    ReceivedImage::Installed(zxid, Box::new(tree))
                }
                Ok(tree) => {
                    let decoded = tree.last_zxid();
                    tracing::warn!(%zxid, %decoded, "a SNAP decoded to another zxid; the rebuild will read the file");
                    ReceivedImage::Nothing
                }
                Err(e) => {
                    tracing::warn!(%zxid, "a SNAP did not decode ({e}); the rebuild will read the file");
                    ReceivedImage::Nothing
                }
            },
            _ => ReceivedImage::Nothing,
        };
    }

    /// The installed image's zxid and tree, if one was decoded; nothing is
    /// kept after.
    pub fn take(&mut self) -> Option<(Zxid, DataTree)> {
        match std::mem::take(self) {
            ReceivedImage::Installed(zxid, tree) => Some((zxid, *tree)),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::snapshot_tests::create;

    fn tree() -> DataTree {
        let mut tree = DataTree::new();
        for counter in 1..=2_000 {
            tree.apply(&create(1, counter, "n"));
        }
        tree
    }

    /// The image in pieces of `size` bytes, as a SNAP brings them.
    fn pieces(tree: &DataTree, size: usize) -> Vec<bytes::Bytes> {
        let mut cursor = tree.start_snapshot();
        let mut out = Vec::new();
        while !cursor.step(tree, 100) {
            while let Some(chunk) = cursor.take_chunk(size) {
                out.push(chunk);
            }
        }
        out.push(cursor.finish());
        out
    }

    #[test]
    fn the_installed_image_is_the_tree_it_was_made_of() {
        let tree = tree();
        let mut received = ReceivedImage::default();
        for (i, piece) in pieces(&tree, 4096).iter().enumerate() {
            received.piece(i == 0, piece);
        }
        received.installed(tree.last_zxid());
        let (zxid, got) = received.take().expect("a decoded tree");
        assert_eq!(zxid, tree.last_zxid());
        assert_eq!(got.digest(), tree.digest());
        assert_eq!(got.node_count(), tree.node_count());
        assert!(received.take().is_none(), "taken once");
    }

    #[test]
    fn a_damaged_or_other_image_leaves_the_file_to_the_rebuild() {
        let tree = tree();
        let all = pieces(&tree, 4096);
        let mut received = ReceivedImage::default();
        for (i, piece) in all.iter().enumerate().filter(|(i, _)| *i != 1) {
            received.piece(i == 0, piece);
        }
        received.installed(tree.last_zxid());
        assert!(received.take().is_none(), "a piece was missing");
        for (i, piece) in all.iter().enumerate() {
            received.piece(i == 0, piece);
        }
        received.installed(zkd_protocol::Zxid::new(9, 9));
        assert!(received.take().is_none(), "installed at another zxid");
        received.piece(true, &all[0]);
        received.installed(tree.last_zxid());
        assert!(received.take().is_none(), "cut short");
    }
}
