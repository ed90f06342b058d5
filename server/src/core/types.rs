//! What goes into the core (events) and what comes out (commands).

pub use super::zab::{ForwardedRequest, SessionTouch};
use super::EnsembleConfig;
use bytes::Bytes;
use zkd_protocol::records::ConnectRequest;
use zkd_protocol::Zxid;
use zkd_storage::Txn;

/// A client connection, numbered by the runtime.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConnId(pub u64);

/// The time, as the runtime read it. The core never reads a clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Now {
    /// Monotonic milliseconds (timeouts and expiry).
    pub mono_ms: u64,
    /// Wall-clock milliseconds since the Unix epoch (stamped into txns).
    pub wall_ms: i64,
}

/// Something that happened, fed to [`crate::core::Node::handle_event`].
#[derive(Clone, Debug)]
pub enum Event {
    /// A client connected from `remote_ip:remote_port`.
    Connected {
        conn: ConnId,
        remote_ip: String,
        remote_port: u16,
    },
    /// A TLS client's certificate authenticated it (x509), before its
    /// ConnectRequest: `subject` as RFC 2253 writes it.
    Certified { conn: ConnId, subject: String },
    /// The first frame of a connection: its ConnectRequest.
    Handshake {
        conn: ConnId,
        request: ConnectRequest,
    },
    /// A later frame: RequestHeader and body, not yet decoded.
    Request { conn: ConnId, frame: Bytes },
    /// The connection closed (peer, error, or after a Close command).
    Disconnected { conn: ConnId },
    /// Standalone: every txn up to `zxid` is durable, hence committed.
    Persisted { zxid: Zxid },
    /// Ensemble: the next committed txn, in zxid order, whoever proposed it,
    /// with the leader's tree digest right after it when the leader sent
    /// one: a tree that differs there has diverged (ZOOKEEPER-2846).
    Committed { txn: Txn, digest: Option<u64> },
    /// Leader: a client request the follower `from` forwarded.
    Forwarded {
        from: u64,
        request: ForwardedRequest,
    },
    /// Leader: the follower `from` asks whether `session` may attach there.
    Revalidate {
        from: u64,
        session: i64,
        timeout_ms: i32,
    },
    /// Follower: the leader's answer to our revalidation of `session`.
    Revalidated { session: i64, valid: bool },
    /// Leader: sessions a follower's clients touched (from its PING).
    Touched(Vec<SessionTouch>),
}

/// Something the runtime must do, drained from [`crate::core::Node::drain_commands`].
#[derive(Clone, Debug)]
pub enum Command {
    /// Write a reply to one of the connection's requests.
    Reply { conn: ConnId, frame: Bytes },
    /// Write a frame that answers no request: a ConnectResponse or a notification.
    Send { conn: ConnId, frame: Bytes },
    /// Close a connection after the frames sent before this command.
    Close { conn: ConnId },
    /// Standalone: append the txn to the log and fsync it, then report
    /// `Persisted`. Leader: propose it; `Committed` reports it back.
    Persist { txn: Txn },
    /// Follower: forward a client's write (or sync) to the leader.
    Forward(ForwardedRequest),
    /// Follower: ask the leader whether a session may attach here.
    Revalidate { session: i64, timeout_ms: i32 },
    /// Leader: answer a follower's revalidation.
    Revalidated { to: u64, session: i64, valid: bool },
    /// Store the next piece of a local snapshot; after its last piece,
    /// purge old snapshots and logs. A stream that stops before its last
    /// piece is abandoned by the storage.
    SnapshotPiece(SnapshotPiece),
    /// Record a configuration that took effect in the config files
    /// (`zoo.cfg.dynamic.<version>`, zoo.cfg pointing at it), with reconfig.
    RecordEnsembleConfig(EnsembleConfig),
}

/// One piece of a local snapshot's image, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotPiece {
    /// The zxid the image starts at (its name).
    pub zxid: Zxid,
    /// The next bytes of the image.
    pub data: Bytes,
    /// The image's first piece: a new stream begins.
    pub first: bool,
    /// The image's last piece: seal it, then purge what it makes redundant.
    pub last: bool,
}

#[cfg(test)]
impl SnapshotPiece {
    /// A whole image as one piece.
    pub fn whole(zxid: Zxid, image: Bytes) -> SnapshotPiece {
        SnapshotPiece {
            zxid,
            data: image,
            first: true,
            last: true,
        }
    }
}

/// What the member does with client requests, set by its Zab role.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// One node whose own fsync is its quorum.
    Standalone,
    /// The established leader of an ensemble: writes are proposed here.
    Leading,
    /// A follower that is up to date: writes go to the leader.
    Following,
    /// An observer that is up to date: served as by a follower, without a vote.
    Observing,
    /// Electing or syncing: no client is served.
    NotServing,
    /// Without a quorum, serving reads to read-only sessions.
    ReadOnly,
}

impl Mode {
    /// A follower or an observer: a member that serves and forwards writes.
    pub fn is_learner(self) -> bool {
        matches!(self, Mode::Following | Mode::Observing)
    }

    /// The name `srvr` and `mntr` report.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Standalone => "standalone",
            Mode::Leading => "leader",
            Mode::Following => "follower",
            Mode::Observing => "observer",
            Mode::NotServing => "looking",
            Mode::ReadOnly => "read-only",
        }
    }
}

/// Settings the core needs, already validated.
#[derive(Clone, Debug)]
pub struct CoreConfig {
    /// This server's id (1 in standalone); the top byte of session ids.
    pub server_id: u8,
    /// tickTime, ms.
    pub tick_ms: u64,
    /// Smallest negotiated session timeout, ms.
    pub min_session_timeout_ms: i32,
    /// Largest negotiated session timeout, ms.
    pub max_session_timeout_ms: i32,
    /// Whether TTL nodes are allowed (`zookeeper.extendedTypesEnabled`).
    pub extended_types: bool,
    /// Whether hard quotas refuse writes (`zookeeper.enforceQuota`).
    pub enforce_quota: bool,
    /// An ensemble member that loses its quorum serves reads to clients
    /// that ask for a read-only session (`readonlymode.enabled`).
    pub read_only_mode: bool,
    /// `localSessionsEnabled`: read-only sessions need it, as in ZooKeeper.
    pub local_sessions: bool,
    /// `digest` id that grants `super` (`DigestAuthenticationProvider.superDigest`).
    pub super_digest: Option<crate::secret::Secret>,
    /// Snapshot after about this many txns (`snapCount`).
    pub snap_count: u64,
    /// Nodes a local snapshot writes per slice. The simulator makes it small,
    /// so that its small trees' snapshots span many steps as a large tree's do.
    pub snapshot_slice_nodes: usize,
    /// How often containers and TTL nodes are checked, ms.
    pub container_check_interval_ms: u64,
    /// Seed for the snapshot jitter, so runs replay exactly.
    pub seed: u64,
    /// Keys of the hash of paths in the core's own tables: random per
    /// process in a server, so clients cannot pick colliding paths; fixed
    /// in tests and the simulator, so runs replay exactly.
    pub path_hasher: ahash::RandomState,
    /// jute.maxbuffer: bounds replies the server builds.
    pub max_frame_bytes: usize,
    /// An ensemble's membership as `/zookeeper/config` shows it.
    pub ensemble_config: Option<EnsembleConfig>,
    /// `reconfigEnabled`: the first leader gives an unversioned
    /// configuration its epoch's zxid as version, as ZooKeeper's does.
    pub reconfig_enabled: bool,
    /// `standaloneEnabled`: a reconfig must then leave two voters.
    pub standalone_enabled: bool,
    /// Client SASL (a JAAS `Server` section); None: SASL requests fail.
    pub sasl: Option<super::sasl::SaslSettings>,
    /// How ACLs are checked: `sasl:` ids (ZooKeeper's SASL provider), and
    /// `skipACL`.
    pub acl_rules: super::acl::AclRules,
    /// Auth schemes a session must hold one of before it is served; None:
    /// not enforced.
    pub enforced_auth: Option<Vec<String>>,
}

impl Default for CoreConfig {
    fn default() -> Self {
        CoreConfig {
            server_id: 1,
            tick_ms: 2000,
            min_session_timeout_ms: 4000,
            max_session_timeout_ms: 40000,
            extended_types: false,
            enforce_quota: false,
            read_only_mode: false,
            local_sessions: false,
            super_digest: None,
            snap_count: 100_000,
            snapshot_slice_nodes: super::local_snapshot::SNAPSHOT_SLICE_NODES,
            container_check_interval_ms: 60_000,
            seed: 1,
            path_hasher: ahash::RandomState::with_seeds(1, 2, 3, 4),
            max_frame_bytes: zkd_protocol::DEFAULT_MAX_BUFFER,
            ensemble_config: None,
            reconfig_enabled: false,
            standalone_enabled: true,
            sasl: None,
            acl_rules: super::acl::AclRules::default(),
            enforced_auth: None,
        }
    }
}

/// Moves everything queued in `queue` to the back of `into`, in order; into
/// an empty list by swapping the two, so that a caller keeping its list from
/// one event to the next allocates none per event.
pub fn take_queued<T>(
    queue: &mut std::collections::VecDeque<T>,
    into: &mut std::collections::VecDeque<T>,
) {
    if into.is_empty() {
        std::mem::swap(queue, into);
    } else {
        into.append(queue);
    }
}
