//! Issue 36, item 3: TLS on the client port (`secureClientPort` with
//! ZooKeeper's `ssl.*` keys), beside the plaintext port. kazoo connects
//! over TLS with a client certificate, which authenticates it as
//! `x509:` + its subject (RFC 2253) for ACLs; key stores in PEM (with an
//! encrypted key and its password) and PKCS12; and what must fail does: no
//! certificate under `need`, an expired or untrusted one, a plaintext
//! client on the TLS port, a wrong key store password, a JKS store. The
//! server keeps serving through all of it. `client.portUnification` puts
//! TLS beside plaintext on the client port. Certificates are made with
//! openssl for each test.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use zkd_client_tests::certs::{self, openssl};
use zkd_client_tests::oracle::{require_tool, zookeeper_main, ZooKeeperProcess, ZOOKEEPER_JAR};
use zkd_client_tests::process::{free_port, zkd_binary, ServerOptions, ZkdProcess};

const X509: &str = "org.apache.zookeeper.server.auth.X509AuthenticationProvider";
const ALICE: &str = "CN=alice,OU=clients,O=example";

/// A CA, a server certificate for 127.0.0.1 (its key store as an encrypted
/// PEM and as PKCS12, password `secret`), alice's client certificate, an
/// expired one, and one from another CA.
fn certificates() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    std::fs::write(
        d.join("server.ext"),
        "subjectAltName=IP:127.0.0.1,DNS:localhost\n",
    )
    .expect("ext");
    // ZooKeeper checks a client certificate's address too (its
    // ssl.clientHostnameVerification, on by default).
    let client = "extendedKeyUsage=clientAuth\nsubjectAltName=IP:127.0.0.1\n";
    std::fs::write(d.join("client.ext"), client).expect("ext");
    certs::ca(d, "ca", "/CN=test-ca");
    certs::ca(d, "other", "/CN=other-ca");
    let sign = |name: &str, subject: &str, ca: &str, ext: &str, at: Option<&str>| {
        certs::sign(d, name, subject, ca, ext, at)
    };
    sign("server", "/CN=localhost", "ca", "server.ext", None);
    // zkCli splits an ACL at commas: bob's subject has none.
    sign("bob", "/CN=bob", "ca", "client.ext", None);
    sign(
        "alice",
        "/O=example/OU=clients/CN=alice",
        "ca",
        "client.ext",
        None,
    );
    sign(
        "expired",
        "/O=example/OU=clients/CN=alice",
        "ca",
        "client.ext",
        Some("2020-01-01 00:00:00"),
    );
    sign(
        "stranger",
        "/O=example/OU=clients/CN=alice",
        "other",
        "client.ext",
        None,
    );
    openssl(
        d,
        None,
        "pkcs8 -topk8 -v2 aes-256-cbc -in server.key -out server.enc.key -passout pass:secret",
    );
    let pem = std::fs::read_to_string(d.join("server.enc.key")).expect("key")
        + &std::fs::read_to_string(d.join("server.crt")).expect("cert");
    std::fs::write(d.join("server.pem"), pem).expect("pem");
    certs::pkcs12(d, "server", "secret");
    dir
}

fn tls_options(certs: &Path, store: &str, port: u16) -> ServerOptions {
    let at = |f: &str| certs.join(f).display().to_string();
    ServerOptions::default()
        .with("secureClientPort", &port.to_string())
        .with("secureClientPortAddress", "127.0.0.1")
        .with("ssl.keyStore.location", &at(store))
        .with("ssl.keyStore.password", "secret")
        .with("ssl.trustStore.location", &at("ca.pem"))
        .with("authProvider.x509", X509)
}

/// kazoo over TLS to `port`, as `cert` (or with none): its one line.
fn kazoo(certs: &Path, port: u16, cert: Option<&str>, action: &str, arg: &str) -> String {
    let at = |f: &str| certs.join(f).display().to_string();
    let (crt, key) = match cert {
        Some(name) => (at(&format!("{name}.crt")), at(&format!("{name}.key"))),
        None => ("-".into(), "-".into()),
    };
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/tls/kazoo_tls.py");
    let out = Command::new("python3")
        .args([
            script,
            &format!("127.0.0.1:{port}"),
            &at("ca.pem"),
            &crt,
            &key,
            action,
            arg,
        ])
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// A plaintext client (kazoo) on `addr` reads `path`: its one line.
fn plaintext_read(addr: &str, path: &str) -> String {
    let script = "import sys\nfrom kazoo.client import KazooClient\nzk=KazooClient(hosts=sys.argv[1]); zk.start(timeout=5)\ntry:\n    print('ok', zk.get(sys.argv[2])[0].decode())\nexcept Exception as e:\n    print(type(e).__name__)\nzk.stop()\n";
    let out = Command::new("python3")
        .args(["-c", script, addr, path])
        .output()
        .expect("python3");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

#[test]
fn kazoo_over_tls_authenticates_as_its_certificates_subject() {
    let certs = certificates();
    for store in ["server.pem", "server.p12"] {
        let port = free_port();
        let zkd = ZkdProcess::start_with(tls_options(certs.path(), store, port));
        let wrote = kazoo(certs.path(), port, Some("alice"), "write", ALICE);
        assert!(
            wrote.starts_with("ok /tls-") && wrote.ends_with("secret"),
            "{store}: {wrote}"
        );
        let path = wrote.split(' ').nth(1).expect("a path").to_owned();
        // Only alice's certificate opens it: not a plaintext client.
        assert_eq!(plaintext_read(&zkd.addr(), &path), "NoAuthError", "{store}");
        assert_eq!(
            kazoo(certs.path(), port, Some("alice"), "read", &path),
            "ok secret"
        );
    }
}

#[test]
fn what_must_fail_fails_and_the_server_keeps_serving() {
    let certs = certificates();
    let port = free_port();
    let zkd = ZkdProcess::start_with(tls_options(certs.path(), "server.pem", port));
    // ssl.clientAuth defaults to need, as in ZooKeeper.
    for cert in [None, Some("expired"), Some("stranger")] {
        assert_eq!(
            kazoo(certs.path(), port, cert, "read", "/"),
            "no-connection",
            "{cert:?}"
        );
    }
    // A plaintext client on the TLS port is closed.
    let plain = plaintext_read(&format!("127.0.0.1:{port}"), "/");
    assert!(!plain.starts_with("ok"), "{plain}");
    assert!(zkd.four_letter_word("ruok").contains("imok"));
    // Each refused handshake is counted, as ZooKeeper's Netty factory counts it.
    let mntr = zkd.four_letter_word("mntr");
    let count = |key: &str| {
        let line = mntr
            .lines()
            .find_map(|l| l.strip_prefix(&format!("zk_{key}\t")));
        line.and_then(|v| v.trim().parse::<u64>().ok()).unwrap_or(0)
    };
    assert!(count("unsuccessful_handshake") >= 4, "{mntr}");
    assert!(
        count("auth_failed_count") >= count("unsuccessful_handshake"),
        "{mntr}"
    );
    assert!(kazoo(certs.path(), port, Some("alice"), "write", ALICE).starts_with("ok"));
}

#[test]
fn client_auth_want_takes_clients_with_and_without_certificates() {
    let certs = certificates();
    let port = free_port();
    let _zkd = ZkdProcess::start_with(
        tls_options(certs.path(), "server.pem", port).with("ssl.clientAuth", "want"),
    );
    assert_eq!(kazoo(certs.path(), port, None, "read", "/zookeeper"), "ok");
    let wrote = kazoo(certs.path(), port, Some("alice"), "write", ALICE);
    let path = wrote.split(' ').nth(1).expect("a path").to_owned();
    assert_eq!(
        kazoo(certs.path(), port, None, "read", &path),
        "NoAuthError"
    );
}

/// `zkd serve` with TLS from `store` and `password`: its exit and stderr.
fn refused(certs: &Path, store: &str, password: &str) -> (bool, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("zoo.cfg");
    let text = format!(
        "dataDir={}\nclientPort={}\nsecureClientPort={}\nadmin.enableServer=false\nssl.keyStore.location={}\nssl.keyStore.password={password}\nssl.trustStore.location={}\n",
        dir.path().join("data").display(),
        free_port(),
        free_port(),
        certs.join(store).display(),
        certs.join("ca.pem").display(),
    );
    std::fs::write(&config, text).expect("zoo.cfg");
    let mut child = Command::new(zkd_binary())
        .args(["serve", "--config"])
        .arg(&config)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("zkd");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while child.try_wait().expect("wait").is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return (false, "still running".into());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().expect("output");
    (
        !out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_wrong_password_or_a_jks_store_stops_the_server_with_its_reason() {
    let certs = certificates();
    let (stopped, said) = refused(certs.path(), "server.pem", "wrong");
    assert!(stopped && said.contains("ssl.keyStore.password"), "{said}");
    let (stopped, said) = refused(certs.path(), "server.p12", "wrong");
    assert!(
        stopped && said.contains("server.p12") && said.contains("password"),
        "{said}"
    );
    let jks: PathBuf = certs.path().join("server.jks");
    std::fs::write(&jks, b"not read").expect("jks");
    let (stopped, said) = refused(certs.path(), "server.jks", "secret");
    assert!(
        stopped && said.contains("JKS") && said.contains("PKCS12"),
        "{said}"
    );
}

/// ZooKeeper's Java client (`ZooKeeperMain`, the CLI) with the Netty
/// socket over TLS as bob (`zookeeper.client.secure=true`, a PKCS12 key
/// store, a PEM trust store), or plaintext: the command's output lines.
fn java_cli(certs: &Path, addr: &str, secure: bool, command: &[&str]) -> Vec<String> {
    java_cli_as(certs, "bob", addr, secure, command)
}

/// The Java CLI as `who` (its `WHO.p12`).
fn java_cli_as(certs: &Path, who: &str, addr: &str, secure: bool, command: &[&str]) -> Vec<String> {
    let at = |f: &str| certs.join(f).display().to_string();
    let jvm = match secure {
        false => Vec::new(),
        true => vec![
            "-Dzookeeper.clientCnxnSocket=org.apache.zookeeper.ClientCnxnSocketNetty".to_owned(),
            "-Dzookeeper.client.secure=true".to_owned(),
            format!(
                "-Dzookeeper.ssl.keyStore.location={}",
                at(&format!("{who}.p12"))
            ),
            "-Dzookeeper.ssl.keyStore.password=secret".to_owned(),
            format!("-Dzookeeper.ssl.trustStore.location={}", at("ca.pem")),
            "-Dzookeeper.ssl.trustStore.type=PEM".to_owned(),
        ],
    };
    zookeeper_main(&jvm, addr, command)
}

/// bob's key store as PKCS12, which the Java client reads.
fn bob_pkcs12(certs: &Path) {
    client_pkcs12(certs, "bob");
}

/// `who`'s key store as PKCS12.
fn client_pkcs12(certs: &Path, who: &str) {
    let export = format!(
        "pkcs12 -export -in {who}.crt -inkey {who}.key -out {who}.p12 -passout pass:secret"
    );
    openssl(certs, None, &export);
}

/// ZooKeeper (on Netty, which its TLS needs) and zkd on the same TLS
/// keys with a PKCS12 key store, and their secure ports.
fn secure_servers(certs: &Path) -> (ZooKeeperProcess, ZkdProcess, u16, u16) {
    let (zk_port, zkd_port) = (free_port(), free_port());
    let lines = |port: u16| {
        tls_options(certs, "server.p12", port)
            .with(
                "serverCnxnFactory",
                "org.apache.zookeeper.server.NettyServerCnxnFactory",
            )
            .extra
    };
    let zk_lines: String = lines(zk_port)
        .iter()
        .map(|(k, v)| format!("{k}={v}\n"))
        .collect();
    let zk = ZooKeeperProcess::start_configured(2000, &[], &zk_lines);
    let zkd = ZkdProcess::start_with(ServerOptions {
        extra: lines(zkd_port),
        ..ServerOptions::default()
    });
    (zk, zkd, zk_port, zkd_port)
}

/// Both servers' key store is PKCS12 here: ZooKeeper 3.8 on Java 17
/// cannot read a PEM key encrypted with PBES2, openssl's default.
#[test]
fn the_java_client_over_tls_sees_the_same_on_zookeeper_and_zkd() {
    require_tool(ZOOKEEPER_JAR);
    let certs = certificates();
    bob_pkcs12(certs.path());
    let (zk, zkd, zk_port, zkd_port) = secure_servers(certs.path());
    let acl = "x509:CN=bob:cdrwa";
    let mut seen = Vec::new();
    for (plain, secure) in [(zk.addr(), zk_port), (zkd.addr(), zkd_port)] {
        let secure = format!("127.0.0.1:{secure}");
        let mut said = java_cli(
            certs.path(),
            &secure,
            true,
            &["create", "/j", "secret", acl],
        );
        said.extend(java_cli(certs.path(), &secure, true, &["get", "/j"]));
        said.extend(java_cli(certs.path(), &secure, true, &["getAcl", "/j"]));
        said.extend(java_cli(certs.path(), &plain, false, &["get", "/j"]));
        seen.push(said);
    }
    assert!(
        seen[0].iter().any(|l| l == "secret"),
        "ZooKeeper: {:#?}",
        seen[0]
    );
    assert_eq!(seen[1], seen[0], "zkd, then ZooKeeper");
}

/// Issue 50, item 7: a subject with attributes RFC 2253 has no keyword
/// for (emailAddress, serialNumber) is named as Java names it, the OID
/// and `#` and the whole BER in hex, on both servers.
#[test]
fn a_subject_with_email_and_serial_number_is_named_as_java_names_it() {
    require_tool(ZOOKEEPER_JAR);
    let certs = certificates();
    let subject = "/O=example/CN=carol/serialNumber=1234/emailAddress=carol@example.com";
    certs::sign(certs.path(), "carol", subject, "ca", "client.ext", None);
    client_pkcs12(certs.path(), "carol");
    let (_zk, _zkd, zk_port, zkd_port) = secure_servers(certs.path());
    let whoami = |port: u16| {
        let at = format!("127.0.0.1:{port}");
        java_cli_as(certs.path(), "carol", &at, true, &["whoami"])
    };
    let (theirs, ours) = (whoami(zk_port), whoami(zkd_port));
    assert!(
        theirs
            .iter()
            .any(|l| l.contains("1.2.840.113549.1.9.1=#16")),
        "ZooKeeper: {theirs:#?}"
    );
    assert_eq!(ours, theirs, "zkd, then ZooKeeper");
}

#[test]
fn the_secure_port_alone_serves_without_a_client_port() {
    let certs = certificates();
    let dir = tempfile::tempdir().expect("tempdir");
    let port = free_port();
    let at = |f: &str| certs.path().join(f).display().to_string();
    let config = dir.path().join("zoo.cfg");
    let text = format!(
        "dataDir={}\nsecureClientPort={port}\nsecureClientPortAddress=127.0.0.1\nadmin.enableServer=false\nssl.keyStore.location={}\nssl.keyStore.password=secret\nssl.trustStore.location={}\nauthProvider.x509={X509}\n",
        dir.path().join("data").display(),
        at("server.p12"),
        at("ca.pem"),
    );
    std::fs::write(&config, text).expect("zoo.cfg");
    let child = Command::new(zkd_binary())
        .args(["serve", "--config"])
        .arg(&config)
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("zkd");
    struct Killed(std::process::Child);
    impl Drop for Killed {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _zkd = Killed(child);
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "the secure port never opened"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(kazoo(certs.path(), port, Some("alice"), "write", ALICE).starts_with("ok /tls-"));
}

/// `client.portUnification=true`: the client port takes TLS and plaintext
/// both, told apart by the first byte, as ZooKeeper's Netty port does. The
/// Java client over TLS and in plaintext on that one port sees the same on
/// both servers; kazoo's certificate authenticates it; four-letter words
/// still answer there.
#[test]
fn a_unified_client_port_takes_tls_and_plaintext_on_zookeeper_and_zkd() {
    require_tool(ZOOKEEPER_JAR);
    let certs = certificates();
    bob_pkcs12(certs.path());
    let at = |f: &str| certs.path().join(f).display().to_string();
    let options = ServerOptions::default()
        .with("client.portUnification", "true")
        .with("ssl.keyStore.location", &at("server.p12"))
        .with("ssl.keyStore.password", "secret")
        .with("ssl.trustStore.location", &at("ca.pem"))
        .with("authProvider.x509", X509)
        .with(
            "serverCnxnFactory",
            "org.apache.zookeeper.server.NettyServerCnxnFactory",
        );
    let zk_lines: String = (options.extra.iter())
        .map(|(k, v)| format!("{k}={v}\n"))
        .collect();
    let zk = ZooKeeperProcess::start_configured(2000, &[], &zk_lines);
    let zkd = ZkdProcess::start_with(options);
    let mut seen = Vec::new();
    for addr in [zk.addr(), zkd.addr()] {
        let acl = "x509:CN=bob:cdrwa";
        let mut said = java_cli(certs.path(), &addr, true, &["create", "/u", "secret", acl]);
        said.extend(java_cli(certs.path(), &addr, true, &["get", "/u"]));
        said.extend(java_cli(certs.path(), &addr, false, &["get", "/u"]));
        said.extend(java_cli(
            certs.path(),
            &addr,
            false,
            &["create", "/plain", "p"],
        ));
        seen.push(said);
    }
    assert!(
        seen[0].iter().any(|l| l == "secret"),
        "ZooKeeper: {:#?}",
        seen[0]
    );
    assert!(
        seen[0].iter().any(|l| l == "Created /plain"),
        "ZooKeeper: {:#?}",
        seen[0]
    );
    assert_eq!(seen[1], seen[0], "zkd, then ZooKeeper");
    let alice = kazoo(certs.path(), zkd.port, Some("alice"), "write", ALICE);
    assert!(alice.starts_with("ok /tls-"), "{alice}");
    let srvr = zkd_client_tests::process::four_letter_word(zkd.port, "srvr").expect("srvr");
    assert!(srvr.contains("Mode: standalone"), "{srvr}");
}
