//! ZooKeeper's AdminServer: HTTP on `admin.serverAddress:admin.serverPort`
//! (every address and 8080 by default), on unless `admin.enableServer=false`.
//! `GET {commandURL}` lists the commands as links; `GET {commandURL}/NAME`
//! (a name or an alias) answers JSON with ZooKeeper's keys, plus `command`
//! and `error`, as ZooKeeper's `CommandResponse` does. A port that cannot
//! be bound is logged and the server runs on without it, as ZooKeeper's
//! does. One request per connection.

mod about_server;
mod commands;
mod quorum;
mod sessions;
mod stats;

use crate::config::AdminConfig;
pub use commands::{answer, Context, COMMANDS};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot, Semaphore};

/// The largest request head read.
const MAX_HEAD: usize = 16 * 1024;

/// How long a client may take to send its request head.
const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Connections served at once.
const MAX_CONNECTIONS: usize = 32;

/// Capacity of the channel to the node loop.
pub const ADMIN_CAPACITY: usize = 64;

/// A command for the node loop to answer: the command's canonical name,
/// the request's query parameters, and where its JSON goes.
#[derive(Debug)]
pub struct AdminQuery {
    pub command: &'static str,
    pub args: BTreeMap<String, String>,
    pub reply: oneshot::Sender<Map<String, Value>>,
}

/// Starts the AdminServer if it is configured: its task, and the node
/// loop's end of its channel.
pub async fn start(
    config: Option<&AdminConfig>,
) -> Option<(tokio::task::JoinHandle<()>, mpsc::Receiver<AdminQuery>)> {
    let config = config?;
    let listener = match TcpListener::bind((config.address.as_str(), config.port)).await {
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
    let (tx, rx) = mpsc::channel(ADMIN_CAPACITY);
    let url = config.command_url.trim_end_matches('/').to_owned();
    Some((tokio::spawn(serve(listener, url, tx)), rx))
}

async fn serve(listener: TcpListener, url: String, queries: mpsc::Sender<AdminQuery>) {
    let open = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    while let Ok((stream, _)) = listener.accept().await {
        // Past the bound a connection is closed at once: idle or slow
        // clients cannot pile up tasks.
        let Ok(slot) = open.clone().try_acquire_owned() else {
            continue;
        };
        let (url, queries) = (url.clone(), queries.clone());
        tokio::spawn(async move {
            handle(stream, url, queries).await;
            drop(slot);
        });
    }
}

/// What a request gets: a status, a content type and a body.
struct Response {
    status: &'static str,
    content_type: &'static str,
    body: String,
}

async fn handle(mut stream: TcpStream, url: String, queries: mpsc::Sender<AdminQuery>) {
    let response = match tokio::time::timeout(READ_TIMEOUT, read_head(&mut stream)).await {
        Ok(Some(request)) => route(request, &url, &queries).await,
        _ => error_page("400 Bad Request"),
    };
    let head = format!(
        "HTTP/1.1 {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        response.status,
        response.content_type,
        response.body.len()
    );
    let _ = stream.write_all(head.as_bytes()).await;
    let _ = stream.write_all(response.body.as_bytes()).await;
    let _ = stream.shutdown().await;
}

/// What a request asks: its method, its path, and its query parameters.
struct Request {
    method: String,
    path: String,
    args: BTreeMap<String, String>,
}

/// The request line, once the whole head is in; None for anything that is
/// not an HTTP request head.
async fn read_head(stream: &mut TcpStream) -> Option<Request> {
    let mut head = Vec::new();
    let mut buf = [0u8; 2048];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut buf).await.ok()?;
        if n == 0 || head.len() + n > MAX_HEAD {
            return None;
        }
        head.extend_from_slice(&buf[..n]);
    }
    let line = std::str::from_utf8(&head).ok()?.lines().next()?;
    let mut words = line.split(' ');
    let (method, target) = (words.next()?, words.next()?);
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    Some(Request {
        method: method.to_owned(),
        path: path.to_owned(),
        args: query_args(query),
    })
}

/// `a=1&b=2` as a map; a key given twice keeps its first value, as a
/// servlet's `getParameter` does. Values are taken as sent: the only
/// parameter a command reads (`traceMask`) is a number.
fn query_args(query: &str) -> BTreeMap<String, String> {
    let mut args = BTreeMap::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        args.entry(key.to_owned())
            .or_insert_with(|| value.to_owned());
    }
    args
}

async fn route(request: Request, url: &str, queries: &mpsc::Sender<AdminQuery>) -> Response {
    let rest = match request.path.strip_prefix(url) {
        Some(rest) if rest.is_empty() || rest.starts_with('/') => rest.trim_start_matches('/'),
        _ => return error_page("404 Not Found"),
    };
    if request.method != "GET" {
        return error_page("405 Method Not Allowed");
    }
    if rest.is_empty() {
        return listing(url);
    }
    let mut json = match commands::resolve(rest) {
        Some(command) => ask(command, request.args, queries).await,
        None => unknown(rest),
    };
    if !json.contains_key("error") {
        json.insert("error".into(), Value::Null);
    }
    Response {
        status: "200 OK",
        content_type: "application/json",
        body: serde_json::to_string_pretty(&Value::Object(json)).unwrap_or_default() + "\n",
    }
}

/// The node loop's answer to `command`.
async fn ask(
    command: &'static str,
    args: BTreeMap<String, String>,
    queries: &mpsc::Sender<AdminQuery>,
) -> Map<String, Value> {
    let (reply, answer) = oneshot::channel();
    let query = AdminQuery {
        command,
        args,
        reply,
    };
    let asked = queries.send(query).await;
    match asked {
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
    Response {
        status: "200 OK",
        content_type: "text/html",
        body,
    }
}

fn error_page(status: &'static str) -> Response {
    Response {
        status,
        content_type: "text/html",
        body: format!("<html><body><h2>HTTP ERROR {status}</h2></body></html>\n"),
    }
}
