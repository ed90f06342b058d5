//! One direction of one peer link under a test's partition: while the
//! direction is held, its socket is neither read nor written, so bytes wait
//! in the kernel as TCP segments wait out a real partition. Nothing on a
//! live link is lost or reordered, and neither side sees an error; the
//! protocol's own timeouts notice the silence.

use crate::runtime::faults::{Direction, PeerCuts};
use tokio::sync::watch;

/// Whether one direction of the link with `peer` is held.
#[derive(Debug)]
pub(super) struct Gate {
    cuts: watch::Receiver<PeerCuts>,
    peer: u64,
    dir: Direction,
}

impl Gate {
    pub(super) fn new(cuts: watch::Receiver<PeerCuts>, peer: u64, dir: Direction) -> Gate {
        Gate { cuts, peer, dir }
    }

    /// Waits while the direction is held.
    pub(super) async fn open(&mut self) {
        let (peer, dir) = (self.peer, self.dir);
        // A dropped sender (the member is stopping) holds nothing.
        let _ = self.cuts.wait_for(|c| !c.blocks(peer, dir)).await;
    }

    /// Completes once the direction is held.
    pub(super) async fn shut(&mut self) {
        let (peer, dir) = (self.peer, self.dir);
        if self.cuts.wait_for(|c| c.blocks(peer, dir)).await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// [`Gate::open`] for an optional gate (none: always open).
pub(super) async fn open(gate: &mut Option<Gate>) {
    if let Some(gate) = gate {
        gate.open().await;
    }
}

/// [`Gate::shut`] for an optional gate (none: never shut).
pub(super) async fn shut(gate: &mut Option<Gate>) {
    match gate {
        Some(gate) => gate.shut().await,
        None => std::future::pending().await,
    }
}
