//! Issue 36, item 1: zkd's AdminServer beside Debian's ZooKeeper 3.8
//! AdminServer (Jetty), the same requests to both, standalone and as a
//! 3-member ensemble's leader, follower, and lone survivor. zkd lists every
//! command ZooKeeper lists, under the same names and aliases, and each
//! answers with ZooKeeper's keys and JSON types, nested objects and array
//! elements included (JVM-only keys aside, and `monitor` has only the keys
//! of zkd's `mntr` so far, each as ZooKeeper names and types it), and with
//! ZooKeeper's error where ZooKeeper gives one. Bad requests leave the
//! server serving.

use serde_json::Value;
use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;
use zkd_client_tests::ensemble::Ensemble;
use zkd_client_tests::oracle::{require_tool, ZooKeeperProcess, SERVLET_API_JAR};
use zkd_client_tests::oracle_ensemble::ZooKeeperEnsemble;
use zkd_client_tests::process::{four_letter_word, free_port, ServerOptions, ZkdProcess};
use zookeeper::{Acl, CreateMode, ZooKeeper};

/// Keys of ZooKeeper's answers that describe its JVM (its properties, heap
/// and locale, and the logger's `org.slf4j.*` flags), which zkd has not, and
/// the `zookeeper.*` system properties, which follow each server's zoo.cfg.
fn jvm_only(key: &str) -> bool {
    [
        "java.",
        "os.memory.",
        "sun.",
        "jdk.",
        "jetty.",
        "org.",
        "zookeeper.",
    ]
    .iter()
    .any(|p| key.starts_with(p) && key != "zookeeper.version")
        || [
            "file.encoding",
            "native.encoding",
            "user.language",
            "user.timezone",
        ]
        .contains(&key)
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
/// nested objects and the first elements of arrays compared alike. `at`
/// names where, for the message.
fn same_keys_and_kinds(at: &str, zk: &Value, zkd: &Value, missing: &mut Vec<String>) {
    if let (Value::Array(zk), Value::Array(zkd)) = (zk, zkd) {
        match (zk.first(), zkd.first()) {
            (Some(theirs), Some(ours)) => {
                same_kind(&format!("{at}[0]"), theirs, ours, missing);
            }
            (Some(_), None) => missing.push(format!("{at}: empty, ZooKeeper's is not")),
            _ => {}
        }
        return;
    }
    let (Value::Object(zk), Value::Object(zkd)) = (zk, zkd) else {
        return;
    };
    if DATA_MAPS.iter().any(|m| at.ends_with(m)) {
        // Keyed by session, path, time or member: each server's own keys,
        // so only the kinds of their values compare.
        match (zk.values().next(), zkd.values().next()) {
            (Some(theirs), Some(ours)) => same_kind(&format!("{at}.*"), theirs, ours, missing),
            (Some(_), None) => missing.push(format!("{at}: empty, ZooKeeper's is not")),
            _ => {}
        }
        return;
    }
    for (key, theirs) in zk.iter().filter(|(k, _)| !jvm_only(k)) {
        match zkd.get(key) {
            None => missing.push(format!("{at}.{key} missing")),
            Some(ours) => same_kind(&format!("{at}.{key}"), theirs, ours, missing),
        }
    }
}

/// Objects whose keys are data (session ids, paths, times, member ids).
const DATA_MAPS: [&str; 5] = [
    ".expiry_time_to_session_ids",
    ".session_id_to_ephemeral_paths",
    ".session_id_to_watched_paths",
    ".path_to_session_ids",
    ".current_config",
];

/// `ours` is of `theirs`' kind, and so is what it holds. ZooKeeper's null
/// (an `initial_configuration` it did not keep) takes any kind.
fn same_kind(at: &str, theirs: &Value, ours: &Value, missing: &mut Vec<String>) {
    if kind(ours) != kind(theirs) && !theirs.is_null() {
        missing.push(format!(
            "{at}: zkd gives a {}, ZooKeeper a {}",
            kind(ours),
            kind(theirs)
        ));
    } else {
        same_keys_and_kinds(at, theirs, ours, missing);
    }
}

/// The path a command is asked on: `set_trace_mask` with the mask it needs.
fn command_path(command: &str) -> String {
    match command {
        "set_trace_mask" => "/commands/set_trace_mask?traceMask=306".into(),
        _ => format!("/commands/{command}"),
    }
}

/// Compares every command zkd lists, on ZooKeeper's port `zk` and zkd's
/// `zkd`: the same error (or none) and the same keys and kinds. Returns
/// what differs, each named with `role`.
fn compare_commands(role: &str, zk: u16, zkd: u16) -> Vec<String> {
    let mut wrong = Vec::new();
    for command in &listed(zkd) {
        let path = command_path(command);
        let (zk_json, zkd_json) = (json(zk, &path), json(zkd, &path));
        let at = format!("{role} {command}");
        assert_eq!(
            zkd_json["command"],
            Value::from(command.as_str()),
            "{at}: {zkd_json}"
        );
        if zkd_json["error"] != zk_json["error"] {
            wrong.push(format!(
                "{at}: error {} where ZooKeeper's is {}",
                zkd_json["error"], zk_json["error"]
            ));
        } else if command == "monitor" {
            // zkd's keys so far are ZooKeeper's, with ZooKeeper's types.
            same_keys_and_kinds(&at, &zkd_json, &zk_json, &mut wrong);
        } else {
            same_keys_and_kinds(&at, &zk_json, &zkd_json, &mut wrong);
        }
    }
    wrong
}

/// A session on `addr` that holds an ephemeral node and a data watch, so
/// `connections`, `dump` and the watch commands have something to show.
fn busy_session(addr: &str) -> ZooKeeper {
    let client = ZooKeeper::connect(addr, Duration::from_secs(10), |_| {}).expect("connect");
    let open = Acl::open_unsafe().clone();
    client
        .create(
            "/admin",
            b"a".to_vec(),
            open.clone(),
            CreateMode::Persistent,
        )
        .expect("create");
    client
        .create("/admin-e", b"e".to_vec(), open, CreateMode::Ephemeral)
        .expect("create");
    client.get_data("/admin", true).expect("watch");
    client
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
    let (zk_process, zkd_process, zk, zkd) = servers();
    let (theirs, ours) = (listed(zk), listed(zkd));
    assert_eq!(ours, theirs, "the commands listed");
    let _sessions = (
        busy_session(&zk_process.addr()),
        busy_session(&zkd_process.addr()),
    );
    let wrong = compare_commands("standalone", zk, zkd);
    assert!(wrong.is_empty(), "{wrong:#?}");
    // mntr, the four-letter word, shows monitor's keys: ZooKeeper's too.
    let keys = |text: String| -> BTreeSet<String> {
        text.lines()
            .filter_map(|l| l.split('\t').next())
            .map(str::to_owned)
            .collect()
    };
    let zk_port: u16 = zk_process
        .addr()
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("port");
    let theirs = keys(four_letter_word(zk_port, "mntr").expect("ZooKeeper's mntr"));
    let ours = keys(zkd_process.four_letter_word("mntr"));
    let foreign: Vec<_> = ours.difference(&theirs).collect();
    assert!(
        foreign.is_empty() && ours.len() > 60,
        "mntr keys ZooKeeper has not: {foreign:?}"
    );
    // Values a tool reads, beyond their kinds.
    let conns = json(zkd, "/commands/connections");
    assert_eq!(
        conns["connections"].as_array().map(Vec::len),
        Some(1),
        "{conns}"
    );
    let watches = json(zkd, "/commands/watches_by_path");
    assert!(
        watches["path_to_session_ids"]["/admin"].is_array(),
        "{watches}"
    );
    let dump = json(zkd, "/commands/dump");
    let ephemerals = dump["session_id_to_ephemeral_paths"].as_object().cloned();
    let paths: Vec<_> = ephemerals.into_iter().flatten().map(|(_, p)| p).collect();
    assert_eq!(paths, [Value::from(vec!["/admin-e"])], "{dump}");
    let port = zkd_process.config_path().to_owned();
    let config = std::fs::read_to_string(port).expect("zoo.cfg");
    let initial = json(zkd, "/commands/initial_configuration");
    assert_eq!(
        initial["initial_configuration"],
        Value::from(config),
        "{initial}"
    );
}

/// Member `i`'s AdminServer port on zkd and on ZooKeeper, after each
/// ensemble has elected its leader.
struct Ensembles {
    zk: ZooKeeperEnsemble,
    zkd: Ensemble,
    zk_admin: Vec<u16>,
    zkd_admin: Vec<u16>,
}

fn ensembles() -> Ensembles {
    require_tool(SERVLET_API_JAR);
    let zk_admin: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let zkd_admin: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let zk = ZooKeeperEnsemble::start_with_admin(&zk_admin);
    let options = zkd_admin
        .iter()
        .map(|port| {
            ServerOptions {
                tick_time_ms: 500,
                ..ServerOptions::default()
            }
            .with("admin.serverAddress", "127.0.0.1")
            .with("admin.serverPort", &port.to_string())
        })
        .collect();
    let zkd = Ensemble::start_each(options);
    Ensembles {
        zk,
        zkd,
        zk_admin,
        zkd_admin,
    }
}

#[test]
fn an_ensembles_leader_follower_and_lone_survivor_answer_as_zookeepers() {
    let Ensembles {
        mut zk,
        mut zkd,
        zk_admin,
        zkd_admin,
    } = ensembles();
    let (zk_leader, zkd_leader) = (
        zk.leader().expect("a leader"),
        zkd.leader().expect("a leader"),
    );
    let (zk_follower, zkd_follower) = ((zk_leader + 1) % 3, (zkd_leader + 1) % 3);
    let _sessions = (
        busy_session(&zk.members[zk_follower].addr()),
        busy_session(&zkd.members[zkd_follower].addr()),
    );
    let mut wrong = compare_commands("leader", zk_admin[zk_leader], zkd_admin[zkd_leader]);
    wrong.extend(compare_commands(
        "follower",
        zk_admin[zk_follower],
        zkd_admin[zkd_follower],
    ));
    assert!(wrong.is_empty(), "{wrong:#?}");
    // Who leads, and the membership, as every member tells them.
    for (i, port) in zkd_admin.iter().enumerate() {
        let leader = json(*port, "/commands/leader");
        assert_eq!(
            leader["is_leader"],
            Value::from(i == zkd_leader),
            "{leader}"
        );
        assert_eq!(leader["leader_id"], Value::from(zkd_leader + 1), "{leader}");
        let zab = json(*port, "/commands/zabstate");
        assert_eq!(zab["zabstate"], Value::from("broadcast"), "{zab}");
        assert_eq!(zab["myid"], Value::from(i + 1), "{zab}");
        let quorum = format!("127.0.0.1:{}", zkd.peers[i].quorum_port);
        assert_eq!(
            zab["quorum_address"]["one"],
            Value::from(quorum.as_str()),
            "{zab}"
        );
        let view = json(*port, "/commands/voting_view");
        let members = view["current_config"].as_object().map(|m| m.len());
        assert_eq!(members, Some(3), "{view}");
        assert_eq!(
            view["current_config"][(i + 1).to_string()]["server_addresses"][0],
            Value::from(quorum),
            "{view}"
        );
    }
    // Two members gone: the survivor answers as ZooKeeper's does while it
    // elects (zabstate says where it is: "election" where ZooKeeper's is "").
    let (zk_left, zkd_left) = (zk_follower, zkd_follower);
    for i in (0..3).filter(|i| *i != zk_left) {
        zk.kill9(i);
    }
    for i in (0..3).filter(|i| *i != zkd_left) {
        zkd.members[i].kill9();
    }
    wait_until_not_serving(zkd_admin[zkd_left]);
    wait_until_not_serving(zk_admin[zk_left]);
    let mut wrong = Vec::new();
    for command in listed(zkd_admin[zkd_left])
        .iter()
        .filter(|c| *c != "monitor")
    {
        // ZooKeeper's monitor fails with a NullPointerException (HTTP 500)
        // here; zkd's answers, with server_state "looking".
        let path = command_path(command);
        let (theirs, ours) = (
            json(zk_admin[zk_left], &path),
            json(zkd_admin[zkd_left], &path),
        );
        if ours["error"] != theirs["error"] {
            wrong.push(format!(
                "{command}: {} where ZooKeeper's is {}",
                ours["error"], theirs["error"]
            ));
        }
        same_keys_and_kinds(command, &theirs, &ours, &mut wrong);
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
    let zab = json(zkd_admin[zkd_left], "/commands/zabstate");
    assert_eq!(zab["zabstate"], Value::from("election"), "{zab}");
    let monitor = json(zkd_admin[zkd_left], "/commands/monitor");
    assert_eq!(monitor["server_state"], Value::from("looking"), "{monitor}");
}

/// Waits (at most 30 s) until the AdminServer on `port` says its server
/// does not serve.
fn wait_until_not_serving(port: u16) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while json(port, "/commands/ruok")["error"].is_null() {
        assert!(
            std::time::Instant::now() < deadline,
            "port {port} still serves"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn aliases_name_the_same_commands_as_zookeepers() {
    let (_zk, _zkd, zk, zkd) = servers();
    let ours = listed(zkd);
    let aliases = [
        "conf", "config", "crst", "cons", "env", "envi", "gtmk", "icfg", "isro", "lsnp", "lead",
        "mntr", "orst", "obsr", "srvr", "stmk", "srst", "stat", "sysp", "wchs", "wchc", "wchp",
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
    for path in [
        "/commands/set_trace_mask",
        "/commands/set_trace_mask?traceMask=lots",
        "/commands/set_trace_mask?traceMask=1&traceMask=2",
        "/commands/get_trace_mask",
    ] {
        assert_eq!(json(zkd, path), json(zk, path), "{path}");
    }
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

#[test]
fn last_snapshot_names_the_newest_snapshot_on_disk() {
    let data = tempfile::tempdir().expect("tempdir");
    let port = free_port();
    let options = ServerOptions {
        data_dir: Some(data.path().to_owned()),
        ..ServerOptions::default()
    };
    let zkd = ZkdProcess::start_with(
        options
            .with("snapCount", "2")
            .with("admin.serverAddress", "127.0.0.1")
            .with("admin.serverPort", &port.to_string()),
    );
    let none = json(port, "/commands/last_snapshot");
    assert_eq!(none["zxid"], Value::from("ffffffffffffffff"), "{none}");
    assert_eq!(none["timestamp"], Value::from(-1), "{none}");
    let client = ZooKeeper::connect(&zkd.addr(), Duration::from_secs(10), |_| {}).expect("connect");
    for i in 0..10 {
        let open = Acl::open_unsafe().clone();
        let path = format!("/n{i}");
        client
            .create(&path, vec![], open, CreateMode::Persistent)
            .expect("create");
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let last = loop {
        let last = json(port, "/commands/last_snapshot");
        if last["zxid"] != none["zxid"] {
            break last;
        }
        assert!(std::time::Instant::now() < deadline, "no snapshot: {last}");
        std::thread::sleep(Duration::from_millis(50));
    };
    let zxid = last["zxid"].as_str().expect("a hex zxid");
    let file = data.path().join(format!("zkd/snapshots/snapshot.{zxid}"));
    assert!(file.exists(), "{last}: no {}", file.display());
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    let now = now.expect("a clock past 1970").as_secs() as i64;
    let at = last["timestamp"].as_i64().expect("seconds");
    assert!((now - 60..=now + 1).contains(&at), "{last} at {now}");
}

/// Issue 50, item 4: no password or digest is served, by the AdminServer
/// or by a four-letter word (ZooKeeper serves them word for word).
#[test]
fn passwords_and_digests_are_never_served() {
    let port = free_port();
    let digest = "super:D/InIHSb7yEEbrWz8b9l71RjZJU=";
    let zkd = ZkdProcess::start_with(
        ServerOptions::default()
            .with("admin.serverAddress", "127.0.0.1")
            .with("admin.serverPort", &port.to_string())
            .with("DigestAuthenticationProvider.superDigest", digest)
            .with("ssl.keyStore.password", "hunter2")
            .with("zookeeper.ssl.quorum.trustStore.password", "hunter3"),
    );
    let mut shown = String::new();
    for command in [
        "configuration",
        "initial_configuration",
        "system_properties",
        "environment",
    ] {
        let (status, body) = get(port, "GET", &format!("/commands/{command}"));
        assert!(status.contains("200"), "{command}: {status}");
        shown.push_str(&body);
    }
    for word in ["conf", "envi"] {
        shown.push_str(&zkd.four_letter_word(word));
    }
    for secret in ["hunter2", "hunter3", "D/InIHSb7yEEbrWz8b9l71RjZJU="] {
        assert!(!shown.contains(secret), "{secret} served: {shown}");
    }
    let initial = json(port, "/commands/initial_configuration");
    let text = initial["initial_configuration"]
        .as_str()
        .unwrap_or_default();
    assert!(text.contains("ssl.keyStore.password=********"), "{text}");
    assert!(text.contains("clientPort="), "the rest is shown: {text}");
    let properties = json(port, "/commands/system_properties");
    assert_eq!(
        properties["zookeeper.DigestAuthenticationProvider.superDigest"],
        Value::from("********"),
        "{properties}"
    );
}

/// The metrics `server/README.md` lists as left out, each with its reason.
fn listed_as_left_out() -> BTreeSet<String> {
    let readme = concat!(env!("CARGO_MANIFEST_DIR"), "/../server/README.md");
    let text = std::fs::read_to_string(readme).expect("server/README.md");
    let section = text
        .split("## Metrics zkd leaves out")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("the section listing left-out metrics");
    section
        .lines()
        .filter(|l| l.starts_with("| `"))
        .filter_map(|l| l.split('|').nth(1))
        .flat_map(|cell| cell.split('`').skip(1).step_by(2).map(str::to_owned))
        .collect()
}

/// A summary's key without its statistic's prefix (and a summary set's
/// without its namespace: `avg_NS_read_per_namespace`).
fn metric_of(key: &str) -> &str {
    let prefixes = [
        "avg_", "min_", "max_", "cnt_", "sum_", "p50_", "p95_", "p99_", "p999_",
    ];
    let metric = prefixes
        .iter()
        .find_map(|p| key.strip_prefix(p))
        .unwrap_or(key);
    let sets = ["read_per_namespace", "write_per_namespace"];
    sets.into_iter()
        .find(|set| metric.ends_with(&format!("_{set}")))
        .unwrap_or(metric)
}

/// Issue 50, item 3: every key of ZooKeeper's `monitor` is in zkd's, or
/// its metric is listed as left out, with why; and the client response
/// sizes agree with ZooKeeper's after the same requests.
#[test]
fn monitor_keys_left_out_are_listed_and_response_sizes_agree() {
    let (zk_process, zkd_process, zk, zkd) = servers();
    for addr in [zk_process.addr(), zkd_process.addr()] {
        let client = ZooKeeper::connect(&addr, Duration::from_secs(10), |_| {}).expect("connect");
        let open = Acl::open_unsafe().clone();
        client
            .create("/sized", vec![7; 10], open, CreateMode::Persistent)
            .expect("create");
        client.get_children("/", false).expect("children");
        client.get_data("/sized", false).expect("read");
    }
    let (theirs, ours) = (
        json(zk, "/commands/monitor"),
        json(zkd, "/commands/monitor"),
    );
    let keys = |v: &Value| -> BTreeSet<String> {
        v.as_object()
            .map(|o| o.keys().cloned().collect())
            .unwrap_or_default()
    };
    let listed = listed_as_left_out();
    let unexplained: Vec<String> = keys(&theirs)
        .difference(&keys(&ours))
        .filter(|key| !listed.contains(metric_of(key)) && !listed.contains(key.as_str()))
        .cloned()
        .collect();
    assert!(
        unexplained.is_empty(),
        "keys ZooKeeper shows that zkd neither has nor lists in server/README.md: {unexplained:?}"
    );
    // A listed metric zkd has after all would be a stale line.
    let stale: Vec<&String> = listed
        .iter()
        .filter(|m| keys(&ours).iter().any(|k| metric_of(k) == m.as_str()))
        .collect();
    assert!(
        stale.is_empty(),
        "listed as left out, but zkd has: {stale:?}"
    );
    for key in [
        "last_client_response_size",
        "min_client_response_size",
        "max_client_response_size",
        // The create (path and data), and the read (path, data and a stat).
        "cnt_sized_write_per_namespace",
        "sum_sized_write_per_namespace",
        "cnt_sized_read_per_namespace",
        "sum_sized_read_per_namespace",
    ] {
        assert_eq!(ours[key], theirs[key], "{key}");
    }
    // The read of 10 bytes: header, data and stat (the last is the close).
    assert_eq!(ours["max_client_response_size"], Value::from(98), "{ours}");
    assert!(
        ours["non_mtls_local_conn_count"].as_i64() >= Some(1),
        "{ours}"
    );
    assert_eq!(ours["non_mtls_remote_conn_count"], Value::from(0));
    assert_eq!(ours["outstanding_tls_handshake"], Value::from(0));
}
