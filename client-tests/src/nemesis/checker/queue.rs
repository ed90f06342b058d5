//! The queue checker: every value that was enqueued is taken exactly once,
//! and nothing is taken that was never enqueued.
//!
//! The workload enqueues unique values (sequential creates), takes the head
//! with a versioned multi (so two takers cannot both win the same node), and
//! at the end, after the faults healed, drains whatever is left. A correct
//! queue therefore hands every value out at most once, never invents one,
//! and loses none that was acknowledged. The anomalies:
//!
//! - `double-dequeue`: a value taken twice (two ok dequeues, or a dequeue and
//!   the drain). The version check exists precisely to prevent this.
//! - `phantom-read`: a value taken that no enqueue (ok or unknown) attempted.
//! - `dequeue-before-enqueue`: a take of `v` completed before any enqueue of
//!   `v` was invoked, i.e. it read the future.
//! - `empty-while-nonempty`: an ok dequeue answered "empty" while some value
//!   was provably in the queue for the whole of that dequeue (see
//!   [`check`] for what "provably" means; it is kept conservative).
//! - `lost-write`: an ok enqueue whose value is never taken, beyond what the
//!   dequeues of unknown outcome could have taken (each takes at most one).
//!
//! An `Unknown` op (or one that never completed) may take effect at any time
//! after it was invoked, even after the client gave up on it, so unknown
//! dequeues are only counted, never placed in time.

use std::collections::BTreeMap;

use super::{status, Anomaly, Status, Verdict};
use crate::nemesis::history::{Call, Op, Outcome, Value};

/// Completion time of an op known to be ok (`status == Ok` implies `Some`).
fn done(op: &Op) -> u64 {
    op.complete_ns.unwrap_or(u64::MAX)
}

fn ok_value(op: &Op) -> Option<&Value> {
    match &op.outcome {
        Outcome::Ok { value } => Some(value),
        _ => None,
    }
}

/// Checks the queue workload (`Enqueue`, `Dequeue`, `Drain`); other ops are
/// ignored.
///
/// `empty-while-nonempty` is claimed for an ok empty dequeue `D` only when
/// some `v` had an ok enqueue that completed before `D` was invoked and
/// every ok take of `v` was invoked after `D` completed: then `v` sat in the
/// queue throughout `D`. An unknown dequeue cannot excuse it: had one taken
/// `v`, the later take would be a second take of `v`, so the history is
/// invalid either way.
///
/// Without an ok `Drain`, lost writes cannot be judged: the verdict is
/// `Unknown { reason: "no final drain" }` unless one of the other anomalies,
/// which do not depend on the drain, was found (then `Invalid`).
pub fn check(ops: &[Op]) -> Verdict {
    // Enqueues that may have taken effect (ok or unknown), by value.
    let mut attempted: BTreeMap<i64, Vec<&Op>> = BTreeMap::new();
    // The first ok enqueue of each value.
    let mut ok_enqueued: BTreeMap<i64, &Op> = BTreeMap::new();
    // Every certain take (ok dequeue or ok drain), by value.
    let mut takes: BTreeMap<i64, Vec<&Op>> = BTreeMap::new();
    let mut empties: Vec<&Op> = Vec::new();
    let mut unknown_dequeues = 0usize;
    let mut unknown_drains = 0usize;
    let mut drained = false;

    for op in ops {
        match (&op.call, status(op)) {
            (Call::Enqueue { value }, st) if st != Status::Fail => {
                attempted.entry(*value).or_default().push(op);
                if st == Status::Ok {
                    ok_enqueued.entry(*value).or_insert(op);
                }
            }
            (Call::Dequeue, Status::Ok) => match ok_value(op) {
                Some(Value::Int(v)) => takes.entry(*v).or_default().push(op),
                Some(Value::None) => empties.push(op),
                // A malformed answer: it took something we cannot name, so
                // it counts like an unknown dequeue rather than as nothing.
                _ => unknown_dequeues += 1,
            },
            (Call::Dequeue, Status::Unknown) => unknown_dequeues += 1,
            (Call::Drain, Status::Ok) => match ok_value(op) {
                Some(Value::Ints(vs)) => {
                    drained = true;
                    for v in vs {
                        takes.entry(*v).or_default().push(op);
                    }
                }
                _ => unknown_drains += 1,
            },
            (Call::Drain, Status::Unknown) => unknown_drains += 1,
            _ => {}
        }
    }

    let mut anomalies = Vec::new();

    for (v, ts) in &takes {
        if ts.len() >= 2 {
            let mut ids: Vec<u64> = ts.iter().map(|t| t.id).collect();
            ids.dedup();
            anomalies.push(Anomaly::new(
                "double-dequeue",
                format!("value {v} was taken {} times", ts.len()),
                ids,
            ));
        }
        // Any enqueue of v could have been the one taken, so only a take
        // that finished before the earliest of them read the future.
        let Some(first) = attempted
            .get(v)
            .and_then(|es| es.iter().min_by_key(|e| e.invoke_ns))
        else {
            anomalies.push(Anomaly::new(
                "phantom-read",
                format!("value {v} was taken but no enqueue of it was attempted"),
                ts.iter().map(|t| t.id).collect(),
            ));
            continue;
        };
        for t in ts.iter().filter(|t| done(t) < first.invoke_ns) {
            anomalies.push(Anomaly::new(
                "dequeue-before-enqueue",
                format!(
                    "value {v} was taken (op {}) before enqueue op {}",
                    t.id, first.id
                ),
                vec![t.id, first.id],
            ));
        }
    }

    anomalies.extend(empty_while_nonempty(&ok_enqueued, &takes, &empties));

    if !drained && anomalies.is_empty() {
        let reason = "no final drain".to_owned();
        return Verdict::Unknown { reason };
    }

    // Lost writes need the final drain; and a drain of unknown outcome may
    // have taken any number of values, so then none can be called lost.
    if drained && unknown_drains == 0 {
        let missing: Vec<(i64, &Op)> = ok_enqueued
            .iter()
            .filter(|(v, _)| !takes.contains_key(v))
            .map(|(v, e)| (*v, *e))
            .collect();
        // Each unknown dequeue may have taken one of them; which ones is
        // unknowable, so the surplus is reported in value order.
        let surplus = missing.len().saturating_sub(unknown_dequeues);
        for (v, e) in missing.iter().take(surplus) {
            anomalies.push(Anomaly::new(
                "lost-write",
                format!(
                    "value {v} was enqueued ok but never taken ({} such values, \
                     {unknown_dequeues} dequeues of unknown outcome)",
                    missing.len()
                ),
                vec![e.id],
            ));
        }
    }

    Verdict::from_anomalies(anomalies)
}

/// The `empty-while-nonempty` anomalies: each ok empty dequeue during which
/// some value was provably in the queue (see [`check`]).
fn empty_while_nonempty(
    ok_enqueued: &BTreeMap<i64, &Op>,
    takes: &BTreeMap<i64, Vec<&Op>>,
    empties: &[&Op],
) -> Vec<Anomaly> {
    // Each taken, ok-enqueued value was certainly present from its enqueue's
    // completion until its earliest take was invoked.
    let mut present: Vec<(u64, u64, i64, u64, u64)> = ok_enqueued
        .iter()
        .filter_map(|(v, e)| {
            let first = takes.get(v)?.iter().min_by_key(|t| (t.invoke_ns, t.id))?;
            Some((done(e), first.invoke_ns, *v, e.id, first.id))
        })
        .collect();
    present.sort();
    let mut empties: Vec<&Op> = empties.to_vec();
    empties.sort_by_key(|d| (d.invoke_ns, d.id));

    // Sweep the empties by invocation, keeping the present-interval that
    // started before it and lasts longest: one such is a witness if any is.
    let mut anomalies = Vec::new();
    let mut next = 0;
    let mut best: Option<(u64, u64, i64, u64, u64)> = None;
    for d in empties {
        while next < present.len() && present[next].0 < d.invoke_ns {
            if best.is_none_or(|b| present[next].1 > b.1) {
                best = Some(present[next]);
            }
            next += 1;
        }
        if let Some((_, until, v, enq, take)) = best {
            if until > done(d) {
                anomalies.push(Anomaly::new(
                    "empty-while-nonempty",
                    format!(
                        "dequeue {} found the queue empty while value {v} was in it \
                         (enqueued by op {enq}, first taken by op {take})",
                        d.id
                    ),
                    vec![d.id, enq, take],
                ));
            }
        }
    }
    anomalies
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nemesis::checker::test_ops::{fail, first_ops, kinds, ok, op, unknown};

    fn enq(id: u64, invoke: u64, complete: u64, value: i64) -> Op {
        let call = Call::Enqueue { value };
        op(id, 0, invoke, Some(complete), call, Outcome::ok())
    }

    fn deq(id: u64, invoke: u64, complete: u64, got: Option<i64>) -> Op {
        let got = ok(got.map_or(Value::None, Value::Int));
        op(id, 1, invoke, Some(complete), Call::Dequeue, got)
    }

    fn drain(id: u64, at: u64, left: Vec<i64>) -> Op {
        let value = Value::Ints(left);
        op(id, 9, at, Some(at + 1), Call::Drain, ok(value))
    }

    #[test]
    fn double_dequeue() {
        let h = [
            enq(0, 0, 10, 1),
            deq(1, 20, 30, Some(1)),
            deq(2, 40, 50, Some(1)),
            drain(3, 100, vec![]),
        ];
        let v = check(&h);
        assert_eq!(kinds(&v), ["double-dequeue"]);
        assert_eq!(first_ops(&v), [1, 2]);
        // The drain taking it again counts as well.
        let h = [
            enq(0, 0, 10, 1),
            deq(1, 20, 30, Some(1)),
            drain(3, 100, vec![1]),
        ];
        assert_eq!(kinds(&check(&h)), ["double-dequeue"]);
        // Two values, each taken once: valid.
        let h = [
            enq(0, 0, 10, 1),
            enq(1, 0, 10, 2),
            deq(2, 20, 30, Some(1)),
            deq(3, 40, 50, Some(2)),
            drain(4, 100, vec![]),
        ];
        assert_eq!(check(&h), Verdict::Valid);
    }

    #[test]
    fn lost_write() {
        let h = [
            enq(0, 0, 10, 1),
            enq(1, 0, 10, 2),
            deq(2, 20, 30, Some(1)),
            drain(3, 100, vec![]),
        ];
        let v = check(&h);
        assert_eq!(kinds(&v), ["lost-write"]);
        assert_eq!(first_ops(&v), [1]);
        // An unknown dequeue may have taken the missing value: valid.
        let h = [
            enq(0, 0, 10, 1),
            enq(1, 0, 10, 2),
            deq(2, 20, 30, Some(1)),
            op(3, 2, 20, None, Call::Dequeue, unknown()),
            drain(4, 100, vec![]),
        ];
        assert_eq!(check(&h), Verdict::Valid);
    }

    #[test]
    fn only_the_surplus_over_unknown_dequeues_is_lost() {
        let h = [
            enq(0, 0, 10, 1),
            enq(1, 0, 10, 2),
            enq(2, 0, 10, 3),
            op(3, 2, 20, Some(30), Call::Dequeue, unknown()),
            drain(4, 100, vec![]),
        ];
        assert_eq!(kinds(&check(&h)), ["lost-write", "lost-write"]);
    }

    #[test]
    fn an_unknown_drain_excuses_missing_values() {
        let h = [
            enq(0, 0, 10, 1),
            enq(1, 0, 10, 2),
            op(2, 9, 90, Some(95), Call::Drain, unknown()),
            drain(3, 100, vec![]),
        ];
        assert_eq!(check(&h), Verdict::Valid);
    }

    #[test]
    fn phantom_read() {
        let h = [deq(0, 20, 30, Some(7)), drain(1, 100, vec![])];
        assert_eq!(kinds(&check(&h)), ["phantom-read"]);
        // A failed enqueue certainly took no effect.
        let h = [
            op(0, 0, 0, Some(10), Call::Enqueue { value: 7 }, fail()),
            drain(1, 100, vec![7]),
        ];
        assert_eq!(kinds(&check(&h)), ["phantom-read"]);
        // An enqueue of unknown outcome may have happened: valid.
        let h = [
            op(0, 0, 0, Some(10), Call::Enqueue { value: 7 }, unknown()),
            deq(1, 20, 30, Some(7)),
            drain(2, 100, vec![]),
        ];
        assert_eq!(check(&h), Verdict::Valid);
    }

    #[test]
    fn dequeue_before_enqueue_unless_concurrent() {
        let h = [
            deq(0, 0, 10, Some(1)),
            enq(1, 20, 30, 1),
            drain(2, 100, vec![]),
        ];
        assert_eq!(kinds(&check(&h)), ["dequeue-before-enqueue"]);
        // Concurrent with the enqueue, it may have followed it.
        let h = [
            deq(0, 0, 10, Some(1)),
            enq(1, 5, 30, 1),
            drain(2, 100, vec![]),
        ];
        assert_eq!(check(&h), Verdict::Valid);
    }

    #[test]
    fn empty_while_nonempty() {
        let h = [
            enq(0, 0, 10, 1),
            deq(1, 20, 30, None),
            deq(2, 40, 50, Some(1)),
            drain(3, 100, vec![]),
        ];
        let v = check(&h);
        assert_eq!(kinds(&v), ["empty-while-nonempty"]);
        assert_eq!(first_ops(&v), [1, 0, 2]);
        // Left for the drain, it was there all along too.
        let h = [
            enq(0, 0, 10, 1),
            deq(1, 20, 30, None),
            drain(3, 100, vec![1]),
        ];
        assert_eq!(kinds(&check(&h)), ["empty-while-nonempty"]);
        // Valid: a concurrent take may have happened just before the empty
        // answer.
        let h = [
            enq(0, 0, 10, 1),
            deq(1, 20, 30, None),
            deq(2, 25, 35, Some(1)),
            drain(3, 100, vec![]),
        ];
        assert_eq!(check(&h), Verdict::Valid);
        // Nor is an enqueue still in flight proof of anything.
        let h = [
            enq(0, 0, 25, 1),
            deq(1, 20, 30, None),
            drain(3, 100, vec![1]),
        ];
        assert_eq!(check(&h), Verdict::Valid);
    }

    #[test]
    fn no_drain_is_unknown_unless_already_invalid() {
        let h = [enq(0, 0, 10, 1), deq(1, 20, 30, Some(1))];
        let reason = "no final drain".to_owned();
        assert_eq!(check(&h), Verdict::Unknown { reason });
        let h = [
            enq(0, 0, 10, 1),
            deq(1, 20, 30, Some(1)),
            deq(2, 40, 50, Some(1)),
        ];
        assert_eq!(kinds(&check(&h)), ["double-dequeue"]);
    }

    #[test]
    fn other_workloads_are_ignored() {
        let h = [
            op(0, 0, 0, Some(10), Call::SetAdd { value: 1 }, Outcome::ok()),
            drain(1, 100, vec![]),
        ];
        assert_eq!(check(&h), Verdict::Valid);
    }
}
