//! The report a run leaves in its output folder: `history.jsonl` (the whole
//! history, re-checkable with [`read_history`]), `verdict.json` and
//! `verdict.txt` (each workload's verdict, for machines and for people) and
//! `timeline.html` (a self-contained page around [`timeline_svg`]: one lane
//! per process, fault windows as bands, op latency over time).
//!
//! Members are labelled `n<myid>`, i.e. member index `i` is `n{i+1}`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::io::{self, BufRead, BufWriter};
use std::path::Path;

use serde::{de, Deserialize, Serialize};

use super::checker::{Anomaly, Verdict};
use super::history::History;
use timeline::{FAIL, OK, RED, UNKNOWN};

mod timeline;

pub use timeline::{timeline_svg, timeline_svg_with_anomalies};

#[cfg(test)]
mod tests;

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
    for event in &history.events {
        write_record(&mut out, "event", event)?;
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
        Some("event") => history.events.push(serde_json::from_value(value)?),
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
    h += " &nbsp; Bands: fault windows. Hover a bar for its op, a tick for its event.</p>\n";
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
