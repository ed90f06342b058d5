//! The ZooKeeper transaction id: epoch in the high 32 bits, counter in the low 32.

use std::fmt;

/// A ZooKeeper transaction id (`epoch << 32 | counter`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Zxid(pub i64);

/// The highest epoch a zxid can carry and stay non-negative: ZooKeeper's zxid is a
/// signed 64-bit number, so an epoch of 2^31 or more would sort below every older one.
pub const MAX_EPOCH: u32 = i32::MAX as u32;

impl Zxid {
    /// The zxid before any transaction.
    pub const ZERO: Zxid = Zxid(0);

    /// Builds a zxid from its epoch and counter; `epoch` must not exceed [`MAX_EPOCH`].
    pub fn new(epoch: u32, counter: u32) -> Zxid {
        debug_assert!(epoch <= MAX_EPOCH, "epoch {epoch} past MAX_EPOCH");
        Zxid((((epoch as u64) << 32) | counter as u64) as i64)
    }

    /// The leader epoch that issued this zxid.
    pub fn epoch(self) -> u32 {
        ((self.0 as u64) >> 32) as u32
    }

    /// The per-epoch counter.
    pub fn counter(self) -> u32 {
        self.0 as u32
    }

    /// The next zxid in the same epoch.
    pub fn next(self) -> Zxid {
        Zxid(self.0 + 1)
    }

    /// Whether this zxid may directly follow `prev` in a log: the next
    /// counter of the same epoch, or the start of a later epoch.
    pub fn follows(self, prev: Zxid) -> bool {
        self == prev.next() || (self.epoch() > prev.epoch() && self.counter() <= 1)
    }
}

impl fmt::Display for Zxid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // ZooKeeper logs zxids as 0x-prefixed lowercase hex.
        write!(f, "0x{:x}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_epoch_and_counter() {
        let z = Zxid::new(3, 7);
        assert_eq!(z.epoch(), 3);
        assert_eq!(z.counter(), 7);
        assert_eq!(z.to_string(), "0x300000007");
        assert_eq!(z.next(), Zxid::new(3, 8));
    }

    #[test]
    fn epochs_may_restart_the_counter() {
        assert!(Zxid::new(1, 8).follows(Zxid::new(1, 7)));
        assert!(Zxid::new(2, 1).follows(Zxid::new(1, 7)));
        assert!(!Zxid::new(1, 9).follows(Zxid::new(1, 7)));
    }

    #[test]
    fn the_last_epoch_keeps_zxids_positive() {
        let last = Zxid::new(MAX_EPOCH, u32::MAX);
        assert!(last > Zxid::new(MAX_EPOCH - 1, u32::MAX));
        assert!(last.0 > 0);
        assert_eq!(last.epoch(), MAX_EPOCH);
    }
}
