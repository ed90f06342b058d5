//! What both kinds of peer link share: a frame reader that owns its buffer and
//! notices a peer stalling mid-frame, an outbox the member loop fills without
//! blocking, and the writer that drains it in batches.
//!
//! ```text
//! member loop ──push/replace──▶ Outbox ──take (all queued)──▶ write_loop: write each, flush once
//! socket ──read_buf──▶ FrameReader (two phases: whole frame? then decode) ──▶ link's read loop
//! ```

use super::gate::{self, Gate};
use super::stream::{PeerRead, PeerWrite};
use crate::driver::link_bound::passes_bound;
use bytes::{Bytes, BytesMut};
use std::collections::VecDeque;
use std::fmt;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::Duration;
use std::time::Instant;
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufWriter};
use tokio::sync::Notify;
use tokio_util::codec::{Decoder, Encoder};
use zkd_protocol::peer::{PeerCodec, PeerFrameError, PeerMessage};

/// Read buffer reserved up front, and the writer's batching buffer.
const IO_BUFFER_BYTES: usize = 64 * 1024;

/// Why a link ended. Faults of the peer are logged as warnings; the rest are the
/// ordinary ends of a connection.
#[derive(Debug)]
pub(super) enum LinkEnd {
    /// The peer closed the connection between frames.
    Eof,
    /// The socket failed.
    Io(io::Error),
    /// A frame could not be read (oversized, negative length, undecodable, invalid).
    Frame(PeerFrameError),
    /// The peer closed the connection in the middle of a frame.
    Truncated,
    /// A partial frame sat in the buffer with nothing more arriving.
    Stalled(Duration),
    /// The first frame did not arrive in time.
    HandshakeTimeout,
    /// A well-formed frame that breaks the link's protocol.
    Protocol(String),
    /// The peer does not read what is sent to it: the outbox grew past its bound.
    QueueOverflow,
    /// A message for the peer could not be encoded (larger than the frame limit).
    Unencodable,
    /// The member stopped listening for events.
    EventsClosed,
    /// The link was replaced or closed by the member.
    Superseded,
}

impl LinkEnd {
    /// Whether the peer (or the member's data) is at fault, which is worth a warning.
    pub(super) fn is_fault(&self) -> bool {
        !matches!(
            self,
            LinkEnd::Eof | LinkEnd::Io(_) | LinkEnd::EventsClosed | LinkEnd::Superseded
        )
    }
}

impl fmt::Display for LinkEnd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LinkEnd::Eof => write!(f, "closed by the peer"),
            LinkEnd::Io(e) => write!(f, "i/o error: {e}"),
            LinkEnd::Frame(e) => e.fmt(f),
            LinkEnd::Truncated => write!(f, "closed by the peer in the middle of a frame"),
            LinkEnd::Stalled(d) => write!(f, "stalled mid-frame for {d:?}"),
            LinkEnd::HandshakeTimeout => write!(f, "no first frame in time"),
            LinkEnd::Protocol(why) => write!(f, "protocol violation: {why}"),
            LinkEnd::QueueOverflow => write!(f, "outgoing queue over its bound"),
            LinkEnd::Unencodable => write!(f, "an outgoing message could not be encoded"),
            LinkEnd::EventsClosed => write!(f, "the member stopped"),
            LinkEnd::Superseded => write!(f, "replaced or closed"),
        }
    }
}

impl From<PeerFrameError> for LinkEnd {
    fn from(e: PeerFrameError) -> LinkEnd {
        match e {
            PeerFrameError::Io(e) => LinkEnd::Io(e),
            e => LinkEnd::Frame(e),
        }
    }
}

/// Reads whole frames of `M` from one socket, owning its buffer.
pub(super) struct FrameReader<M> {
    read: PeerRead,
    buf: BytesMut,
    codec: PeerCodec<M>,
    stall_timeout: Duration,
    /// A test's partition holding what the peer sends.
    gate: Option<Gate>,
}

impl<M: PeerMessage> FrameReader<M> {
    pub(super) fn new(read: PeerRead, max_frame: usize, stall_timeout: Duration) -> Self {
        FrameReader {
            read,
            buf: BytesMut::with_capacity(IO_BUFFER_BYTES),
            codec: PeerCodec::with_max_frame(max_frame),
            stall_timeout,
            gate: None,
        }
    }

    /// Starts with `bytes` already read from the socket.
    pub(super) fn buffered(mut self, bytes: BytesMut) -> Self {
        self.buf.extend_from_slice(&bytes);
        self
    }

    /// Holds reads while `gate` is shut.
    pub(super) fn gated(mut self, gate: Option<Gate>) -> Self {
        self.gate = gate;
        self
    }

    /// The next frame, or `None` when the peer closed the connection between frames.
    /// Waits for as long as nothing is buffered; once part of a frame is, the rest
    /// must keep coming within the stall timeout.
    ///
    /// Cancel-safe: a dropped call loses nothing (bytes stay in the buffer).
    pub(super) async fn next(&mut self) -> Result<Option<M>, LinkEnd> {
        loop {
            if let Some(message) = self.codec.decode(&mut self.buf)? {
                return Ok(Some(message));
            }
            if self.buf.capacity() - self.buf.len() < 1024 {
                self.buf.reserve(IO_BUFFER_BYTES);
            }
            gate::open(&mut self.gate).await;
            let read = read_more(&mut self.read, &mut self.buf, self.stall_timeout);
            // A read still waiting when the gate shuts is dropped (cancel-safe).
            let n = tokio::select! {
                n = read => n?,
                _ = gate::shut(&mut self.gate) => continue,
            };
            if n == 0 {
                return match self.buf.is_empty() {
                    true => Ok(None),
                    false => Err(LinkEnd::Truncated),
                };
            }
        }
    }
}

/// Reads what has arrived into `buf`; once part of a frame is buffered the
/// rest must keep coming within `stall_timeout`.
async fn read_more(
    read: &mut PeerRead,
    buf: &mut BytesMut,
    stall_timeout: Duration,
) -> Result<usize, LinkEnd> {
    if buf.is_empty() {
        return read.read_buf(buf).await.map_err(LinkEnd::Io);
    }
    tokio::time::timeout(stall_timeout, read.read_buf(buf))
        .await
        .map_err(|_| LinkEnd::Stalled(stall_timeout))?
        .map_err(LinkEnd::Io)
}

/// Encodes `messages` as consecutive frames in one buffer.
pub(super) fn encode_frames<'a, M: PeerMessage + 'a>(
    codec: &mut PeerCodec<M>,
    messages: impl IntoIterator<Item = &'a M>,
) -> Result<Bytes, PeerFrameError> {
    let mut buf = BytesMut::new();
    for message in messages {
        codec.encode(message, &mut buf)?;
    }
    Ok(buf.freeze())
}

/// Encoded frames waiting for a link's writer. The member loop pushes without
/// ever blocking; the writer takes everything queued at once.
#[derive(Debug, Default)]
pub(super) struct Outbox {
    inner: Mutex<OutboxInner>,
    /// Something was queued (or the outbox closed): wakes the writer.
    ready: Notify,
    /// The outbox closed: wakes the link even while its writer is blocked on a
    /// peer that does not read.
    closing: Notify,
    /// When the link last read a frame or wrote bytes (ns after [`epoch`],
    /// 0: never): a link that moved nothing for a while may be displaced by
    /// a new connection from its peer. An atomic, so the reader does not
    /// contend for the outbox's lock with the writer and the member.
    last_progress_ns: AtomicU64,
}

/// The instant link progress is counted from.
fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

#[derive(Debug, Default)]
struct OutboxInner {
    frames: VecDeque<Bytes>,
    bytes: usize,
    /// Bytes the writer took and has not yet written to the socket: still
    /// this member's memory, and what a peer that does not read holds up.
    in_writer: usize,
    /// Set once: the writer stops with this.
    closed: Option<Closed>,
    /// What the writer took last (the election re-sends it on a new link).
    last_taken: Option<Bytes>,
}

/// What [`Outbox::push`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Push {
    /// The message waits for the writer.
    Queued,
    /// It would have taken the queue over its bound: the outbox is now closed.
    Overflow,
    /// The outbox was already closed; the message is dropped.
    Closed,
}

/// Why an outbox was closed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Closed {
    Overflow,
    Unencodable,
}

impl Outbox {
    fn lock(&self) -> MutexGuard<'_, OutboxInner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Bytes queued and not yet written to the socket.
    pub(super) fn queued_bytes(&self) -> usize {
        let inner = self.lock();
        inner.bytes + inner.in_writer
    }

    /// Queues `frames` (one message). A message is refused, and the outbox
    /// closed, when it passes `max_bytes` ([`passes_bound`]).
    pub(super) fn push(&self, frames: Bytes, max_bytes: usize) -> Push {
        let mut inner = self.lock();
        if inner.closed.is_some() {
            return Push::Closed;
        }
        let queued = inner.bytes + inner.in_writer;
        let outcome = if passes_bound(queued, frames.len(), max_bytes) {
            inner.closed = Some(Closed::Overflow);
            self.closing.notify_waiters();
            Push::Overflow
        } else {
            inner.bytes += frames.len();
            inner.frames.push_back(frames);
            Push::Queued
        };
        drop(inner);
        self.ready.notify_one();
        outcome
    }

    /// Makes `frame` the only queued one: a send queue of capacity one.
    pub(super) fn replace(&self, frame: Bytes) {
        let mut inner = self.lock();
        inner.frames.clear();
        inner.bytes = frame.len();
        inner.frames.push_back(frame);
        drop(inner);
        self.ready.notify_one();
    }

    /// If nothing is queued, queues again what was taken last (ZooKeeper re-sends
    /// its last notification when a new connection to a peer comes up).
    pub(super) fn requeue_last(&self) {
        let mut inner = self.lock();
        if !inner.frames.is_empty() {
            return;
        }
        if let Some(last) = inner.last_taken.clone() {
            inner.bytes = last.len();
            inner.frames.push_back(last);
            drop(inner);
            self.ready.notify_one();
        }
    }

    /// Whether nothing waits for a writer.
    pub(super) fn is_empty(&self) -> bool {
        self.lock().frames.is_empty()
    }

    /// Ends the link with `why`.
    pub(super) fn close(&self, why: Closed) {
        self.lock().closed.get_or_insert(why);
        self.ready.notify_one();
        self.closing.notify_waiters();
    }

    /// Waits until the outbox is closed; returns the link's end.
    ///
    /// Cancel-safe: it only observes.
    pub(super) async fn closed(&self) -> LinkEnd {
        loop {
            let notified = self.closing.notified();
            tokio::pin!(notified);
            // Registered before looking, so a close in between is not missed.
            notified.as_mut().enable();
            if let Some(why) = self.lock().closed {
                return why.into();
            }
            notified.await;
        }
    }

    /// The writer wrote `bytes` of what it took to the socket.
    fn written(&self, bytes: usize) {
        let mut inner = self.lock();
        inner.in_writer = inner.in_writer.saturating_sub(bytes);
    }

    /// The link read a frame from its peer, wrote a batch, or was just set up.
    pub(super) fn heard(&self) {
        let ns = epoch().elapsed().as_nanos().max(1) as u64;
        self.last_progress_ns.store(ns, Ordering::Relaxed);
    }

    /// How long the link has neither read a frame nor written a byte.
    pub(super) fn idle_for(&self) -> Duration {
        match self.last_progress_ns.load(Ordering::Relaxed) {
            0 => Duration::MAX,
            ns => epoch().elapsed().saturating_sub(Duration::from_nanos(ns)),
        }
    }

    /// Everything queued, waiting until something is.
    ///
    /// Cancel-safe: frames leave the queue only in the same poll that returns them.
    async fn take(&self) -> Result<Vec<Bytes>, Closed> {
        loop {
            // Created before looking, so a push in between is not missed
            // (`notify_one` leaves a permit when nobody waits).
            let notified = self.ready.notified();
            {
                let mut inner = self.lock();
                if let Some(why) = inner.closed {
                    return Err(why);
                }
                if !inner.frames.is_empty() {
                    inner.in_writer += inner.bytes;
                    inner.bytes = 0;
                    inner.last_taken = inner.frames.back().cloned();
                    return Ok(inner.frames.drain(..).collect());
                }
            }
            notified.await;
        }
    }
}

impl From<Closed> for LinkEnd {
    fn from(why: Closed) -> LinkEnd {
        match why {
            Closed::Overflow => LinkEnd::QueueOverflow,
            Closed::Unencodable => LinkEnd::Unencodable,
        }
    }
}

/// Writes what `outbox` receives to the socket, until the outbox is closed or the
/// socket fails. Each batch: every queued frame, then a single flush.
/// While `gate` is shut nothing is written.
pub(super) async fn write_loop(
    write: PeerWrite,
    outbox: &Outbox,
    mut gate: Option<Gate>,
) -> LinkEnd {
    let mut write = BufWriter::with_capacity(IO_BUFFER_BYTES, write);
    loop {
        let batch = match outbox.take().await {
            Ok(batch) => batch,
            Err(why) => return why.into(),
        };
        for frame in &batch {
            gate::open(&mut gate).await;
            if let Err(e) = write.write_all(frame).await {
                return LinkEnd::Io(e);
            }
            outbox.written(frame.len());
        }
        if let Err(e) = write.flush().await {
            return LinkEnd::Io(e);
        }
        outbox.heard();
    }
}

/// One line per ended link: a warning if the peer was at fault.
pub(super) fn log_end(link: &str, end: &LinkEnd) {
    if end.is_fault() {
        tracing::warn!("{link}: {end}; closed");
    } else {
        tracing::debug!("{link}: {end}");
    }
}
