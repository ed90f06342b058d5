//! The operator's HTTP endpoints (the AdminServer, the Prometheus
//! endpoint): bound at start, served on a thread of their own so that no
//! operator traffic, honest or not, runs on the thread that serves clients
//! and peers. What they show, they ask the node loop, which alone holds it.

use super::admin::{self, AdminQuery};
use super::prometheus;
use crate::config::Config;
use std::net::TcpListener;
use tokio::sync::{mpsc, oneshot};

/// Queries waiting for the node loop.
const CAPACITY: usize = 64;

/// One question for the node loop.
#[derive(Debug)]
pub enum OperatorQuery {
    /// An AdminServer command.
    Admin(AdminQuery),
    /// Every metric, in Prometheus' text format.
    Metrics(oneshot::Sender<String>),
}

/// An endpoint's bound port, and what it serves there.
enum Endpoint {
    /// The AdminServer, under its command URL.
    Admin(TcpListener, String),
    Metrics(TcpListener),
}

/// The thread serving the endpoints; dropping it stops them.
pub struct OperatorThread {
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for OperatorThread {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The endpoints' thread, and the node loop's end of their queries (none
/// when no endpoint is configured).
pub type Endpoints = (
    Option<OperatorThread>,
    Option<mpsc::Receiver<OperatorQuery>>,
);

/// Binds and starts the configured endpoints. A Prometheus port that
/// cannot be bound is an error; an AdminServer port is only logged (as in
/// ZooKeeper).
pub fn start(config: &Config) -> std::io::Result<Endpoints> {
    let mut endpoints = Vec::new();
    if let Some(prometheus) = &config.prometheus {
        endpoints.push(Endpoint::Metrics(prometheus::bind(prometheus)?));
    }
    if let Some((listener, url)) = config.admin.as_ref().and_then(admin::bind) {
        endpoints.push(Endpoint::Admin(listener, url));
    }
    if endpoints.is_empty() {
        return Ok((None, None));
    }
    let (tx, queries) = mpsc::channel(CAPACITY);
    let (stop, stopped) = oneshot::channel();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let thread = std::thread::Builder::new()
        .name("zkd-operator".into())
        .spawn(move || runtime.block_on(serve(endpoints, tx, stopped)))?;
    let thread = OperatorThread {
        stop: Some(stop),
        thread: Some(thread),
    };
    Ok((Some(thread), Some(queries)))
}

async fn serve(
    endpoints: Vec<Endpoint>,
    queries: mpsc::Sender<OperatorQuery>,
    stopped: oneshot::Receiver<()>,
) {
    for endpoint in endpoints {
        let (listener, url) = match endpoint {
            Endpoint::Admin(listener, url) => (listener, Some(url)),
            Endpoint::Metrics(listener) => (listener, None),
        };
        let listener = match tokio::net::TcpListener::from_std(listener) {
            Ok(listener) => listener,
            Err(e) => {
                tracing::warn!("an operator endpoint cannot be served: {e}");
                continue;
            }
        };
        match url {
            Some(url) => tokio::spawn(admin::serve(listener, url, queries.clone())),
            None => tokio::spawn(prometheus::serve(listener, queries.clone())),
        };
    }
    // Until the server stops: then the runtime drops every connection.
    let _ = stopped.await;
}
