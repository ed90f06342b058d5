//! A run's history: every operation a client invoked, when, and what came
//! of it, plus the windows in which faults were active. Checkers read it;
//! the report draws it; `history.jsonl` stores it one record per line.

use serde::{Deserialize, Serialize};

/// One client operation, from invocation to completion.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Op {
    /// Unique within a run, in invocation order.
    pub id: u64,
    /// The logical client that ran it: one ZooKeeper session at a time, and
    /// at most one operation in flight (so a process's ops never overlap).
    pub process: u32,
    /// Nanoseconds since the run started, when the client invoked it.
    pub invoke_ns: u64,
    /// When the client learned the outcome; `None` if it never did (the run
    /// ended first). Such an op is `Unknown`.
    pub complete_ns: Option<u64>,
    /// What was asked.
    pub call: Call,
    /// What came of it.
    pub outcome: Outcome,
}

/// What a client asked, per workload.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "f", rename_all = "snake_case")]
pub enum Call {
    /// Register: `sync` then read key `key` (`Value::Int`, or `Value::None`
    /// while the key was never written).
    Read { key: u32 },
    /// Register: set key `key` to `value`.
    Write { key: u32, value: i64 },
    /// Register: set key `key` to `to` if it holds `from` (a versioned
    /// setData after a read). `Fail` when it did not hold `from`.
    Cas { key: u32, from: i64, to: i64 },
    /// Set: add an element (a persistent create).
    SetAdd { value: i64 },
    /// Set: read every element (`Value::Ints`), after the faults healed.
    SetRead,
    /// Unique ids: a sequential create; the id (`Value::Int`) is the
    /// sequence number ZooKeeper assigned.
    NextId,
    /// Counter: add `delta` (a multi of check(version) and setData).
    CounterAdd { delta: i64 },
    /// Counter: read the total (`Value::Int`).
    CounterRead,
    /// Queue: enqueue `value` (a sequential create holding it).
    Enqueue { value: i64 },
    /// Queue: take the head (`Value::Int`), or `Value::None` when empty; a
    /// multi with a version check, so two takers cannot both take it.
    Dequeue,
    /// Queue: take everything left (`Value::Ints`), after the faults healed.
    Drain,
    /// Sessions: the process's session (id `session`) creates its ephemeral.
    EphemeralCreate { session: i64 },
    /// Sessions: the process closes session `session`.
    SessionClose { session: i64 },
    /// Sessions: a session learned it is expired (`complete_ns == invoke_ns`).
    SessionExpired { session: i64 },
    /// Sessions: list the owners of the ephemerals that exist
    /// (`Value::Ints` of session ids), after the faults healed and every
    /// session that can expire has.
    EphemeralList,
    /// FIFO: the process writes `value` to its own key `key`; values a
    /// process writes increase.
    FifoWrite { key: u32, value: i64 },
    /// FIFO: read key `key` (`Value::Versioned`).
    FifoRead { key: u32 },
    /// Watches: read key `key` and leave a data watch on it
    /// (`Value::Versioned`: the value and the mzxid the watch was set at).
    WatchRead { key: u32 },
    /// Watches: read key `key` without a watch (`Value::Versioned`), to see
    /// whether an event owed for it came first.
    WatchPeek { key: u32 },
    /// Watches: write `value` to key `key` (`Value::Versioned`: the value and
    /// the write's zxid, its new mzxid).
    WatchWrite { key: u32, value: i64 },
    /// Watches: the process observed the watch left by its op `read` fire
    /// (`Value::Versioned` with no value and the event's zxid, -1 where the
    /// server does not send it). `invoke_ns == complete_ns`; the process
    /// looks for events right after each of its own operations completes,
    /// so an event delivered before a reply is observed no later than it.
    WatchFired { key: u32, read: u64 },
}

/// A value an operation returned.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "t", content = "v", rename_all = "snake_case")]
pub enum Value {
    /// Nothing (a write's ok, an absent key, an empty queue).
    None,
    /// One number.
    Int(i64),
    /// Several numbers (a set, a drained queue, session ids).
    Ints(Vec<i64>),
    /// A value with the zxid of the write that produced it (its `mzxid`),
    /// `value` being `None` for an absent key.
    Versioned { value: Option<i64>, zxid: i64 },
}

/// What came of an operation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Outcome {
    /// It took effect, returning this.
    Ok { value: Value },
    /// It certainly took no effect (BadVersion, NoNode, NodeExists, or
    /// refused before it was sent).
    Fail { error: String },
    /// It may or may not have taken effect (connection loss, timeout, a
    /// session expired under it, or never answered).
    Unknown { error: String },
}

impl Outcome {
    /// An ok without a value.
    pub fn ok() -> Outcome {
        Outcome::Ok { value: Value::None }
    }

    /// Whether it took effect for certain.
    pub fn is_ok(&self) -> bool {
        matches!(self, Outcome::Ok { .. })
    }
}

/// A fault the nemesis held active from `start_ns` to `end_ns`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FaultWindow {
    /// What it was, e.g. `kill -9`, `SIGSTOP`, `partition halves`.
    pub kind: String,
    /// The members it hit (0-based).
    pub members: Vec<usize>,
    /// Nanoseconds since the run started.
    pub start_ns: u64,
    /// When it was healed; `None` if it never was.
    pub end_ns: Option<u64>,
}

/// Something that happened at one moment: a line the command under test
/// printed, a leader change.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    /// Nanoseconds since the run started.
    pub at_ns: u64,
    /// Where it comes from, one timeline lane each: `cmd`, `ensemble`.
    pub source: String,
    /// What happened.
    pub text: String,
}

/// Everything a run recorded.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct History {
    /// Operations, in invocation order.
    pub ops: Vec<Op>,
    /// Fault windows, in start order.
    pub faults: Vec<FaultWindow>,
    /// Events, in time order (`zkd-nemesis --exec`).
    #[serde(default)]
    pub events: Vec<Event>,
}
