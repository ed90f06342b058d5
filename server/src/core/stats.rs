//! Counters for `srvr`, `stat`, `cons` and `mntr`.

/// Request latencies: min, max, total and count, plus the last one.
#[derive(Clone, Debug, Default)]
pub struct Latency {
    pub min_ms: u64,
    pub max_ms: u64,
    pub total_ms: u64,
    pub count: u64,
    pub last_ms: u64,
}

impl Latency {
    /// Records one answered request.
    pub fn record(&mut self, ms: u64) {
        self.min_ms = if self.count == 0 {
            ms
        } else {
            self.min_ms.min(ms)
        };
        self.max_ms = self.max_ms.max(ms);
        self.total_ms += ms;
        self.last_ms = ms;
        self.count += 1;
    }

    /// Average in ms.
    pub fn avg_ms(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            // Four decimals, as ZooKeeper's AvgMinMaxCounter rounds.
            let avg = self.total_ms as f64 / self.count as f64;
            (avg * 10_000.0).round() / 10_000.0
        }
    }
}

/// The sizes of the replies to clients' requests (header and body, as
/// ZooKeeper's `BufferStats` counts them): -1 until the first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResponseSizes {
    pub last: i64,
    pub min: i64,
    pub max: i64,
}

impl Default for ResponseSizes {
    fn default() -> ResponseSizes {
        ResponseSizes {
            last: -1,
            min: -1,
            max: -1,
        }
    }
}

impl ResponseSizes {
    /// Records one reply of `size` bytes.
    pub fn record(&mut self, size: usize) {
        let size = size as i64;
        self.last = size;
        self.min = if self.min < 0 {
            size
        } else {
            self.min.min(size)
        };
        self.max = self.max.max(size);
    }
}

/// Server-wide counters since start (or the last `srst`).
#[derive(Clone, Debug, Default)]
pub struct ServerStats {
    pub packets_received: u64,
    pub packets_sent: u64,
    pub latency: Latency,
    /// Auth packets (and SASL tokens) refused.
    pub auth_failed: u64,
    /// Replies to requests, pings aside.
    pub client_responses: ResponseSizes,
}
