//! Faults a member takes on command, so that applications can be tested
//! against a misbehaving ensemble (`zkd fault`). They exist only when the
//! member's zoo.cfg sets `zkd.faults.enable=true`, as `zkd ensemble` writes
//! it: a plain member binds no control socket and consults none of this.
//!
//! ```text
//! control socket ──line──▶ FaultCommand ──▶ node loop ──▶ PeerCuts (peer links' gates)
//!                                                     ├─▶ DiskFaults (storage thread's fsync)
//!                                                     └─▶ clients cut / closed, session expired
//! ```

mod apply;
mod command;
mod control;

pub use command::{parse_session, FaultCommand};
pub use control::SOCKET_NAME;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot, watch};

pub use crate::driver::storage_worker::DiskFaults;

/// Peers this member's links neither send to nor receive from: a blocked
/// direction holds its bytes (the socket is neither read nor written), as a
/// network partition holds TCP segments, so nothing is lost or reordered on
/// a live link and no side sees an error. Dials to a blocked peer time out.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PeerCuts {
    /// Peers whose messages from us are held.
    pub send: BTreeSet<u64>,
    /// Peers whose messages to us are held.
    pub recv: BTreeSet<u64>,
}

/// Which way a link's bytes go, from this member's side.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// Writes to the peer.
    Send,
    /// Reads from the peer.
    Recv,
}

impl PeerCuts {
    /// Whether bytes to or from `peer` in `dir` are held.
    pub fn blocks(&self, peer: u64, dir: Direction) -> bool {
        match dir {
            Direction::Send => self.send.contains(&peer),
            Direction::Recv => self.recv.contains(&peer),
        }
    }

    /// Whether no connection to `peer` can be made (either way held).
    pub fn isolates(&self, peer: u64) -> bool {
        self.send.contains(&peer) || self.recv.contains(&peer)
    }
}

/// A command with the channel its one-line answer goes back on.
pub type Request = (FaultCommand, oneshot::Sender<Result<String, String>>);

/// The member's fault switches, held by the node loop.
#[derive(Debug)]
pub struct Faults {
    cuts: watch::Sender<PeerCuts>,
    disk: Arc<DiskFaults>,
    /// Client traffic is not taken in: the member stops answering clients.
    clients_cut: bool,
    socket: PathBuf,
}

impl Faults {
    /// Binds the control socket in `data_dir`; its commands arrive on the
    /// receiver, for the node loop.
    pub fn start(data_dir: &std::path::Path) -> std::io::Result<(Faults, mpsc::Receiver<Request>)> {
        let (tx, requests) = mpsc::channel(16);
        let socket = control::listen(data_dir, tx)?;
        let faults = Faults {
            cuts: watch::Sender::new(PeerCuts::default()),
            disk: Arc::default(),
            clients_cut: false,
            socket,
        };
        Ok((faults, requests))
    }

    /// What the peer links watch.
    pub fn peer_cuts(&self) -> watch::Receiver<PeerCuts> {
        self.cuts.subscribe()
    }

    /// What the storage thread consults.
    pub fn disk(&self) -> Arc<DiskFaults> {
        self.disk.clone()
    }

    /// Whether client traffic is held.
    pub fn clients_cut(&self) -> bool {
        self.clients_cut
    }
}

impl Drop for Faults {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.socket);
    }
}
