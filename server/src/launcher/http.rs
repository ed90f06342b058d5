//! The fault API: HTTP/1.1 on 127.0.0.1 (served by [`crate::http`]).
//! `GET /status`; `POST /faults` with `{"verb": "kill", "args":
//! ["leader"]}` (the words of `zkd fault`) as `application/json`, so that
//! a web page cannot send one as a form or as text. The `Host` must be
//! this address by a loopback name, so that a page on a domain rebound to
//! 127.0.0.1 cannot reach it. Answers are JSON: `{"ok": true, "done": ...,
//! "status": ...}`, or `{"ok": false, "error": ...}` with 400 (bad input),
//! 403 (a foreign Host), 415 (not JSON) or 409 (not possible now); nothing
//! is changed by a refusal.

use super::control::Control;
use super::fault_verbs::Verb;
use crate::http::{self, Limits, Request, Response};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;

/// Connections and requests: `heal` and `add` answer once every member
/// serves, which may take a minute.
const LIMITS: Limits = Limits {
    per_address: 16,
    total: 64,
    head_timeout: Duration::from_secs(5),
    deadline: Duration::from_secs(120),
    max_body: 64 * 1024,
};

/// Serves the fault API until the task is aborted.
pub(super) async fn serve(listener: TcpListener, control: Arc<Control>) {
    let port = listener.local_addr().map_or(0, |a| a.port());
    let handler = move |request| answer(request, port, control.clone());
    http::serve(listener, LIMITS, handler).await
}

async fn answer(request: Request, port: u16, control: Arc<Control>) -> Response {
    let (code, body) = match refused(&request, port) {
        Some(refusal) => refusal,
        None => route(request, &control).await,
    };
    Response {
        status: code,
        content_type: "application/json",
        body: format!("{body:#}\n"),
    }
}

/// Why a request is refused before it is read: a `Host` that is not this
/// API's loopback address, or a POST that is not JSON.
fn refused(request: &Request, port: u16) -> Option<(u16, Value)> {
    let ours = ["127.0.0.1", "localhost", "[::1]"].map(|host| format!("{host}:{port}"));
    let host = request.host.as_deref().unwrap_or_default();
    if !ours.iter().any(|h| h.eq_ignore_ascii_case(host)) {
        let why = format!("Host {host:?} is not this API's address (127.0.0.1:{port})");
        return Some((403, refusal(&why)));
    }
    let media = request.content_type.as_deref().unwrap_or_default();
    let media = media.split(';').next().unwrap_or_default().trim();
    if request.method == "POST" && !media.eq_ignore_ascii_case("application/json") {
        let why = "a fault is sent as Content-Type: application/json";
        return Some((415, refusal(why)));
    }
    None
}

fn refusal(why: &str) -> Value {
    json!({"ok": false, "error": why})
}

async fn route(request: Request, control: &Control) -> (u16, Value) {
    match (request.method.as_str(), request.path.as_str()) {
        ("GET", "/status") => {
            let mut status = control.status().await;
            status["ok"] = json!(true);
            (200, status)
        }
        ("POST", "/faults") => {
            let verb = match parse_body(&request.body, control.size()) {
                Ok(verb) => verb,
                Err(why) => return (400, refusal(&why)),
            };
            match control.run(verb).await {
                Ok(mut answer) => {
                    answer["ok"] = json!(true);
                    (200, answer)
                }
                Err(why) => (409, refusal(&why)),
            }
        }
        (_, "/status" | "/faults") => (405, refusal("use GET /status or POST /faults")),
        _ => (
            404,
            refusal("unknown path: use GET /status or POST /faults"),
        ),
    }
}

/// `{"verb": "...", "args": [...]}`; args may be strings or numbers.
fn parse_body(body: &[u8], members: usize) -> Result<Verb, String> {
    let value: Value =
        serde_json::from_slice(body).map_err(|e| format!("the body is not JSON: {e}"))?;
    let verb = value
        .get("verb")
        .and_then(Value::as_str)
        .ok_or("the body needs a \"verb\" string")?;
    let args = match value.get("args") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| match item {
                Value::String(s) => Ok(s.clone()),
                Value::Number(n) => Ok(n.to_string()),
                other => Err(format!(
                    "an argument must be a string or a number, not {other}"
                )),
            })
            .collect::<Result<_, _>>()?,
        Some(other) => return Err(format!("\"args\" must be an array, not {other}")),
    };
    Verb::parse(verb, &args, members)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_parse_and_malformed_ones_are_refused() {
        assert_eq!(
            parse_body(br#"{"verb": "slow-disk", "args": [2, "150"]}"#, 3),
            Ok(Verb::SlowDisk(2, 150))
        );
        assert_eq!(parse_body(br#"{"verb": "heal"}"#, 3), Ok(Verb::Heal));
        for bad in [
            &b"kill 1"[..],
            br#"{"args": [1]}"#,
            br#"{"verb": "kill", "args": "1"}"#,
            br#"{"verb": "kill", "args": [{"member": 1}]}"#,
            br#"{"verb": "kill", "args": [9]}"#,
        ] {
            assert!(
                parse_body(bad, 3).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }
}
