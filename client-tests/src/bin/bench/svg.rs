//! The scale scenario's curves: one SVG per row, the row's value against the
//! tree's size (a log scale when sizes span a decade or more), zkd beside
//! ZooKeeper, so a reader sees how each cost grows.

use super::scale::{Row, ScaleRun, ROWS};
use std::fmt::Write as _;
use std::path::Path;

const WIDTH: f64 = 560.0;
const HEIGHT: f64 = 320.0;
/// Margins: left (the y labels), right, top (the title), bottom (the x labels).
const LEFT: f64 = 70.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 50.0;
const ZKD_COLOUR: &str = "#1f77b4";
const ZOOKEEPER_COLOUR: &str = "#d62728";

/// One size's results: (znodes, zkd, ZooKeeper if it ran).
pub type SizeResult = (usize, ScaleRun, Option<ScaleRun>);

/// Writes one chart per row into `dir` and prints their paths.
pub fn write_charts(dir: &Path, results: &[SizeResult]) {
    if results.is_empty() {
        return;
    }
    if let Err(e) = std::fs::create_dir_all(dir) {
        eprintln!("no charts: cannot create {}: {e}", dir.display());
        return;
    }
    println!();
    for (i, row) in ROWS.iter().enumerate() {
        let path = dir.join(format!("{:02}-{}.svg", i + 1, slug(row.title)));
        match std::fs::write(&path, chart(row, results)) {
            Ok(()) => println!("chart: {}", path.display()),
            Err(e) => eprintln!("chart {}: {e}", path.display()),
        }
    }
}

fn slug(title: &str) -> String {
    let words: Vec<String> = title
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_ascii_lowercase)
        .collect();
    words.join("-")
}

/// The axes' mapping from (size, value) to the picture.
struct Axes {
    log_x: bool,
    min_x: f64,
    max_x: f64,
    max_y: f64,
}

impl Axes {
    fn x(&self, size: f64) -> f64 {
        let (lo, hi, v) = match self.log_x {
            true => (self.min_x.log10(), self.max_x.log10(), size.log10()),
            false => (self.min_x, self.max_x, size),
        };
        let share = if hi > lo { (v - lo) / (hi - lo) } else { 0.5 };
        LEFT + share * (WIDTH - LEFT - RIGHT)
    }
    fn y(&self, value: f64) -> f64 {
        HEIGHT - BOTTOM - value / self.max_y * (HEIGHT - TOP - BOTTOM)
    }
}

/// One row's chart.
fn chart(row: &Row, results: &[SizeResult]) -> String {
    let zkd: Vec<(f64, f64)> = points(results, |(_, ours, _)| Some((row.value)(ours)));
    let zookeeper: Vec<(f64, f64)> =
        points(results, |(_, _, theirs)| theirs.as_ref().map(row.value));
    let sizes: Vec<f64> = results.iter().map(|(s, _, _)| *s as f64).collect();
    let min_x = sizes.iter().copied().fold(f64::INFINITY, f64::min);
    let max_x = sizes.iter().copied().fold(0.0, f64::max);
    let max_value = zkd
        .iter()
        .chain(&zookeeper)
        .map(|p| p.1)
        .fold(0.0, f64::max);
    let axes = Axes {
        log_x: max_x >= 10.0 * min_x,
        min_x,
        max_x,
        max_y: if max_value > 0.0 {
            max_value * 1.1
        } else {
            1.0
        },
    };
    let mut svg = String::new();
    let _ = write!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" font-family="sans-serif" font-size="12">"#
    );
    let _ = write!(
        svg,
        r#"<rect width="100%" height="100%" fill="white"/><text x="{LEFT}" y="20" font-size="14">{} ({})</text>"#,
        row.title, row.unit
    );
    frame(&mut svg, &axes, &sizes);
    line(&mut svg, &axes, &zkd, ZKD_COLOUR);
    line(&mut svg, &axes, &zookeeper, ZOOKEEPER_COLOUR);
    legend(&mut svg);
    svg.push_str("</svg>\n");
    svg
}

/// (size, value) of every size where `value` has a finite figure.
fn points(results: &[SizeResult], value: impl Fn(&SizeResult) -> Option<f64>) -> Vec<(f64, f64)> {
    results
        .iter()
        .filter_map(|r| Some((r.0 as f64, value(r)?)))
        .filter(|(_, v)| v.is_finite())
        .collect()
}

/// The axes, a tick per size on x and four on y.
fn frame(svg: &mut String, axes: &Axes, sizes: &[f64]) {
    let (x0, y0) = (LEFT, HEIGHT - BOTTOM);
    let _ = write!(
        svg,
        r#"<path d="M{x0} {TOP}V{y0}H{}" stroke="black" fill="none"/>"#,
        WIDTH - RIGHT
    );
    for size in sizes {
        let x = axes.x(*size);
        let _ = write!(
            svg,
            r#"<text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            y0 + 18.0,
            human(*size)
        );
    }
    let _ = write!(
        svg,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">znodes</text>"#,
        (LEFT + WIDTH - RIGHT) / 2.0,
        HEIGHT - 10.0
    );
    for i in 0..=4 {
        let value = axes.max_y * i as f64 / 4.0;
        let y = axes.y(value);
        let _ = write!(
            svg,
            r##"<path d="M{x0} {y:.1}H{}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            WIDTH - RIGHT,
            x0 - 6.0,
            y + 4.0,
            human(value)
        );
    }
}

fn line(svg: &mut String, axes: &Axes, points: &[(f64, f64)], colour: &str) {
    let coords: Vec<String> = points
        .iter()
        .map(|(s, v)| format!("{:.1},{:.1}", axes.x(*s), axes.y(*v)))
        .collect();
    let _ = write!(
        svg,
        r#"<polyline points="{}" fill="none" stroke="{colour}" stroke-width="2"/>"#,
        coords.join(" ")
    );
    for c in &coords {
        let (x, y) = c.split_once(',').unwrap_or(("0", "0"));
        let _ = write!(svg, r#"<circle cx="{x}" cy="{y}" r="3" fill="{colour}"/>"#);
    }
}

fn legend(svg: &mut String) {
    let x = WIDTH - RIGHT - 130.0;
    for (i, (name, colour)) in [("zkd", ZKD_COLOUR), ("ZooKeeper 3.8", ZOOKEEPER_COLOUR)]
        .iter()
        .enumerate()
    {
        let y = 20.0 + 16.0 * i as f64;
        let _ = write!(
            svg,
            r#"<rect x="{x}" y="{:.1}" width="12" height="4" fill="{colour}"/><text x="{:.1}" y="{:.1}">{name}</text>"#,
            y - 4.0,
            x + 18.0,
            y + 2.0
        );
    }
}

/// 2000000 as 2M, 1500 as 1.5k, 0.25 as 0.25.
fn human(v: f64) -> String {
    let (scaled, suffix) = match v.abs() {
        a if a >= 1e6 => (v / 1e6, "M"),
        a if a >= 1e3 => (v / 1e3, "k"),
        _ => (v, ""),
    };
    let text = format!("{scaled:.2}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    format!("{text}{suffix}")
}
