//! The Wing–Gong/Lowe linearizability search over one key's ops: a doubly
//! linked list of call and return events, placements undone on backtrack,
//! memoized on the set of placed ops and the register value, and bounded by
//! a state count and a deadline.

use std::collections::HashSet;
use std::time::Instant;

use super::{step, KOp, Kind, Reg};

/// Memo words per key (256 MiB): states vary in size, so count words too.
const MAX_MEMO_WORDS: usize = 1 << 25;
const NIL: u32 = u32::MAX;

/// What the search concluded.
pub(super) enum Search {
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
pub(super) fn wgl(mut ops: Vec<KOp>, max_states: usize, deadline: Instant) -> (Vec<KOp>, Search) {
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
