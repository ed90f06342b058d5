//! What the node loop knows about its server besides the core: its
//! configuration, its disk, its clock and start, and the trace mask the
//! AdminServer sets. Read by the four-letter words and the AdminServer.

use super::clock::Clock;
use super::connection_counts::ConnectionCounts;
use super::storage_worker::StorageMetrics;
use crate::config::Config;
use std::sync::Arc;
use zkd_protocol::Zxid;
use zkd_storage::Store;

/// The ZooKeeper release whose client-visible behaviour zkd follows.
pub const ZOOKEEPER_COMPAT_VERSION: &str = "3.9.5";

/// ZooKeeper's trace mask at start (`ZooTrace`'s default).
const DEFAULT_TRACE_MASK: i64 = 306;

/// `Zookeeper version:` value: the compatible release, then zkd's own version.
pub fn version_string() -> String {
    format!(
        "{ZOOKEEPER_COMPAT_VERSION}-zkd-{}, built on 1970-01-01 00:00 UTC",
        env!("CARGO_PKG_VERSION")
    )
}

/// What the server's storage tells an operator.
pub trait DiskFacts: Send {
    /// Bytes on disk of (data, log).
    fn disk_usage(&self) -> (u64, u64);
    /// The newest sealed snapshot: its zxid and Unix second.
    fn last_snapshot(&self) -> Option<(Zxid, u64)>;
}

impl<S: Store> DiskFacts for S {
    fn disk_usage(&self) -> (u64, u64) {
        Store::disk_usage(self)
    }

    fn last_snapshot(&self) -> Option<(Zxid, u64)> {
        Store::last_snapshot(self)
    }
}

/// What the node loop knows besides the core.
pub struct ServerInfo {
    config: Config,
    disk: Box<dyn DiskFacts>,
    clock: Clock,
    started_mono_ms: u64,
    trace_mask: i64,
    storage_metrics: StorageMetrics,
    connection_counts: Arc<ConnectionCounts>,
}

impl ServerInfo {
    /// Info for a server started now.
    pub fn new(
        config: Config,
        disk: Box<dyn DiskFacts>,
        clock: Clock,
        storage_metrics: StorageMetrics,
        connection_counts: Arc<ConnectionCounts>,
    ) -> ServerInfo {
        ServerInfo {
            started_mono_ms: clock.now().mono_ms,
            config,
            disk,
            clock,
            trace_mask: DEFAULT_TRACE_MASK,
            storage_metrics,
            connection_counts,
        }
    }

    /// What the client ports counted of their connections.
    pub fn connection_counts(&self) -> &ConnectionCounts {
        &self.connection_counts
    }

    /// What the storage threads measured (fsync time, snapshot time).
    pub fn storage_metrics(&self) -> &StorageMetrics {
        &self.storage_metrics
    }

    /// The server's configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Bytes on disk of (data, log).
    pub fn disk_usage(&self) -> (u64, u64) {
        self.disk.disk_usage()
    }

    /// The newest sealed snapshot: its zxid and Unix second.
    pub fn last_snapshot(&self) -> Option<(Zxid, u64)> {
        self.disk.last_snapshot()
    }

    /// Milliseconds since the server started.
    pub fn uptime_ms(&self) -> u64 {
        self.clock.now().mono_ms - self.started_mono_ms
    }

    /// The trace mask last set (`get_trace_mask`). zkd's logs are chosen
    /// with `RUST_LOG`, so the mask only answers back what was set.
    pub fn trace_mask(&self) -> i64 {
        self.trace_mask
    }

    /// Sets the trace mask (`set_trace_mask`).
    pub fn set_trace_mask(&mut self, mask: i64) {
        self.trace_mask = mask;
    }
}
