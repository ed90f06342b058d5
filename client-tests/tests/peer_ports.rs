//! What one connection to a member's election or quorum port can do: a
//! stranger (no configured sid) or an impostor (claiming a member's sid).
//! Issue 35's frames (findings 9-12) as regressions, then a seeded fuzzer
//! of both ports of every member, each under a writer. Every member lives
//! and answers, the leader and its epoch stay, and every acknowledged
//! write is on every member.
//!
//! The fuzzer's seed is printed; `ZKD_PEER_FUZZ_SEED=N` replays one and
//! `ZKD_PEER_FUZZ_SECS=N` runs it longer (20 s by default).

use prost::Message;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::io::Write;
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use zkd_client_tests::ensemble::Ensemble;
use zkd_client_tests::peer_wire::{
    create_as_super, create_session, follower_info, frame, hello, quorum_frame, request,
};
use zkd_client_tests::process::four_letter_word_at;
use zkd_client_tests::{connect, ephemeral, persistent, within, ServerOptions};
use zkd_protocol::peer::election::{self as wire_election, ElectionMessage};
use zkd_protocol::peer::zab::{self as wire, QuorumPacket};
use zkd_protocol::OpCode;
use zookeeper_client as zk;

const SESSION: Duration = Duration::from_secs(10);

/// A member's peer ports from the ensemble's `server.N` lines.
struct Ports {
    quorum: String,
    election: String,
}

fn ports(ensemble: &Ensemble) -> Vec<Ports> {
    (ensemble.peers.iter())
        .map(|p| Ports {
            quorum: format!("{}:{}", p.host, p.quorum_port),
            election: format!("{}:{}", p.host, p.election_port),
        })
        .collect()
}

/// Writes `bytes` on a new connection to `addr`, `later` 100 ms after
/// (if any), keeps it open for `hold` (reading and dropping whatever comes
/// back), and closes it. Refusals and resets are what a hostile peer
/// should get: ignored here.
fn send_raw(addr: &str, bytes: &[u8], later: &[u8], hold: Duration) {
    let Ok(mut stream) = TcpStream::connect(addr) else {
        return;
    };
    let _ = stream.write_all(bytes);
    if !later.is_empty() {
        drain(&mut stream, Duration::from_millis(100));
        let _ = stream.write_all(later);
    }
    drain(&mut stream, hold);
}

/// Reads and drops what `stream` receives for `hold`, or until it closes.
fn drain(stream: &mut TcpStream, hold: Duration) {
    let _ = stream.set_read_timeout(Some(Duration::from_millis(50)));
    let end = Instant::now() + hold;
    let mut buf = [0u8; 4096];
    while Instant::now() < end {
        match std::io::Read::read(stream, &mut buf) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(_) => return,
        }
    }
}

/// The zxid member `i` reports in `srvr`, if it serves.
fn zxid(ensemble: &Ensemble, i: usize) -> Option<u64> {
    let m = &ensemble.members[i];
    let reply = four_letter_word_at(&m.host, m.port, "srvr").ok()?;
    let hex = reply.lines().find_map(|l| l.strip_prefix("Zxid: 0x"))?;
    u64::from_str_radix(hex.trim(), 16).ok()
}

/// Who leads, in which epoch.
fn reign(ensemble: &Ensemble) -> (usize, u64) {
    let leader = ensemble.wait_until_serving(&[0, 1, 2]);
    let zxid = zxid(ensemble, leader).expect("the leader answers srvr");
    (leader, zxid >> 32)
}

/// Creates sequential nodes under `/w` until `stop`, recording each one
/// whose create was acknowledged. Its session owns the ephemeral
/// `/w-alive`, so a session closed by anyone else shows.
struct Writer {
    session: i64,
    stop: Arc<AtomicBool>,
    acked: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<usize>,
}

impl Writer {
    async fn start(ensemble: &Ensemble) -> Writer {
        let client = connect(&ensemble.all(), SESSION).await;
        match within(client.create("/w", b"", &persistent())).await {
            Ok(_) | Err(zk::Error::NodeExists) => {}
            Err(e) => panic!("create /w: {e}"),
        }
        within(client.create("/w-alive", b"", &ephemeral()))
            .await
            .expect("create /w-alive");
        let session = client.session_id().0;
        let stop = Arc::new(AtomicBool::new(false));
        let acked = Arc::new(Mutex::new(Vec::new()));
        let (s, a) = (stop.clone(), acked.clone());
        let task = tokio::spawn(async move {
            let mode = zk::CreateMode::PersistentSequential.with_acls(zk::Acls::anyone_all());
            let mut failures = 0;
            while !s.load(Ordering::Relaxed) {
                let create = client.create("/w/n-", b"x", &mode);
                match tokio::time::timeout(Duration::from_secs(5), create).await {
                    Ok(Ok((_, seq))) => a.lock().unwrap().push(format!("n-{seq}")),
                    _ => {
                        failures += 1;
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                }
            }
            failures
        });
        Writer {
            session,
            stop,
            acked,
            task,
        }
    }

    /// Stops it; the acknowledged names and the failed attempts.
    async fn stop(self) -> (Vec<String>, usize) {
        self.stop.store(true, Ordering::Relaxed);
        let failures = self.task.await.expect("the writer task");
        let acked = self.acked.lock().unwrap().clone();
        (acked, failures)
    }
}

/// Every acknowledged write is on every member (each read after `sync`).
async fn assert_everywhere(ensemble: &Ensemble, acked: &[String]) {
    assert!(!acked.is_empty(), "the writer got nothing acknowledged");
    for (i, m) in ensemble.members.iter().enumerate() {
        let client = connect(&m.addr(), SESSION).await;
        within(client.sync("/w")).await.expect("sync");
        let children = within(client.list_children("/w")).await.expect("ls /w");
        let missing: Vec<&String> = acked.iter().filter(|a| !children.contains(a)).collect();
        assert!(
            missing.is_empty(),
            "member {} lacks {} of {} acknowledged writes, first {:?}",
            i + 1,
            missing.len(),
            acked.len(),
            missing.first()
        );
    }
}

/// After the hostile traffic: every process is alive, the same member
/// leads in the same epoch, every member serves, the writer's session
/// lives, and every write it saw acknowledged is on every member.
async fn assert_unharmed(ensemble: &mut Ensemble, before: (usize, u64), writer: Writer) {
    for (i, m) in ensemble.members.iter_mut().enumerate() {
        assert!(m.running(), "member {} died; logs:\n{}", i + 1, m.log());
    }
    let after = reign(ensemble);
    assert_eq!(
        after,
        before,
        "(leader, epoch) changed; logs:\n{}",
        ensemble.logs()
    );
    let client = connect(&ensemble.all(), SESSION).await;
    within(client.sync("/")).await.expect("sync");
    let alive = within(client.check_stat("/w-alive")).await.expect("stat");
    assert!(alive.is_some(), "the writer's session was closed");
    let (acked, failures) = writer.stop().await;
    assert_everywhere(ensemble, &acked).await;
    eprintln!("{} writes acknowledged, {failures} failed", acked.len());
}

/// Issue 35's frames, each to every member's quorum port and then again,
/// under a writer: FOLLOWERINFO claiming the leader's sid to a follower
/// (finding 9: it went back to election), claiming a follower's sid to the
/// leader (10: it replaced the live link), accepted epochs of u32::MAX and
/// of 2^31 (11 and 12: the epoch wrapped, zxids went negative), a flood
/// of later accepted epochs (11: 216 elections), and a stranger's later
/// epoch held open once the leader may yield to a member's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_frames_of_issue_35_harm_nobody() {
    let mut ensemble = Ensemble::start(3);
    let led_since = Instant::now();
    let before = reign(&ensemble);
    let (leader, epoch) = before;
    let ports = ports(&ensemble);
    let writer = Writer::start(&ensemble).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let leader_sid = leader as u64 + 1;
    let follower_sid = (0..3).find(|i| *i != leader).unwrap() as u64 + 1;
    let mut frames: Vec<(&str, Vec<u8>)> = vec![
        (
            "the fuzzer's frame (FOLLOWERINFO, epoch 1, sid 2)",
            hex("0000000a5a080801100218808004"),
        ),
        ("the leader's sid", follower_info(leader_sid, epoch)),
        ("a follower's sid", follower_info(follower_sid, epoch)),
        ("a later epoch", follower_info(follower_sid, epoch + 1)),
        (
            "epoch u32::MAX",
            follower_info(follower_sid, u32::MAX.into()),
        ),
        ("epoch 2^31", follower_info(follower_sid, 1 << 31)),
        ("epoch 2^31 - 1", follower_info(follower_sid, (1 << 31) - 1)),
    ];
    // A full handshake after the claim, as the fuzzer's impostor sent.
    let mut handshake = follower_info(follower_sid, epoch + 1);
    handshake.extend(quorum_frame(wire::AckEpoch {
        current_epoch: epoch as i64 + 1,
        last_logged_zxid: i64::MAX,
        log_base: 0,
        wants_snapshot: false,
    }));
    handshake.extend(quorum_frame(wire::Ack {
        zxid: ((epoch + 1) << 32) as i64,
    }));
    frames.push(("a whole handshake", handshake));
    let hold = Duration::from_millis(200);
    for round in 0..2 {
        for (what, bytes) in &frames {
            for (i, p) in ports.iter().enumerate() {
                let (addr, bytes) = (p.quorum.clone(), bytes.clone());
                tokio::task::spawn_blocking(move || send_raw(&addr, &bytes, &[], hold))
                    .await
                    .unwrap();
                assert!(
                    ensemble.members[i].running(),
                    "member {} died of {what} (round {round})",
                    i + 1
                );
            }
        }
    }
    // The flood: later epochs claimed for every sid at every member.
    let flood: Vec<_> = (0..200u64)
        .map(|n| {
            let p = &ports[(n % 3) as usize];
            let bytes = follower_info(n % 4 + 1, epoch + 1 + n);
            let addr = p.quorum.clone();
            tokio::task::spawn_blocking(move || send_raw(&addr, &bytes, &[], Duration::ZERO))
        })
        .collect();
    for f in flood {
        f.await.unwrap();
    }
    // A stranger (sid 4 is no member) claims a later epoch and stays, by
    // now past the two initLimits after which a member's claim would
    // depose the leader (initLimit is 5 s): a stranger's never does.
    let past_two_init_limits = led_since + Duration::from_secs(12);
    tokio::time::sleep_until(
        past_two_init_limits
            .max(Instant::now() + Duration::from_secs(1))
            .into(),
    )
    .await;
    for p in &ports {
        let addr = p.quorum.clone();
        let bytes = follower_info(4, epoch + 1);
        tokio::task::spawn_blocking(move || {
            send_raw(&addr, &bytes, &[], Duration::from_millis(500))
        })
        .await
        .unwrap();
    }
    // Long enough for a leader to have led two initLimits, and for any
    // election the frames started to show.
    tokio::time::sleep(Duration::from_secs(12)).await;
    assert_unharmed(&mut ensemble, before, writer).await;
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// What the fuzzer aims at: the ensemble's epoch, the writer's session
/// (a closeSession for it must not be taken), and each member's
/// election port and `server.N` line (a configuration naming it alone).
struct Target {
    epoch: u64,
    writer_session: i64,
    election_ports: Vec<String>,
    lines: Vec<String>,
}

/// Which port a fuzzed connection goes to, what it sends at once and
/// what a moment later (a request in a session created meanwhile), and
/// how long it stays.
struct Fuzzed {
    to_quorum: bool,
    bytes: Vec<u8>,
    later: Vec<u8>,
    hold: Duration,
}

/// One connection: a learner's handshake and traffic (REQUESTs as
/// `super`, snapshot requests, acks, pings) on the quorum port, votes and
/// configurations on the election port, or a silent socket; `n` names the
/// nodes its requests would create (`/fuzzed-n`).
fn fuzz(rng: &mut StdRng, target: &Target, member: usize, n: u64) -> Fuzzed {
    let silent = rng.gen_bool(0.1);
    let to_quorum = rng.gen_bool(0.6);
    let mut later = Vec::new();
    let mut bytes = match (silent, to_quorum) {
        (true, _) => Vec::new(),
        (false, true) => learner_bytes(rng, target, n, &mut later),
        (false, false) => election_bytes(rng, target, member),
    };
    damage(rng, &mut bytes);
    let hold = match silent {
        true => Duration::from_millis(rng.gen_range(500..4000)),
        false => Duration::from_millis(rng.gen_range(0..300)),
    };
    Fuzzed {
        to_quorum,
        bytes,
        later,
        hold,
    }
}

/// An epoch from the ones that could matter: none, the ensemble's, just
/// past it, far past it, and at or past the wrap.
fn any_epoch(rng: &mut StdRng, epoch: u64) -> u64 {
    let epochs = [
        0,
        1,
        epoch,
        epoch + 1,
        epoch + rng.gen_range(2..1000),
        (1 << 31) - 2,
        (1 << 31) - 1,
        1 << 31,
        u32::MAX.into(),
        u64::MAX,
    ];
    epochs[rng.gen_range(0..epochs.len())]
}

fn any_zxid(rng: &mut StdRng, epoch: u64) -> i64 {
    let zxids = [
        0,
        -1,
        i64::MAX,
        i64::MIN,
        (epoch << 32) as i64 + rng.gen_range(0..100),
    ];
    zxids[rng.gen_range(0..zxids.len())]
}

/// FOLLOWERINFO under any sid (a member's or a stranger's), half the time
/// the rest of a learner's handshake as ZooKeeper's would send it, then
/// what a learner may send, in any order and phase.
fn learner_bytes(rng: &mut StdRng, target: &Target, n: u64, later: &mut Vec<u8>) -> Vec<u8> {
    let sid = rng.gen_range(0..6);
    let epoch = any_epoch(rng, target.epoch);
    let mut out = follower_info(sid, epoch);
    if rng.gen() {
        out = follower_info(sid, target.epoch);
        out.extend(quorum_frame(wire::AckEpoch {
            current_epoch: target.epoch as i64,
            last_logged_zxid: 0,
            log_base: 0,
            wants_snapshot: true,
        }));
        let new_leader = (target.epoch << 32) as i64;
        out.extend(quorum_frame(wire::Ack { zxid: new_leader }));
    }
    for _ in 0..rng.gen_range(0..5) {
        let zxid = any_zxid(rng, target.epoch);
        let packet: QuorumPacket = match rng.gen_range(0..7) {
            0 => wire::AckEpoch {
                current_epoch: epoch as i64,
                last_logged_zxid: zxid,
                log_base: zxid,
                wants_snapshot: rng.gen(),
            }
            .into(),
            1 => wire::Ack { zxid }.into(),
            2 => wire::Ping {
                zxid,
                ..Default::default()
            }
            .into(),
            3 => wire::Revalidate {
                session_id: target.writer_session,
                timeout_ms: rng.gen(),
            }
            .into(),
            4 => {
                // The create waits for the session to be committed.
                let session = 0x7_0000_0000 + n as i64;
                out.extend(create_session(session));
                later.extend(create_as_super(session, &format!("/fuzzed-{n}")));
                continue;
            }
            5 => {
                let close = OpCode::CloseSession;
                out.extend(request(target.writer_session, 9, close, vec![], &[]));
                continue;
            }
            _ => wire::Commit { zxid, digest: None }.into(),
        };
        out.extend(quorum_frame(packet));
    }
    out
}

/// A hello under any sid, then votes: any state, leader, zxid and epoch,
/// sometimes with a configuration naming `member` alone at a later version.
fn election_bytes(rng: &mut StdRng, target: &Target, member: usize) -> Vec<u8> {
    let sid = rng.gen_range(0..6u64);
    let mut out = hello(sid, &target.election_ports[member]);
    for _ in 0..rng.gen_range(0..4) {
        let epoch = any_epoch(rng, target.epoch);
        let (config_version, config) = match rng.gen_bool(0.3) {
            true => {
                let version = rng.gen_range(1..u32::MAX as i64) << 16;
                let text = format!("{}\nversion={version:x}", target.lines[member]);
                (version, bytes::Bytes::from(text))
            }
            false => (0, Default::default()),
        };
        let n = wire_election::Notification {
            state: rng.gen_range(-1..5),
            leader: rng.gen_range(0..6),
            zxid: any_zxid(rng, target.epoch),
            election_epoch: if rng.gen() { epoch } else { u64::MAX },
            peer_epoch: epoch,
            sid,
            config_version,
            config,
        };
        out.extend(frame(&ElectionMessage::from(n).encode_to_vec()));
    }
    out
}

/// Sometimes damaged: a byte flipped, cut short, or replaced by noise.
fn damage(rng: &mut StdRng, out: &mut Vec<u8>) {
    match rng.gen_range(0..6) {
        0 if !out.is_empty() => {
            let at = rng.gen_range(0..out.len());
            out[at] ^= 1 << rng.gen_range(0..8);
        }
        1 if out.len() > 1 => out.truncate(rng.gen_range(1..out.len())),
        2 => *out = (0..rng.gen_range(1..64)).map(|_| rng.gen()).collect(),
        _ => {}
    }
}

/// The members' `server.N` lines, from the leader's configuration.
async fn server_lines(ensemble: &Ensemble) -> Vec<String> {
    let client = connect(&ensemble.all(), SESSION).await;
    let config = within(client.get_config()).await.expect("getConfig").0;
    let text = String::from_utf8_lossy(&config).to_string();
    (1..=ensemble.members.len())
        .map(|sid| {
            let prefix = format!("server.{sid}=");
            let line = text.lines().find(|l| l.starts_with(&prefix));
            line.expect("the member's server line").to_string()
        })
        .collect()
}

/// After the fuzzer: no request it sent was executed, and every member
/// serves the configuration it started with.
async fn assert_nothing_taken(ensemble: &Ensemble, sent: u64, config: &[u8]) {
    for (i, m) in ensemble.members.iter().enumerate() {
        let client = connect(&m.addr(), SESSION).await;
        within(client.sync("/")).await.expect("sync");
        let root = within(client.list_children("/")).await.expect("ls /");
        let fuzzed: Vec<&String> = root.iter().filter(|c| c.starts_with("fuzzed-")).collect();
        assert!(
            fuzzed.is_empty(),
            "member {} holds {fuzzed:?}: a fuzzed REQUEST as super was executed ({sent} connections)",
            i + 1
        );
        let served = within(client.get_config()).await.expect("getConfig").0;
        assert_eq!(
            String::from_utf8_lossy(&served),
            String::from_utf8_lossy(config),
            "member {} serves another configuration",
            i + 1
        );
    }
}

/// Strangers and impostors on both ports of every member, seeded and
/// replayable, at most 8 connections at once, under a writer, with
/// reconfig enabled (so a configuration taken would show). Besides
/// [`assert_unharmed`]: no fuzzed REQUEST ran, the writer's session
/// lives, and the configuration did not change.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_port_fuzzer_harms_nobody() {
    let seed = std::env::var("ZKD_PEER_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random::<u64>);
    let secs = std::env::var("ZKD_PEER_FUZZ_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    eprintln!("peer-port fuzzer: seed {seed} (ZKD_PEER_FUZZ_SEED={seed} replays it), {secs} s");
    let mut rng = StdRng::seed_from_u64(seed);
    let options = ServerOptions {
        extra: vec![("reconfigEnabled".into(), "true".into())],
        ..ServerOptions::default()
    };
    let mut ensemble = Ensemble::start_with(3, options);
    let before = reign(&ensemble);
    let ports = ports(&ensemble);
    let writer = Writer::start(&ensemble).await;
    let config = {
        let client = connect(&ensemble.all(), SESSION).await;
        within(client.get_config()).await.expect("getConfig").0
    };
    let target = Target {
        epoch: before.1,
        writer_session: writer.session,
        election_ports: ports.iter().map(|p| p.election.clone()).collect(),
        lines: server_lines(&ensemble).await,
    };
    let end = Instant::now() + Duration::from_secs(secs);
    let mut in_flight = tokio::task::JoinSet::new();
    let mut sent = 0u64;
    while Instant::now() < end {
        while in_flight.len() >= 8 {
            in_flight.join_next().await;
        }
        let member = rng.gen_range(0..ports.len());
        let fuzzed = fuzz(&mut rng, &target, member, sent);
        let addr = match fuzzed.to_quorum {
            true => ports[member].quorum.clone(),
            false => ports[member].election.clone(),
        };
        in_flight
            .spawn_blocking(move || send_raw(&addr, &fuzzed.bytes, &fuzzed.later, fuzzed.hold));
        sent += 1;
        tokio::time::sleep(Duration::from_millis(rng.gen_range(0..20))).await;
    }
    while in_flight.join_next().await.is_some() {}
    eprintln!("peer-port fuzzer: {sent} connections");
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_nothing_taken(&ensemble, sent, &config).await;
    assert_unharmed(&mut ensemble, before, writer).await;
}
