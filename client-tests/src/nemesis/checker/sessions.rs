//! The sessions checker: an ephemeral node exists exactly as long as the
//! session that owns it.
//!
//! Each process creates one ephemeral for its session; sessions are closed
//! by their clients or expired by the ensemble, and at the end, after the
//! faults healed and every session that could expire has, the harness lists
//! the owners of the ephemerals that remain. ZooKeeper promises that an
//! ephemeral lives as long as its session and no longer, across leader
//! changes and full restarts of the ensemble. The anomalies, judged against
//! the last ok `EphemeralList` `L`:
//!
//! - `lost-ephemeral`: a session whose create was ok (and done before `L`
//!   was invoked), that no close (ok or unknown) invoked before `L` completed
//!   may have ended and that never learned it expired, is missing from `L`.
//!   The sessions are alive, so their ephemerals must be there.
//! - `surviving-ephemeral`: a session in `L` whose ok close completed, or
//!   whose expiry was learned, before `L` was invoked. It is dead, so its
//!   ephemeral must be gone.
//! - `phantom-read`: a session in `L` that never attempted (ok or unknown,
//!   invoked before `L` completed) to create an ephemeral.
//!
//! A create of unknown outcome makes presence and absence both fine, as does
//! a close of unknown outcome or one concurrent with `L`.

use std::collections::{BTreeMap, BTreeSet};

use super::{status, Anomaly, Status, Verdict};
use crate::nemesis::history::{Call, Op, Outcome, Value};

/// What the history says about one session, relative to `L`.
#[derive(Default)]
struct Session<'a> {
    /// An ok create that completed before `L` was invoked.
    created: Option<&'a Op>,
    /// Some create (ok or unknown) invoked before `L` completed.
    attempted: bool,
    /// A close (ok or unknown) invoked before `L` completed: it may have
    /// ended the session before `L` read.
    maybe_closed: bool,
    /// An ok close, or a learned expiry, done before `L` was invoked.
    dead_by: Option<&'a Op>,
    /// Any learned expiry, whenever: the client learns it only after the
    /// ensemble expired the session, possibly long before, so even an expiry
    /// learned after `L` may excuse a missing ephemeral.
    expired: bool,
}

/// Checks the sessions workload (`EphemeralCreate`, `SessionClose`,
/// `SessionExpired`, `EphemeralList`); other ops are ignored. Without an ok
/// `EphemeralList` the verdict is `Unknown { reason: "no final list" }`.
pub fn check(ops: &[Op]) -> Verdict {
    let lists = ops
        .iter()
        .filter_map(|op| match (&op.call, &op.outcome, op.complete_ns) {
            (
                Call::EphemeralList,
                Outcome::Ok {
                    value: Value::Ints(ids),
                },
                Some(done),
            ) => Some((op, done, ids)),
            _ => None,
        });
    let Some((list, list_done, listed)) = lists.max_by_key(|(op, _, _)| (op.invoke_ns, op.id))
    else {
        return Verdict::Unknown {
            reason: "no final list".to_owned(),
        };
    };
    let listed: BTreeSet<i64> = listed.iter().copied().collect();

    let mut sessions: BTreeMap<i64, Session> = BTreeMap::new();
    for op in ops {
        let st = status(op);
        // Could it have taken effect before L read? Unknown ops may take
        // effect at any time after their invocation.
        let before_read = st != Status::Fail && op.invoke_ns < list_done;
        // Did it certainly take effect before L started?
        let before_list = st == Status::Ok && op.complete_ns.is_some_and(|c| c < list.invoke_ns);
        match &op.call {
            Call::EphemeralCreate { session } => {
                let s = sessions.entry(*session).or_default();
                s.attempted |= before_read;
                if before_list && s.created.is_none() {
                    s.created = Some(op);
                }
            }
            Call::SessionClose { session } => {
                let s = sessions.entry(*session).or_default();
                s.maybe_closed |= before_read;
                if before_list && s.dead_by.is_none() {
                    s.dead_by = Some(op);
                }
            }
            Call::SessionExpired { session } => {
                let s = sessions.entry(*session).or_default();
                s.expired |= st != Status::Fail;
                if before_list && s.dead_by.is_none() {
                    s.dead_by = Some(op);
                }
            }
            _ => {}
        }
    }

    let mut anomalies = Vec::new();
    for (id, s) in &sessions {
        let present = listed.contains(id);
        if let Some(create) = s.created {
            if !present && !s.maybe_closed && !s.expired {
                anomalies.push(Anomaly::new(
                    "lost-ephemeral",
                    format!(
                        "session {id} created its ephemeral (op {}) and was never closed \
                         nor expired, yet the final list (op {}) lacks it",
                        create.id, list.id
                    ),
                    vec![create.id, list.id],
                ));
            }
        }
        if let Some(end) = s.dead_by {
            if present {
                anomalies.push(Anomaly::new(
                    "surviving-ephemeral",
                    format!(
                        "session {id} ended (op {}) before the final list (op {}), \
                         which still has its ephemeral",
                        end.id, list.id
                    ),
                    vec![end.id, list.id],
                ));
            }
        }
    }
    for id in &listed {
        if !sessions.get(id).is_some_and(|s| s.attempted) {
            anomalies.push(Anomaly::new(
                "phantom-read",
                format!(
                    "the final list (op {}) has an ephemeral of session {id}, which never \
                     tried to create one",
                    list.id
                ),
                vec![list.id],
            ));
        }
    }
    Verdict::from_anomalies(anomalies)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nemesis::checker::test_ops::{fail, first_ops, kinds, ok, op, unknown};

    fn create(id: u64, session: i64, outcome: Outcome) -> Op {
        op(
            id,
            session as u32,
            0,
            Some(10),
            Call::EphemeralCreate { session },
            outcome,
        )
    }

    fn close(id: u64, session: i64, invoke: u64, complete: u64, outcome: Outcome) -> Op {
        op(
            id,
            session as u32,
            invoke,
            Some(complete),
            Call::SessionClose { session },
            outcome,
        )
    }

    fn expired(id: u64, session: i64, at: u64) -> Op {
        op(
            id,
            session as u32,
            at,
            Some(at),
            Call::SessionExpired { session },
            Outcome::ok(),
        )
    }

    /// The final list, invoked at 100 and done at 110.
    fn list(id: u64, owners: Vec<i64>) -> Op {
        let outcome = ok(Value::Ints(owners));
        op(id, 99, 100, Some(110), Call::EphemeralList, outcome)
    }

    #[test]
    fn lost_ephemeral() {
        let h = [
            create(0, 1, Outcome::ok()),
            create(1, 2, Outcome::ok()),
            list(2, vec![2]),
        ];
        let v = check(&h);
        assert_eq!(kinds(&v), ["lost-ephemeral"]);
        assert_eq!(first_ops(&v), [0, 2]);
    }

    #[test]
    fn missing_ephemeral_of_a_maybe_ended_session_is_valid() {
        // A close of unknown outcome may have happened.
        let h = [
            create(0, 1, Outcome::ok()),
            close(1, 1, 20, 30, unknown()),
            list(2, vec![]),
        ];
        assert_eq!(check(&h), Verdict::Valid);
        // A close concurrent with the list may have happened first.
        let h = [
            create(0, 1, Outcome::ok()),
            close(1, 1, 95, 120, Outcome::ok()),
            list(2, vec![]),
        ];
        assert_eq!(check(&h), Verdict::Valid);
        // The ensemble may have expired it before the list; the client only
        // learned so afterwards.
        let h = [
            create(0, 1, Outcome::ok()),
            list(1, vec![]),
            expired(2, 1, 200),
        ];
        assert_eq!(check(&h), Verdict::Valid);
        // A create of unknown outcome may not have happened.
        let h = [create(0, 1, unknown()), list(1, vec![])];
        assert_eq!(check(&h), Verdict::Valid);
    }

    #[test]
    fn surviving_ephemeral_after_close() {
        let h = [
            create(0, 1, Outcome::ok()),
            close(1, 1, 20, 30, Outcome::ok()),
            list(2, vec![1]),
        ];
        let v = check(&h);
        assert_eq!(kinds(&v), ["surviving-ephemeral"]);
        assert_eq!(first_ops(&v), [1, 2]);
    }

    #[test]
    fn surviving_ephemeral_after_expiry() {
        let h = [
            create(0, 1, Outcome::ok()),
            expired(1, 1, 50),
            list(2, vec![1]),
        ];
        assert_eq!(kinds(&check(&h)), ["surviving-ephemeral"]);
    }

    #[test]
    fn present_ephemeral_of_a_maybe_ended_session_is_valid() {
        // The close completed only after the list started reading.
        let h = [
            create(0, 1, Outcome::ok()),
            close(1, 1, 90, 105, Outcome::ok()),
            list(2, vec![1]),
        ];
        assert_eq!(check(&h), Verdict::Valid);
        // The close may not have happened.
        let h = [
            create(0, 1, Outcome::ok()),
            close(1, 1, 20, 30, unknown()),
            list(2, vec![1]),
        ];
        assert_eq!(check(&h), Verdict::Valid);
        // Closed (as the harness does) after the list.
        let h = [
            create(0, 1, Outcome::ok()),
            list(1, vec![1]),
            close(2, 1, 200, 210, Outcome::ok()),
        ];
        assert_eq!(check(&h), Verdict::Valid);
    }

    #[test]
    fn phantom_read() {
        let h = [create(0, 1, Outcome::ok()), list(1, vec![1, 9])];
        assert_eq!(kinds(&check(&h)), ["phantom-read"]);
        // A failed create certainly made nothing.
        let h = [create(0, 9, fail()), list(1, vec![9])];
        assert_eq!(kinds(&check(&h)), ["phantom-read"]);
    }

    #[test]
    fn ephemeral_of_an_unknown_create_is_valid() {
        let h = [create(0, 9, unknown()), list(1, vec![9])];
        assert_eq!(check(&h), Verdict::Valid);
    }

    #[test]
    fn the_last_ok_list_is_judged() {
        // The earlier list lacks session 1; the final one has it.
        let early = op(
            1,
            98,
            50,
            Some(60),
            Call::EphemeralList,
            ok(Value::Ints(vec![])),
        );
        let h = [create(0, 1, Outcome::ok()), early.clone(), list(2, vec![1])];
        assert_eq!(check(&h), Verdict::Valid);
        let h = [
            create(0, 1, Outcome::ok()),
            list(2, vec![1]),
            Op {
                id: 3,
                invoke_ns: 150,
                complete_ns: Some(160),
                ..early
            },
        ];
        assert_eq!(kinds(&check(&h)), ["lost-ephemeral"]);
    }

    #[test]
    fn no_list_is_unknown() {
        let h = [
            create(0, 1, Outcome::ok()),
            op(1, 99, 100, Some(110), Call::EphemeralList, unknown()),
        ];
        let reason = "no final list".to_owned();
        assert_eq!(check(&h), Verdict::Unknown { reason });
    }
}
