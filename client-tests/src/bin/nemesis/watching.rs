//! The watches workload's processes: each leaves data watches on a few keys
//! and writes them, and after every operation looks at which of its watches
//! fired, before it records that operation's reply. Events found at one
//! look were delivered before that reply was recorded; events found at a
//! later look were delivered after the earlier look ended (see [`look`]),
//! which the checker's order rules rely on.

use crate::recorder::{Pending, Recorder};
use crate::workload::{
    alive, finish, open_session, parse, read_failed, Process, Shared, OP_TIMEOUT,
};
use rand::rngs::StdRng;
use rand::Rng;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::time::Duration;
use zkd_client_tests::nemesis::history::{Call, Outcome, Value};
use zookeeper_client as zk;

/// Keys watched and written: enough that a process holds several unfired
/// watches at any moment (each key changes less often), so a cut from its
/// member finds some to be set again through SetWatches.
pub const KEYS: u32 = 8;

/// A watch left by the process's read `read` of `key`, not yet fired.
pub struct Watch {
    key: u32,
    read: u64,
    event: Pin<Box<dyn Future<Output = zk::WatchedEvent> + Send>>,
}

/// The process loop until `until`.
pub async fn run_process(
    shared: Shared,
    worker: u32,
    stride: u32,
    seed: u64,
    until: tokio::time::Instant,
) -> Process {
    let mut rng: StdRng = rand::SeedableRng::seed_from_u64(seed);
    let mut me = Process::new(worker);
    while tokio::time::Instant::now() < until {
        let c = match me.client.clone().filter(alive) {
            Some(c) => c,
            None => {
                // A new session (and process id): the old watches died with the old one.
                me.watches.clear();
                match open_session(&shared, &mut me, stride).await {
                    Some(c) => c,
                    None => {
                        tokio::time::sleep(Duration::from_millis(200)).await;
                        continue;
                    }
                }
            }
        };
        let unwatched: Vec<u32> = (0..KEYS)
            .filter(|k| me.watches.iter().all(|w| w.key != *k))
            .collect();
        let (pending, outcome) = if !unwatched.is_empty() && rng.gen_bool(0.4) {
            let key = unwatched[rng.gen_range(0..unwatched.len())];
            watch(&shared, &c, &mut me, key).await
        } else if rng.gen_bool(0.3) {
            peek(&shared, &c, me.id, rng.gen_range(0..KEYS)).await
        } else {
            let key = rng.gen_range(0..KEYS);
            let value = shared.next_value.fetch_add(1, Ordering::Relaxed);
            let pending = shared.rec.invoke(me.id, Call::WatchWrite { key, value });
            (pending, write(&shared, &c, key, value).await)
        };
        // The client hands a watch's event over before the reply that shows
        // its data: look before recording the reply, so such an event is
        // stamped no later than it. (One delivered in the instant between
        // the reply and this look is stamped early: a blind spot of this
        // client API, which gives events no order against replies.)
        look(&shared.rec, &mut me, &c).await;
        shared.rec.complete(pending, outcome.clone());
        if let Outcome::Unknown { error } = outcome {
            if error.contains("expired") {
                shared.rec.event(
                    me.id,
                    Call::SessionExpired {
                        session: c.session_id().0,
                    },
                );
                me.client = None;
            }
        }
        tokio::time::sleep(Duration::from_millis(rng.gen_range(0..20))).await;
    }
    me
}

/// Reads `key` leaving a data watch; an ok read arms a [`Watch`]. Returns
/// the op (not yet recorded as complete) and its outcome.
async fn watch(shared: &Shared, c: &zk::Client, me: &mut Process, key: u32) -> (Pending, Outcome) {
    let pending = shared.rec.invoke(me.id, Call::WatchRead { key });
    let read = pending.id();
    let path = format!("{}/w{key}", shared.workload.dir());
    let outcome = match finish(c.get_and_watch_data(&path)).await {
        Ok((data, stat, watcher)) => {
            me.watches.push(Watch {
                key,
                read,
                event: Box::pin(watcher.changed()),
            });
            let value = parse(&data);
            Outcome::Ok {
                value: Value::Versioned {
                    value,
                    zxid: stat.mzxid,
                },
            }
        }
        // A read has no effect: whatever went wrong, nothing happened.
        Err(failed) => read_failed(failed),
    };
    (pending, outcome)
}

/// Reads `key` without a watch: newer data than a pending watch was set on
/// must come after that watch's event.
async fn peek(shared: &Shared, c: &zk::Client, process: u32, key: u32) -> (Pending, Outcome) {
    let pending = shared.rec.invoke(process, Call::WatchPeek { key });
    let path = format!("{}/w{key}", shared.workload.dir());
    let outcome = match finish(c.get_data(&path)).await {
        Ok((data, stat)) => Outcome::Ok {
            value: Value::Versioned {
                value: parse(&data),
                zxid: stat.mzxid,
            },
        },
        Err(failed) => read_failed(failed),
    };
    (pending, outcome)
}

/// Writes `value` to `key`; the ok value carries the write's zxid.
pub async fn write(shared: &Shared, c: &zk::Client, key: u32, value: i64) -> Outcome {
    let path = format!("{}/w{key}", shared.workload.dir());
    match finish(c.set_data(&path, value.to_string().as_bytes(), None)).await {
        Ok(stat) => Outcome::Ok {
            value: Value::Versioned {
                value: Some(value),
                zxid: stat.mzxid,
            },
        },
        Err(outcome) => outcome,
    }
}

/// Records every watch of `me` that has fired by now, in zxid order among
/// those found together (their delivery order is not observable).
async fn look(rec: &Recorder, me: &mut Process, c: &zk::Client) {
    // The client delivers events on its own threads while this looks, so
    // one pass could see a later event and miss an earlier one delivered a
    // moment before it. Passes repeat until one finds nothing new: then every
    // watch still waiting was polled after the last event found was
    // delivered, so whatever it brings was delivered later.
    let mut fired = Vec::new();
    let mut waiting = std::mem::take(&mut me.watches);
    loop {
        let before = fired.len();
        let mut still = Vec::new();
        for mut w in waiting {
            // A zero timeout polls the event once.
            match tokio::time::timeout(Duration::ZERO, &mut w.event).await {
                Ok(event) => fired.push((w, event)),
                Err(_) => still.push(w),
            }
        }
        waiting = still;
        if fired.len() == before {
            break;
        }
    }
    me.watches = waiting;
    fired.sort_by_key(|(w, e)| (e.zxid, w.key));
    for (w, event) in fired {
        if event.event_type == zk::EventType::Session {
            // The session ended under the watch: no node event will come.
            if event.session_state == zk::SessionState::Expired {
                rec.event(
                    me.id,
                    Call::SessionExpired {
                        session: c.session_id().0,
                    },
                );
                me.client = None;
            }
            continue;
        }
        let pending = rec.invoke(
            me.id,
            Call::WatchFired {
                key: w.key,
                read: w.read,
            },
        );
        rec.complete(
            pending,
            Outcome::Ok {
                value: Value::Versioned {
                    value: None,
                    zxid: event.zxid,
                },
            },
        );
    }
}

/// After the final writes: each process with a live session waits (bounded)
/// for its outstanding watches.
pub async fn collect(rec: &Recorder, processes: &mut [Process]) {
    let deadline = tokio::time::Instant::now() + 2 * OP_TIMEOUT;
    while tokio::time::Instant::now() < deadline {
        let mut outstanding = 0;
        for p in processes.iter_mut() {
            let Some(c) = p.client.clone() else {
                continue;
            };
            look(rec, p, &c).await;
            outstanding += p.watches.len();
        }
        if outstanding == 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
