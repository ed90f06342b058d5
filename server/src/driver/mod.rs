//! The one driver of a member, for the runtime and the simulator alike,
//! and what both plug into it: the member's storage thread (jobs run on a
//! [`Store`](zkd_storage::Store) in order), recovery from disk, and the
//! peer wire's frames converted to and from the core's messages. No async
//! runtime and no sockets here: the runtime (`runtime/`) brings tokio and
//! the network, the simulator (`sim/`) its simulated links and disks.

pub mod link_bound;
pub mod member_driver;
pub mod peer_wire;
pub mod recovery;
pub mod storage_worker;

/// Why the server stopped.
#[derive(Debug)]
pub enum ServeError {
    /// Storage failed or is corrupt: restart from disk.
    Storage(String),
    /// The listener failed.
    Io(std::io::Error),
}

impl std::fmt::Display for ServeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ServeError::Storage(e) => write!(f, "storage: {e}"),
            ServeError::Io(e) => write!(f, "io: {e}"),
        }
    }
}

impl std::error::Error for ServeError {}
