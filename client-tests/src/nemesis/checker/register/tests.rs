//! Tests of the register checker: hand-written histories for each anomaly,
//! the budget, agreement with exhaustive search on tiny random histories,
//! and a large simulated valid history.

use super::*;
use crate::nemesis::checker::test_ops::{self, fail, first_ops, ok, op, unknown};

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
                Some('?') => unknown(),
                Some('!') => fail(),
                _ => ok(value),
            };
            if tail == Some('?') {
                complete_ns = None;
            }
            op(id as u64, id as u32, invoke, complete_ns, call, outcome)
        })
        .collect()
}

fn run(spec: &[(u64, u64, &str)]) -> Verdict {
    check(&hist(spec), Budget::default())
}

/// The kinds of the anomalies, with the ops of the first.
fn kinds(v: &Verdict) -> (Vec<&str>, Vec<u64>) {
    (test_ops::kinds(v), first_ops(v))
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
    let mut spec: Vec<(u64, u64, &str)> = values.iter().map(|v| (0, 1000, v.as_str())).collect();
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
        ops.push(op(0, process, invoke, complete_ns, call, outcome));
    }
    points.sort_unstable();
    let mut reg: HashMap<u32, Reg> = HashMap::new();
    for (_, i) in points {
        let o = &mut ops[i];
        let (Call::Read { key } | Call::Write { key, .. } | Call::Cas { key, .. }) = o.call else {
            unreachable!()
        };
        let now = reg.entry(key).or_insert(None);
        match &mut o.call {
            Call::Read { .. } => o.outcome = ok(now.map_or(Value::None, Value::Int)),
            Call::Write { value, .. } if rng.below(30) == 0 => {
                (o.complete_ns, o.outcome) = (None, unknown());
                if rng.below(2) == 0 {
                    *now = Some(*value);
                }
            }
            Call::Write { value, .. } => *now = Some(*value),
            Call::Cas { from, to, .. } => match *now {
                Some(cur) if rng.below(2) == 0 => (*from, *now) = (cur, Some(*to)),
                _ => (*from, o.outcome) = (-1, fail()),
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
