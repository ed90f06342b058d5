//! What a simulated run is asked to do, and what it reports.

use crate::core::zab::Timing;

/// What a schedule does.
#[derive(Clone, Copy, Debug)]
pub struct Schedule {
    pub seed: u64,
    /// Voting members, ids 1 to `members`.
    pub members: u64,
    /// Observers after them.
    pub observers: u64,
    /// Faults (crashes, partitions) happen until then.
    pub faults_until_ms: u64,
    /// The run ends then; the ensemble must have converged.
    pub end_ms: u64,
    /// A script places the faults: no random ones, exact clocks.
    pub scripted: bool,
    /// Members snapshot (and purge their log) after about this many txns.
    pub snap_count: u64,
    /// tickTime, initLimit and syncLimit of every member.
    pub timing: Timing,
    /// Reconfig is enabled, and a client removes voters and adds them
    /// back now and then; all of them are back by the end.
    pub membership: bool,
    /// Hostile peers (strangers, impostors from elsewhere) speak the peer
    /// wire to the members while faults happen (see `hostile`).
    pub hostile: bool,
}

/// What the scripts run with, and a quarter of the random schedules.
pub const SCRIPT_TIMING: Timing = Timing {
    tick_ms: 100,
    init_limit: 10,
    sync_limit: 5,
};

/// The way a leader began a follower's sync, as the follower received it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncKind {
    Diff,
    Trunc,
    Snap,
}

/// A broken invariant.
#[derive(Debug)]
pub struct Violation(pub String);
