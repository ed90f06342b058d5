//! What the client ports count of the connections they take, for
//! ZooKeeper's gauges `non_mtls_local_conn_count`,
//! `non_mtls_remote_conn_count` (plaintext connections since start, from a
//! loopback address or not), `outstanding_tls_handshake` (handshakes
//! under way now), `unsuccessful_handshake` (TLS handshakes that failed
//! or timed out) and `connection_rejected` (refused past `maxClientCnxns`).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// The counts, shared by every connection task and the metrics.
#[derive(Debug, Default)]
pub struct ConnectionCounts {
    plaintext_local: AtomicU64,
    plaintext_remote: AtomicU64,
    tls_handshakes: AtomicI64,
    failed_handshakes: AtomicU64,
    rejected: AtomicU64,
}

/// A TLS handshake under way; dropping it ends it.
#[derive(Debug)]
pub struct Handshake(Arc<ConnectionCounts>);

impl ConnectionCounts {
    /// One more plaintext connection from `ip`.
    pub fn plaintext(&self, ip: Option<IpAddr>) {
        let counter = match ip.is_some_and(|ip| !ip.is_loopback()) {
            true => &self.plaintext_remote,
            false => &self.plaintext_local,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// A connection refused: its address had `maxClientCnxns` already.
    pub fn reject(&self) {
        self.rejected.fetch_add(1, Ordering::Relaxed);
    }

    /// Connections refused since start.
    pub fn rejected(&self) -> u64 {
        self.rejected.load(Ordering::Relaxed)
    }

    /// A TLS handshake starts.
    pub fn handshake(self: &Arc<Self>) -> Handshake {
        self.tls_handshakes.fetch_add(1, Ordering::Relaxed);
        Handshake(self.clone())
    }

    /// A TLS handshake failed or ran out of time.
    pub fn handshake_failed(&self) {
        self.failed_handshakes.fetch_add(1, Ordering::Relaxed);
    }

    /// TLS handshakes that failed since start.
    pub fn failed_handshakes(&self) -> u64 {
        self.failed_handshakes.load(Ordering::Relaxed)
    }

    /// Plaintext connections since start, from loopback and from elsewhere.
    pub fn plaintext_counts(&self) -> (u64, u64) {
        (
            self.plaintext_local.load(Ordering::Relaxed),
            self.plaintext_remote.load(Ordering::Relaxed),
        )
    }

    /// TLS handshakes under way.
    pub fn handshakes(&self) -> i64 {
        self.tls_handshakes.load(Ordering::Relaxed)
    }
}

impl Drop for Handshake {
    fn drop(&mut self) {
        self.0.tls_handshakes.fetch_sub(1, Ordering::Relaxed);
    }
}

/// One port's open connections by address, for `maxClientCnxns`.
#[derive(Clone, Debug, Default)]
pub struct AddressCounts(Arc<Mutex<HashMap<IpAddr, u32>>>);

/// A connection's place in its address's count, given back when dropped.
#[derive(Debug)]
pub struct AddressSlot {
    counts: AddressCounts,
    ip: IpAddr,
}

impl AddressCounts {
    /// A place for one more connection from `ip`; None if it already has
    /// `max` (0 for no limit).
    pub fn take(&self, ip: IpAddr, max: u32) -> Option<AddressSlot> {
        let mut counts = self.lock();
        let n = counts.entry(ip).or_insert(0);
        if max != 0 && *n >= max {
            return None;
        }
        *n += 1;
        Some(AddressSlot {
            counts: self.clone(),
            ip,
        })
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<IpAddr, u32>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for AddressSlot {
    fn drop(&mut self) {
        let mut counts = self.counts.lock();
        if let Some(n) = counts.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                counts.remove(&self.ip);
            }
        }
    }
}
