//! The runtime's clock: the only place time is read.

use crate::core::Now;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Reads monotonic and wall time for the core.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    start: Instant,
}

impl Clock {
    /// A clock whose monotonic zero is now.
    pub fn new() -> Clock {
        Clock {
            start: Instant::now(),
        }
    }

    /// The current time.
    pub fn now(&self) -> Now {
        let wall_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        Now {
            mono_ms: self.start.elapsed().as_millis() as u64,
            wall_ms,
        }
    }

    /// The instant of a monotonic millisecond value.
    pub fn instant_at(&self, mono_ms: u64) -> Instant {
        self.start + std::time::Duration::from_millis(mono_ms)
    }
}

impl Default for Clock {
    fn default() -> Self {
        Clock::new()
    }
}
