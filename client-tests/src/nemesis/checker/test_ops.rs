//! Builders of ops and outcomes, and readers of verdicts, shared by the
//! checkers' tests.

use super::Verdict;
use crate::nemesis::history::{Call, Op, Outcome, Value};

/// Op `id` of `process`, invoked at `invoke_ns` and completed at
/// `complete_ns` (`None`: the client never learned the outcome).
pub(crate) fn op(
    id: u64,
    process: u32,
    invoke_ns: u64,
    complete_ns: Option<u64>,
    call: Call,
    outcome: Outcome,
) -> Op {
    Op {
        id,
        process,
        invoke_ns,
        complete_ns,
        call,
        outcome,
    }
}

/// When an op with `outcome` that would end at `at` completed: never if
/// its outcome is unknown.
pub(crate) fn completed(at: u64, outcome: &Outcome) -> Option<u64> {
    Some(at).filter(|_| !matches!(outcome, Outcome::Unknown { .. }))
}

/// An ok returning `value`.
pub(crate) fn ok(value: Value) -> Outcome {
    Outcome::Ok { value }
}

/// A failure: the op certainly took no effect.
pub(crate) fn fail() -> Outcome {
    Outcome::Fail {
        error: "bad version".to_owned(),
    }
}

/// An unknown outcome: the op may or may not have taken effect.
pub(crate) fn unknown() -> Outcome {
    Outcome::Unknown {
        error: "connection loss".to_owned(),
    }
}

/// The kinds of the anomalies (none if the verdict is not invalid).
pub(crate) fn kinds(v: &Verdict) -> Vec<&str> {
    match v {
        Verdict::Invalid { anomalies } => anomalies.iter().map(|a| a.kind.as_str()).collect(),
        _ => Vec::new(),
    }
}

/// The ops of the first anomaly (none if the verdict is not invalid).
pub(crate) fn first_ops(v: &Verdict) -> Vec<u64> {
    match v {
        Verdict::Invalid { anomalies } => anomalies[0].ops.clone(),
        _ => Vec::new(),
    }
}

/// (kind, ops) of each anomaly; panics unless the verdict is invalid.
pub(crate) fn found(v: Verdict) -> Vec<(String, Vec<u64>)> {
    match v {
        Verdict::Invalid { anomalies } => anomalies.into_iter().map(|a| (a.kind, a.ops)).collect(),
        other => panic!("not invalid: {other:?}"),
    }
}
