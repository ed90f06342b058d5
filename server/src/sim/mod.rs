//! Deterministic simulation of an ensemble: whole members (`whole`: the
//! runtime's own member lifecycle around the client-facing node, on
//! in-memory disks) in one thread, with seeded virtual time, a seeded
//! network, seeded faults and clients speaking jute. Every random choice
//! comes from the seed; a failure names it and a one-line replay command.

mod clock;
pub mod rng;
pub mod whole;

/// What a schedule does.
#[derive(Clone, Copy, Debug)]
pub struct Schedule {
    pub seed: u64,
    pub members: u64,
    /// Faults (crashes, partitions) happen until then.
    pub faults_until_ms: u64,
    /// The run ends then; the ensemble must have converged.
    pub end_ms: u64,
    /// A script places the faults: no random ones, exact clocks.
    pub scripted: bool,
}

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
