//! The node's local snapshot in progress: a fuzzy cursor over the live tree,
//! stepped a slice at a time between requests, its image handed to the
//! storage a piece at a time as it is written, so the node never holds more
//! than about one piece of it.

use super::types::{Command, SnapshotPiece};
use crate::failpoints::{active, Failpoint};
use std::collections::VecDeque;
use zkd_protocol::Zxid;
use zkd_storage::data_tree::SnapshotCursor;
use zkd_storage::DataTree;

/// Nodes written per snapshot slice, and the pause between slices: about
/// half a millisecond of work every four (a large tree's walk is bound by
/// cache misses, near a microsecond a node), so a snapshot takes an eighth
/// of the loop and writes go on at nearly full speed. 125k nodes a second:
/// a tree of 500k znodes snapshots in 4 s.
pub(super) const SNAPSHOT_SLICE_NODES: usize = 500;
const SNAPSHOT_STEP_INTERVAL_MS: u64 = 4;
/// A slice also ends after this many bytes of image: with large nodes a
/// count of nodes alone would copy hundreds of MiB in one slice and stall
/// the loop past a peer's timeout.
const SNAPSHOT_STEP_BYTES: usize = 1 << 20;
/// Nodes written between looks at the slice's bytes.
const SNAPSHOT_NODES_PER_LOOK: usize = 16;
/// Bytes of image per piece handed over. Each piece is written out
/// (fdatasync) on its own, and the log's fsyncs queue behind it on the
/// disk: with 256 KiB pieces, not 1 MiB, writes' p99 while 500k znodes
/// were snapshotted fell from 3.1-3.8 ms to 2.0-2.6 ms (64 KiB was worse).
const PIECE_BYTES: usize = 256 << 10;
/// Bytes of image handed to storage and not yet written beyond which no
/// slice is written (issue 35, finding 7): on a slow disk the snapshot
/// takes longer instead of queueing a copy of the whole tree in memory.
pub(super) const MAX_SNAPSHOT_BACKLOG: u64 = 4 << 20;

/// A snapshot being written.
#[derive(Debug)]
pub(super) struct LocalSnapshot {
    cursor: SnapshotCursor,
    /// When the next slice is due (monotonic ms).
    pub(super) due_ms: u64,
    /// Whether a piece was handed over yet (the next one starts the stream).
    started: bool,
}

impl LocalSnapshot {
    /// Starts a snapshot of `tree` as it is now, its first slice due at once.
    pub(super) fn start(tree: &DataTree, now_ms: u64) -> LocalSnapshot {
        LocalSnapshot {
            cursor: tree.start_snapshot(),
            due_ms: now_ms,
            started: false,
        }
    }

    /// The zxid the image starts at.
    pub(super) fn zxid(&self) -> Zxid {
        self.cursor.zxid()
    }

    /// Writes the next slice if it is due and storage has room (`backlog`
    /// bytes wait for the disk), and hands over every full piece,
    /// `slice_nodes` nodes at most. True once the image is whole and handed
    /// over; the snapshot is then done.
    pub(super) fn step(
        &mut self,
        tree: &DataTree,
        now_ms: u64,
        slice_nodes: usize,
        backlog: u64,
        out: &mut VecDeque<Command>,
    ) -> bool {
        if now_ms < self.due_ms {
            return false;
        }
        self.due_ms = now_ms + SNAPSHOT_STEP_INTERVAL_MS;
        // Planted (unpaced-snapshots): the image is written however far the disk lags.
        if backlog > MAX_SNAPSHOT_BACKLOG && !active(Failpoint::UnpacedSnapshots) {
            return false;
        }
        let start = self.cursor.buffered();
        let mut nodes = 0;
        let done = loop {
            if self.cursor.step(tree, SNAPSHOT_NODES_PER_LOOK) {
                break true;
            }
            nodes += SNAPSHOT_NODES_PER_LOOK;
            let bytes = self.cursor.buffered().saturating_sub(start);
            if nodes >= slice_nodes || bytes >= SNAPSHOT_STEP_BYTES {
                break false;
            }
        };
        while let Some(data) = self.cursor.take_chunk(PIECE_BYTES) {
            self.hand_over(data, out);
        }
        done
    }

    /// Hands over the rest of a finished image as its last piece.
    pub(super) fn finish(self, out: &mut VecDeque<Command>) {
        out.push_back(Command::SnapshotPiece(SnapshotPiece {
            zxid: self.zxid(),
            first: !self.started,
            data: self.cursor.finish(),
            last: true,
        }));
    }

    fn hand_over(&mut self, data: bytes::Bytes, out: &mut VecDeque<Command>) {
        out.push_back(Command::SnapshotPiece(SnapshotPiece {
            zxid: self.zxid(),
            data,
            first: !self.started,
            last: false,
        }));
        self.started = true;
    }
}
