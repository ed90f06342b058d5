//! The stock Java client (Debian's ZooKeeper 3.8 jar) replays the golden
//! traffic script against zkd through the capture proxy, and every frame must
//! match what Apache ZooKeeper 3.8 sent (`protocol/tests/golden/frames.tsv`),
//! after masking what differs from run to run (session ids, passwords, times,
//! hash order of children) and the documented 3.9 behaviours zkd follows:
//! notifications carry the txn zxid (ZOOKEEPER-4655), and a create2 inside a
//! multi answers type 15 with a Stat (ZOOKEEPER-4026).

use bytes::Bytes;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use zkd_client_tests::oracle::{require_tool, ZOOKEEPER_JAR};
use zkd_client_tests::process::free_port;
use zkd_client_tests::{ServerOptions, ZkdProcess};
use zkd_protocol::records::*;
use zkd_protocol::request::ClientRequest;
use zkd_protocol::response::ClientResponse;
use zkd_protocol::Record;

/// Frames whose 3.9 form differs from the 3.8 capture on purpose.
const KNOWN_3_9_DIFFERENCES: [&str; 1] = ["raw_multi_create2_reply"];

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../protocol/tests/golden")
}

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn load(path: &Path) -> BTreeMap<String, (String, Bytes)> {
    let text = std::fs::read_to_string(path).expect("frames file");
    text.lines()
        .skip(1)
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let cols: Vec<&str> = l.split('\t').collect();
            let hex = cols[3];
            let bytes: Vec<u8> = (0..hex.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
                .collect();
            (cols[0].to_owned(), (cols[2].to_owned(), Bytes::from(bytes)))
        })
        .collect()
}

/// Replaces the number after each `key: ` in a Debug rendering with `_`.
fn mask(text: &str, keys: &[&str]) -> String {
    let mut out = text.to_owned();
    for key in keys {
        let pat = format!("{key}: ");
        let mut from = 0;
        while let Some(i) = out[from..].find(&pat) {
            let start = from + i + pat.len();
            let end = out[start..]
                .find([',', ' ', ')', '}'])
                .map_or(out.len(), |e| start + e);
            out.replace_range(start..end, "_");
            from = start + 1;
        }
    }
    out
}

fn sorted_multi(mut r: MultiResponse) -> MultiResponse {
    for result in &mut r.results {
        if let MultiResult::GetChildren { children } = result {
            children.sort();
        }
    }
    r
}

/// A comparable rendering of one frame.
fn normalize(kind: &str, frame: &Bytes) -> String {
    let mut buf = frame.clone();
    let text = match kind {
        // Session ids and passwords differ from run to run.
        "connect_request" => {
            let r = ConnectRequest::decode(&mut buf).unwrap();
            format!(
                "{:?}",
                ConnectRequest {
                    session_id: 0,
                    passwd: Bytes::new(),
                    ..r
                }
            )
        }
        "connect_response" => {
            let r = ConnectResponse::decode(&mut buf).unwrap();
            format!(
                "{:?}",
                ConnectResponse {
                    session_id: 0,
                    passwd: Bytes::new(),
                    ..r
                }
            )
        }
        "request" => format!("{:?}", ClientRequest::decode_frame(buf).unwrap()),
        "notification" => {
            let mut header = ReplyHeader::decode(&mut buf).unwrap();
            header.zxid = 0; // 3.8 sends -1, 3.9 the txn zxid.
            format!("{header:?} {:?}", WatcherEvent::decode(&mut buf).unwrap())
        }
        _ => {
            let op: i32 = kind.trim_start_matches("reply:").parse().unwrap();
            let header = ReplyHeader::decode(&mut buf).unwrap();
            let body = if header.err == 0 {
                Some(ClientResponse::decode(op, &mut buf).unwrap())
            } else {
                None
            };
            let body = body.map(|b| match b {
                ClientResponse::GetChildren(mut r) => {
                    r.children.sort();
                    ClientResponse::GetChildren(r)
                }
                ClientResponse::GetChildren2(mut r) => {
                    r.children.sort();
                    ClientResponse::GetChildren2(r)
                }
                ClientResponse::WhoAmI(mut r) => {
                    r.client_info
                        .sort_by(|a, b| a.auth_scheme.cmp(&b.auth_scheme));
                    ClientResponse::WhoAmI(r)
                }
                ClientResponse::Multi(r) => ClientResponse::Multi(sorted_multi(r)),
                other => other,
            });
            format!("{header:?} {body:?}")
        }
    };
    let text = mask(&text, &["ctime", "mtime"]);
    // Owners are session ids: only whether a node is ephemeral is comparable.
    let mut out = String::new();
    for (i, part) in text.split("ephemeral_owner: ").enumerate() {
        if i == 0 {
            out.push_str(part);
        } else {
            let owned = !part.starts_with("0,") && !part.starts_with("0 ");
            out.push_str(if owned {
                "ephemeral_owner: session"
            } else {
                "ephemeral_owner: 0"
            });
            out.push_str(&part[part.find([',', ' ']).unwrap_or(part.len())..]);
        }
    }
    out
}

fn wait_for_port(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "capture proxy did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn run(cmd: &mut Command, what: &str) {
    let mut child = Killed(
        cmd.stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{what}: {e}")),
    );
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Some(status) = child.0.try_wait().unwrap() {
            assert!(status.success(), "{what} failed");
            return;
        }
        assert!(Instant::now() < deadline, "{what} timed out");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn java_client_traffic_matches_apache_zookeeper_frame_for_frame() {
    require_tool(ZOOKEEPER_JAR);
    require_tool("/usr/bin/javac");
    let server =
        ZkdProcess::start_with(ServerOptions::default().with("extendedTypesEnabled", "true"));
    let work = tempfile::tempdir().unwrap();
    let frames = work.path().join("frames.tsv");
    let (listen, control) = (free_port(), free_port());
    let dir = golden_dir();
    let _proxy = Killed(
        Command::new("python3")
            .current_dir(&dir)
            .args([
                "capture.py",
                "proxy",
                "--listen",
                &listen.to_string(),
                "--upstream",
                &server.port.to_string(),
            ])
            .args(["--control", &control.to_string(), "--out"])
            .arg(&frames)
            .stdout(Stdio::null())
            .spawn()
            .expect("python3"),
    );
    wait_for_port(control);
    run(
        Command::new("javac")
            .args(["-implicit:none", "-cp", ZOOKEEPER_JAR, "-d"])
            .arg(work.path())
            .arg(dir.join("GoldenTraffic.java")),
        "javac",
    );
    let classpath = format!("{}:{ZOOKEEPER_JAR}", work.path().display());
    run(
        Command::new("java").args([
            "-cp",
            &classpath,
            "GoldenTraffic",
            &format!("127.0.0.1:{listen}"),
            &control.to_string(),
        ]),
        "GoldenTraffic (stock Java client)",
    );
    run(
        Command::new("python3").current_dir(&dir).args([
            "capture.py",
            "raw",
            "--port",
            &listen.to_string(),
            "--control",
            &control.to_string(),
        ]),
        "capture.py raw",
    );

    let theirs = load(&dir.join("frames.tsv"));
    let ours = load(&frames);
    let mut compared = 0;
    let mut mismatches = Vec::new();
    for (name, (kind, bytes)) in &theirs {
        if name.starts_with("kazoo_") || name.starts_with("ping_") {
            continue; // kazoo is not run here; ping counts depend on timing.
        }
        let Some((our_kind, our_bytes)) = ours.get(name) else {
            mismatches.push(format!("{name}: missing from zkd's run"));
            continue;
        };
        assert_eq!(kind, our_kind, "{name}");
        if KNOWN_3_9_DIFFERENCES.contains(&name.as_str()) {
            continue;
        }
        let (expected, actual) = (normalize(kind, bytes), normalize(kind, our_bytes));
        if expected != actual {
            mismatches.push(format!(
                "{name}:\n  zookeeper: {expected}\n  zkd:       {actual}"
            ));
        }
        compared += 1;
    }
    assert!(
        mismatches.is_empty(),
        "{} frames differ:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
    assert!(compared > 120, "only {compared} frames compared");
}
