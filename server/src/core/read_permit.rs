//! A share of a link's read budget, held for as long as what was read with
//! it is in memory (a proposal until it is durable, a SNAP piece until it
//! is staged). The core only holds and drops permits; what a share is (a
//! runtime semaphore's permit, a simulated budget's) is the driver's.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

/// A received message's share of a budget of bytes in flight, given back
/// when the last clone drops.
#[derive(Clone)]
pub struct ReadPermit {
    /// Held, never read: dropping the last clone gives the share back.
    _share: Arc<dyn Any + Send + Sync>,
    kib: u32,
}

impl ReadPermit {
    /// A permit holding `share` (`kib` KiB of its budget) until the last
    /// clone drops.
    pub fn new(share: impl Any + Send + Sync, kib: u32) -> ReadPermit {
        ReadPermit {
            _share: Arc::new(share),
            kib,
        }
    }
}

/// The units of a budget of `whole` bytes, counted in units of `unit`
/// bytes, that `bytes` read take: rounded up, at least one (so every
/// message counts), and never more than the whole budget (so even the
/// largest message can be read).
pub fn budget_units(bytes: usize, unit: usize, whole: usize) -> u32 {
    bytes.div_ceil(unit).clamp(1, whole / unit) as u32
}

impl fmt::Debug for ReadPermit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ReadPermit({} KiB)", self.kib)
    }
}

// Permits carry no information: events compare by what they say.
impl PartialEq for ReadPermit {
    fn eq(&self, _: &ReadPermit) -> bool {
        true
    }
}

impl Eq for ReadPermit {}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    struct Share(Arc<AtomicBool>);
    impl Drop for Share {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_budget_share_is_rounded_up_and_bounded_by_the_whole() {
        assert_eq!(budget_units(0, 1024, 8 << 10), 1);
        assert_eq!(budget_units(1, 1024, 8 << 10), 1);
        assert_eq!(budget_units(1025, 1024, 8 << 10), 2);
        assert_eq!(budget_units(1 << 20, 1024, 8 << 10), 8);
    }

    #[test]
    fn the_share_is_given_back_when_the_last_clone_drops() {
        let given_back = Arc::new(AtomicBool::new(false));
        let permit = ReadPermit::new(Share(given_back.clone()), 4);
        let clone = permit.clone();
        drop(permit);
        assert!(!given_back.load(Ordering::SeqCst));
        assert_eq!(format!("{clone:?}"), "ReadPermit(4 KiB)");
        drop(clone);
        assert!(given_back.load(Ordering::SeqCst));
    }
}
