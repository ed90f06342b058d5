//! ZooKeeper's Prometheus provider: `GET /metrics` on
//! `metricsProvider.httpHost:metricsProvider.httpPort` (every address and
//! 7000 by default) answers every metric in Prometheus' text format. On
//! only with `metricsProvider.className` naming ZooKeeper's provider. A
//! port that cannot be bound stops the server, as ZooKeeper's does.

use super::http::{self, Request, Response};
use super::operator::OperatorQuery;
use crate::config::PrometheusConfig;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};

/// The content type of Prometheus' text format.
const TEXT_FORMAT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Starts the endpoint, asking the node loop on `queries`: its task.
pub async fn start(
    config: &PrometheusConfig,
    queries: &mpsc::Sender<OperatorQuery>,
) -> std::io::Result<tokio::task::JoinHandle<()>> {
    let listener = TcpListener::bind((config.host.as_str(), config.port))
        .await
        .map_err(|e| {
            let at = format!("{}:{}", config.host, config.port);
            std::io::Error::new(
                e.kind(),
                format!("cannot start the /metrics endpoint on {at}: {e}"),
            )
        })?;
    tracing::info!(host = %config.host, port = config.port, "Prometheus /metrics endpoint started");
    let queries = queries.clone();
    let handler = move |request| route(request, queries.clone());
    Ok(tokio::spawn(http::serve(listener, handler)))
}

async fn route(request: Request, queries: mpsc::Sender<OperatorQuery>) -> Response {
    if request.path != "/metrics" {
        return Response::error("404 Not Found");
    }
    if request.method != "GET" {
        return Response::error("405 Method Not Allowed");
    }
    let (reply, text) = oneshot::channel();
    if queries.send(OperatorQuery::Metrics(reply)).await.is_err() {
        return Response::error("503 Service Unavailable");
    }
    match text.await {
        Ok(text) => Response::ok(TEXT_FORMAT, text),
        Err(_) => Response::error("503 Service Unavailable"),
    }
}
