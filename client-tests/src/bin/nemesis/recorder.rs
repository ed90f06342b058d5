//! The history as a run fills it in: clients record each operation when
//! they invoke it and when they learn its outcome, the nemesis records its
//! fault windows, all against one clock started with the run.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use zkd_client_tests::nemesis::history::{Call, FaultWindow, History, Op, Outcome};

/// Shared by every client task and the nemesis of one run.
#[derive(Clone)]
pub struct Recorder {
    inner: Arc<Inner>,
}

struct Inner {
    start: Instant,
    next_id: AtomicU64,
    history: Mutex<History>,
    counts: Mutex<Counts>,
}

/// Outcomes so far, for the progress line.
#[derive(Clone, Copy, Default)]
pub struct Counts {
    pub ok: u64,
    pub fail: u64,
    pub unknown: u64,
}

/// An operation invoked and not yet completed.
pub struct Pending {
    id: u64,
    process: u32,
    invoke_ns: u64,
    call: Call,
}

impl Pending {
    /// The operation's id.
    pub fn id(&self) -> u64 {
        self.id
    }
}

impl Recorder {
    /// A recorder whose clock starts now.
    pub fn new() -> Recorder {
        Recorder {
            inner: Arc::new(Inner {
                start: Instant::now(),
                next_id: AtomicU64::new(0),
                history: Mutex::new(History::default()),
                counts: Mutex::new(Counts::default()),
            }),
        }
    }

    /// Nanoseconds since the run started.
    pub fn now_ns(&self) -> u64 {
        self.inner.start.elapsed().as_nanos() as u64
    }

    /// Process `process` invokes `call`.
    pub fn invoke(&self, process: u32, call: Call) -> Pending {
        Pending {
            id: self.inner.next_id.fetch_add(1, Ordering::Relaxed),
            process,
            invoke_ns: self.now_ns(),
            call,
        }
    }

    /// The invoked operation completed with `outcome`.
    pub fn complete(&self, pending: Pending, outcome: Outcome) {
        let complete_ns = self.now_ns();
        self.push(pending, Some(complete_ns), outcome);
    }

    /// Something a client learned at one instant (an expiry, say).
    pub fn event(&self, process: u32, call: Call) {
        let pending = self.invoke(process, call);
        let at = pending.invoke_ns;
        self.push(pending, Some(at), Outcome::ok());
    }

    fn push(&self, p: Pending, complete_ns: Option<u64>, outcome: Outcome) {
        {
            let mut counts = lock(&self.inner.counts);
            match &outcome {
                Outcome::Ok { .. } => counts.ok += 1,
                Outcome::Fail { .. } => counts.fail += 1,
                Outcome::Unknown { .. } => counts.unknown += 1,
            }
        }
        lock(&self.inner.history).ops.push(Op {
            id: p.id,
            process: p.process,
            invoke_ns: p.invoke_ns,
            complete_ns,
            call: p.call,
            outcome,
        });
    }

    /// A fault begins; returns its index for [`Recorder::fault_ended`].
    pub fn fault_started(&self, kind: &str, members: Vec<usize>) -> usize {
        let mut history = lock(&self.inner.history);
        history.faults.push(FaultWindow {
            kind: kind.to_owned(),
            members,
            start_ns: self.now_ns(),
            end_ns: None,
        });
        history.faults.len() - 1
    }

    /// The fault `index` was healed.
    pub fn fault_ended(&self, index: usize) {
        let now = self.now_ns();
        if let Some(f) = lock(&self.inner.history).faults.get_mut(index) {
            f.end_ns = Some(now);
        }
    }

    /// Adds `note` to fault `index`'s description (what the fault led to).
    pub fn fault_note(&self, index: usize, note: &str) {
        if let Some(f) = lock(&self.inner.history).faults.get_mut(index) {
            f.kind = format!("{} ({note})", f.kind);
        }
    }

    /// Fault `index`'s description.
    pub fn fault_kind(&self, index: usize) -> String {
        lock(&self.inner.history)
            .faults
            .get(index)
            .map(|f| f.kind.clone())
            .unwrap_or_default()
    }

    /// Outcomes so far.
    pub fn counts(&self) -> Counts {
        *lock(&self.inner.counts)
    }

    /// Fault windows opened so far.
    pub fn fault_count(&self) -> usize {
        lock(&self.inner.history).faults.len()
    }

    /// The history, ops sorted by id (invocation order).
    pub fn history(&self) -> History {
        let mut history = lock(&self.inner.history).clone();
        history.ops.sort_by_key(|op| op.id);
        history
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
