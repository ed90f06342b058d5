//! The TLS part (standalone): what TLS costs, zkd's and ZooKeeper's, in one
//! run. Each server serves its plaintext client port and a secure one at
//! once (ZooKeeper on Netty, which its TLS needs, so both of its rows are
//! Netty's); the write and read phases run over each port in turn, with
//! the same certificates and a client certificate (`ssl.clientAuth=need`,
//! ZooKeeper's default), so TLS's extra server CPU per operation is the
//! difference of two rows measured on the same process.

use super::{row, run_phase, warm_up, Args, Phase, PhaseResult};
use std::path::Path;
use std::sync::OnceLock;
use zkd_client_tests::certs;
use zkd_client_tests::oracle::{ZooKeeperProcess, BENCH_HEAP};
use zkd_client_tests::process::free_port;
use zkd_client_tests::{ServerOptions, ZkdProcess};
use zookeeper_client as zk;

/// The scheme that marks an address to connect to over TLS.
pub const TLS_SCHEME: &str = "tcp+tls://";

/// The client's TLS options, set once the part has made its certificates.
static CLIENT_TLS: OnceLock<zk::TlsOptions> = OnceLock::new();

/// A client connected to `addr`: over TLS when it starts with [`TLS_SCHEME`].
pub async fn connect(addr: &str) -> zk::Client {
    let timeout = std::time::Duration::from_secs(30);
    let Some(tls) = addr.strip_prefix(TLS_SCHEME).and(CLIENT_TLS.get()) else {
        return zkd_client_tests::connect(addr, timeout).await;
    };
    let connector = zk::Client::connector()
        .with_session_timeout(timeout)
        .with_fail_eagerly()
        .with_tls(tls.clone());
    tokio::time::timeout(timeout, connector.secure_connect(addr))
        .await
        .expect("TLS connect timed out")
        .expect("TLS connect failed")
}

/// One server's write and read phases in plaintext and over TLS.
pub struct TlsRun {
    plain: [PhaseResult; 2],
    tls: [PhaseResult; 2],
}

/// A CA, the servers' key store (`server.p12`, password `secret`, for
/// 127.0.0.1) and the client's certificate and key, in `dir`.
fn certificates(dir: &Path) {
    std::fs::write(dir.join("server.ext"), "subjectAltName=IP:127.0.0.1\n").expect("ext");
    // ZooKeeper checks a client certificate's address too.
    let client = "extendedKeyUsage=clientAuth\nsubjectAltName=IP:127.0.0.1\n";
    std::fs::write(dir.join("client.ext"), client).expect("ext");
    certs::ca(dir, "ca", "/CN=bench-ca");
    certs::sign(dir, "server", "/CN=localhost", "ca", "server.ext", None);
    certs::sign(dir, "client", "/CN=bench", "ca", "client.ext", None);
    certs::pkcs12(dir, "server", "secret");
}

/// The zoo.cfg keys both servers get: both ports, the stores, Netty.
fn server_keys(dir: &Path, secure_port: u16) -> Vec<(String, String)> {
    let at = |f: &str| dir.join(f).display().to_string();
    let keys = [
        ("maxClientCnxns", "0".to_owned()),
        ("secureClientPort", secure_port.to_string()),
        ("secureClientPortAddress", "127.0.0.1".to_owned()),
        ("ssl.keyStore.location", at("server.p12")),
        ("ssl.keyStore.password", "secret".to_owned()),
        ("ssl.trustStore.location", at("ca.pem")),
        // Both servers close a client whose certificate no provider takes.
        (
            "authProvider.x509",
            "org.apache.zookeeper.server.auth.X509AuthenticationProvider".to_owned(),
        ),
        (
            "serverCnxnFactory",
            "org.apache.zookeeper.server.NettyServerCnxnFactory".to_owned(),
        ),
    ];
    keys.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
}

/// Runs the part on zkd, then on ZooKeeper.
pub async fn measure(args: &Args) -> (TlsRun, TlsRun) {
    let dir = tempfile::tempdir().expect("tempdir");
    certificates(dir.path());
    let read = |f: &str| std::fs::read_to_string(dir.path().join(f)).expect("certificate");
    let options = zk::TlsOptions::new()
        .with_pem_ca(&read("ca.pem"))
        .and_then(|o| o.with_pem_identity(&read("client.crt"), &read("client.key")))
        .expect("client TLS options");
    let _ = CLIENT_TLS.set(options);
    // zookeeper-client's rustls has both ring and aws-lc-rs here, so it
    // cannot pick one by itself: ring, as the server uses.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let port = free_port();
    let zkd = ZkdProcess::start_with(ServerOptions {
        extra: server_keys(dir.path(), port),
        ..ServerOptions::default()
    });
    let ours = run(&zkd.addr(), port, zkd.pid().unwrap_or(0), args).await;
    drop(zkd);
    let port = free_port();
    let lines: String = server_keys(dir.path(), port)
        .iter()
        .map(|(k, v)| format!("{k}={v}\n"))
        .collect();
    let zk = ZooKeeperProcess::start_sized(2000, &[], &lines, BENCH_HEAP);
    let theirs = run(&zk.addr(), port, zk.pid(), args).await;
    drop(zk);
    (ours, theirs)
}

async fn run(plain: &str, secure_port: u16, pid: u32, args: &Args) -> TlsRun {
    let secure = format!("{TLS_SCHEME}127.0.0.1:{secure_port}");
    let mut phases = Vec::new();
    for addr in [plain.to_owned(), secure] {
        for phase in [Phase::Write, Phase::Read] {
            let addrs = [addr.clone()];
            warm_up(&addrs, &[pid], args, phase).await;
            phases.push(run_phase(&addrs, &[pid], args, phase).await);
        }
    }
    let mut phases = phases.into_iter();
    let mut next = || phases.next().expect("four phases");
    TlsRun {
        plain: [next(), next()],
        tls: [next(), next()],
    }
}

/// Each run's rows, then TLS's cost in server CPU per operation.
pub fn print(ours: &TlsRun, theirs: &TlsRun) {
    super::header();
    for (name, run) in [("zkd", ours), ("zookeeper", theirs)] {
        row(name, "write", &run.plain[0]);
        row(name, "w tls", &run.tls[0]);
        row(name, "read", &run.plain[1]);
        row(name, "r tls", &run.tls[1]);
    }
    println!();
    println!("| TLS on the client port (server CPU us/op) | zkd plain | zkd TLS | ZooKeeper plain | ZooKeeper TLS | TLS costs zkd | TLS costs ZooKeeper | zkd/ZooKeeper, TLS |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    for (i, op) in ["write", "read"].into_iter().enumerate() {
        let cpu = |r: &PhaseResult| r.cpu_us_per_op();
        let (op_, ot) = (cpu(&ours.plain[i]), cpu(&ours.tls[i]));
        let (tp, tt) = (cpu(&theirs.plain[i]), cpu(&theirs.tls[i]));
        println!(
            "| {op} | {op_:.1} | {ot:.1} | {tp:.1} | {tt:.1} | {:+.1} | {:+.1} | {:.2}x |",
            ot - op_,
            tt - tp,
            ot / tt
        );
    }
    println!(
        "(both servers serve both ports at once; ZooKeeper's plaintext rows are on Netty too)"
    );
}
