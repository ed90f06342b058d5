//! The peer transport of an ensemble member: its election and quorum ports
//! (spec §8.1, §9.3), the only place member-to-member sockets exist.
//!
//! ```text
//!            send_notification ─▶ per-peer slot (capacity 1) ─▶ election link ─┐
//!  member    send_zab ──────────▶ per-link outbox (bounded) ──▶ quorum link ───┤ TCP, PeerCodec
//!  loop  ◀── PeerEvent ◀── Notification / Zab{from} / ZabClosed ◀── read loops ┘
//! ```
//!
//! * **Election port**: one connection per pair, kept only if the larger sid
//!   initiated it. The initiator first sends an `ElectionHello`. A smaller sid
//!   that has something to send connects, says hello and hangs up; the larger
//!   one then connects back. Each peer has a send slot of capacity one (only
//!   the newest notification matters) that outlives its connections, and the
//!   last notification sent is sent again on a new connection.
//! * **Quorum port**: a follower connects to its leader ([`PeerNetwork::connect_zab`])
//!   and its first packet, FOLLOWERINFO, names it. Each link has a generation;
//!   a link replaced or closed by the member emits nothing more, and a link
//!   that ends on its own emits [`PeerEvent::ZabClosed`] after everything it
//!   delivered.
//!
//! Before either protocol speaks, each connection is made ready: TLS if the
//! member has quorum TLS (`runtime/tls/quorum.rs`: `sslQuorum`,
//! `portUnification`), then quorum SASL (`quorum_auth.rs`), which the
//! dialer starts and the acceptor tells from a first frame.
//!
//! Who may speak is decided by the sans-IO [`Admission`] (`core/admission`):
//! a member's sid only from its host (or authenticated by quorum TLS or
//! SASL), a sid outside the configuration answered with votes on the
//! election port (16 at most at a time) and refused on the quorum port,
//! handshake slots per remote address. This member dials only the
//! addresses of its configuration, from its own `server.N` host.
//!
//! Faults are per link: a garbage, oversized or stalled frame, or a peer
//! that does not read closes that link only, with one warning. The
//! member loop never blocks here: sends only queue. Every task belongs to the
//! [`PeerNetwork`] and is aborted when it is dropped.

mod admit;
mod driven;
mod election_link;
mod gate;
mod link;
mod quorum_auth;
mod quorum_link;
mod stream;
#[cfg(test)]
pub(super) mod tests;

use crate::config::ServerSpec;
use crate::core::admission::Admission;
use crate::core::election::{Notification, ServerId};
pub use crate::core::peer_event::{LearnerIntake, PeerEvent, SnapPiece};
use crate::core::zab::ZabMessage;
pub use crate::core::ReadPermit;
use crate::driver::peer_wire as convert;
use admit::{literal_addresses, SlotGuard};
use bytes::Bytes;
pub(crate) use driven::runtime_limits;
use link::Outbox;
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
pub use stream::PeerStream;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, Semaphore};
use tokio::task::{AbortHandle, JoinSet};
use zkd_protocol::peer::election::MAX_ELECTION_PAYLOAD;
use zkd_protocol::peer::frame::DEFAULT_MAX_PEER_FRAME;
use zkd_protocol::peer::zab::MAX_SNAP_CHUNK;
use zkd_protocol::Zxid;

/// The largest `max_frame` allowed: 1 GiB, below the first half of a
/// quorum SASL packet read as a frame's length.
const MAX_PEER_FRAME: usize = 1 << 30;

/// Pause after a failed `accept` (out of file descriptors, say).
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Room for a snapshot chunk's framing around [`MAX_SNAP_CHUNK`] bytes of data.
const SNAP_CHUNK_OVERHEAD: usize = 64;

/// Bytes of SNAP pieces received and not yet written (dropped) that a
/// member allows: while they are spent the link stops reading, so a slow
/// disk slows the leader's stream instead of filling this member's memory.
const SNAP_BYTES_IN_FLIGHT: usize = 8 << 20;

/// Bytes of Zab messages received and not yet done with that a member
/// allows: a proposal's share is given back once it is durable. While they
/// are spent the links stop reading, TCP pushes back, and a leader sees a
/// follower whose disk is slower than its own fall behind (its outbox to
/// that follower fills and closes) instead of that follower's memory growing.
pub const ZAB_BYTES_IN_FLIGHT: usize = 64 << 20;

/// Strangers (sids outside the configuration) with an election link at
/// once at most: each is answered with this member's vote, nothing more.
const MAX_STRANGERS: usize = 16;

/// How long resolving a member's host again (after a refusal) may take.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(2);

#[cfg(test)]
impl ReadPermit {
    /// `units` KiB of `budget`, which must be free.
    pub fn take(budget: &Arc<Semaphore>, units: u32) -> ReadPermit {
        Self::try_take(budget, units).expect("the budget has room")
    }

    /// `units` KiB of `budget`, if they are free.
    pub fn try_take(budget: &Arc<Semaphore>, units: u32) -> Option<ReadPermit> {
        let permit = budget.clone().try_acquire_many_owned(units).ok()?;
        Some(ReadPermit::new(permit, units))
    }
}

/// Waits for `bytes` of `budget` (of `whole` bytes, counted in KiB).
async fn read_permit(budget: &Arc<Semaphore>, bytes: usize, whole: usize) -> ReadPermit {
    let units = crate::core::budget_units(bytes, 1024, whole);
    let permit = budget
        .clone()
        .acquire_many_owned(units)
        .await
        .expect("a budget of bytes in flight is never closed");
    ReadPermit::new(permit, units)
}

/// Limits and timeouts of the peer links.
#[derive(Clone, Debug)]
pub struct PeerSettings {
    /// How long connecting (and a peer's first frame) may take: the election's
    /// `cnxTimeout`, a follower's connect budget for its leader.
    pub connect_timeout: Duration,
    /// A link holding part of a frame with nothing more arriving for this long is closed.
    pub stall_timeout: Duration,
    /// The largest quorum frame read or written (election frames are also capped at
    /// ZooKeeper's 512 KiB). Must hold a snapshot chunk.
    pub max_frame: usize,
    /// Bytes queued for one quorum link beyond which it is closed.
    pub max_queued_bytes: usize,
    /// A quorum link that read or wrote within this long is live: a second
    /// connection claiming its peer's sid is refused, not put in its place.
    pub live_link: Duration,
    /// Peers a test cut this member off from (`zkd.faults.enable` only).
    pub cuts: Option<tokio::sync::watch::Receiver<crate::runtime::faults::PeerCuts>>,
    /// Quorum TLS (`sslQuorum`, `portUnification`); None: plaintext only.
    pub tls: Option<Arc<crate::runtime::tls::QuorumTls>>,
    /// Quorum SASL (`quorum.auth.enableSasl`); None: links are not authenticated.
    pub sasl: Option<Arc<crate::config::QuorumSaslConfig>>,
}

impl Default for PeerSettings {
    fn default() -> PeerSettings {
        PeerSettings {
            connect_timeout: Duration::from_secs(5),
            stall_timeout: Duration::from_secs(10),
            max_frame: DEFAULT_MAX_PEER_FRAME,
            max_queued_bytes: 64 << 20,
            live_link: Duration::from_secs(2),
            cuts: None,
            tls: None,
            sasl: None,
        }
    }
}

impl PeerSettings {
    fn validate(&self) -> io::Result<()> {
        let invalid = |why: &str| Err(io::Error::new(io::ErrorKind::InvalidInput, why));
        if self.max_frame < MAX_SNAP_CHUNK + SNAP_CHUNK_OVERHEAD {
            return invalid("peer max_frame cannot carry a snapshot chunk");
        }
        if self.max_frame > MAX_PEER_FRAME {
            return invalid("peer max_frame is over 1 GiB");
        }
        if self.max_queued_bytes == 0 {
            return invalid("peer max_queued_bytes is 0");
        }
        if self.connect_timeout.is_zero()
            || self.stall_timeout.is_zero()
            || self.live_link.is_zero()
        {
            return invalid("peer timeouts must be positive");
        }
        Ok(())
    }
}

/// This member's links to the others. Dropping it closes every link and ends
/// every task.
pub struct PeerNetwork {
    shared: Arc<Shared>,
    election_addr: SocketAddr,
    quorum_addr: SocketAddr,
}

impl PeerNetwork {
    /// Binds this member's election and quorum listeners on its own server.N host
    /// and ports and starts accepting. `events` receives everything from peers.
    pub async fn start(
        me: ServerId,
        servers: &BTreeMap<u64, ServerSpec>,
        events: mpsc::Sender<PeerEvent>,
        settings: PeerSettings,
    ) -> io::Result<PeerNetwork> {
        let spec = servers.get(&me.0).ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidInput, format!("no server.{me}"))
        })?;
        let election = TcpListener::bind((spec.host.as_str(), spec.election_port)).await?;
        let quorum = TcpListener::bind((spec.host.as_str(), spec.quorum_port)).await?;
        PeerNetwork::with_listeners(me, servers, election, quorum, events, settings)
    }

    /// As [`PeerNetwork::start`], on listeners the caller bound. Call it within a
    /// tokio runtime: it spawns the accept tasks.
    pub fn with_listeners(
        me: ServerId,
        servers: &BTreeMap<u64, ServerSpec>,
        election: TcpListener,
        quorum: TcpListener,
        events: mpsc::Sender<PeerEvent>,
        settings: PeerSettings,
    ) -> io::Result<PeerNetwork> {
        settings.validate()?;
        if !servers.contains_key(&me.0) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("no server.{me}"),
            ));
        }
        let election_addr = election.local_addr()?;
        let quorum_addr = quorum.local_addr()?;
        let peers = servers
            .keys()
            .map(|&id| ServerId(id))
            .filter(|&id| id != me);
        let mut admission = Admission::new(me);
        for (&id, spec) in servers {
            admission.set_member(ServerId(id), literal_addresses(&spec.host));
        }
        let state = State {
            admission,
            servers: servers.clone(),
            closed: false,
            next_generation: 0,
            tasks: JoinSet::new(),
            election: peers.map(|id| (id, ElectionPeer::default())).collect(),
            strangers: BTreeSet::new(),
            quorum: BTreeMap::new(),
        };
        let shared = Arc::new(Shared {
            me,
            settings,
            events,
            state: Mutex::new(state),
            intake: tokio::sync::watch::Sender::new(LearnerIntake::Held),
            snap_budget: Arc::new(Semaphore::new(SNAP_BYTES_IN_FLIGHT >> 10)),
            zab_budget: Arc::new(Semaphore::new(ZAB_BYTES_IN_FLIGHT >> 10)),
        });
        shared.spawn(accept_loop(
            shared.clone(),
            election,
            "election",
            election_link::accept,
        ));
        shared.spawn(accept_loop(
            shared.clone(),
            quorum,
            "quorum",
            quorum_link::accept,
        ));
        Ok(PeerNetwork {
            shared,
            election_addr,
            quorum_addr,
        })
    }

    /// The address the election listener is bound to.
    pub fn election_addr(&self) -> SocketAddr {
        self.election_addr
    }

    /// The address the quorum listener is bound to.
    pub fn quorum_addr(&self) -> SocketAddr {
        self.quorum_addr
    }

    /// Queues a notification for `to`. Never blocks; only the newest unsent one
    /// per peer is kept (ZooKeeper's send queue of capacity one). Notifications
    /// to this member itself are dropped: the election loops its own back.
    pub fn send_notification(&mut self, to: ServerId, n: Notification) {
        election_link::send(&self.shared, to, &n);
    }

    /// Follower: opens the quorum link to `leader`'s quorum port (retrying a few
    /// times within `connect_timeout`) and sends queued messages once connected;
    /// failure emits `ZabClosed { peer: leader }`. Replaces any link with `leader`.
    pub fn connect_zab(&mut self, leader: ServerId) {
        quorum_link::connect(&self.shared, leader);
    }

    /// Whether `event` came from a quorum link that was closed or replaced
    /// since it was queued: a new role must not see an old link's messages
    /// (nor its close). Election notifications are never stale.
    pub fn is_stale(&self, event: &PeerEvent) -> bool {
        let state = self.shared.lock();
        let current = |peer: &ServerId| state.quorum.get(peer).map(|l| l.task.generation);
        match event {
            PeerEvent::Notification(_) | PeerEvent::Unreachable(_) => false,
            PeerEvent::Zab { from, link, .. } | PeerEvent::SnapChunk { from, link, .. } => {
                current(from) != Some(*link)
            }
            // Its link is gone from the table by now: stale only if another replaced it.
            PeerEvent::ZabClosed { peer, link } => current(peer).is_some_and(|g| g != *link),
        }
    }

    /// Queues a Zab message on the quorum link with `to` (leader: an accepted
    /// link; follower: the link from `connect_zab`). Never blocks. No link: the
    /// message is dropped (the Zab core learns through `ZabClosed` and timeouts).
    pub fn send_zab(&mut self, to: ServerId, message: ZabMessage) {
        quorum_link::send(&self.shared, to, message);
    }

    /// Starts a SNAP of the image as of `zxid` to `to`; chunks follow.
    pub fn send_snap_start(&mut self, to: ServerId, zxid: Zxid) {
        quorum_link::send_packets(&self.shared, to, &[convert::snap_start(zxid)]);
    }

    /// The next chunk of the SNAP to `to`; the last carries `fuzzy_through`.
    pub fn send_snap_chunk(
        &mut self,
        to: ServerId,
        offset: u64,
        data: Bytes,
        fuzzy_through: Option<Zxid>,
    ) {
        let packet = convert::snap_chunk(offset, data, fuzzy_through);
        quorum_link::send_packets(&self.shared, to, &[packet]);
    }

    /// Bytes queued for `to` and not yet written (a SNAP streams only as
    /// fast as the follower reads); None when there is no link.
    pub fn queued_bytes(&self, to: ServerId) -> Option<usize> {
        quorum_link::queued_bytes(&self.shared, to)
    }

    /// Bytes a quorum link may queue before it closes.
    pub fn max_queued_bytes(&self) -> usize {
        self.shared.settings.max_queued_bytes
    }

    /// What becomes of connections on the quorum port (see [`LearnerIntake`]).
    pub fn set_learner_intake(&mut self, intake: LearnerIntake) {
        self.shared.intake.send_replace(intake);
    }

    /// A configuration took effect, or one this member leads was proposed:
    /// the members it lists that this one did not know become peers (at the
    /// addresses it gives), so a server a reconfig adds can link and sync,
    /// and a member it moved (an existing id at new ports or host, as
    /// ZooKeeper's reconfig allows) is dialled and admitted there from now
    /// on; a live link stays until it ends. Members it dropped stay known,
    /// and are refused by the roles that no longer count them.
    /// This member's own new address needs a restart to be listened on.
    pub fn learn_servers(&mut self, servers: BTreeMap<u64, ServerSpec>) {
        let mut state = self.shared.lock();
        for (id, spec) in servers {
            let known = state.servers.get(&id);
            let moved = known.is_some_and(|k| !same_addresses(k, &spec));
            if id == self.shared.me.0 {
                if moved {
                    tracing::warn!(
                        "this member's addresses changed; they take effect at its restart"
                    );
                }
                continue;
            }
            if known.is_none() {
                tracing::info!(peer = id, "a new member's addresses are known");
            } else if moved {
                tracing::info!(peer = id, host = %spec.host, quorum_port = spec.quorum_port,
                    election_port = spec.election_port, "a member's addresses changed");
            } else {
                continue;
            }
            let addrs = literal_addresses(&spec.host);
            state.admission.set_member(ServerId(id), addrs);
            state.servers.insert(id, spec);
            state.strangers.remove(&ServerId(id));
            state.election.entry(ServerId(id)).or_default();
        }
    }

    /// Closes the quorum link with `peer`, if any, without a `ZabClosed` event.
    pub fn close_zab(&mut self, peer: ServerId) {
        if let Some(link) = self.shared.lock().quorum.remove(&peer) {
            link.task.abort.abort();
        }
    }

    /// Closes every quorum link (role change), without `ZabClosed` events.
    pub fn close_all_zab(&mut self) {
        let links = std::mem::take(&mut self.shared.lock().quorum);
        for link in links.into_values() {
            link.task.abort.abort();
        }
    }
}

impl Drop for PeerNetwork {
    fn drop(&mut self) {
        let mut state = self.shared.lock();
        state.closed = true;
        state.quorum.clear();
        state.election.clear();
        state.tasks.abort_all();
    }
}

/// What every task of one network shares.
struct Shared {
    me: ServerId,
    settings: PeerSettings,
    events: mpsc::Sender<PeerEvent>,
    state: Mutex<State>,
    /// Whether the member takes learners on its quorum port.
    intake: tokio::sync::watch::Sender<LearnerIntake>,
    /// [`SNAP_BYTES_IN_FLIGHT`], in KiB.
    snap_budget: Arc<Semaphore>,
    /// [`ZAB_BYTES_IN_FLIGHT`], in KiB.
    zab_budget: Arc<Semaphore>,
}

/// The links, under one short-held lock (never across an await).
struct State {
    /// Who may speak on the ports, and the handshakes under way.
    admission: Admission,
    /// Every member's addresses, this one's included: those it started
    /// with, and those a reconfig added since.
    servers: BTreeMap<u64, ServerSpec>,
    /// The network was dropped: spawn nothing more.
    closed: bool,
    next_generation: u64,
    tasks: JoinSet<()>,
    /// Every other member, linked or not, and strangers while linked.
    election: BTreeMap<ServerId, ElectionPeer>,
    /// Sids outside the configuration with an election link.
    strangers: BTreeSet<ServerId>,
    /// Quorum links that exist or are being dialed.
    quorum: BTreeMap<ServerId, QuorumLink>,
}

/// One other member on the election port: its send slot, which outlives links,
/// and the task (dialing or running a link) currently responsible for it.
#[derive(Default)]
struct ElectionPeer {
    outbox: Arc<Outbox>,
    task: Option<LinkTask>,
    /// The pause before the next dial attempt; zero after a link that delivered.
    retry: Duration,
}

/// One quorum link, from dialing to its end.
struct QuorumLink {
    task: LinkTask,
    outbox: Arc<Outbox>,
}

/// A task working for one peer; only the current generation may speak for it.
struct LinkTask {
    generation: u64,
    abort: AbortHandle,
}

impl State {
    /// Spawns a task owned by the network, unless it was dropped.
    fn spawn(&mut self, task: impl Future<Output = ()> + Send + 'static) -> Option<AbortHandle> {
        if self.closed {
            return None;
        }
        while let Some(done) = self.tasks.try_join_next() {
            if let Err(e) = done {
                if e.is_panic() {
                    tracing::error!("peer task panicked: {e}");
                }
            }
        }
        Some(self.tasks.spawn(task))
    }

    fn next_generation(&mut self) -> u64 {
        self.next_generation += 1;
        self.next_generation
    }
}

impl Shared {
    /// Waits until `bytes` more of SNAP pieces may be in flight.
    async fn snap_permit(&self, bytes: usize) -> ReadPermit {
        read_permit(&self.snap_budget, bytes, SNAP_BYTES_IN_FLIGHT).await
    }

    /// Waits until a Zab message of `bytes` more may be in flight.
    async fn zab_permit(&self, bytes: usize) -> ReadPermit {
        read_permit(&self.zab_budget, bytes, ZAB_BYTES_IN_FLIGHT).await
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
        self.lock().spawn(task);
    }

    fn spec(&self, sid: ServerId) -> io::Result<ServerSpec> {
        (self.lock().servers.get(&sid.0).cloned())
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("no server.{sid}")))
    }

    fn election_max_frame(&self) -> usize {
        self.settings.max_frame.min(MAX_ELECTION_PAYLOAD)
    }

    /// The gate of one direction of the link with `peer`, if faults are on.
    fn gate(&self, peer: ServerId, dir: crate::runtime::faults::Direction) -> Option<gate::Gate> {
        let cuts = self.settings.cuts.clone()?;
        Some(gate::Gate::new(cuts, peer.0, dir))
    }

    /// An accepted connection, with quorum TLS if configured, within the
    /// connect timeout.
    async fn secure_accepted(
        &self,
        stream: TcpStream,
        remote: SocketAddr,
    ) -> io::Result<PeerStream> {
        let Some(tls) = &self.settings.tls else {
            return Ok(PeerStream::Plain(stream));
        };
        tokio::time::timeout(self.settings.connect_timeout, tls.accept(stream, remote))
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "TLS handshake timed out"))?
    }

    /// An accepted connection made ready for its protocol, within the
    /// connect timeout: secured (quorum TLS), split, and authenticated
    /// (quorum SASL).
    async fn ready_accepted(&self, stream: TcpStream, remote: SocketAddr) -> io::Result<Accepted> {
        let secure = self.secure_accepted(stream, remote).await?;
        let tls_authenticated = secure.is_authenticated();
        let (mut read, mut write) = secure.split();
        let auth = quorum_auth::accept(self, &mut read, &mut write, remote);
        let why = match self.settings.sasl {
            Some(_) => "quorum SASL timed out",
            None => "no first frame within the connect timeout",
        };
        let (buffered, sasl_authenticated) =
            tokio::time::timeout(self.settings.connect_timeout, auth)
                .await
                .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, why))??;
        Ok(Accepted {
            read,
            write,
            buffered,
            authenticated: tls_authenticated || sasl_authenticated,
        })
    }

    /// A connection this member opened to `host`, with quorum TLS if
    /// configured (the caller bounds the time).
    async fn secure_dialed(&self, stream: TcpStream, host: &str) -> io::Result<PeerStream> {
        match &self.settings.tls {
            None => Ok(PeerStream::Plain(stream)),
            Some(tls) => tls.connect(stream, host).await,
        }
    }

    /// Fails as a dial into a partition does, after the connect timeout,
    /// while a test cuts this member off from `peer`.
    async fn refuse_if_cut_off(&self, peer: ServerId) -> io::Result<()> {
        let cut_off = |cuts: &tokio::sync::watch::Receiver<crate::runtime::faults::PeerCuts>| {
            cuts.borrow().isolates(peer.0)
        };
        if self.settings.cuts.as_ref().is_some_and(cut_off) {
            tokio::time::sleep(self.settings.connect_timeout).await;
            return Err(io::Error::new(io::ErrorKind::TimedOut, "connect timed out"));
        }
        Ok(())
    }
}

/// An accepted connection, ready for its protocol: its halves, and what
/// was read of its first frame before the protocol took over.
struct Accepted {
    read: stream::PeerRead,
    write: stream::PeerWrite,
    buffered: bytes::BytesMut,
    /// Quorum TLS (a verified certificate) or SASL proved it one of the ensemble's.
    authenticated: bool,
}

impl Accepted {
    /// A reader of `M` frames of up to `max_frame` bytes (starting with
    /// what was read already), and the writing half.
    fn framed<M: zkd_protocol::peer::PeerMessage>(
        self,
        max_frame: usize,
        settings: &PeerSettings,
    ) -> (link::FrameReader<M>, stream::PeerWrite) {
        let reader = link::FrameReader::new(self.read, max_frame, settings.stall_timeout)
            .buffered(self.buffered);
        (reader, self.write)
    }
}

/// Accepts connections on one port, handing each (made ready, see
/// [`Shared::ready_accepted`]) to `handshake` in a task of its own, while
/// its remote address has a handshake slot ([`Admission::start_handshake`]).
async fn accept_loop<F, Fut>(
    shared: Arc<Shared>,
    listener: TcpListener,
    port: &'static str,
    handshake: F,
) where
    F: Fn(Arc<Shared>, Accepted, SocketAddr) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let handshake = Arc::new(handshake);
    loop {
        let (stream, remote) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                tracing::warn!("{port} port: accept failed: {e}");
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
        };
        let slot = match shared.lock().admission.start_handshake(remote.ip()) {
            Ok(slot) => SlotGuard(shared.clone(), Some(slot)),
            Err(why) => {
                tracing::warn!("{port} port: {remote}: {why}; closing");
                continue;
            }
        };
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!("{port} port: {remote}: {e}");
            continue;
        }
        let (shared_, handshake) = (shared.clone(), handshake.clone());
        shared.spawn(async move {
            match shared_.ready_accepted(stream, remote).await {
                Ok(accepted) => handshake(shared_, accepted, remote).await,
                Err(e) => tracing::warn!("{port} port: {remote}: {e}; closing"),
            }
            drop(slot);
        });
    }
}

/// Whether two server lines give a peer the same addresses to dial.
fn same_addresses(a: &ServerSpec, b: &ServerSpec) -> bool {
    (a.host.as_str(), a.quorum_port, a.election_port)
        == (b.host.as_str(), b.quorum_port, b.election_port)
}
