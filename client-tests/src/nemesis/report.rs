//! The report a run leaves in its output folder: `history.jsonl` (the whole
//! history, re-checkable with [`read_history`]), `verdict.json` and
//! `verdict.txt` (each workload's verdict, for machines and for people) and
//! `timeline.html` (a self-contained page around [`timeline_svg`]: one lane
//! per process, fault windows as bands, op latency over time).
//!
//! Members are labelled `n<myid>`, i.e. member index `i` is `n{i+1}`.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fmt::Write as _;
use std::fs;
use std::io::{self, BufRead, BufWriter};
use std::path::Path;

use serde::{de, Deserialize, Serialize};

use super::checker::{Anomaly, Verdict};
use super::history::{Call, FaultWindow, History, Op, Outcome, Value};

/// One checked workload of a run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkloadResult {
    /// The workload's name, e.g. `register`.
    pub workload: String,
    /// The nemesis it ran under, e.g. `kill`.
    pub nemesis: String,
    /// What its checker concluded.
    #[serde(flatten)]
    pub verdict: Verdict,
}

/// What the report needs besides the history.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunInfo {
    /// The run's seed.
    pub seed: u64,
    /// The server under test: `zkd` or `zookeeper`.
    pub server: String,
    /// How many ensemble members.
    pub members: usize,
    /// How long the run lasted, in nanoseconds.
    pub duration_ns: u64,
    /// The command line that replays the run.
    pub command: String,
}

/// One `history.jsonl` line: a record tag before the record's own fields.
#[derive(Serialize)]
struct Record<'a, T: Serialize + ?Sized> {
    record: &'a str,
    #[serde(flatten)]
    body: &'a T,
}

/// How many anomalies `verdict.txt` spells out.
const MAX_LISTED_ANOMALIES: usize = 20;

/// Writes into `dir` (created if missing) `history.jsonl` (a `"record":
/// "run"` header line, then every op, then every fault window, tagged `"op"`
/// and `"fault"`), `verdict.json`, `verdict.txt` and `timeline.html`.
pub fn write_report(
    dir: &Path,
    info: &RunInfo,
    history: &History,
    results: &[WorkloadResult],
) -> io::Result<()> {
    fs::create_dir_all(dir)?;
    let mut out = BufWriter::new(fs::File::create(dir.join("history.jsonl"))?);
    write_record(&mut out, "run", info)?;
    for op in &history.ops {
        write_record(&mut out, "op", op)?;
    }
    for fault in &history.faults {
        write_record(&mut out, "fault", fault)?;
    }
    out.into_inner().map_err(|e| e.into_error())?.sync_all()?;
    let verdicts = serde_json::json!({
        "result": overall(results), "seed": info.seed, "server": info.server,
        "members": info.members, "duration_ns": info.duration_ns, "command": info.command,
        "ops": history.ops.len(), "faults": history.faults.len(), "workloads": results,
    });
    let write = |name: &str, text: String| fs::write(dir.join(name), text);
    let json = serde_json::to_string_pretty(&verdicts)? + "\n";
    write("verdict.json", json)?;
    write("verdict.txt", verdict_text(info, history, results))?;
    let svg = timeline_svg_with_anomalies(history, info.members, results);
    write("timeline.html", page(info, history, results, &svg))
}

/// Reads `history.jsonl` back (for re-checking a saved run): the history and
/// the seed of its header line, if it has one.
pub fn read_history(path: &Path) -> io::Result<(History, Option<u64>)> {
    let (mut history, mut seed) = (History::default(), None);
    let lines = io::BufReader::new(fs::File::open(path)?).lines();
    for (n, line) in lines.enumerate() {
        let line = line?;
        if !line.trim().is_empty() {
            read_line(&line, &mut history, &mut seed).map_err(|e| {
                let at = format!("{}:{}: {e}", path.display(), n + 1);
                io::Error::new(io::ErrorKind::InvalidData, at)
            })?;
        }
    }
    Ok((history, seed))
}

/// The timeline as an SVG document (also embedded in `timeline.html`),
/// without anomalies marked: see [`timeline_svg_with_anomalies`].
pub fn timeline_svg(history: &History, members: usize) -> String {
    Timeline::new(history, members, HashSet::new()).render()
}

/// The timeline as an SVG document, with the ops that `results`' anomalies
/// name drawn red and thicker. This is the one `timeline.html` embeds.
pub fn timeline_svg_with_anomalies(
    history: &History,
    members: usize,
    results: &[WorkloadResult],
) -> String {
    let anomalous = anomalies(results).flat_map(|(_, a)| a.ops.iter().copied());
    Timeline::new(history, members, anomalous.collect()).render()
}

fn write_record(out: &mut impl io::Write, record: &str, body: &impl Serialize) -> io::Result<()> {
    serde_json::to_writer(&mut *out, &Record { record, body })?;
    out.write_all(b"\n")
}

/// Adds one `history.jsonl` line's record to `history` (or its seed).
fn read_line(line: &str, history: &mut History, seed: &mut Option<u64>) -> serde_json::Result<()> {
    let mut value: serde_json::Value = serde_json::from_str(line)?;
    let record = value.as_object_mut().and_then(|m| m.remove("record"));
    match record.as_ref().and_then(|r| r.as_str()) {
        Some("run") => *seed = value.get("seed").and_then(|s| s.as_u64()),
        Some("op") => history.ops.push(serde_json::from_value(value)?),
        Some("fault") => history.faults.push(serde_json::from_value(value)?),
        other => return Err(de::Error::custom(format!("bad record {other:?}"))),
    }
    Ok(())
}

/// Every anomaly of `results`, with its workload's name.
fn anomalies(results: &[WorkloadResult]) -> impl Iterator<Item = (&str, &Anomaly)> {
    results.iter().flat_map(|r| match &r.verdict {
        Verdict::Invalid { anomalies } => anomalies.iter().map(|a| (&*r.workload, a)).collect(),
        _ => Vec::new(),
    })
}

/// The worst verdict of all: INVALID, else UNKNOWN, else VALID.
fn overall(results: &[WorkloadResult]) -> &'static str {
    let verdicts = || results.iter().map(|r| &r.verdict);
    if verdicts().any(Verdict::is_invalid) {
        "INVALID"
    } else if verdicts().any(|v| matches!(v, Verdict::Unknown { .. })) {
        "UNKNOWN"
    } else {
        "VALID"
    }
}

/// One summary line per workload, with a CSS class for its verdict.
fn summary_lines(results: &[WorkloadResult]) -> Vec<(&'static str, String)> {
    let line = |r: &WorkloadResult| {
        let name = format!("{} / {}", r.workload, r.nemesis);
        match &r.verdict {
            Verdict::Valid => ("valid", format!("{name}: VALID")),
            Verdict::Unknown { reason } => ("unknown", format!("{name}: UNKNOWN ({reason})")),
            Verdict::Invalid { anomalies } => {
                let mut kinds = BTreeMap::<&str, usize>::new();
                for a in anomalies {
                    *kinds.entry(&a.kind).or_default() += 1;
                }
                let kinds: Vec<_> = kinds.iter().map(|(k, n)| format!("{k} ×{n}")).collect();
                ("invalid", format!("{name}: INVALID ({})", kinds.join(", ")))
            }
        }
    };
    results.iter().map(line).collect()
}

/// A one-line description of the run.
fn run_line(info: &RunInfo, history: &History) -> String {
    let (seed, server, members) = (info.seed, &info.server, info.members);
    let secs = info.duration_ns as f64 / 1e9;
    let (ops, faults) = (history.ops.len(), history.faults.len());
    format!("zkd-nemesis seed {seed} against {server} ({members} members), {secs:.1} s, {ops} ops, {faults} faults")
}

/// The first anomalies, one line each.
fn anomaly_lines(results: &[WorkloadResult]) -> Vec<String> {
    let line = |(w, a): (&str, &Anomaly)| {
        let ops: Vec<_> = a.ops.iter().map(|id| format!("#{id}")).collect();
        format!("[{w}] {}: {} (ops {})", a.kind, a.detail, ops.join(", "))
    };
    let listed = anomalies(results).take(MAX_LISTED_ANOMALIES);
    listed.map(line).collect()
}

fn verdict_text(info: &RunInfo, history: &History, results: &[WorkloadResult]) -> String {
    let mut s = run_line(info, history) + "\n\n";
    for (_, line) in summary_lines(results) {
        let _ = writeln!(s, "{line}");
    }
    let (total, max) = (anomalies(results).count(), MAX_LISTED_ANOMALIES);
    if total > 0 {
        let _ = writeln!(s, "\nAnomalies ({total}, first {} listed):", total.min(max));
        for (i, line) in anomaly_lines(results).iter().enumerate() {
            let _ = writeln!(s, "{:>3}. {line}", i + 1);
        }
    }
    s + &format!("\nReplay: {}\n", info.command)
}

const HTML_STYLE: &str = "body{font-family:sans-serif;margin:16px} .valid{color:#2ca02c} \
    .invalid{color:#d62728;font-weight:bold} .unknown{color:#e08000} code{background:#eee;padding:2px} \
    .sw{display:inline-block;width:14px;height:10px;margin:0 4px 0 14px}";

fn page(info: &RunInfo, history: &History, results: &[WorkloadResult], svg: &str) -> String {
    let title = format!("zkd-nemesis seed {}", info.seed);
    let run = esc(&run_line(info, history));
    let mut h = format!(
        "<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>{title}</title>\
         <style>{HTML_STYLE}</style></head><body>\n<h1>{title}</h1>\n<p>{run}</p>\n<ul>\n"
    );
    for (class, line) in summary_lines(results) {
        let _ = writeln!(h, "<li class='{class}'>{}</li>", esc(&line));
    }
    h += "</ul>\n";
    let listed = anomaly_lines(results);
    if !listed.is_empty() {
        h += "<details open><summary>First anomalies</summary><ol>\n";
        for line in listed {
            let _ = writeln!(h, "<li>{}</li>", esc(&line));
        }
        h += "</ol></details>\n";
    }
    let _ = write!(h, "<p>Replay: <code>{}</code></p>\n<p>", esc(&info.command));
    let never = "unknown (dashed: never completed)";
    let whats = ["ok", "fail", never, "in an anomaly"];
    for (c, w) in [OK, FAIL, UNKNOWN, RED].into_iter().zip(whats) {
        let _ = write!(h, "<span class='sw' style='background:{c}'></span>{w}");
    }
    h += " &nbsp; Bands: fault windows. Hover a bar for its op.</p>\n";
    h + "<div style='overflow-x:auto'>\n" + svg + "</div>\n</body></html>\n"
}

/// Escapes text for XML and HTML.
fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// What a call asked, e.g. `write k1=5`.
fn describe_call(call: &Call) -> String {
    match call {
        Call::Read { key } => format!("read k{key}"),
        Call::Write { key, value } => format!("write k{key}={value}"),
        Call::Cas { key, from, to } => format!("cas k{key} {from}→{to}"),
        Call::SetAdd { value } => format!("set-add {value}"),
        Call::SetRead => "set-read".into(),
        Call::NextId => "next-id".into(),
        Call::CounterAdd { delta } => format!("counter-add {delta:+}"),
        Call::CounterRead => "counter-read".into(),
        Call::Enqueue { value } => format!("enqueue {value}"),
        Call::Dequeue => "dequeue".into(),
        Call::Drain => "drain".into(),
        Call::EphemeralCreate { session } => format!("ephemeral-create s{session:#x}"),
        Call::SessionClose { session } => format!("session-close s{session:#x}"),
        Call::SessionExpired { session } => format!("session-expired s{session:#x}"),
        Call::EphemeralList => "ephemeral-list".into(),
        Call::FifoWrite { key, value } => format!("fifo-write k{key}={value}"),
        Call::FifoRead { key } => format!("fifo-read k{key}"),
    }
}

/// What came of an op, e.g. `ok 5` or `fail: BadVersion`.
fn describe_outcome(outcome: &Outcome) -> String {
    let value = match outcome {
        Outcome::Fail { error } => return format!("fail: {error}"),
        Outcome::Unknown { error } => return format!("unknown: {error}"),
        Outcome::Ok { value } => value,
    };
    match value {
        Value::None => "ok".into(),
        Value::Int(v) => format!("ok {v}"),
        Value::Ints(vs) if vs.len() > 10 => format!("ok {:?} … {} in all", &vs[..10], vs.len()),
        Value::Ints(vs) => format!("ok {vs:?}"),
        Value::Versioned { value, zxid } => match value {
            Some(v) => format!("ok {v} @zxid {zxid:#x}"),
            None => format!("ok absent @zxid {zxid:#x}"),
        },
    }
}

/// An op's tooltip: `#id p3 write k1=5 → ok (12.3 ms)`.
fn describe_op(op: &Op) -> String {
    let latency = match op.complete_ns {
        Some(c) => format!("{:.1} ms", c.saturating_sub(op.invoke_ns) as f64 / 1e6),
        None => "never completed".into(),
    };
    let (call, outcome) = (describe_call(&op.call), describe_outcome(&op.outcome));
    format!("#{} p{} {call} → {outcome} ({latency})", op.id, op.process)
}

const OK: &str = "#2ca02c";
const FAIL: &str = "#6a8fc0";
const UNKNOWN: &str = "#ff8c00";
const RED: &str = "#d62728";
/// Fault hues, assigned to kinds in order of first appearance.
const FAULT_HUES: [&str; 8] = [
    "#9467bd", "#1f77b4", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#ff9896",
];
/// Above this many ops, lanes show bins instead of ops.
const MAX_DRAWN_OPS: usize = 20_000;
/// Bins per lane when binned.
const BINS: usize = 2000;
/// About how many latency points at most.
const MAX_POINTS: usize = 5000;
const LEFT: f64 = 64.0;
const PLOT_W: f64 = 1600.0;
const TOP: f64 = 44.0;
const LAT_H: f64 = 180.0;

/// How bad an op is, for coloring (a bin takes its worst op's): anomaly 4,
/// unknown 3, fail 2, ok 1.
fn severity(op: &Op, anomalous: &HashSet<u64>) -> u8 {
    match &op.outcome {
        _ if anomalous.contains(&op.id) => 4,
        Outcome::Unknown { .. } => 3,
        Outcome::Fail { .. } => 2,
        Outcome::Ok { .. } => 1,
    }
}

/// A severity's color and bar thickness.
fn style(severity: u8) -> (&'static str, u8) {
    let width = if severity == 4 { 9 } else { 5 };
    ([OK, OK, FAIL, UNKNOWN, RED][severity as usize], width)
}

/// Appends an SVG `<line>` with these extra attributes and inner markup.
fn line(s: &mut String, (x1, y1, x2, y2): (f64, f64, f64, f64), attrs: &str, inner: &str) {
    let xy = format!("x1='{x1:.1}' y1='{y1:.1}' x2='{x2:.1}' y2='{y2:.1}'");
    let _ = writeln!(s, "<line {xy} {attrs}>{inner}</line>");
}

/// Appends an SVG `<text>` (`body` already escaped).
fn text(s: &mut String, (x, y): (f64, f64), attrs: &str, body: &str) {
    let _ = writeln!(s, "<text x='{x:.1}' y='{y:.1}' {attrs}>{body}</text>");
}

/// The geometry of one timeline.
struct Timeline<'a> {
    history: &'a History,
    members: usize,
    anomalous: HashSet<u64>,
    end_ns: u64,
    /// Process id to lane index, in id order.
    lanes: BTreeMap<u32, usize>,
    lane_h: f64,
}

impl<'a> Timeline<'a> {
    fn new(history: &'a History, members: usize, anomalous: HashSet<u64>) -> Timeline<'a> {
        let (ops, faults) = (&history.ops, &history.faults);
        let op_end = ops.iter().map(|o| o.complete_ns.unwrap_or(o.invoke_ns));
        let fault_end = faults.iter().map(|f| f.end_ns.unwrap_or(f.start_ns));
        let end_ns = op_end.chain(fault_end).max().unwrap_or(0).max(1);
        let procs: BTreeSet<u32> = history.ops.iter().map(|o| o.process).collect();
        let lane_h = if procs.len() > 50 { 8.0 } else { 14.0 };
        let lanes = procs.into_iter().enumerate().map(|(i, p)| (p, i)).collect();
        Timeline {
            history,
            members,
            anomalous,
            end_ns,
            lanes,
            lane_h,
        }
    }

    fn x(&self, ns: u64) -> f64 {
        LEFT + PLOT_W * ns.min(self.end_ns) as f64 / self.end_ns as f64
    }

    fn lane_y(&self, process: u32) -> f64 {
        TOP + (self.lanes[&process] as f64 + 0.5) * self.lane_h
    }

    fn render(&self) -> String {
        let lanes_bottom = TOP + self.lanes.len().max(1) as f64 * self.lane_h;
        let lat_top = lanes_bottom + 34.0;
        let (w, h) = (LEFT + PLOT_W + 24.0, lat_top + LAT_H + 30.0);
        let mut s = format!(
            "<svg xmlns='http://www.w3.org/2000/svg' width='{w}' height='{h}' viewBox='0 0 {w} {h}' \
             font-family='sans-serif' font-size='10'>\n<rect width='{w}' height='{h}' fill='white'/>\n"
        );
        self.axis(&mut s, lanes_bottom, lat_top + LAT_H);
        self.fault_bands(&mut s, lat_top + LAT_H);
        for &p in self.lanes.keys() {
            let at = (LEFT - 6.0, self.lane_y(p));
            text(&mut s, at, "text-anchor='end' dy='3'", &format!("p{p}"));
        }
        if self.history.ops.len() > MAX_DRAWN_OPS {
            self.binned_ops(&mut s);
        } else {
            self.each_op(&mut s);
        }
        self.latency(&mut s, lat_top);
        s + "</svg>\n"
    }

    /// Time ticks with grid lines, labelled below the lanes and the latency plot.
    fn axis(&self, s: &mut String, lanes_bottom: f64, bottom: f64) {
        let secs = self.end_ns as f64 / 1e9;
        let (raw, steps) = (secs / 12.0, [1.0, 2.0, 5.0, 10.0]);
        let mag = 10f64.powf(raw.log10().floor());
        let step = steps.into_iter().map(|m| m * mag).find(|&v| v >= raw);
        let step = step.unwrap_or(mag * 10.0);
        let decimals = (-step.log10().floor()).max(0.0) as usize;
        let ticks = (0..).map(|i| step * i as f64);
        for t in ticks.take_while(|&t| t <= secs * 1.000_001) {
            let x = LEFT + PLOT_W * t / secs;
            line(s, (x, TOP, x, bottom), "stroke='#eee'", "");
            let label = format!("{t:.decimals$} s");
            for y in [lanes_bottom + 14.0, bottom + 14.0] {
                text(s, (x, y), "text-anchor='middle'", &label);
            }
        }
    }

    /// Translucent bands across all lanes, labelled at the top.
    fn fault_bands(&self, s: &mut String, bottom: f64) {
        let mut hues: HashMap<&str, &str> = HashMap::new();
        for (i, f) in self.history.faults.iter().enumerate() {
            let next = FAULT_HUES[hues.len() % FAULT_HUES.len()];
            let hue = *hues.entry(f.kind.as_str()).or_insert(next);
            let (x1, x2) = (self.x(f.start_ns), self.x(f.end_ns.unwrap_or(self.end_ns)));
            let (y, width, height) = (TOP - 4.0, (x2 - x1).max(1.0), bottom - TOP + 4.0);
            let (label, from) = (esc(&self.fault_label(f)), f.start_ns as f64 / 1e9);
            let until = match f.end_ns {
                Some(e) => format!("{:.3} s", e as f64 / 1e9),
                None => "end (never healed)".into(),
            };
            let _ = writeln!(
                s,
                "<rect x='{x1:.1}' y='{y}' width='{width:.1}' height='{height:.1}' fill='{hue}' \
                 fill-opacity='0.15'><title>{label}: {from:.3} s – {until}</title></rect>"
            );
            let at = (x1 + 2.0, 10.0 + 12.0 * (i % 3) as f64);
            text(s, at, &format!("fill='{hue}'"), &label);
        }
    }

    /// `kill -9 [n2]` (members by myid), or `[all]` when it hit every member.
    fn fault_label(&self, f: &FaultWindow) -> String {
        if self.members > 1 && (0..self.members).all(|m| f.members.contains(&m)) {
            return format!("{} [all]", f.kind);
        }
        let names: Vec<_> = f.members.iter().map(|m| format!("n{}", m + 1)).collect();
        format!("{} [{}]", f.kind, names.join(","))
    }

    /// A bar in `process`'s lane, colored by `severity`, with a tooltip.
    fn bar(s: &mut String, (x1, x2, y): (f64, f64, f64), sev: u8, extra: &str, title: &str) {
        let (color, width) = style(sev);
        let attrs = format!("stroke='{color}' stroke-width='{width}'{extra}");
        let title = format!("<title>{title}</title>");
        line(s, (x1, y, x2, y), &attrs, &title);
    }

    /// One bar per op; never-completed ops dashed and faded to the end.
    fn each_op(&self, s: &mut String) {
        for op in &self.history.ops {
            let x1 = self.x(op.invoke_ns);
            let x2 = self.x(op.complete_ns.unwrap_or(self.end_ns)).max(x1 + 1.0);
            let open = match op.complete_ns {
                None => " stroke-dasharray='4 3' stroke-opacity='0.5'",
                Some(_) => "",
            };
            let (sev, title) = (severity(op, &self.anomalous), esc(&describe_op(op)));
            Self::bar(s, (x1, x2, self.lane_y(op.process)), sev, open, &title);
        }
    }

    /// Per process, `BINS` bins over the run, each colored by its worst op;
    /// runs of equal bins are drawn as one bar.
    fn binned_ops(&self, s: &mut String) {
        let bin_ns = self.end_ns.div_ceil(BINS as u64).max(1);
        let bin = |ns: u64| ((ns / bin_ns) as usize).min(BINS - 1);
        // Per lane: each bin's worst severity and the ops invoked in it, by severity.
        let mut worst = vec![vec![0u8; BINS]; self.lanes.len()];
        let mut count = vec![vec![[0u32; 5]; BINS]; self.lanes.len()];
        for op in &self.history.ops {
            let (lane, sev) = (self.lanes[&op.process], severity(op, &self.anomalous));
            let b1 = bin(op.invoke_ns);
            let b2 = bin(op.complete_ns.unwrap_or(self.end_ns));
            count[lane][b1][sev as usize] += 1;
            for w in &mut worst[lane][b1..=b2] {
                *w = (*w).max(sev);
            }
        }
        for (&p, &lane) in &self.lanes {
            let (mut b, y) = (0, self.lane_y(p));
            while b < BINS {
                let (sev, start, mut n) = (worst[lane][b], b, [0u32; 5]);
                while b < BINS && worst[lane][b] == sev {
                    (0..5).for_each(|i| n[i] += count[lane][b][i]);
                    b += 1;
                }
                if sev > 0 {
                    let (t1, t2) = (start as u64 * bin_ns, (b as u64 * bin_ns).min(self.end_ns));
                    let (from, to, all) = (t1 as f64 / 1e9, t2 as f64 / 1e9, n.iter().sum::<u32>());
                    let title = format!(
                        "p{p} {from:.2}–{to:.2} s: {all} ops invoked ({} ok, {} fail, {} unknown, {} in anomalies)",
                        n[1], n[2], n[3], n[4]
                    );
                    Self::bar(s, (self.x(t1), self.x(t2), y), sev, "", &title);
                }
            }
        }
    }

    /// Completed ops' latency (ms, log scale) against invoke time; sampled
    /// down to about `MAX_POINTS`, keeping each pixel column's slowest op.
    fn latency(&self, s: &mut String, top: f64) {
        let done: Vec<(&Op, u64)> = (self.history.ops.iter())
            .filter_map(|o| o.complete_ns.map(|c| (o, c.saturating_sub(o.invoke_ns))))
            .collect();
        let mut keep: Vec<usize> = (0..done.len()).collect();
        if done.len() > MAX_POINTS {
            let mut slowest: BTreeMap<i64, usize> = BTreeMap::new();
            for (i, (op, lat)) in done.iter().enumerate() {
                let e = slowest.entry(self.x(op.invoke_ns) as i64).or_insert(i);
                if done[*e].1 < *lat {
                    *e = i;
                }
            }
            let room = MAX_POINTS.saturating_sub(slowest.len()).max(1);
            let stride = done.len().div_ceil(room);
            keep = (0..done.len()).step_by(stride).collect();
            keep.extend(slowest.into_values());
            keep.sort_unstable();
            keep.dedup();
        }
        let max_ms = done.iter().map(|d| d.1 as f64 / 1e6).fold(1.0, f64::max);
        let decades = (max_ms / 0.1).log10().ceil().max(1.0);
        let y = |ms: f64| top + LAT_H - LAT_H * ((ms.max(0.1) / 0.1).log10() / decades);
        let _ = writeln!(
            s,
            "<rect x='{LEFT}' y='{top}' width='{PLOT_W}' height='{LAT_H}' fill='none' stroke='#999'/>"
        );
        let mut caption = "latency of completed ops (ms, log scale) by invoke time".to_owned();
        if keep.len() < done.len() {
            let _ = write!(caption, ", {} of {} shown", keep.len(), done.len());
        }
        text(s, (LEFT, top - 6.0), "", &caption);
        for d in 0..=decades as u32 {
            let label = match d {
                0 => "0.1 ms".to_owned(),
                d => format!("{} ms", 10u64.pow(d - 1)),
            };
            let yy = y(0.1 * 10f64.powi(d as i32));
            line(s, (LEFT, yy, LEFT + PLOT_W, yy), "stroke='#eee'", "");
            text(s, (LEFT - 4.0, yy), "dy='3' text-anchor='end'", &label);
        }
        for (op, lat) in keep.into_iter().map(|i| done[i]) {
            let (cx, cy) = (self.x(op.invoke_ns), y(lat as f64 / 1e6));
            let c = style(severity(op, &self.anomalous)).0;
            let _ = writeln!(s, "<circle cx='{cx:.1}' cy='{cy:.1}' r='1.5' fill='{c}'/>");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let parsed: Vec<WorkloadResult> =
            serde_json::from_value(json["workloads"].clone()).unwrap();
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
}
