//! Harness for driving real `zkd` processes (and Apache ZooKeeper, the oracle)
//! with stock clients: free ports, data dirs, start, kill -9, pause, restart.
//!
//! Every process started here is killed when its handle drops, and every wait
//! is bounded, so a failing test never leaves servers behind or hangs.

pub mod certs;
pub mod ensemble;
pub mod fault_ensemble;
pub mod in_process;
pub mod lazyfs;
pub mod nemesis;
pub mod netns;
pub mod oracle;
pub mod oracle_ensemble;
pub mod peer_wire;
pub mod process;
pub mod raw;
pub mod side_by_side;
pub mod zkcli;

pub use process::{ServerOptions, ZkdProcess};

use std::time::Duration;
use zookeeper_client as zk;

/// Upper bound for any single client operation in tests.
pub const OP_TIMEOUT: Duration = Duration::from_secs(10);

/// Connects a stock client with the given session timeout.
pub async fn connect(addr: &str, session_timeout: Duration) -> zk::Client {
    connect_with(zk::Client::connector(), addr, session_timeout).await
}

/// [`connect`], for a client whose session is left to expire when it is
/// dropped, as a killed client's is: no closeSession, not even to a server
/// that answers on its address later.
pub async fn connect_detached(addr: &str, session_timeout: Duration) -> zk::Client {
    connect_with(
        zk::Client::connector().with_detached(),
        addr,
        session_timeout,
    )
    .await
}

async fn connect_with(
    connector: zk::Connector,
    addr: &str,
    session_timeout: Duration,
) -> zk::Client {
    let fut = connector
        .with_session_timeout(session_timeout)
        .with_fail_eagerly()
        .connect(addr);
    tokio::time::timeout(OP_TIMEOUT, fut)
        .await
        .expect("connect timed out")
        .expect("connect failed")
}

/// Awaits `fut`, failing the test if it takes longer than [`OP_TIMEOUT`].
pub async fn within<T>(fut: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(OP_TIMEOUT, fut)
        .await
        .expect("operation timed out")
}

/// Options for a persistent node open to everyone.
pub fn persistent() -> zk::CreateOptions<'static> {
    zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all())
}

/// Options for an ephemeral node open to everyone.
pub fn ephemeral() -> zk::CreateOptions<'static> {
    zk::CreateMode::Ephemeral.with_acls(zk::Acls::anyone_all())
}
