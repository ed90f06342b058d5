//! The tokio side: the only place with sockets, spawns, `select!`, the clock
//! and sled calls. One node-loop task owns the core `Node`; connection tasks
//! and the storage thread talk to it over bounded channels.
//!
//! ```text
//! accept ─▶ connection task ──Inbound──▶ node loop ──Outgoing──▶ connection writer
//!                  └── FourLetterWord ──────▶ │  ▲   (never held behind client writes)
//!                          StorageJob ─────┘  └──── StorageReport (Persisted)
//!                            storage thread (append, group-commit fsync, snapshots)
//! ```
//!
//! The runtime is handed its [`Store`]: sled in production, `MemStorage` in tests.

pub mod clock;
pub mod connection;
pub mod faults;
pub mod four_letter;
pub(crate) mod member;
pub mod peer;
pub mod recovery;
mod snap_receiver;
mod snap_sender;
#[cfg(test)]
mod snap_sender_tests;
pub mod storage_worker;

use crate::config::Config;
use crate::core::election::ServerId;
use crate::core::{Command, ConnId, CoreConfig, Event, Node, Now};
use crate::failpoints::{active, Failpoint};
use bytes::Bytes;
use clock::Clock;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::future::Future;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use storage_worker::{StorageJob, StorageReport};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};
use zkd_protocol::records::ConnectRequest;
use zkd_storage::Store;

/// Messages from connection tasks to the node loop.
#[derive(Debug)]
pub enum Inbound {
    /// A client completed the TCP handshake and sent a ConnectRequest.
    Connected {
        conn: ConnId,
        remote_ip: String,
        remote_port: u16,
        /// Its writer's queue, and the reply bytes queued for it, shared
        /// with its reader for backpressure.
        flow: Arc<connection::Flow>,
        /// Ends its writer at once, queued frames and all.
        writer: tokio::task::AbortHandle,
    },
    /// Its ConnectRequest.
    Handshake {
        conn: ConnId,
        request: ConnectRequest,
    },
    /// A request frame.
    Frame { conn: ConnId, frame: Bytes },
    /// The socket closed.
    Disconnected { conn: ConnId },
}

/// A four-letter word to answer. It has its own channel, so an operator's
/// `ruok` or `mntr` is answered even while client requests are held back.
#[derive(Debug)]
pub struct FourLetterWord {
    pub word: String,
    pub reply: oneshot::Sender<String>,
}

/// Why the server stopped.
#[derive(Debug)]
pub enum ServeError {
    /// Storage failed or is corrupt: restart from disk.
    Storage(String),
    /// The listener failed.
    Io(std::io::Error),
}

impl std::fmt::Display for ServeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ServeError::Storage(e) => write!(f, "storage: {e}"),
            ServeError::Io(e) => write!(f, "io: {e}"),
        }
    }
}

impl std::error::Error for ServeError {}

/// Capacity of the channel from connections to the node loop.
const INBOUND_CAPACITY: usize = 8192;

/// Capacity of the four-letter-word channel.
const FOUR_LETTER_CAPACITY: usize = 64;

/// Bytes queued for one connection's writer beyond which the connection is
/// closed. Replies stop being read well before this (the reader's flow
/// control); notifications to a client that never reads are what reach it.
const MAX_CONNECTION_QUEUE_BYTES: usize = 4 * connection::MAX_QUEUED_REPLY_BYTES;

/// The core settings derived from a validated config.
pub fn core_config(config: &Config) -> CoreConfig {
    CoreConfig {
        server_id: if config.is_quorum() {
            config.my_id.unwrap_or(1) as u8
        } else {
            1
        },
        tick_ms: config.tick_time_ms,
        min_session_timeout_ms: config.min_session_timeout_ms,
        max_session_timeout_ms: config.max_session_timeout_ms,
        extended_types: config.extended_types_enabled,
        super_digest: config.super_digest.clone(),
        snap_count: config.snap_count,
        snapshot_slice_nodes: CoreConfig::default().snapshot_slice_nodes,
        container_check_interval_ms: config.container_check_interval_ms,
        seed: config.my_id.unwrap_or(1),
        path_hasher: ahash::RandomState::new(),
        max_frame_bytes: config.jute_max_buffer,
        ensemble_config: config
            .is_quorum()
            .then(|| Bytes::from(config.quorum_config_text())),
    }
}

/// Serves clients on `listener` from `storage` until `shutdown` completes or
/// storage fails.
pub async fn serve<S: Store>(
    config: Config,
    mut storage: S,
    listener: TcpListener,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ServeError> {
    // Before recovery, so that a restarted member takes commands at once.
    let (faults, fault_requests) = match config.faults_enabled {
        true => faults::Faults::start(&config.data_dir)
            .map(|(f, rx)| (Some(f), Some(rx)))
            .map_err(ServeError::Io)?,
        false => (None, None),
    };
    let recovered = recovery::recover(&mut storage)
        .and_then(|tree| Ok((recovery::fuzzy_through(&storage, &tree)?, tree)));
    let (fuzzy_through, tree) = match recovered {
        Ok(recovered) => recovered,
        Err(e) => return Err(storage_failed(storage, e.to_string())),
    };
    let clock = Clock::new();
    let ensemble = config.is_quorum();
    let node = if ensemble {
        Node::new_member(core_config(&config), tree, fuzzy_through, clock.now())
    } else {
        Node::new(core_config(&config), tree, clock.now())
    };

    let disk_faults = faults.as_ref().map(faults::Faults::disk);
    let (job_tx, job_rx) = std::sync::mpsc::channel();
    let (report_tx, report_rx) = mpsc::unbounded_channel();
    let worker_storage = storage.clone();
    let retain = config.autopurge_snap_retain_count;
    let snapshot_progress = storage_worker::SnapshotProgress::default();
    let progress = snapshot_progress.clone();
    let worker = std::thread::Builder::new()
        .name("zkd-storage".into())
        .spawn(move || {
            storage_worker::run(
                worker_storage,
                retain,
                job_rx,
                report_tx,
                disk_faults,
                progress,
            )
        })
        .map_err(ServeError::Io)?;

    let (inbound_tx, inbound_rx) = mpsc::channel(INBOUND_CAPACITY);
    let (words_tx, words_rx) = mpsc::channel(FOUR_LETTER_CAPACITY);
    let settings = connection::ConnectionSettings {
        max_frame: config.jute_max_buffer,
    };
    let acceptor = tokio::spawn(accept_loop(
        listener,
        connection::Channels {
            inbound: inbound_tx,
            words: words_tx,
        },
        settings,
        config.max_client_cnxns,
    ));
    let (member, peer_rx) = if ensemble {
        let (peer_tx, peer_rx) = mpsc::channel(PEER_EVENT_CAPACITY);
        let cuts = faults.as_ref().map(faults::Faults::peer_cuts);
        let member = start_member(&config, peer_tx, cuts).await?;
        (Some(member), Some(peer_rx))
    } else {
        (None, None)
    };
    let disk = storage.clone();
    let info = four_letter::ServerInfo::new(config, Box::new(move || disk.disk_usage()), clock);
    let mut node_loop = NodeLoop {
        node,
        now: clock.now(),
        clock,
        jobs: job_tx,
        snapshot_progress,
        conns: BTreeMap::new(),
        info,
        member,
        routed: VecDeque::new(),
        faults,
    };
    let result = node_loop
        .run(
            inbound_rx,
            words_rx,
            report_rx,
            peer_rx,
            fault_requests,
            shutdown,
        )
        .await;
    acceptor.abort();
    if let Err(ServeError::Storage(e)) = result {
        // The worker has stopped without acknowledging anything more.
        std::mem::forget(node_loop);
        return Err(storage_failed(storage, e));
    }
    drop(node_loop);
    drop(storage);
    // The worker drains queued jobs and exits when its channel closes.
    let _ = worker.join();
    result
}

/// Capacity of the channel from the peer links to the node loop.
const PEER_EVENT_CAPACITY: usize = 4096;

/// Binds the peer ports of `config`'s member and builds its election and Zab side.
async fn start_member(
    config: &Config,
    events: mpsc::Sender<peer::PeerEvent>,
    cuts: Option<tokio::sync::watch::Receiver<faults::PeerCuts>>,
) -> Result<Membership, ServeError> {
    use crate::core::zab::{Timing, Voters};
    let me = ServerId(config.my_id.unwrap_or(1));
    let timing = Timing {
        tick_ms: config.tick_time_ms,
        init_limit: u64::from(config.init_limit.unwrap_or(10)),
        sync_limit: u64::from(config.sync_limit.unwrap_or(5)),
    };
    let voters = Voters(
        config
            .servers
            .iter()
            .filter(|(_, s)| !s.observer)
            .map(|(id, _)| ServerId(*id))
            .collect(),
    );
    let settings = peer::PeerSettings {
        connect_timeout: std::time::Duration::from_millis(timing.init_ms().max(1000)),
        stall_timeout: std::time::Duration::from_millis(timing.sync_ms().max(1000)),
        max_frame: zkd_protocol::peer::frame::DEFAULT_MAX_PEER_FRAME,
        max_queued_bytes: 256 << 20,
        // A synced follower's link carries a ping every half tick.
        live_link: std::time::Duration::from_millis(timing.tick_ms.max(100)),
        cuts,
    };
    let peers = peer::PeerNetwork::start(me, &config.servers, events, settings)
        .await
        .map_err(ServeError::Io)?;
    tracing::info!(
        myid = me.0,
        members = config.servers.len(),
        "ensemble member starting"
    );
    Ok(Membership {
        member: member::Member::new(me, voters, timing),
        peers,
    })
}

/// The error that ends the node after storage failed. The store is leaked,
/// not dropped: after an I/O error sled's destructor flushes again and panics.
fn storage_failed<S>(storage: S, error: String) -> ServeError {
    std::mem::forget(storage);
    ServeError::Storage(error)
}

/// A connection as the node loop holds it.
struct ConnHandle {
    flow: Arc<connection::Flow>,
    writer: tokio::task::AbortHandle,
}

struct NodeLoop {
    node: Node,
    clock: Clock,
    /// The time the loop last woke. Everything done for one wake-up happens at
    /// that instant as far as the core can tell, so the clock is read once per
    /// wake-up, not at each step (the reads were 2% of a member's CPU under load).
    now: Now,
    jobs: std::sync::mpsc::Sender<StorageJob>,
    /// How much of the node's snapshot pieces storage is done with.
    snapshot_progress: storage_worker::SnapshotProgress,
    conns: BTreeMap<ConnId, ConnHandle>,
    info: four_letter::ServerInfo,
    /// The election and Zab side, in an ensemble.
    member: Option<Membership>,
    /// The node's commands being carried out: a list kept from one wake-up
    /// to the next (see [`take_queued`](crate::core::take_queued)).
    routed: VecDeque<Command>,
    /// A test's fault switches (`zkd.faults.enable` only).
    faults: Option<faults::Faults>,
}

/// An ensemble member's election and Zab side, and its links to the others.
struct Membership {
    member: member::Member,
    peers: peer::PeerNetwork,
}

/// Peer events taken in before the member's overdue timers run.
const MAX_PEER_EVENTS_BEFORE_TIMERS: usize = 256;

impl NodeLoop {
    async fn run(
        &mut self,
        mut inbound: mpsc::Receiver<Inbound>,
        mut words: mpsc::Receiver<FourLetterWord>,
        mut reports: mpsc::UnboundedReceiver<StorageReport>,
        mut peer_events: Option<mpsc::Receiver<peer::PeerEvent>>,
        mut fault_requests: Option<mpsc::Receiver<faults::Request>>,
        shutdown: impl Future<Output = ()>,
    ) -> Result<(), ServeError> {
        tokio::pin!(shutdown);
        self.with_member(|m, ctx| m.look(ctx))?;
        loop {
            // Timeouts run even when requests never stop coming: the select below
            // is biased towards I/O, so a busy loop could otherwise starve expiry.
            let now = self.now;
            if self
                .node
                .poll_timeout()
                .is_some_and(|due| due <= now.mono_ms)
            {
                self.node.handle_timeout(now);
                self.route_commands()?;
            }
            if self
                .member
                .as_ref()
                .and_then(|m| m.member.poll_timeout())
                .is_some_and(|due| due <= now.mono_ms)
            {
                // What peers sent while this loop was busy comes first: a peer
                // is silent only if nothing of it waits here (ZooKeeper's
                // timeouts count per read, not the reader's own stalls).
                let first = if active(Failpoint::SyncTimedWhole) {
                    0
                } else {
                    MAX_PEER_EVENTS_BEFORE_TIMERS
                };
                for _ in 0..first {
                    match peer_events.as_mut().map(|rx| rx.try_recv()) {
                        Some(Ok(event)) => self.with_member(|m, ctx| m.handle_peer(ctx, event))?,
                        _ => break,
                    }
                }
                self.with_member(|m, ctx| m.handle_timeout(ctx))?;
            }
            let due = [
                self.node.poll_timeout(),
                self.member.as_ref().and_then(|m| m.member.poll_timeout()),
            ]
            .into_iter()
            .flatten()
            .min();
            let deadline = due.map(|ms| self.clock.instant_at(ms));
            let peer_event = async {
                match peer_events.as_mut() {
                    Some(rx) => rx.recv().await,
                    None => std::future::pending().await,
                }
            };
            let fault_request = async {
                match fault_requests.as_mut() {
                    Some(rx) => rx.recv().await,
                    None => std::future::pending().await,
                }
            };
            // A test's cut-clients leaves client traffic (4lw too) unread.
            let clients = !self
                .faults
                .as_ref()
                .is_some_and(faults::Faults::clients_cut);
            let sleep = async {
                match deadline {
                    Some(d) => tokio::time::sleep_until(d.into()).await,
                    None => std::future::pending().await,
                }
            };
            // biased: storage reports first so replies are not starved by new requests.
            // Every arm is cancel-safe: channel receives lose nothing when another arm wins.
            tokio::select! {
                biased;
                _ = &mut shutdown => return Ok(()),
                report = reports.recv() => {
                    let now = self.woke();
                    match report {
                        Some(report) if self.member.is_some() => self.with_member(|m, ctx| m.handle_report(ctx, report))?,
                        Some(StorageReport::Persisted(zxid)) => self.node.handle_event(now, Event::Persisted { zxid }),
                        // Standalone submits no barriers or rebuilds.
                        Some(StorageReport::Reached(_) | StorageReport::Rebuilt(_) | StorageReport::DurableState(_) | StorageReport::Logged(_) | StorageReport::LoggedFor { .. }) => {}
                        Some(StorageReport::Failed(e)) => return Err(ServeError::Storage(e)),
                        None => return Err(ServeError::Storage("storage worker stopped".into())),
                    }
                }
                Some(event) = peer_event => {
                    self.woke();
                    self.with_member(|m, ctx| m.handle_peer(ctx, event))?
                }
                Some((command, reply)) = fault_request => {
                    self.woke();
                    let _ = reply.send(self.fault(command));
                }
                Some(FourLetterWord { word, reply }) = words.recv(), if clients => {
                    self.woke();
                    let followers = self.member.as_ref().and_then(|m| m.member.followers());
                    let _ = reply.send(self.info.answer(&word, &mut self.node, followers));
                }
                msg = inbound.recv(), if clients && self.node.outstanding() < crate::core::MAX_OUTSTANDING => match msg {
                    Some(msg) => self.inbound(msg),
                    None => return Ok(()),
                },
                _ = sleep => {
                    let now = self.woke();
                    self.node.handle_timeout(now);
                    self.with_member(|m, ctx| m.handle_timeout(ctx))?;
                }
            }
            self.route_commands()?;
        }
    }

    /// Runs one step of the member (if this node is one), then routes what
    /// the node asked for.
    fn with_member(
        &mut self,
        step: impl FnOnce(&mut member::Member, &mut member::Ctx<'_>) -> Result<(), ServeError>,
    ) -> Result<(), ServeError> {
        let Some(Membership { member, peers }) = self.member.as_mut() else {
            return Ok(());
        };
        let mut ctx = member::Ctx {
            node: &mut self.node,
            links: peers,
            jobs: &mut self.jobs,
            now: self.now,
        };
        step(member, &mut ctx)?;
        self.route_commands()
    }

    /// Reads the clock after a wake-up.
    fn woke(&mut self) -> Now {
        self.now = self.clock.now();
        self.node.snapshot_stored(self.snapshot_progress.stored());
        self.now
    }

    fn inbound(&mut self, msg: Inbound) {
        let now = self.woke();
        match msg {
            Inbound::Connected {
                conn,
                remote_ip,
                remote_port,
                flow,
                writer,
            } => {
                self.conns.insert(conn, ConnHandle { flow, writer });
                self.node.handle_event(
                    now,
                    Event::Connected {
                        conn,
                        remote_ip,
                        remote_port,
                    },
                );
            }
            Inbound::Handshake { conn, request } => self
                .node
                .handle_event(now, Event::Handshake { conn, request }),
            Inbound::Frame { conn, frame } => {
                self.node.handle_event(now, Event::Request { conn, frame })
            }
            Inbound::Disconnected { conn } => {
                self.conns.remove(&conn);
                self.node.handle_event(now, Event::Disconnected { conn });
            }
        }
    }

    /// Carries out what the node asked for: a member routes what concerns
    /// the ensemble itself; the rest is written to connections (or, standalone,
    /// submitted to storage).
    fn route_commands(&mut self) -> Result<(), ServeError> {
        let mut commands = std::mem::take(&mut self.routed);
        match self.member.as_mut() {
            Some(Membership { member, peers }) => {
                let mut ctx = member::Ctx {
                    node: &mut self.node,
                    links: peers,
                    jobs: &mut self.jobs,
                    now: self.now,
                };
                member.route_node_commands(&mut ctx, &mut commands)?
            }
            None => self.node.take_commands(&mut commands),
        }
        while let Some(command) = commands.pop_front() {
            match command {
                Command::Reply { conn, frame } => self.write(conn, frame, true),
                Command::Send { conn, frame } => self.write(conn, frame, false),
                Command::Close { conn } => {
                    if let Some(c) = self.conns.remove(&conn) {
                        c.flow.close();
                    }
                }
                Command::Persist { txn } => self.submit(StorageJob::Persist {
                    zxid: txn.zxid(),
                    record: txn.to_bytes(),
                    permit: None,
                })?,
                Command::SnapshotPiece(piece) => self.submit(StorageJob::SnapshotPiece(piece))?,
                // A standalone node asks nothing of an ensemble.
                Command::Forward(_) | Command::Revalidate { .. } | Command::Revalidated { .. } => {}
            }
        }
        self.routed = commands;
        Ok(())
    }

    fn write(&mut self, conn: ConnId, frame: Bytes, answers_request: bool) {
        let Some(c) = self.conns.get(&conn) else {
            return;
        };
        if c.flow.queued(frame.len()) > MAX_CONNECTION_QUEUE_BYTES {
            // A client that reads nothing while its watches fire: cut it off
            // rather than hold its notifications without bound.
            tracing::warn!(
                conn = conn.0,
                "closing a connection whose client does not read what it is sent"
            );
            self.drop_connection(conn);
            return;
        }
        c.flow.send(frame, answers_request);
    }

    /// Drops a connection at once, its session left to live or expire.
    fn drop_connection(&mut self, conn: ConnId) {
        if let Some(c) = self.conns.remove(&conn) {
            c.writer.abort();
            self.node
                .handle_event(self.now, Event::Disconnected { conn });
        }
    }

    fn submit(&self, job: StorageJob) -> Result<(), ServeError> {
        self.jobs
            .send(job)
            .map_err(|_| ServeError::Storage("storage worker stopped".into()))
    }
}

/// Per-IP connection counts, for maxClientCnxns.
type IpCounts = Arc<Mutex<HashMap<IpAddr, u32>>>;

struct IpSlot {
    counts: IpCounts,
    ip: IpAddr,
}

impl Drop for IpSlot {
    fn drop(&mut self) {
        let mut counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = counts.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                counts.remove(&self.ip);
            }
        }
    }
}

async fn accept_loop(
    listener: TcpListener,
    channels: connection::Channels,
    settings: connection::ConnectionSettings,
    max_per_ip: u32,
) {
    let counts: IpCounts = Arc::default();
    let mut next_conn = 0u64;
    loop {
        let (stream, addr) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of file descriptors and the like: back off instead of spinning.
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            }
        };
        let slot = {
            let mut map = counts.lock().unwrap_or_else(|e| e.into_inner());
            let n = map.entry(addr.ip()).or_insert(0);
            if max_per_ip != 0 && *n >= max_per_ip {
                tracing::warn!(ip = %addr.ip(), max_per_ip, "too many connections from one address");
                continue;
            }
            *n += 1;
            IpSlot {
                counts: counts.clone(),
                ip: addr.ip(),
            }
        };
        next_conn += 1;
        let conn = ConnId(next_conn);
        let channels = channels.clone();
        let settings = settings.clone();
        tokio::spawn(async move {
            let _slot = slot;
            connection::serve(stream, conn, channels, settings).await;
        });
    }
}
