//! node-zookeeper-client, the npm package (pinned in `node/package.json`),
//! against Apache ZooKeeper 3.8 (the oracle) and zkd: `node/scenarios.js`
//! runs CRUD with versions, sequential and ephemeral nodes, transactions,
//! watches fired from a second client, digest ACLs, create with flags 4 (the
//! package sends mode 4 with opcode 1: a persistent node, never reaped) and
//! exists on missing nodes, and prints one JSON object of observations with
//! session ids and times masked. Both servers must give the same output,
//! zxids included.
//!
//! node and the package are installed by `client-tests/run-all.sh`; when they
//! are missing the test fails and says so (a test that could not run must not
//! pass).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use zkd_client_tests::oracle::ZooKeeperProcess;
use zkd_client_tests::{ServerOptions, ZkdProcess};

/// The container check interval given to both servers, in milliseconds.
const CHECK_INTERVAL_MS: &str = "100";
/// Bound for one run of the script (it bounds itself at 60 s).
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(90);

/// `client-tests/tests/node`, holding `package.json` and `scenarios.js`.
fn node_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/node")
}

/// Panics, naming run-all.sh, unless node and the npm package are installed.
fn require_node_client() {
    let node = Command::new("node")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        node,
        "node is missing: run `bash client-tests/run-all.sh`, which installs what the tests need (nodejs, npm)"
    );
    let package = node_dir().join("node_modules/node-zookeeper-client/package.json");
    assert!(
        package.exists(),
        "{} is missing: run `bash client-tests/run-all.sh`, which installs what the tests need (npm ci in client-tests/tests/node)",
        package.display()
    );
}

/// Runs `node scenarios.js addr` (killed if it outlives [`SCRIPT_TIMEOUT`])
/// and returns its JSON line.
fn run_scenarios(server: &str, addr: &str) -> String {
    let mut child = Command::new("node")
        .arg("scenarios.js")
        .arg(addr)
        .current_dir(node_dir())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn node");
    // Read both pipes on their own threads so a chatty child cannot block.
    let drain = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = pipe.read_to_string(&mut text);
            text
        })
    };
    let stdout = drain(Box::new(child.stdout.take().expect("stdout")));
    let stderr = drain(Box::new(child.stderr.take().expect("stderr")));
    let deadline = Instant::now() + SCRIPT_TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait node") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("node scenarios.js against {server} did not finish within {SCRIPT_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let out = stdout.join().expect("stdout reader");
    let err = stderr.join().expect("stderr reader");
    let line = out.lines().last().unwrap_or_default().to_owned();
    assert!(
        status.success() && line.starts_with('{'),
        "node scenarios.js against {server} failed ({status}):\n{out}\n{err}"
    );
    line
}

/// Splits a one-level JSON object into its `(key, raw value)` pairs, in order.
/// Keys are taken verbatim (the script's labels have no escapes).
fn entries(json: &str) -> Vec<(String, String)> {
    let body = json
        .trim()
        .strip_prefix('{')
        .and_then(|s| s.strip_suffix('}'))
        .expect("a JSON object");
    let mut parts = Vec::new();
    let (mut depth, mut in_string, mut escaped, mut start) = (0i32, false, false, 0);
    for (i, c) in body.char_indices() {
        if in_string {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_string = true,
            '{' | '[' => depth += 1,
            '}' | ']' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&body[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if !body.is_empty() {
        parts.push(&body[start..]);
    }
    parts
        .into_iter()
        .map(|part| {
            let (key, value) = part.split_once("\":").expect("\"key\":value");
            (key.trim_start_matches('"').to_owned(), value.to_owned())
        })
        .collect()
}

/// What both servers must show, whatever else they agree on: the flags-4
/// nodes are ordinary persistent nodes that outlive the reaper. Each pair is
/// a label and a fragment its value must contain.
const EXPECTED: &[(&str, &str)] = &[
    ("create /cont flags 4", r#""/cont""#),
    (
        "exists /cont after idle",
        r#""cversion":2,"aversion":0,"ephemeralOwner":"0","dataLength":1,"numChildren":0}"#,
    ),
    (
        "exists /never after idle",
        r#""cversion":0,"aversion":0,"ephemeralOwner":"0","dataLength":0,"numChildren":0}"#,
    ),
    ("create /cont/again after idle", r#""/cont/again""#),
    ("ephemeral deletion seen by B", "true"),
];

#[test]
fn node_zookeeper_client_matches_zookeeper() {
    require_node_client();
    let oracle = ZooKeeperProcess::start_with(
        2000,
        &[("znode.container.checkIntervalMs", CHECK_INTERVAL_MS)],
    );
    let zkd = ZkdProcess::start_with(
        ServerOptions::default().with("znode.container.checkIntervalMs", CHECK_INTERVAL_MS),
    );
    let on_oracle = run_scenarios("ZooKeeper", &oracle.addr());
    let on_zkd = run_scenarios("zkd", &zkd.addr());
    let (want, got) = (entries(&on_oracle), entries(&on_zkd));

    let mut failures = Vec::new();
    for (server, obs) in [("ZooKeeper", &want), ("zkd", &got)] {
        for (label, expected) in EXPECTED {
            let seen = obs
                .iter()
                .find(|(l, _)| l == label)
                .map(|(_, v)| v.as_str());
            if !seen.is_some_and(|v| v.contains(expected)) {
                failures.push(format!(
                    "{server}: {label}: expected ..{expected}.., got {seen:?}"
                ));
            }
        }
    }
    let labels = |o: &[(String, String)]| o.iter().map(|(l, _)| l.clone()).collect::<Vec<_>>();
    if labels(&want) != labels(&got) {
        failures.push(format!(
            "labels differ:\n  ZooKeeper {:?}\n  zkd       {:?}",
            labels(&want),
            labels(&got)
        ));
    }
    for ((label, w), (_, g)) in want.iter().zip(&got) {
        if w != g {
            failures.push(format!(
                "differs: {label}:\n  ZooKeeper {w}\n  zkd       {g}"
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} mismatch(es):\n{}\n\nZooKeeper: {on_oracle}\n\nzkd: {on_zkd}\n\nzkd log:\n{}",
        failures.len(),
        failures.join("\n"),
        zkd.log()
    );
}

#[test]
fn entries_split_only_at_top_level_commas() {
    let e = entries(r#"{"a":1,"b c":{"x":[1,2],"y":"p,\"q}"},"d":null}"#);
    assert_eq!(
        e,
        vec![
            ("a".to_owned(), "1".to_owned()),
            ("b c".to_owned(), r#"{"x":[1,2],"y":"p,\"q}"}"#.to_owned()),
            ("d".to_owned(), "null".to_owned()),
        ]
    );
}
