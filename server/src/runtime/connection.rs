//! One client connection's opening: the TLS handshake on a secure port,
//! then its first frame. A four-letter word is answered and the connection
//! closed; a ConnectRequest goes to the node loop, and the session is served
//! from then on by a task of its own (`serving`).

use super::connection_counts::{AddressSlot, ConnectionCounts};
pub use super::flow::Flow;
pub use super::serving::Stream;
use super::serving::{read_into, Serving, READ_MIN};
use super::{tls, FourLetterWord, Inbound};
use crate::core::ConnId;
use bytes::BytesMut;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
use tokio_util::codec::Decoder;
use zkd_protocol::client_codec::{four_letter_word, FrameCodec};
use zkd_protocol::records::ConnectRequest;
use zkd_protocol::Record;

/// A connection that has not completed its handshake by then is closed
/// (ZooKeeper's `zookeeper.nio.sessionlessCnxnTimeout`).
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

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
    /// Its place in its address's count, held while it is connected.
    pub slot: AddressSlot,
}

impl Peer {
    /// The peer of `stream`, not (yet) certified.
    pub fn of(stream: &TcpStream, slot: AddressSlot) -> Peer {
        let (ip, port) = match stream.peer_addr() {
            Ok(a) => (a.ip().to_string(), a.port()),
            Err(_) => (String::new(), 0),
        };
        Peer {
            ip,
            port,
            certified: None,
            slot,
        }
    }
}

/// Serves one accepted socket until it closes.
pub async fn serve(
    stream: TcpStream,
    slot: AddressSlot,
    conn: ConnId,
    channels: Channels,
    settings: ConnectionSettings,
) {
    let peer = Peer::of(&stream, slot);
    settings.counts.plaintext(peer.ip.parse().ok());
    let _ = stream.set_nodelay(true);
    serve_stream(stream, peer, conn, channels, settings).await
}

/// Serves one socket accepted on the secure port: the TLS handshake
/// (within the handshake timeout), then the connection over it.
pub async fn serve_tls(
    stream: TcpStream,
    slot: AddressSlot,
    port: &SecurePort,
    conn: ConnId,
    channels: Channels,
    settings: ConnectionSettings,
) {
    let mut peer = Peer::of(&stream, slot);
    let _ = stream.set_nodelay(true);
    let under_way = settings.counts.handshake();
    let handshake = tls::handshake(stream, &port.acceptor, port.x509_auth, HANDSHAKE_TIMEOUT);
    let Some((tls, certified)) = handshake.await else {
        settings.counts.handshake_failed();
        return;
    };
    drop(under_way);
    peer.certified = certified;
    serve_stream(tls, peer, conn, channels, settings).await
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
    slot: AddressSlot,
    kind: &PortKind,
    conn: ConnId,
    channels: Channels,
    settings: ConnectionSettings,
) {
    match kind {
        PortKind::Plain => serve(stream, slot, conn, channels, settings).await,
        PortKind::Tls(port) => serve_tls(stream, slot, port, conn, channels, settings).await,
        PortKind::Unified(port) => {
            // Peeked, not read: whichever side serves it reads the byte again.
            let mut first = [0u8; 1];
            let peeked = tokio::time::timeout(HANDSHAKE_TIMEOUT, stream.peek(&mut first)).await;
            match peeked {
                Ok(Ok(1)) if first[0] == tls::HANDSHAKE_RECORD => {
                    serve_tls(stream, slot, port, conn, channels, settings).await
                }
                Ok(Ok(1)) => serve(stream, slot, conn, channels, settings).await,
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

/// Serves a connection's stream (a socket, or TLS over one): its opening
/// here, then, for a session, a task of its own until it closes.
pub async fn serve_stream<S: Stream>(
    mut stream: S,
    peer: Peer,
    conn: ConnId,
    channels: Channels,
    settings: ConnectionSettings,
) {
    let inbound = channels.inbound;
    let mut buf = BytesMut::new();
    let mut codec = FrameCodec::new(settings.max_frame);
    let opening = opening(&mut stream, &mut buf, &mut codec, &channels.words);
    let Some(request) = opening.await else {
        return;
    };
    let flow = Arc::new(Flow::new(peer.slot));
    let connected = Inbound::Connected {
        conn,
        remote_ip: peer.ip,
        remote_port: peer.port,
        certified: peer.certified,
        flow: flow.clone(),
    };
    if inbound.send(connected).await.is_err()
        || inbound
            .send(Inbound::Handshake { conn, request })
            .await
            .is_err()
    {
        return;
    }
    // A task of its own: the opening's futures, timers and copies of its
    // arguments would otherwise take room for the session's whole life.
    let read = (buf, codec);
    tokio::spawn(Serving::new(conn, stream, read, inbound, flow));
}

/// A connection's first bytes: a four-letter word, answered, or a
/// ConnectRequest, returned to open a session with.
async fn opening<S: Stream>(
    stream: &mut S,
    buf: &mut BytesMut,
    codec: &mut FrameCodec,
    words: &mpsc::Sender<FourLetterWord>,
) -> Option<ConnectRequest> {
    // The first four bytes decide between a 4lw and a session.
    let first = tokio::time::timeout(HANDSHAKE_TIMEOUT, async {
        while buf.len() < 4 {
            if read_into(stream, buf, READ_MIN).await.ok()? == 0 {
                return None;
            }
        }
        Some(())
    })
    .await;
    if !matches!(first, Ok(Some(()))) {
        return None;
    }
    if let Some(word) = four_letter_word(&buf[..4]) {
        answer_four_letter_word(word.to_owned(), stream, words).await;
        return None;
    }
    connect_request(stream, buf, codec).await
}

/// The ConnectRequest, once its frame is in (within the handshake
/// timeout); None for a connection that closes first or sends another.
async fn connect_request<S: Stream>(
    stream: &mut S,
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
            if read_into(stream, buf, READ_MIN).await.ok()? == 0 {
                return None;
            }
        }
    })
    .await;
    let mut frame = frame.ok()??;
    ConnectRequest::decode(&mut frame).ok()
}

async fn answer_four_letter_word<S: Stream>(
    word: String,
    stream: &mut S,
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
        let _ = stream.write_all(text.as_bytes()).await;
    }
    let _ = stream.shutdown().await;
}
