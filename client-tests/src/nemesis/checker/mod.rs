//! Checkers: each reads a workload's history and gives a [`Verdict`].
//! Every checker is pure, and bounded in time and memory: when it cannot
//! decide within its budget it says `Unknown`, never hangs.

use serde::{Deserialize, Serialize};

/// What a checker concluded.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum Verdict {
    /// No anomaly.
    Valid,
    /// At least one anomaly.
    Invalid { anomalies: Vec<Anomaly> },
    /// Undecided within the budget (the reason says which).
    Unknown { reason: String },
}

impl Verdict {
    /// Invalid with these anomalies, or Valid if there are none.
    pub fn from_anomalies(anomalies: Vec<Anomaly>) -> Verdict {
        if anomalies.is_empty() {
            Verdict::Valid
        } else {
            Verdict::Invalid { anomalies }
        }
    }

    /// Whether it found an anomaly.
    pub fn is_invalid(&self) -> bool {
        matches!(self, Verdict::Invalid { .. })
    }
}

/// One anomaly: its kind, a sentence, and the operations involved.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Anomaly {
    /// A short kebab-case name, e.g. `lost-write`, `stale-read`,
    /// `duplicate-id`, `double-dequeue`, `surviving-ephemeral`.
    pub kind: String,
    /// What happened, for a person.
    pub detail: String,
    /// The ids of the operations involved.
    pub ops: Vec<u64>,
}

impl Anomaly {
    /// An anomaly of `kind` involving `ops`.
    pub fn new(kind: &str, detail: impl Into<String>, ops: Vec<u64>) -> Anomaly {
        Anomaly {
            kind: kind.to_owned(),
            detail: detail.into(),
            ops,
        }
    }
}

/// The first `cap` of `all`, the last of them saying how many more `what`
/// (a plural noun, e.g. "lost writes") were left off.
pub(crate) fn capped(mut all: Vec<Anomaly>, cap: usize, what: &str) -> Vec<Anomaly> {
    let more = all.len().saturating_sub(cap);
    all.truncate(cap);
    if let (Some(last), true) = (all.last_mut(), more > 0) {
        last.detail += &format!(" ({more} more {what} not listed)");
    }
    all
}

/// What an op certainly did, folding "never completed" into `Unknown`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Status {
    Ok,
    Fail,
    Unknown,
}

/// The status of `op`.
pub(crate) fn status(op: &crate::nemesis::history::Op) -> Status {
    use crate::nemesis::history::Outcome;
    match (&op.outcome, op.complete_ns) {
        // Without a completion nobody learned the outcome, whatever it says.
        (_, None) => Status::Unknown,
        (Outcome::Ok { .. }, Some(_)) => Status::Ok,
        (Outcome::Fail { .. }, Some(_)) => Status::Fail,
        (Outcome::Unknown { .. }, Some(_)) => Status::Unknown,
    }
}

pub mod counter;
pub mod fifo;
pub mod queue;
pub mod register;
pub mod sessions;
pub mod set;
pub mod unique_ids;
pub mod watches;

#[cfg(test)]
pub(crate) mod test_ops;
