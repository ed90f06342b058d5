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

pub mod admin;
pub mod clock;
pub mod connection;
pub mod connection_counts;
pub mod faults;
mod flow;
pub mod four_letter;

pub mod metrics_report;
mod node_loop;
pub mod operator;
pub mod peer;
mod prometheus;
pub mod server_info;
mod serving;
#[cfg(test)]
mod snap_sender_tests;

pub mod tls;

use crate::config::Config;
use crate::core::acl::AclRules;
use crate::core::election::ServerId;
use crate::core::metrics::Timing;
use crate::core::{Command, ConnId, CoreConfig, EnsembleConfig, Event, Node, Now};
pub use crate::driver::ServeError;
use crate::driver::{member_driver, recovery, storage_worker};
use crate::failpoints::{active, Failpoint};
use bytes::Bytes;
use clock::Clock;
use connection_counts::AddressCounts;
use node_loop::{Membership, NodeLoop};
use server_info::ServerInfo;
use std::collections::{BTreeMap, VecDeque};
use std::future::Future;
use std::sync::Arc;
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
        /// On the secure port, the subject its certificate authenticated it as.
        certified: Option<String>,
        /// Its writer's queue, and the reply bytes queued for it, shared
        /// with its reader for backpressure; ending it ends the connection.
        flow: Arc<connection::Flow>,
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

/// Capacity of the channel from connections to the node loop.
const INBOUND_CAPACITY: usize = 8192;

/// Capacity of the four-letter-word channel.
const FOUR_LETTER_CAPACITY: usize = 64;

/// Bytes queued for one connection's writer beyond which the connection is
/// closed. Replies stop being read well before this (the reader's flow
/// control); notifications to a client that never reads are what reach it.
const MAX_CONNECTION_QUEUE_BYTES: usize = 4 * flow::MAX_QUEUED_REPLY_BYTES;

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
        enforce_quota: config.enforce_quota,
        read_only_mode: config.read_only_mode,
        local_sessions: config.local_sessions_enabled,
        super_digest: config.super_digest.clone(),
        snap_count: config.snap_count,
        snapshot_slice_nodes: CoreConfig::default().snapshot_slice_nodes,
        container_check_interval_ms: config.container_check_interval_ms,
        seed: config.my_id.unwrap_or(1),
        path_hasher: ahash::RandomState::new(),
        max_frame_bytes: config.jute_max_buffer,
        ensemble_config: config.is_quorum().then(|| EnsembleConfig {
            text: Bytes::from(config.quorum_config_text()),
            version: config.config_version as i64,
        }),
        reconfig_enabled: config.reconfig_enabled,
        standalone_enabled: config.standalone_enabled,
        sasl: config
            .sasl
            .as_ref()
            .map(|s| crate::core::sasl::SaslSettings {
                users: Arc::new(s.users.clone()),
                super_user: s.super_user.clone(),
                nonces: Arc::new(OsNonces),
            }),
        acl_rules: AclRules {
            sasl_scheme: config.sasl_provider,
            skip: config.skip_acl,
        },
        enforced_auth: config.enforced_auth.clone(),
    }
}

/// A DIGEST-MD5 nonce from the OS's randomness: 16 bytes, base64.
pub fn os_nonce() -> String {
    use base64::Engine;
    use rand::RngCore;
    let mut bytes = [0u8; 16];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Client SASL's nonces: [`os_nonce`].
struct OsNonces;

impl crate::core::sasl::NonceSource for OsNonces {
    fn nonce(&self) -> String {
        os_nonce()
    }
}

/// An ensemble member's membership and the peer events it hears; none
/// standalone.
async fn start_membership(
    config: &Config,
    faults: Option<&faults::Faults>,
) -> Result<(Option<Membership>, Option<mpsc::Receiver<peer::PeerEvent>>), ServeError> {
    if !config.is_quorum() {
        return Ok((None, None));
    }
    let (peer_tx, peer_rx) = mpsc::channel(PEER_EVENT_CAPACITY);
    let cuts = faults.map(faults::Faults::peer_cuts);
    let member = start_member(config, peer_tx, cuts).await?;
    Ok((Some(member), Some(peer_rx)))
}

/// With reconfig, the files configurations are recorded in; zoo.cfg is
/// backed up first while it still holds the server lines, as ZooKeeper does.
fn config_files(config: &Config) -> Option<crate::config::ConfigFiles> {
    let path = config.file_path.as_deref()?;
    let files = crate::config::ConfigFiles::of(config, path)?;
    if config.dynamic_config_file.is_none() {
        if let Err(e) = files.back_up() {
            tracing::warn!("backing up {}: {e}", path.display());
        }
    }
    Some(files)
}

/// Serves clients on `listeners` (the client port, and the secure one if
/// configured) from `storage` until `shutdown` completes or storage fails.
pub async fn serve<S: Store>(
    config: Config,
    mut storage: S,
    listeners: (Option<TcpListener>, Option<tls::ClientTls>),
    shutdown: impl Future<Output = ()>,
) -> Result<(), ServeError> {
    // Before recovery, so that a restarted member takes commands at once.
    let (faults, fault_requests) = match config.faults_enabled {
        true => faults::Faults::start(&config.data_dir)
            .map(|(f, rx)| (Some(f), Some(rx)))
            .map_err(ServeError::Io)?,
        false => (None, None),
    };
    let clock = Clock::new();
    let node = match recover_node(&config, &mut storage, &clock) {
        Ok(node) => node,
        Err(e) => return Err(storage_failed(storage, e.to_string())),
    };
    let disk_faults = faults.as_ref().map(faults::Faults::disk);
    let storage_thread = StorageThread::start(&storage, &config, disk_faults)?;
    let counts = Arc::new(connection_counts::ConnectionCounts::default());
    let (acceptor, inbound_rx, words_rx) = start_acceptor(listeners, &config, counts.clone());
    let (member, peer_rx) = start_membership(&config, faults.as_ref()).await?;
    let (operator_thread, operator_rx) = operator::start(&config).map_err(ServeError::Io)?;
    let config_files = config_files(&config);
    let disk = Box::new(storage.clone());
    let info = ServerInfo::new(config, disk, clock, storage_thread.metrics.clone(), counts);
    let mut node_loop = NodeLoop {
        node,
        now: clock.now(),
        clock,
        jobs: storage_thread.jobs,
        snapshot_progress: storage_thread.progress,
        conns: BTreeMap::new(),
        info,
        member,
        routed: VecDeque::new(),
        config_files,
        faults,
        operator: operator_rx,
    };
    let reports = storage_thread.reports;
    let result = node_loop
        .run(
            inbound_rx,
            words_rx,
            reports,
            peer_rx,
            fault_requests,
            shutdown,
        )
        .await;
    acceptor.abort();
    drop(operator_thread);
    if let Err(ServeError::Storage(e)) = result {
        // The worker has stopped without acknowledging anything more.
        std::mem::forget(node_loop);
        return Err(storage_failed(storage, e));
    }
    drop(node_loop);
    drop(storage);
    // The worker drains queued jobs and exits when its channel closes.
    let _ = storage_thread.thread.join();
    result
}

/// The tree recovered from `storage`, in a node of a member or a standalone server.
fn recover_node<S: Store>(
    config: &Config,
    storage: &mut S,
    clock: &Clock,
) -> Result<Node, zkd_storage::StorageError> {
    let started = std::time::Instant::now();
    if config.skip_acl {
        tracing::warn!("skipACL=yes: no ACL is checked, and anyone may reconfig");
    }
    let (tree, load) = recovery::recover_timed(storage)?;
    let fuzzy_through = recovery::fuzzy_through(storage, &tree)?;
    let now = clock.now();
    let mut node = match config.is_quorum() {
        true => Node::new_member(core_config(config), tree, fuzzy_through, now),
        false => Node::new(core_config(config), tree, now),
    };
    let ms = |d: std::time::Duration| d.as_millis() as u64;
    let metrics = node.metrics_mut();
    metrics.observe(Timing::DbInitTime, ms(started.elapsed()), now.mono_ms);
    metrics.observe(Timing::StartupSnapLoadTime, ms(load.snapshot), now.mono_ms);
    metrics.observe(Timing::StartupTxnsLoadTime, ms(load.replay), now.mono_ms);
    metrics.observe(Timing::StartupTxnsLoaded, load.txns, now.mono_ms);
    Ok(node)
}

/// The storage thread, and the node loop's ends of its channels.
struct StorageThread {
    jobs: storage_worker::JobSender,
    reports: mpsc::UnboundedReceiver<StorageReport>,
    progress: storage_worker::SnapshotProgress,
    metrics: storage_worker::StorageMetrics,
    thread: std::thread::JoinHandle<()>,
}

impl StorageThread {
    fn start<S: Store>(
        storage: &S,
        config: &Config,
        disk_faults: Option<std::sync::Arc<faults::DiskFaults>>,
    ) -> Result<StorageThread, ServeError> {
        let metrics = storage_worker::StorageMetrics::default();
        let (jobs, job_rx) = storage_worker::job_queue(metrics.queue());
        let (report_tx, reports) = mpsc::unbounded_channel();
        let (storage, retain) = (storage.clone(), config.autopurge_snap_retain_count);
        let progress = storage_worker::SnapshotProgress::default();
        let counted = progress.clone();
        let measured = metrics.clone();
        let thread = std::thread::Builder::new()
            .name("zkd-storage".into())
            .spawn(move || {
                storage_worker::run(
                    storage,
                    retain,
                    job_rx,
                    Box::new(move |report| {
                        let _ = report_tx.send(report);
                    }),
                    disk_faults,
                    counted,
                    measured,
                )
            })
            .map_err(ServeError::Io)?;
        Ok(StorageThread {
            jobs,
            reports,
            progress,
            metrics,
            thread,
        })
    }
}

/// Starts taking client connections on `listener`: the acceptor task, and
/// the node loop's ends of the connections' request and four-letter-word channels.
fn start_acceptor(
    (listener, tls): (Option<TcpListener>, Option<tls::ClientTls>),
    config: &Config,
    counts: Arc<connection_counts::ConnectionCounts>,
) -> (
    tokio::task::JoinHandle<()>,
    mpsc::Receiver<Inbound>,
    mpsc::Receiver<FourLetterWord>,
) {
    let (inbound_tx, inbound_rx) = mpsc::channel(INBOUND_CAPACITY);
    let (words_tx, words_rx) = mpsc::channel(FOUR_LETTER_CAPACITY);
    let settings = connection::ConnectionSettings {
        max_frame: config.jute_max_buffer,
        counts,
    };
    let channels = connection::Channels {
        inbound: inbound_tx,
        words: words_tx,
    };
    let ids = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let max = config.max_client_cnxns;
    let (secure_listener, port) = match tls {
        Some(tls) => {
            let port = connection::SecurePort {
                acceptor: tls.acceptor,
                x509_auth: tls.x509_auth,
            };
            (tls.secure_listener, Some((port, tls.unified)))
        }
        None => (None, None),
    };
    let plain_kind = match &port {
        Some((port, true)) => connection::PortKind::Unified(port.clone()),
        _ => connection::PortKind::Plain,
    };
    let plain = listener.map(|l| {
        let (channels, settings, ids) = (channels.clone(), settings.clone(), ids.clone());
        accept_loop(l, plain_kind, channels, settings, max, ids)
    });
    let secure = secure_listener.zip(port).map(|(l, (port, _))| {
        accept_loop(
            l,
            connection::PortKind::Tls(port),
            channels,
            settings,
            max,
            ids,
        )
    });
    // Each port's loop runs until the node loop ends; a port not configured
    // has none.
    let acceptor = tokio::spawn(async move {
        tokio::join!(accepting(plain), accepting(secure));
    });
    (acceptor, inbound_rx, words_rx)
}

/// Capacity of the channel from the peer links to the node loop.
const PEER_EVENT_CAPACITY: usize = 4096;

/// Binds the peer ports of `config`'s member and builds its election and Zab side.
async fn start_member(
    config: &Config,
    events: mpsc::Sender<peer::PeerEvent>,
    cuts: Option<tokio::sync::watch::Receiver<faults::PeerCuts>>,
) -> Result<Membership, ServeError> {
    use crate::core::zab::{Members, Timing};
    let me = ServerId(config.my_id.unwrap_or(1));
    let timing = Timing {
        tick_ms: config.tick_time_ms,
        init_limit: u64::from(config.init_limit.unwrap_or(10)),
        sync_limit: u64::from(config.sync_limit.unwrap_or(5)),
    };
    let members = Members::of(&config.servers);
    let settings = peer::PeerSettings {
        connect_timeout: std::time::Duration::from_millis(timing.init_ms().max(1000)),
        stall_timeout: std::time::Duration::from_millis(timing.sync_ms().max(1000)),
        max_frame: zkd_protocol::peer::frame::DEFAULT_MAX_PEER_FRAME,
        max_queued_bytes: 256 << 20,
        // A synced follower's link carries a ping every half tick.
        live_link: std::time::Duration::from_millis(timing.tick_ms.max(100)),
        cuts,
        tls: quorum_tls(config)?,
        sasl: config.quorum_sasl.clone().map(Arc::new),
    };
    let peers = peer::PeerNetwork::start(me, &config.servers, events, settings)
        .await
        .map_err(ServeError::Io)?;
    tracing::info!(
        myid = me.0,
        members = config.servers.len(),
        "ensemble member starting"
    );
    let limits = peer::runtime_limits(&peers);
    Ok(Membership {
        member: member_driver::MemberDriver::new(me, members, timing, limits),
        peers,
    })
}

/// The member's quorum TLS, its stores read: a store that cannot be read
/// stops the server with why.
fn quorum_tls(config: &Config) -> Result<Option<Arc<tls::QuorumTls>>, ServeError> {
    let Some(quorum) = &config.quorum_tls else {
        return Ok(None);
    };
    let loaded = tls::QuorumTls::load(quorum)
        .map_err(|e| ServeError::Io(std::io::Error::other(format!("quorum TLS: {e}"))))?;
    tracing::info!(
        ssl_quorum = quorum.dial_tls,
        port_unification = quorum.unified,
        "quorum TLS on"
    );
    Ok(Some(Arc::new(loaded)))
}

/// The error that ends the node after storage failed. The store is leaked,
/// not dropped: after an I/O error sled's destructor flushes again and panics.
fn storage_failed<S>(storage: S, error: String) -> ServeError {
    std::mem::forget(storage);
    ServeError::Storage(error)
}

/// Runs a port's accept loop, if it has one; else waits for ever.
async fn accepting(accept_loop: Option<impl Future<Output = ()>>) {
    match accept_loop {
        Some(accepting) => accepting.await,
        None => std::future::pending().await,
    }
}

/// Takes the connections of one client port, plaintext, TLS or either,
/// each with an id from `ids`, which the ports share.
async fn accept_loop(
    listener: TcpListener,
    kind: connection::PortKind,
    channels: connection::Channels,
    settings: connection::ConnectionSettings,
    max_per_ip: u32,
    ids: Arc<std::sync::atomic::AtomicU64>,
) {
    let per_address = AddressCounts::default();
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
        let Some(slot) = per_address.take(addr.ip(), max_per_ip) else {
            tracing::warn!(ip = %addr.ip(), max_per_ip, "too many connections from one address");
            settings.counts.reject();
            continue;
        };
        let conn = ConnId(ids.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1);
        let channels = channels.clone();
        let settings = settings.clone();
        let kind = kind.clone();
        tokio::spawn(async move {
            connection::serve_port(stream, slot, &kind, conn, channels, settings).await
        });
    }
}
