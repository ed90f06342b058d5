//! ZooKeeper's Prometheus provider: `GET /metrics` on
//! `metricsProvider.httpHost:metricsProvider.httpPort` (every address and
//! 7000 by default) answers every metric in Prometheus' text format. On
//! only with `metricsProvider.className` naming ZooKeeper's provider. A
//! port that cannot be bound stops the server, as ZooKeeper's does.

use super::operator::OperatorQuery;
use crate::config::PrometheusConfig;
use crate::http::{self, Limits, Request, Response};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};

/// The content type of Prometheus' text format.
const TEXT_FORMAT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The endpoint's port, bound; an error names it.
pub fn bind(config: &PrometheusConfig) -> std::io::Result<std::net::TcpListener> {
    let bound = std::net::TcpListener::bind((config.host.as_str(), config.port))
        .and_then(|l| l.set_nonblocking(true).map(|()| l));
    let listener = bound.map_err(|e| {
        let at = format!("{}:{}", config.host, config.port);
        std::io::Error::new(
            e.kind(),
            format!("cannot start the /metrics endpoint on {at}: {e}"),
        )
    })?;
    tracing::info!(host = %config.host, port = config.port, "Prometheus /metrics endpoint started");
    Ok(listener)
}

/// Serves `/metrics` on `listener`, asking the node loop on `queries`.
pub async fn serve(listener: TcpListener, queries: mpsc::Sender<OperatorQuery>) {
    let handler = move |request| route(request, queries.clone());
    http::serve(listener, Limits::OPERATOR, handler).await
}

async fn route(request: Request, queries: mpsc::Sender<OperatorQuery>) -> Response {
    if request.path != "/metrics" {
        return Response::error(404);
    }
    if request.method != "GET" {
        return Response::error(405);
    }
    let (reply, text) = oneshot::channel();
    if queries.send(OperatorQuery::Metrics(reply)).await.is_err() {
        return Response::error(503);
    }
    match text.await {
        Ok(text) => Response::ok(TEXT_FORMAT, text),
        Err(_) => Response::error(503),
    }
}
