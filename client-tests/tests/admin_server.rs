//! Issue 36, item 1: zkd's AdminServer beside Debian's ZooKeeper 3.8
//! AdminServer (Jetty), the same requests to both. Every command zkd lists
//! is one ZooKeeper lists, under the same names and aliases, and answers
//! with ZooKeeper's keys and JSON types, nested objects included (JVM-only
//! keys aside, and `monitor` has only the keys of zkd's `mntr` so far, each
//! as ZooKeeper names and types it). Errors answer as ZooKeeper's do, and
//! bad requests leave the server serving.

use serde_json::Value;
use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;
use zkd_client_tests::oracle::{require_tool, ZooKeeperProcess, SERVLET_API_JAR};
use zkd_client_tests::process::{free_port, ServerOptions, ZkdProcess};

/// Keys of ZooKeeper's answers that describe its JVM, which zkd has not.
fn jvm_only(key: &str) -> bool {
    key.starts_with("java.") || key.starts_with("os.memory.")
}

/// What a response was: its status line and its body.
fn get(port: u16, method: &str, path: &str) -> (String, String) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect to an AdminServer");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let request =
        format!("{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).expect("send");
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.lines().next().unwrap_or_default().to_owned();
    (status, body.to_owned())
}

fn json(port: u16, path: &str) -> Value {
    let (status, body) = get(port, "GET", path);
    assert!(status.contains("200"), "{path}: {status}");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path}: {e}: {body}"))
}

/// The command names a listing links to.
fn listed(port: u16) -> BTreeSet<String> {
    let (status, body) = get(port, "GET", "/commands");
    assert!(status.contains("200"), "{status}");
    body.split("href=\"/commands/")
        .skip(1)
        .filter_map(|s| s.split('"').next())
        .map(str::to_owned)
        .collect()
}

/// A JSON value's kind: ZooKeeper's and zkd's must agree key by key.
fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Every key of `zk` (JVM-only ones aside) is in `zkd` with the same kind,
/// nested objects compared alike. `at` names where, for the message.
fn same_keys_and_kinds(at: &str, zk: &Value, zkd: &Value, missing: &mut Vec<String>) {
    let (Value::Object(zk), Value::Object(zkd)) = (zk, zkd) else {
        return;
    };
    for (key, theirs) in zk.iter().filter(|(k, _)| !jvm_only(k)) {
        match zkd.get(key) {
            None => missing.push(format!("{at}.{key} missing")),
            Some(ours) if kind(ours) != kind(theirs) => missing.push(format!(
                "{at}.{key}: zkd gives a {}, ZooKeeper a {}",
                kind(ours),
                kind(theirs)
            )),
            Some(ours) => same_keys_and_kinds(&format!("{at}.{key}"), theirs, ours, missing),
        }
    }
}

fn servers() -> (ZooKeeperProcess, ZkdProcess, u16, u16) {
    require_tool(SERVLET_API_JAR);
    let (zk_admin, zkd_admin) = (free_port(), free_port());
    let zk = ZooKeeperProcess::start_configured(
        200,
        &[],
        &format!(
            "admin.enableServer=true\nadmin.serverAddress=127.0.0.1\nadmin.serverPort={zk_admin}\n"
        ),
    );
    let zkd = ZkdProcess::start_with(
        ServerOptions::default()
            .with("admin.serverAddress", "127.0.0.1")
            .with("admin.serverPort", &zkd_admin.to_string()),
    );
    (zk, zkd, zk_admin, zkd_admin)
}

#[test]
fn every_command_answers_with_zookeepers_keys_and_types() {
    let (_zk, _zkd, zk, zkd) = servers();
    let (theirs, ours) = (listed(zk), listed(zkd));
    assert!(ours.len() >= 10, "zkd lists {ours:?}");
    let foreign: Vec<_> = ours.difference(&theirs).collect();
    assert!(
        foreign.is_empty(),
        "commands ZooKeeper has not: {foreign:?}"
    );
    let mut wrong = Vec::new();
    for command in &ours {
        let path = format!("/commands/{command}");
        let (zk_json, zkd_json) = (json(zk, &path), json(zkd, &path));
        assert_eq!(
            zkd_json["command"],
            Value::from(command.as_str()),
            "{zkd_json}"
        );
        assert_eq!(zkd_json["error"], Value::Null, "{command}: {zkd_json}");
        if command == "monitor" {
            // zkd's keys so far are ZooKeeper's, with ZooKeeper's types.
            same_keys_and_kinds(command, &zkd_json, &zk_json, &mut wrong);
        } else {
            same_keys_and_kinds(command, &zk_json, &zkd_json, &mut wrong);
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[test]
fn aliases_name_the_same_commands_as_zookeepers() {
    let (_zk, _zkd, zk, zkd) = servers();
    let ours = listed(zkd);
    let aliases = [
        "conf", "config", "crst", "env", "envi", "isro", "mntr", "srvr", "srst", "wchs",
    ];
    let mut checked = 0;
    for alias in aliases {
        let path = format!("/commands/{alias}");
        let theirs = json(zk, &path)["command"].clone();
        if !ours.contains(theirs.as_str().unwrap_or_default()) {
            continue;
        }
        assert_eq!(json(zkd, &path)["command"], theirs, "{alias}");
        checked += 1;
    }
    assert_eq!(checked, aliases.len(), "aliases of commands zkd lists");
}

#[test]
fn errors_answer_as_zookeepers_and_the_server_keeps_serving() {
    let (_zk, zkd_process, zk, zkd) = servers();
    let (theirs, ours) = (json(zk, "/commands/nope"), json(zkd, "/commands/nope"));
    assert_eq!(ours, theirs, "an unknown command");
    for (method, path) in [("POST", "/commands/ruok"), ("GET", "/elsewhere")] {
        let status = |port| get(port, method, path).0;
        let code = |s: String| s.split(' ').nth(1).unwrap_or_default().to_owned();
        assert_eq!(code(status(zkd)), code(status(zk)), "{method} {path}");
    }
    // A head past any sane size, and one cut off: closed or refused, no more.
    let mut huge = TcpStream::connect(("127.0.0.1", zkd)).expect("connect");
    let _ = huge.write_all(format!("GET /{} HTTP/1.1\r\n", "a".repeat(64 << 10)).as_bytes());
    drop(huge);
    let mut cut = TcpStream::connect(("127.0.0.1", zkd)).expect("connect");
    let _ = cut.write_all(b"GET /comm");
    drop(cut);
    assert_eq!(json(zkd, "/commands/ruok")["error"], Value::Null);
    // Idle connections past the AdminServer's bound: clients are served
    // meanwhile, and so is the next request once they go.
    let idle: Vec<TcpStream> = (0..40)
        .map(|_| TcpStream::connect(("127.0.0.1", zkd)).expect("connect"))
        .collect();
    assert!(zkd_process.four_letter_word("ruok").contains("imok"));
    drop(idle);
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(json(zkd, "/commands/ruok")["error"], Value::Null);
}

#[test]
fn admin_enable_server_false_leaves_the_port_closed() {
    let port = free_port();
    let zkd = ZkdProcess::start_with(
        ServerOptions::default()
            .with("admin.enableServer", "false")
            .with("admin.serverPort", &port.to_string()),
    );
    assert!(zkd.four_letter_word("ruok").contains("imok"));
    assert!(TcpStream::connect(("127.0.0.1", port)).is_err());
}
