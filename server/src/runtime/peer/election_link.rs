//! The election port (spec §8.1): one connection per pair of members, kept
//! only if the larger sid initiated it.
//!
//! ```text
//!  smaller sid S                         larger sid L
//!  something queued for L, no link:
//!  dial L, send Hello{S}, hang up ─────▶ accept: S < L, close; dial S back
//!  accept: L > S, keep  ◀──────────────── dial S, send Hello{L}
//!  ◀────────────── notifications both ways ──────────────▶
//! ```
//!
//! Each peer has one task at a time, dialing or running a link, tagged with a
//! generation; a newer task (a link accepted from the peer, a connect-back)
//! aborts the older. A link that ends hands over to a dialer if something is
//! still queued. Dial attempts back off from 100 ms to 2 s until a link
//! delivers a notification.

use super::link::{encode_frames, log_end, write_loop, FrameReader, LinkEnd, Outbox};
use super::quorum_auth;
use super::stream::{PeerRead, PeerWrite};
use super::Accepted;
use super::{ElectionPeer, LinkTask, PeerEvent, Shared, State, MAX_STRANGERS};
use crate::core::admission::{Port, Verdict};
use crate::core::election::{Notification, ServerId};
use crate::driver::peer_wire::{notification_from_wire, notification_to_wire};
use crate::runtime::faults::Direction;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use zkd_protocol::peer::election::{election_message::Body, PROTOCOL_VERSION_V1};
use zkd_protocol::peer::{ElectionHello, ElectionMessage, PeerCodec};

/// The first pause between dial attempts to a peer.
const RETRY_MIN: Duration = Duration::from_millis(100);

/// The longest pause between dial attempts to a peer.
const RETRY_MAX: Duration = Duration::from_secs(2);

/// Queues `n` in `to`'s slot, replacing what was there, and makes sure some task
/// will deliver it.
pub(super) fn send(shared: &Arc<Shared>, to: ServerId, n: &Notification) {
    if to == shared.me {
        return;
    }
    let message = ElectionMessage::from(notification_to_wire(n));
    let mut codec = PeerCodec::with_max_frame(shared.election_max_frame());
    let frame = match encode_frames(&mut codec, [&message]) {
        Ok(frame) => frame,
        Err(e) => {
            tracing::warn!("notification for {to} not sent: {e}");
            return;
        }
    };
    let mut state = shared.lock();
    let stranger = state.strangers.contains(&to);
    let Some(peer) = state.election.get(&to) else {
        tracing::warn!("notification for {to}, not a member, dropped");
        return;
    };
    // A stranger is never dialled: only its own link carries answers.
    if stranger && peer.task.is_none() {
        return;
    }
    peer.outbox.replace(frame);
    if peer.task.is_none() {
        start_dialer(shared, &mut state, to, false);
    }
}

/// A connection on our election port: expects a hello from another member
/// (or a stranger, answered on its own link if its sid is the larger).
pub(super) async fn accept(shared: Arc<Shared>, accepted: Accepted, remote: SocketAddr) {
    let authenticated = accepted.authenticated;
    let (mut reader, write) =
        accepted.framed::<ElectionMessage>(shared.election_max_frame(), &shared.settings);
    let first = match tokio::time::timeout(shared.settings.connect_timeout, reader.next()).await {
        Err(_) => Err(LinkEnd::HandshakeTimeout),
        Ok(Ok(None)) => Err(LinkEnd::Eof),
        Ok(Ok(Some(message))) => Ok(message),
        Ok(Err(end)) => Err(end),
    };
    let hello = match first {
        Ok(ElectionMessage {
            body: Some(Body::Hello(hello)),
        }) => hello,
        Ok(_) => {
            tracing::warn!("election link from {remote}: no hello first; closing");
            return;
        }
        Err(end) => return log_end(&format!("election link from {remote}"), &end),
    };
    let sid = ServerId(hello.sid);
    let stranger = match shared
        .admit(Port::Election, sid, remote, authenticated)
        .await
    {
        Verdict::Member => false,
        Verdict::Stranger => true,
        Verdict::Refused(why) => {
            tracing::warn!("election link from {remote}: {why}; closing");
            return;
        }
    };
    if stranger && sid < shared.me {
        // It hangs up after its hello, waiting to be called back, and a
        // member dials only the addresses of its configuration.
        tracing::debug!(
            "election link from {remote}: sid {sid}, a smaller stranger; not called back"
        );
        return;
    }
    let mut state = shared.lock();
    if stranger && !state.strangers.contains(&sid) && state.strangers.len() >= MAX_STRANGERS {
        tracing::warn!("election link from {remote}: sid {sid} is outside the configuration, and {MAX_STRANGERS} others are linked; closing");
        return;
    }
    if stranger && state.strangers.insert(sid) {
        tracing::info!(
            "election link from {remote}: sid {sid} is outside the configuration; it is answered"
        );
    }
    let peer = state.election.entry(sid).or_default();
    if let Some(old) = peer.task.take() {
        old.abort.abort();
    }
    if sid < shared.me {
        // Only the larger sid's connection survives: drop this one, call back.
        tracing::debug!("election link from {sid} ({remote}): smaller sid, connecting back");
        start_dialer(&shared, &mut state, sid, true);
    } else {
        start_link(&shared, &mut state, sid, reader, write);
    }
}

fn is_current(peer: &ElectionPeer, generation: u64) -> bool {
    peer.task
        .as_ref()
        .is_some_and(|task| task.generation == generation)
}

/// Makes a dialer the task for `peer`; the caller has taken the previous one out.
/// `at_least_once`: dial even if nothing is queued (a connect-back).
fn start_dialer(shared: &Arc<Shared>, state: &mut State, peer: ServerId, at_least_once: bool) {
    let generation = state.next_generation();
    let task = dial(shared.clone(), peer, generation, at_least_once);
    if let Some(abort) = state.spawn(task) {
        if let Some(p) = state.election.get_mut(&peer) {
            p.task = Some(LinkTask { generation, abort });
        }
    }
}

/// Makes a link task the task for `peer`; the caller has taken the previous one out.
fn start_link(
    shared: &Arc<Shared>,
    state: &mut State,
    peer: ServerId,
    reader: FrameReader<ElectionMessage>,
    write: PeerWrite,
) {
    let generation = state.next_generation();
    let Some(outbox) = state.election.get(&peer).map(|p| p.outbox.clone()) else {
        return;
    };
    outbox.requeue_last();
    let task = run_link(shared.clone(), peer, generation, reader, write, outbox);
    if let Some(abort) = state.spawn(task) {
        if let Some(p) = state.election.get_mut(&peer) {
            p.task = Some(LinkTask { generation, abort });
        }
    }
}

/// Dials `peer` until a link exists or nothing is queued for it. With a larger
/// sid than the peer's the connection becomes the link; otherwise the hello asks
/// the peer to connect back, which replaces this task.
async fn dial(shared: Arc<Shared>, peer: ServerId, generation: u64, mut at_least_once: bool) {
    let mut first = true;
    loop {
        let delay = {
            let mut state = shared.lock();
            let Some(p) = state.election.get_mut(&peer) else {
                return;
            };
            if !is_current(p, generation) {
                return;
            }
            if !at_least_once && p.outbox.is_empty() {
                p.task = None;
                return;
            }
            // The first attempt is immediate after a productive link, and for a
            // connect-back: the peer is waiting for it, and its next hello would
            // restart this dialer.
            let delay = match first && (at_least_once || p.retry.is_zero()) {
                true => Duration::ZERO,
                false => p.retry.max(RETRY_MIN),
            };
            p.retry = (delay * 2).clamp(RETRY_MIN, RETRY_MAX);
            delay
        };
        first = false;
        at_least_once = false;
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        match connect(&shared, peer).await {
            Ok((read, write)) if shared.me > peer => {
                let mut state = shared.lock();
                let Some(p) = state.election.get_mut(&peer) else {
                    return;
                };
                if is_current(p, generation) {
                    p.task = None; // this task, which ends here
                    let reader = FrameReader::new(
                        read,
                        shared.election_max_frame(),
                        shared.settings.stall_timeout,
                    );
                    start_link(&shared, &mut state, peer, reader, write);
                }
                return;
            }
            Ok(_) => tracing::debug!("election: said hello to {peer}, awaiting its call back"),
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                tracing::debug!("election: {peer} refused our connection");
                // Only a refusal is sure: nothing listens there. A timeout
                // may be a slow path to a live peer.
                if shared
                    .events
                    .send(PeerEvent::Unreachable(peer))
                    .await
                    .is_err()
                {
                    return;
                }
            }
            Err(e) => tracing::debug!("election: cannot reach {peer}: {e}"),
        }
    }
}

/// Connects to `peer`'s election port and sends our hello.
async fn connect(shared: &Shared, peer: ServerId) -> io::Result<(PeerRead, PeerWrite)> {
    let spec = shared.spec(peer)?;
    let mine = shared.spec(shared.me)?;
    let hello = ElectionMessage::from(ElectionHello {
        protocol_version: PROTOCOL_VERSION_V1,
        sid: shared.me.0,
        election_addr: format!("{}:{}", mine.host, mine.election_port),
    });
    let mut codec = PeerCodec::with_max_frame(shared.election_max_frame());
    let frame = encode_frames(&mut codec, [&hello]).map_err(io::Error::other)?;
    shared.refuse_if_cut_off(peer).await?;
    let connect_and_greet = async {
        let stream = shared.dial_tcp(&spec.host, spec.election_port).await?;
        stream.set_nodelay(true)?;
        let stream = shared.secure_dialed(stream, &spec.host).await?;
        let (mut read, mut write) = stream.split();
        quorum_auth::dial(shared, &mut read, &mut write).await?;
        write.write_all(&frame).await?;
        Ok((read, write))
    };
    tokio::time::timeout(shared.settings.connect_timeout, connect_and_greet)
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "connect timed out"))?
}

/// One election link: notifications in, the peer's slot out, until either side
/// ends; then a dialer takes over if something is still queued.
async fn run_link(
    shared: Arc<Shared>,
    peer: ServerId,
    generation: u64,
    reader: FrameReader<ElectionMessage>,
    write: PeerWrite,
    outbox: Arc<Outbox>,
) {
    // Both loops run to the link's end; the one left is dropped with the socket.
    let end = tokio::select! {
        biased;
        end = read_loop(&shared, peer, reader.gated(shared.gate(peer, Direction::Recv))) => end,
        end = write_loop(write, &outbox, shared.gate(peer, Direction::Send)) => end,
    };
    log_end(&format!("election link with {peer}"), &end);
    let mut state = shared.lock();
    let Some(p) = state.election.get_mut(&peer) else {
        return;
    };
    if !is_current(p, generation) {
        return;
    }
    p.task = None;
    if state.strangers.remove(&peer) {
        // Nothing is kept for a stranger between its links.
        state.election.remove(&peer);
        return;
    }
    let Some(p) = state.election.get_mut(&peer) else {
        return;
    };
    if !p.outbox.is_empty() {
        start_dialer(&shared, &mut state, peer, false);
    }
}

/// Delivers `peer`'s notifications, checking each names its sender.
async fn read_loop(
    shared: &Shared,
    peer: ServerId,
    mut reader: FrameReader<ElectionMessage>,
) -> LinkEnd {
    let mut productive = false;
    loop {
        let message = match reader.next().await {
            Ok(Some(message)) => message,
            Ok(None) => return LinkEnd::Eof,
            Err(end) => return end,
        };
        let Some(Body::Notification(n)) = message.body else {
            return LinkEnd::Protocol("a hello after the first frame".into());
        };
        if n.sid != peer.0 {
            return LinkEnd::Protocol(format!("a notification from sid {}", n.sid));
        }
        let n = match notification_from_wire(&n) {
            Ok(n) => n,
            Err(e) => return LinkEnd::Protocol(e.to_string()),
        };
        if !productive {
            productive = true;
            if let Some(p) = shared.lock().election.get_mut(&peer) {
                p.retry = Duration::ZERO;
            }
        }
        if shared
            .events
            .send(PeerEvent::Notification(n))
            .await
            .is_err()
        {
            return LinkEnd::EventsClosed;
        }
    }
}
