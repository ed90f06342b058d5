//! ZooKeeper's `ServerMetrics` that zkd keeps, under ZooKeeper's names:
//! counters and summaries the member and its node feed as things happen.
//! Gauges (node counts, connections) are read when asked, and the storage
//! thread keeps its own (fsync time); the runtime puts them together for
//! `mntr`, the AdminServer's `monitor` and the Prometheus endpoint.

mod summary;
mod summary_set;

pub use summary::Summary;
use summary_set::top_namespace;
pub use summary_set::{java_length, SummarySet};

/// How much a summary tells, as ZooKeeper's `DetailLevel`: a basic one its
/// median to Prometheus, an advanced one also its 90th and 99th percentile
/// (and p95/p99/p999 to `mntr`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Detail {
    Basic,
    Advanced,
}

/// A counter, named as ZooKeeper's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Count {
    /// Bytes of client requests received.
    BytesReceived,
    /// Txns the leader committed.
    Commits,
    /// Client connections accepted.
    ConnectionRequests,
    /// Clients that connected with a session id: reconnects, valid or not.
    ConnectionRevalidates,
    /// Learners the leader synced with a DIFF (or a TRUNC).
    DiffSyncs,
    /// Txns after which this member's tree digest differed from the leader's.
    DigestMismatches,
    /// COMMITs a follower received.
    LearnerCommitsReceived,
    /// PROPOSALs a follower received.
    LearnerProposalsReceived,
    /// Times this member went back to election.
    Looking,
    /// REVALIDATEs the leader took from learners (their clients' reconnects).
    Revalidates,
    /// Txns the leader proposed.
    Proposals,
    /// Bytes of replies and notifications sent to clients.
    ResponseBytes,
    /// Learners the leader synced with a SNAP.
    SnapSyncs,
    /// Sessions expired.
    SessionsExpired,
    /// Bytes of watch notifications sent.
    WatchBytes,
}

impl Count {
    /// Every counter, in the order reports list them.
    pub const ALL: [Count; 15] = [
        Count::BytesReceived,
        Count::Commits,
        Count::ConnectionRequests,
        Count::ConnectionRevalidates,
        Count::DiffSyncs,
        Count::DigestMismatches,
        Count::LearnerCommitsReceived,
        Count::LearnerProposalsReceived,
        Count::Looking,
        Count::Revalidates,
        Count::Proposals,
        Count::ResponseBytes,
        Count::SnapSyncs,
        Count::SessionsExpired,
        Count::WatchBytes,
    ];

    /// ZooKeeper's name for it.
    pub fn name(self) -> &'static str {
        match self {
            Count::BytesReceived => "bytes_received_count",
            Count::Commits => "commit_count",
            Count::ConnectionRequests => "connection_request_count",
            Count::ConnectionRevalidates => "connection_revalidate_count",
            Count::DiffSyncs => "diff_count",
            Count::DigestMismatches => "digest_mismatches_count",
            Count::LearnerCommitsReceived => "learner_commit_received_count",
            Count::LearnerProposalsReceived => "learner_proposal_received_count",
            Count::Looking => "looking_count",
            Count::Revalidates => "revalidate_count",
            Count::Proposals => "proposal_count",
            Count::ResponseBytes => "response_bytes",
            Count::SnapSyncs => "snap_count",
            Count::SessionsExpired => "stale_sessions_expired",
            Count::WatchBytes => "watch_bytes",
        }
    }
}

/// A summary (milliseconds, unless its name says otherwise), named as ZooKeeper's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Timing {
    /// Write requests, from arrival to reply.
    UpdateLatency,
    /// Read requests, from arrival to reply.
    ReadLatency,
    /// From a txn's creation on the leader to its apply here.
    PropagationLatency,
    /// From a txn's creation on the leader to its PROPOSAL reaching a follower.
    ProposalLatency,
    /// From a txn's creation on the leader to this member's ack (it is durable here).
    ProposalAckCreationLatency,
    /// From a txn's creation on the leader to a quorum's acks (on the leader).
    QuorumAckLatency,
    /// From a txn's creation on the leader to its COMMIT reaching a learner.
    CommitPropagationLatency,
    /// SNAPs the leader was sending, counted as one starts (a count).
    InflightSnapCount,
    /// DIFF and TRUNC syncs under way, counted as one starts (a count).
    InflightDiffCount,
    /// Each election, from going LOOKING to a decided role.
    ElectionTime,
    /// A follower's sync, from its decided role to UPTODATE.
    FollowerSyncTime,
    /// The same for an observer.
    ObserverSyncTime,
    /// Each time not serving, from stopping to serving again.
    UnavailableTime,
    /// As `UnavailableTime`, when it ended with this member leading.
    LeaderUnavailableTime,
    /// Loading the database at start.
    DbInitTime,
    /// Loading the snapshot at start.
    StartupSnapLoadTime,
    /// Replaying the log at start.
    StartupTxnsLoadTime,
    /// Txns replayed at start (a count).
    StartupTxnsLoaded,
    /// Watchers one node's creation notified (a count; none: not observed).
    NodeCreatedWatchCount,
    /// Watchers one node's deletion notified.
    NodeDeletedWatchCount,
    /// Watchers one change of a node's data notified.
    NodeChangedWatchCount,
    /// Watchers one change of a node's children notified.
    NodeChildrenWatchCount,
}

impl Timing {
    /// Every summary, in the order reports list them.
    pub const ALL: [Timing; 22] = [
        Timing::UpdateLatency,
        Timing::ReadLatency,
        Timing::PropagationLatency,
        Timing::ProposalLatency,
        Timing::ProposalAckCreationLatency,
        Timing::QuorumAckLatency,
        Timing::CommitPropagationLatency,
        Timing::InflightSnapCount,
        Timing::InflightDiffCount,
        Timing::ElectionTime,
        Timing::FollowerSyncTime,
        Timing::ObserverSyncTime,
        Timing::UnavailableTime,
        Timing::LeaderUnavailableTime,
        Timing::DbInitTime,
        Timing::StartupSnapLoadTime,
        Timing::StartupTxnsLoadTime,
        Timing::StartupTxnsLoaded,
        Timing::NodeCreatedWatchCount,
        Timing::NodeDeletedWatchCount,
        Timing::NodeChangedWatchCount,
        Timing::NodeChildrenWatchCount,
    ];

    /// ZooKeeper's name for it, and its detail level.
    pub fn name(self) -> (&'static str, Detail) {
        match self {
            Timing::UpdateLatency => ("updatelatency", Detail::Advanced),
            Timing::ReadLatency => ("readlatency", Detail::Advanced),
            Timing::PropagationLatency => ("propagation_latency", Detail::Advanced),
            Timing::ProposalLatency => ("proposal_latency", Detail::Advanced),
            Timing::ProposalAckCreationLatency => {
                ("proposal_ack_creation_latency", Detail::Advanced)
            }
            Timing::QuorumAckLatency => ("quorum_ack_latency", Detail::Advanced),
            Timing::CommitPropagationLatency => ("commit_propagation_latency", Detail::Advanced),
            Timing::InflightSnapCount => ("inflight_snap_count", Detail::Basic),
            Timing::InflightDiffCount => ("inflight_diff_count", Detail::Basic),
            Timing::ElectionTime => ("election_time", Detail::Basic),
            Timing::FollowerSyncTime => ("follower_sync_time", Detail::Basic),
            Timing::ObserverSyncTime => ("observer_sync_time", Detail::Basic),
            Timing::UnavailableTime => ("unavailable_time", Detail::Basic),
            Timing::LeaderUnavailableTime => ("leader_unavailable_time", Detail::Basic),
            Timing::DbInitTime => ("dbinittime", Detail::Basic),
            Timing::StartupSnapLoadTime => ("startup_snap_load_time", Detail::Basic),
            Timing::StartupTxnsLoadTime => ("startup_txns_load_time", Detail::Basic),
            Timing::StartupTxnsLoaded => ("startup_txns_loaded", Detail::Basic),
            Timing::NodeCreatedWatchCount => ("node_created_watch_count", Detail::Basic),
            Timing::NodeDeletedWatchCount => ("node_deleted_watch_count", Detail::Basic),
            Timing::NodeChangedWatchCount => ("node_changed_watch_count", Detail::Basic),
            Timing::NodeChildrenWatchCount => ("node_children_watch_count", Detail::Basic),
        }
    }
}

/// A summary per top path segment, named as ZooKeeper's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PerNamespace {
    /// Bytes a read returned: the path, what it read, and a stat's 68.
    Read,
    /// Bytes a write changed: the path and the data it wrote.
    Write,
}

impl PerNamespace {
    /// Both, in the order reports list them.
    pub const ALL: [PerNamespace; 2] = [PerNamespace::Read, PerNamespace::Write];

    /// ZooKeeper's name for it (both are basic).
    pub fn name(self) -> &'static str {
        match self {
            PerNamespace::Read => "read_per_namespace",
            PerNamespace::Write => "write_per_namespace",
        }
    }
}

/// ZooKeeper's `DataTree.STAT_OVERHEAD_BYTES`: a read's stat, counted in
/// its bytes.
const STAT_BYTES: u64 = 6 * 8 + 5 * 4;

/// The counters and summaries of one server.
#[derive(Clone, Debug, Default)]
pub struct Metrics {
    counts: [u64; Count::ALL.len()],
    timings: [Summary; Timing::ALL.len()],
    namespaces: [SummarySet; PerNamespace::ALL.len()],
}

impl Metrics {
    /// Adds `by` to `count`.
    pub fn add(&mut self, count: Count, by: u64) {
        self.counts[count as usize] += by;
    }

    /// Notes one observation of `timing` at `now_ms`.
    pub fn observe(&mut self, timing: Timing, value: u64, now_ms: u64) {
        self.timings[timing as usize].observe(value, now_ms);
    }

    /// Notes how long ago, at `now`, the leader stamped a txn with
    /// `txn_time` (wall-clock ms). As ZooKeeper, a negative age (the
    /// members' clocks differ) is not an observation.
    pub fn observe_age(&mut self, timing: Timing, txn_time: i64, now: crate::core::Now) {
        if let Ok(age) = u64::try_from(now.wall_ms - txn_time) {
            self.observe(timing, age, now.mono_ms);
        }
    }

    /// Notes a read of `path` that returned `bytes` (data, or child
    /// names) with its stat, or a write of `bytes` to it, as ZooKeeper's
    /// DataTree counts them: under the path's top segment, the path's own
    /// length included.
    pub fn observe_path(&mut self, set: PerNamespace, path: &str, bytes: usize, now_ms: u64) {
        let Some(namespace) = top_namespace(path) else {
            return;
        };
        let overhead = match set {
            PerNamespace::Read => STAT_BYTES,
            PerNamespace::Write => 0,
        };
        let value = java_length(path) + bytes as u64 + overhead;
        self.namespaces[set as usize].observe(namespace, value, now_ms);
    }

    /// A counter's value.
    pub fn count(&self, count: Count) -> u64 {
        self.counts[count as usize]
    }

    /// A summary.
    pub fn summary(&self, timing: Timing) -> &Summary {
        &self.timings[timing as usize]
    }

    /// A summary set by namespace.
    pub fn per_namespace(&self, set: PerNamespace) -> &SummarySet {
        &self.namespaces[set as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tables_list_each_metric_once_in_declaration_order() {
        for (i, c) in Count::ALL.iter().enumerate() {
            assert_eq!(*c as usize, i, "{c:?}");
        }
        for (i, t) in Timing::ALL.iter().enumerate() {
            assert_eq!(*t as usize, i, "{t:?}");
        }
    }
}
