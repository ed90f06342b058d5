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

/// Chunks queued on a link beyond which the image waits for the follower.
const MAX_QUEUED_CHUNKS: usize = 4;

/// Chunks sent per stream per turn.
const CHUNKS_PER_TURN: usize = 4;

/// Bytes of image written per stream per turn: about half a millisecond of
/// the loop's time for 100-byte znodes. A turn is all the loop does while
/// it lasts: four 1 MiB chunks a turn stalled a leader's writes for tens of
/// ms (issue 52: their p99.9 during a 2M-znode SNAP was 2.8x ZooKeeper's).
const TURN_BYTES: usize = 128 << 10;

/// The pause between turns on the timer: the loop's requests go between
/// them. A loop with nothing else to do runs turns back to back
/// ([`SnapSender::idle_turn`]).
const PACE_MS: u64 = 1;

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
    /// Whether the last turn moved an image on: then an idle loop may run
    /// the next at once. Not while every image waits for its follower, or
    /// an idle loop would spin.
    busy: bool,
    /// Bytes per chunk of an image.
    chunk: usize,
    /// Bytes of image written per stream per turn.
    turn_bytes: usize,
    /// The pause between turns on the timer.
    pace_ms: u64,
}

impl Default for SnapSender {
    fn default() -> SnapSender {
        SnapSender {
            streams: BTreeMap::new(),
            next_ms: None,
            busy: false,
            chunk: MAX_SNAP_CHUNK,
            turn_bytes: TURN_BYTES,
            pace_ms: PACE_MS,
        }
    }
}

impl SnapSender {
    /// Streams in chunks of `chunk` bytes, four a turn, turn after turn:
    /// the simulator's trees are small, and only small chunks make their
    /// SNAPs take the time (and so become as fuzzy) that large trees' do.
    #[cfg(test)]
    pub fn with_chunk(chunk: usize) -> SnapSender {
        SnapSender {
            chunk,
            turn_bytes: CHUNKS_PER_TURN * chunk,
            pace_ms: 0,
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

    /// A turn if one is due: see [`idle_turn`](Self::idle_turn).
    pub fn step(&mut self, now_ms: u64, tree: &DataTree, peers: &mut Outbox) -> Vec<ServerId> {
        if self.next_ms.is_none_or(|due| now_ms < due) {
            return Vec::new();
        }
        self.turn(now_ms, tree, peers)
    }

    /// Whether a loop with nothing else to do should run
    /// [`idle_turn`](Self::idle_turn).
    pub fn has_idle_work(&self) -> bool {
        self.busy && !self.streams.is_empty()
    }

    /// Writes and sends what each follower has room for, a slice of each
    /// image; finished images release the messages held behind them.
    /// Returns the followers whose image moved on: they read it, so they are
    /// alive.
    pub fn idle_turn(&mut self, now_ms: u64, tree: &DataTree, peers: &mut Outbox) -> Vec<ServerId> {
        self.turn(now_ms, tree, peers)
    }

    fn turn(&mut self, now_ms: u64, tree: &DataTree, peers: &mut Outbox) -> Vec<ServerId> {
        let mut moved = Vec::new();
        let mut busy = false;
        let peers_streamed: Vec<ServerId> = self.streams.keys().copied().collect();
        for to in peers_streamed {
            match self.step_one(to, tree, peers) {
                Progress::Sent => {
                    busy = true;
                    moved.push(to);
                }
                Progress::Written => busy = true,
                Progress::Finished => moved.push(to),
                Progress::Waiting | Progress::LinkGone => {}
            }
        }
        self.busy = busy;
        self.next_ms = match (self.streams.is_empty(), busy) {
            (true, _) => None,
            (false, true) => Some(now_ms + self.pace_ms),
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
        let mut to_write = self.turn_bytes;
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
            if to_write == 0 {
                break;
            }
            let before = cursor.buffered();
            let done = cursor.step_until(tree, usize::MAX, chunk_size.min(before + to_write));
            to_write = to_write.saturating_sub(cursor.buffered() - before);
            if done {
                stream.finish_image(to, tree, chunk_size, peers);
                sent += 1;
            }
        }
        match (sent, to_write < self.turn_bytes) {
            (0, false) => Progress::Waiting,
            (0, true) => Progress::Written,
            _ => Progress::Sent,
        }
    }
}

/// What one turn did for a stream.
enum Progress {
    Sent,
    /// Image written, no chunk full yet.
    Written,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::member::{LinkLimits, MemberCommand};
    use crate::core::snapshot_tests::create;
    use crate::core::zab::FlowMarks;

    const FOLLOWER: ServerId = ServerId(1);

    /// About 1.3 MB of image: more than a turn, less than the link's room.
    fn tree() -> DataTree {
        let mut tree = DataTree::new();
        for counter in 1..=10_000 {
            tree.apply(&create(1, counter, "a-znode-with-a-longer-name-"));
        }
        tree
    }

    /// An outbox with the follower's link up and roomy.
    fn outbox() -> Outbox {
        let mut out = Outbox::new(LinkLimits {
            max_queued: 256 << 20,
            flow: FlowMarks::RUNTIME,
        });
        out.link_up(FOLLOWER);
        out
    }

    /// Image bytes sent so far.
    fn sent(out: &mut Outbox) -> usize {
        let mut commands = VecDeque::new();
        out.take(&mut commands);
        let chunk = |c: &MemberCommand| match c {
            MemberCommand::SnapChunk { data, .. } => data.len(),
            _ => 0,
        };
        commands.iter().map(chunk).sum()
    }

    /// A turn writes a slice of the image, not chunks of it: the leader's
    /// requests go between turns (issue 52). An idle loop may run turns back
    /// to back until the image is out.
    #[test]
    fn a_turn_writes_a_slice_of_the_image() {
        let tree = tree();
        let mut out = outbox();
        let mut sender = SnapSender::default();
        sender.start(0, FOLLOWER, &tree, &mut out);
        sender.step(0, &tree, &mut out);
        let buffered = sender
            .streams
            .get(&FOLLOWER)
            .and_then(|s| s.cursor.as_ref());
        let first = sent(&mut out) + buffered.map_or(0, SnapshotCursor::buffered);
        // A turn is at most about a millisecond of work, never a whole chunk.
        assert!(first <= TURN_BYTES + 1024, "one turn wrote {first} B");
        assert!(first < MAX_SNAP_CHUNK / 4, "one turn wrote {first} B");
        assert!(sender.has_idle_work());
        assert_eq!(
            sender.poll_timeout(),
            Some(PACE_MS),
            "the next turn waits for the timer"
        );
        let mut total = first;
        let mut turns = 1;
        while sender.sending_to(FOLLOWER) {
            sender.idle_turn(0, &tree, &mut out);
            total += sent(&mut out);
            turns += 1;
            assert!(turns < 100, "the image never ended");
        }
        assert!(total > 10 * TURN_BYTES, "a {total} B image");
        assert!(turns >= total / TURN_BYTES, "{total} B in {turns} turns");
    }

    /// A follower whose link is full stops the idle turns: the loop would
    /// otherwise spin on an image that cannot move.
    #[test]
    fn a_full_link_leaves_no_idle_work() {
        let tree = tree();
        let mut out = outbox();
        let mut sender = SnapSender::with_chunk(4096);
        sender.start(0, FOLLOWER, &tree, &mut out);
        let mut turns = 0;
        while sender.has_idle_work() || turns == 0 {
            sender.idle_turn(0, &tree, &mut out);
            turns += 1;
            assert!(turns < 100, "idle work never ran out");
        }
        assert!(sender.sending_to(FOLLOWER), "the image is not out yet");
        assert_eq!(out.queued_bytes(FOLLOWER), Some(MAX_QUEUED_CHUNKS * 4096));
        assert_eq!(
            sender.poll_timeout(),
            Some(RETRY_MS),
            "it looks again later"
        );
    }
}
