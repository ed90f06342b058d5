//! HTTP/1.1 for the operator's endpoints (the AdminServer, `/metrics`, the
//! fault API), on hyper: its parser, header limit and header timeout, one
//! request per connection, a deadline on the whole exchange (so a reader
//! that never reads cannot hold a response), and [`Admission`]'s share per
//! address, so a flood of idle or dribbling sockets from one place leaves
//! probes from elsewhere answered.

mod admission;

pub use admission::Admission;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::collections::BTreeMap;
use std::convert::Infallible;
use std::future::Future;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};

/// How an endpoint bounds its connections.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Connections held at once from one address.
    pub per_address: usize,
    /// Connections held at once in all.
    pub total: usize,
    /// Time to send the request head.
    pub head_timeout: Duration,
    /// Time for the whole exchange: head, body, answer and its writing.
    pub deadline: Duration,
    /// The largest request body taken.
    pub max_body: usize,
}

impl Limits {
    /// The AdminServer's and `/metrics`': quick questions, quick answers.
    pub const OPERATOR: Limits = Limits {
        per_address: 16,
        total: 256,
        head_timeout: Duration::from_secs(5),
        deadline: Duration::from_secs(30),
        max_body: 0,
    };
}

/// The smallest read buffer hyper allows, which bounds the request head.
const MAX_HEAD: usize = 8192;

/// What a request asks.
#[derive(Debug)]
pub struct Request {
    pub method: String,
    pub path: String,
    /// The query's parameters.
    pub args: BTreeMap<String, String>,
    /// The `Content-Type` header, if any.
    pub content_type: Option<String>,
    /// The `Host` header, if any.
    pub host: Option<String>,
    pub body: Bytes,
}

/// What a request gets: a status, a content type and a body.
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub content_type: &'static str,
    pub body: String,
}

impl Response {
    /// A `200 OK` with `body` of `content_type`.
    pub fn ok(content_type: &'static str, body: String) -> Response {
        Response {
            status: 200,
            content_type,
            body,
        }
    }

    /// An error page with `status`, as Jetty's.
    pub fn error(status: u16) -> Response {
        let reason = hyper::StatusCode::from_u16(status)
            .ok()
            .and_then(|s| s.canonical_reason())
            .unwrap_or_default();
        Response {
            status,
            content_type: "text/html",
            body: format!("<html><body><h2>HTTP ERROR {status} {reason}</h2></body></html>\n"),
        }
    }
}

/// Serves every connection to `listener` with `handler` within `limits`,
/// until the listener fails or the task is dropped.
pub async fn serve<H, F>(listener: TcpListener, limits: Limits, handler: H)
where
    H: Fn(Request) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response> + Send + 'static,
{
    let admission = Admission::new(limits.per_address, limits.total);
    loop {
        let (stream, from) = match listener.accept().await {
            Ok(accepted) => accepted,
            // Out of descriptors, say: wait rather than spin.
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        // Past its share, a connection is closed at once.
        let Some(slot) = admission.admit(from.ip()) else {
            continue;
        };
        let handler = handler.clone();
        tokio::spawn(async move {
            let _ =
                tokio::time::timeout(limits.deadline, connection(stream, limits, handler)).await;
            drop(slot);
        });
    }
}

async fn connection<H, F>(stream: TcpStream, limits: Limits, handler: H)
where
    H: Fn(Request) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response> + Send + 'static,
{
    let service = hyper::service::service_fn(move |request| {
        let handler = handler.clone();
        async move { Ok::<_, Infallible>(answer(request, limits.max_body, handler).await) }
    });
    let _ = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.head_timeout)
        .max_buf_size(MAX_HEAD)
        .keep_alive(false)
        .serve_connection(TokioIo::new(stream), service)
        .await;
}

async fn answer<H, F>(
    request: hyper::Request<hyper::body::Incoming>,
    max_body: usize,
    handler: H,
) -> hyper::Response<Full<Bytes>>
where
    H: Fn(Request) -> F,
    F: Future<Output = Response>,
{
    let (head, body) = request.into_parts();
    let header = |name| {
        let value = head.headers.get(name)?;
        value.to_str().ok().map(str::to_owned)
    };
    let response = match Limited::new(body, max_body).collect().await {
        Ok(body) => {
            let request = Request {
                method: head.method.as_str().to_owned(),
                path: head.uri.path().to_owned(),
                args: query_args(head.uri.query().unwrap_or_default()),
                content_type: header(hyper::header::CONTENT_TYPE),
                host: header(hyper::header::HOST),
                body: body.to_bytes(),
            };
            handler(request).await
        }
        Err(_) => Response::error(413),
    };
    let built = hyper::Response::builder()
        .status(response.status)
        .header(hyper::header::CONTENT_TYPE, response.content_type)
        .body(Full::new(Bytes::from(response.body)));
    built.unwrap_or_else(|_| hyper::Response::new(Full::new(Bytes::new())))
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
