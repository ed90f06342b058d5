//! A member's durable note that its tree was found diverged from a leader's.
//!
//! Until a leader's SNAP replaces the tree, such a member must not lead, even
//! after a restart, when the tree it rebuilds from disk looks whole (issue 35,
//! finding 4): the note outlives the process that found the divergence.

use crate::error::Result;
use zkd_protocol::Zxid;

/// Durable storage of the divergence note.
pub trait DivergenceMark {
    /// The zxid at which the tree was found diverged, if no SNAP came since.
    fn diverged_at(&self) -> Result<Option<Zxid>>;
    /// Records the note (`Some`) or clears it (`None`). **Durable on return.**
    fn set_diverged_at(&mut self, zxid: Option<Zxid>) -> Result<()>;
}
