//! Register checker: is each key's read/write/CAS history linearizable?
//!
//! Every key is an independent register that starts absent (`None`). A
//! history is linearizable when each operation that took effect can be
//! given one instant inside its interval (invoke to completion) such that a
//! sequential register, taking them in that order, explains every result.
//! Linearizability is local, so a history is linearizable iff each key's
//! part is: keys are checked one at a time, which keeps every search small.
//!
//! Outcomes: ok ops must be placed; failed ops and unknown reads are
//! dropped (no effect, or no information); unknown writes and CASes may
//! take effect at any instant after their invoke or never, so they are
//! calls whose return lies at +infinity and which need not be placed.
//!
//! Two cheap rules run first, because they name the usual bugs precisely
//! and hold whatever the search would find: a read of a value no write (ok
//! or unknown) ever wrote is a `phantom-read`; a read whose value's writers
//! all completed before some ok write W2 was invoked, W2 itself completing
//! before the read was invoked, is a `stale-read` (W2 certainly overwrote
//! the value, and nothing could have written it again). Those reads are set
//! aside and the rest goes to the Wing–Gong/Lowe search (a linked list of
//! call and return events, undo on backtrack, memoized on the set of placed
//! ops and the register value); failing it is `nonlinearizable`. The search
//! is bounded by a [`Budget`]: past it the verdict is `Unknown`, never a hang.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

use super::{capped, Anomaly, Verdict};
use crate::nemesis::history::{Call, Op, Outcome, Value};
use wgl::{wgl, Search};

mod wgl;

#[cfg(test)]
mod tests;

/// Bounds on the linearizability search.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    /// Most memoized search states per key before the verdict is `Unknown`.
    pub max_states: usize,
    /// Longest the whole check may run before the verdict is `Unknown`.
    pub max_time: Duration,
}

impl Default for Budget {
    /// 2,000,000 states and 10 s: far more than a realistic valid history
    /// needs (tens of thousands), and a few hundred MB at worst.
    fn default() -> Budget {
        Budget {
            max_states: 2_000_000,
            max_time: Duration::from_secs(10),
        }
    }
}

/// Anomalies of one kind listed per key: a report needs examples, not all.
const REPORT_CAP: usize = 20;
/// Ops listed in a `nonlinearizable` anomaly besides the stuck one.
const CONTEXT_CAP: usize = 20;

/// A register's value: `None` while never written.
type Reg = Option<i64>;

#[derive(Clone, Copy, Debug)]
enum Kind {
    Read(Reg),
    Write(i64),
    Cas(i64, i64),
}

/// One op on one key; `complete` is `None` for an unknown write or CAS.
#[derive(Clone, Copy, Debug)]
struct KOp {
    id: u64,
    invoke: u64,
    complete: Option<u64>,
    kind: Kind,
}

impl KOp {
    fn written(&self) -> Option<i64> {
        match self.kind {
            Kind::Write(v) | Kind::Cas(_, v) => Some(v),
            Kind::Read(_) => None,
        }
    }

    /// The value this op shows it saw, if any: what a read returned, what a
    /// CAS required.
    fn observes(&self) -> Option<Reg> {
        match self.kind {
            Kind::Read(r) => Some(r),
            Kind::Cas(f, _) => Some(Some(f)),
            Kind::Write(_) => None,
        }
    }

    fn describe(&self) -> String {
        let unknown = if self.complete.is_some() {
            ""
        } else {
            " (unknown)"
        };
        match self.kind {
            Kind::Read(r) => format!("read {} -> {}", self.id, show(r)),
            Kind::Write(v) => format!("write {} of {v}{unknown}", self.id),
            Kind::Cas(f, t) => format!("cas {} {f}->{t}{unknown}", self.id),
        }
    }
}

fn show(r: Reg) -> String {
    r.map_or_else(|| "nothing".to_owned(), |v| v.to_string())
}

/// The sequential register: the value after `kind`, or `None` if `kind`
/// cannot happen in `state`.
fn step(state: Reg, kind: Kind) -> Option<Reg> {
    match kind {
        Kind::Read(r) => (r == state).then_some(state),
        Kind::Write(v) => Some(Some(v)),
        Kind::Cas(f, t) => (state == Some(f)).then_some(Some(t)),
    }
}

/// Checks every key of the register workload (`Read`, `Write`, `Cas`;
/// other calls are ignored) for linearizability within `budget`. Invalid
/// if any key shows an anomaly; else Unknown if any key ran out of budget.
pub fn check(ops: &[Op], budget: Budget) -> Verdict {
    let deadline = Instant::now() + budget.max_time;
    let (keys, failed, mut anomalies) = collect(ops);
    let mut undecided = Vec::new();
    for (key, kops) in keys {
        let (found, over) = check_key(key, kops, &failed, budget.max_states, deadline);
        anomalies.extend(found);
        undecided.extend(over.map(|reason| format!("key {key}: {reason}")));
    }
    if anomalies.is_empty() && !undecided.is_empty() {
        return Verdict::Unknown {
            reason: undecided.join("; "),
        };
    }
    Verdict::from_anomalies(anomalies)
}

/// Failed writers per (key, value): a read of such a value is phantom, and
/// naming the failed op tells a person where the value came from.
type Failed = HashMap<(u32, i64), Vec<u64>>;

/// The ops that matter, per key; the failed writes; malformed reads.
fn collect(ops: &[Op]) -> (BTreeMap<u32, Vec<KOp>>, Failed, Vec<Anomaly>) {
    let (mut keys, mut failed, mut malformed) = (BTreeMap::new(), Failed::new(), Vec::new());
    for op in ops {
        let (key, kind) = match op.call {
            Call::Read { key } => (key, Kind::Read(None)),
            Call::Write { key, value } => (key, Kind::Write(value)),
            Call::Cas { key, from, to } => (key, Kind::Cas(from, to)),
            _ => continue,
        };
        let value = match &op.outcome {
            Outcome::Ok { value } => value,
            Outcome::Fail { .. } => {
                if let Kind::Write(v) | Kind::Cas(_, v) = kind {
                    failed.entry((key, v)).or_insert_with(Vec::new).push(op.id);
                }
                continue;
            }
            Outcome::Unknown { .. } => &Value::None,
        };
        // No completion time makes even an ok op unknown.
        let complete = op.complete_ns.filter(|_| op.outcome.is_ok());
        let kind = match (kind, value) {
            (Kind::Read(_), _) if complete.is_none() => continue,
            (Kind::Read(_), Value::None) => Kind::Read(None),
            (Kind::Read(_), Value::Int(v)) => Kind::Read(Some(*v)),
            (Kind::Read(_), other) => {
                let detail = format!("key {key}: read {} returned {other:?}", op.id);
                malformed.push(Anomaly::new("malformed-read", detail, vec![op.id]));
                continue;
            }
            (kind, _) => kind,
        };
        let (id, invoke) = (op.id, op.invoke_ns);
        let complete = complete.map(|c| c.max(invoke));
        keys.entry(key).or_insert_with(Vec::new).push(KOp {
            id,
            invoke,
            complete,
            kind,
        });
    }
    (keys, failed, malformed)
}

/// One key: the cheap rules, then the search. Returns the anomalies found
/// and, if the search ran out of budget, why.
fn check_key(
    key: u32,
    mut ops: Vec<KOp>,
    failed: &Failed,
    max_states: usize,
    deadline: Instant,
) -> (Vec<Anomaly>, Option<String>) {
    ops.sort_by_key(|o| (o.invoke, o.id));
    let written: HashSet<i64> = ops.iter().filter_map(KOp::written).collect();
    // Latest completion among each value's writers; an unknown writer may
    // land any time (MAX), and the initial `None` was "written" before 0.
    let mut last_writer: HashMap<Reg, i128> = HashMap::from([(None, -1)]);
    for o in &ops {
        if let Some(v) = o.written() {
            let c = o.complete.map_or(i128::MAX, i128::from);
            let e = last_writer.entry(Some(v)).or_insert(c);
            *e = (*e).max(c);
        }
    }
    // Ok writes by invoke, with the earliest completion in each suffix: the
    // stale rule asks "an ok write invoked after M, completed before T?".
    let oks: Vec<&KOp> = ops
        .iter()
        .filter(|o| o.written().is_some() && o.complete.is_some())
        .collect();
    let mut suffix = vec![(u64::MAX, 0, 0); oks.len() + 1];
    for (i, w) in oks.iter().enumerate().rev() {
        let this = (
            w.complete.unwrap_or(u64::MAX),
            w.id,
            w.written().unwrap_or(0),
        );
        suffix[i] = suffix[i + 1].min(this);
    }
    let (mut phantoms, mut stales, mut keep) = (Vec::new(), Vec::new(), Vec::new());
    for o in &ops {
        let Kind::Read(r) = o.kind else {
            keep.push(*o);
            continue;
        };
        if let Some(v) = r.filter(|v| !written.contains(v)) {
            let ids = [o.id]
                .into_iter()
                .chain(failed.get(&(key, v)).into_iter().flatten().copied());
            let detail = format!(
                "key {key}: read {} returned {v}, which no write that took effect wrote",
                o.id
            );
            phantoms.push(Anomaly::new("phantom-read", detail, ids.take(6).collect()));
            continue;
        }
        let m = last_writer.get(&r).copied().unwrap_or(i128::MAX);
        let (c, w2, v2) = suffix[oks.partition_point(|w| i128::from(w.invoke) <= m)];
        if c < o.invoke {
            let (id, r) = (o.id, show(r));
            let detail = format!(
                "key {key}: read {id} returned {r}, but write {w2} of {v2} completed before the read \
                 was invoked, and after every write of {r} had completed"
            );
            stales.push(Anomaly::new("stale-read", detail, vec![w2, id]));
            continue;
        }
        keep.push(*o);
    }
    let mut out = capped(phantoms, REPORT_CAP, "phantom reads");
    out.extend(capped(stales, REPORT_CAP, "stale reads"));
    match wgl(prune(keep), max_states, deadline) {
        (_, Search::Linearizable) => (out, None),
        (_, Search::OverBudget(why)) => (out, Some(why)),
        (keep, Search::Stuck(b)) => {
            out.push(nonlinearizable(key, &keep, b));
            (out, None)
        }
    }
}

/// Drops each unknown write or CAS of a value nothing observes (no read
/// returns it, no CAS expects it): it changes nothing any op can see, so
/// dropping it cannot change the answer, and it spares the search. Repeats,
/// since dropping a CAS may leave its `from` unobserved.
fn prune(mut ops: Vec<KOp>) -> Vec<KOp> {
    loop {
        let observed: HashSet<Reg> = ops.iter().filter_map(KOp::observes).collect();
        let before = ops.len();
        ops.retain(|o| {
            o.complete.is_some() || o.written().is_some_and(|v| observed.contains(&Some(v)))
        });
        if ops.len() == before {
            return ops;
        }
    }
}

/// The anomaly for op `b`, whose return the search reached furthest in the
/// history without being able to place it: `b`, the last write completed
/// before it (what it should have seen), and the ops concurrent with it.
fn nonlinearizable(key: u32, ops: &[KOp], b: usize) -> Anomaly {
    let b = ops[b];
    let end = b.complete.unwrap_or(u64::MAX);
    let before = |o: &&KOp| o.written().is_some() && o.complete.is_some_and(|c| c < b.invoke);
    let prior = ops.iter().filter(before).max_by_key(|o| o.complete);
    let overlaps =
        |o: &&KOp| o.id != b.id && o.invoke <= end && o.complete.is_none_or(|c| c >= b.invoke);
    let mut concurrent: Vec<&KOp> = ops.iter().filter(overlaps).collect();
    // Definite ops first: long-pending unknown ones are rarely the story.
    concurrent.sort_by_key(|o| (o.complete.is_none(), o.invoke));
    let listed = concurrent.iter().take(CONTEXT_CAP);
    let ids = [b.id]
        .into_iter()
        .chain(prior.map(|o| o.id))
        .chain(listed.map(|o| o.id));
    let detail = format!(
        "key {key}: no order of the ops explains {}; listed with the last write completed before it \
         and the ops concurrent with it",
        b.describe()
    );
    Anomaly::new("nonlinearizable", detail, ids.collect())
}
