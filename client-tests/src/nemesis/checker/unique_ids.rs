//! Unique-ids checker: did any two acknowledged `NextId`s get the same id?
//!
//! Each `NextId` is a sequential create; the id is the sequence number
//! ZooKeeper appended, taken from the parent's cversion. Two creates that
//! both took effect must get different numbers, whatever the faults: a
//! repeat means two members handed out the same number (a split brain, a
//! counter rolled back on failover), and is a `duplicate-id` naming every
//! op that got it. Numbers start at 0, so any id >= 0 is plausible; a
//! negative one (or an ok reply without a number) is an `invalid-id`.
//!
//! Only ok ops count: a failed one created nothing, and an unknown one has
//! no id to compare (if it took effect, its id is simply unobserved).

use std::collections::BTreeMap;

use super::{capped, Anomaly, Verdict};
use crate::nemesis::history::{Call, Op, Outcome, Value};

/// Anomalies of one kind listed: a report needs examples, not thousands.
const REPORT_CAP: usize = 50;

/// Checks the unique-ids workload (`NextId`; other calls are ignored):
/// duplicate ids among ok ops, and ids that cannot be sequence numbers.
pub fn check(ops: &[Op]) -> Verdict {
    let mut holders: BTreeMap<i64, Vec<u64>> = BTreeMap::new();
    let mut invalid = Vec::new();
    for op in ops {
        // An ok op without a completion time is unknown, as is its id.
        let (Call::NextId, Outcome::Ok { value }, Some(_)) =
            (&op.call, &op.outcome, op.complete_ns)
        else {
            continue;
        };
        match value {
            Value::Int(id) if *id >= 0 => holders.entry(*id).or_default().push(op.id),
            other => {
                let detail = format!(
                    "op {} got {other:?}, not a sequence number (an integer >= 0)",
                    op.id
                );
                invalid.push(Anomaly::new("invalid-id", detail, vec![op.id]));
            }
        }
    }
    let mut duplicates = Vec::new();
    for (id, ops) in holders.into_iter().filter(|(_, ops)| ops.len() > 1) {
        let detail = format!("{} ok ops got id {id}", ops.len());
        duplicates.push(Anomaly::new("duplicate-id", detail, ops));
    }
    let mut anomalies = capped(duplicates, REPORT_CAP, "duplicated ids");
    anomalies.extend(capped(invalid, REPORT_CAP, "invalid ids"));
    Verdict::from_anomalies(anomalies)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nemesis::checker::test_ops::{fail, ok, op, unknown};

    fn next_id(id: u64, outcome: Outcome) -> Op {
        let complete = Some(id * 10 + 5).filter(|_| outcome.is_ok());
        op(id, 0, id * 10, complete, Call::NextId, outcome)
    }
    fn got(id: i64) -> Outcome {
        ok(Value::Int(id))
    }

    #[test]
    fn distinct_ids_are_valid() {
        let h = [next_id(0, got(0)), next_id(1, got(2)), next_id(2, got(1))];
        assert_eq!(check(&h), Verdict::Valid);
    }

    #[test]
    fn duplicates_are_caught() {
        let h = [
            next_id(0, got(0)),
            next_id(1, got(1)),
            next_id(2, got(0)),
            next_id(3, got(0)),
        ];
        let Verdict::Invalid { anomalies } = check(&h) else {
            panic!("not invalid")
        };
        assert_eq!(anomalies.len(), 1);
        assert_eq!(
            (anomalies[0].kind.as_str(), &anomalies[0].ops[..]),
            ("duplicate-id", &[0, 2, 3][..])
        );
    }

    #[test]
    fn negative_id_is_invalid() {
        let Verdict::Invalid { anomalies } = check(&[next_id(0, got(0)), next_id(1, got(-1))])
        else {
            panic!("not invalid")
        };
        assert_eq!(
            (anomalies[0].kind.as_str(), &anomalies[0].ops[..]),
            ("invalid-id", &[1][..])
        );
    }

    #[test]
    fn unknown_and_failed_ops_are_ignored() {
        // An "ok" without a completion time is unknown too.
        let mut late = next_id(3, got(0));
        late.complete_ns = None;
        let h = [
            next_id(0, got(0)),
            next_id(1, unknown()),
            next_id(2, fail()),
            late,
        ];
        assert_eq!(check(&h), Verdict::Valid);
    }
}
