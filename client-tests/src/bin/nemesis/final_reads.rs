//! After the last heal: the reads each checker needs (the whole set, the
//! counter's total, the queue drained, the ephemerals left), each retried
//! until the ensemble answers, within a bound.

use crate::watching;
use crate::workload::{self, Process, Shared, Workload, SESSION_TIMEOUT};
use std::sync::atomic::Ordering;
use std::time::Duration;
use zkd_client_tests::nemesis::history::{Call, Outcome, Value};
use zookeeper_client as zk;

/// The process id of the final reads (no worker reaches it).
const FINAL: u32 = 1_000_000;

/// How long the final reads may keep retrying.
const LIMIT: Duration = Duration::from_secs(60);

/// Runs the final reads of `shared.workload`; `processes` are the workers
/// as they ended (the sessions workload checks their sessions).
pub async fn run(shared: &Shared, mut processes: Vec<Process>) {
    if matches!(
        shared.workload,
        Workload::Register | Workload::Set | Workload::Counter
    ) {
        // Every member's own view, one after the other: a member that kept
        // a txn the others truncated, or lacks one they have, shows in its
        // read even when a client would only rarely land on it.
        for member in &shared.members {
            let deadline = tokio::time::Instant::now() + LIMIT;
            if let Some(client) = connect(member, deadline).await {
                reads(shared, &client, deadline).await;
            }
        }
        return;
    }
    let deadline = tokio::time::Instant::now() + LIMIT;
    let Some(client) = connect(&shared.connect, deadline).await else {
        return;
    };
    match shared.workload {
        Workload::Queue => drain(shared, &client, deadline).await,
        Workload::Sessions => sessions(shared, &client, processes, deadline).await,
        Workload::Watches => {
            // One more write to every key, so every watch left has a reason to fire.
            for key in 0..watching::KEYS {
                let value = shared.next_value.fetch_add(1, Ordering::Relaxed);
                until_ok(shared, &client, Call::WatchWrite { key, value }, deadline).await;
            }
            watching::collect(&shared.rec, &mut processes).await;
            // Each live session's last op comes after the final writes, so a
            // watch that never fired is a lost one, not a process that stopped.
            close_sessions(shared, processes);
        }
        Workload::Register | Workload::Set | Workload::Counter => unreachable!("read above"),
        Workload::UniqueIds | Workload::Fifo => {}
    }
}

/// The reads of the register, set and counter through one client.
async fn reads(shared: &Shared, client: &zk::Client, deadline: tokio::time::Instant) {
    let calls: Vec<Call> = match shared.workload {
        Workload::Register => (0..workload::KEYS).map(|key| Call::Read { key }).collect(),
        Workload::Set => vec![Call::SetRead],
        Workload::Counter => vec![Call::CounterRead],
        _ => Vec::new(),
    };
    for call in calls {
        until_ok(shared, client, call, deadline).await;
    }
}

/// Connects to `connect` (retrying until `deadline`).
async fn connect(connect: &str, deadline: tokio::time::Instant) -> Option<zk::Client> {
    while tokio::time::Instant::now() < deadline {
        if let Some(c) = workload::connect(connect).await {
            return Some(c);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    None
}

/// Runs `call` until it succeeds (each attempt recorded) or `deadline`
/// passes; its value if it did.
async fn until_ok(
    shared: &Shared,
    client: &zk::Client,
    call: Call,
    deadline: tokio::time::Instant,
) -> Option<Value> {
    while tokio::time::Instant::now() < deadline {
        let pending = shared.rec.invoke(FINAL, call.clone());
        let outcome = workload::execute(shared, client, &call).await;
        let value = match &outcome {
            Outcome::Ok { value } => Some(value.clone()),
            _ => None,
        };
        shared.rec.complete(pending, outcome);
        if value.is_some() {
            return value;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    None
}

/// Dequeues until the queue is empty, then records the (empty) drain.
async fn drain(shared: &Shared, client: &zk::Client, deadline: tokio::time::Instant) {
    loop {
        match until_ok(shared, client, Call::Dequeue, deadline).await {
            Some(Value::Int(_)) => continue,
            Some(_) => break,
            None => return,
        }
    }
    let pending = shared.rec.invoke(FINAL, Call::Drain);
    shared.rec.complete(
        pending,
        Outcome::Ok {
            value: Value::Ints(Vec::new()),
        },
    );
}

/// Waits out every session that can expire, has each live one confirm it
/// lives, lists the ephemerals, then closes the live sessions.
async fn sessions(
    shared: &Shared,
    client: &zk::Client,
    processes: Vec<Process>,
    deadline: tokio::time::Instant,
) {
    tokio::time::sleep(2 * SESSION_TIMEOUT).await;
    let mut live = Vec::new();
    for mut p in processes {
        if let Some(c) = p.client.clone() {
            workload::probe_session(shared, &mut p, &c).await;
        }
        if p.client.is_some() {
            live.push(p);
        }
    }
    until_ok(shared, client, Call::EphemeralList, deadline).await;
    close_sessions(shared, live);
}

/// Closes every process's live session, recording it.
fn close_sessions(shared: &Shared, processes: Vec<Process>) {
    for p in processes {
        if let Some(c) = p.client {
            let session = c.session_id().0;
            let pending = shared.rec.invoke(p.id, Call::SessionClose { session });
            drop(c);
            shared.rec.complete(pending, Outcome::ok());
        }
    }
}
