//! Set checker: is every acknowledged add in every read after it, and
//! nothing else?
//!
//! Clients add elements (`SetAdd`, a persistent create) while faults come
//! and go; after the faults heal, a client reads the whole set (`SetRead`).
//! A set only grows, so:
//!
//! - an add that completed ok before a read was invoked must be in it (the
//!   reads sync first), else it is a `lost-write` (ZooKeeper acknowledged a
//!   create it then forgot: a commit lost on failover, a truncated log, or a
//!   member whose history diverged);
//! - an element some ok read saw must be in every ok read invoked after
//!   that read completed, else it is a `lost-write` too (it vanished);
//! - an element no add ever attempted (ok or unknown), or that only failed
//!   adds attempted, is a `phantom-read` (it came from nowhere, or from an
//!   op the server said did not happen).
//!
//! Unknown adds may be present or absent. The harness reads the set once
//! through each member after the last heal; without an ok `SetRead` there is
//! nothing to judge, and the verdict is `Unknown`.

use std::collections::{BTreeMap, HashSet};

use super::{capped, Anomaly, Verdict};
use crate::nemesis::history::{Call, Op, Outcome, Value};

/// Anomalies of one kind listed: a report needs examples, not thousands.
const REPORT_CAP: usize = 50;

/// One ok read: its op, when it ran, and what it saw.
struct Read<'a> {
    op: &'a Op,
    complete: u64,
    seen: HashSet<i64>,
}

/// Checks the set workload (`SetAdd`, `SetRead`; other calls are ignored):
/// lost acknowledged adds, elements vanishing between reads, and phantom
/// elements. `Unknown` if no ok `SetRead` exists.
pub fn check(ops: &[Op]) -> Verdict {
    // Values some add that may have taken effect attempted.
    let mut attempted = HashSet::new();
    // Failed adds per value: named when the value shows up anyway.
    let mut failed: BTreeMap<i64, Vec<u64>> = BTreeMap::new();
    // Ok adds with their completion: (completion, op id, value).
    let mut acked = Vec::new();
    let (mut reads, mut malformed) = (Vec::new(), Vec::new());
    for op in ops {
        // An ok op without a completion time is unknown.
        let complete = op.complete_ns.filter(|_| op.outcome.is_ok());
        match (&op.call, &op.outcome, complete) {
            (Call::SetAdd { value }, Outcome::Fail { .. }, _) => {
                failed.entry(*value).or_default().push(op.id)
            }
            (Call::SetAdd { value }, _, complete) => {
                attempted.insert(*value);
                acked.extend(complete.map(|c| (c, op.id, *value)));
            }
            (
                Call::SetRead,
                Outcome::Ok {
                    value: Value::Ints(xs),
                },
                Some(complete),
            ) => {
                reads.push(Read {
                    op,
                    complete,
                    seen: xs.iter().copied().collect(),
                });
            }
            (Call::SetRead, Outcome::Ok { value }, Some(_)) => {
                let detail = format!("read {} returned {value:?}, not a list of elements", op.id);
                malformed.push(Anomaly::new("malformed-read", detail, vec![op.id]));
            }
            _ => {}
        }
    }
    reads.sort_by_key(|r| (r.op.invoke_ns, r.op.id));
    if reads.is_empty() {
        if malformed.is_empty() {
            return Verdict::Unknown {
                reason: "no final read".to_owned(),
            };
        }
        return Verdict::Invalid {
            anomalies: malformed,
        };
    }
    let (mut lost, mut phantoms) = (Vec::new(), Vec::new());
    // (value, read) pairs already reported, so a vanished ack is told once.
    let mut told = HashSet::new();
    acked.sort_unstable();
    for read in &reads {
        let before = acked.iter().take_while(|(c, _, _)| *c < read.op.invoke_ns);
        for &(_, id, value) in before {
            if !read.seen.contains(&value) && told.insert((value, read.op.id)) {
                let detail = format!(
                    "add {id} of {value} completed ok before read {} was invoked, which lacks it",
                    read.op.id
                );
                lost.push(Anomaly::new("lost-write", detail, vec![id, read.op.id]));
            }
        }
    }
    // Each element's first sighting: the earliest completion of a read
    // that saw it. Any read invoked after that must see it too.
    let mut first: BTreeMap<i64, (u64, u64)> = BTreeMap::new();
    for read in &reads {
        for &value in &read.seen {
            let e = first.entry(value).or_insert((read.complete, read.op.id));
            *e = (*e).min((read.complete, read.op.id));
        }
    }
    for read in &reads {
        let gone = first
            .iter()
            .filter(|(v, (c, _))| *c < read.op.invoke_ns && !read.seen.contains(v));
        for (&value, &(_, seen_by)) in gone {
            if told.insert((value, read.op.id)) {
                let detail = format!(
                    "read {seen_by} saw {value}, but read {}, invoked after it, did not",
                    read.op.id
                );
                lost.push(Anomaly::new(
                    "lost-write",
                    detail,
                    vec![seen_by, read.op.id],
                ));
            }
        }
        let mut seen: Vec<i64> = read
            .seen
            .iter()
            .copied()
            .filter(|v| !attempted.contains(v))
            .collect();
        seen.sort_unstable();
        for value in seen {
            let mut ids = vec![read.op.id];
            ids.extend(failed.get(&value).into_iter().flatten().take(5));
            let detail = format!(
                "read {} saw {value}, which no add that took effect added",
                read.op.id
            );
            phantoms.push(Anomaly::new("phantom-read", detail, ids));
        }
    }
    let mut anomalies = capped(lost, REPORT_CAP, "lost writes");
    anomalies.extend(capped(phantoms, REPORT_CAP, "phantom elements"));
    anomalies.extend(malformed);
    Verdict::from_anomalies(anomalies)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nemesis::checker::test_ops::{completed, fail, found, ok, op, unknown};

    fn add(id: u64, value: i64, outcome: Outcome) -> Op {
        let complete = completed(id * 10 + 5, &outcome);
        op(
            id,
            id as u32,
            id * 10,
            complete,
            Call::SetAdd { value },
            outcome,
        )
    }
    fn read(id: u64, invoke: u64, xs: &[i64]) -> Op {
        let got = ok(Value::Ints(xs.to_vec()));
        op(id, id as u32, invoke, Some(invoke + 5), Call::SetRead, got)
    }

    #[test]
    fn all_acked_adds_present_is_valid() {
        let h = [
            add(0, 1, Outcome::ok()),
            add(1, 2, Outcome::ok()),
            read(2, 100, &[1, 2]),
        ];
        assert_eq!(check(&h), Verdict::Valid);
    }

    #[test]
    fn lost_add_is_caught() {
        let h = [
            add(0, 1, Outcome::ok()),
            add(1, 2, Outcome::ok()),
            read(2, 100, &[2]),
        ];
        assert_eq!(found(check(&h)), [("lost-write".to_owned(), vec![0, 2])]);
        // An add still running when the read was invoked may be missing.
        let h = [add(0, 1, Outcome::ok()), read(2, 3, &[])];
        assert_eq!(check(&h), Verdict::Valid);
    }

    #[test]
    fn a_read_before_the_last_lacking_an_acked_add_is_caught() {
        // One member's view lacks the add; the member read after it has it
        // (a member whose history diverged, read first).
        let h = [
            add(0, 1, Outcome::ok()),
            read(1, 100, &[]),
            read(2, 200, &[1]),
        ];
        assert_eq!(found(check(&h)), [("lost-write".to_owned(), vec![0, 1])]);
    }

    #[test]
    fn phantom_element_is_caught() {
        let h = [add(0, 1, Outcome::ok()), read(1, 100, &[1, 9])];
        assert_eq!(found(check(&h)), [("phantom-read".to_owned(), vec![1])]);
        // Only a failed add tried it: still a phantom, naming the add.
        let h = [
            add(0, 1, Outcome::ok()),
            add(1, 9, fail()),
            read(2, 100, &[1, 9]),
        ];
        assert_eq!(found(check(&h)), [("phantom-read".to_owned(), vec![2, 1])]);
    }

    #[test]
    fn no_final_read_is_unknown() {
        let h = [
            add(0, 1, Outcome::ok()),
            op(1, 1, 50, None, Call::SetRead, unknown()),
        ];
        assert!(matches!(check(&h), Verdict::Unknown { reason } if reason == "no final read"));
    }

    #[test]
    fn element_vanishing_between_reads_is_lost() {
        // 5 came from an unknown add, so the final read need not have it;
        // but a read before the final one saw it, so it must stay.
        let h = [
            add(0, 1, Outcome::ok()),
            add(1, 5, unknown()),
            read(2, 100, &[1, 5]),
            read(3, 200, &[1]),
        ];
        assert_eq!(found(check(&h)), [("lost-write".to_owned(), vec![2, 3])]);
        // Overlapping reads may disagree.
        let h = [
            add(0, 1, Outcome::ok()),
            add(1, 5, unknown()),
            read(2, 100, &[1, 5]),
            read(3, 102, &[1]),
        ];
        assert_eq!(check(&h), Verdict::Valid);
    }

    #[test]
    fn unknown_adds_may_be_present_or_absent() {
        let h = [
            add(0, 1, unknown()),
            add(1, 2, unknown()),
            read(2, 100, &[2]),
        ];
        assert_eq!(check(&h), Verdict::Valid);
        // Other workloads' ops and failed adds are ignored.
        let h = [
            add(0, 1, fail()),
            op(1, 1, 0, Some(1), Call::NextId, Outcome::ok()),
            read(2, 100, &[]),
        ];
        assert_eq!(check(&h), Verdict::Valid);
    }
}
