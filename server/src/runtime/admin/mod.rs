//! ZooKeeper's AdminServer: HTTP on `admin.serverAddress:admin.serverPort`
//! (every address and 8080 by default), on unless `admin.enableServer=false`.
//! `GET {commandURL}` lists the commands as links; `GET {commandURL}/NAME`
//! (a name or an alias) answers JSON with ZooKeeper's keys, plus `command`
//! and `error`, as ZooKeeper's `CommandResponse` does. A port that cannot
//! be bound is logged and the server runs on without it, as ZooKeeper's
//! does.

mod about_server;
mod commands;
mod quorum;
mod sessions;
mod stats;

use super::operator::OperatorQuery;
use crate::config::AdminConfig;
use crate::http::{self, Limits, Request, Response};
pub use commands::{answer, Context, COMMANDS};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};

/// A command for the node loop to answer: the command's canonical name,
/// the request's query parameters, and where its JSON goes.
#[derive(Debug)]
pub struct AdminQuery {
    pub command: &'static str,
    pub args: BTreeMap<String, String>,
    pub reply: oneshot::Sender<Map<String, Value>>,
}

/// The AdminServer's port, bound, and its command URL; None (logged) when
/// it cannot be bound, as ZooKeeper runs on without it.
pub fn bind(config: &AdminConfig) -> Option<(std::net::TcpListener, String)> {
    let bound = std::net::TcpListener::bind((config.address.as_str(), config.port))
        .and_then(|l| l.set_nonblocking(true).map(|()| l));
    let listener = match bound {
        Ok(l) => l,
        Err(e) => {
            tracing::warn!(
                address = %config.address,
                port = config.port,
                "problem starting the AdminServer, running without it: {e}"
            );
            return None;
        }
    };
    tracing::info!(address = %config.address, port = config.port, url = %config.command_url, "AdminServer started");
    Some((
        listener,
        config.command_url.trim_end_matches('/').to_owned(),
    ))
}

/// Serves the AdminServer on `listener`, asking the node loop on `queries`.
pub async fn serve(listener: TcpListener, url: String, queries: mpsc::Sender<OperatorQuery>) {
    let handler = move |request| route(request, url.clone(), queries.clone());
    http::serve(listener, Limits::OPERATOR, handler).await
}

async fn route(request: Request, url: String, queries: mpsc::Sender<OperatorQuery>) -> Response {
    let rest = match request.path.strip_prefix(url.as_str()) {
        Some(rest) if rest.is_empty() || rest.starts_with('/') => rest.trim_start_matches('/'),
        _ => return Response::error(404),
    };
    if request.method != "GET" {
        return Response::error(405);
    }
    if rest.is_empty() {
        return listing(&url);
    }
    let mut json = match commands::resolve(rest) {
        Some(command) => ask(command, request.args, &queries).await,
        None => unknown(rest),
    };
    if !json.contains_key("error") {
        json.insert("error".into(), Value::Null);
    }
    let body = serde_json::to_string_pretty(&Value::Object(json)).unwrap_or_default() + "\n";
    Response::ok("application/json", body)
}

/// The node loop's answer to `command`.
async fn ask(
    command: &'static str,
    args: BTreeMap<String, String>,
    queries: &mpsc::Sender<OperatorQuery>,
) -> Map<String, Value> {
    let (reply, answer) = oneshot::channel();
    let query = AdminQuery {
        command,
        args,
        reply,
    };
    match queries.send(OperatorQuery::Admin(query)).await {
        Ok(()) => answer.await.unwrap_or_else(|_| stopped(command)),
        Err(_) => stopped(command),
    }
}

fn stopped(command: &str) -> Map<String, Value> {
    let mut json = Map::new();
    json.insert("command".into(), command.into());
    json.insert("error".into(), "the server is stopping".into());
    json
}

/// ZooKeeper's answer to a name it does not know.
fn unknown(name: &str) -> Map<String, Value> {
    let mut json = Map::new();
    json.insert("command".into(), name.into());
    json.insert("error".into(), format!("Unknown command: {name}").into());
    json
}

/// The command list, one link each, as ZooKeeper's AdminServer shows it.
fn listing(url: &str) -> Response {
    let body = COMMANDS
        .iter()
        .map(|c| format!("<a href=\"{url}/{0}\">{0}</a>\n<br/>\n", c.name))
        .collect();
    Response::ok("text/html", body)
}
