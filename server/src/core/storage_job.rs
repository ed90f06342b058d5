//! What a member asks of its storage thread, and what that thread reports:
//! the runtime's worker (`driver::storage_worker`) and the simulator's
//! disk both carry out these jobs, in the order submitted.

use crate::core::election::ServerId;
use crate::core::types::SnapshotPiece;
use crate::core::ReadPermit;
use bytes::Bytes;
use zkd_protocol::Zxid;

/// Work for the storage thread, carried out in submission order.
#[derive(Debug)]
pub enum StorageJob {
    /// Append txn `zxid`, encoded (`Txn::to_bytes`), and make it durable;
    /// reported as `Persisted` once synced. The permit of the proposal it
    /// came in (a follower's) is dropped then.
    Persist {
        zxid: Zxid,
        record: Bytes,
        permit: Option<ReadPermit>,
    },
    /// A piece of a local snapshot, stored in the background; after the
    /// last, old snapshots and the log they cover are purged. Every txn the
    /// image includes was submitted before its last piece.
    SnapshotPiece(SnapshotPiece),
    /// TRUNC: delete snapshots past `zxid`, then cut the log after it
    /// (`zkd_storage::store::truncate_history`). Durable before any later
    /// job runs. A cut the store cannot rebuild from fails the node.
    Truncate(Zxid),
    /// Records acceptedEpoch, durably, after every job before it.
    SetAcceptedEpoch(u32),
    /// Records currentEpoch, durably, after every job before it.
    SetCurrentEpoch(u32),
    /// Notes, durably, that the tree was found diverged at this zxid: the
    /// member must not lead until a SNAP (whose install clears the note).
    MarkDiverged(Zxid),
    /// A piece of a SNAP streaming in, appended to the staging slot (the
    /// first one empties it). Not durable by itself: the install seals it.
    StageSnapshotPiece {
        first: bool,
        data: bytes::Bytes,
        /// Dropped once the piece is written, letting the link read on.
        permit: ReadPermit,
    },
    /// A follower's SNAP: the history becomes this image, as of `zxid`
    /// (`zkd_storage::store::install_snapshot`). Durable before any later job
    /// runs. A fuzzy image (txns through `fuzzy_through` may be in it) is
    /// recorded as such first, so a restart from it knows.
    InstallSnapshot {
        zxid: Zxid,
        image: zkd_storage::store::SnapshotSource,
        fuzzy_through: Zxid,
    },
    /// Reports `Reached(token)` once every job before it is durable (local
    /// snapshots excepted, see the module doc).
    Barrier(u64),
    /// Rebuilds the tree from what is durable after every job before it
    /// (after a TRUNC or a SNAP install), off the node loop, and reports it
    /// as `Rebuilt`.
    Rebuild,
    /// Reads the epochs and the log since the last snapshot (the last
    /// `window` txns kept), as an election round starts from them, and the
    /// logged txns after `tree_at` (the tree's zxid), which the role it
    /// decides may apply; off the node loop, reported as `DurableState`.
    ReadDurableState { window: usize, tree_at: Zxid },
    /// Reads the logged txns after `after` through `through` (a tree caught
    /// up after a TRUNC above it), off the node loop; reported as `Logged`.
    ReadLogged { after: Zxid, through: Zxid },
    /// Leader: reads the logged txns after `after`, about `max_bytes` of
    /// them, for a follower catching up; reported as `LoggedFor`.
    ReadFor {
        peer: ServerId,
        after: Zxid,
        max_bytes: usize,
    },
}

/// Logged txns in zxid order, as the storage thread read them.
pub type LoggedTxns = Vec<(Zxid, bytes::Bytes)>;

/// What the storage thread reports.
#[derive(Debug, PartialEq, Eq)]
pub enum StorageReport {
    /// Every appended txn up to this zxid is durable.
    Persisted(Zxid),
    /// Every job before `Barrier(token)` is durable.
    Reached(u64),
    /// The tree rebuilt from storage, as a `Rebuild` asked.
    Rebuilt(RebuiltTree),
    /// What is durable, as a `ReadDurableState` asked.
    DurableState(ReadState),
    /// The logged txns a `ReadLogged` asked for.
    Logged(LoggedTxns),
    /// The logged txns a `ReadFor` asked for `peer`, after `after`.
    LoggedFor {
        peer: ServerId,
        after: Zxid,
        txns: LoggedTxns,
    },
    /// Storage failed: the node must stop.
    Failed(String),
}

/// A tree rebuilt by the storage thread. Reports compare by zxid, digest
/// and fuzzy end.
#[derive(Debug)]
pub struct RebuiltTree {
    /// The tree, as a restart now would recover it.
    pub tree: Box<zkd_storage::DataTree>,
    /// Txns through here may already be in it (see `recovery::fuzzy_through`).
    pub fuzzy_through: Zxid,
}

impl PartialEq for RebuiltTree {
    fn eq(&self, other: &Self) -> bool {
        let key = |r: &RebuiltTree| (r.tree.last_zxid(), r.tree.digest(), r.fuzzy_through);
        key(self) == key(other)
    }
}

impl Eq for RebuiltTree {}

/// The durable state read by the storage thread. Reports compare by epochs,
/// the log's end and the txns after the tree.
#[derive(Debug)]
pub struct ReadState {
    pub state: Box<crate::core::zab::DurableState>,
    /// The logged txns after the tree's zxid (`ReadDurableState::tree_at`).
    pub after_tree: LoggedTxns,
    /// Where the tree was found diverged, if no SNAP has come since.
    pub diverged_at: Option<Zxid>,
}

impl PartialEq for ReadState {
    fn eq(&self, other: &Self) -> bool {
        let key = |r: &ReadState| {
            let s = &r.state;
            (s.accepted_epoch, s.current_epoch, s.history.last_zxid())
        };
        key(self) == key(other)
            && self.after_tree == other.after_tree
            && self.diverged_at == other.diverged_at
    }
}

impl Eq for ReadState {}
