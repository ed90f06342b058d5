//! Tests of the report: the files written and read back, the timeline SVG
//! (every op, faults, anomalies) and its binning of huge histories.

use super::timeline::{describe_op, FAIL, MAX_POINTS, RED, UNKNOWN};
use super::*;
use crate::nemesis::history::{Call, FaultWindow, Op, Outcome};

/// A doctored history: every outcome, an op that never completed, an
/// error needing escaping, a healed and an open fault.
const FIXTURE: &str = r#"{"ops": [
 {"id":0,"process":1,"invoke_ns":0,"complete_ns":12000000,"call":{"f":"write","key":1,"value":5},"outcome":{"type":"ok","value":{"t":"none"}}},
 {"id":1,"process":2,"invoke_ns":5000000,"complete_ns":20000000,"call":{"f":"read","key":1},"outcome":{"type":"ok","value":{"t":"int","v":4}}},
 {"id":2,"process":3,"invoke_ns":8000000,"complete_ns":30000000,"call":{"f":"cas","key":1,"from":5,"to":6},"outcome":{"type":"fail","error":"bad <&> version"}},
 {"id":3,"process":1,"invoke_ns":40000000,"complete_ns":null,"call":{"f":"write","key":1,"value":7},"outcome":{"type":"unknown","error":"never answered"}},
 {"id":4,"process":2,"invoke_ns":50000000,"complete_ns":900000000,"call":{"f":"set_read"},"outcome":{"type":"ok","value":{"t":"ints","v":[0,1,2,3,4,5,6,7,8,9,10,11]}}}
], "faults": [
 {"kind":"kill -9","members":[1],"start_ns":10000000,"end_ns":200000000},
 {"kind":"partition halves","members":[0,2],"start_ns":300000000,"end_ns":null}
]}"#;

fn doctored() -> (RunInfo, History, Vec<WorkloadResult>) {
    let history: History = serde_json::from_str(FIXTURE).unwrap();
    let command = "zkd-nemesis --seed 42 --workload register".to_owned();
    let info = RunInfo {
        seed: 42,
        server: "zkd".into(),
        members: 3,
        duration_ns: 1_000_000_000,
        command,
    };
    let stale = Anomaly::new("stale-read", "read 4 after write 5 <acked>", vec![0, 1]);
    let result = |w: &str, verdict| WorkloadResult {
        workload: w.into(),
        nemesis: "kill".into(),
        verdict,
    };
    let results = vec![
        result(
            "register",
            Verdict::Invalid {
                anomalies: vec![stale],
            },
        ),
        result("set", Verdict::Valid),
    ];
    (info, history, results)
}

/// The `<line ...>` element whose tooltip starts with `#id `.
fn element_of(svg: &str, id: u64) -> &str {
    let title = svg
        .find(&format!("<title>#{id} p"))
        .expect("op has a title");
    &svg[svg[..title].rfind("<line").expect("op is a line")..title]
}

#[test]
fn report_files_round_trip_and_say_what_happened() {
    let (info, history, results) = doctored();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("out/run-42");
    write_report(&dir, &info, &history, &results).unwrap();
    for f in [
        "history.jsonl",
        "verdict.json",
        "verdict.txt",
        "timeline.html",
    ] {
        assert!(dir.join(f).is_file(), "{f} missing");
    }
    let jsonl = fs::read_to_string(dir.join("history.jsonl")).unwrap();
    let lines: Vec<&str> = jsonl.lines().collect();
    assert_eq!(lines.len(), 1 + 5 + 2);
    assert!(
        lines[0].starts_with("{\"record\":\"run\",\"seed\":42"),
        "{}",
        lines[0]
    );
    assert!(
        lines[1].starts_with("{\"record\":\"op\",\"id\":0"),
        "{}",
        lines[1]
    );
    assert!(
        lines[7].starts_with("{\"record\":\"fault\""),
        "{}",
        lines[7]
    );
    assert_eq!(
        read_history(&dir.join("history.jsonl")).unwrap(),
        (history, Some(42))
    );

    let json = fs::read_to_string(dir.join("verdict.json")).unwrap();
    let json: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(
        (json["seed"].as_u64(), json["server"].as_str()),
        (Some(42), Some("zkd"))
    );
    assert_eq!(json["result"], "INVALID");
    let (register, set) = (&json["workloads"][0], &json["workloads"][1]);
    assert_eq!(
        (&register["verdict"], &set["verdict"]),
        (&"invalid".into(), &"valid".into())
    );
    assert_eq!(register["anomalies"][0]["kind"], "stale-read");
    assert_eq!(register["anomalies"][0]["ops"], serde_json::json!([0, 1]));
    let parsed: Vec<WorkloadResult> = serde_json::from_value(json["workloads"].clone()).unwrap();
    assert_eq!(parsed, results);

    let txt = fs::read_to_string(dir.join("verdict.txt")).unwrap();
    assert!(
        txt.contains("register / kill: INVALID (stale-read ×1)"),
        "{txt}"
    );
    assert!(txt.contains("set / kill: VALID"), "{txt}");
    assert!(
        txt.contains("stale-read: read 4 after write 5 <acked> (ops #0, #1)"),
        "{txt}"
    );
    assert!(txt.contains(&format!("Replay: {}", info.command)), "{txt}");

    let html = fs::read_to_string(dir.join("timeline.html")).unwrap();
    assert!(html.contains("<title>zkd-nemesis seed 42</title>"));
    assert!(html.contains("class='invalid'>register / kill: INVALID"));
    assert!(html.contains("&lt;acked&gt;") && !html.contains("<acked>"));
    assert!(!html.contains("<script") && !html.contains("<link") && !html.contains("src="));
    let svg = &html[html.find("<svg").expect("svg embedded")..];
    assert!(
        element_of(svg, 1).contains(RED),
        "the embedded timeline marks anomalies"
    );
}

#[test]
fn svg_draws_every_op_faults_and_anomalies() {
    let (_, history, results) = doctored();
    let svg = timeline_svg_with_anomalies(&history, 3, &results);
    assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
    assert_eq!(svg.matches("<svg").count(), 1);
    for o in &history.ops {
        let title = format!("<title>{}</title>", esc(&describe_op(o)));
        assert!(svg.contains(&title), "{title}");
    }
    assert!(
        svg.contains("<title>#0 p1 write k1=5 → ok (12.0 ms)</title>"),
        "{svg}"
    );
    let read_all = "#4 p2 set-read → ok [0, 1, 2, 3, 4, 5, 6, 7, 8, 9] … 12 in all (850.0 ms)";
    assert!(svg.contains(read_all));
    for id in [0, 1] {
        let e = element_of(&svg, id);
        assert!(e.contains(RED) && e.contains("stroke-width='9'"), "{e}");
    }
    assert!(element_of(&svg, 2).contains(FAIL));
    let open = element_of(&svg, 3);
    assert!(
        open.contains(UNKNOWN) && open.contains("stroke-dasharray"),
        "{open}"
    );
    assert!(svg.contains(">kill -9 [n2]</text>"), "{svg}");
    assert!(svg.contains(">partition halves [n1,n3]</text>"));
    assert!(svg.contains("end (never healed)"));
    assert!(svg.contains("bad &lt;&amp;&gt; version") && !svg.contains("<&>"));
    assert!(svg.contains(">p1</text>") && svg.contains(">p3</text>"));
    assert_eq!(
        svg.matches("<circle").count(),
        4,
        "one latency point per completed op"
    );
    let plain = timeline_svg(&history, 3);
    assert!(!plain.contains(RED), "nothing is red without anomalies");
}

#[test]
fn huge_history_is_binned_and_stays_small() {
    let op = |i: u64| {
        let (process, invoke_ns) = ((i % 50) as u32, i * 1_200_000);
        let lat = 1_000_000 + (i * 7919 % 50) * 1_000_000;
        let outcome = match i % 97 {
            0 => Outcome::Fail {
                error: "BadVersion".into(),
            },
            1 => Outcome::Unknown {
                error: "connection loss".into(),
            },
            _ => Outcome::ok(),
        };
        let complete_ns = (i != 99_999).then_some(invoke_ns + lat);
        Op {
            id: i,
            process,
            invoke_ns,
            complete_ns,
            call: Call::NextId,
            outcome,
        }
    };
    let sigstop = FaultWindow {
        kind: "SIGSTOP".into(),
        members: vec![0],
        start_ns: 1,
        end_ns: None,
    };
    let history = History {
        ops: (0..100_000).map(op).collect(),
        faults: vec![sigstop],
        events: Vec::new(),
    };
    let dup = Anomaly::new("duplicate-id", "twice", vec![5000, 5001]);
    let verdict = Verdict::Invalid {
        anomalies: vec![dup],
    };
    let results = [WorkloadResult {
        workload: "unique-ids".into(),
        nemesis: "pause".into(),
        verdict,
    }];
    let svg = timeline_svg_with_anomalies(&history, 3, &results);
    assert!(svg.len() < 10_000_000, "{} bytes", svg.len());
    assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
    assert!(
        !svg.contains("<title>#"),
        "ops are binned, not drawn one by one"
    );
    assert!(svg.contains("ops invoked ("));
    assert!(svg.contains(&format!("stroke='{RED}' stroke-width='9'")));
    let points = svg.matches("<circle").count();
    assert!(
        (1000..=MAX_POINTS + 1700).contains(&points),
        "{points} points"
    );
    assert_eq!(
        svg,
        timeline_svg_with_anomalies(&history, 3, &results),
        "deterministic"
    );
}

#[test]
fn read_history_rejects_garbage() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("history.jsonl");
    fs::write(&path, "{\"record\":\"op\",\"id\":1}\n").unwrap();
    let err = read_history(&path).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::InvalidData);
    assert!(err.to_string().contains(":1:"), "{err}");
    fs::write(&path, "\n{\"record\":\"bogus\"}\n").unwrap();
    assert!(read_history(&path).unwrap_err().to_string().contains(":2:"));
    fs::write(&path, "").unwrap();
    assert_eq!(read_history(&path).unwrap(), (History::default(), None));
}

#[test]
fn events_are_written_read_back_and_drawn_in_lanes_of_their_own() {
    let (info, mut history, results) = doctored();
    history.events = vec![
        crate::nemesis::history::Event {
            at_ns: 100_000_000,
            source: "cmd".into(),
            text: "started <a>".into(),
        },
        crate::nemesis::history::Event {
            at_ns: 250_000_000,
            source: "ensemble".into(),
            text: "leader is node2".into(),
        },
    ];
    let tmp = tempfile::tempdir().unwrap();
    write_report(tmp.path(), &info, &history, &results).unwrap();
    let back = read_history(&tmp.path().join("history.jsonl")).unwrap();
    assert_eq!(back, (history.clone(), Some(42)));
    let svg = timeline_svg(&history, 3);
    assert!(
        svg.contains(">cmd</text>") && svg.contains(">ensemble</text>"),
        "{svg}"
    );
    assert!(
        svg.contains("<title>0.100 s: started &lt;a&gt;</title>"),
        "{svg}"
    );
    assert!(
        svg.contains("<title>0.250 s: leader is node2</title>"),
        "{svg}"
    );
}
