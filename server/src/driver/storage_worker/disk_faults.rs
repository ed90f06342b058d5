//! A test's slow or failing disk (`zkd.faults.enable` only): the runtime's
//! fault commands set it, the storage thread applies it at each txn-log
//! fsync.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// Disk faults the storage thread applies at each txn-log fsync.
#[derive(Debug, Default)]
pub struct DiskFaults {
    slow_ms: AtomicU64,
    fail_next: AtomicBool,
}

impl DiskFaults {
    /// Called before each txn-log fsync: waits the added latency, then
    /// fails once if a failure was armed (the member then exits as on EIO).
    pub fn before_sync(&self) -> Result<(), String> {
        let slow = self.slow_ms();
        if slow > 0 {
            std::thread::sleep(Duration::from_millis(slow));
        }
        match self.fail_next.swap(false, Ordering::Relaxed) {
            true => Err("injected fsync failure (zkd fault disk-error)".into()),
            false => Ok(()),
        }
    }

    /// Each fsync takes `ms` longer (0: none).
    pub fn set_slow_ms(&self, ms: u64) {
        self.slow_ms.store(ms, Ordering::Relaxed);
    }

    /// The latency added to each fsync.
    pub fn slow_ms(&self) -> u64 {
        self.slow_ms.load(Ordering::Relaxed)
    }

    /// Whether the next fsync fails.
    pub fn arm_failure(&self, armed: bool) {
        self.fail_next.store(armed, Ordering::Relaxed);
    }

    /// Whether a failure is armed.
    pub fn failure_armed(&self) -> bool {
        self.fail_next.load(Ordering::Relaxed)
    }
}
