//! What an operator's HTTP endpoints (the AdminServer, the Prometheus
//! endpoint) ask the node loop, which alone holds the state they show,
//! and their start.

use super::admin::{self, AdminQuery};
use super::prometheus;
use crate::config::Config;
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

/// The endpoints' tasks, and the node loop's end of their queries (none
/// when no endpoint is configured).
pub type Endpoints = (
    Vec<tokio::task::JoinHandle<()>>,
    Option<mpsc::Receiver<OperatorQuery>>,
);

/// Starts the configured endpoints. A Prometheus port that cannot be bound
/// is an error; an AdminServer port is only logged (as in ZooKeeper).
pub async fn start(config: &Config) -> std::io::Result<Endpoints> {
    if config.admin.is_none() && config.prometheus.is_none() {
        return Ok((Vec::new(), None));
    }
    let (tx, queries) = mpsc::channel(CAPACITY);
    let mut tasks = Vec::new();
    if let Some(prometheus) = &config.prometheus {
        tasks.push(prometheus::start(prometheus, &tx).await?);
    }
    tasks.extend(admin::start(config.admin.as_ref(), &tx).await);
    Ok((tasks, Some(queries)))
}
