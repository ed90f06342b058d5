//! Issue 36, item 2: ZooKeeper's Prometheus provider on zkd. `/metrics` is
//! read with the Prometheus Python client's text parser (not a regex); each
//! family zkd exports is one ZooKeeper 3.8 exports, of the same type, a
//! summary with the same quantiles (`prometheus/zookeeper_metrics.txt`,
//! read from ZooKeeper's source), and the values follow what clients did,
//! standalone and on a 3-member ensemble's leader and followers. A
//! provider zkd has not, or a port it cannot bind, stops it at start.

use serde_json::Value;
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Duration;
use zkd_client_tests::ensemble::Ensemble;
use zkd_client_tests::process::{free_port, zkd_binary, ServerOptions, ZkdProcess};
use zkd_client_tests::raw::RawClient;
use zkd_protocol::records::ConnectRequest;
use zookeeper::{Acl, CreateMode, ZooKeeper};

const PROVIDER: &str = "org.apache.zookeeper.metrics.prometheus.PrometheusMetricsProvider";

/// ZooKeeper's metrics: name to (type, a summary's quantiles).
fn zookeepers() -> BTreeMap<String, (String, String)> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/prometheus/zookeeper_metrics.txt"
    );
    let text = std::fs::read_to_string(path).expect("the list of ZooKeeper's metrics");
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let mut words = l.split(' ');
            let name = words.next().unwrap_or_default().to_owned();
            let kind = words.next().unwrap_or_default().to_owned();
            (name, (kind, words.next().unwrap_or_default().to_owned()))
        })
        .collect()
}

/// One metric family as the parser read it.
struct Family {
    kind: String,
    samples: Vec<(String, BTreeMap<String, String>, Value)>,
}

/// `GET /metrics` on `port`: its status line, content type and body.
fn scrape(port: u16) -> (String, String, String) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect to /metrics");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let request = "GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
    stream.write_all(request.as_bytes()).expect("send");
    let mut raw = String::new();
    let _ = stream.read_to_string(&mut raw);
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let status = head.lines().next().unwrap_or_default().to_owned();
    let content_type = head
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("content-type")
                .then_some(value.trim())
        })
        .unwrap_or_default()
        .to_owned();
    (status, content_type, body.to_owned())
}

/// `/metrics` on `port`, parsed by the Prometheus client's parser.
fn families(port: u16) -> BTreeMap<String, Family> {
    let (status, content_type, body) = scrape(port);
    assert!(status.contains("200"), "{status}");
    assert!(
        content_type.starts_with("text/plain; version=0.0.4"),
        "{content_type}"
    );
    let mut parser = Command::new("python3")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/prometheus/parse.py"
        ))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3");
    parser
        .stdin
        .take()
        .expect("stdin")
        .write_all(body.as_bytes())
        .expect("write");
    let out = parser.wait_with_output().expect("the parser");
    assert!(
        out.status.success(),
        "the Prometheus parser refused /metrics (is prometheus_client installed? run-all.sh installs it):\n{body}"
    );
    let parsed: Vec<Value> = serde_json::from_slice(&out.stdout).expect("the parser's JSON");
    parsed
        .into_iter()
        .map(|f| {
            let samples = f["samples"].as_array().cloned().unwrap_or_default();
            let samples = samples
                .into_iter()
                .map(|s| {
                    let labels = s[1].as_object().cloned().unwrap_or_default();
                    let labels = labels
                        .into_iter()
                        .map(|(k, v)| (k, v.as_str().unwrap_or_default().to_owned()))
                        .collect();
                    (
                        s[0].as_str().unwrap_or_default().to_owned(),
                        labels,
                        s[2].clone(),
                    )
                })
                .collect();
            let kind = f["type"].as_str().unwrap_or_default().to_owned();
            (
                f["name"].as_str().unwrap_or_default().to_owned(),
                Family { kind, samples },
            )
        })
        .collect()
}

/// The value of the sample named `sample` (without labels) of `family`.
/// The parser names a counter's sample with a `_total` (ZooKeeper's text
/// has none), as OpenMetrics does.
fn value(families: &BTreeMap<String, Family>, family: &str, sample: &str) -> f64 {
    let f = families
        .get(family)
        .unwrap_or_else(|| panic!("no {family}"));
    let total = format!("{sample}_total");
    let found = f
        .samples
        .iter()
        .find(|(name, labels, _)| (name == sample || *name == total) && labels.is_empty());
    found
        .and_then(|(_, _, v)| v.as_f64())
        .unwrap_or_else(|| panic!("no {sample} in {family}"))
}

/// Every family is ZooKeeper's, of its type, with its quantiles.
fn all_zookeepers(families: &BTreeMap<String, Family>) {
    let theirs = zookeepers();
    let mut wrong = Vec::new();
    for (name, family) in families {
        // The parser names a counter's family without its `_total`.
        let total = format!("{name}_total");
        let known = theirs
            .get(name)
            .or(theirs.get(&total).filter(|_| family.kind == "counter"));
        let Some((kind, quantiles)) = known else {
            wrong.push(format!("{name}: ZooKeeper has no such metric"));
            continue;
        };
        if &family.kind != kind {
            wrong.push(format!(
                "{name}: a {}, ZooKeeper's is a {kind}",
                family.kind
            ));
        }
        // A summary set repeats its quantiles for each key, and shows none
        // before its first key.
        let mut ours: Vec<&str> = Vec::new();
        for (_, labels, _) in &family.samples {
            let q = labels.get("quantile").map(String::as_str);
            if let Some(q) = q.filter(|q| !ours.contains(q)) {
                ours.push(q);
            }
        }
        if kind == "summary" && !family.samples.is_empty() && ours.join(",") != *quantiles {
            wrong.push(format!(
                "{name}: quantiles {ours:?}, ZooKeeper's {quantiles}"
            ));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

fn with_metrics(options: ServerOptions, port: u16) -> ServerOptions {
    options
        .with("metricsProvider.className", PROVIDER)
        .with("metricsProvider.httpHost", "127.0.0.1")
        .with("metricsProvider.httpPort", &port.to_string())
}

fn write_and_read(addr: &str, nodes: usize) {
    let client = ZooKeeper::connect(addr, Duration::from_secs(10), |_| {}).expect("connect");
    for i in 0..nodes {
        let open = Acl::open_unsafe().clone();
        client
            .create(&format!("/m{i}"), vec![7; 10], open, CreateMode::Persistent)
            .expect("create");
    }
    for i in 0..nodes {
        client.get_data(&format!("/m{i}"), false).expect("read");
    }
}

#[test]
fn a_standalone_servers_metrics_are_zookeepers_and_follow_its_clients() {
    let port = free_port();
    let zkd = ZkdProcess::start_with(with_metrics(ServerOptions::default(), port));
    let before = families(port);
    all_zookeepers(&before);
    write_and_read(&zkd.addr(), 30);
    let after = families(port);
    all_zookeepers(&after);
    let grew =
        |family: &str, sample: &str| value(&after, family, sample) - value(&before, family, sample);
    assert_eq!(grew("znode_count", "znode_count"), 30.0);
    assert!(grew("updatelatency", "updatelatency_count") >= 30.0);
    assert!(grew("readlatency", "readlatency_count") >= 30.0);
    // Standalone, every write is one fsync at least, and the sizes add up.
    assert!(grew("fsynctime", "fsynctime_count") >= 1.0);
    assert!(grew("sync_processor_batch_size", "sync_processor_batch_size_sum") >= 30.0);
    assert!(grew("bytes_received_count", "bytes_received_count") > 30.0 * 10.0);
    assert!(grew("response_bytes", "response_bytes") > 30.0 * 10.0);
    assert_eq!(value(&after, "dbinittime", "dbinittime_count"), 1.0);
    assert!(
        value(
            &after,
            "process_resident_memory_bytes",
            "process_resident_memory_bytes"
        ) > 1e6
    );
    // One watcher hears one change: the summary and the bytes follow.
    let watcher =
        ZooKeeper::connect(&zkd.addr(), Duration::from_secs(10), |_| {}).expect("connect");
    watcher.get_data("/m0", true).expect("watch");
    watcher.set_data("/m0", vec![8], None).expect("change");
    std::thread::sleep(Duration::from_millis(200));
    let watched = families(port);
    let summary = "node_changed_watch_count";
    assert_eq!(value(&watched, summary, &format!("{summary}_count")), 1.0);
    assert_eq!(value(&watched, summary, &format!("{summary}_sum")), 1.0);
    assert!(value(&watched, "watch_bytes", "watch_bytes") > 16.0);
    // A JVM's metrics are not made up.
    assert!(!after.keys().any(|k| k.starts_with("jvm_")));
    // A quota as zkCli sets it: ZooKeeper 3.9's gauge sets, keyed by `q`.
    let client = ZooKeeper::connect(&zkd.addr(), Duration::from_secs(10), |_| {}).expect("connect");
    let limits = "count=-1,bytes=-1=;byteHardLimit=-1;countHardLimit=5";
    for (path, data) in [
        ("/q", "four"),
        ("/zookeeper/quota/q", ""),
        ("/zookeeper/quota/q/zookeeper_limits", limits),
        ("/zookeeper/quota/q/zookeeper_stats", "count=0,bytes=0"),
    ] {
        let open = Acl::open_unsafe().clone();
        let data = data.as_bytes().to_vec();
        client
            .create(path, data, open, CreateMode::Persistent)
            .expect("create");
    }
    let quotas = families(port);
    all_zookeepers(&quotas);
    for (family, expected) in [
        ("quota_count_limit_per_namespace", 5.0),
        ("quota_bytes_limit_per_namespace", -1.0),
        ("quota_count_usage_per_namespace", 1.0),
        ("quota_bytes_usage_per_namespace", 4.0),
    ] {
        let samples = &quotas[family].samples;
        let keyed = samples
            .iter()
            .find(|(_, labels, _)| labels.get("key").map(String::as_str) == Some("q"));
        let value = keyed.and_then(|(_, _, v)| v.as_f64());
        assert_eq!(value, Some(expected), "{family}: {:?}", samples);
    }
    // Issue 50, item 2: any client may write under /zookeeper/quota, and a
    // key holding `"` and `\` must not break the scrape. Paths with line
    // breaks are refused, as ZooKeeper refuses them.
    let hostile = "a\"b\\c}";
    for path in [
        format!("/zookeeper/quota/{hostile}"),
        format!("/zookeeper/quota/{hostile}/zookeeper_limits"),
    ] {
        let open = Acl::open_unsafe().clone();
        let data = limits.as_bytes().to_vec();
        client
            .create(&path, data, open, CreateMode::Persistent)
            .expect("create");
    }
    let open = Acl::open_unsafe().clone();
    let refused = client.create(
        "/zookeeper/quota/x\ny",
        vec![],
        open,
        CreateMode::Persistent,
    );
    assert!(refused.is_err(), "{refused:?}");
    let hostile_scrape = families(port);
    all_zookeepers(&hostile_scrape);
    let keys: Vec<&str> = hostile_scrape["quota_count_limit_per_namespace"]
        .samples
        .iter()
        .filter_map(|(_, labels, _)| labels.get("key").map(String::as_str))
        .collect();
    assert_eq!(keys, [hostile, "q"]);
}

#[test]
fn an_ensembles_leader_and_followers_count_their_parts() {
    let ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let options = ports
        .iter()
        .map(|port| {
            let tick = ServerOptions {
                tick_time_ms: 500,
                ..ServerOptions::default()
            };
            with_metrics(tick, *port)
        })
        .collect();
    let ensemble = Ensemble::start_each(options);
    let leader = ensemble.leader().expect("a leader");
    write_and_read(&ensemble.all(), 25);
    let followers: Vec<usize> = (0..3).filter(|i| *i != leader).collect();
    move_a_session(&ensemble, followers[0], followers[1]);
    for (i, port) in ports.iter().enumerate() {
        let f = families(*port);
        all_zookeepers(&f);
        zab_stages_and_the_log_queue(&f, i, i == leader);
        if i == followers[1] {
            let moved = value(
                &f,
                "connection_revalidate_count",
                "connection_revalidate_count",
            );
            assert_eq!(moved, 1.0, "the session moved here once");
        }
        assert!(
            value(&f, "looking_count", "looking_count") >= 1.0,
            "member {i}"
        );
        assert!(
            value(&f, "election_time", "election_time_count") >= 1.0,
            "member {i}"
        );
        assert!(
            value(&f, "unavailable_time", "unavailable_time_count") >= 1.0,
            "member {i}"
        );
        assert!(
            value(&f, "propagation_latency", "propagation_latency_count") >= 25.0,
            "member {i}"
        );
        if i == leader {
            assert!(value(&f, "proposal_count", "proposal_count") >= 25.0);
            assert!(value(&f, "commit_count", "commit_count") >= 25.0);
            assert_eq!(value(&f, "quorum_size", "quorum_size"), 3.0);
            assert_eq!(value(&f, "learners", "learners"), 2.0);
            assert_eq!(
                value(
                    &f,
                    "leader_unavailable_time",
                    "leader_unavailable_time_count"
                ),
                1.0
            );
        } else {
            assert!(
                value(
                    &f,
                    "learner_proposal_received_count",
                    "learner_proposal_received_count"
                ) >= 25.0,
                "member {i}"
            );
            assert!(
                value(
                    &f,
                    "learner_commit_received_count",
                    "learner_commit_received_count"
                ) >= 25.0,
                "member {i}"
            );
            assert!(
                value(&f, "follower_sync_time", "follower_sync_time_count") >= 1.0,
                "member {i}"
            );
            assert!(!f.contains_key("learners"), "only a leader has learners");
        }
    }
}

/// A session made on member `from` reattaches on member `to`, which asks
/// the leader whether it lives (a REVALIDATE).
fn move_a_session(ensemble: &Ensemble, from: usize, to: usize) {
    let (_first, made) = RawClient::new_session(ensemble.members[from].port, 10_000);
    let mut moved = RawClient::connect(ensemble.members[to].port);
    let reattach = ConnectRequest {
        session_id: made.session_id,
        passwd: made.passwd.clone(),
        time_out: 10_000,
        read_only: Some(false),
        ..Default::default()
    };
    let reply = moved.handshake(&reattach).expect("an answer");
    assert_eq!(reply.session_id, made.session_id, "the session lives on");
}

/// What each member counts of the 25 writes' way through Zab and its log:
/// every stage ZooKeeper times, on the members where ZooKeeper times it.
fn zab_stages_and_the_log_queue(f: &BTreeMap<String, Family>, i: usize, leading: bool) {
    let at_least = |family: &str, sample: &str, least: f64| {
        let v = value(f, family, sample);
        assert!(
            v >= least,
            "member {i}: {sample} is {v}, not {least} or more"
        );
    };
    for family in [
        "proposal_ack_creation_latency",
        "sync_processor_queue_size",
        "sync_processor_queue_time_ms",
        "sync_processor_queue_and_flush_time_ms",
        "sync_process_time",
    ] {
        at_least(family, &format!("{family}_count"), 25.0);
    }
    at_least(
        "sync_processor_request_queued",
        "sync_processor_request_queued",
        25.0,
    );
    let writes = f["write_per_namespace"].samples.iter();
    let m_writes = writes.filter(|(name, labels, _)| {
        name == "write_per_namespace_count" && labels.get("key").is_some_and(|k| k.starts_with('m'))
    });
    assert_eq!(m_writes.count(), 25, "member {i}: a key per /mN");
    if leading {
        at_least("quorum_ack_latency", "quorum_ack_latency_count", 25.0);
        at_least("revalidate_count", "revalidate_count", 1.0);
        let syncs = value(f, "inflight_diff_count", "inflight_diff_count_count")
            + value(f, "inflight_snap_count", "inflight_snap_count_count");
        assert_eq!(
            syncs,
            value(f, "diff_count", "diff_count") + value(f, "snap_count", "snap_count"),
            "each sync counted as it started"
        );
        assert!(syncs >= 2.0, "both followers synced: {syncs}");
    } else {
        at_least("proposal_latency", "proposal_latency_count", 25.0);
        at_least(
            "commit_propagation_latency",
            "commit_propagation_latency_count",
            25.0,
        );
    }
}

/// `zkd serve` on a zoo.cfg of `lines`: how it exited and what it said,
/// within 20 s.
fn serve(lines: &str) -> (Option<std::process::ExitStatus>, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("zoo.cfg");
    let data = dir.path().join("data");
    let text = format!(
        "dataDir={}\nclientPort={}\nadmin.enableServer=false\n{lines}",
        data.display(),
        free_port()
    );
    std::fs::write(&config, text).expect("zoo.cfg");
    let mut child = Command::new(zkd_binary())
        .args(["serve", "--config"])
        .arg(&config)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("zkd");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break Some(status);
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut said = String::new();
    let _ = child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut said);
    (status, said)
}

#[test]
fn an_unknown_provider_or_a_taken_port_stops_the_server_at_start() {
    let (status, said) = serve("metricsProvider.className=com.example.Nope\n");
    assert!(status.is_some_and(|s| !s.success()), "{said}");
    assert!(
        said.contains("metricsProvider.className") && said.contains("com.example.Nope"),
        "{said}"
    );
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = taken.local_addr().expect("addr").port();
    let lines = format!("metricsProvider.className={PROVIDER}\nmetricsProvider.httpHost=127.0.0.1\nmetricsProvider.httpPort={port}\n");
    let (status, said) = serve(&lines);
    assert!(status.is_some_and(|s| !s.success()), "{said}");
    assert!(
        said.contains("/metrics") && said.contains(&port.to_string()),
        "{said}"
    );
}

#[test]
fn bad_requests_get_errors_and_the_endpoint_keeps_serving() {
    let port = free_port();
    let _zkd = ZkdProcess::start_with(with_metrics(ServerOptions::default(), port));
    let status = |request: &str| {
        let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        let _ = s.write_all(request.as_bytes());
        let mut raw = String::new();
        let _ = s.read_to_string(&mut raw);
        raw.lines().next().unwrap_or_default().to_owned()
    };
    assert!(status("GET /elsewhere HTTP/1.1\r\n\r\n").contains("404"));
    assert!(status("POST /metrics HTTP/1.1\r\n\r\n").contains("405"));
    let huge = format!("GET /{} HTTP/1.1\r\n", "a".repeat(64 << 10));
    assert!(!status(&huge).contains("200"));
    all_zookeepers(&families(port));
}
