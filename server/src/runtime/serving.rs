//! A session's connection once its ConnectRequest is in: it forwards the
//! client's requests to the node loop and writes what the node loop sends
//! back, until either side ends it.
//!
//! It is a hand-written future, spawned as the connection's own task, so an
//! idle connection holds this struct and nothing else: no read buffer, no
//! write buffer, no waiting futures. Written with `async`, the same task
//! took about 1.9 KB for each idle session (issue 52).

use super::flow::Flow;
use super::Inbound;
use crate::core::ConnId;
use bytes::{Buf, BufMut, Bytes, BytesMut};
use std::collections::VecDeque;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use tokio::io::AsyncWrite;
use tokio::net::TcpStream;
use tokio::sync::mpsc::{self, error::TrySendError};
use tokio_rustls::server::TlsStream;
use tokio_util::codec::Decoder;
use zkd_protocol::client_codec::FrameCodec;

/// A read makes room for at least this much, and doubles it (to a bound)
/// while reads keep filling it, so pipelined requests still arrive many to
/// a read. A frame's own length reserves room for it.
pub(super) const READ_MIN: usize = 512;
const READ_MAX: u32 = 64 * 1024;

/// Frames smaller than this are copied into one buffer and written
/// together; a larger one is written from its own.
const WRITE_BATCH: usize = 64 * 1024;

/// A connection's stream: a socket, or TLS over one. It reads into a
/// buffer it may have emptied to nothing, so an idle connection need not
/// hold one.
pub trait Stream: AsyncWrite + Unpin + Send + 'static {
    /// Reads what is there into `buf`, first making room for about `want`
    /// bytes; Ok(0) at the end of the stream.
    fn poll_read_into(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut BytesMut,
        want: usize,
    ) -> Poll<io::Result<usize>>;
}

/// Reads what is there into `buf` (see [`Stream::poll_read_into`]).
pub(super) async fn read_into<S: Stream>(
    stream: &mut S,
    buf: &mut BytesMut,
    want: usize,
) -> io::Result<usize> {
    std::future::poll_fn(|cx| stream.poll_read_into(cx, buf, want)).await
}

/// A plaintext socket makes room only once it is readable, so an idle
/// connection waits without a buffer.
impl Stream for TcpStream {
    fn poll_read_into(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut BytesMut,
        want: usize,
    ) -> Poll<io::Result<usize>> {
        loop {
            ready!(self.poll_read_ready(cx))?;
            read_room(buf, want);
            match self.try_read_buf(buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    // Readiness was stale: wait again without the buffer.
                    if buf.is_empty() {
                        *buf = BytesMut::new();
                    }
                }
                read => return Poll::Ready(read),
            }
        }
    }
}

/// TLS reads into room made before the wait: what rustls has decrypted
/// is not a socket's readiness.
impl Stream for TlsStream<TcpStream> {
    fn poll_read_into(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut BytesMut,
        want: usize,
    ) -> Poll<io::Result<usize>> {
        read_room(buf, want);
        tokio_util::io::poll_read_buf(Pin::new(self), cx, buf)
    }
}

/// Makes sure the buffer has room for a read of about `want` bytes.
fn read_room(buf: &mut BytesMut, want: usize) {
    if buf.capacity() - buf.len() < want / 2 {
        buf.reserve(want);
    }
}

/// One session's connection, serving until the peer closes it or the node
/// loop closes or ends it; the node loop then hears `Disconnected`.
pub(super) struct Serving<S> {
    conn: ConnId,
    stream: S,
    inbound: mpsc::Sender<Inbound>,
    flow: Arc<Flow>,
    reading: Reading,
    writing: Writing,
}

/// The reading side: bytes read and not yet taken as frames.
struct Reading {
    buf: BytesMut,
    /// The room the next read makes.
    want: u32,
    codec: FrameCodec,
    /// A frame the node loop's full channel has not taken yet. Rare, so it
    /// is boxed (twice, for a thin pointer) rather than kept in every task.
    stalled: Option<Box<Stalled>>,
}

/// Sending a frame to the node loop: true once sent, false if it is gone.
type Stalled = Pin<Box<dyn Future<Output = bool> + Send>>;

/// The writing side: what the node loop sent, in chunks to write.
#[derive(Default)]
struct Writing {
    /// Last first: the next to write is popped from the end.
    chunks: Vec<Chunk>,
    /// Close once the chunks are written.
    closing: bool,
}

/// Bytes to write, and the frames they finish, for flow control.
struct Chunk {
    bytes: Bytes,
    /// The frames' bytes (without their length prefixes).
    frame_bytes: usize,
    /// How many of the frames answer requests.
    answers: usize,
}

impl<S: Stream> Serving<S> {
    /// A session's connection whose ConnectRequest has been forwarded; `buf`
    /// holds what was read after it.
    pub(super) fn new(
        conn: ConnId,
        stream: S,
        (buf, codec): (BytesMut, FrameCodec),
        inbound: mpsc::Sender<Inbound>,
        flow: Arc<Flow>,
    ) -> Self {
        Serving {
            conn,
            stream,
            inbound,
            flow,
            reading: Reading {
                buf,
                want: READ_MIN as u32,
                codec,
                stalled: None,
            },
            writing: Writing::default(),
        }
    }

    /// Ready once the connection is over. The writer goes first: the room
    /// it makes is what lets the reader go on.
    fn poll_serve(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let Serving {
            conn,
            stream,
            inbound,
            flow,
            reading,
            writing,
        } = self;
        if flow.poll_ended(cx).is_ready() || writing.poll(cx, stream, flow).is_ready() {
            return Poll::Ready(());
        }
        reading.poll(cx, stream, *conn, inbound, flow)
    }
}

impl<S: Stream> Future for Serving<S> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        ready!(this.poll_serve(cx));
        let gone = Inbound::Disconnected { conn: this.conn };
        if let Err(TrySendError::Full(gone)) = this.inbound.try_send(gone) {
            let inbound = this.inbound.clone();
            tokio::spawn(async move { inbound.send(gone).await });
        }
        Poll::Ready(())
    }
}

impl Reading {
    /// Reads and forwards requests; Ready once the connection is over (the
    /// peer closed it, sent a bad frame, or the node loop is gone).
    fn poll<S: Stream>(
        &mut self,
        cx: &mut Context<'_>,
        stream: &mut S,
        conn: ConnId,
        inbound: &mpsc::Sender<Inbound>,
        flow: &Flow,
    ) -> Poll<()> {
        loop {
            if let Some(stalled) = self.stalled.as_mut() {
                // Waiting here is the backpressure: a busy node loop slows readers.
                if !ready!(stalled.as_mut().as_mut().poll(cx)) {
                    return Poll::Ready(());
                }
                self.stalled = None;
            }
            // A client that does not read its replies gets no more requests served.
            ready!(flow.poll_room(cx));
            match self.codec.decode(&mut self.buf) {
                Ok(Some(frame)) => {
                    flow.requested();
                    match inbound.try_send(Inbound::Frame { conn, frame }) {
                        Ok(()) => {}
                        Err(TrySendError::Full(msg)) => {
                            let inbound = inbound.clone();
                            let send = async move { inbound.send(msg).await.is_ok() };
                            self.stalled = Some(Box::new(Box::pin(send)));
                        }
                        Err(TrySendError::Closed(_)) => return Poll::Ready(()),
                    }
                    continue;
                }
                Ok(None) => {}
                Err(e) => {
                    tracing::debug!(conn = conn.0, error = %e, "closing connection on bad frame");
                    return Poll::Ready(());
                }
            }
            // Every frame read is taken: wait for the next without a buffer.
            if self.buf.is_empty() {
                self.buf = BytesMut::new();
            }
            match ready!(stream.poll_read_into(cx, &mut self.buf, self.want as usize)) {
                Ok(0) | Err(_) => return Poll::Ready(()),
                // It filled all the room there was: more is likely queued.
                Ok(_) if self.buf.len() == self.buf.capacity() => {
                    self.want = (self.want * 2).min(READ_MAX)
                }
                Ok(_) => {}
            }
        }
    }
}

impl Writing {
    /// Writes what the node loop sends; Ready once the connection is over
    /// (closed as the node loop asked, or the write failed).
    fn poll<S: Stream>(&mut self, cx: &mut Context<'_>, stream: &mut S, flow: &Flow) -> Poll<()> {
        let mut stream = Pin::new(stream);
        loop {
            while let Some(chunk) = self.chunks.last_mut() {
                match ready!(stream.as_mut().poll_write(cx, &chunk.bytes)) {
                    Ok(0) | Err(_) => return Poll::Ready(()),
                    Ok(n) => chunk.bytes.advance(n),
                }
                if chunk.bytes.is_empty() {
                    flow.written(chunk.frame_bytes, chunk.answers);
                    self.chunks.pop();
                }
            }
            if ready!(stream.as_mut().poll_flush(cx)).is_err() {
                return Poll::Ready(());
            }
            if self.closing {
                let _ = ready!(stream.as_mut().poll_shutdown(cx));
                return Poll::Ready(());
            }
            // Written out: an idle connection keeps no buffer.
            self.chunks = Vec::new();
            let (frames, close) = ready!(flow.poll_frames(cx));
            self.chunks = chunks(frames);
            self.closing = close;
        }
    }
}

/// The frames, length-prefixed, as chunks to write, last first: pipelined
/// replies share a buffer (and so a write); a large frame is not copied.
fn chunks(frames: VecDeque<(Bytes, bool)>) -> Vec<Chunk> {
    let mut chunks = Vec::new();
    let mut batch = Batch::default();
    for (frame, answers_request) in frames {
        batch.bytes.put_i32(frame.len() as i32);
        if frame.len() >= WRITE_BATCH {
            chunks.push(batch.take());
            chunks.push(Chunk {
                frame_bytes: frame.len(),
                answers: usize::from(answers_request),
                bytes: frame,
            });
            continue;
        }
        batch.bytes.extend_from_slice(&frame);
        batch.frame_bytes += frame.len();
        batch.answers += usize::from(answers_request);
        if batch.bytes.len() >= WRITE_BATCH {
            chunks.push(batch.take());
        }
    }
    if !batch.bytes.is_empty() {
        chunks.push(batch.take());
    }
    chunks.reverse();
    chunks
}

/// Small frames gathered into one chunk.
#[derive(Default)]
struct Batch {
    bytes: BytesMut,
    frame_bytes: usize,
    answers: usize,
}

impl Batch {
    fn take(&mut self) -> Chunk {
        Chunk {
            bytes: self.bytes.split().freeze(),
            frame_bytes: std::mem::take(&mut self.frame_bytes),
            answers: std::mem::take(&mut self.answers),
        }
    }
}
