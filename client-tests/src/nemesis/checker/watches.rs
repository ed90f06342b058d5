//! The watches checker: ZooKeeper's data-watch guarantees, as each session
//! sees the watches it set.
//!
//! Each process is one session (on expiry it records `SessionExpired` and
//! goes on under a new id). It reads keys with a watch (`WatchRead`: the
//! mzxid `m`), writes keys (`WatchWrite`: the write's zxid), and records
//! `WatchFired` (the event's zxid `e`, -1 if unknown) when it observes a
//! watch fire: right after one of its ops completed, so an event delivered
//! before a reply is recorded no later than it. ZooKeeper promises:
//!
//! - A watch fires once (else `duplicate-watch`), and only for the session
//!   that set it, after it was set (else `orphan-watch`).
//! - It fires for the first change after the state it was set on: `e` must
//!   exceed `m` (else `early-watch`), be an ok write's zxid for the key
//!   (else `phantom-watch`, unless a write of it had an unknown outcome),
//!   and no ok write of the key may lie between `m` and `e` (else
//!   `late-watch`: the notification for that write was missed).
//! - None is lost while its session lives, even across a reconnect to
//!   another member: setWatches re-arms every watch with the client's last
//!   seen zxid, and the new server fires those whose node changed since. A
//!   watch with no event though an ok write of its key has a zxid above `m`
//!   is a `lost-watch` if its process did not expire after setting it and
//!   invoked an op after the write and the read completed.
//! - A client sees the event before the new data that triggered it: a
//!   later read by the session of a higher mzxid, completed strictly before
//!   the event was observed (or with none), is a `watch-after-data`.
//! - Events reach a session in zxid order: its events of known zxid, as
//!   observed, never go down (a multi's share one), else `out-of-order-watch`.
//!
//! Assumed of the harness: it records a `WatchFired` for each read pending
//! on a key whose watch fires, and live processes await theirs at the end.

use std::collections::{BTreeMap, BTreeSet};

use super::{capped, status, Anomaly, Status, Verdict};
use crate::nemesis::history::{Call, Op, Outcome, Value};

/// The most anomalies reported of each kind.
const REPORT_CAP: usize = 20;

/// The watch an ok `WatchRead` left on the state of mzxid `m`.
struct Watch<'a> {
    op: &'a Op,
    key: u32,
    m: i64,
    done: u64,
}

/// An observed `WatchFired`: read `r`'s watch fired for zxid `e` (-1 if
/// unknown), observed at `at`.
struct Event<'a> {
    op: &'a Op,
    key: u32,
    r: u64,
    e: i64,
    at: u64,
}

/// The zxid an ok op returned, if it returned a `Versioned`.
fn zxid_of(op: &Op) -> Option<i64> {
    match &op.outcome {
        Outcome::Ok {
            value: Value::Versioned { zxid, .. },
        } => Some(*zxid),
        _ => None,
    }
}

/// Everything the rules look up, gathered in one pass.
#[derive(Default)]
struct Index<'a> {
    /// Ok watch reads, by op id.
    watches: BTreeMap<u64, Watch<'a>>,
    /// By process, then observation order (ties by op id).
    events: Vec<Event<'a>>,
    /// Indices of events by the read whose watch they are (orphans left out).
    fired: BTreeMap<u64, Vec<usize>>,
    /// Ok writes per key: (zxid, op).
    writes: BTreeMap<u32, Vec<(i64, &'a Op)>>,
    /// Keys with a write of unknown outcome, hence of unknown zxid.
    unsure: BTreeSet<u32>,
    /// Every ok read of a key with its mzxid: the watch reads and the peeks.
    reads: Vec<Watch<'a>>,
    /// When each process learned its session expired.
    expiry: BTreeMap<u32, Vec<u64>>,
    /// The last invocation of any op by each process.
    last_invoke: BTreeMap<u32, u64>,
}

impl<'a> Index<'a> {
    fn new(ops: &'a [Op]) -> Index<'a> {
        let mut ix = Index::default();
        for op in ops {
            let last = ix.last_invoke.entry(op.process).or_default();
            *last = (*last).max(op.invoke_ns);
            let (ok, zxid) = (status(op) == Status::Ok, zxid_of(op));
            match (&op.call, op.complete_ns, zxid) {
                (&Call::WatchRead { key }, Some(done), Some(m)) if ok => {
                    ix.watches.insert(op.id, Watch { op, key, m, done });
                    ix.reads.push(Watch { op, key, m, done });
                }
                (&Call::WatchPeek { key }, Some(done), Some(m)) if ok => {
                    ix.reads.push(Watch { op, key, m, done });
                }
                (&Call::WatchWrite { key, .. }, _, _) if status(op) != Status::Fail => {
                    match zxid.filter(|_| ok) {
                        Some(z) => ix.writes.entry(key).or_default().push((z, op)),
                        None => _ = ix.unsure.insert(key),
                    }
                }
                (&Call::WatchFired { key, read: r }, Some(at), _) if ok => {
                    let e = zxid.unwrap_or(-1);
                    ix.events.push(Event { op, key, r, e, at });
                }
                // Whatever its outcome says, the session is gone.
                (Call::SessionExpired { .. }, _, _) => {
                    ix.expiry.entry(op.process).or_default().push(op.invoke_ns)
                }
                _ => {}
            }
        }
        ix.events.sort_by_key(|e| (e.op.process, e.at, e.op.id));
        for (i, e) in ix.events.iter().enumerate() {
            if ix.owner(e).is_some() {
                ix.fired.entry(e.r).or_default().push(i);
            }
        }
        ix
    }

    /// The watch `e` is the event of: its own process's, on its key, and
    /// set (invoked, at least) before it was observed; `None` for an orphan.
    fn owner(&self, e: &Event) -> Option<&Watch<'a>> {
        let w = self.watches.get(&e.r)?;
        let own = w.op.process == e.op.process && w.key == e.key && w.op.invoke_ns <= e.at;
        own.then_some(w)
    }

    /// Whether `process`'s session expired within `[from, to]`.
    fn expired(&self, process: u32, from: u64, to: u64) -> bool {
        let ts = self.expiry.get(&process);
        ts.is_some_and(|ts| ts.iter().any(|t| (from..=to).contains(t)))
    }
}

/// Checks the watches workload (`WatchRead`, `WatchWrite`, `WatchFired`,
/// `SessionExpired`); other ops are ignored. `Unknown` if no watch was set.
pub fn check(ops: &[Op]) -> Verdict {
    let ix = Index::new(ops);
    if ix.watches.is_empty() {
        let reason = "no watches set".to_owned();
        return Verdict::Unknown { reason };
    }
    let mut anomalies = capped(duplicates(&ix), REPORT_CAP, "duplicate events");
    anomalies.extend(capped(bad_events(&ix), REPORT_CAP, "bad events"));
    anomalies.extend(capped(lost(&ix), REPORT_CAP, "lost watches"));
    anomalies.extend(capped(after_data(&ix), REPORT_CAP, "late events"));
    anomalies.extend(capped(out_of_order(&ix), REPORT_CAP, "out-of-order events"));
    Verdict::from_anomalies(anomalies)
}

/// `duplicate-watch`: a watch fired more than once.
fn duplicates(ix: &Index) -> Vec<Anomaly> {
    let many = ix.fired.iter().filter(|(_, evs)| evs.len() > 1);
    many.map(|(read, evs)| {
        let mut ids = vec![*read];
        ids.extend(evs.iter().map(|i| ix.events[*i].op.id));
        let detail = format!("the watch set by op {read} fired {} times", evs.len());
        Anomaly::new("duplicate-watch", detail, ids)
    })
    .collect()
}

/// `orphan-watch`, `early-watch`, `late-watch` and `phantom-watch`: events
/// that no watch of their session, or no write, explains.
fn bad_events(ix: &Index) -> Vec<Anomaly> {
    let mut out = Vec::new();
    for e in &ix.events {
        let (id, key, z) = (e.op.id, e.key, e.e);
        match ix.owner(e) {
            None => {
                let (p, r) = (e.op.process, e.r);
                let d = format!("op {id} names op {r}: no earlier watch of {p} on key {key}");
                out.push(Anomaly::new("orphan-watch", d, vec![id]));
            }
            Some(w) if z >= 0 && z <= w.m => {
                let (m, r) = (w.m, w.op.id);
                let d = format!("watch on key {key} at mzxid {m} (op {r}) fired at {z}");
                out.push(Anomaly::new("early-watch", d, vec![w.op.id, id]));
            }
            Some(w) if z >= 0 => {
                // An ok write between m and z changed the key first: the
                // watch was owed to it (an unknown write could only come
                // earlier still), so this event is for a later change.
                let first = ix.writes.get(&key).into_iter().flatten();
                let skipped = first.filter(|x| x.0 > w.m && x.0 < z).min_by_key(|x| x.0);
                if let Some(&(x, wop)) = skipped {
                    let (m, r) = (w.m, w.op.id);
                    let d = format!(
                        "watch on key {key} at mzxid {m} (op {r}) fired at {z}, not at the write {x} before it (op {})",
                        wop.id
                    );
                    out.push(Anomaly::new("late-watch", d, vec![w.op.id, wop.id, id]));
                }
            }
            Some(_) => {}
        }
        let ws = ix.writes.get(&key).into_iter().flatten();
        if z >= 0 && !ix.unsure.contains(&key) && !ws.clone().any(|w| w.0 == z) {
            let d = format!("event (op {id}) at zxid {z}: no write of key {key} had it");
            out.push(Anomaly::new("phantom-watch", d, vec![id]));
        }
    }
    out
}

/// `lost-watch`: a watch that never fired though its key changed while its
/// session lived and its process was still there to observe it.
fn lost(ix: &Index) -> Vec<Anomaly> {
    let mut out = Vec::new();
    for (id, w) in &ix.watches {
        let p = w.op.process;
        if ix.fired.contains_key(id) || ix.expired(p, w.op.invoke_ns, u64::MAX) {
            continue;
        }
        // The newer write that completed first gives the process most time.
        let ws = ix.writes.get(&w.key).into_iter().flatten();
        let newer = ws.filter(|(z, _)| *z > w.m);
        let first = newer.filter_map(|(z, op)| Some((op.complete_ns?, *z, op.id)));
        let Some((done, z, write)) = first.min() else {
            continue;
        };
        // It must also have looked for events after the watch was set.
        if ix.last_invoke[&p] > done.max(w.done) {
            let m = w.m;
            let d = format!("watch at mzxid {m} never fired though op {write} wrote {z}");
            out.push(Anomaly::new("lost-watch", d, vec![*id, write]));
        }
    }
    out
}

/// `watch-after-data`: a session read newer data of a key before it saw
/// the event of the watch it had set on that key.
fn after_data(ix: &Index) -> Vec<Anomaly> {
    let mut out = Vec::new();
    for (id, r) in &ix.watches {
        let p = r.op.process;
        let newer = ix.reads.iter().filter(|x| {
            let later = x.op.invoke_ns > r.done && x.m > r.m;
            x.op.process == p && x.key == r.key && later
        });
        // The earliest newer read is the one the event is likeliest late for.
        let Some(x) = newer.min_by_key(|x| (x.done, x.op.id)) else {
            continue;
        };
        let event = ix.fired.get(id).map(|evs| &ix.events[evs[0]]);
        let excused = ix.expired(p, r.op.invoke_ns, x.done);
        if excused || event.is_some_and(|e| e.at <= x.done) {
            continue;
        }
        let mut ids = vec![*id, x.op.id];
        ids.extend(event.map(|e| e.op.id));
        let (k, m, n) = (r.key, r.m, x.m);
        let d = format!("read key {k} at mzxid {n} before its watch set at {m} fired");
        out.push(Anomaly::new("watch-after-data", d, ids));
    }
    out
}

/// `out-of-order-watch`: a session observed an event of a lower zxid after
/// one of a higher zxid.
fn out_of_order(ix: &Index) -> Vec<Anomaly> {
    let mut out = Vec::new();
    // The event of the highest zxid its process has observed so far.
    let mut newest: Option<&Event> = None;
    for ev in ix.events.iter().filter(|ev| ev.e >= 0) {
        match newest {
            Some(n) if n.op.process == ev.op.process && ev.e <= n.e => {
                if ev.e < n.e {
                    let ids = vec![n.op.id, ev.op.id];
                    let d = format!("zxid {} observed after {}", ev.e, n.e);
                    out.push(Anomaly::new("out-of-order-watch", d, ids));
                }
            }
            _ => newest = Some(ev),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nemesis::checker::test_ops::{completed, fail, found, ok, op, unknown};

    /// An ok of `value` at `zxid`.
    fn at_zxid(value: Option<i64>, zxid: i64) -> Outcome {
        ok(Value::Versioned { value, zxid })
    }

    /// `p`'s ok watch read of `key` at mzxid `m`, over `[at, at + 5]`.
    fn read(id: u64, p: u32, at: u64, key: u32, m: i64) -> Op {
        let call = Call::WatchRead { key };
        op(id, p, at, Some(at + 5), call, at_zxid(Some(0), m))
    }

    /// `p`'s write of `key` at zxid `w` over `[at, at + 5]`: ok, unless
    /// `outcome` is not (then never completed if unknown).
    fn write(id: u64, p: u32, at: u64, key: u32, w: i64, outcome: Outcome) -> Op {
        let ok = outcome.is_ok();
        let got = if ok { at_zxid(Some(w), w) } else { outcome };
        let done = completed(at + 5, &got);
        op(id, p, at, done, Call::WatchWrite { key, value: w }, got)
    }

    /// A write by process 2 of `key` at zxid `w` over `[10, 15]`.
    fn ok_write(id: u64, key: u32, w: i64) -> Op {
        write(id, 2, 10, key, w, Outcome::ok())
    }

    /// `p` observed at `at` its read `r`'s watch on `key` fire for zxid `e`.
    fn fired(id: u64, p: u32, at: u64, key: u32, r: u64, e: i64) -> Op {
        let call = Call::WatchFired { key, read: r };
        op(id, p, at, Some(at), call, at_zxid(None, e))
    }

    /// `p` learned at `at` that its session expired.
    fn expired(id: u64, p: u32, at: u64) -> Op {
        let call = Call::SessionExpired { session: 7 };
        op(id, p, at, Some(at), call, Outcome::ok())
    }

    /// Process 1 watches key 1 at mzxid 10, process 2 writes it at zxid 20,
    /// process 1 observes the event at 16, then rereads key 1 over [20, 25].
    fn healthy() -> Vec<Op> {
        let (r, w) = (read(0, 1, 0, 1, 10), ok_write(1, 1, 20));
        vec![r, w, fired(2, 1, 16, 1, 0, 20), read(3, 1, 20, 1, 20)]
    }

    /// The only anomaly of `h` is of `kind`, involving `ops`.
    fn only(h: &[Op], kind: &str, ops: &[u64]) {
        assert_eq!(found(check(h)), [(kind.to_owned(), ops.to_vec())]);
    }

    /// The kinds of the anomalies of `h`.
    fn kinds(h: &[Op]) -> Vec<String> {
        found(check(h)).into_iter().map(|a| a.0).collect()
    }

    #[test]
    fn no_watches_is_unknown_and_a_healthy_history_valid() {
        let mut h = healthy();
        assert_eq!(check(&h), Verdict::Valid);
        h[0] = op(0, 1, 0, Some(5), Call::WatchRead { key: 1 }, fail());
        h[3] = op(3, 1, 20, None, Call::WatchRead { key: 1 }, unknown());
        let v = check(&h);
        assert!(matches!(v, Verdict::Unknown { reason } if reason == "no watches set"));
    }

    #[test]
    fn a_watch_fires_once_for_its_own_session() {
        let mut h = healthy();
        h.push(fired(4, 1, 26, 1, 0, 20));
        only(&h, "duplicate-watch", &[0, 2, 4]);
        // Process 2 observed process 1's event: so 1's watch is lost too.
        let mut h = healthy();
        h[2] = fired(2, 2, 16, 1, 0, 20);
        let all = ["orphan-watch", "lost-watch", "watch-after-data"];
        assert_eq!(kinds(&h), all);
        // Naming a watch on key 2 (where 20 was not written), or a later one.
        h[2] = fired(2, 1, 16, 2, 0, 20);
        assert_eq!(kinds(&h)[..2], ["orphan-watch", "phantom-watch"]);
        let (w, r) = (write(0, 2, 0, 1, 20, Outcome::ok()), read(2, 1, 10, 1, 10));
        let mut h = vec![w, fired(1, 1, 6, 1, 2, 20), r];
        only(&h, "orphan-watch", &[1]);
        // Observed as the (lagging) read completed.
        h[1] = fired(1, 1, 15, 1, 2, 20);
        assert_eq!(check(&h), Verdict::Valid);
    }

    #[test]
    fn a_watch_fires_for_a_written_later_zxid() {
        // Not for a write at the watch's own mzxid.
        let mut h = healthy();
        h.extend([write(4, 2, 0, 1, 10, Outcome::ok()), ok_write(5, 1, 25)]);
        h[2] = fired(2, 1, 16, 1, 0, 10);
        only(&h, "early-watch", &[0, 2]);
        // Not for a later write than the first one after its mzxid.
        h[2] = fired(2, 1, 16, 1, 0, 25);
        only(&h, "late-watch", &[0, 1, 2]);
        // Fine once the write at 20 is one of another key.
        h[1] = ok_write(1, 2, 20);
        assert_eq!(check(&h), Verdict::Valid);
        // Not a failed write, nor one of another key.
        h[5] = write(5, 3, 10, 1, 25, fail());
        h.push(ok_write(6, 2, 25));
        only(&h, "phantom-watch", &[2]);
        // A write of unknown outcome may have had that zxid.
        h[5] = write(5, 3, 10, 1, 25, unknown());
        assert_eq!(check(&h), Verdict::Valid);
    }

    /// Process 1's watch on key 1 at mzxid 10 never fires; process 2
    /// writes key 1 at zxid 20 over [10, 15]; then process 1 does `then`.
    fn unfired(then: Op) -> Vec<Op> {
        vec![read(0, 1, 0, 1, 10), ok_write(1, 1, 20), then]
    }

    #[test]
    fn a_watch_is_lost_only_if_its_session_lived_and_went_on() {
        let mut h = unfired(write(2, 1, 30, 2, 30, Outcome::ok()));
        only(&h, "lost-watch", &[0, 1]);
        // Only a write newer than the watch's state triggers it.
        h[1] = ok_write(1, 1, 10);
        assert_eq!(check(&h), Verdict::Valid);
        // Rereading the key does not stand in for the event.
        let h = unfired(read(2, 1, 30, 1, 20));
        assert_eq!(kinds(&h), ["lost-watch", "watch-after-data"]);
        // The expiry is itself an op of process 1 after the write.
        assert_eq!(check(&unfired(expired(2, 1, 30))), Verdict::Valid);
        // Process 1 did nothing after the write completed.
        assert_eq!(check(&unfired(expired(2, 3, 30))), Verdict::Valid);
        let h = unfired(write(2, 1, 12, 2, 30, Outcome::ok()));
        assert_eq!(check(&h), Verdict::Valid);
    }

    #[test]
    fn the_event_comes_before_the_new_data() {
        // Observed strictly after the read of the new data completed.
        let mut h = healthy();
        h[2] = fired(2, 1, 26, 1, 0, 20);
        only(&h, "watch-after-data", &[0, 3, 2]);
        // Delivered before the reply: observed as the read completed.
        h[2] = fired(2, 1, 25, 1, 0, 20);
        assert_eq!(check(&h), Verdict::Valid);
        // A new session owes nothing to the old one's watches.
        h[2] = fired(2, 1, 26, 1, 0, 20);
        h.push(expired(4, 1, 18));
        assert_eq!(check(&h), Verdict::Valid);
        // Rereading the data the watch was set on (setting a watch anew).
        h[3] = read(3, 1, 20, 1, 10);
        h[4] = fired(4, 1, 26, 1, 3, 20);
        assert_eq!(check(&h), Verdict::Valid);
    }

    /// Process 1 watches keys 1 and 2 at mzxid 10 and observes events for
    /// key 1 (zxid `e1`) at time `t1` and key 2 (zxid `e2`) at `t2`.
    fn two_events(e1: i64, t1: u64, e2: i64, t2: u64) -> Vec<Op> {
        let mut h = vec![read(0, 1, 0, 1, 10), read(1, 1, 6, 2, 10)];
        h.extend([ok_write(2, 1, e1), ok_write(3, 2, e2)]);
        h.extend([fired(4, 1, t1, 1, 0, e1), fired(5, 1, t2, 2, 1, e2)]);
        h
    }

    #[test]
    fn events_arrive_in_zxid_order() {
        only(&two_events(30, 40, 20, 41), "out-of-order-watch", &[4, 5]);
        // Observed at the same time, they are ordered by op id.
        only(&two_events(30, 40, 20, 40), "out-of-order-watch", &[4, 5]);
        assert_eq!(check(&two_events(20, 40, 30, 41)), Verdict::Valid);
        // One multi's events share its zxid.
        assert_eq!(check(&two_events(20, 40, 20, 40)), Verdict::Valid);
        // Between zxids 30 and 40, an event of unknown zxid (and no write).
        let mut h = two_events(30, 40, 40, 42);
        h.extend([read(6, 1, 12, 3, 10), fired(7, 1, 41, 3, 6, -1)]);
        assert_eq!(check(&h), Verdict::Valid);
        h[7] = fired(7, 1, 41, 3, 6, 25);
        h.push(ok_write(8, 3, 25));
        only(&h, "out-of-order-watch", &[4, 7]);
        // Another session's events are its own business.
        let mut h = two_events(30, 40, 20, 41);
        h[1] = read(1, 3, 6, 2, 10);
        h[5] = fired(5, 3, 41, 2, 1, 20);
        assert_eq!(check(&h), Verdict::Valid);
    }
}
