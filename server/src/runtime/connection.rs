//! One client connection: owns its read buffer, splits frames (two-phase:
//! is a whole frame here? then decode), forwards them to the node loop, and
//! writes what the node loop sends back. A four-letter word on a fresh
//! connection is answered and the connection closed.

use super::connection_counts::ConnectionCounts;
use super::{tls, FourLetterWord, Inbound};
use crate::core::ConnId;
use bytes::{Bytes, BytesMut};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot, Notify};
use tokio_util::codec::Decoder;
use zkd_protocol::client_codec::{four_letter_word, FrameCodec};
use zkd_protocol::records::ConnectRequest;
use zkd_protocol::Record;

/// A connection that has not completed its handshake by then is closed
/// (ZooKeeper's `zookeeper.nio.sessionlessCnxnTimeout`).
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Bytes queued for a client beyond which zkd stops reading its requests, so a
/// client that does not read its replies cannot make the server buffer without bound.
pub(super) const MAX_QUEUED_REPLY_BYTES: usize = 8 * 1024 * 1024;

/// Requests of one connection taken in but not yet answered. Together with the
/// byte bound this caps what one connection can make the server hold
/// (ZooKeeper throttles on a global outstanding count only).
const MAX_PENDING_REQUESTS: usize = 128;

/// What the node loop sends one connection, and its flow control, shared
/// by the connection's reader, its writer and the node loop.
///
/// The frames wait in a queue of its own rather than a channel: a tokio
/// channel allocates a block of 32 slots up front, about 1.8 KiB for every
/// idle session (issue 15).
#[derive(Debug, Default)]
pub struct Flow {
    queued_bytes: AtomicUsize,
    pending_requests: AtomicUsize,
    room: Notify,
    outbox: Mutex<Outbox>,
    /// Wakes the writer: something was put in the outbox.
    ready: Notify,
}

/// Frames for the writer, in order, and whether to close after them.
#[derive(Debug, Default)]
struct Outbox {
    frames: VecDeque<(Bytes, bool)>,
    close: bool,
}

impl Flow {
    /// Queues a frame for the writer; `answers_request` is false for
    /// notifications and the ConnectResponse, which flow control must not
    /// count as answers.
    pub fn send(&self, frame: Bytes, answers_request: bool) {
        self.outbox().frames.push_back((frame, answers_request));
        self.ready.notify_one();
    }

    /// Has the writer flush what is queued and close the connection.
    pub fn close(&self) {
        self.outbox().close = true;
        self.ready.notify_one();
    }

    fn outbox(&self) -> MutexGuard<'_, Outbox> {
        self.outbox.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits until there is something for the writer, and swaps the queued
    /// frames into `frames` (which the writer has emptied). True if the
    /// connection is to close after them.
    async fn next_frames(&self, frames: &mut VecDeque<(Bytes, bool)>) -> bool {
        loop {
            {
                let mut outbox = self.outbox();
                if !outbox.frames.is_empty() || outbox.close {
                    std::mem::swap(&mut outbox.frames, frames);
                    return outbox.close;
                }
            }
            // A wake-up sent since the check above is kept as a permit.
            self.ready.notified().await;
        }
    }

    /// The node loop queued a frame of `n` bytes for the writer; returns the
    /// bytes now queued.
    pub fn queued(&self, n: usize) -> usize {
        self.queued_bytes.fetch_add(n, Ordering::AcqRel) + n
    }

    /// The reader forwarded a request.
    fn requested(&self) {
        self.pending_requests.fetch_add(1, Ordering::AcqRel);
    }

    /// The writer wrote a frame; `answers_request` is false for notifications
    /// and the ConnectResponse.
    fn written(&self, n: usize, answers_request: bool) {
        self.queued_bytes.fetch_sub(n, Ordering::AcqRel);
        if answers_request {
            // Saturate: a reply to a request taken in before the count started must not wrap.
            let _ = self
                .pending_requests
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |p| {
                    Some(p.saturating_sub(1))
                });
        }
        if self.has_room() {
            self.room.notify_waiters();
        }
    }

    fn has_room(&self) -> bool {
        self.queued_bytes.load(Ordering::Acquire) < MAX_QUEUED_REPLY_BYTES
            && self.pending_requests.load(Ordering::Acquire) < MAX_PENDING_REQUESTS
    }

    /// Waits until the client has read enough of its replies.
    async fn wait_for_room(&self) {
        loop {
            let room = self.room.notified();
            if self.has_room() {
                return;
            }
            room.await;
        }
    }
}

/// Where a connection sends what it reads.
#[derive(Clone, Debug)]
pub struct Channels {
    /// Session traffic, to the node loop.
    pub inbound: mpsc::Sender<Inbound>,
    /// Four-letter words, to the node loop on a channel of their own.
    pub words: mpsc::Sender<FourLetterWord>,
}

/// Settings every connection shares.
#[derive(Clone, Debug)]
pub struct ConnectionSettings {
    /// jute.maxbuffer.
    pub max_frame: usize,
    /// What the ports count, for the metrics.
    pub counts: Arc<ConnectionCounts>,
}

/// Who is on the other end: its address and, on the secure port, the
/// subject its certificate authenticated it as.
pub struct Peer {
    pub ip: String,
    pub port: u16,
    pub certified: Option<String>,
}

impl Peer {
    /// The peer of `stream`, not (yet) certified.
    pub fn of(stream: &TcpStream) -> Peer {
        let (ip, port) = match stream.peer_addr() {
            Ok(a) => (a.ip().to_string(), a.port()),
            Err(_) => (String::new(), 0),
        };
        Peer {
            ip,
            port,
            certified: None,
        }
    }
}

/// Serves one accepted socket until it closes.
pub async fn serve(
    stream: TcpStream,
    conn: ConnId,
    channels: Channels,
    settings: ConnectionSettings,
) {
    let peer = Peer::of(&stream);
    settings.counts.plaintext(peer.ip.parse().ok());
    let _ = stream.set_nodelay(true);
    let (reader, writer) = stream.into_split();
    serve_halves(reader, writer, peer, conn, channels, settings).await
}

/// Serves one socket accepted on the secure port: the TLS handshake
/// (within the handshake timeout), then the connection over it.
pub async fn serve_tls(
    stream: TcpStream,
    port: &SecurePort,
    conn: ConnId,
    channels: Channels,
    settings: ConnectionSettings,
) {
    let mut peer = Peer::of(&stream);
    let _ = stream.set_nodelay(true);
    let under_way = settings.counts.handshake();
    let handshake = tls::handshake(stream, &port.acceptor, port.x509_auth, HANDSHAKE_TIMEOUT);
    let Some((tls, certified)) = handshake.await else {
        settings.counts.handshake_failed();
        return;
    };
    drop(under_way);
    peer.certified = certified;
    let (reader, writer) = tokio::io::split(tls);
    serve_halves(reader, writer, peer, conn, channels, settings).await
}

/// What a client port takes.
#[derive(Clone)]
pub enum PortKind {
    /// Plaintext (`clientPort`).
    Plain,
    /// TLS only (`secureClientPort`).
    Tls(SecurePort),
    /// Either, told apart by the first byte (`client.portUnification`).
    Unified(SecurePort),
}

/// Serves one socket accepted on a port of `kind` until it closes.
pub async fn serve_port(
    stream: TcpStream,
    kind: &PortKind,
    conn: ConnId,
    channels: Channels,
    settings: ConnectionSettings,
) {
    match kind {
        PortKind::Plain => serve(stream, conn, channels, settings).await,
        PortKind::Tls(port) => serve_tls(stream, port, conn, channels, settings).await,
        PortKind::Unified(port) => {
            // Peeked, not read: whichever side serves it reads the byte again.
            let mut first = [0u8; 1];
            let peeked = tokio::time::timeout(HANDSHAKE_TIMEOUT, stream.peek(&mut first)).await;
            match peeked {
                Ok(Ok(1)) if first[0] == tls::HANDSHAKE_RECORD => {
                    serve_tls(stream, port, conn, channels, settings).await
                }
                Ok(Ok(1)) => serve(stream, conn, channels, settings).await,
                // Closed, failed or silent past the handshake timeout.
                _ => {}
            }
        }
    }
}

/// The secure port's TLS settings, for each socket it accepts.
#[derive(Clone)]
pub struct SecurePort {
    pub acceptor: tokio_rustls::TlsAcceptor,
    /// Whether a client certificate authenticates as `x509:` + its subject.
    pub x509_auth: bool,
}

/// Serves a connection's two halves (a socket's, or a TLS stream's) until
/// it closes.
pub async fn serve_halves<R, W>(
    mut reader: R,
    writer: W,
    peer: Peer,
    conn: ConnId,
    channels: Channels,
    settings: ConnectionSettings,
) where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let inbound = channels.inbound;
    let mut buf = BytesMut::with_capacity(READ_MIN);
    let mut codec = FrameCodec::new(settings.max_frame);

    // Phase one: the first four bytes decide between a 4lw and a session.
    let first = tokio::time::timeout(HANDSHAKE_TIMEOUT, async {
        while buf.len() < 4 {
            if reader.read_buf(&mut buf).await.ok()? == 0 {
                return None;
            }
        }
        Some(())
    })
    .await;
    if !matches!(first, Ok(Some(()))) {
        return;
    }
    if let Some(word) = four_letter_word(&buf[..4]) {
        return answer_four_letter_word(word.to_owned(), writer, &channels.words).await;
    }

    // Phase two: the ConnectRequest frame.
    let Some(request) = connect_request(&mut reader, &mut buf, &mut codec).await else {
        return;
    };

    let flow = Arc::new(Flow::default());
    let mut writer_task = tokio::spawn(write_loop(writer, flow.clone()));
    if inbound
        .send(Inbound::Connected {
            conn,
            remote_ip: peer.ip,
            remote_port: peer.port,
            certified: peer.certified,
            flow: flow.clone(),
            writer: writer_task.abort_handle(),
        })
        .await
        .is_err()
        || inbound
            .send(Inbound::Handshake { conn, request })
            .await
            .is_err()
    {
        return;
    }
    // Either side ends the connection: the peer closing, or the node loop
    // closing it (the writer returns). read_buf is cancel-safe, so dropping
    // the read loop mid-read loses nothing we still need.
    tokio::select! {
        _ = read_loop(&mut reader, &mut buf, &mut codec, conn, &inbound, &flow) => writer_task.abort(),
        _ = &mut writer_task => {}
    }
    let _ = inbound.send(Inbound::Disconnected { conn }).await;
}

/// The ConnectRequest, once its frame is in (within the handshake
/// timeout); None for a connection that closes first or sends another.
async fn connect_request<R: AsyncRead + Unpin>(
    reader: &mut R,
    buf: &mut BytesMut,
    codec: &mut FrameCodec,
) -> Option<ConnectRequest> {
    let frame = tokio::time::timeout(HANDSHAKE_TIMEOUT, async {
        loop {
            match codec.decode(buf) {
                Ok(Some(frame)) => return Some(frame),
                Ok(None) => {}
                Err(_) => return None,
            }
            if reader.read_buf(buf).await.ok()? == 0 {
                return None;
            }
        }
    })
    .await;
    let mut frame = frame.ok()??;
    ConnectRequest::decode(&mut frame).ok()
}

/// The read buffer starts small, so an idle session holds little, and
/// doubles (to a bound) while reads keep filling it, so pipelined requests
/// still arrive many to a read. A frame's own length reserves room for it.
const READ_MIN: usize = 512;
const READ_MAX: usize = 64 * 1024;

/// Makes sure the buffer has room for a read of about `want` bytes; the
/// room there is.
fn read_room(buf: &mut BytesMut, want: &mut usize) -> usize {
    if buf.capacity() - buf.len() < *want / 2 {
        buf.reserve(*want);
    }
    buf.capacity() - buf.len()
}

async fn read_loop<R: AsyncRead + Unpin>(
    reader: &mut R,
    buf: &mut BytesMut,
    codec: &mut FrameCodec,
    conn: ConnId,
    inbound: &mpsc::Sender<Inbound>,
    flow: &Flow,
) {
    let mut want = READ_MIN;
    loop {
        loop {
            // A client that does not read its replies gets no more requests served.
            flow.wait_for_room().await;
            match codec.decode(buf) {
                Ok(Some(frame)) => {
                    flow.requested();
                    // Awaiting here is the backpressure: a busy node loop slows readers.
                    if inbound.send(Inbound::Frame { conn, frame }).await.is_err() {
                        return;
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    tracing::debug!(conn = conn.0, error = %e, "closing connection on bad frame");
                    return;
                }
            }
        }
        let room = read_room(buf, &mut want);
        match reader.read_buf(buf).await {
            Ok(0) | Err(_) => return,
            // It filled all the room there was: more is likely queued.
            Ok(n) if n == room => want = (want * 2).min(READ_MAX),
            Ok(_) => {}
        }
    }
}

/// Writes frames until told to close. Pipelined replies share a write: frames
/// are gathered while the queue has more, and written when it runs dry (or
/// the batch is large). The batch buffer grows to what a connection sends at
/// once and no further, so an idle session holds almost nothing.
async fn write_loop<W: AsyncWrite + Unpin>(mut writer: W, flow: Arc<Flow>) {
    let mut batch = Vec::new();
    let mut frames = VecDeque::new();
    loop {
        let close = flow.next_frames(&mut frames).await;
        for (frame, answers_request) in frames.drain(..) {
            if add_frame(&mut writer, &mut batch, &frame).await.is_err() {
                return;
            }
            flow.written(frame.len(), answers_request);
        }
        if close {
            let _ = writer.write_all(&batch).await;
            let _ = writer.shutdown().await;
            return;
        }
        if write_batch(&mut writer, &mut batch).await.is_err() {
            return;
        }
        // An idle session keeps little of a burst's buffers.
        if frames.capacity() > SPARE_FRAMES {
            frames = VecDeque::new();
        }
        if batch.capacity() > SPARE_BATCH {
            batch = Vec::new();
        }
    }
}

/// Room for this many frames, and for a batch of this many bytes, is kept
/// between writes; more is freed.
const SPARE_FRAMES: usize = 16;
const SPARE_BATCH: usize = 4096;

/// A batch this large is written at once; a frame this large is written
/// from its own buffer, not copied into the batch.
const WRITE_BATCH: usize = 64 * 1024;

/// Adds a length-prefixed frame to the batch, writing the batch out when it
/// is full; a large frame goes out after it directly.
async fn add_frame<W: AsyncWrite + Unpin>(
    writer: &mut W,
    batch: &mut Vec<u8>,
    frame: &Bytes,
) -> std::io::Result<()> {
    batch.extend_from_slice(&(frame.len() as i32).to_be_bytes());
    if frame.len() >= WRITE_BATCH {
        write_batch(writer, batch).await?;
        return writer.write_all(frame).await;
    }
    batch.extend_from_slice(frame);
    if batch.len() >= WRITE_BATCH {
        write_batch(writer, batch).await?;
    }
    Ok(())
}

async fn write_batch<W: AsyncWrite + Unpin>(
    writer: &mut W,
    batch: &mut Vec<u8>,
) -> std::io::Result<()> {
    writer.write_all(batch).await?;
    batch.clear();
    Ok(())
}

async fn answer_four_letter_word<W: AsyncWrite + Unpin>(
    word: String,
    mut writer: W,
    words: &mpsc::Sender<FourLetterWord>,
) {
    let (tx, rx) = oneshot::channel();
    if words
        .send(FourLetterWord { word, reply: tx })
        .await
        .is_err()
    {
        return;
    }
    if let Ok(text) = rx.await {
        let _ = writer.write_all(text.as_bytes()).await;
    }
    let _ = writer.shutdown().await;
}
