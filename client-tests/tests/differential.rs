//! Differential test: seeded random operation sequences from several sessions
//! (creates of every mode, deletes, setData, multi with failing ops, ACL ops,
//! watches) applied to zkd and to Apache ZooKeeper 3.8 give the same results,
//! Stats (zxids included) and watch events.
//!
//! Known 3.8-versus-3.9 differences, normalised here and nowhere else:
//! - notification zxid: 3.9 sends the txn zxid (ZOOKEEPER-4655), 3.8 sends -1,
//!   so event zxids are not compared;
//! - multi results for create2/createContainer/createTTL: 3.9 answers type 15
//!   with a Stat (ZOOKEEPER-4026), 3.8 answers type 1 (path only) for create2,
//!   so a multi create's Stat is compared only when both servers sent one;
//! - `exists` needs READ and notifications are READ-filtered since 3.9.2
//!   (ZOOKEEPER-2590, -4799): the generator gives every node world READ, so
//!   these rules never come into play;
//! - ctime/mtime are wall-clock and differ between runs: not compared.
//!
//! Beyond the stock client, a raw session sends what that client cannot: multis
//! whose create op has flags that are no CreateMode (3.8 answers BADARGUMENTS
//! for that op; see create_modes.rs for 3.9), and whoAmI. Sessions hold several
//! digest identities added in a seeded order, so the order of ids that an
//! `auth` ACL expands to, and that whoAmI and getEphemerals list, is compared
//! as a list.
//!
//! The same workload also runs against a 3-member zkd ensemble and a 3-member
//! ZooKeeper ensemble, session `k` connected to member `k % 3` only (the raw
//! session to member 0), so writes are forwarded by followers and watches fire
//! on every member. A member may answer a read before it has applied a txn
//! written through another member (ZooKeeper promises sequential consistency
//! per session only), so before an op goes to another member than the last
//! writes did, the harness waits until every member's `srvr` reports the same
//! last zxid; then each read is deterministic. Ops on the member that wrote
//! last go out at once, which checks that a member applies a write before it
//! answers it (a session reads its own writes, and so do the others there).
//!
//! One intended ensemble difference, avoided rather than normalised:
//! - zkd's `sync` is a quorum round that consumes a zxid, which is how it makes
//!   read-after-sync linearizable (ZOOKEEPER-1675); ZooKeeper's consumes none.
//!   A sync would shift every later zxid and Stat zxid field on zkd only, so
//!   the op mix has no sync and the settling above polls `srvr` instead,
//!   which writes nothing. Zxids are therefore compared exactly, as in the
//!   standalone test.
//!
//! Nothing else is normalised for ensembles, except what each run picks at
//! random: the port numbers in `/zookeeper/config`'s `server.N` lines.
//!
//! Every seed runs; a failure lists each diverging seed's first divergence with
//! a command that replays that seed alone.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use zkd_client_tests::oracle::ZooKeeperProcess;
use zkd_client_tests::process::four_letter_word;
use zkd_client_tests::raw::RawClient;
use zkd_client_tests::{within, ServerOptions, ZkdProcess};
use zkd_protocol::records::{
    Acl, AuthPacket, CreateRequest, DeleteRequest, MultiOp, MultiRequest, MultiResponse,
    SetDataRequest, WhoAmIResponse,
};
use zkd_protocol::request::ClientRequest;
use zkd_protocol::{OpCode, Record};
use zookeeper_client as zk;

use comparison::{compare, masked_ports};
use ops::{acl_list, create_options, Op};

const SESSIONS: usize = 3;
const OPS_PER_SEED: usize = 400;
/// Identities that session 1 and the raw session take on, in a seeded order.
const USERS: [&str; 6] = ["u1:p1", "u2:p2", "u3:p3", "alice:a", "bob:b", "carol:c"];

type Events = Arc<Mutex<Vec<String>>>;

/// One server (or ensemble) under test with its sessions.
struct Target {
    clients: Vec<zk::Client>,
    sessions: BTreeMap<i64, usize>,
    events: Vec<Events>,
    recursive: Events,
    raw: Mutex<RawClient>,
    /// Every member's client port; [`Target::settle`] polls them.
    ports: Vec<u16>,
}

/// A seeded choice of identities, in the order they are added.
fn identities(rng: &mut StdRng) -> Vec<&'static str> {
    let mut pool = USERS.to_vec();
    let n = rng.gen_range(1..=pool.len());
    (0..n)
        .map(|_| pool.remove(rng.gen_range(0..pool.len())))
        .collect()
}

impl Target {
    /// Opens the sessions, session `k` on member `k % n` only (the raw
    /// session is number [`SESSIONS`]), with their identities and the
    /// recursive watch.
    async fn connect(ports: &[u16], seed: u64) -> Target {
        Target::open(ports, seed, ([20_000; SESSIONS], 40_000), false).await
    }

    /// [`Target::connect`], with sessions of `timeouts` (ms) and the raw one
    /// of `raw_ms`, left to expire when dropped (as a killed client's are),
    /// to outlive the server they were opened on.
    async fn connect_for(
        ports: &[u16],
        seed: u64,
        timeouts: [u64; SESSIONS],
        raw_ms: i32,
    ) -> Target {
        Target::open(ports, seed, (timeouts, raw_ms), true).await
    }

    async fn open(
        ports: &[u16],
        seed: u64,
        (timeouts, raw_ms): ([u64; SESSIONS], i32),
        detached: bool,
    ) -> Target {
        let addr = |k: usize| format!("127.0.0.1:{}", ports[k % ports.len()]);
        let mut clients = Vec::new();
        let mut sessions = BTreeMap::new();
        for (i, timeout) in timeouts.into_iter().enumerate() {
            let timeout = Duration::from_millis(timeout);
            let c = match detached {
                true => zkd_client_tests::connect_detached(&addr(i), timeout).await,
                false => zkd_client_tests::connect(&addr(i), timeout).await,
            };
            sessions.insert(c.session_id().0, i);
            clients.push(c);
        }
        within(clients[0].auth("digest", b"user:pass"))
            .await
            .unwrap();
        let mut rng = StdRng::seed_from_u64(seed ^ 0xa17);
        for user in identities(&mut rng) {
            within(clients[1].auth("digest", user.as_bytes()))
                .await
                .unwrap();
        }
        let (mut raw, _) = RawClient::new_session(ports[SESSIONS % ports.len()], raw_ms);
        for user in identities(&mut rng) {
            raw.send_request(
                -4,
                &ClientRequest::Auth(AuthPacket {
                    r#type: 0,
                    scheme: "digest".into(),
                    auth: user.as_bytes().to_vec().into(),
                }),
            );
            raw.recv();
        }
        let recursive: Events = Arc::default();
        let mut w = within(clients[2].watch("/", zk::AddWatchMode::PersistentRecursive))
            .await
            .unwrap();
        let sink = recursive.clone();
        tokio::spawn(async move {
            loop {
                let ev = w.changed().await;
                if ev.event_type == zk::EventType::Session {
                    break;
                }
                sink.lock()
                    .unwrap()
                    .push(format!("{:?} {}", ev.event_type, ev.path));
            }
        });
        Target {
            clients,
            sessions,
            events: (0..SESSIONS).map(|_| Events::default()).collect(),
            recursive,
            raw: Mutex::new(raw),
            ports: ports.to_vec(),
        }
    }

    /// Forgets the events heard so far (the import test's expiries, whose
    /// order within a session follows hash sets ZooKeeper rebuilt on load).
    fn forget_events(&self) {
        self.events.iter().for_each(|e| e.lock().unwrap().clear());
        self.recursive.lock().unwrap().clear();
    }

    /// Waits (bounded) until every member has applied the same last txn
    /// (`srvr`'s Zxid), so the next op reads the same state on whichever
    /// member its session is on. Adds no txn, unlike a `sync` (see the
    /// module doc).
    async fn settle(&self) {
        if self.ports.len() < 2 {
            return;
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let zxids: Vec<Option<String>> =
                tokio::task::block_in_place(|| self.ports.iter().map(|p| last_zxid(*p)).collect());
            if zxids[0].is_some() && zxids.iter().all(|z| *z == zxids[0]) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "members did not converge within 10 s: last zxids {zxids:?}"
            );
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    /// One raw request; the reply's error code and body.
    fn raw_call(&self, request: &ClientRequest) -> (i32, bytes::Bytes) {
        let mut raw = self.raw.lock().unwrap();
        let (h, body) = tokio::task::block_in_place(|| raw.call(1, request));
        (h.err, body)
    }

    fn bad_multi(&self, ops: &[Op], bad: usize, flags: i32) -> String {
        let mut ops = ops
            .iter()
            .enumerate()
            .map(|(i, op)| match op {
                Op::Create { path, data, .. } => MultiOp::Create(
                    OpCode::Create,
                    CreateRequest {
                        path: path.clone(),
                        data: Some(data.clone().into()),
                        acl: vec![Acl::world(31)],
                        flags: if i == bad { flags } else { 0 },
                    },
                ),
                Op::Delete { path, version, .. } => MultiOp::Delete(DeleteRequest {
                    path: path.clone(),
                    version: version.unwrap_or(-1),
                }),
                Op::SetData {
                    path,
                    data,
                    version,
                    ..
                } => MultiOp::SetData(SetDataRequest {
                    path: path.clone(),
                    data: Some(data.clone().into()),
                    version: version.unwrap_or(-1),
                }),
                _ => unreachable!("only writes in a multi"),
            })
            .collect::<Vec<_>>();
        // The op meant to be bad must be a create.
        if !matches!(ops[bad], MultiOp::Create(..)) {
            ops[bad] = MultiOp::Create(
                OpCode::Create,
                CreateRequest {
                    path: "/a".into(),
                    data: None,
                    acl: vec![Acl::world(31)],
                    flags,
                },
            );
        }
        let (err, mut body) = self.raw_call(&ClientRequest::Multi(MultiRequest { ops }));
        if err != 0 {
            return format!("error {err}");
        }
        format!("{:?}", MultiResponse::decode(&mut body).map(|r| r.results))
    }

    fn who_am_i(&self) -> String {
        let (err, mut body) = self.raw_call(&ClientRequest::WhoAmI);
        match WhoAmIResponse::decode(&mut body) {
            Ok(r) if err == 0 => format!("{:?}", r.client_info),
            _ => format!("error {err}"),
        }
    }

    fn stat(&self, st: &zk::Stat) -> String {
        let owner = match st.ephemeral_owner {
            0 => "-".to_owned(),
            id => self
                .sessions
                .get(&id)
                .map_or_else(|| format!("?{id:x}"), |s| format!("s{s}")),
        };
        format!(
            "czxid={:#x} mzxid={:#x} pzxid={:#x} v={} cv={} av={} owner={owner} len={} kids={}",
            st.czxid,
            st.mzxid,
            st.pzxid,
            st.version,
            st.cversion,
            st.aversion,
            st.data_length,
            st.num_children
        )
    }

    fn watch(&self, s: usize, w: zk::OneshotWatcher) {
        let sink = self.events[s].clone();
        tokio::spawn(async move {
            let ev = w.changed().await;
            if ev.event_type != zk::EventType::Session {
                sink.lock()
                    .unwrap()
                    .push(format!("{:?} {}", ev.event_type, ev.path));
            }
        });
    }

    async fn exec(&self, op: &Op) -> String {
        match op {
            Op::Create {
                s,
                path,
                data,
                mode,
                acl,
            } => {
                let acls = acl_list(*acl);
                let opts = create_options(*mode, &acls);
                let p = if matches!(mode, 2 | 3) {
                    format!("{path}-")
                } else {
                    path.clone()
                };
                match within(self.clients[*s].create(&p, data, &opts)).await {
                    Ok((st, seq)) => format!(
                        "created {p}{} {}",
                        if matches!(mode, 2 | 3) {
                            seq.to_string()
                        } else {
                            String::new()
                        },
                        self.stat(&st)
                    ),
                    Err(e) => format!("{e:?}"),
                }
            }
            Op::Delete { s, path, version } => format!(
                "{:?}",
                within(self.clients[*s].delete(path, *version)).await
            ),
            Op::SetData {
                s,
                path,
                data,
                version,
            } => match within(self.clients[*s].set_data(path, data, *version)).await {
                Ok(st) => self.stat(&st),
                Err(e) => format!("{e:?}"),
            },
            Op::GetData {
                s,
                path,
                watch: true,
            } => match within(self.clients[*s].get_and_watch_data(path)).await {
                Ok((d, st, w)) => {
                    self.watch(*s, w);
                    format!("{d:?} {}", self.stat(&st))
                }
                Err(e) => format!("{e:?}"),
            },
            Op::GetData {
                s,
                path,
                watch: false,
            } => match within(self.clients[*s].get_data(path)).await {
                Ok((d, st)) => format!("{d:?} {}", self.stat(&st)),
                Err(e) => format!("{e:?}"),
            },
            Op::Exists {
                s,
                path,
                watch: true,
            } => match within(self.clients[*s].check_and_watch_stat(path)).await {
                Ok((st, w)) => {
                    self.watch(*s, w);
                    st.map_or("none".into(), |st| self.stat(&st))
                }
                Err(e) => format!("{e:?}"),
            },
            Op::Exists {
                s,
                path,
                watch: false,
            } => match within(self.clients[*s].check_stat(path)).await {
                Ok(st) => st.map_or("none".into(), |st| self.stat(&st)),
                Err(e) => format!("{e:?}"),
            },
            Op::Children { s, path, watch } => {
                let c = &self.clients[*s];
                let result = if *watch {
                    within(c.get_and_watch_children(path))
                        .await
                        .map(|(k, st, w)| {
                            self.watch(*s, w);
                            (k, st)
                        })
                } else {
                    within(c.get_children(path)).await
                };
                match result {
                    Ok((mut kids, st)) => {
                        kids.sort();
                        format!("{kids:?} {}", self.stat(&st))
                    }
                    Err(e) => format!("{e:?}"),
                }
            }
            Op::GetAcl { s, path } => match within(self.clients[*s].get_acl(path)).await {
                Ok((acl, st)) => format!("{acl:?} {}", self.stat(&st)),
                Err(e) => format!("{e:?}"),
            },
            Op::SetAcl {
                s,
                path,
                acl,
                version,
            } => match within(self.clients[*s].set_acl(path, &acl_list(*acl), *version)).await {
                Ok(st) => self.stat(&st),
                Err(e) => format!("{e:?}"),
            },
            Op::Multi { s, ops } => self.multi(*s, ops).await,
            Op::MultiRead { s, reads } => {
                let mut r = self.clients[*s].new_multi_reader();
                for (data, path) in reads {
                    if *data {
                        r.add_get_data(path).unwrap()
                    } else {
                        r.add_get_children(path).unwrap()
                    }
                }
                match within(r.commit()).await {
                    Ok(results) => results
                        .iter()
                        .map(|res| match res {
                            zk::MultiReadResult::Data { data, stat } => {
                                format!("{data:?} {}", self.stat(stat))
                            }
                            zk::MultiReadResult::Children { children } => {
                                let mut k = children.clone();
                                k.sort();
                                format!("{k:?}")
                            }
                            zk::MultiReadResult::Error { err } => format!("{err:?}"),
                            _ => "other".into(),
                        })
                        .collect::<Vec<_>>()
                        .join("; "),
                    Err(e) => format!("{e:?}"),
                }
            }
            Op::Count { s, path } => format!(
                "{:?}",
                within(self.clients[*s].count_descendants_number(path)).await
            ),
            // In ZooKeeper's (hash set) order, which clients see as a list.
            Op::Ephemerals { s } => match within(self.clients[*s].list_ephemerals("/")).await {
                Ok(e) => format!("{e:?}"),
                Err(e) => format!("{e:?}"),
            },
            Op::BadMulti { ops, bad, flags } => self.bad_multi(ops, *bad, *flags),
            Op::WhoAmI => self.who_am_i(),
        }
    }

    async fn multi(&self, s: usize, ops: &[Op]) -> String {
        let acl_lists: Vec<Vec<zk::Acl>> = ops
            .iter()
            .map(|op| {
                if let Op::Create { acl, .. } = op {
                    acl_list(*acl)
                } else {
                    Vec::new()
                }
            })
            .collect();
        let opts: Vec<Option<zk::CreateOptions>> = ops
            .iter()
            .zip(&acl_lists)
            .map(|(op, acls)| {
                if let Op::Create { mode, .. } = op {
                    Some(create_options(*mode, acls))
                } else {
                    None
                }
            })
            .collect();
        let mut w = self.clients[s].new_multi_writer();
        for (op, opt) in ops.iter().zip(&opts) {
            match op {
                Op::Create {
                    path, data, mode, ..
                } => {
                    let p = if matches!(mode, 2 | 3) {
                        format!("{path}-")
                    } else {
                        path.clone()
                    };
                    w.add_create(&p, data, opt.as_ref().unwrap()).unwrap();
                }
                Op::Delete { path, version, .. } => w.add_delete(path, *version).unwrap(),
                Op::SetData {
                    path,
                    data,
                    version,
                    ..
                } => w.add_set_data(path, data, *version).unwrap(),
                _ => unreachable!("only writes in a multi"),
            }
        }
        match within(w.commit()).await {
            Ok(results) => results
                .iter()
                .map(|r| match r {
                    // 3.8 answers create2 with type 1 (no Stat); compare the Stat only when both have one.
                    zk::MultiWriteResult::Create { path, stat } if stat.is_invalid() => {
                        format!("created {path}")
                    }
                    zk::MultiWriteResult::Create { path, stat } => {
                        format!("created {path} [{}]", self.stat(stat))
                    }
                    zk::MultiWriteResult::SetData { stat } => self.stat(stat),
                    other => format!("{other:?}"),
                })
                .collect::<Vec<_>>()
                .join("; "),
            Err(e) => format!("{e:?}"),
        }
    }

    /// Every node with its data, Stat and ACL, depth first.
    async fn dump(&self) -> Vec<String> {
        let c = &self.clients[0];
        let mut out = Vec::new();
        let mut stack = vec!["/".to_owned()];
        while let Some(p) = stack.pop() {
            let Ok((data, st)) = within(c.get_data(&p)).await else {
                continue;
            };
            let (acl, _) = within(c.get_acl(&p)).await.unwrap();
            let data = if p == "/zookeeper/config" {
                masked_ports(&data)
            } else {
                format!("{data:?}")
            };
            out.push(format!("{p} {data} {} {acl:?}", self.stat(&st)));
            let mut kids = within(c.list_children(&p)).await.unwrap();
            kids.sort();
            for k in kids.into_iter().rev() {
                stack.push(if p == "/" {
                    format!("/{k}")
                } else {
                    format!("{p}/{k}")
                });
            }
        }
        out
    }
}

/// The `Zxid:` line of `srvr` on 127.0.0.1:`port`: the last txn it applied.
fn last_zxid(port: u16) -> Option<String> {
    let reply = four_letter_word(port, "srvr").ok()?;
    reply
        .lines()
        .find_map(|l| l.strip_prefix("Zxid: "))
        .map(str::to_owned)
}

/// Runs `run` for every seed of [`seeds`]`(var, default)`: the sum of
/// what the seeds that passed counted, and each other seed's divergence.
async fn every_seed<F, Fut>(var: &str, default: u64, run: F) -> (usize, Vec<String>)
where
    F: Fn(u64) -> Fut,
    Fut: std::future::Future<Output = Result<usize, String>>,
{
    let mut counted = 0;
    let mut divergences = Vec::new();
    for seed in seeds(var, default) {
        match run(seed).await {
            Ok(n) => counted += n,
            Err(d) => divergences.push(d),
        }
    }
    (counted, divergences)
}

/// Seeds 1..=`$var` (default `default`), or only seed `$var_ONLY` if set.
fn seeds(var: &str, default: u64) -> Vec<u64> {
    let env = |name: &str| std::env::var(name).ok().and_then(|n| n.parse().ok());
    match env(&format!("{var}_ONLY")) {
        Some(seed) => vec![seed],
        None => (1..=env(var).unwrap_or(default)).collect(),
    }
}

/// Fails with every divergence found, one per failing seed.
fn report(divergences: &[String], compared: usize, against: &str) {
    assert!(
        divergences.is_empty(),
        "{} seed(s) diverged from {against}:\n\n{}",
        divergences.len(),
        divergences.join("\n\n")
    );
    eprintln!("compared {compared} operations against {against}");
}

async fn run_seed(seed: u64) -> Result<usize, String> {
    let oracle = ZooKeeperProcess::start(2000);
    let zkd = ZkdProcess::start_with(ServerOptions::default().with("extendedTypesEnabled", "true"));
    let theirs = Target::connect(&[oracle.port], seed).await;
    let ours = Target::connect(&[zkd.port], seed).await;
    let replay = format!(
        "ZKD_DIFFERENTIAL_SEEDS_ONLY={seed} cargo test -p zkd-client-tests --test differential random_operations_match_apache_zookeeper"
    );
    compare(&theirs, &ours, seed, &replay).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_operations_match_apache_zookeeper() {
    // More seeds on demand: ZKD_DIFFERENTIAL_SEEDS=200.
    let (compared, divergences) = every_seed("ZKD_DIFFERENTIAL_SEEDS", 5, run_seed).await;
    report(&divergences, compared, "Apache ZooKeeper");
}

#[path = "differential/comparison.rs"]
mod comparison;
#[path = "differential/ensemble.rs"]
mod ensemble;
#[path = "differential/ensemble_move.rs"]
mod ensemble_move;
#[path = "differential/import.rs"]
mod import;
#[path = "differential/ops.rs"]
mod ops;
