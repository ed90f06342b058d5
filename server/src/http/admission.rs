//! Who may hold an operator connection: at most so many from one address
//! and so many in all, so that idle or slow sockets from one place cannot
//! keep a probe from elsewhere out.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

/// Open connections, by the address they come from.
#[derive(Clone, Debug)]
pub struct Admission {
    per_address: usize,
    total: usize,
    open: Arc<Mutex<Open>>,
}

#[derive(Debug, Default)]
struct Open {
    by_address: HashMap<IpAddr, usize>,
    total: usize,
}

/// One admitted connection; dropping it frees its place.
#[derive(Debug)]
pub struct Slot {
    address: IpAddr,
    open: Arc<Mutex<Open>>,
}

impl Admission {
    /// At most `per_address` connections from one address, `total` in all.
    pub fn new(per_address: usize, total: usize) -> Admission {
        Admission {
            per_address,
            total,
            open: Arc::default(),
        }
    }

    /// A place for a connection from `address`, or None when it has its
    /// share already or the server is full.
    pub fn admit(&self, address: IpAddr) -> Option<Slot> {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let from_there = open.by_address.get(&address).copied().unwrap_or(0);
        if from_there >= self.per_address || open.total >= self.total {
            return None;
        }
        open.by_address.insert(address, from_there + 1);
        open.total += 1;
        Some(Slot {
            address,
            open: self.open.clone(),
        })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        open.total -= 1;
        if let Some(n) = open.by_address.get_mut(&self.address) {
            *n -= 1;
            if *n == 0 {
                open.by_address.remove(&self.address);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_address_cannot_take_every_place() {
        let admission = Admission::new(2, 3);
        let a: IpAddr = [127, 0, 0, 2].into();
        let b: IpAddr = [127, 0, 0, 1].into();
        let first = admission.admit(a).unwrap();
        let _second = admission.admit(a).unwrap();
        assert!(admission.admit(a).is_none(), "a third from a");
        let _probe = admission.admit(b).unwrap();
        assert!(admission.admit(b).is_none(), "full");
        drop(first);
        assert!(admission.admit(a).is_some(), "a place freed");
    }
}
