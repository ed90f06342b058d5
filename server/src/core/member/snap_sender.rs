//! A leader's SNAPs in flight. Each follower's image is written from the
//! live tree a few nodes at a time (a fuzzy snapshot, as ZooKeeper's leader
//! serializes its tree while it keeps committing) and sent only as fast as
//! that follower reads, so the leader never holds more than a few chunks of
//! it. What the role sends that follower meanwhile waits behind the image,
//! as ZooKeeper's LearnerHandler queues packets behind its snapshot, and
//! follows it as fast as the follower reads. What waits is bounded by the
//! link's own bound: past it the follower has fallen too far behind, and
//! its link closes (it syncs again).

use super::outbox::{weight, Outbox};
use crate::core::election::ServerId;
use crate::core::zab::ZabMessage;
use std::collections::{BTreeMap, VecDeque};
use zkd_protocol::peer::zab::MAX_SNAP_CHUNK;
use zkd_storage::data_tree::SnapshotCursor;
use zkd_storage::DataTree;

/// Nodes written between checks of the buffered size: one, so the buffer
/// stays within a node of a chunk even when nodes are large (a node's data
/// is at most jute's 1 MiB, a chunk's worth).
const NODES_PER_STEP: usize = 1;

/// Chunks queued on a link beyond which the image waits for the follower.
const MAX_QUEUED_CHUNKS: usize = 4;

/// Chunks sent per stream per turn of the node loop, so clients are served
/// between them.
const CHUNKS_PER_TURN: usize = 4;

/// How long an image waiting for its follower waits before it looks again.
const RETRY_MS: u64 = 5;

/// One follower's image in flight, then what waited behind it.
struct Stream {
    /// None once the image is sent: the held messages are going out.
    cursor: Option<SnapshotCursor>,
    offset: u64,
    held: VecDeque<ZabMessage>,
    held_bytes: usize,
}

/// Every SNAP the leader is streaming, by follower.
pub(crate) struct SnapSender {
    streams: BTreeMap<ServerId, Stream>,
    /// When the streams next have work (None: no stream).
    next_ms: Option<u64>,
    /// Bytes per chunk of an image.
    chunk: usize,
}

impl Default for SnapSender {
    fn default() -> SnapSender {
        SnapSender {
            streams: BTreeMap::new(),
            next_ms: None,
            chunk: MAX_SNAP_CHUNK,
        }
    }
}

impl SnapSender {
    /// Streams in chunks of `chunk` bytes: the simulator's trees are small,
    /// and only small chunks make their SNAPs take the time (and so become
    /// as fuzzy) that large trees' do.
    #[cfg(test)]
    pub fn with_chunk(chunk: usize) -> SnapSender {
        SnapSender {
            chunk,
            ..SnapSender::default()
        }
    }

    /// Starts streaming `to` an image of `tree` as it is now.
    pub fn start(&mut self, now_ms: u64, to: ServerId, tree: &DataTree, peers: &mut Outbox) {
        let cursor = tree.start_snapshot();
        tracing::info!(peer = %to, zxid = %cursor.zxid(), "leader: streaming a snapshot");
        peers.send_snap_start(to, cursor.zxid());
        let stream = Stream {
            cursor: Some(cursor),
            offset: 0,
            held: VecDeque::new(),
            held_bytes: 0,
        };
        // A newer sync with the same follower replaces an older one outright.
        self.streams.insert(to, stream);
        self.next_ms = Some(now_ms);
    }

    /// How many images are streaming.
    pub fn streams(&self) -> usize {
        self.streams.len()
    }

    /// Whether an image is streaming to `to`.
    pub fn sending_to(&self, to: ServerId) -> bool {
        self.streams.contains_key(&to)
    }

    /// Sends `message` to `to`, or holds it while an image (or what waits
    /// behind one) is on its way there. A follower that has more waiting
    /// than its link may queue is dropped.
    pub fn send(&mut self, to: ServerId, message: ZabMessage, peers: &mut Outbox) {
        let Some(stream) = self.streams.get_mut(&to) else {
            return peers.send_zab(to, message);
        };
        stream.held_bytes += weight(&message);
        stream.held.push_back(message);
        if stream.held_bytes > peers.max_queued_bytes() {
            tracing::warn!(
                peer = %to,
                held = stream.held_bytes,
                "leader: a follower fell too far behind during its snapshot; closing its link"
            );
            self.streams.remove(&to);
            peers.close_zab(to);
        }
    }

    /// Bytes of messages waiting behind the image streaming to `to`.
    pub fn held_bytes(&self, to: ServerId) -> usize {
        self.streams.get(&to).map_or(0, |s| s.held_bytes)
    }

    /// When [`step`](Self::step) next has work.
    pub fn poll_timeout(&self) -> Option<u64> {
        self.next_ms
    }

    /// Sends what each follower has room for; finished images release the
    /// messages held behind them. Returns the followers whose image moved
    /// on: they read it, so they are alive.
    pub fn step(&mut self, now_ms: u64, tree: &DataTree, peers: &mut Outbox) -> Vec<ServerId> {
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

    fn step_one(&mut self, to: ServerId, tree: &DataTree, peers: &mut Outbox) -> Progress {
        let chunk_size = self.chunk;
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
                Some(queued) if queued >= MAX_QUEUED_CHUNKS * chunk_size => break,
                Some(_) => {}
            }
            let Some(cursor) = stream.cursor.as_mut() else {
                if !stream.release(to, chunk_size, peers) {
                    self.streams.remove(&to);
                    return Progress::Finished;
                }
                sent += 1;
                continue;
            };
            if let Some(chunk) = cursor.take_chunk(chunk_size) {
                let len = chunk.len() as u64;
                peers.send_snap_chunk(to, stream.offset, chunk, None);
                stream.offset += len;
                sent += 1;
                continue;
            }
            let mut done = false;
            while !done && cursor.buffered() < chunk_size {
                done = cursor.step(tree, NODES_PER_STEP);
            }
            if done {
                stream.finish_image(to, tree, chunk_size, peers);
                sent += 1;
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

impl Stream {
    /// Sends the image's tail, marked with how far the tree got while it
    /// was written; the held messages follow it.
    fn finish_image(
        &mut self,
        to: ServerId,
        tree: &DataTree,
        chunk_size: usize,
        peers: &mut Outbox,
    ) {
        let Some(cursor) = self.cursor.take() else {
            return;
        };
        let zxid = cursor.zxid();
        let fuzzy_through = tree.last_zxid();
        let mut rest = cursor.finish();
        while rest.len() > chunk_size {
            let chunk = rest.split_to(chunk_size);
            let len = chunk.len() as u64;
            peers.send_snap_chunk(to, self.offset, chunk, None);
            self.offset += len;
        }
        let total = self.offset + rest.len() as u64;
        peers.send_snap_chunk(to, self.offset, rest, Some(fuzzy_through));
        tracing::info!(peer = %to, %zxid, %fuzzy_through, bytes = total, held = self.held_bytes, "leader: snapshot sent");
    }

    /// Sends held messages, a chunk's worth; false once none are left.
    fn release(&mut self, to: ServerId, chunk_size: usize, peers: &mut Outbox) -> bool {
        let mut budget = chunk_size;
        while let Some(message) = self.held.pop_front() {
            let bytes = weight(&message);
            self.held_bytes -= bytes;
            peers.send_zab(to, message);
            budget = budget.saturating_sub(bytes);
            if budget == 0 {
                return true;
            }
        }
        false
    }
}
