//! The fault API: a small HTTP/1.1 server on 127.0.0.1, one request per
//! connection. `GET /status`; `POST /faults` with `{"verb": "kill", "args":
//! ["leader"]}` (the words of `zkd fault`). Answers are JSON: `{"ok": true,
//! "done": ..., "status": ...}`, or `{"ok": false, "error": ...}` with 400
//! (bad input) or 409 (not possible now); nothing is changed by a refusal.

use super::control::Control;
use super::fault_verbs::Verb;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The largest request head and body read.
const MAX_HEAD: usize = 16 * 1024;
const MAX_BODY: usize = 64 * 1024;
/// How long a client may take to send its request.
const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves the fault API until the task is aborted.
pub(super) async fn serve(listener: TcpListener, control: Arc<Control>) {
    while let Ok((stream, _)) = listener.accept().await {
        tokio::spawn(answer(stream, control.clone()));
    }
}

/// A request as far as the API needs it.
struct Request {
    method: String,
    path: String,
    body: Vec<u8>,
}

async fn answer(mut stream: TcpStream, control: Arc<Control>) {
    let (code, body) = match tokio::time::timeout(READ_TIMEOUT, read_request(&mut stream)).await {
        Ok(Ok(request)) => route(request, &control).await,
        Ok(Err(why)) => (400, refusal(&why)),
        Err(_) => (400, refusal("no complete request within 10 s")),
    };
    let reason = match code {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        _ => "Conflict",
    };
    let text = format!("{body:#}\n");
    let response = format!(
        "HTTP/1.1 {code} {reason}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{text}",
        text.len()
    );
    let _ = stream.write_all(response.as_bytes()).await;
    let _ = stream.shutdown().await;
}

fn refusal(why: &str) -> Value {
    json!({"ok": false, "error": why})
}

async fn route(request: Request, control: &Control) -> (u16, Value) {
    let path = request.path.split('?').next().unwrap_or("");
    match (request.method.as_str(), path) {
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

async fn read_request(stream: &mut TcpStream) -> Result<Request, String> {
    let mut buf = Vec::new();
    let head_end = loop {
        if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break at;
        }
        if buf.len() > MAX_HEAD {
            return Err("request head too large".into());
        }
        let mut chunk = [0u8; 4096];
        let n = stream.read(&mut chunk).await.map_err(|e| e.to_string())?;
        if n == 0 {
            return Err("the request ended early".into());
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut first = lines.next().unwrap_or("").split_whitespace();
    let (method, path) = match (first.next(), first.next()) {
        (Some(m), Some(p)) => (m.to_owned(), p.to_owned()),
        _ => return Err("not an HTTP request".into()),
    };
    let length = lines
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("content-length"))
        .map(|(_, v)| v.trim().parse::<usize>())
        .transpose()
        .map_err(|_| "a bad content-length".to_owned())?
        .unwrap_or(0);
    if length > MAX_BODY {
        return Err("request body too large".into());
    }
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < length {
        let mut chunk = vec![0u8; length - body.len()];
        let n = stream.read(&mut chunk).await.map_err(|e| e.to_string())?;
        if n == 0 {
            return Err("the body ended early".into());
        }
        body.extend_from_slice(&chunk[..n]);
    }
    body.truncate(length);
    Ok(Request { method, path, body })
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
