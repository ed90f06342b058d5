//! The little HTTP/1.1 the operator's endpoints need (the AdminServer and
//! the Prometheus endpoint): one request per connection, its head at most
//! 16 KiB and read within 10 s, at most 32 connections at once (past that
//! a connection is closed at once), and a response with a length.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

/// The largest request head read.
const MAX_HEAD: usize = 16 * 1024;

/// How long a client may take to send its request head.
const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Connections served at once.
const MAX_CONNECTIONS: usize = 32;

/// What a request asks: its method, its path, and its query parameters.
#[derive(Debug)]
pub struct Request {
    pub method: String,
    pub path: String,
    pub args: BTreeMap<String, String>,
}

/// What a request gets: a status, a content type and a body.
#[derive(Debug)]
pub struct Response {
    pub status: &'static str,
    pub content_type: &'static str,
    pub body: String,
}

impl Response {
    /// A `200 OK` with `body` of `content_type`.
    pub fn ok(content_type: &'static str, body: String) -> Response {
        Response {
            status: "200 OK",
            content_type,
            body,
        }
    }

    /// An error page with `status`, as Jetty's.
    pub fn error(status: &'static str) -> Response {
        Response {
            status,
            content_type: "text/html",
            body: format!("<html><body><h2>HTTP ERROR {status}</h2></body></html>\n"),
        }
    }
}

/// Serves every connection to `listener` with `handler`, until the
/// listener fails.
pub async fn serve<H, F>(listener: TcpListener, handler: H)
where
    H: Fn(Request) -> F + Clone + Send + 'static,
    F: Future<Output = Response> + Send,
{
    let open = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    while let Ok((stream, _)) = listener.accept().await {
        // Past the bound a connection is closed at once: idle or slow
        // clients cannot pile up tasks.
        let Ok(slot) = open.clone().try_acquire_owned() else {
            continue;
        };
        let handler = handler.clone();
        tokio::spawn(async move {
            handle(stream, handler).await;
            drop(slot);
        });
    }
}

async fn handle<H, F>(mut stream: TcpStream, handler: H)
where
    H: Fn(Request) -> F,
    F: Future<Output = Response>,
{
    let response = match tokio::time::timeout(READ_TIMEOUT, read_head(&mut stream)).await {
        Ok(Some(request)) => handler(request).await,
        _ => Response::error("400 Bad Request"),
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
