//! Issue 36, item 4: SASL DIGEST-MD5 for clients, with ZooKeeper's keys
//! (`authProvider.1=...SASLAuthenticationProvider`, the JAAS file's
//! `Server` section, which zkd takes from the zoo.cfg key
//! `java.security.auth.login.config`). Side by side with Apache ZooKeeper
//! 3.8 on the same zoo.cfg and JAAS file: kazoo (`sasl_options`) and the
//! Java client (a JAAS `Client` section) authenticate as `sasl:NAME`,
//! ACLs granted to it let them in and keep others out, a wrong password
//! or an unknown user fails, and `sessionRequireClientSASLAuth` closes
//! sessions that did not authenticate. An exchange cut after the
//! challenge leaves the server serving.

use std::path::Path;
use std::process::Command;
use zkd_client_tests::oracle::{require_tool, zookeeper_main, ZooKeeperProcess, ZOOKEEPER_JAR};
use zkd_client_tests::process::{four_letter_word, ServerOptions, ZkdProcess};
use zkd_client_tests::raw::{RawClient, Read1};
use zkd_protocol::records::GetSaslRequest;
use zkd_protocol::request::ClientRequest;

const SASL: &str = "org.apache.zookeeper.server.auth.SASLAuthenticationProvider";

/// The JAAS file: the server's users, and bob's client section.
fn jaas(dir: &Path) -> (String, String) {
    let server = dir.join("server.jaas");
    std::fs::write(
        &server,
        r#"/* zkd and ZooKeeper read the same file */
Server {
    org.apache.zookeeper.server.auth.DigestLoginModule required
    user_super="adminsecret"
    user_bob="bobsecret"
    user_carol="carolsecret";
};
"#,
    )
    .expect("jaas");
    let client = dir.join("client.jaas");
    std::fs::write(
        &client,
        r#"Client {
    org.apache.zookeeper.server.auth.DigestLoginModule required
    username="bob"
    password="bobsecret";
};
"#,
    )
    .expect("jaas");
    (server.display().to_string(), client.display().to_string())
}

/// zoo.cfg lines for SASL with `jaas`, and `more`.
fn lines(jaas: &str, more: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut lines = vec![
        ("authProvider.1".to_owned(), SASL.to_owned()),
        (
            "java.security.auth.login.config".to_owned(),
            jaas.to_owned(),
        ),
    ];
    lines.extend(more.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    lines
}

/// ZooKeeper and zkd on the same zoo.cfg lines (ZooKeeper also gets the
/// JAAS file as the JVM property it reads it from; it makes the other
/// keys `zookeeper.` properties itself).
fn both(jaas: &str, more: &[(&str, &str)]) -> (ZooKeeperProcess, ZkdProcess) {
    require_tool(ZOOKEEPER_JAR);
    let lines = lines(jaas, more);
    let text: String = lines.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
    let jvm = [("java.security.auth.login.config", jaas)];
    let zk = ZooKeeperProcess::start_configured(2000, &jvm, &text);
    let zkd = ZkdProcess::start_with(ServerOptions {
        extra: lines,
        ..ServerOptions::default()
    });
    (zk, zkd)
}

/// kazoo as `user` (`-`: without SASL): its one line.
fn kazoo(addr: &str, user: &str, password: &str, action: &str, path: &str, acl: &str) -> String {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/sasl/kazoo_sasl.py");
    let out = Command::new("python3")
        .args([script, addr, user, password, action, path, acl])
        .output()
        .expect("python3");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().last().unwrap_or_default().to_owned();
    assert!(
        !line.is_empty(),
        "kazoo said nothing: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    line
}

/// The same kazoo runs against both servers: the lines must agree.
fn kazoo_runs(zk: &str, zkd: &str, runs: &[[&str; 5]]) {
    for run in runs {
        let [user, password, action, path, acl] = *run;
        let theirs = kazoo(zk, user, password, action, path, acl);
        let ours = kazoo(zkd, user, password, action, path, acl);
        assert_eq!(ours, theirs, "kazoo {run:?}: zkd vs ZooKeeper");
    }
}

#[test]
fn kazoo_authenticates_as_its_sasl_user_on_zookeeper_and_zkd() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (server, _) = jaas(dir.path());
    let (zk, zkd) = both(&server, &[]);
    kazoo_runs(
        &zk.addr(),
        &zkd.addr(),
        &[
            ["bob", "bobsecret", "write", "/bob", "bob"],
            ["bob", "bobsecret", "acl", "/bob", "-"],
            ["bob", "bobsecret", "read", "/bob", "-"],
            ["-", "-", "read", "/bob", "-"],
            ["carol", "carolsecret", "read", "/bob", "-"],
            ["bob", "wrong", "read", "/bob", "-"],
            ["nobody", "x", "read", "/bob", "-"],
            // ZooKeeper's SASL provider lets its user "super" match any sasl ACL.
            ["super", "adminsecret", "read", "/bob", "-"],
            // An ACL for a sasl id is taken as is.
            ["carol", "carolsecret", "write", "/for-bob", "bob"],
            ["bob", "bobsecret", "read", "/for-bob", "-"],
        ],
    );
    // Failed SASL exchanges are not failed auth packets to ZooKeeper.
    let failed = |port: u16| {
        let mntr = four_letter_word(port, "mntr").expect("mntr");
        let line = mntr.lines().find(|l| l.starts_with("zk_auth_failed_count"));
        line.map(str::to_owned)
    };
    assert_eq!(failed(zkd.port), failed(zk.port));
    // kazoo fails a wrong password by itself too (the server's rspauth
    // does not check out): the server must have refused it first.
    let log = zkd.log();
    assert!(log.contains("a wrong password for \"bob\""), "{log}");
    assert!(log.contains("\"nobody\" is not a DIGEST-MD5 user"), "{log}");
}

#[test]
fn a_required_sasl_login_closes_sessions_that_did_not_authenticate() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (server, _) = jaas(dir.path());
    let (zk, zkd) = both(&server, &[("sessionRequireClientSASLAuth", "true")]);
    kazoo_runs(
        &zk.addr(),
        &zkd.addr(),
        &[
            ["bob", "bobsecret", "write", "/bob", "bob"],
            ["-", "-", "read", "/bob", "-"],
            ["bob", "wrong", "read", "/bob", "-"],
            ["bob", "bobsecret", "read", "/bob", "-"],
        ],
    );
    assert_eq!(
        kazoo(&zkd.addr(), "-", "-", "read", "/bob", "-"),
        "SessionClosedRequireSaslError"
    );
}

/// ZooKeeper's CLI (the Java client) as bob through the JAAS `Client`
/// section: its output lines for `command`.
fn java_cli(client_jaas: &str, addr: &str, command: &[&str]) -> Vec<String> {
    let jvm = [format!("-Djava.security.auth.login.config={client_jaas}")];
    zookeeper_main(&jvm, addr, command)
}

#[test]
fn the_java_client_with_a_jaas_client_section_sees_the_same_on_zookeeper_and_zkd() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (server, client) = jaas(dir.path());
    let (zk, zkd) = both(&server, &[]);
    for command in [
        &["create", "/j", "x", "sasl:bob:cdrwa"][..],
        &["getAcl", "/j"],
        &["get", "/j"],
        &["whoami"],
    ] {
        let theirs = java_cli(&client, &zk.addr(), command);
        let ours = java_cli(&client, &zkd.addr(), command);
        assert_eq!(ours, theirs, "{command:?}: zkd vs ZooKeeper");
    }
    let acl = java_cli(&client, &zkd.addr(), &["getAcl", "/j"]);
    assert!(acl.iter().any(|l| l == "'sasl,'bob"), "{acl:?}");
    assert_eq!(
        kazoo(&zkd.addr(), "-", "-", "read", "/j", "-"),
        "NoAuthError"
    );
}

/// Issue 50, item 1: with a wrong password in its JAAS `Client` section,
/// the Java client is told AuthFailed, as ZooKeeper tells it, not
/// ConnectionLoss (which an application would retry as a network fault).
#[test]
fn the_java_client_with_a_wrong_sasl_password_is_told_auth_failed_on_both() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (server, _) = jaas(dir.path());
    let wrong = dir.path().join("wrong.jaas");
    std::fs::write(
        &wrong,
        "Client {\n    org.apache.zookeeper.server.auth.DigestLoginModule required\n    username=\"bob\"\n    password=\"not-bobs\";\n};\n",
    )
    .expect("jaas");
    let wrong = wrong.display().to_string();
    let (zk, zkd) = both(&server, &[]);
    let theirs = java_cli(&wrong, &zk.addr(), &["get", "/zookeeper"]);
    let ours = java_cli(&wrong, &zkd.addr(), &["get", "/zookeeper"]);
    let said = |lines: &[String]| {
        lines
            .iter()
            .filter(|l| l.contains("KeeperErrorCode"))
            .cloned()
            .collect::<Vec<_>>()
    };
    assert_eq!(
        said(&ours),
        said(&theirs),
        "zkd {ours:?}\nZooKeeper {theirs:?}"
    );
    assert!(
        said(&ours).iter().any(|l| l.contains("AuthFailed")),
        "{ours:?}"
    );
}

#[test]
fn an_exchange_cut_after_the_challenge_leaves_the_server_serving() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (server, _) = jaas(dir.path());
    let zkd = ZkdProcess::start_with(ServerOptions {
        extra: lines(&server, &[]),
        ..ServerOptions::default()
    });
    for _ in 0..20 {
        let (mut raw, _) = RawClient::new_session(zkd.port, 6000);
        let sasl = ClientRequest::Sasl(GetSaslRequest {
            token: Default::default(),
        });
        let (header, body) = raw.call(1, &sasl);
        assert_eq!(header.err, 0);
        assert!(String::from_utf8_lossy(&body).contains("nonce="));
        // Garbage for an answer closes that connection only.
        let garbage = ClientRequest::Sasl(GetSaslRequest {
            token: b"username=\"bob\",\xff".to_vec().into(),
        });
        let (header, _) = raw.call(2, &garbage);
        assert_eq!(header.err, -115, "AUTHFAILED");
        assert_eq!(raw.read(), Read1::Closed);
    }
    for _ in 0..20 {
        let (mut raw, _) = RawClient::new_session(zkd.port, 6000);
        let sasl = ClientRequest::Sasl(GetSaslRequest {
            token: Default::default(),
        });
        raw.call(1, &sasl);
        drop(raw);
    }
    assert_eq!(
        kazoo(&zkd.addr(), "bob", "bobsecret", "write", "/after", "bob"),
        "ok secret"
    );
}
