//! The quorum port (spec §9.3): a follower dials its leader and opens with
//! FOLLOWERINFO, which is how the leader learns who it is.
//!
//! ```text
//!  follower: connect_zab(L) ── dial (≤ 5 tries within connect_timeout) ──▶ leader: accept
//!            send_zab(L, FollowerInfo) ─────────── first packet ─────────▶ sid from it, register
//!  ◀───────────────────────── Zab messages both ways ──────────────────────▶
//!  either end: ZabClosed { peer }, after every message the link delivered
//! ```
//!
//! A link speaks for its peer only while its generation is the registered one:
//! each event is sent under the state lock after checking it, so once
//! `close_zab`, `close_all_zab`, `connect_zab` or a newer link from the same
//! sid has replaced it, nothing more comes from it, not even `ZabClosed`.

use super::link::{encode_frames, log_end, write_loop, Closed, FrameReader, LinkEnd, Outbox, Push};
use super::quorum_auth;
use super::stream::{PeerRead, PeerWrite};
use super::Accepted;
use super::{LearnerIntake, LinkTask, PeerEvent, QuorumLink, Shared, State};
use crate::core::admission::{Port, Verdict};
use crate::core::election::ServerId;
use crate::core::zab::ZabMessage;
use crate::driver::peer_wire::{encode_zab, follower_info_sid, Inbound, ZabDecoder};
use crate::runtime::faults::Direction;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;
use zkd_protocol::peer::{PeerCodec, QuorumPacket};

/// A follower tries its leader at most this many times per `connect_zab`
/// (ZooKeeper's learner: 5).
const CONNECT_ATTEMPTS: u32 = 5;

/// The first pause between those attempts; it doubles.
const CONNECT_RETRY_MIN: Duration = Duration::from_millis(100);

/// How often a learner claiming a sid with a live link looks again.
const SID_RECHECK: Duration = Duration::from_millis(20);

/// Dials `leader`'s quorum port as the link with it, replacing any other.
pub(super) fn connect(shared: &Arc<Shared>, leader: ServerId) {
    let mut state = shared.lock();
    if let Some(old) = state.quorum.remove(&leader) {
        old.task.abort.abort();
    }
    let generation = state.next_generation();
    let outbox = Arc::new(Outbox::default());
    let task = dial_and_run(shared.clone(), leader, generation, outbox.clone());
    // The task cannot look itself up before this lock is released.
    register(&mut state, leader, generation, outbox, task);
}

fn register(
    state: &mut State,
    peer: ServerId,
    generation: u64,
    outbox: Arc<Outbox>,
    task: impl std::future::Future<Output = ()> + Send + 'static,
) -> bool {
    let Some(abort) = state.spawn(task) else {
        return false;
    };
    let task = LinkTask { generation, abort };
    state.quorum.insert(peer, QuorumLink { task, outbox });
    true
}

/// Queues `message` on the link with `to`, if there is one.
pub(super) fn send(shared: &Arc<Shared>, to: ServerId, message: ZabMessage) {
    send_packets(shared, to, &encode_zab(shared.me, message));
}

/// Bytes queued on the link with `to` and not yet written; None without a link.
pub(super) fn queued_bytes(shared: &Shared, to: ServerId) -> Option<usize> {
    shared
        .lock()
        .quorum
        .get(&to)
        .map(|l| l.outbox.queued_bytes())
}

/// Queues `packets` (one message) on the link with `to`, if there is one.
pub(super) fn send_packets(shared: &Arc<Shared>, to: ServerId, packets: &[QuorumPacket]) {
    let outbox = shared.lock().quorum.get(&to).map(|l| l.outbox.clone());
    let Some(outbox) = outbox else {
        tracing::debug!("no quorum link with {to}; message dropped");
        return;
    };
    let mut codec = PeerCodec::<QuorumPacket>::with_max_frame(shared.settings.max_frame);
    let frames = match encode_frames(&mut codec, packets) {
        Ok(frames) => frames,
        Err(e) => {
            tracing::warn!("quorum link with {to}: cannot encode a message ({e}); closing");
            outbox.close(Closed::Unencodable);
            return;
        }
    };
    let max = shared.settings.max_queued_bytes;
    if outbox.push(frames, max) == Push::Overflow {
        tracing::warn!("quorum link with {to}: more than {max} bytes queued; closing");
    }
}

/// A connection on our quorum port: its first packet must be FOLLOWERINFO
/// (or OBSERVERINFO) from another member, from that member's host.
pub(super) async fn accept(shared: Arc<Shared>, accepted: Accepted, remote: SocketAddr) {
    let authenticated = accepted.authenticated;
    let (mut reader, write) =
        accepted.framed::<QuorumPacket>(shared.settings.max_frame, &shared.settings);
    let first = match tokio::time::timeout(shared.settings.connect_timeout, reader.next()).await {
        Err(_) => Err(LinkEnd::HandshakeTimeout),
        Ok(Ok(None)) => Err(LinkEnd::Eof),
        Ok(Ok(Some(packet))) => Ok(packet),
        Ok(Err(end)) => Err(end),
    };
    let packet = match first {
        Ok(packet) => packet,
        Err(end) => return log_end(&format!("quorum link from {remote}"), &end),
    };
    let Some(sid) = follower_info_sid(&packet) else {
        tracing::warn!("quorum link from {remote}: first packet is not FOLLOWERINFO; closing");
        return;
    };
    if let Verdict::Refused(why) = shared.admit(Port::Quorum, sid, remote, authenticated).await {
        tracing::warn!("quorum link from {remote}: {why}; closing");
        return;
    }
    if !taken_within(&shared).await {
        tracing::warn!("quorum link from {remote} as {sid}: this member is not leading; closing");
        return;
    }
    if !sid_free_within(&shared, sid).await {
        tracing::warn!("quorum link from {remote} as {sid}: sid {sid} has a live link; closing");
        return;
    }
    let mut decoder = ZabDecoder::new();
    let bytes = prost::Message::encoded_len(&packet);
    let message = match decoder.decode(packet) {
        Ok(Some(Inbound::Message(message))) => message,
        Ok(_) => return,
        Err(e) => {
            tracing::warn!("quorum link from {sid} ({remote}): {e}; closing");
            return;
        }
    };
    let budget = shared.zab_permit(bytes).await;
    let Ok(permit) = shared.events.reserve().await else {
        return;
    };
    let mut state = shared.lock();
    if !is_free(&state, sid, shared.settings.live_link) {
        tracing::warn!("quorum link from {remote} as {sid}: another took sid {sid}; closing");
        return;
    }
    if let Some(old) = state.quorum.remove(&sid) {
        tracing::debug!("quorum link from {sid} ({remote}) replaces an idle one");
        old.task.abort.abort();
    }
    let generation = state.next_generation();
    let outbox = Arc::new(Outbox::default());
    outbox.heard();
    let task = run_link(
        shared.clone(),
        sid,
        generation,
        reader,
        write,
        outbox.clone(),
        decoder,
    );
    if register(&mut state, sid, generation, outbox, task) {
        permit.send(PeerEvent::Zab {
            from: sid,
            message,
            permit: budget,
            link: generation,
        });
    }
}

/// Whether the member takes learners, now or once a round it is looking in
/// ends within `connect_timeout` (a follower may dial before its
/// leader-elect has caught up its tree).
async fn taken_within(shared: &Shared) -> bool {
    let mut intake = shared.intake.subscribe();
    let decided = intake.wait_for(|i| *i != LearnerIntake::Held);
    let taken = match tokio::time::timeout(shared.settings.connect_timeout, decided).await {
        Ok(Ok(intake)) => *intake == LearnerIntake::Taken,
        _ => false,
    };
    taken
}

/// Only one connection speaks for a sid: a second one claiming it is an
/// impostor, or the peer's new link while its old one has not yet seen the
/// close. It waits, within `connect_timeout`, for the old one to end or to
/// fall idle.
async fn sid_free_within(shared: &Shared, sid: ServerId) -> bool {
    let deadline = Instant::now() + shared.settings.connect_timeout;
    loop {
        if is_free(&shared.lock(), sid, shared.settings.live_link) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(SID_RECHECK).await;
    }
}

/// Whether `sid` has no quorum link that read or wrote within `live`.
fn is_free(state: &State, sid: ServerId, live: Duration) -> bool {
    state
        .quorum
        .get(&sid)
        .is_none_or(|link| link.outbox.idle_for() >= live)
}

fn is_current(state: &State, peer: ServerId, generation: u64) -> bool {
    state
        .quorum
        .get(&peer)
        .is_some_and(|link| link.task.generation == generation)
}

/// A follower's link: dial, then run it; a failed dial ends it at once.
async fn dial_and_run(shared: Arc<Shared>, leader: ServerId, generation: u64, outbox: Arc<Outbox>) {
    match dial(&shared, leader).await {
        Ok((read, write)) => {
            let reader = FrameReader::new(
                read,
                shared.settings.max_frame,
                shared.settings.stall_timeout,
            );
            let decoder = ZabDecoder::new();
            run_link(shared, leader, generation, reader, write, outbox, decoder).await;
        }
        Err(e) => {
            tracing::warn!("quorum link to {leader}: cannot connect: {e}");
            link_ended(&shared, leader, generation).await;
        }
    }
}

/// Connects to `leader`'s quorum port, retrying within `connect_timeout`.
async fn dial(shared: &Shared, leader: ServerId) -> io::Result<(PeerRead, PeerWrite)> {
    if leader == shared.me {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "cannot follow oneself",
        ));
    }
    shared.refuse_if_cut_off(leader).await?;
    let spec = shared.spec(leader)?;
    let deadline = Instant::now() + shared.settings.connect_timeout;
    let mut pause = CONNECT_RETRY_MIN;
    for attempt in 1.. {
        let connect = shared.dial_tcp(&spec.host, spec.quorum_port);
        let error = match tokio::time::timeout_at(deadline, connect).await {
            Ok(Ok(stream)) => {
                stream.set_nodelay(true)?;
                let ready = async {
                    let secure = shared.secure_dialed(stream, &spec.host).await?;
                    let (mut read, mut write) = secure.split();
                    quorum_auth::dial(shared, &mut read, &mut write).await?;
                    Ok((read, write))
                };
                let timed_out =
                    |_| io::Error::new(io::ErrorKind::TimedOut, "TLS or SASL timed out");
                return tokio::time::timeout_at(deadline, ready)
                    .await
                    .map_err(timed_out)?;
            }
            Ok(Err(e)) => e,
            Err(_) => return Err(io::Error::new(io::ErrorKind::TimedOut, "connect timed out")),
        };
        if attempt >= CONNECT_ATTEMPTS || Instant::now() + pause >= deadline {
            return Err(error);
        }
        tracing::debug!("quorum link to {leader}: attempt {attempt} failed: {error}");
        tokio::time::sleep(pause).await;
        pause *= 2;
    }
    unreachable!("the loop returns")
}

/// One quorum link: packets in, the outbox out, until either side ends.
async fn run_link(
    shared: Arc<Shared>,
    peer: ServerId,
    generation: u64,
    reader: FrameReader<QuorumPacket>,
    write: PeerWrite,
    outbox: Arc<Outbox>,
    decoder: ZabDecoder,
) {
    // Each branch runs to the link's end; the others are dropped with the socket.
    // A closed outbox wins even while the writer is blocked on a peer that does not read.
    let end = tokio::select! {
        biased;
        end = outbox.closed() => end,
        end = read_loop(&shared, peer, generation, reader.gated(shared.gate(peer, Direction::Recv)), decoder, &outbox) => end,
        end = write_loop(write, &outbox, shared.gate(peer, Direction::Send)) => end,
    };
    log_end(&format!("quorum link with {peer}"), &end);
    if !matches!(end, LinkEnd::Superseded) {
        link_ended(&shared, peer, generation).await;
    }
}

/// Delivers `peer`'s Zab messages while this link is the registered one.
async fn read_loop(
    shared: &Shared,
    peer: ServerId,
    generation: u64,
    mut reader: FrameReader<QuorumPacket>,
    mut decoder: ZabDecoder,
    outbox: &Outbox,
) -> LinkEnd {
    loop {
        let packet = match reader.next().await {
            Ok(Some(packet)) => packet,
            Ok(None) => return LinkEnd::Eof,
            Err(end) => return end,
        };
        let bytes = prost::Message::encoded_len(&packet);
        outbox.heard();
        let event = match decoder.decode(packet) {
            Ok(Some(Inbound::Message(message))) => PeerEvent::Zab {
                from: peer,
                message,
                permit: shared.zab_permit(bytes).await,
                link: generation,
            },
            Ok(Some(Inbound::SnapChunk(piece))) => {
                let permit = shared.snap_permit(piece.data.len()).await;
                PeerEvent::SnapChunk {
                    from: peer,
                    piece,
                    permit,
                    link: generation,
                }
            }
            Ok(None) => continue,
            Err(e) => return LinkEnd::Protocol(e.0),
        };
        let Ok(permit) = shared.events.reserve().await else {
            return LinkEnd::EventsClosed;
        };
        let state = shared.lock();
        if !is_current(&state, peer, generation) {
            return LinkEnd::Superseded;
        }
        permit.send(event);
    }
}

/// Unregisters the link and reports `ZabClosed`, unless it was replaced.
async fn link_ended(shared: &Shared, peer: ServerId, generation: u64) {
    let permit = shared.events.reserve().await.ok();
    let mut state = shared.lock();
    if !is_current(&state, peer, generation) {
        return;
    }
    state.quorum.remove(&peer);
    if let Some(permit) = permit {
        permit.send(PeerEvent::ZabClosed {
            peer,
            link: generation,
        });
    }
}
