//! A leader's SNAPs in flight. Each follower's image is written from the
//! live tree a few nodes at a time (a fuzzy snapshot, as ZooKeeper's leader
//! serializes its tree while it keeps committing) and sent only as fast as
//! that follower reads, so the leader never holds more than a few chunks of
//! it. What the role sends that follower meanwhile waits behind the image,
//! as ZooKeeper's LearnerHandler queues packets behind its snapshot.

use super::peer::PeerNetwork;
use crate::core::election::ServerId;
use crate::core::zab::ZabMessage;
use std::collections::BTreeMap;
use zkd_protocol::peer::zab::MAX_SNAP_CHUNK;
use zkd_storage::data_tree::SnapshotCursor;
use zkd_storage::DataTree;

/// Nodes written between checks of the buffered size: one, so the buffer
/// stays within a node of a chunk even when nodes are large (a node's data
/// is at most jute's 1 MiB, a chunk's worth).
const NODES_PER_STEP: usize = 1;

/// Bytes queued on a link beyond which the image waits for the follower.
const MAX_QUEUED: usize = 4 * MAX_SNAP_CHUNK;

/// Chunks sent per stream per turn of the node loop, so clients are served
/// between them.
const CHUNKS_PER_TURN: usize = 4;

/// How long an image waiting for its follower waits before it looks again.
const RETRY_MS: u64 = 5;

/// One follower's image in flight.
struct Stream {
    cursor: SnapshotCursor,
    offset: u64,
    held: Vec<ZabMessage>,
}

/// Every SNAP the leader is streaming, by follower.
#[derive(Default)]
pub(super) struct SnapSender {
    streams: BTreeMap<ServerId, Stream>,
    /// When the streams next have work (None: no stream).
    next_ms: Option<u64>,
}

impl SnapSender {
    /// Starts streaming `to` an image of `tree` as it is now.
    pub fn start(&mut self, now_ms: u64, to: ServerId, tree: &DataTree, peers: &mut PeerNetwork) {
        let cursor = tree.start_snapshot();
        tracing::info!(peer = %to, zxid = %cursor.zxid(), "leader: streaming a snapshot");
        peers.send_snap_start(to, cursor.zxid());
        let stream = Stream {
            cursor,
            offset: 0,
            held: Vec::new(),
        };
        // A newer sync with the same follower replaces an older one outright.
        self.streams.insert(to, stream);
        self.next_ms = Some(now_ms);
    }

    /// Sends `message` to `to`, or holds it while an image is on its way there.
    pub fn send(&mut self, to: ServerId, message: ZabMessage, peers: &mut PeerNetwork) {
        match self.streams.get_mut(&to) {
            Some(stream) => stream.held.push(message),
            None => peers.send_zab(to, message),
        }
    }

    /// When [`step`](Self::step) next has work.
    pub fn poll_timeout(&self) -> Option<u64> {
        self.next_ms
    }

    /// Sends what each follower has room for; finished images release the
    /// messages held behind them. Returns the followers whose image moved
    /// on: they read it, so they are alive.
    pub fn step(&mut self, now_ms: u64, tree: &DataTree, peers: &mut PeerNetwork) -> Vec<ServerId> {
        let mut moved = Vec::new();
        if self.next_ms.is_none_or(|due| now_ms < due) {
            return moved;
        }
        let mut busy = false;
        let peers_streamed: Vec<ServerId> = self.streams.keys().copied().collect();
        for to in peers_streamed {
            match self.step_one(to, tree, peers) {
                Progress::Sent => {
                    busy = true;
                    moved.push(to);
                }
                Progress::Finished => moved.push(to),
                Progress::Waiting | Progress::LinkGone => {}
            }
        }
        self.next_ms = match (self.streams.is_empty(), busy) {
            (true, _) => None,
            (false, true) => Some(now_ms),
            (false, false) => Some(now_ms + RETRY_MS),
        };
        moved
    }

    /// Drops the image to `peer` and what waited behind it (its link closed).
    pub fn cancel(&mut self, peer: ServerId) {
        self.streams.remove(&peer);
    }

    /// Drops every image (the role ended).
    pub fn clear(&mut self) {
        self.streams.clear();
        self.next_ms = None;
    }

    fn step_one(&mut self, to: ServerId, tree: &DataTree, peers: &mut PeerNetwork) -> Progress {
        let Some(stream) = self.streams.get_mut(&to) else {
            return Progress::Finished;
        };
        let mut sent = 0;
        while sent < CHUNKS_PER_TURN {
            match peers.queued_bytes(to) {
                None => {
                    tracing::info!(peer = %to, "leader: snapshot abandoned, the link closed");
                    self.streams.remove(&to);
                    return Progress::LinkGone;
                }
                Some(queued) if queued >= MAX_QUEUED => break,
                Some(_) => {}
            }
            if let Some(chunk) = stream.cursor.take_chunk(MAX_SNAP_CHUNK) {
                let len = chunk.len() as u64;
                peers.send_snap_chunk(to, stream.offset, chunk, None);
                stream.offset += len;
                sent += 1;
                continue;
            }
            let mut done = false;
            while !done && stream.cursor.buffered() < MAX_SNAP_CHUNK {
                done = stream.cursor.step(tree, NODES_PER_STEP);
            }
            if done {
                if let Some(stream) = self.streams.remove(&to) {
                    finish(to, stream, tree, peers);
                }
                return Progress::Finished;
            }
        }
        if sent > 0 {
            Progress::Sent
        } else {
            Progress::Waiting
        }
    }
}

/// What one turn did for a stream.
enum Progress {
    Sent,
    Waiting,
    Finished,
    LinkGone,
}

/// Sends the image's tail, marked with how far the tree got while it was
/// written, then everything held behind it.
fn finish(to: ServerId, mut stream: Stream, tree: &DataTree, peers: &mut PeerNetwork) {
    let zxid = stream.cursor.zxid();
    let fuzzy_through = tree.last_zxid();
    let mut rest = stream.cursor.finish();
    while rest.len() > MAX_SNAP_CHUNK {
        let chunk = rest.split_to(MAX_SNAP_CHUNK);
        let len = chunk.len() as u64;
        peers.send_snap_chunk(to, stream.offset, chunk, None);
        stream.offset += len;
    }
    let total = stream.offset + rest.len() as u64;
    peers.send_snap_chunk(to, stream.offset, rest, Some(fuzzy_through));
    tracing::info!(peer = %to, %zxid, %fuzzy_through, bytes = total, "leader: snapshot sent");
    for message in stream.held {
        peers.send_zab(to, message);
    }
}
