//! The timeline SVG embedded in `timeline.html`: one lane per process (ops
//! as bars colored by outcome, binned when there are too many), fault
//! windows as bands, and op latency over time; plus the op tooltips.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fmt::Write as _;

use super::{anomalies, esc, WorkloadResult};
use crate::nemesis::history::{Call, Event, FaultWindow, History, Op, Outcome, Value};

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

/// An event's tooltip text, cut to a readable length.
fn event_text(e: &Event) -> String {
    const MAX: usize = 300;
    match e.text.char_indices().nth(MAX) {
        Some((at, _)) => format!("{}…", &e.text[..at]),
        None => e.text.clone(),
    }
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
        Call::WatchRead { key } => format!("watch-read k{key}"),
        Call::WatchPeek { key } => format!("watch-peek k{key}"),
        Call::WatchWrite { key, value } => format!("watch-write k{key}={value}"),
        Call::WatchFired { key, read } => format!("watch-fired k{key} (set by #{read})"),
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
pub(super) fn describe_op(op: &Op) -> String {
    let latency = match op.complete_ns {
        Some(c) => format!("{:.1} ms", c.saturating_sub(op.invoke_ns) as f64 / 1e6),
        None => "never completed".into(),
    };
    let (call, outcome) = (describe_call(&op.call), describe_outcome(&op.outcome));
    format!("#{} p{} {call} → {outcome} ({latency})", op.id, op.process)
}

pub(super) const OK: &str = "#2ca02c";
pub(super) const FAIL: &str = "#6a8fc0";
pub(super) const UNKNOWN: &str = "#ff8c00";
pub(super) const RED: &str = "#d62728";
/// Fault hues, assigned to kinds in order of first appearance.
const FAULT_HUES: [&str; 8] = [
    "#9467bd", "#1f77b4", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#ff9896",
];
/// Above this many ops, lanes show bins instead of ops.
const MAX_DRAWN_OPS: usize = 20_000;
/// Bins per lane when binned.
const BINS: usize = 2000;
/// About how many latency points at most.
pub(super) const MAX_POINTS: usize = 5000;
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
    /// Event sources, each a lane below the processes', in first-seen order.
    sources: Vec<&'a str>,
    lane_h: f64,
}

impl<'a> Timeline<'a> {
    fn new(history: &'a History, members: usize, anomalous: HashSet<u64>) -> Timeline<'a> {
        let (ops, faults) = (&history.ops, &history.faults);
        let op_end = ops.iter().map(|o| o.complete_ns.unwrap_or(o.invoke_ns));
        let fault_end = faults.iter().map(|f| f.end_ns.unwrap_or(f.start_ns));
        let event_end = history.events.iter().map(|e| e.at_ns);
        let end_ns = op_end
            .chain(fault_end)
            .chain(event_end)
            .max()
            .unwrap_or(0)
            .max(1);
        let mut sources: Vec<&str> = Vec::new();
        for e in &history.events {
            if !sources.contains(&e.source.as_str()) {
                sources.push(&e.source);
            }
        }
        let procs: BTreeSet<u32> = history.ops.iter().map(|o| o.process).collect();
        let lane_h = if procs.len() > 50 { 8.0 } else { 14.0 };
        let lanes = procs.into_iter().enumerate().map(|(i, p)| (p, i)).collect();
        Timeline {
            history,
            members,
            anomalous,
            end_ns,
            lanes,
            sources,
            lane_h,
        }
    }

    fn x(&self, ns: u64) -> f64 {
        LEFT + PLOT_W * ns.min(self.end_ns) as f64 / self.end_ns as f64
    }

    fn lane_y(&self, process: u32) -> f64 {
        TOP + (self.lanes[&process] as f64 + 0.5) * self.lane_h
    }

    /// The lane of event source `i`, below every process's.
    fn source_y(&self, i: usize) -> f64 {
        TOP + (self.lanes.len() + i) as f64 * self.lane_h + self.lane_h / 2.0
    }

    fn render(&self) -> String {
        let lane_count = self.lanes.len() + self.sources.len();
        let lanes_bottom = TOP + lane_count.max(1) as f64 * self.lane_h;
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
        self.events(&mut s);
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

    /// Each event as a tick in its source's lane, with its text as tooltip.
    fn events(&self, s: &mut String) {
        for (i, source) in self.sources.iter().enumerate() {
            let y = self.source_y(i);
            text(s, (LEFT - 6.0, y), "text-anchor='end' dy='3'", &esc(source));
        }
        for e in &self.history.events {
            let Some(i) = self.sources.iter().position(|s| *s == e.source) else {
                continue;
            };
            let (x, y, half) = (self.x(e.at_ns), self.source_y(i), self.lane_h / 2.0 - 1.0);
            let title = format!(
                "<title>{:.3} s: {}</title>",
                e.at_ns as f64 / 1e9,
                esc(&event_text(e))
            );
            line(
                s,
                (x, y - half, x, y + half),
                "stroke='#555' stroke-width='2'",
                &title,
            );
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
