//! Issue 36, item 3: TLS between members, with ZooKeeper's keys
//! (`sslQuorum`, `portUnification`, `ssl.quorum.*`). A 3-member ensemble
//! with quorum TLS elects, takes writes on every member and survives its
//! leader's SIGKILL; a member that speaks plaintext, shows a certificate
//! from another CA or one that does not name its address is kept out while
//! the others serve; and a plaintext ensemble switches to TLS one member at
//! a time with `portUnification`, serving throughout. Apache ZooKeeper 3.8
//! runs an ensemble on the same keys and certificates. Certificates are
//! made with openssl for each test.

use std::path::Path;
use std::time::Duration;
use zkd_client_tests::certs;
use zkd_client_tests::ensemble::Ensemble;
use zkd_client_tests::oracle_ensemble::ZooKeeperEnsemble;
use zkd_client_tests::{connect, persistent, within, ServerOptions};

const SESSION: Duration = Duration::from_secs(6);

/// A CA, a member certificate for 127.0.0.1 (`member.p12`, password
/// `secret`), one from another CA (`stranger.p12`) and one for another
/// host (`elsewhere.p12`).
fn certificates() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    // Java's TLS stack takes a member's certificate for both ends of a link.
    let usage = "extendedKeyUsage=serverAuth,clientAuth\n";
    std::fs::write(
        d.join("member.ext"),
        format!("{usage}subjectAltName=IP:127.0.0.1,DNS:localhost\n"),
    )
    .expect("ext");
    std::fs::write(
        d.join("elsewhere.ext"),
        format!("{usage}subjectAltName=IP:192.0.2.7\n"),
    )
    .expect("ext");
    certs::ca(d, "ca", "/CN=quorum-ca");
    certs::ca(d, "other", "/CN=other-ca");
    certs::sign(d, "member", "/CN=member", "ca", "member.ext", None);
    certs::sign(d, "stranger", "/CN=member", "other", "member.ext", None);
    certs::sign(d, "elsewhere", "/CN=elsewhere", "ca", "elsewhere.ext", None);
    for name in ["member", "stranger", "elsewhere"] {
        certs::pkcs12(d, name, "secret");
    }
    dir
}

/// The `ssl.quorum.*` keys with `store` as the key store.
fn quorum_keys(certs: &Path, store: &str) -> Vec<(&'static str, String)> {
    let at = |f: &str| certs.join(f).display().to_string();
    vec![
        ("ssl.quorum.keyStore.location", at(store)),
        ("ssl.quorum.keyStore.password", "secret".into()),
        ("ssl.quorum.trustStore.location", at("ca.pem")),
    ]
}

fn options(keys: &[(&str, String)]) -> ServerOptions {
    keys.iter().fold(
        ServerOptions {
            tick_time_ms: 500,
            ..ServerOptions::default()
        },
        |o, (k, v)| o.with(k, v),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ensemble_over_quorum_tls_elects_writes_everywhere_and_survives_its_leaders_death() {
    let certs = certificates();
    let mut keys = quorum_keys(certs.path(), "member.p12");
    keys.push(("sslQuorum", "true".into()));
    let mut ensemble = Ensemble::start_with(3, options(&keys));
    assert!(
        ensemble.logs().contains("quorum TLS on"),
        "{}",
        ensemble.logs()
    );
    ensemble.writes_survive_the_leaders_death().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_without_the_quorums_tls_is_kept_out_and_the_others_serve() {
    let certs = certificates();
    let mut keys = quorum_keys(certs.path(), "member.p12");
    keys.push(("sslQuorum", "true".into()));
    let mut ensemble = Ensemble::start_with(3, options(&keys));
    let out = (ensemble.leader().expect("a leader") + 1) % 3;
    let at = |f: &str| Some(certs.path().join(f).display().to_string());

    // Plaintext: no sslQuorum, no stores.
    let plaintext: Vec<(&str, Option<String>)> = keys.iter().map(|(k, _)| (*k, None)).collect();
    ensemble.restart_with_keys(out, &plaintext);
    ensemble.assert_kept_out(out, "plaintext");
    let serving: Vec<usize> = (0..3).filter(|i| *i != out).collect();
    ensemble
        .write_and_read_everywhere(
            serving[0],
            "/while-plaintext-knocks",
            &["/while-plaintext-knocks"],
        )
        .await;

    let mut tls: Vec<(&str, Option<String>)> =
        keys.iter().map(|(k, v)| (*k, Some(v.clone()))).collect();
    tls[0].1 = at("stranger.p12");
    ensemble.restart_with_keys(out, &tls);
    ensemble.assert_kept_out(out, "a certificate from another CA");

    tls[0].1 = at("elsewhere.p12");
    ensemble.restart_with_keys(out, &tls);
    ensemble.assert_kept_out(out, "a certificate for another address");

    tls[0].1 = at("member.p12");
    ensemble.restart_with_keys(out, &tls);
    ensemble.wait_until_serving(&[0, 1, 2]);
    ensemble
        .write_and_read_everywhere(out, "/joined", &["/while-plaintext-knocks", "/joined"])
        .await;
    let logs = ensemble.logs();
    assert!(
        logs.contains("quorum TLS"),
        "no TLS refusal logged:\n{logs}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plaintext_ensemble_switches_to_quorum_tls_one_member_at_a_time() {
    let certs = certificates();
    let keys = quorum_keys(certs.path(), "member.p12");
    let mut ensemble = Ensemble::start_with(3, options(&[]));
    let mut written = vec!["/plain".to_owned()];
    ensemble
        .write_and_read_everywhere(0, "/plain", &["/plain"])
        .await;

    // ZooKeeper's three rolling steps: take TLS beside plaintext, then dial
    // with TLS, then take TLS only.
    let stores: Vec<(&str, Option<String>)> =
        keys.iter().map(|(k, v)| (*k, Some(v.clone()))).collect();
    let steps = [
        ("unified", Some("false"), Some("true")),
        ("dialing TLS", Some("true"), Some("true")),
        ("TLS only", Some("true"), None),
    ];
    for (step, ssl_quorum, unified) in steps {
        for member in 0..3 {
            let mut keys = stores.clone();
            keys.push(("sslQuorum", ssl_quorum.map(str::to_owned)));
            keys.push(("portUnification", unified.map(str::to_owned)));
            ensemble.restart_with_keys(member, &keys);
            ensemble.wait_until_serving(&[0, 1, 2]);
            let path = format!("/{}-{member}", step.replace(' ', "-"));
            written.push(path.clone());
            let paths: Vec<&str> = written.iter().map(String::as_str).collect();
            ensemble
                .write_and_read_everywhere((member + 1) % 3, &path, &paths)
                .await;
        }
    }
    // Now a plaintext member is kept out.
    let plaintext: Vec<(&str, Option<String>)> = keys.iter().map(|(k, _)| (*k, None)).collect();
    let plaintext = [
        &plaintext[..],
        &[("sslQuorum", None), ("portUnification", None)],
    ]
    .concat();
    ensemble.restart_with_keys(2, &plaintext);
    ensemble.assert_kept_out(2, "plaintext after the switch");
}

#[test]
fn a_quorum_key_store_that_cannot_be_read_stops_the_member_with_why() {
    let certs = certificates();
    let mut keys = quorum_keys(certs.path(), "member.p12");
    keys.push(("sslQuorum", "true".into()));
    keys[1].1 = "wrong".into();
    let servers = "server.1=127.0.0.1:1:2\nserver.2=127.0.0.1:3:4\nserver.3=127.0.0.1:5:6\n";
    let port = zkd_client_tests::process::free_port();
    let error = zkd_client_tests::ZkdProcess::try_start_at(
        options(&keys),
        "127.0.0.1",
        port,
        servers,
        Some(1),
    )
    .err()
    .expect("a member with a wrong password must not start");
    assert!(
        error.contains("quorum TLS") && error.contains("password"),
        "{error}"
    );
}

/// The oracle: the keys and certificates the tests above give zkd run a
/// ZooKeeper 3.8 ensemble over quorum TLS too (its hostname verification
/// on, as zkd's), which takes a write through each member.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zookeeper_runs_an_ensemble_on_the_same_quorum_tls_keys() {
    let certs = certificates();
    let mut lines = String::from("sslQuorum=true\n");
    for (k, v) in quorum_keys(certs.path(), "member.p12") {
        lines.push_str(&format!("{k}={v}\n"));
    }
    let zookeeper = ZooKeeperEnsemble::start_with_lines(3, &lines, &[]);
    let logs = zookeeper.logs();
    assert!(
        logs.contains("Creating TLS-only quorum server socket")
            && logs.contains("SSL handshake complete"),
        "ZooKeeper did not use TLS:\n{logs}"
    );
    for i in 0..3 {
        let client = connect(&zookeeper.connect_string(&[i]), SESSION).await;
        let path = format!("/zk{i}");
        within(client.create(&path, b"tls", &persistent()))
            .await
            .unwrap_or_else(|e| panic!("create {path} on ZooKeeper member {}: {e}", i + 1));
    }
}
