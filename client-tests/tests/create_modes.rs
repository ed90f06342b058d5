//! Create flags and opcodes, raw on the wire, against zkd and Apache ZooKeeper
//! side by side: which opcode makes a container, and what a multi answers for
//! a create op whose flags are not a CreateMode.
//!
//! Stock clients send these: the Rust `zookeeper` crate creates every recipe
//! directory with opcode 1 and flags 4, which ZooKeeper makes an ordinary
//! persistent node (only opcode 19 builds a container).

use bytes::Bytes;
use std::time::Duration;
use zkd_client_tests::oracle::ZooKeeperProcess;
use zkd_client_tests::raw::RawClient;
use zkd_client_tests::{ServerOptions, ZkdProcess};
use zkd_protocol::records::*;
use zkd_protocol::request::ClientRequest;
use zkd_protocol::{OpCode, Record};

/// How often both servers look for empty containers in this test.
const CHECK_INTERVAL_MS: &str = "100";

fn create_request(path: &str, flags: i32) -> CreateRequest {
    CreateRequest {
        path: path.into(),
        data: Some(Bytes::from_static(b"x")),
        acl: vec![Acl::world(31)],
        flags,
    }
}

/// A single create with the given opcode; the reply's error code.
fn create(c: &mut RawClient, xid: i32, op: OpCode, path: &str, flags: i32) -> i32 {
    c.call(xid, &ClientRequest::Create(op, create_request(path, flags)))
        .0
        .err
}

/// A multi; the per-op results, or the header's error when there are none.
fn multi(c: &mut RawClient, xid: i32, ops: Vec<MultiOp>) -> Result<Vec<MultiResult>, i32> {
    let (h, mut body) = c.call(xid, &ClientRequest::Multi(MultiRequest { ops }));
    if h.err != 0 {
        return Err(h.err);
    }
    Ok(MultiResponse::decode(&mut body)
        .expect("multi response")
        .results)
}

fn exists(c: &mut RawClient, xid: i32, path: &str) -> Option<Stat> {
    let (h, mut body) = c.call(
        xid,
        &ClientRequest::Exists(ExistsRequest {
            path: path.into(),
            watch: false,
        }),
    );
    (h.err == 0).then(|| Stat::decode(&mut body).expect("stat"))
}

/// What a client sees of one server: every answer, in order, as text.
fn observe(port: u16) -> Vec<String> {
    let (mut c, _) = RawClient::new_session(port, 10_000);
    let mut seen = Vec::new();
    let mut xid = 0;
    let mut next = || {
        xid += 1;
        xid
    };
    // Every opcode that can carry a CreateRequest, with container flags and without.
    let cases = [
        ("/create-4", OpCode::Create, 4),
        ("/create2-4", OpCode::Create2, 4),
        ("/container-4", OpCode::CreateContainer, 4),
        ("/container-0", OpCode::CreateContainer, 0),
    ];
    for (path, op, flags) in cases {
        seen.push(format!(
            "{path}: {}",
            create(&mut c, next(), op, path, flags)
        ));
    }
    // The same inside a multi.
    for (path, op) in [
        ("/m-create-4", OpCode::Create),
        ("/m-create2-4", OpCode::Create2),
        ("/m-container-4", OpCode::CreateContainer),
    ] {
        let r = multi(
            &mut c,
            next(),
            vec![MultiOp::Create(op, create_request(path, 4))],
        );
        seen.push(format!("{path}: {:?}", r.map(|v| v.len())));
    }
    // Give each node a child and take it away: a container is now due for reaping.
    let all = cases
        .iter()
        .map(|c| c.0)
        .chain(["/m-create-4", "/m-create2-4", "/m-container-4"]);
    let all: Vec<&str> = all.collect();
    for path in &all {
        let child = format!("{path}/child");
        create(&mut c, next(), OpCode::Create, &child, 0);
        let (h, _) = c.call(
            next(),
            &ClientRequest::Delete(DeleteRequest {
                path: child,
                version: -1,
            }),
        );
        assert_eq!(h.err, 0);
    }
    std::thread::sleep(Duration::from_millis(1500));
    for path in &all {
        let stat = exists(&mut c, next(), path);
        seen.push(format!(
            "{path} after reaping: {}",
            match stat {
                Some(s) => format!("exists, ephemeralOwner {}", s.ephemeral_owner),
                None => "gone".into(),
            }
        ));
    }
    // Invalid flags inside a multi: that op answers BADARGUMENTS, in the usual rollback.
    for bad_flags in [7, 42, -1] {
        let r = multi(
            &mut c,
            next(),
            vec![
                MultiOp::Create(OpCode::Create, create_request("/fine", 0)),
                MultiOp::Create(OpCode::Create, create_request("/bad", bad_flags)),
                MultiOp::SetData(SetDataRequest {
                    path: "/create-4".into(),
                    data: None,
                    version: -1,
                }),
            ],
        );
        seen.push(format!("multi with flags {bad_flags}: {r:?}"));
    }
    // An op that fails first keeps its own code; the bad create is rolled back after it.
    let r = multi(
        &mut c,
        next(),
        vec![
            MultiOp::Create(OpCode::Create, create_request("/missing/x", 0)),
            MultiOp::Create(OpCode::Create2, create_request("/bad", 9)),
        ],
    );
    seen.push(format!("multi failing before a bad create: {r:?}"));
    let r = multi(
        &mut c,
        next(),
        vec![MultiOp::CreateTtl(CreateTtlRequest {
            path: "/ttl-bad".into(),
            data: None,
            acl: vec![Acl::world(31)],
            flags: 8,
            ttl: 1000,
        })],
    );
    seen.push(format!("multi createTTL with flags 8: {r:?}"));
    // Nothing of the failed multis exists.
    for path in ["/fine", "/bad"] {
        seen.push(format!(
            "{path}: {:?}",
            exists(&mut c, next(), path).is_some()
        ));
    }
    seen
}

/// The known 3.8/3.9 difference: 3.8.0's multi decoder turned a create or
/// create2 op with flags 4 into createContainer; 3.9 keeps the op's own code
/// (ZOOKEEPER-4026), so it is an ordinary persistent node there, as outside a
/// multi. zkd follows 3.9.
fn as_in_3_9(mut seen: Vec<String>) -> Vec<String> {
    for line in &mut seen {
        for path in ["/m-create-4", "/m-create2-4"] {
            if *line == format!("{path} after reaping: gone") {
                *line = format!("{path} after reaping: exists, ephemeralOwner 0");
            }
        }
    }
    seen
}

/// ZooKeeper 3.8.0 answers an invalid create flag inside a multi per op
/// (BADARGUMENTS, then the usual rollback codes). 3.9 fails the whole request
/// with MARSHALLINGERROR, a side effect of ZOOKEEPER-4026's refactoring; zkd
/// keeps the per-op answer, which tells a client which op was wrong.
#[test]
fn containers_come_only_from_create_container_and_bad_flags_fail_one_op() {
    let oracle = ZooKeeperProcess::start_with(
        2000,
        &[("znode.container.checkIntervalMs", CHECK_INTERVAL_MS)],
    );
    let zkd = ZkdProcess::start_with(
        ServerOptions::default().with("znode.container.checkIntervalMs", CHECK_INTERVAL_MS),
    );
    let expected = as_in_3_9(observe(oracle.port));
    let actual = observe(zkd.port);
    for (e, a) in expected.iter().zip(&actual) {
        eprintln!("zookeeper: {e}\nzkd:       {a}");
    }
    assert_eq!(actual, expected);
}
