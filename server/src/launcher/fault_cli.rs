//! `zkd fault --dir DIR VERB [ARGS]`: one fault for the ensemble `zkd
//! ensemble --dir DIR` runs, through its fault API (the URL is in
//! `DIR/fault-api`). Prints the API's JSON answer; exits 0 when the fault
//! was applied, 1 when it was refused, 2 when no ensemble answers.

use super::FAULT_API_FILE;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Flags of `zkd fault`.
#[derive(clap::Args, Clone, Debug)]
pub struct FaultArgs {
    /// The directory given to `zkd ensemble --dir`.
    #[arg(long, default_value = "zkd-ensemble")]
    pub dir: PathBuf,
    /// kill, restart, pause, resume, partition, partition-one-way, isolate,
    /// cut-clients, close-connections, slow-disk, disk-error, expire-session,
    /// heal or status.
    pub verb: String,
    /// The verb's arguments: a member number or `leader`, `A... / B...` for
    /// a partition, a session id `0x...`, milliseconds.
    #[arg(allow_hyphen_values = true)]
    pub args: Vec<String>,
}

/// Long enough for `heal` to wait for every member to serve.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(90);

/// Runs `zkd fault`; returns the process exit code.
pub fn run(args: &FaultArgs) -> ExitCode {
    let file = args.dir.join(FAULT_API_FILE);
    let Some(addr) = std::fs::read_to_string(&file).ok().and_then(|url| {
        let url = url.trim();
        url.strip_prefix("http://").map(str::to_owned)
    }) else {
        tracing::error!(
            "no ensemble is running in {} (no {}): start one with zkd ensemble --dir {}",
            args.dir.display(),
            file.display(),
            args.dir.display()
        );
        return ExitCode::from(2);
    };
    let (target, body) = match args.verb.as_str() {
        "status" if args.args.is_empty() => ("GET /status", None),
        _ => {
            let body = serde_json::json!({"verb": args.verb, "args": args.args});
            ("POST /faults", Some(body.to_string()))
        }
    };
    let mut request = format!("{target} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n");
    if let Some(body) = body {
        request.push_str(&format!(
            "content-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        ));
    } else {
        request.push_str("\r\n");
    }
    match exchange(&addr, &request) {
        Ok((code, body)) => {
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(body.as_bytes());
            let _ = out.flush();
            match code {
                200 => ExitCode::SUCCESS,
                _ => ExitCode::FAILURE,
            }
        }
        Err(e) => {
            tracing::error!("the ensemble's fault API at {addr} does not answer: {e}");
            ExitCode::from(2)
        }
    }
}

/// One request; the status code and body of the answer.
fn exchange(addr: &str, request: &str) -> std::io::Result<(u16, String)> {
    let mut stream = std::net::TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(ANSWER_TIMEOUT))?;
    stream.write_all(request.as_bytes())?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    let code = response
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = response
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_owned();
    Ok((code, body))
}
