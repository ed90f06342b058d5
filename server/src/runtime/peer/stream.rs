//! A peer connection, plaintext or TLS (quorum TLS, `sslQuorum`), and the
//! halves its reader and writer own. Plaintext links keep tokio's own
//! halves, so a member without quorum TLS pays one match per poll.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf, ReadHalf, WriteHalf};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio_rustls::TlsStream;

/// One connection with another member.
pub enum PeerStream {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

impl PeerStream {
    /// Whether quorum TLS proved who the other end is: it presented a
    /// certificate the quorum's trust store verified.
    pub(super) fn is_authenticated(&self) -> bool {
        match self {
            PeerStream::Plain(_) => false,
            PeerStream::Tls(tls) => {
                (tls.get_ref().1.peer_certificates()).is_some_and(|c| !c.is_empty())
            }
        }
    }

    /// Splits the connection for a reader and a writer task.
    pub(super) fn split(self) -> (PeerRead, PeerWrite) {
        match self {
            PeerStream::Plain(stream) => {
                let (read, write) = stream.into_split();
                (PeerRead::Plain(read), PeerWrite::Plain(write))
            }
            PeerStream::Tls(stream) => {
                let (read, write) = tokio::io::split(*stream);
                (PeerRead::Tls(read), PeerWrite::Tls(write))
            }
        }
    }
}

/// The reading half of a [`PeerStream`].
pub(super) enum PeerRead {
    Plain(OwnedReadHalf),
    Tls(ReadHalf<TlsStream<TcpStream>>),
}

/// The writing half of a [`PeerStream`].
pub(super) enum PeerWrite {
    Plain(OwnedWriteHalf),
    Tls(WriteHalf<TlsStream<TcpStream>>),
}

impl AsyncRead for PeerRead {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            PeerRead::Plain(read) => Pin::new(read).poll_read(cx, buf),
            PeerRead::Tls(read) => Pin::new(read).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for PeerWrite {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            PeerWrite::Plain(write) => Pin::new(write).poll_write(cx, buf),
            PeerWrite::Tls(write) => Pin::new(write).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            PeerWrite::Plain(write) => Pin::new(write).poll_flush(cx),
            PeerWrite::Tls(write) => Pin::new(write).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            PeerWrite::Plain(write) => Pin::new(write).poll_shutdown(cx),
            PeerWrite::Tls(write) => Pin::new(write).poll_shutdown(cx),
        }
    }
}
