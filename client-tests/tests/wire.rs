//! The wire, byte by byte: what ZooKeeper answers to odd or bad input, reply
//! ordering, xid echo, and that a misbehaving client hurts nobody else.

use bytes::Bytes;
use zkd_client_tests::raw::{RawClient, Read1};
use zkd_client_tests::{ServerOptions, ZkdProcess};
use zkd_protocol::records::*;
use zkd_protocol::request::ClientRequest;
use zkd_protocol::{ErrorCode, OpCode, Record};

fn create(path: &str, flags: i32) -> ClientRequest {
    ClientRequest::Create(
        OpCode::Create,
        CreateRequest {
            path: path.into(),
            data: None,
            acl: vec![Acl::world(31)],
            flags,
        },
    )
}

fn header(frame: &mut Bytes) -> ReplyHeader {
    ReplyHeader::decode(frame).expect("reply header")
}

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

#[test]
fn unknown_opcode_is_unimplemented_then_closed() {
    let server = ZkdProcess::start();
    let (mut c, _) = RawClient::new_session(server.port, 10_000);
    c.send_frame(&RequestHeader { xid: 9, r#type: 50 }.to_bytes());
    let mut f = c.recv();
    let h = header(&mut f);
    assert_eq!(
        (h.xid, h.zxid, h.err),
        (9, -1, ErrorCode::Unimplemented.code())
    );
    assert!(c.closed_by_server());
    still_serves(server.port);
}

#[test]
fn oversize_and_garbage_frames_close_only_that_connection() {
    let server = ZkdProcess::start_with(ServerOptions::default().with("jute.maxbuffer", "4096"));
    let mut garbage = RawClient::connect(server.port);
    garbage.write_raw(b"abcdefgh");
    assert!(
        garbage.closed_by_server(),
        "'abcd' reads as a huge length: close"
    );

    let (mut big, _) = RawClient::new_session(server.port, 10_000);
    big.write_raw(&5000i32.to_be_bytes());
    big.write_raw(&[0u8; 5000]);
    assert!(
        big.closed_by_server(),
        "frames over jute.maxbuffer close the connection"
    );

    let (mut negative, _) = RawClient::new_session(server.port, 10_000);
    negative.write_raw(&(-5i32).to_be_bytes());
    assert!(negative.closed_by_server());

    let mut bad_handshake = RawClient::connect(server.port);
    bad_handshake.send_frame(&[1, 2, 3]);
    assert!(
        bad_handshake.closed_by_server(),
        "a ConnectRequest that does not decode closes"
    );
    still_serves(server.port);
}

#[test]
fn truncated_body_is_a_marshalling_error_and_the_connection_lives() {
    let server = ZkdProcess::start();
    let (mut c, _) = RawClient::new_session(server.port, 10_000);
    let mut frame = RequestHeader {
        xid: 3,
        r#type: OpCode::GetData as i32,
    }
    .to_bytes()
    .to_vec();
    frame.extend_from_slice(&[0, 0, 0, 50, b'/']);
    c.send_frame(&frame);
    let mut f = c.recv();
    assert_eq!(header(&mut f).err, ErrorCode::MarshallingError.code());
    assert!(f.is_empty(), "errors carry no body");
    let (h, _) = c.call(
        4,
        &ClientRequest::Exists(ExistsRequest {
            path: "/".into(),
            watch: false,
        }),
    );
    assert_eq!((h.xid, h.err), (4, 0));
}

#[test]
fn bad_auth_scheme_fails_and_closes() {
    let server = ZkdProcess::start();
    let (mut c, _) = RawClient::new_session(server.port, 10_000);
    let auth = ClientRequest::Auth(AuthPacket {
        r#type: 0,
        scheme: "kerberos".into(),
        auth: Bytes::from_static(b"x"),
    });
    let (h, _) = c.call(-4, &auth);
    assert_eq!(
        (h.xid, h.zxid, h.err),
        (-4, 0, ErrorCode::AuthFailed.code())
    );
    assert!(c.closed_by_server());
}

#[test]
fn top_level_check_is_refused() {
    // 3.9.3+ (ZOOKEEPER-2623): UNIMPLEMENTED and close; 3.8.0 logged a txn it could not replay.
    let server = ZkdProcess::start();
    let (mut c, _) = RawClient::new_session(server.port, 10_000);
    let (h, _) = c.call(
        5,
        &ClientRequest::Check(CheckVersionRequest {
            path: "/".into(),
            version: -1,
        }),
    );
    assert_eq!(h.err, ErrorCode::Unimplemented.code());
    assert!(c.closed_by_server());
}

#[test]
fn watch_event_reaches_the_client_before_the_reply() {
    let server = ZkdProcess::start();
    let (mut c, _) = RawClient::new_session(server.port, 10_000);
    c.call(1, &create("/x", 0));
    c.call(
        2,
        &ClientRequest::GetData(GetDataRequest {
            path: "/x".into(),
            watch: true,
        }),
    );
    c.send_request(
        3,
        &ClientRequest::SetData(SetDataRequest {
            path: "/x".into(),
            data: None,
            version: -1,
        }),
    );
    let mut first = c.recv();
    let h = header(&mut first);
    assert_eq!(h.xid, -1, "the notification comes first");
    let event = WatcherEvent::decode(&mut first).unwrap();
    assert_eq!(
        (event.r#type, event.state, event.path.as_str()),
        (3, 3, "/x")
    );
    let mut second = c.recv();
    let reply = header(&mut second);
    assert_eq!(reply.xid, 3);
    assert_eq!(
        h.zxid, reply.zxid,
        "3.9: the notification carries the txn zxid"
    );
}

#[test]
fn xids_are_echoed_whatever_their_value() {
    let server = ZkdProcess::start();
    let (mut c, _) = RawClient::new_session(server.port, 10_000);
    for xid in [0, -7, i32::MAX, 12345] {
        let (h, _) = c.call(
            xid,
            &ClientRequest::Exists(ExistsRequest {
                path: "/".into(),
                watch: false,
            }),
        );
        assert_eq!(h.xid, xid);
    }
}

#[test]
fn set_watches_sends_missed_events_before_its_reply() {
    let server = ZkdProcess::start();
    let (mut c, _) = RawClient::new_session(server.port, 10_000);
    let (h, _) = c.call(1, &create("/changed", 0));
    let rel = h.zxid;
    c.call(
        2,
        &ClientRequest::SetData(SetDataRequest {
            path: "/changed".into(),
            data: None,
            version: -1,
        }),
    );
    c.call(3, &create("/born", 0));
    let watches = SetWatches {
        relative_zxid: rel,
        data_watches: vec!["/changed".into(), "/gone".into()],
        exist_watches: vec!["/born".into(), "/unborn".into()],
        child_watches: vec![],
    };
    c.send_request(-8, &ClientRequest::SetWatches(watches));
    let mut events = Vec::new();
    loop {
        let mut f = c.recv();
        let h = header(&mut f);
        if h.xid != -1 {
            assert_eq!(
                h.xid, -8,
                "kazoo and the C client send SetWatches with xid -8 and expect it back"
            );
            break;
        }
        assert_eq!(h.zxid, -1, "synthesised events carry zxid -1");
        let e = WatcherEvent::decode(&mut f).unwrap();
        events.push((e.r#type, e.path));
    }
    assert_eq!(
        events,
        vec![
            (3, "/changed".into()),
            (2, "/gone".into()),
            (1, "/born".into())
        ]
    );
    // /unborn got a real watch.
    c.call(4, &create("/unborn", 0));
}

#[test]
fn exists_add_watch_and_empty_multi_answer_like_zookeeper() {
    let server = ZkdProcess::start();
    let (mut c, _) = RawClient::new_session(server.port, 10_000);
    let (h, body) = c.call(
        1,
        &ClientRequest::Exists(ExistsRequest {
            path: "/none".into(),
            watch: false,
        }),
    );
    assert_eq!((h.err, body.len()), (ErrorCode::NoNode.code(), 0));
    let (h, body) = c.call(
        2,
        &ClientRequest::AddWatch(AddWatchRequest {
            path: "/a".into(),
            mode: 1,
        }),
    );
    assert_eq!(
        (h.err, body.as_ref()),
        (0, &[0u8, 0, 0, 0][..]),
        "addWatch answers ErrorResponse(0)"
    );
    let (h, _) = c.call(
        3,
        &ClientRequest::AddWatch(AddWatchRequest {
            path: "/a".into(),
            mode: 7,
        }),
    );
    assert_eq!(h.err, ErrorCode::MarshallingError.code());
    let before = h.zxid;
    let (h, body) = c.call(4, &ClientRequest::Multi(MultiRequest::default()));
    assert_eq!(
        body.as_ref(),
        &[0xff, 0xff, 0xff, 0xff, 1, 0xff, 0xff, 0xff, 0xff]
    );
    assert_eq!(h.zxid, before + 1, "an empty multi still consumes a zxid");
    let (h, _) = c.call(
        5,
        &ClientRequest::CheckWatches(CheckWatchesRequest {
            path: "/zz".into(),
            r#type: 3,
        }),
    );
    assert_eq!(h.err, ErrorCode::NoWatcher.code());
    // WatcherType 5 is 3.9+ (ZOOKEEPER-4472): the recursive watch above is found and removed.
    let (h, _) = c.call(
        6,
        &ClientRequest::RemoveWatches(RemoveWatchesRequest {
            path: "/a".into(),
            r#type: 5,
        }),
    );
    assert_eq!(h.err, 0);
    let (h, _) = c.call(
        7,
        &ClientRequest::RemoveWatches(RemoveWatchesRequest {
            path: "/a".into(),
            r#type: 5,
        }),
    );
    assert_eq!(h.err, ErrorCode::NoWatcher.code());
}

#[test]
fn failed_writes_consume_zxids_and_multi_reports_per_op() {
    let server = ZkdProcess::start();
    let (mut c, _) = RawClient::new_session(server.port, 10_000);
    let (ok, _) = c.call(1, &create("/m1", 0));
    let (dup, body) = c.call(2, &create("/m1", 0));
    assert_eq!(
        (dup.err, body.len(), dup.zxid),
        (ErrorCode::NodeExists.code(), 0, ok.zxid + 1)
    );
    let multi = MultiRequest {
        ops: vec![
            MultiOp::Create(
                OpCode::Create,
                CreateRequest {
                    path: "/m2".into(),
                    data: None,
                    acl: vec![Acl::world(31)],
                    flags: 0,
                },
            ),
            MultiOp::Create(
                OpCode::Create,
                CreateRequest {
                    path: "/m1".into(),
                    data: None,
                    acl: vec![Acl::world(31)],
                    flags: 0,
                },
            ),
            MultiOp::SetData(SetDataRequest {
                path: "/m1".into(),
                data: None,
                version: -1,
            }),
        ],
    };
    let (h, mut body) = c.call(3, &ClientRequest::Multi(multi));
    assert_eq!(h.err, 0, "a failed multi still has header err 0");
    let results = MultiResponse::decode(&mut body).unwrap().results;
    assert_eq!(
        results,
        vec![
            MultiResult::Error { err: 0 },
            MultiResult::Error { err: -110 },
            MultiResult::Error { err: -2 }
        ]
    );
    // Invalid create flags inside a multi fail that op, as in ZooKeeper 3.8
    // (create_modes.rs compares this with the oracle).
    let bad = MultiRequest {
        ops: vec![MultiOp::Create(
            OpCode::Create,
            CreateRequest {
                path: "/z".into(),
                data: None,
                acl: vec![Acl::world(31)],
                flags: 9,
            },
        )],
    };
    let (h, mut body) = c.call(4, &ClientRequest::Multi(bad));
    assert_eq!(h.err, 0);
    let results = MultiResponse::decode(&mut body).unwrap().results;
    assert_eq!(results, vec![MultiResult::Error { err: -8 }]);
}

#[test]
fn path_validation_on_writes_only() {
    let server = ZkdProcess::start();
    let (mut c, _) = RawClient::new_session(server.port, 10_000);
    c.call(1, &create("/a", 0));
    c.call(1, &create("/trailing", 0));
    // ZooKeeper's order: slash and NUL first, then the parent must exist, then the full path rules.
    let cases = [
        ("noslash", ErrorCode::BadArguments),
        ("/nul\u{0}", ErrorCode::BadArguments),
        ("/trailing/", ErrorCode::BadArguments),
        ("/a/.", ErrorCode::BadArguments),
        ("/a/..", ErrorCode::BadArguments),
        ("/\u{1F600}", ErrorCode::BadArguments),
        ("/\u{fff0}", ErrorCode::BadArguments),
        ("/a//b", ErrorCode::NoNode),
    ];
    for (bad, code) in cases {
        let (h, _) = c.call(1, &create(bad, 0));
        assert_eq!(h.err, code.code(), "{bad:?}");
    }
    let (h, _) = c.call(2, &create("/", 0));
    assert_eq!(h.err, ErrorCode::NodeExists.code());
    let (h, _) = c.call(3, &create("/x", 9));
    assert_eq!(
        h.err,
        ErrorCode::BadArguments.code(),
        "unknown create flags"
    );
    let (h, _) = c.call(
        4,
        &ClientRequest::GetData(GetDataRequest {
            path: "/a//b".into(),
            watch: false,
        }),
    );
    assert_eq!(
        h.err,
        ErrorCode::NoNode.code(),
        "reads do not validate paths"
    );
    let (h, mut body) = c.call(5, &create("/", 2));
    assert_eq!(h.err, 0);
    let path = CreateResponse::decode(&mut body).unwrap().path;
    assert!(
        path.len() == 11 && path[1..].bytes().all(|b| b.is_ascii_digit()),
        "sequential under / gives /NNNNNNNNNN, got {path}"
    );
}

#[test]
fn client_ahead_of_the_server_is_refused_without_a_reply() {
    let server = ZkdProcess::start();
    let mut c = RawClient::connect(server.port);
    let req = ConnectRequest {
        last_zxid_seen: 0x7fff_ffff,
        time_out: 10_000,
        passwd: Bytes::from_static(&[0; 16]),
        read_only: Some(false),
        ..Default::default()
    };
    c.send_frame(&req.to_bytes());
    assert_eq!(c.read(), Read1::Closed);
}

#[test]
fn four_letter_words() {
    let server = ZkdProcess::start();
    assert_eq!(server.four_letter_word("ruok"), "imok");
    assert_eq!(server.four_letter_word("isro"), "rw");
    let srvr = server.four_letter_word("srvr");
    assert!(srvr.starts_with("Zookeeper version: 3.9"), "{srvr}");
    assert!(
        srvr.contains("\nMode: standalone\n"),
        "zkServer.sh status greps Mode: {srvr}"
    );
    assert!(srvr.contains("Node count: 5"), "{srvr}");
    let mntr = server.four_letter_word("mntr");
    for key in [
        "zk_version",
        "zk_server_state\tstandalone",
        "zk_znode_count\t5",
        "zk_num_alive_connections",
    ] {
        assert!(mntr.contains(key), "mntr lacks {key}: {mntr}");
    }
    assert!(server
        .four_letter_word("conf")
        .contains(&format!("clientPort={}", server.port)));

    let strict =
        ZkdProcess::start_with(ServerOptions::default().with("4lw.commands.whitelist", "srvr"));
    let denied = zkd_client_tests::process::four_letter_word(strict.port, "mntr").unwrap();
    assert_eq!(
        denied,
        "mntr is not executed because it is not in the whitelist.\n"
    );
}

#[test]
fn a_client_spraying_random_bytes_hurts_nobody() {
    let server = ZkdProcess::start();
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..50 {
        let (mut c, _) = RawClient::new_session(server.port, 10_000);
        let mut bytes = Vec::new();
        for _ in 0..64 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            bytes.push(rng as u8);
        }
        // A plausible length prefix so the body reaches the decoders.
        c.send_frame(&bytes);
        let _ = c.read();
    }
    still_serves(server.port);
}

#[test]
fn connections_beyond_max_client_cnxns_are_closed() {
    let server = ZkdProcess::start_with(ServerOptions::default().with("maxClientCnxns", "2"));
    let (_a, _) = RawClient::new_session(server.port, 10_000);
    let (_b, _) = RawClient::new_session(server.port, 10_000);
    let mut third = RawClient::connect(server.port);
    assert!(
        third.closed_by_server(),
        "a third connection from one address is refused"
    );
}

#[test]
fn requests_that_would_hold_unbounded_memory_are_refused() {
    let server = ZkdProcess::start();
    let (mut c, _) = RawClient::new_session(server.port, 10_000);
    let big = ClientRequest::Create(
        OpCode::Create,
        CreateRequest {
            path: "/big".into(),
            data: Some(Bytes::from(vec![1u8; 500_000])),
            acl: vec![Acl::world(31)],
            flags: 0,
        },
    );
    assert_eq!(c.call(1, &big).0.err, 0);
    // A multiRead whose reply could never be sent within jute.maxbuffer.
    let reads = (0..100)
        .map(|_| {
            MultiOp::GetData(GetDataRequest {
                path: "/big".into(),
                watch: false,
            })
        })
        .collect();
    let (h, _) = c.call(2, &ClientRequest::MultiRead(MultiRequest { ops: reads }));
    assert_eq!(h.err, ErrorCode::MarshallingError.code());
    // A connection may hold a bounded number of identities.
    let mut refused = false;
    for i in 0..40 {
        let auth = ClientRequest::Auth(AuthPacket {
            r#type: 0,
            scheme: "digest".into(),
            auth: Bytes::from(format!("u{i}:p")),
        });
        let (h, _) = c.call(-4, &auth);
        if h.err == ErrorCode::AuthFailed.code() {
            refused = true;
            break;
        }
    }
    assert!(refused, "identities per connection must be capped");
    assert!(c.closed_by_server());
    still_serves(server.port);
}
