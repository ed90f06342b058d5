//! Clients that never read what they are sent: neither replies they asked
//! for nor notifications of their watches may grow the server without bound,
//! and everyone else keeps being served.

use bytes::Bytes;
use zkd_client_tests::raw::{RawClient, Read1};
use zkd_client_tests::ZkdProcess;
use zkd_protocol::records::*;
use zkd_protocol::request::ClientRequest;
use zkd_protocol::{OpCode, Record};

fn still_serves(port: u16) {
    let (mut c, _) = RawClient::new_session(port, 10_000);
    let (h, _) = c.call(
        1,
        &ClientRequest::Exists(ExistsRequest {
            path: "/".into(),
            watch: false,
        }),
    );
    assert_eq!(h.err, 0, "another client must be unaffected");
}

/// Creates `path` holding `size` bytes, from a session of its own.
fn create_sized(port: u16, path: &str, size: usize) {
    let (mut setup, _) = RawClient::new_session(port, 10_000);
    let create = ClientRequest::Create(
        OpCode::Create,
        CreateRequest {
            path: path.into(),
            data: Some(Bytes::from(vec![1u8; size])),
            acl: vec![Acl::world(31)],
            flags: 0,
        },
    );
    assert_eq!(setup.call(1, &create).0.err, 0);
}

fn rss_mib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: u64 = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .unwrap()
        .split_whitespace()
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    kib / 1024
}

#[test]
fn a_client_that_never_reads_its_replies_cannot_exhaust_memory() {
    let server = ZkdProcess::start();
    create_sized(server.port, "/big", 1_000_000);
    let (mut greedy, _) = RawClient::new_session(server.port, 30_000);
    // 2 GB of replies requested; the client reads none of them.
    for xid in 0..2000 {
        greedy.send_request(
            xid,
            &ClientRequest::GetData(GetDataRequest {
                path: "/big".into(),
                watch: false,
            }),
        );
    }
    std::thread::sleep(std::time::Duration::from_secs(2));
    still_serves(server.port);
    let rss = rss_mib(server.pid().unwrap());
    assert!(
        rss < 300,
        "zkd buffered replies without bound: RSS {rss} MiB"
    );
}

/// A client that pauses reading is held back, not cut off: zkd stops
/// reading its requests once 8 MB of replies wait for it, well before the
/// 32 MB at which it would close the connection. Once the client reads,
/// every reply comes, as from ZooKeeper, which stops reading a client with
/// too much outstanding rather than closing it.
#[test]
fn a_client_that_pauses_reading_is_held_back_not_cut_off() {
    let server = ZkdProcess::start();
    create_sized(server.port, "/medium", 100_000);
    let (mut paused, _) = RawClient::new_session(server.port, 30_000);
    // 200 MB of replies, 100 KB each: at most 128 of them (12.8 MB) are
    // ever taken in at once, so only the byte bound holds the rest back.
    let get = ClientRequest::GetData(GetDataRequest {
        path: "/medium".into(),
        watch: false,
    });
    for xid in 0..2000 {
        paused.send_request(xid, &get);
    }
    std::thread::sleep(std::time::Duration::from_secs(1));
    still_serves(server.port);
    for xid in 0..2000 {
        let Read1::Frame(mut reply) = paused.read() else {
            panic!("the connection ended after {xid} of 2000 replies");
        };
        let header = ReplyHeader::decode(&mut reply).unwrap();
        assert_eq!((header.xid, header.err), (xid, 0));
    }
}

#[test]
fn a_client_that_never_reads_its_notifications_is_closed() {
    let server = ZkdProcess::start();
    // Every change anywhere notifies the idle client; it reads nothing.
    let (mut idle, _) = RawClient::new_session(server.port, 30_000);
    idle.send_request(
        1,
        &ClientRequest::AddWatch(AddWatchRequest {
            path: "/".into(),
            mode: 1, // persistent recursive
        }),
    );
    // Long paths make big notifications: about 3 KB each.
    let path = format!("/{}", "n".repeat(3000));
    let (mut writer, _) = RawClient::new_session(server.port, 30_000);
    let create = ClientRequest::Create(
        OpCode::Create,
        CreateRequest {
            path: path.clone(),
            data: None,
            acl: vec![Acl::world(31)],
            flags: 0,
        },
    );
    assert_eq!(writer.call(1, &create).0.err, 0);
    // 400 multis of 50 setData: 20,000 notifications, about 60 MB.
    let set = MultiOp::SetData(SetDataRequest {
        path,
        data: None,
        version: -1,
    });
    let multi = ClientRequest::Multi(MultiRequest { ops: vec![set; 50] });
    for xid in 2..402 {
        assert_eq!(writer.call(xid, &multi).0.err, 0);
    }
    still_serves(server.port);
    let rss = rss_mib(server.pid().unwrap());
    assert!(
        rss < 200,
        "zkd buffered notifications without bound: RSS {rss} MiB"
    );
    // What the kernel buffered arrives, then the end of the connection.
    let end = loop {
        match idle.read() {
            Read1::Frame(_) => continue,
            other => break other,
        }
    };
    assert_eq!(
        end,
        Read1::Closed,
        "the idle client's connection stays open"
    );
}
