//! The workloads: what each client process asks of the ensemble, through
//! the stock Rust client (`zookeeper-client`), and how each answer is
//! recorded. An operation whose outcome a client cannot know (connection
//! loss, a timeout) is `Unknown`, and the process then continues under a new
//! process id, as Jepsen's crashed processes do: the old operation may
//! still take effect at any later time.

use crate::recorder::Recorder;
use crate::watching;
use rand::rngs::StdRng;
use rand::Rng;
use std::sync::atomic::{AtomicI64, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;
use zkd_client_tests::nemesis::history::{Call, Outcome, Value};
use zookeeper_client as zk;

/// A workload, with its checker in `zkd_client_tests::nemesis::checker`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Workload {
    /// Read (after sync), write and compare-and-set registers: linearizability.
    Register,
    /// Adds to a set, one final read: no acknowledged add lost.
    Set,
    /// Sequential creates: no id handed out twice.
    UniqueIds,
    /// Increments by multi (version check + setData): the total adds up.
    Counter,
    /// Enqueue by sequential create, dequeue by multi: nothing lost or taken twice.
    Queue,
    /// Sessions with ephemerals: an ephemeral exists iff its session lives.
    Sessions,
    /// Per-session FIFO writes and monotonic reads.
    Fifo,
    /// Data watches: each fires once, in zxid order, before the data it
    /// announces is seen, and none is lost across reconnects.
    Watches,
}

impl Workload {
    /// Every workload.
    pub const ALL: [Workload; 8] = [
        Workload::Register,
        Workload::Set,
        Workload::UniqueIds,
        Workload::Counter,
        Workload::Queue,
        Workload::Sessions,
        Workload::Fifo,
        Workload::Watches,
    ];

    /// The name on the command line.
    pub fn name(self) -> String {
        clap::ValueEnum::to_possible_value(&self)
            .map(|v| v.get_name().to_owned())
            .unwrap_or_default()
    }

    /// The workload's directory.
    pub fn dir(self) -> String {
        format!("/nemesis-{}", self.name())
    }

    /// Whether the workload adds a pinned reader per member (see
    /// [`Shared::writers`]): the register, whose reads are checked for
    /// linearizability, so a member serving stale data after a sync is caught.
    pub fn has_pinned_readers(self) -> bool {
        self == Workload::Register
    }
}

/// Registers per run: few, so operations contend.
pub const KEYS: u32 = 5;
/// Register values: a small range, so compare-and-set sometimes succeeds.
const VALUES: i64 = 5;
/// The longest a client waits for one answer before calling it unknown.
pub const OP_TIMEOUT: Duration = Duration::from_secs(5);
/// The session timeout clients ask for.
pub const SESSION_TIMEOUT: Duration = Duration::from_secs(6);

/// What every process of a run shares.
#[derive(Clone)]
pub struct Shared {
    pub workload: Workload,
    pub connect: String,
    pub rec: Recorder,
    /// Unique values for sets, queues and FIFO writes.
    pub next_value: Arc<AtomicI64>,
    /// Each worker's current process id (FIFO reads pick a key from these).
    pub current: Arc<Vec<AtomicU32>>,
    /// Each member's own address (the final reads read every member's view).
    pub members: Vec<String>,
    /// Workers from this index on are pinned readers, one per member, when
    /// the workload has them. A pinned reader only reads (sync, then read)
    /// through its one member and never fails over: a deposed leader's reads
    /// are seen even while every writer's session on it stalls behind a
    /// write it cannot commit.
    pub writers: u32,
}

impl Shared {
    /// The connect string worker `worker` uses: its one member for a
    /// pinned reader, else the whole ensemble.
    pub fn connect_for(&self, worker: u32) -> &str {
        worker
            .checked_sub(self.writers)
            .and_then(|r| self.members.get(r as usize))
            .map_or(&self.connect, String::as_str)
    }

    /// Whether worker `worker` is a pinned reader.
    pub fn is_pinned_reader(&self, worker: u32) -> bool {
        worker >= self.writers
    }
}

/// Connects a fresh session (bounded); None if the ensemble does not answer.
pub async fn connect(connect: &str) -> Option<zk::Client> {
    let connecting = zk::Client::connector()
        .with_session_timeout(SESSION_TIMEOUT)
        .connect(connect);
    tokio::time::timeout(OP_TIMEOUT, connecting)
        .await
        .ok()?
        .ok()
}

/// Creates the workload's directory and registers (retrying until the
/// ensemble answers, bounded by `limit`).
pub async fn prepare(shared: &Shared, limit: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    let dir = shared.workload.dir();
    while tokio::time::Instant::now() < deadline {
        let Some(client) = connect(&shared.connect).await else {
            continue;
        };
        let mut paths = vec![dir.clone()];
        match shared.workload {
            Workload::Register => paths.extend((0..KEYS).map(|k| format!("{dir}/k{k}"))),
            Workload::Counter => paths.push(format!("{dir}/total")),
            Workload::Watches => paths.extend((0..watching::KEYS).map(|k| format!("{dir}/w{k}"))),
            _ => {}
        }
        let mut done = true;
        for path in &paths {
            let create = client.create(
                path,
                b"",
                &zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all()),
            );
            match tokio::time::timeout(OP_TIMEOUT, create).await {
                Ok(Ok(_)) | Ok(Err(zk::Error::NodeExists)) => {}
                _ => done = false,
            }
        }
        if done {
            return true;
        }
    }
    false
}

/// How an error counts: certainly without effect, or maybe with.
fn outcome_of(e: &zk::Error) -> Outcome {
    let error = e.to_string();
    match e {
        zk::Error::BadVersion
        | zk::Error::NoNode
        | zk::Error::NodeExists
        | zk::Error::NotEmpty
        | zk::Error::BadArguments(_) => Outcome::Fail { error },
        _ => Outcome::Unknown { error },
    }
}

pub fn parse(data: &[u8]) -> Option<i64> {
    std::str::from_utf8(data).ok()?.parse().ok()
}

/// One logical client: its current process id and session.
pub struct Process {
    pub id: u32,
    pub client: Option<zk::Client>,
    /// Sessions opened so far.
    sessions: u32,
    /// The watches workload's watches not yet fired.
    pub watches: Vec<watching::Watch>,
}

impl Process {
    /// Worker `worker`'s process before its first session.
    pub fn new(worker: u32) -> Process {
        Process {
            id: worker,
            client: None,
            sessions: 0,
            watches: Vec::new(),
        }
    }
}

/// One process's loop until `until`: generate, run, record. Returns the
/// process with its last session (the sessions workload checks it at the end).
pub async fn run_process(
    shared: Shared,
    worker: u32,
    stride: u32,
    seed: u64,
    until: tokio::time::Instant,
) -> Process {
    if shared.workload == Workload::Watches {
        return watching::run_process(shared, worker, stride, seed, until).await;
    }
    let mut rng: StdRng = rand::SeedableRng::seed_from_u64(seed);
    let mut me = Process::new(worker);
    while tokio::time::Instant::now() < until {
        let c = match me.client.clone().filter(alive) {
            Some(c) => c,
            None => match open_session(&shared, &mut me, stride).await {
                Some(c) => c,
                None => {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                }
            },
        };
        if shared.workload == Workload::Sessions {
            probe_session(&shared, &mut me, &c).await;
            if rng.gen_ratio(1, 10) {
                // Close this session now and then; the next turn opens another.
                let p = shared.rec.invoke(
                    me.id,
                    Call::SessionClose {
                        session: c.session_id().0,
                    },
                );
                me.client = None;
                drop(c);
                shared.rec.complete(p, Outcome::ok());
                me.id += stride;
            }
        } else {
            let call = if shared.is_pinned_reader(worker) {
                Call::Read {
                    key: rng.gen_range(0..KEYS),
                }
            } else {
                generate(&shared, &mut rng, me.id, stride)
            };
            let pending = shared.rec.invoke(me.id, call.clone());
            let outcome = execute(&shared, &c, &call).await;
            let unknown = matches!(outcome, Outcome::Unknown { .. });
            shared.rec.complete(pending, outcome);
            if unknown {
                me.id += stride;
                shared.current[(me.id % stride) as usize].store(me.id, Ordering::Relaxed);
            }
        }
        tokio::time::sleep(Duration::from_millis(rng.gen_range(0..20))).await;
    }
    me
}

pub fn alive(c: &zk::Client) -> bool {
    !matches!(
        c.state(),
        zk::SessionState::Expired | zk::SessionState::Closed
    )
}

/// A new session for `me`; in the sessions workload it creates its ephemeral.
/// A process's guarantees (FIFO, monotonic reads) hold within one session,
/// so every session after the first runs under a new process id.
pub async fn open_session(shared: &Shared, me: &mut Process, stride: u32) -> Option<zk::Client> {
    let c = connect(shared.connect_for(me.id % stride)).await?;
    if me.sessions > 0 {
        me.id += stride;
        shared.current[(me.id % stride) as usize].store(me.id, Ordering::Relaxed);
    }
    me.sessions += 1;
    me.client = Some(c.clone());
    if shared.workload == Workload::Sessions {
        let session = c.session_id().0;
        let p = shared.rec.invoke(me.id, Call::EphemeralCreate { session });
        let path = format!("{}/{session}", shared.workload.dir());
        let ephemeral = zk::CreateMode::Ephemeral.with_acls(zk::Acls::anyone_all());
        let outcome = finish(c.create(&path, b"", &ephemeral))
            .await
            .map_or_else(|e| e, |_| Outcome::ok());
        let unknown = matches!(outcome, Outcome::Unknown { .. });
        shared.rec.complete(p, outcome);
        if unknown {
            me.id += stride;
        }
    }
    Some(c)
}

/// Asks after the session's ephemeral: a session found expired is recorded
/// and dropped. Nothing else is recorded; the final list is what is checked.
pub async fn probe_session(shared: &Shared, me: &mut Process, c: &zk::Client) {
    let session = c.session_id().0;
    let path = format!("{}/{session}", shared.workload.dir());
    let probe = tokio::time::timeout(OP_TIMEOUT, c.check_stat(&path)).await;
    if matches!(probe, Ok(Err(zk::Error::SessionExpired))) || c.state() == zk::SessionState::Expired
    {
        shared.rec.event(me.id, Call::SessionExpired { session });
        me.client = None;
    }
}

fn generate(shared: &Shared, rng: &mut StdRng, process: u32, stride: u32) -> Call {
    let key = rng.gen_range(0..KEYS);
    let fresh = || shared.next_value.fetch_add(1, Ordering::Relaxed);
    match shared.workload {
        Workload::Register => match rng.gen_range(0..3) {
            0 => Call::Read { key },
            1 => Call::Write {
                key,
                value: rng.gen_range(0..VALUES),
            },
            _ => Call::Cas {
                key,
                from: rng.gen_range(0..VALUES),
                to: rng.gen_range(0..VALUES),
            },
        },
        Workload::Set => Call::SetAdd { value: fresh() },
        Workload::UniqueIds => Call::NextId,
        Workload::Counter => match rng.gen_range(0..4) {
            0 => Call::CounterRead,
            _ => Call::CounterAdd {
                delta: rng.gen_range(1..5),
            },
        },
        Workload::Queue => match rng.gen_range(0..2) {
            0 => Call::Enqueue { value: fresh() },
            _ => Call::Dequeue,
        },
        // Sessions are opened, probed and closed by the loop itself.
        Workload::Sessions | Workload::Watches => {
            unreachable!("the sessions and watches workloads run loops of their own")
        }
        // A process writes only its own key; it reads any worker's current one.
        Workload::Fifo => match rng.gen_range(0..2) {
            0 => Call::FifoWrite {
                key: process,
                value: fresh(),
            },
            _ => {
                let other = rng.gen_range(0..stride);
                Call::FifoRead {
                    key: shared.current[other as usize].load(Ordering::Relaxed),
                }
            }
        },
    }
}

/// Awaits `f` for at most [`OP_TIMEOUT`]; an error is its outcome.
pub async fn finish<T>(
    f: impl std::future::Future<Output = Result<T, zk::Error>>,
) -> Result<T, Outcome> {
    match tokio::time::timeout(OP_TIMEOUT, f).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(outcome_of(&e)),
        Err(_) => Err(Outcome::Unknown {
            error: "timed out".into(),
        }),
    }
}

/// A read-only call's failure has no effect.
pub fn read_failed(o: Outcome) -> Outcome {
    match o {
        Outcome::Unknown { error } | Outcome::Fail { error } => Outcome::Fail { error },
        ok => ok,
    }
}

/// Runs one call.
pub async fn execute(shared: &Shared, c: &zk::Client, call: &Call) -> Outcome {
    let dir = shared.workload.dir();
    let result = match call {
        Call::Read { key } => read_key(c, &format!("{dir}/k{key}")).await,
        Call::Write { key, value } => {
            let path = format!("{dir}/k{key}");
            let data = value.to_string();
            finish(c.set_data(&path, data.as_bytes(), None))
                .await
                .map(|_| Value::None)
        }
        Call::Cas { key, from, to } => cas(c, &format!("{dir}/k{key}"), *from, *to).await,
        Call::SetAdd { value } => {
            let path = format!("{dir}/v{value}");
            finish(c.create(&path, b"", &persistent()))
                .await
                .map(|_| Value::None)
        }
        Call::SetRead => set_read(c, &dir).await,
        Call::NextId => {
            let path = format!("{dir}/id-");
            let created = finish(c.create(&path, b"", &sequential())).await;
            created.map(|(_, seq)| Value::Int(seq.into_i64()))
        }
        Call::CounterAdd { delta } => counter_add(c, &format!("{dir}/total"), *delta).await,
        Call::CounterRead => {
            let read = read_key(c, &format!("{dir}/total")).await;
            read.map(|v| Value::Int(int_of(&v).unwrap_or(0)))
        }
        Call::Enqueue { value } => {
            let (path, data) = (format!("{dir}/q-"), value.to_string());
            finish(c.create(&path, data.as_bytes(), &sequential()))
                .await
                .map(|_| Value::None)
        }
        Call::Dequeue => dequeue(c, &dir).await,
        Call::WatchWrite { key, value } => match watching::write(shared, c, *key, *value).await {
            Outcome::Ok { value } => Ok(value),
            other => Err(other),
        },
        Call::EphemeralList => ephemeral_list(c, &dir).await,
        Call::FifoWrite { key, value } => fifo_write(c, &format!("{dir}/p{key}"), *value).await,
        Call::FifoRead { key } => {
            let path = format!("{dir}/p{key}");
            let read = finish(c.get_data(&path)).await.map_err(read_failed);
            read.map(|(data, stat)| Value::Versioned {
                value: parse(&data),
                zxid: stat.mzxid,
            })
        }
        Call::Drain
        | Call::EphemeralCreate { .. }
        | Call::SessionClose { .. }
        | Call::SessionExpired { .. }
        | Call::WatchRead { .. }
        | Call::WatchPeek { .. }
        | Call::WatchFired { .. } => Err(Outcome::Fail {
            error: "not a generated call".into(),
        }),
    };
    match result {
        Ok(value) => Outcome::Ok { value },
        Err(outcome) => outcome,
    }
}

fn persistent() -> zk::CreateOptions<'static> {
    zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all())
}

fn sequential() -> zk::CreateOptions<'static> {
    zk::CreateMode::PersistentSequential.with_acls(zk::Acls::anyone_all())
}

/// An `Int` value's number.
fn int_of(value: &Value) -> Option<i64> {
    match value {
        Value::Int(v) => Some(*v),
        _ => None,
    }
}

/// A linearizable read of a register: sync, then read.
async fn read_key(c: &zk::Client, path: &str) -> Result<Value, Outcome> {
    finish(c.sync(path)).await.map_err(read_failed)?;
    let (data, _) = finish(c.get_data(path)).await.map_err(read_failed)?;
    Ok(parse(&data).map_or(Value::None, Value::Int))
}

/// Sets the register to `to` if it holds `from`, by its version.
async fn cas(c: &zk::Client, path: &str, from: i64, to: i64) -> Result<Value, Outcome> {
    let (data, stat) = finish(c.get_data(path)).await.map_err(read_failed)?;
    if parse(&data) != Some(from) {
        return Err(Outcome::Fail {
            error: "value differs".into(),
        });
    }
    finish(c.set_data(path, to.to_string().as_bytes(), Some(stat.version))).await?;
    Ok(Value::None)
}

/// The set's members. The set's node itself gone (every write lost, as
/// after a power cut with no fsync) reads as the empty set, so the checker
/// sees each acknowledged add lost.
async fn set_read(c: &zk::Client, dir: &str) -> Result<Value, Outcome> {
    let listed = tokio::time::timeout(OP_TIMEOUT, async {
        c.sync(dir).await?;
        c.list_children(dir).await
    })
    .await;
    let children = match listed {
        Ok(Ok(children)) => children,
        Ok(Err(zk::Error::NoNode)) => Vec::new(),
        Ok(Err(e)) => return Err(read_failed(outcome_of(&e))),
        Err(_) => {
            return Err(Outcome::Fail {
                error: "timed out".into(),
            })
        }
    };
    let mut values: Vec<i64> = children
        .iter()
        .filter_map(|n| n.strip_prefix('v')?.parse().ok())
        .collect();
    values.sort_unstable();
    Ok(Value::Ints(values))
}

/// Adds `delta` to the counter: a multi whose version check fails if
/// another add came between the read and the write.
async fn counter_add(c: &zk::Client, path: &str, delta: i64) -> Result<Value, Outcome> {
    let (data, stat) = finish(c.get_data(path)).await.map_err(read_failed)?;
    let next = parse(&data).unwrap_or(0) + delta;
    let mut multi = c.new_multi_writer();
    multi
        .add_check_version(path, stat.version)
        .map_err(|e| outcome_of(&e))?;
    multi
        .add_set_data(path, next.to_string().as_bytes(), Some(stat.version))
        .map_err(|e| outcome_of(&e))?;
    match tokio::time::timeout(OP_TIMEOUT, multi.commit()).await {
        Ok(Ok(_)) => Ok(Value::None),
        Ok(Err(e)) => Err(outcome_of(&zk::Error::from(e))),
        Err(_) => Err(Outcome::Unknown {
            error: "timed out".into(),
        }),
    }
}

/// The session ids owning an ephemeral under `dir`, sorted.
async fn ephemeral_list(c: &zk::Client, dir: &str) -> Result<Value, Outcome> {
    finish(c.sync(dir)).await.map_err(read_failed)?;
    let children = finish(c.list_children(dir)).await.map_err(read_failed)?;
    let mut owners: Vec<i64> = children.iter().filter_map(|n| n.parse().ok()).collect();
    owners.sort_unstable();
    Ok(Value::Ints(owners))
}

/// Writes this process's own key, creating it the first time (only this
/// process writes it: no create can race it).
async fn fifo_write(c: &zk::Client, path: &str, value: i64) -> Result<Value, Outcome> {
    let data = value.to_string();
    match finish(c.set_data(path, data.as_bytes(), None)).await {
        Err(Outcome::Fail { .. }) => {
            finish(c.create(path, data.as_bytes(), &persistent())).await?;
        }
        other => {
            other?;
        }
    }
    Ok(Value::None)
}

/// Takes the queue's head: the lowest sequence number, removed by a multi
/// whose version check makes two takers of the same item impossible; "empty"
/// only if the queue was empty at a point within the call.
async fn dequeue(c: &zk::Client, dir: &str) -> Result<Value, Outcome> {
    // Without the sync a lagging member may answer "empty" for a queue that
    // is not: ZooKeeper's reads are only sequentially consistent.
    finish(c.sync(dir)).await.map_err(read_failed)?;
    let mut children = finish(c.list_children(dir)).await.map_err(read_failed)?;
    children.sort();
    for child in children {
        let path = format!("{dir}/{child}");
        let (data, stat) = match finish(c.get_data(&path)).await {
            Ok(found) => found,
            Err(Outcome::Fail { .. }) => continue,
            Err(other) => return Err(read_failed(other)),
        };
        let mut multi = c.new_multi_writer();
        multi
            .add_check_version(&path, stat.version)
            .map_err(|e| outcome_of(&e))?;
        multi
            .add_delete(&path, Some(stat.version))
            .map_err(|e| outcome_of(&e))?;
        match tokio::time::timeout(OP_TIMEOUT, multi.commit()).await {
            Ok(Ok(_)) => return Ok(parse(&data).map_or(Value::None, Value::Int)),
            Ok(Err(e)) => match outcome_of(&zk::Error::from(e)) {
                // Someone else took it first: try the next one.
                Outcome::Fail { .. } => continue,
                other => return Err(other),
            },
            Err(_) => {
                return Err(Outcome::Unknown {
                    error: "timed out".into(),
                })
            }
        }
    }
    Ok(Value::None)
}
