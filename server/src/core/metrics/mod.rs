//! ZooKeeper's `ServerMetrics` that zkd keeps, under ZooKeeper's names:
//! counters and summaries the member and its node feed as things happen.
//! Gauges (node counts, connections) are read when asked, and the storage
//! thread keeps its own (fsync time); the runtime puts them together for
//! `mntr`, the AdminServer's `monitor` and the Prometheus endpoint.

mod summary;

pub use summary::Summary;

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
    pub const ALL: [Count; 13] = [
        Count::BytesReceived,
        Count::Commits,
        Count::ConnectionRequests,
        Count::DiffSyncs,
        Count::DigestMismatches,
        Count::LearnerCommitsReceived,
        Count::LearnerProposalsReceived,
        Count::Looking,
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
            Count::DiffSyncs => "diff_count",
            Count::DigestMismatches => "digest_mismatches_count",
            Count::LearnerCommitsReceived => "learner_commit_received_count",
            Count::LearnerProposalsReceived => "learner_proposal_received_count",
            Count::Looking => "looking_count",
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
    pub const ALL: [Timing; 16] = [
        Timing::UpdateLatency,
        Timing::ReadLatency,
        Timing::PropagationLatency,
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

/// The counters and summaries of one server.
#[derive(Clone, Debug, Default)]
pub struct Metrics {
    counts: [u64; Count::ALL.len()],
    timings: [Summary; Timing::ALL.len()],
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

    /// A counter's value.
    pub fn count(&self, count: Count) -> u64 {
        self.counts[count as usize]
    }

    /// A summary.
    pub fn summary(&self, timing: Timing) -> &Summary {
        &self.timings[timing as usize]
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
