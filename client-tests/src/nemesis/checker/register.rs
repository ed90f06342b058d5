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

use super::{Anomaly, Verdict};
use crate::nemesis::history::{Call, Op, Outcome, Value};

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
/// Memo words per key (256 MiB): states vary in size, so count words too.
const MAX_MEMO_WORDS: usize = 1 << 25;
const NIL: u32 = u32::MAX;

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
    let mut out = capped(phantoms, "phantom reads");
    out.extend(capped(stales, "stale reads"));
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

/// The first `REPORT_CAP` anomalies, the last saying how many were left off.
fn capped(mut all: Vec<Anomaly>, what: &str) -> Vec<Anomaly> {
    let more = all.len().saturating_sub(REPORT_CAP);
    all.truncate(REPORT_CAP);
    if let (Some(last), true) = (all.last_mut(), more > 0) {
        last.detail += &format!(" ({more} more {what} not listed)");
    }
    all
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

/// What the search concluded.
enum Search {
    Linearizable,
    /// Not linearizable; the index of the op the search could not place.
    Stuck(usize),
    OverBudget(String),
}

/// The set of placed ops, kept so its memo key is small: ok ops (which
/// must all be placed) in one bitset, every one below `low` placed, so only
/// the words from there on (a window about as wide as the concurrency) go
/// into the key; unknown ops (which may be placed) in another.
struct Placed {
    /// Per op: whether it is unknown, and its bit in that op's bitset.
    slot: Vec<(bool, usize)>,
    def: Vec<u64>,
    unk: Vec<u64>,
    ndef: usize,
    total: usize,
    low: usize,
}

impl Placed {
    fn new(ops: &[KOp]) -> Placed {
        let mut count = [0usize; 2];
        let mut slot = Vec::with_capacity(ops.len());
        for o in ops {
            let unknown = o.complete.is_none();
            slot.push((unknown, count[usize::from(unknown)]));
            count[usize::from(unknown)] += 1;
        }
        let (def, unk) = (
            vec![0; count[0].div_ceil(64)],
            vec![0; count[1].div_ceil(64)],
        );
        Placed {
            slot,
            def,
            unk,
            ndef: 0,
            total: count[0],
            low: 0,
        }
    }

    fn set(&mut self, op: usize) {
        let (unknown, i) = self.slot[op];
        if unknown {
            self.unk[i / 64] |= 1 << (i % 64);
            return;
        }
        self.def[i / 64] |= 1 << (i % 64);
        self.ndef += 1;
        while self.low < self.total {
            let unset = !self.def[self.low / 64] >> (self.low % 64);
            if unset != 0 {
                self.low += unset.trailing_zeros() as usize;
                break;
            }
            self.low = (self.low / 64 + 1) * 64;
        }
        self.low = self.low.min(self.total);
    }

    fn unset(&mut self, op: usize) {
        let (unknown, i) = self.slot[op];
        if unknown {
            self.unk[i / 64] &= !(1 << (i % 64));
        } else {
            self.def[i / 64] &= !(1 << (i % 64));
            self.ndef -= 1;
            self.low = self.low.min(i);
        }
    }

    /// The memo key of (this set, `state`, `fresh`) into `buf`; `state` is
    /// `None` for a value nothing can observe (all such are alike).
    fn key(&self, state: Option<Reg>, fresh: bool, buf: &mut Vec<u64>) {
        buf.clear();
        let tag = state.map_or(4, |r| u64::from(r.is_some()));
        buf.extend([
            tag | u64::from(fresh) << 1,
            state.flatten().unwrap_or(0) as u64,
        ]);
        let w0 = self.low / 64;
        // Bits below w0 * 64 are all set; the words from w0 hold the rest.
        let mut left = self.ndef - w0 * 64;
        buf.extend([w0 as u64, 0]);
        let (at, mut w) = (buf.len() - 1, w0);
        while left > 0 {
            buf.push(self.def[w]);
            left -= self.def[w].count_ones() as usize;
            w += 1;
        }
        buf[at] = (w - w0) as u64;
        let used = self.unk.iter().rposition(|&x| x != 0).map_or(0, |p| p + 1);
        buf.extend_from_slice(&self.unk[..used]);
    }
}

/// Calls and returns in time order, calls first at equal times (ops that
/// touch at an instant overlap), unknown ops returning after everything;
/// doubly linked, so placing an op lifts its two events out and undoing
/// puts them back (in exactly the reverse order). Node 0 is the head.
struct Events {
    /// Node k + 1: (time, is a return, op).
    ev: Vec<(u64, bool, usize)>,
    next: Vec<u32>,
    prev: Vec<u32>,
    call: Vec<u32>,
    ret: Vec<u32>,
}

impl Events {
    fn new(ops: &[KOp]) -> Events {
        let mut ev = Vec::with_capacity(2 * ops.len());
        for (i, o) in ops.iter().enumerate() {
            ev.extend([
                (o.invoke, false, i),
                (o.complete.unwrap_or(u64::MAX), true, i),
            ]);
        }
        ev.sort_unstable();
        let n = ev.len() as u32;
        let mut next: Vec<u32> = (1..=n + 1).collect();
        next[n as usize] = NIL;
        let prev = (0..=n).map(|k| k.wrapping_sub(1)).collect();
        let (mut call, mut ret) = (vec![0; ops.len()], vec![0; ops.len()]);
        for (k, &(_, is_ret, i)) in ev.iter().enumerate() {
            let side = if is_ret { &mut ret } else { &mut call };
            side[i] = k as u32 + 1;
        }
        Events {
            ev,
            next,
            prev,
            call,
            ret,
        }
    }

    fn at(&self, node: u32) -> (usize, bool) {
        let (_, is_ret, op) = self.ev[node as usize - 1];
        (op, is_ret)
    }

    fn lift(&mut self, op: usize) {
        for x in [self.call[op], self.ret[op]] {
            let (p, nx) = (self.prev[x as usize], self.next[x as usize]);
            self.next[p as usize] = nx;
            if nx != NIL {
                self.prev[nx as usize] = p;
            }
        }
    }

    fn unlift(&mut self, op: usize) {
        for x in [self.ret[op], self.call[op]] {
            let (p, nx) = (self.prev[x as usize], self.next[x as usize]);
            self.next[p as usize] = x;
            if nx != NIL {
                self.prev[nx as usize] = x;
            }
        }
    }

    /// The calls before the first return: the ops that may be placed next.
    fn window(&self) -> impl Iterator<Item = u32> + '_ {
        std::iter::successors(Some(self.next[0]), |&x| Some(self.next[x as usize]))
            .take_while(|&x| x != NIL && !self.at(x).1)
    }
}

/// A placement the search may undo: the op, what held before it, whether
/// it was the last option worth trying there, and how many blind writes
/// rode along with it (on top of the riders stack).
struct Frame {
    op: usize,
    state: Reg,
    fresh: bool,
    last: bool,
    riders: usize,
}

/// The Wing–Gong/Lowe search over one key's ops, with three reductions
/// that keep it tractable under high concurrency, each justified by an
/// exchange argument (any order that works can be rearranged to obey it):
///
/// - a pending read that the current value explains is placed at once, as
///   the only choice: reads change nothing, and its predecessors are placed;
/// - a blind write (an ok write of a value nothing observes) is never a
///   choice of its own: a write placed right after it hides it, so it rides
///   along with the next write placed while it is pending, or is placed
///   when its return comes, as the last option there;
/// - an unknown write, once placed, must be seen next (by a read or CAS):
///   one overwritten unseen might as well not have happened.
///
/// Returns the ops (sorted by invoke) with the verdict, which indexes them.
fn wgl(mut ops: Vec<KOp>, max_states: usize, deadline: Instant) -> (Vec<KOp>, Search) {
    ops.sort_by_key(|o| (o.invoke, o.id));
    let (mut placed, mut events) = (Placed::new(&ops), Events::new(&ops));
    let observed: HashSet<Reg> = ops.iter().filter_map(KOp::observes).collect();
    let blind = |o: &KOp| {
        o.complete.is_some() && matches!(o.kind, Kind::Write(v) if !observed.contains(&Some(v)))
    };
    let blind: Vec<bool> = ops.iter().map(blind).collect();
    let mut memo: HashSet<Box<[u64]>> = HashSet::new();
    let (mut words, mut buf, mut stack, mut riders) =
        (0, Vec::new(), Vec::<Frame>::new(), Vec::new());
    let (mut state, mut fresh, mut node, mut furthest) = (None, false, events.next[0], None);
    let (mut steps, mut scan_reads) = (0u64, true);
    let verdict = loop {
        if placed.ndef == placed.total {
            break Search::Linearizable;
        }
        steps += 1;
        if steps % 4096 == 0 && Instant::now() > deadline {
            break Search::OverBudget(format!("out of time after {} search states", memo.len()));
        }
        let mut last = false;
        if std::mem::take(&mut scan_reads) {
            let explained =
                |&x: &u32| matches!(ops[events.at(x).0].kind, Kind::Read(r) if r == state);
            if let Some(x) = events.window().find(explained) {
                (node, last) = (x, true);
            }
        }
        let (i, ret) = if node == NIL {
            (usize::MAX, true)
        } else {
            events.at(node)
        };
        if !ret && blind[i] {
            node = events.next[node as usize];
            continue;
        }
        if node != NIL && (!ret || blind[i]) {
            last |= ret;
            let (kind, is_write) = (ops[i].kind, matches!(ops[i].kind, Kind::Write(_)));
            if let Some(ns) = step(state, kind).filter(|_| !(fresh && is_write)) {
                let now_fresh = ops[i].complete.is_none() && ops[i].written().is_some();
                let base = riders.len();
                if is_write {
                    let pending = events.window().map(|x| events.at(x).0);
                    riders.extend(pending.filter(|&j| blind[j] && j != i));
                }
                placed.set(i);
                riders[base..].iter().for_each(|&j| placed.set(j));
                placed.key(observed.contains(&ns).then_some(ns), now_fresh, &mut buf);
                if !memo.contains(buf.as_slice()) {
                    if memo.len() >= max_states || words >= MAX_MEMO_WORDS {
                        break Search::OverBudget(format!("search exceeded {} states", memo.len()));
                    }
                    words += buf.len();
                    memo.insert(buf.as_slice().into());
                    stack.push(Frame {
                        op: i,
                        state,
                        fresh,
                        last,
                        riders: riders.len() - base,
                    });
                    events.lift(i);
                    riders[base..].iter().for_each(|&j| events.lift(j));
                    (state, fresh, scan_reads, node) = (ns, now_fresh, true, events.next[0]);
                    continue;
                }
                placed.unset(i);
                riders.drain(base..).for_each(|j| placed.unset(j));
            }
            if !last {
                node = events.next[node as usize];
                continue;
            }
        } else if node != NIL && furthest.is_none_or(|(f, _)| node > f) {
            // A return whose op is not placed: this order fails here.
            furthest = Some((node, i));
        }
        // Undo back to the latest placement that left options untried; with
        // none left, `furthest` is set (an ok op is left, and its return
        // stopped the search).
        let Some(f) = undo(&mut stack, &mut riders, &mut events, &mut placed) else {
            break furthest.map_or(
                Search::OverBudget("search lost its place".into()),
                |(_, i)| Search::Stuck(i),
            );
        };
        (state, fresh, node) = (f.state, f.fresh, events.next[events.call[f.op] as usize]);
    };
    (ops, verdict)
}

/// Pops placements, riders included, down to and including the latest that
/// left options untried, and returns it; `None` when there is none.
fn undo(
    stack: &mut Vec<Frame>,
    riders: &mut Vec<usize>,
    events: &mut Events,
    placed: &mut Placed,
) -> Option<Frame> {
    while let Some(f) = stack.pop() {
        for j in riders.drain(riders.len() - f.riders..).rev() {
            events.unlift(j);
            placed.unset(j);
        }
        events.unlift(f.op);
        placed.unset(f.op);
        if !f.last {
            return Some(f);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ops (ids in order, one process each) from `(invoke, complete, what)`:
    /// `w5` writes 5, `r5` reads 5, `r_` reads nothing, `c5:6` is a CAS;
    /// `@1` picks key 1 (default 0); a `?` suffix makes it unknown (no
    /// completion), `!` failed.
    fn hist(spec: &[(u64, u64, &str)]) -> Vec<Op> {
        let num = |s: &str| s.parse::<i64>().ok();
        spec.iter()
            .enumerate()
            .map(|(id, &(invoke, complete, what))| {
                let what = what.trim_end_matches(['?', '!']);
                let (what, key) = what
                    .split_once('@')
                    .map_or((what, 0), |(w, k)| (w, k.parse().unwrap()));
                let (f, arg) = what.split_at(1);
                let (call, value) = match f {
                    "w" => (
                        Call::Write {
                            key,
                            value: num(arg).unwrap(),
                        },
                        Value::None,
                    ),
                    "r" => (Call::Read { key }, num(arg).map_or(Value::None, Value::Int)),
                    _ => {
                        let (from, to) = arg.split_once(':').unwrap();
                        (
                            Call::Cas {
                                key,
                                from: num(from).unwrap(),
                                to: num(to).unwrap(),
                            },
                            Value::None,
                        )
                    }
                };
                let (tail, mut complete_ns) = (spec[id].2.chars().last(), Some(complete));
                let outcome = match tail {
                    Some('?') => Outcome::Unknown {
                        error: "timeout".into(),
                    },
                    Some('!') => Outcome::Fail {
                        error: "bad version".into(),
                    },
                    _ => Outcome::Ok { value },
                };
                if tail == Some('?') {
                    complete_ns = None;
                }
                let (id, process) = (id as u64, id as u32);
                Op {
                    id,
                    process,
                    invoke_ns: invoke,
                    complete_ns,
                    call,
                    outcome,
                }
            })
            .collect()
    }

    fn run(spec: &[(u64, u64, &str)]) -> Verdict {
        check(&hist(spec), Budget::default())
    }

    /// The kinds of the anomalies, with the ops of the first.
    fn kinds(v: &Verdict) -> (Vec<&str>, Vec<u64>) {
        match v {
            Verdict::Invalid { anomalies } => (
                anomalies.iter().map(|a| a.kind.as_str()).collect(),
                anomalies[0].ops.clone(),
            ),
            _ => (Vec::new(), Vec::new()),
        }
    }

    #[test]
    fn concurrent_reads_may_see_either_value() {
        let h = [
            (0, 10, "w1"),
            (20, 50, "w2"),
            (25, 30, "r1"),
            (30, 45, "r2"),
            (35, 40, "r1"),
        ];
        let mut h = h.to_vec();
        h.extend([(60, 70, "r2"), (80, 90, "c2:3"), (95, 99, "r3")]);
        assert_eq!(run(&h), Verdict::Valid);
        // But not the old value after the new one was read and completed.
        h.push((100, 110, "r2"));
        assert!(run(&h).is_invalid());
    }

    #[test]
    fn stale_read_is_named() {
        let v = run(&[(0, 10, "w1"), (20, 30, "r_")]);
        assert_eq!(kinds(&v), (vec!["stale-read"], vec![0, 1]));
    }

    #[test]
    fn lost_write_read_as_previous_value_is_stale() {
        let v = run(&[
            (0, 10, "w1"),
            (20, 30, "w2"),
            (40, 50, "r1"),
            (60, 70, "r1"),
        ]);
        assert_eq!(kinds(&v), (vec!["stale-read", "stale-read"], vec![1, 2]));
    }

    #[test]
    fn reading_back_an_overwritten_value_is_nonlinearizable() {
        // Writes 1 and 2 overlap, so reading 1 alone would be fine; but 2
        // was read first, so 2 was the later write and 1 cannot return.
        let v = run(&[(0, 10, "w1"), (5, 30, "w2"), (40, 50, "r2"), (60, 70, "r1")]);
        assert_eq!(kinds(&v), (vec!["nonlinearizable"], vec![3, 1]));
    }

    #[test]
    fn unknown_write_may_land_late_or_never() {
        let mut late = vec![
            (0, 10, "w1"),
            (20, 0, "w2?"),
            (30, 40, "r1"),
            (50, 60, "r2"),
            (70, 80, "r2"),
        ];
        assert_eq!(run(&late), Verdict::Valid);
        assert_eq!(
            run(&[(0, 10, "w1"), (20, 25, "w2?"), (30, 40, "r1")]),
            Verdict::Valid
        );
        // Once seen, it stays: 1 cannot come back.
        late.push((90, 95, "r1"));
        assert!(run(&late).is_invalid());
    }

    #[test]
    fn cas_from_a_value_not_current_is_invalid_and_failed_cas_ignored() {
        let bad = run(&[(0, 10, "w5"), (20, 30, "w1"), (40, 50, "c5:6")]);
        assert_eq!(kinds(&bad).0, ["nonlinearizable"]);
        let mut failed = vec![
            (0, 10, "w5"),
            (20, 30, "w1"),
            (40, 50, "c5:6!"),
            (60, 70, "r1"),
        ];
        assert_eq!(run(&failed), Verdict::Valid);
        // A failed CAS's value read back is a phantom, naming the CAS.
        failed.push((80, 90, "r6"));
        assert_eq!(kinds(&run(&failed)), (vec!["phantom-read"], vec![4, 2]));
    }

    #[test]
    fn read_of_never_written_value_is_phantom() {
        assert_eq!(
            kinds(&run(&[(0, 10, "w1"), (5, 15, "r7")])),
            (vec!["phantom-read"], vec![1])
        );
    }

    #[test]
    fn keys_are_independent() {
        let two = [
            (0, 10, "w1"),
            (0, 10, "w2@1"),
            (20, 30, "r1"),
            (20, 30, "r2@1"),
        ];
        assert_eq!(run(&two), Verdict::Valid);
        // On one key, reading both values after both writes is impossible.
        assert!(run(&[(0, 10, "w1"), (0, 10, "w2"), (20, 30, "r1"), (20, 30, "r2")]).is_invalid());
    }

    #[test]
    fn pathological_history_hits_the_budget() {
        // 40 overlapping writes, each value read by an overlapping read, and
        // 1 read again after 2: no order works, and the search would have to
        // try every subset of the writes to learn it.
        let values: Vec<String> = (1..=40)
            .flat_map(|v| [format!("w{v}"), format!("r{v}")])
            .collect();
        let mut spec: Vec<(u64, u64, &str)> =
            values.iter().map(|v| (0, 1000, v.as_str())).collect();
        spec.extend([(0, 10, "r1"), (20, 30, "r2"), (40, 50, "r1")]);
        let mut budget = Budget {
            max_states: 10_000,
            ..Budget::default()
        };
        assert!(matches!(
            check(&hist(&spec), budget),
            Verdict::Unknown { .. }
        ));
        (budget.max_states, budget.max_time) = (usize::MAX, Duration::from_millis(50));
        assert!(matches!(
            check(&hist(&spec), budget),
            Verdict::Unknown { .. }
        ));
    }

    /// xorshift64*: deterministic, no dependency.
    struct Rng(u64);
    impl Rng {
        fn below(&mut self, n: u64) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
        }
    }

    /// Whether some order of `ops` (ok ones all, unknown ones any) explains
    /// them: plain exhaustive search, for tiny histories.
    fn brute(ops: &[KOp], done: &mut Vec<bool>, state: Reg) -> bool {
        let must = |done: &[bool], j: usize| !done[j] && ops[j].complete.is_some();
        if !(0..ops.len()).any(|j| must(done, j)) {
            return true;
        }
        for i in 0..ops.len() {
            let ready = !done[i]
                && (0..ops.len()).all(|j| !must(done, j) || ops[j].complete >= Some(ops[i].invoke));
            if let Some(ns) = step(state, ops[i].kind).filter(|_| ready) {
                done[i] = true;
                let found = brute(ops, done, ns);
                done[i] = false;
                if found {
                    return true;
                }
            }
        }
        false
    }

    #[test]
    fn agrees_with_exhaustive_search_on_tiny_histories() {
        let (mut rng, mut answers) = (Rng(99), [0, 0]);
        for _ in 0..3000 {
            let mut spec = Vec::new();
            for _ in 0..7 {
                let (invoke, v) = (rng.below(40), rng.below(3) + 1);
                let what = match rng.below(3) {
                    0 if rng.below(4) == 0 => "r_".to_owned(),
                    0 => format!("r{v}"),
                    1 => format!("w{v}"),
                    _ => format!("c{}:{}", rng.below(3) + 1, rng.below(3) + 1),
                };
                let what = if rng.below(6) == 0 { what + "?" } else { what };
                spec.push((invoke, invoke + rng.below(30), what));
            }
            let spec: Vec<(u64, u64, &str)> =
                spec.iter().map(|(i, c, w)| (*i, *c, w.as_str())).collect();
            let (keys, ..) = collect(&hist(&spec));
            let ops = keys.into_values().next().unwrap_or_default();
            let expect = brute(&ops, &mut vec![false; ops.len()], None);
            let got = run(&spec);
            assert_eq!(got == Verdict::Valid, expect, "{spec:?} gave {got:?}");
            assert!(got == Verdict::Valid || got.is_invalid());
            answers[usize::from(expect)] += 1;
        }
        // Both answers were exercised.
        assert!(answers[0] > 300 && answers[1] > 300, "{answers:?}");
    }

    /// A real register run by `procs` processes: each op takes effect at a
    /// random instant inside its interval; some writes end unknown (half
    /// of those take effect), some CASes fail.
    fn simulated(seed: u64, n: usize, procs: usize, keys: u64) -> Vec<Op> {
        let mut rng = Rng(seed);
        let (mut clock, mut ops, mut points) = (vec![0u64; procs], Vec::new(), Vec::new());
        for i in 0..n {
            let p = i % procs;
            let invoke = clock[p] + rng.below(50);
            let complete = invoke + 1 + rng.below(200);
            clock[p] = complete;
            let (key, value) = (rng.below(keys) as u32, i as i64 + 1);
            let call = match rng.below(10) {
                0..=4 => Call::Read { key },
                5..=8 => Call::Write { key, value },
                _ => Call::Cas {
                    key,
                    from: 0,
                    to: value,
                },
            };
            points.push((invoke + rng.below(complete - invoke + 1), ops.len()));
            let (process, complete_ns, outcome) = (p as u32, Some(complete), Outcome::ok());
            ops.push(Op {
                id: 0,
                process,
                invoke_ns: invoke,
                complete_ns,
                call,
                outcome,
            });
        }
        points.sort_unstable();
        let mut reg: HashMap<u32, Reg> = HashMap::new();
        for (_, i) in points {
            let o = &mut ops[i];
            let (Call::Read { key } | Call::Write { key, .. } | Call::Cas { key, .. }) = o.call
            else {
                unreachable!()
            };
            let now = reg.entry(key).or_insert(None);
            match &mut o.call {
                Call::Read { .. } => {
                    o.outcome = Outcome::Ok {
                        value: now.map_or(Value::None, Value::Int),
                    }
                }
                Call::Write { value, .. } if rng.below(30) == 0 => {
                    (o.complete_ns, o.outcome) = (
                        None,
                        Outcome::Unknown {
                            error: "timeout".into(),
                        },
                    );
                    if rng.below(2) == 0 {
                        *now = Some(*value);
                    }
                }
                Call::Write { value, .. } => *now = Some(*value),
                Call::Cas { from, to, .. } => match *now {
                    Some(cur) if rng.below(2) == 0 => (*from, *now) = (cur, Some(*to)),
                    _ => {
                        (*from, o.outcome) = (
                            -1,
                            Outcome::Fail {
                                error: "bad version".into(),
                            },
                        )
                    }
                },
                _ => unreachable!(),
            }
        }
        ops.sort_by_key(|o| o.invoke_ns);
        for (id, o) in ops.iter_mut().enumerate() {
            o.id = id as u64;
        }
        ops
    }

    #[test]
    fn large_simulated_history_is_valid() {
        let mut h = simulated(7, 20_000, 10, 2);
        assert_eq!(check(&h, Budget::default()), Verdict::Valid);
        // Make a late read return key 0's first written value: stale.
        let first = h.iter().find_map(|o| match o.call {
            Call::Write { key: 0, value } if o.outcome.is_ok() => Some(value),
            _ => None,
        });
        let late = h
            .iter_mut()
            .rev()
            .find(|o| matches!(o.call, Call::Read { key: 0 }) && o.outcome.is_ok());
        late.expect("a read").outcome = Outcome::Ok {
            value: Value::Int(first.expect("a write")),
        };
        assert!(check(&h, Budget::default()).is_invalid());
    }
}
