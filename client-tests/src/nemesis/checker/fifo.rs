//! The FIFO checker: ZooKeeper's per-session guarantees, as one client sees
//! its own writes and everybody's.
//!
//! ZooKeeper does not promise that reads are linearizable (a follower may
//! lag), but it does promise, per session: its requests are applied in the
//! order the client sent them (FIFO client order), and a client never sees
//! an older view after a newer one, even when it reconnects to another
//! server (the server refuses a client whose last seen zxid it has not yet
//! reached). Together these give read-your-writes. Each process writes only
//! its own key, with values that increase; every process reads any key and
//! gets the value with its `mzxid`. Per reading process `P`, in its op order
//! (`P` runs one op at a time, so invocation order is program order):
//!
//! - `non-monotonic-read`: a read of a key returns a lower `mzxid` than an
//!   earlier read by `P` of that key (monotonic reads), or a value whose
//!   writes all completed before any write of a value `P` already saw there
//!   was invoked (the writer's FIFO order, as seen by `P`). Per-key mzxids
//!   are not read points, so nothing is compared across keys.
//! - `stale-read`: after `P`'s ok write of a key, `P` reads that key as
//!   absent, or as a value whose writes all completed before that write was
//!   invoked (read-your-writes).
//! - `phantom-read`: anyone reads a value no write (ok or unknown) of that
//!   key attempted, or one whose writes were all invoked after the read
//!   completed.
//!
//! A write of unknown outcome may take effect at any time after it was
//! invoked, even after the writer moved on, so seeing an older value that
//! only such a write produced is not held against anyone; the `mzxid` rule
//! still catches going back in time.
//!
//! These are guarantees of one session. The history does not record which
//! session a FIFO op ran in, so this checker assumes a process keeps one
//! session for the whole FIFO workload (or the harness gives a new session a
//! new process id): a fresh session may attach to a lagging server.

use std::collections::BTreeMap;

use super::{status, Anomaly, Status, Verdict};
use crate::nemesis::history::{Call, Op, Outcome, Value};

/// The writes that may have taken effect (ok or unknown), by key and value.
type Writes<'a> = BTreeMap<(u32, i64), Vec<&'a Op>>;

/// Whether value `w` of `key` was certainly overwritten before `t`: some
/// write produced it, every such write was ok, and all completed before `t`.
/// (An unknown write of `w` might land later, so it is never superseded.)
fn superseded(writes: &Writes, key: u32, w: i64, t: u64) -> bool {
    writes.get(&(key, w)).is_some_and(|ws| {
        ws.iter()
            .all(|op| status(op) == Status::Ok && op.complete_ns.is_some_and(|c| c < t))
    })
}

/// An ok read: key, value (`None` if absent) and mzxid.
fn read_of(op: &Op) -> Option<(u32, Option<i64>, i64)> {
    match (&op.call, &op.outcome, op.complete_ns) {
        (
            Call::FifoRead { key },
            Outcome::Ok {
                value: Value::Versioned { value, zxid },
            },
            Some(_),
        ) => Some((*key, *value, *zxid)),
        _ => None,
    }
}

/// What one process has seen of one key so far.
#[derive(Default)]
struct Seen<'a> {
    /// The read with the highest mzxid.
    newest: Option<(i64, &'a Op)>,
    /// The read with the highest value (values of a key increase).
    highest: Option<(i64, &'a Op)>,
    /// The process's own last ok write of the key.
    written: Option<&'a Op>,
}

/// Checks the FIFO workload (`FifoWrite`, `FifoRead`); other ops are
/// ignored. Anomalies are reported per read, at most one of each kind.
pub fn check(ops: &[Op]) -> Verdict {
    let mut writes: Writes = BTreeMap::new();
    let mut by_process: BTreeMap<u32, Vec<&Op>> = BTreeMap::new();
    for op in ops {
        match op.call {
            Call::FifoWrite { key, value } => {
                if status(op) != Status::Fail {
                    writes.entry((key, value)).or_default().push(op);
                }
                by_process.entry(op.process).or_default().push(op);
            }
            Call::FifoRead { .. } => by_process.entry(op.process).or_default().push(op),
            _ => {}
        }
    }

    let mut anomalies = Vec::new();
    for (process, mut own) in by_process {
        own.sort_by_key(|op| (op.invoke_ns, op.id));
        let mut seen: BTreeMap<u32, Seen> = BTreeMap::new();
        for op in own {
            if let Call::FifoWrite { key, .. } = op.call {
                if status(op) == Status::Ok {
                    seen.entry(key).or_default().written = Some(op);
                }
                continue;
            }
            let Some((key, value, zxid)) = read_of(op) else {
                continue;
            };
            let s = seen.entry(key).or_default();
            if let Some(a) = phantom(&writes, op, key, value) {
                anomalies.push(a);
            }
            if let Some(a) = backwards(&writes, s, op, key, value, zxid, process) {
                anomalies.push(a);
            }
            if let Some(w) = s.written {
                let stale = match value {
                    None => true,
                    Some(v) => superseded(&writes, key, v, w.invoke_ns),
                };
                if stale {
                    anomalies.push(Anomaly::new(
                        "stale-read",
                        format!(
                            "process {process} read key {key} as {value:?} (op {}) after its own \
                             ok write (op {}) had replaced that",
                            op.id, w.id
                        ),
                        vec![w.id, op.id],
                    ));
                }
            }
            if s.newest.is_none_or(|(z, _)| zxid > z) {
                s.newest = Some((zxid, op));
            }
            if let Some(v) = value {
                if s.highest.is_none_or(|(h, _)| v > h) {
                    s.highest = Some((v, op));
                }
            }
        }
    }
    Verdict::from_anomalies(anomalies)
}

/// A `phantom-read` if `read` returned a value never (or not yet) written.
fn phantom(writes: &Writes, read: &Op, key: u32, value: Option<i64>) -> Option<Anomaly> {
    let v = value?;
    let done = read.complete_ns?;
    let Some(ws) = writes.get(&(key, v)) else {
        return Some(Anomaly::new(
            "phantom-read",
            format!(
                "read (op {}) of key {key} returned {v}, which no write attempted",
                read.id
            ),
            vec![read.id],
        ));
    };
    if ws.iter().all(|w| w.invoke_ns > done) {
        let mut ids = vec![read.id];
        ids.extend(ws.iter().map(|w| w.id));
        return Some(Anomaly::new(
            "phantom-read",
            format!(
                "read (op {}) of key {key} returned {v} before it was written",
                read.id
            ),
            ids,
        ));
    }
    None
}

/// A `non-monotonic-read` if `read` went back in time relative to what its
/// process had already seen of `key`.
fn backwards(
    writes: &Writes,
    seen: &Seen,
    read: &Op,
    key: u32,
    value: Option<i64>,
    zxid: i64,
    process: u32,
) -> Option<Anomaly> {
    if let Some((z, earlier)) = seen.newest {
        if zxid < z {
            return Some(Anomaly::new(
                "non-monotonic-read",
                format!(
                    "process {process} read key {key} at mzxid {zxid} (op {}) after reading it \
                     at mzxid {z} (op {})",
                    read.id, earlier.id
                ),
                vec![earlier.id, read.id],
            ));
        }
    }
    let (h, earlier) = seen.highest?;
    let older = match value {
        // Keys are never deleted: absent after present is going back.
        None => true,
        // Only if every write of the value read was done before the value
        // already seen was even written.
        Some(v) => {
            let first = writes.get(&(key, h))?.iter().map(|w| w.invoke_ns).min()?;
            v != h && superseded(writes, key, v, first)
        }
    };
    older.then(|| {
        Anomaly::new(
            "non-monotonic-read",
            format!(
                "process {process} read key {key} as {value:?} (op {}) after reading {h} \
                 (op {}), which was written later",
                read.id, earlier.id
            ),
            vec![earlier.id, read.id],
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nemesis::checker::test_ops::{fail, first_ops, kinds, ok, op, unknown};

    /// Process 1's write of `value` to its key 1, over `[at, at + 5]`.
    fn write(id: u64, at: u64, value: i64, outcome: Outcome) -> Op {
        let call = Call::FifoWrite { key: 1, value };
        op(id, 1, at, Some(at + 5), call, outcome)
    }

    /// `process`'s ok read of key 1, over `[at, at + 5]`.
    fn read(id: u64, process: u32, at: u64, value: Option<i64>, zxid: i64) -> Op {
        let got = ok(Value::Versioned { value, zxid });
        let call = Call::FifoRead { key: 1 };
        op(id, process, at, Some(at + 5), call, got)
    }

    #[test]
    fn lower_zxid_after_higher_is_non_monotonic() {
        let h = [
            write(0, 0, 1, Outcome::ok()),
            write(1, 10, 2, Outcome::ok()),
            read(2, 2, 20, Some(2), 200),
            read(3, 2, 30, Some(1), 100),
        ];
        let v = check(&h);
        assert_eq!(kinds(&v), ["non-monotonic-read"]);
        assert_eq!(first_ops(&v), [2, 3]);
        // Absent after present goes back too.
        let h = [
            write(0, 0, 1, Outcome::ok()),
            read(1, 2, 20, Some(1), 100),
            read(2, 2, 30, None, 0),
        ];
        assert_eq!(kinds(&check(&h)), ["non-monotonic-read"]);
    }

    #[test]
    fn different_readers_may_see_different_ages() {
        // No linearizability across sessions: a lagging follower is fine.
        let h = [
            write(0, 0, 1, Outcome::ok()),
            write(1, 10, 2, Outcome::ok()),
            read(2, 2, 20, Some(2), 200),
            read(3, 3, 30, Some(1), 100),
        ];
        assert_eq!(check(&h), Verdict::Valid);
    }

    #[test]
    fn writes_seen_out_of_order_are_non_monotonic() {
        // mzxid went up but the value went back: 1 was applied after 2.
        let h = [
            write(0, 0, 1, Outcome::ok()),
            write(1, 10, 2, Outcome::ok()),
            read(2, 2, 20, Some(2), 200),
            read(3, 2, 30, Some(1), 300),
        ];
        assert_eq!(kinds(&check(&h)), ["non-monotonic-read"]);
    }

    #[test]
    fn an_unknown_write_landing_late_is_valid() {
        let h = [
            write(0, 0, 1, unknown()),
            write(1, 10, 2, Outcome::ok()),
            read(2, 2, 20, Some(2), 200),
            read(3, 2, 30, Some(1), 300),
        ];
        assert_eq!(check(&h), Verdict::Valid);
    }

    #[test]
    fn stale_read_of_own_write() {
        let h = [
            write(0, 0, 1, Outcome::ok()),
            write(1, 10, 2, Outcome::ok()),
            read(2, 1, 20, Some(1), 100),
        ];
        let v = check(&h);
        assert_eq!(kinds(&v), ["stale-read"]);
        assert_eq!(first_ops(&v), [1, 2]);
        let h = [write(0, 0, 1, Outcome::ok()), read(1, 1, 20, None, 0)];
        assert_eq!(kinds(&check(&h)), ["stale-read"]);
    }

    #[test]
    fn older_value_is_fine_for_others_and_after_unknown_writes() {
        // Another session need not see the write yet.
        let h = [
            write(0, 0, 1, Outcome::ok()),
            write(1, 10, 2, Outcome::ok()),
            read(2, 2, 20, Some(1), 100),
        ];
        assert_eq!(check(&h), Verdict::Valid);
        // The writer itself, when its newer write's outcome is unknown.
        let h = [
            write(0, 0, 1, Outcome::ok()),
            write(1, 10, 2, unknown()),
            read(2, 1, 20, Some(1), 100),
        ];
        assert_eq!(check(&h), Verdict::Valid);
        // Before writing, absent is fine.
        let h = [
            read(0, 1, 0, None, 0),
            write(1, 10, 1, Outcome::ok()),
            read(2, 1, 20, Some(1), 100),
        ];
        assert_eq!(check(&h), Verdict::Valid);
    }

    #[test]
    fn phantom_read() {
        let h = [write(0, 0, 1, Outcome::ok()), read(1, 2, 20, Some(9), 100)];
        assert_eq!(kinds(&check(&h)), ["phantom-read"]);
        // A failed write certainly did nothing.
        let h = [write(0, 0, 1, fail()), read(1, 2, 20, Some(1), 100)];
        assert_eq!(kinds(&check(&h)), ["phantom-read"]);
        // Nor can a read return a write not yet invoked.
        let h = [read(0, 2, 0, Some(1), 100), write(1, 10, 1, Outcome::ok())];
        let v = check(&h);
        assert_eq!(kinds(&v), ["phantom-read"]);
        assert_eq!(first_ops(&v), [0, 1]);
    }

    #[test]
    fn reading_an_unknown_or_concurrent_write_is_valid() {
        let h = [write(0, 0, 9, unknown()), read(1, 2, 20, Some(9), 100)];
        assert_eq!(check(&h), Verdict::Valid);
        let h = [read(0, 2, 0, Some(1), 100), write(1, 3, 1, Outcome::ok())];
        assert_eq!(check(&h), Verdict::Valid);
    }

    #[test]
    fn keys_are_judged_separately() {
        let other = ok(Value::Versioned {
            value: Some(5),
            zxid: 50,
        });
        let h = [
            write(0, 0, 1, Outcome::ok()),
            op(
                1,
                2,
                0,
                Some(5),
                Call::FifoWrite { key: 2, value: 5 },
                Outcome::ok(),
            ),
            read(2, 3, 10, Some(1), 100),
            op(3, 3, 20, Some(25), Call::FifoRead { key: 2 }, other),
        ];
        assert_eq!(check(&h), Verdict::Valid);
    }

    #[test]
    fn other_workloads_are_ignored() {
        let h = [op(0, 1, 0, Some(5), Call::Read { key: 1 }, Outcome::ok())];
        assert_eq!(check(&h), Verdict::Valid);
    }
}
