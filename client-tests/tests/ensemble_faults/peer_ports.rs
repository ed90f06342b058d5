//! (b) bad input on the peer ports.

use super::*;

/// One length-prefixed frame (zkd's peer framing: 4-byte big-endian length,
/// then the prost message).
fn frame<M: PeerMessage>(message: &M) -> Vec<u8> {
    let body = message.encode_to_vec();
    let mut out = (body.len() as u32).to_be_bytes().to_vec();
    out.extend_from_slice(&body);
    out
}

fn election_hello(sid: u64) -> Vec<u8> {
    frame(&ElectionMessage::from(ElectionHello {
        protocol_version: zkd_protocol::peer::election::PROTOCOL_VERSION_V1,
        sid,
        election_addr: "127.0.0.1:1".into(),
    }))
}

/// A stranger's hello, then its LOOKING notification (ZooKeeper's peers
/// answer any sid's notification with their vote).
fn stranger_looking(sid: u64) -> Vec<u8> {
    let mut bytes = election_hello(sid);
    bytes.extend(frame(&ElectionMessage::from(
        zkd_protocol::peer::election::Notification {
            state: zkd_protocol::peer::election::ServerState::Looking as i32,
            leader: sid,
            election_epoch: 1,
            sid,
            ..Default::default()
        },
    )));
    bytes
}

fn follower_info(sid: u64) -> Vec<u8> {
    frame(&QuorumPacket {
        body: Some(quorum_packet::Body::FollowerInfo(FollowerInfo {
            accepted_epoch: 0,
            sid,
            protocol_version: ZAB_PROTOCOL_VERSION,
            config_version: 0,
        })),
    })
}

/// An attack: a name and the bytes sent on a fresh connection.
struct Attack {
    name: String,
    bytes: Vec<u8>,
    end: End,
}

/// How the server ends an attack's connection.
#[derive(Clone, Copy, PartialEq)]
enum End {
    /// At once.
    Quick,
    /// Within its handshake timeout: it may wait for more bytes.
    Slow,
    /// Within initLimit + syncLimit: a leader syncs a stranger's
    /// FOLLOWERINFO, and drops it once it says nothing more.
    Synced,
    /// It answers: a stranger's hello gets the member's vote, as
    /// ZooKeeper's `QuorumCnxManager` answers any sid.
    Answered,
}

fn attacks(port_kind: &str, target_sid: u64) -> Vec<Attack> {
    use rand::Rng;
    let mut rng = rand::thread_rng();
    let mut garbage = vec![0u8; 4096];
    rng.fill(&mut garbage[..]);
    // A whole frame of random bytes: undecodable or meaningless.
    let mut random_frame = 4092u32.to_be_bytes().to_vec();
    random_frame.extend_from_slice(&garbage[4..]);
    let hello = |sid| match port_kind {
        "election" => election_hello(sid),
        _ => follower_info(sid),
    };
    let mut header_then_stall = 1000u32.to_be_bytes().to_vec();
    header_then_stall.extend_from_slice(&hello(99)[4..8]);
    let mut two_hellos = hello(99);
    two_hellos.extend(hello(98));
    let attack = |end: End| {
        move |name: &str, bytes: Vec<u8>| Attack {
            name: format!("{port_kind}: {name}"),
            bytes,
            end,
        }
    };
    let (quick, slow) = (attack(End::Quick), attack(End::Slow));
    let stranger = match port_kind {
        "election" => attack(End::Answered),
        _ => attack(End::Synced),
    };
    let mut attacks = vec![
        slow("4 KiB of random bytes", garbage),
        quick("a frame of random bytes", random_frame),
        quick("length 2 GiB (0x80000000)", vec![0x80, 0, 0, 0, 1, 2, 3]),
        quick("length 2 GiB - 1", vec![0x7f, 0xff, 0xff, 0xff, 1, 2, 3]),
        quick("length 0xffffffff", vec![0xff; 8]),
        quick("an empty frame", vec![0, 0, 0, 0]),
        slow("a frame header, then a stall", header_then_stall),
        slow("nothing at all", Vec::new()),
        // Sid 0 is smaller than any member's: called back at an address
        // where nothing listens, on the election port; synced by a leader.
        attack(match port_kind {
            "election" => End::Quick,
            _ => End::Synced,
        })("hello from stranger sid 0", hello(0)),
        quick("hello claiming the member's own sid", hello(target_sid)),
        slow("two hellos from strangers", two_hellos),
    ];
    attacks.push(match port_kind {
        "election" => stranger("a looking stranger, sid 99", stranger_looking(99)),
        _ => stranger("FOLLOWERINFO from stranger sid 99", hello(99)),
    });
    attacks
}

/// Sends `attack` to `port` and returns the open connection.
fn launch(port: u16, attack: &Attack) -> std::io::Result<TcpStream> {
    let mut s = TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_secs(2))?;
    s.write_all(&attack.bytes)?;
    Ok(s)
}

/// Whether the server has closed `s`, waiting up to `limit`.
fn closed_within(s: &mut TcpStream, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    let mut buf = [0u8; 4096];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        s.set_read_timeout(Some(left)).unwrap();
        match s.read(&mut buf) {
            Ok(0) => return true,
            // Whatever a stranger is told, the link must end.
            Ok(_) => continue,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return false
            }
            Err(_) => return true,
        }
    }
}

/// Whether the server sent `s` a whole frame within `limit` (Some(true)),
/// or ended the connection first (Some(false): under the flood, its
/// handshake limit may refuse even a stranger it would answer).
fn answered_within(s: &mut TcpStream, limit: Duration) -> Option<bool> {
    let mut header = [0u8; 4];
    s.set_read_timeout(Some(limit)).unwrap();
    match s.read_exact(&mut header) {
        Ok(()) => {}
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => return None,
        Err(_) => return Some(false),
    }
    let mut body = vec![0u8; u32::from_be_bytes(header) as usize];
    Some(s.read_exact(&mut body).is_ok())
}

/// Bytes that are not a peer's, on both peer ports of the leader and of a
/// follower, round after round, while a client writes through the other
/// follower: every write succeeds, the leader and its epoch stay, every
/// member serves and none panics, and the server ends every such connection
/// (a stranger's after answering it, as ZooKeeper's peers do).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_and_strangers_on_the_peer_ports_end_only_their_own_connections() {
    let _turn = HEAVY.lock().await;
    let ensemble = Ensemble::start(3);
    let leader = ensemble.leader().expect("a leader");
    let followers: Vec<usize> = (0..3).filter(|i| *i != leader).collect();
    let (attacked, writer_member) = (followers[0], followers[1]);

    let writer = connect(&ensemble.connect_string(&[writer_member]), SESSION).await;
    within(writer.create("/w", b"", &persistent()))
        .await
        .unwrap();
    // The epoch shows in the zxid once the leader has committed something.
    let epoch_before = epoch(&ensemble, leader).expect("the leader's zxid");
    let stop = Arc::new(AtomicBool::new(false));
    let writes = {
        let stop = stop.clone();
        tokio::spawn(async move {
            let (mut ok, mut failed) = (0u32, Vec::new());
            while !stop.load(Ordering::Relaxed) {
                let started = Instant::now();
                match tokio::time::timeout(
                    Duration::from_secs(5),
                    writer.create(&format!("/w/n{ok}"), b"x", &persistent()),
                )
                .await
                {
                    Ok(Ok(_)) => ok += 1,
                    Ok(Err(e)) => failed.push(format!("n{ok}: {e}")),
                    Err(_) => {
                        failed.push(format!("n{ok}: timed out after {:?}", started.elapsed()))
                    }
                }
                if !failed.is_empty() {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
            (ok, failed)
        })
    };

    // The attacks, from a thread (blocking sockets): rounds for 10 s.
    let targets: Vec<(usize, &str, u16)> = [leader, attacked]
        .into_iter()
        .flat_map(|m| {
            let p = &ensemble.peers[m];
            [
                (m, "election", p.election_port),
                (m, "quorum", p.quorum_port),
            ]
        })
        .collect();
    let attacker = std::thread::spawn(move || {
        let mut problems = Vec::new();
        let mut slow_ones = Vec::new();
        let mut launched = 0;
        // The members that answered a looking stranger.
        let mut answered = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            for &(member, kind, port) in &targets {
                for attack in attacks(kind, member as u64 + 1) {
                    let what = format!("member {}, {}", member + 1, attack.name);
                    match (launch(port, &attack), attack.end) {
                        (Ok(s), End::Slow) => slow_ones.push((Instant::now(), 8, what, s)),
                        // initLimit (5 s) and syncLimit (2 s) plus a margin.
                        (Ok(s), End::Synced) => slow_ones.push((Instant::now(), 12, what, s)),
                        (Ok(mut s), End::Quick) => {
                            if !closed_within(&mut s, Duration::from_secs(3)) {
                                problems.push(format!("{what}: still open after 3 s"));
                            }
                        }
                        (Ok(mut s), End::Answered) => {
                            match answered_within(&mut s, Duration::from_secs(3)) {
                                Some(true) => answered.push(member),
                                Some(false) => {}
                                None => problems.push(format!("{what}: silent and open after 3 s")),
                            }
                        }
                        // Refused or reset while sending: the server ended it.
                        (Err(_), _) => {}
                    }
                    launched += 1;
                }
                // A burst of connections that close at once.
                for _ in 0..20 {
                    let _ = TcpStream::connect(("127.0.0.1", port));
                }
            }
            std::thread::sleep(Duration::from_millis(300));
        }
        // Handshake timeout (5 s) plus a margin, or a leader's sync's.
        for (opened, secs, what, mut s) in slow_ones {
            let left =
                (opened + Duration::from_secs(secs)).saturating_duration_since(Instant::now());
            if !closed_within(&mut s, left.max(Duration::from_millis(100))) {
                problems.push(format!("{what}: still open after {secs} s"));
            }
        }
        for member in [leader, attacked] {
            if !answered.contains(&member) {
                problems.push(format!(
                    "member {} never answered a looking stranger",
                    member + 1
                ));
            }
        }
        (launched, problems)
    });
    let (launched, problems) = tokio::task::spawn_blocking(move || attacker.join().unwrap())
        .await
        .unwrap();
    stop.store(true, Ordering::Relaxed);
    let (ok, failed) = writes.await.unwrap();

    assert!(
        failed.is_empty(),
        "writes through member {} failed while the peer ports were attacked ({ok} succeeded): {failed:?}\nlogs:\n{}",
        writer_member + 1,
        ensemble.logs()
    );
    assert!(ok > 50, "only {ok} writes in 10 s");
    eprintln!(
        "{launched} attacks on members {} and {}; {ok} writes through member {}, none failed",
        leader + 1,
        attacked + 1,
        writer_member + 1
    );
    assert!(
        problems.is_empty(),
        "connections the server should have ended or answered: {problems:?}\nlogs:\n{}",
        ensemble.logs()
    );
    assert_eq!(
        ensemble.leader(),
        Some(leader),
        "the leader changed; logs:\n{}",
        ensemble.logs()
    );
    assert_eq!(
        epoch(&ensemble, leader),
        Some(epoch_before),
        "a new epoch began (re-election); logs:\n{}",
        ensemble.logs()
    );
    for i in 0..3 {
        assert!(
            ensemble.mode(i).is_some(),
            "member {} stopped serving",
            i + 1
        );
    }
    assert_no_panic(&ensemble);
    // The attacks reached the peer code (not only the sockets).
    let log = ensemble.members[leader].log();
    assert!(
        log.contains("sid 99"),
        "the leader never saw the stranger's hello ({launched} attacks):\n{log}"
    );
    // Every acknowledged write is on every member.
    for i in 0..3 {
        let address = ensemble.connect_string(&[i]);
        let reader = zk::Client::connector()
            .with_session_timeout(SESSION)
            .with_fail_eagerly()
            .connect(&address);
        let reader = match within(reader).await {
            Ok(reader) => reader,
            Err(e) => panic!(
                "member {} refused a client after the attacks: {e}\n{}",
                i + 1,
                log_tails(&ensemble, 40)
            ),
        };
        within(reader.sync("/w")).await.unwrap();
        let n = within(reader.list_children("/w")).await.unwrap().len();
        assert_eq!(n, ok as usize, "member {}", i + 1);
    }
}
