//! Issue 36, item 4: members authenticate each other with SASL
//! DIGEST-MD5, with ZooKeeper's keys (`quorum.auth.enableSasl`,
//! `quorum.auth.learnerRequireSasl`, `quorum.auth.serverRequireSasl`) and
//! the JAAS file's `QuorumServer` and `QuorumLearner` sections. An
//! ensemble that requires it elects, writes everywhere and survives its
//! leader's SIGKILL; a member without SASL or with a wrong password is kept
//! out, and a connection that claims a member's sid without credentials is
//! closed; a plaintext ensemble switches to required SASL one member at a
//! time, in ZooKeeper's three steps. ZooKeeper 3.8 runs an ensemble on the
//! same keys and JAAS file.

use prost::Message;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::Duration;
use zkd_client_tests::ensemble::Ensemble;
use zkd_client_tests::oracle_ensemble::ZooKeeperEnsemble;
use zkd_client_tests::ServerOptions;
use zkd_protocol::peer::election::{ElectionHello, ElectionMessage, PROTOCOL_VERSION_V1};
use zkd_protocol::peer::zab::{FollowerInfo, QuorumPacket, ZAB_PROTOCOL_VERSION};

const JAAS_KEY: &str = "java.security.auth.login.config";

/// A JAAS file whose members log in as `member` with `password`.
fn jaas(dir: &Path, name: &str, password: &str) -> String {
    let path = dir.join(name);
    let text = format!(
        r#"QuorumServer {{
    org.apache.zookeeper.server.auth.DigestLoginModule required
    user_member="quorum-secret";
}};
QuorumLearner {{
    org.apache.zookeeper.server.auth.DigestLoginModule required
    username="member"
    password="{password}";
}};
"#
    );
    std::fs::write(&path, text).expect("jaas");
    path.display().to_string()
}

const REQUIRED: [(&str, &str); 3] = [
    ("quorum.auth.enableSasl", "true"),
    ("quorum.auth.learnerRequireSasl", "true"),
    ("quorum.auth.serverRequireSasl", "true"),
];

fn options(keys: &[(&str, &str)]) -> ServerOptions {
    keys.iter().fold(
        ServerOptions {
            tick_time_ms: 500,
            ..ServerOptions::default()
        },
        |o, (k, v)| o.with(k, v),
    )
}

fn set(keys: &[(&'static str, &str)]) -> Vec<(&'static str, Option<String>)> {
    keys.iter()
        .map(|(k, v)| (*k, Some(v.to_string())))
        .collect()
}

fn unset(keys: &[(&'static str, &str)]) -> Vec<(&'static str, Option<String>)> {
    keys.iter().map(|(k, _)| (*k, None)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ensemble_requiring_quorum_sasl_elects_writes_everywhere_and_survives_its_leaders_death()
{
    let dir = tempfile::tempdir().expect("tempdir");
    let jaas = jaas(dir.path(), "quorum.jaas", "quorum-secret");
    let mut keys = REQUIRED.to_vec();
    keys.push((JAAS_KEY, &jaas));
    let mut ensemble = Ensemble::start_with(3, options(&keys));
    ensemble.writes_survive_the_leaders_death().await;
}

/// One peer frame: a 4-byte big-endian length, then the prost body.
fn frame(body: Vec<u8>) -> Vec<u8> {
    let mut out = (body.len() as u32).to_be_bytes().to_vec();
    out.extend_from_slice(&body);
    out
}

/// Sends `first` (a valid first frame that claims another member's sid)
/// to `addr` without SASL: whether the member closed the connection
/// (within 5 s) rather than answer or wait for more.
fn closes_a_claim_without_credentials(addr: (&str, u16), first: &[u8]) -> bool {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let _ = stream.write_all(first);
    let mut buf = [0u8; 64];
    // An answer, or silence while the link waits, is a link taken.
    match stream.read(&mut buf) {
        Ok(n) => n == 0,
        Err(e) => !matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_without_the_quorums_credentials_is_kept_out_and_the_others_serve() {
    let dir = tempfile::tempdir().expect("tempdir");
    let jaas_ok = jaas(dir.path(), "quorum.jaas", "quorum-secret");
    let jaas_wrong = jaas(dir.path(), "wrong.jaas", "not-the-secret");
    let mut keys = REQUIRED.to_vec();
    keys.push((JAAS_KEY, &jaas_ok));
    let mut ensemble = Ensemble::start_with(3, options(&keys));
    // Member 3 goes down; a stranger claims its sid on member 1's election
    // port and on the leader's quorum port. Without SASL both are closed
    // (with member 3's links idle, nothing else would refuse them).
    let out = 2;
    ensemble.members[out].kill9();
    ensemble.wait_until_serving(&[0, 1]);
    let leader = ensemble.leader().expect("a leader");
    let hello = ElectionMessage::from(ElectionHello {
        protocol_version: PROTOCOL_VERSION_V1,
        sid: 3,
        election_addr: format!("127.0.0.1:{}", ensemble.peers[out].election_port),
    });
    let first = &ensemble.peers[0];
    assert!(
        closes_a_claim_without_credentials(
            (&first.host, first.election_port),
            &frame(hello.encode_to_vec())
        ),
        "member 1 took a hello claiming sid 3 without credentials"
    );
    let info = QuorumPacket::from(FollowerInfo {
        accepted_epoch: 0,
        sid: 3,
        protocol_version: ZAB_PROTOCOL_VERSION,
        config_version: 0,
    });
    let at = &ensemble.peers[leader];
    assert!(
        closes_a_claim_without_credentials(
            (&at.host, at.quorum_port),
            &frame(info.encode_to_vec())
        ),
        "the leader took a FOLLOWERINFO claiming sid 3 without credentials"
    );

    ensemble.restart_with_keys(out, &unset(&keys));
    ensemble.assert_kept_out(out, "no quorum SASL");
    let serving: Vec<usize> = (0..3).filter(|i| *i != out).collect();
    ensemble
        .write_and_read_everywhere(serving[0], "/while-out", &["/while-out"])
        .await;

    let mut wrong = keys.clone();
    wrong.last_mut().unwrap().1 = &jaas_wrong;
    ensemble.restart_with_keys(out, &set(&wrong));
    ensemble.assert_kept_out(out, "a wrong password");

    ensemble.restart_with_keys(out, &set(&keys));
    ensemble.wait_until_serving(&[0, 1, 2]);
    ensemble
        .write_and_read_everywhere(out, "/joined", &["/while-out", "/joined"])
        .await;
    let logs = ensemble.logs();
    assert!(
        logs.contains("wrong password"),
        "no refusal logged:\n{logs}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plaintext_ensemble_switches_to_required_quorum_sasl_one_member_at_a_time() {
    let dir = tempfile::tempdir().expect("tempdir");
    let jaas = jaas(dir.path(), "quorum.jaas", "quorum-secret");
    let mut ensemble = Ensemble::start_with(3, options(&[]));
    let mut written = vec!["/plain".to_owned()];
    ensemble
        .write_and_read_everywhere(0, "/plain", &["/plain"])
        .await;
    // ZooKeeper's rolling steps: enable, then require as a learner, then
    // require as a server.
    let steps: [&[(&'static str, &str)]; 3] = [&REQUIRED[..1], &REQUIRED[..2], &REQUIRED[..]];
    for (step, on) in steps.iter().enumerate() {
        for member in 0..3 {
            let mut keys = set(on);
            keys.push((JAAS_KEY, Some(jaas.clone())));
            ensemble.restart_with_keys(member, &keys);
            ensemble.wait_until_serving(&[0, 1, 2]);
            let path = format!("/step{step}-{member}");
            written.push(path.clone());
            let paths: Vec<&str> = written.iter().map(String::as_str).collect();
            ensemble
                .write_and_read_everywhere((member + 1) % 3, &path, &paths)
                .await;
        }
    }
    let mut all = REQUIRED.to_vec();
    all.push((JAAS_KEY, ""));
    ensemble.restart_with_keys(2, &unset(&all));
    ensemble.assert_kept_out(2, "no SASL after the switch");
}

/// The oracle: the same keys and JAAS file run a ZooKeeper 3.8 ensemble
/// with required quorum SASL.
#[test]
fn zookeeper_runs_an_ensemble_on_the_same_quorum_sasl_keys() {
    let dir = tempfile::tempdir().expect("tempdir");
    let jaas = jaas(dir.path(), "quorum.jaas", "quorum-secret");
    let lines: String = REQUIRED.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
    let zookeeper = ZooKeeperEnsemble::start_with_lines(3, &lines, &[(JAAS_KEY, &jaas)]);
    let logs = zookeeper.logs();
    assert!(
        logs.contains("Successfully completed the authentication"),
        "ZooKeeper did not authenticate its members:\n{logs}"
    );
}
