//! Counter checker: does every read fall within what the adds allow?
//!
//! Clients add deltas to one counter (`CounterAdd`, a versioned setData
//! in a multi) and read it (`CounterRead`); it starts at 0. A read R sees
//! the sum of the adds that took effect before its linearization point, so
//! its value is bounded:
//!
//! - every add that completed ok before R was invoked is certainly in it;
//! - every add that may have taken effect (ok or unknown) and was invoked
//!   no later than R completed may be in it, or not;
//! - anything else (failed, or invoked after R completed) is not.
//!
//! Hence `lower` = certain sum + the negative deltas of the maybes, and
//! `upper` = certain sum + their positive deltas (deltas are positive in
//! our workload, but either sign is handled). A value below `lower` missed
//! acknowledged increments: a `lost-write`. A value above `upper` counts
//! adds that never happened (or happened twice): an `impossible-read`.
//! The final read, after every add completed, is held to the same rule,
//! which there pins the total to the acknowledged sum plus any unknowns.

use super::{capped, Anomaly, Verdict};
use crate::nemesis::history::{Call, Op, Outcome, Value};

/// Anomalies of one kind listed: a report needs examples, not thousands.
const REPORT_CAP: usize = 50;
/// Adds named per anomaly.
const ADDS_LISTED: usize = 10;

/// Running sums over a sorted run of adds: (delta, negative parts, positive
/// parts), so any prefix's sums are one lookup.
fn prefix_sums(adds: &[(u64, u64, i64)]) -> Vec<[i128; 3]> {
    let mut sums = vec![[0; 3]];
    for &(_, _, delta) in adds {
        let [d, neg, pos] = sums[sums.len() - 1];
        let delta = i128::from(delta);
        sums.push([d + delta, neg + delta.min(0), pos + delta.max(0)]);
    }
    sums
}

/// Checks the counter workload (`CounterAdd`, `CounterRead`; other calls
/// are ignored): every ok read within the bounds its concurrent adds allow.
pub fn check(ops: &[Op]) -> Verdict {
    // Ok adds by completion, and adds that may have taken effect by
    // invoke: (time, op id, delta).
    let (mut acked, mut maybe, mut reads) = (Vec::new(), Vec::new(), Vec::new());
    let mut malformed = Vec::new();
    for op in ops {
        // An ok op without a completion time is unknown.
        let complete = op
            .complete_ns
            .filter(|_| op.outcome.is_ok())
            .map(|c| c.max(op.invoke_ns));
        match (&op.call, &op.outcome, complete) {
            (Call::CounterAdd { .. }, Outcome::Fail { .. }, _) => {}
            (Call::CounterAdd { delta }, _, complete) => {
                maybe.push((op.invoke_ns, op.id, *delta));
                acked.extend(complete.map(|c| (c, op.id, *delta)));
            }
            (
                Call::CounterRead,
                Outcome::Ok {
                    value: Value::Int(v),
                },
                Some(c),
            ) => reads.push((op, c, *v)),
            (Call::CounterRead, Outcome::Ok { value }, Some(_)) => {
                let detail = format!("read {} returned {value:?}, not a total", op.id);
                malformed.push(Anomaly::new("malformed-read", detail, vec![op.id]));
            }
            _ => {}
        }
    }
    acked.sort_unstable();
    maybe.sort_unstable();
    let (acked_sums, maybe_sums) = (prefix_sums(&acked), prefix_sums(&maybe));
    let (mut lost, mut impossible) = (Vec::new(), Vec::new());
    for (read, complete, value) in reads {
        let certain = acked.partition_point(|a| a.0 < read.invoke_ns);
        let possible = maybe.partition_point(|a| a.0 <= complete);
        let ([sum, c_neg, c_pos], [_, p_neg, p_pos]) = (acked_sums[certain], maybe_sums[possible]);
        // Every certain add is also a possible one: the rest are the maybes.
        let (lower, upper) = (sum + p_neg - c_neg, sum + p_pos - c_pos);
        let v = i128::from(value);
        if v < lower {
            let adds = acked[certain.saturating_sub(ADDS_LISTED)..certain]
                .iter()
                .map(|a| a.1);
            let detail = format!(
                "read {} returned {value}, but adds acknowledged before it was invoked make at least \
                 {lower} (listed: the read and the latest of those adds)",
                read.id
            );
            lost.push(Anomaly::new(
                "lost-write",
                detail,
                [read.id].into_iter().chain(adds).collect(),
            ));
        } else if v > upper {
            let adds = maybe[possible.saturating_sub(ADDS_LISTED)..possible]
                .iter()
                .map(|a| a.1);
            let detail = format!(
                "read {} returned {value}, but the adds that may have preceded it make at most {upper} \
                 (listed: the read and the latest of those adds)",
                read.id
            );
            impossible.push(Anomaly::new(
                "impossible-read",
                detail,
                [read.id].into_iter().chain(adds).collect(),
            ));
        }
    }
    let mut anomalies = capped(lost, REPORT_CAP, "lost-write reads");
    anomalies.extend(capped(impossible, REPORT_CAP, "impossible reads"));
    anomalies.extend(malformed);
    Verdict::from_anomalies(anomalies)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nemesis::checker::test_ops::{self, completed, fail, found, ok, unknown};

    /// Op `id` of its own process over `span`, never completed if unknown.
    fn op(id: u64, span: (u64, u64), call: Call, outcome: Outcome) -> Op {
        let complete = completed(span.1, &outcome);
        test_ops::op(id, id as u32, span.0, complete, call, outcome)
    }
    fn add(id: u64, span: (u64, u64), delta: i64) -> Op {
        op(id, span, Call::CounterAdd { delta }, Outcome::ok())
    }
    fn read(id: u64, span: (u64, u64), total: i64) -> Op {
        op(id, span, Call::CounterRead, ok(Value::Int(total)))
    }
    fn unknown_add(id: u64, invoke: u64, delta: i64) -> Op {
        op(id, (invoke, 0), Call::CounterAdd { delta }, unknown())
    }

    #[test]
    fn concurrent_reads_see_any_prefix() {
        // Adds 1 and 2 overlap reads that may see 0, 1, 2 or 3.
        let mut h = vec![add(0, (0, 50), 1), add(1, (0, 50), 2)];
        h.extend([
            read(2, (10, 20), 0),
            read(3, (10, 20), 2),
            read(4, (10, 60), 3),
            read(5, (60, 70), 3),
        ]);
        assert_eq!(check(&h), Verdict::Valid);
        // Failed adds count for nothing: a read of 3 + 5 is impossible.
        h.extend([op(6, (70, 80), Call::CounterAdd { delta: 5 }, fail())]);
        h.push(read(7, (90, 95), 8));
        assert_eq!(
            found(check(&h)),
            [("impossible-read".to_owned(), vec![7, 0, 1])]
        );
    }

    #[test]
    fn read_below_acknowledged_total_is_lost_write() {
        let h = [
            add(0, (0, 10), 1),
            add(1, (20, 30), 1),
            read(2, (40, 50), 1),
        ];
        assert_eq!(found(check(&h)), [("lost-write".to_owned(), vec![2, 0, 1])]);
    }

    #[test]
    fn read_above_possible_is_impossible() {
        // Add 2 was invoked after the read completed: it cannot count.
        let h = [
            add(0, (0, 10), 1),
            read(1, (20, 30), 2),
            add(2, (40, 50), 1),
        ];
        assert_eq!(
            found(check(&h)),
            [("impossible-read".to_owned(), vec![1, 0])]
        );
    }

    #[test]
    fn unknown_adds_widen_the_bounds() {
        let h = [
            add(0, (0, 10), 1),
            unknown_add(1, 5, 10),
            read(2, (20, 30), 11),
            read(3, (40, 50), 11),
        ];
        assert_eq!(check(&h), Verdict::Valid);
        let h = [
            add(0, (0, 10), 1),
            unknown_add(1, 5, 10),
            read(2, (20, 30), 1),
        ];
        assert_eq!(check(&h), Verdict::Valid);
        // A negative unknown delta lowers the floor; without it, 0 is lost.
        let h = [
            add(0, (0, 10), 1),
            unknown_add(1, 5, -1),
            read(2, (20, 30), 0),
        ];
        assert_eq!(check(&h), Verdict::Valid);
        let h = [add(0, (0, 10), 1), read(2, (20, 30), 0)];
        assert_eq!(found(check(&h)), [("lost-write".to_owned(), vec![2, 0])]);
    }
}
