//! Server-wide counters for `srvr`, `stat` and `mntr`.

/// Counters since start (or the last `srst`).
#[derive(Clone, Debug, Default)]
pub struct ServerStats {
    pub packets_received: u64,
    pub packets_sent: u64,
    pub min_latency_ms: u64,
    pub max_latency_ms: u64,
    pub total_latency_ms: u64,
    pub replies: u64,
}

impl ServerStats {
    /// Records one answered request.
    pub fn record_latency(&mut self, latency_ms: u64) {
        self.min_latency_ms = if self.replies == 0 {
            latency_ms
        } else {
            self.min_latency_ms.min(latency_ms)
        };
        self.max_latency_ms = self.max_latency_ms.max(latency_ms);
        self.total_latency_ms += latency_ms;
        self.replies += 1;
    }

    /// Average latency in ms.
    pub fn avg_latency_ms(&self) -> f64 {
        if self.replies == 0 {
            0.0
        } else {
            self.total_latency_ms as f64 / self.replies as f64
        }
    }
}
