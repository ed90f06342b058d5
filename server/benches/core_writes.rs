//! The core alone, without sockets or a disk: time per write as a standalone
//! node validates it, hands it to storage, applies it once persisted and
//! encodes its reply. 64 connections with one write each in flight, as in
//! `zkd-bench --sessions 64 --window 1`, persisted one round at a time.
//!
//! `cargo bench -p zkd-server --bench core_writes` prints the best of five
//! runs per op, and the slowest round of any run: 2,000 rounds of creates
//! grow the tree past 114,688 znodes, where its path index grows. Request frames are encoded before the clock starts, so
//! only the node's own work is timed; it runs on one thread, with nothing
//! else to wait for, so it is steadier than a whole-server run on a shared
//! machine (and no substitute for one).

// A benchmark's table is its output.
#![allow(clippy::print_stdout)]

use bytes::Bytes;
use std::time::{Duration, Instant};
use zkd_protocol::records::{Acl, ConnectRequest, CreateRequest, RequestHeader, SetDataRequest};
use zkd_protocol::request::ClientRequest;
use zkd_protocol::{OpCode, Record};
use zkd_server::core::{Command, ConnId, CoreConfig, Event, Node, Now};
use zkd_storage::DataTree;

const CONNS: u64 = 64;
const ROUNDS: usize = 2_000;

/// Builds the write of connection `c` in round `r`.
type MakeWrite = fn(u64, usize) -> ClientRequest;

fn now() -> Now {
    Now {
        mono_ms: 1,
        wall_ms: 1_700_000_000_000,
    }
}

fn frame(xid: i32, req: &ClientRequest) -> Bytes {
    let header = RequestHeader {
        xid,
        r#type: req.op_code() as i32,
    };
    let mut out = header.to_bytes().to_vec();
    req.encode_body(&mut out);
    Bytes::from(out)
}

fn create(path: String) -> ClientRequest {
    ClientRequest::Create(
        OpCode::Create,
        CreateRequest {
            path,
            data: Some(Bytes::from(vec![7u8; 100])),
            acl: vec![Acl::world(31)],
            flags: 0,
        },
    )
}

fn set_data(path: String) -> ClientRequest {
    ClientRequest::SetData(SetDataRequest {
        path,
        data: Some(Bytes::from(vec![7u8; 100])),
        version: -1,
    })
}

/// Hands the node's txns to "storage", reports them persisted at once and
/// drops its replies; returns how many replies it sent.
fn settle(node: &mut Node) -> usize {
    let mut replies = 0;
    let mut last = None;
    for command in node.drain_commands() {
        match command {
            Command::Persist { txn } => last = Some(txn.zxid()),
            Command::Reply { .. } => replies += 1,
            _ => {}
        }
    }
    if let Some(zxid) = last {
        node.handle_event(now(), Event::Persisted { zxid });
        replies += node
            .drain_commands()
            .filter(|c| matches!(c, Command::Reply { .. }))
            .count();
    }
    replies
}

/// A node with `CONNS` sessions and a znode for each under `/bench`.
fn ready_node() -> Node {
    let mut node = Node::new(CoreConfig::default(), DataTree::new(), now());
    for c in 0..CONNS {
        let conn = ConnId(c);
        node.handle_event(
            now(),
            Event::Connected {
                conn,
                remote_ip: "127.0.0.1".into(),
                remote_port: 1,
            },
        );
        let request = ConnectRequest {
            time_out: 30_000,
            passwd: Bytes::from_static(&[0; 16]),
            read_only: Some(false),
            ..Default::default()
        };
        node.handle_event(now(), Event::Handshake { conn, request });
        settle(&mut node);
    }
    let setup = |node: &mut Node, path: String| {
        let frame = frame(1, &create(path));
        node.handle_event(
            now(),
            Event::Request {
                conn: ConnId(0),
                frame,
            },
        );
        settle(node);
    };
    setup(&mut node, "/bench".into());
    for c in 0..CONNS {
        setup(&mut node, format!("/bench/n{c}"));
    }
    node
}

/// Time for `ROUNDS` rounds of one write per connection, made by `op`,
/// and the time of the slowest round.
fn run(op: MakeWrite) -> (Duration, Duration) {
    let mut node = ready_node();
    let frames: Vec<Vec<Bytes>> = (0..ROUNDS)
        .map(|r| (0..CONNS).map(|c| frame(r as i32 + 2, &op(c, r))).collect())
        .collect();
    let start = Instant::now();
    let mut replies = 0;
    let mut slowest = Duration::ZERO;
    for round in frames {
        let round_start = Instant::now();
        for (c, frame) in round.into_iter().enumerate() {
            let conn = ConnId(c as u64);
            node.handle_event(now(), Event::Request { conn, frame });
        }
        replies += settle(&mut node);
        slowest = slowest.max(round_start.elapsed());
    }
    let took = start.elapsed();
    assert_eq!(replies, ROUNDS * CONNS as usize, "every write answered");
    (took, slowest)
}

fn main() {
    let ops: [(&str, MakeWrite); 2] = [
        ("setData", |c, _| set_data(format!("/bench/n{c}"))),
        ("create", |c, r| create(format!("/bench/n{c}-c{r}"))),
    ];
    println!("| op | ns per write (best of 5) | slowest round of 64 writes (us) |");
    println!("|---|---:|---:|");
    for (name, op) in ops {
        let runs: Vec<_> = (0..5).map(|_| run(op)).collect();
        let best = runs.iter().map(|r| r.0).min().expect("five runs");
        let slowest = runs.iter().map(|r| r.1).max().expect("five runs");
        let per_op = best.as_nanos() as f64 / (ROUNDS as f64 * CONNS as f64);
        println!("| {name} | {per_op:.0} | {} |", slowest.as_micros());
    }
}
