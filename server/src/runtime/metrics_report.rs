//! Every metric zkd reports, gathered at once from the node, its member
//! and its storage threads under ZooKeeper's names and kinds, and written
//! as ZooKeeper writes them: `mntr` and the AdminServer's `monitor` (its
//! default provider's keys: `avg_`/`min_`/`max_`/`cnt_`/`sum_` and
//! percentiles of each summary), or Prometheus' text format (its
//! Prometheus provider: `# HELP`, `# TYPE`, quantiles, `_count`, `_sum`).
//!
//! ZooKeeper's metrics for parts zkd has not (its JVM, request throttler,
//! commit processor queues, response cache, Netty, observers, TLS) are left
//! out, not reported as zero: the README lists them.

use super::four_letter::fd_counts;
use super::server_info::ServerInfo;
use crate::core::member::MemberView;
use crate::core::metrics::{Count, Detail, PerNamespace, Summary, Timing};
use crate::core::Node;
use crate::driver::storage_worker::StorageMetrics;
use std::fmt::Write;

/// A gauge's value, an integer or not, as ZooKeeper's gauge returns it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Number {
    Int(i64),
    Float(f64),
}

impl Number {
    fn as_f64(self) -> f64 {
        match self {
            Number::Int(i) => i as f64,
            Number::Float(f) => f,
        }
    }
}

/// What one metric holds.
#[derive(Clone, Debug)]
pub enum Reading {
    Counter(u64),
    Gauge(Number),
    /// A gauge per key (ZooKeeper's `GaugeSet`), in key order.
    GaugeSet(Vec<(String, Number)>),
    Summary(Box<Summary>, Detail),
    /// A summary per key (ZooKeeper's `SummarySet`), in key order.
    SummarySet(Vec<(String, Summary)>, Detail),
}

/// One metric, named as ZooKeeper names it.
#[derive(Clone, Debug)]
pub struct Metric {
    pub name: &'static str,
    pub reading: Reading,
}

fn gauge(name: &'static str, value: impl Into<i64>) -> Metric {
    Metric {
        name,
        reading: Reading::Gauge(Number::Int(value.into())),
    }
}

/// Every metric, now.
pub fn gather(info: &ServerInfo, node: &Node, member: Option<MemberView>) -> Vec<Metric> {
    let mut all = gauges(info, node, member);
    let metrics = node.metrics();
    let counts = info.connection_counts();
    for (name, count) in [
        ("connection_rejected", counts.rejected()),
        ("unsuccessful_handshake", counts.failed_handshakes()),
    ] {
        let reading = Reading::Counter(count);
        all.push(Metric { name, reading });
    }
    for count in Count::ALL {
        let reading = Reading::Counter(metrics.count(count));
        all.push(Metric {
            name: count.name(),
            reading,
        });
    }
    for timing in Timing::ALL {
        let (name, detail) = timing.name();
        let summary = Box::new(metrics.summary(timing).clone());
        all.push(Metric {
            name,
            reading: Reading::Summary(summary, detail),
        });
    }
    for set in PerNamespace::ALL {
        let keys = metrics.per_namespace(set).iter();
        let keys = keys.map(|(key, summary)| (key.to_owned(), summary.clone()));
        all.push(Metric {
            name: set.name(),
            reading: Reading::SummarySet(keys.collect(), Detail::Basic),
        });
    }
    all.extend(quota_gauges(node.tree()));
    all.extend(storage_metrics(info.storage_metrics()));
    all
}

/// The storage thread's: ZooKeeper's SyncRequestProcessor's and its txn
/// log's. One fsync is the whole flush of a batch, so `fsynctime` is also
/// its flush time.
fn storage_metrics(storage: &StorageMetrics) -> Vec<Metric> {
    let queued = Metric {
        name: "sync_processor_request_queued",
        reading: Reading::Counter(storage.queued()),
    };
    let mut all = vec![queued];
    storage.read(|figures| {
        for (name, summary, detail) in [
            ("fsynctime", &figures.fsync_ms, Detail::Basic),
            (
                "sync_processor_batch_size",
                &figures.sync_batch,
                Detail::Basic,
            ),
            ("snapshottime", &figures.snapshot_ms, Detail::Basic),
            (
                "sync_processor_queue_size",
                &figures.queue_size,
                Detail::Basic,
            ),
            (
                "sync_processor_queue_time_ms",
                &figures.queue_ms,
                Detail::Advanced,
            ),
            (
                "sync_processor_queue_flush_time_ms",
                &figures.fsync_ms,
                Detail::Advanced,
            ),
            (
                "sync_processor_queue_and_flush_time_ms",
                &figures.queue_and_flush_ms,
                Detail::Advanced,
            ),
            ("sync_process_time", &figures.process_ms, Detail::Basic),
        ] {
            let reading = Reading::Summary(Box::new(summary.clone()), detail);
            all.push(Metric { name, reading });
        }
    });
    all
}

/// ZooKeeper 3.9's quota gauge sets (`QuotaMetricsUtils`), keyed by the
/// top path segment of each quota, summed over the quotas under it: each
/// quota's hard limit where set, else its soft one (-1 for none), and its
/// usage.
fn quota_gauges(tree: &zkd_storage::DataTree) -> Vec<Metric> {
    let mut sums: std::collections::BTreeMap<&str, [i64; 4]> = Default::default();
    for (path, usage, limits) in tree.quotas() {
        let namespace = path[1..].split('/').next().unwrap_or_default();
        let limit = |hard: i64, soft: i64| if hard > -1 { hard } else { soft };
        let values = [
            limit(limits.count_hard, limits.count),
            limit(limits.bytes_hard, limits.bytes),
            usage.count,
            usage.bytes,
        ];
        let sum = sums.entry(namespace).or_default();
        for (total, value) in sum.iter_mut().zip(values) {
            *total += value;
        }
    }
    let names = [
        "quota_count_limit_per_namespace",
        "quota_bytes_limit_per_namespace",
        "quota_count_usage_per_namespace",
        "quota_bytes_usage_per_namespace",
    ];
    let sets = names.iter().enumerate().map(|(i, name)| {
        let values = sums
            .iter()
            .map(|(ns, v)| (ns.to_string(), Number::Int(v[i])));
        Metric {
            name,
            reading: Reading::GaugeSet(values.collect()),
        }
    });
    sets.collect()
}

/// Failed authentications, as ZooKeeper counts them: auth packets refused
/// and TLS handshakes that failed.
pub fn auth_failed_count(info: &ServerInfo, node: &Node) -> u64 {
    node.stats().auth_failed + info.connection_counts().failed_handshakes()
}

/// ZooKeeper's registered gauges that zkd has.
fn gauges(info: &ServerInfo, node: &Node, member: Option<MemberView>) -> Vec<Metric> {
    let s = node.stats();
    let tree = node.tree();
    let (open_fds, max_fds) = fd_counts();
    let counts = info.connection_counts();
    let plaintext = counts.plaintext_counts();
    let int = |v: usize| v as i64;
    let mut all = vec![
        Metric {
            name: "avg_latency",
            reading: Reading::Gauge(Number::Float(s.latency.avg_ms())),
        },
        gauge("max_latency", s.latency.max_ms as i64),
        gauge("min_latency", s.latency.min_ms as i64),
        gauge("packets_received", s.packets_received as i64),
        gauge("packets_sent", s.packets_sent as i64),
        gauge("num_alive_connections", int(node.connections().len())),
        gauge("outstanding_requests", int(node.outstanding())),
        gauge("uptime", info.uptime_ms() as i64),
        gauge("znode_count", int(tree.node_count())),
        gauge("watch_count", int(node.watches().count())),
        gauge("ephemerals_count", int(tree.ephemeral_count())),
        gauge("approximate_data_size", tree.approximate_data_size() as i64),
        gauge("global_sessions", int(node.sessions().len())),
        // zkd has no local sessions, and never drops connections at random.
        gauge("local_sessions", 0),
        Metric {
            name: "connection_drop_probability",
            reading: Reading::Gauge(Number::Float(0.0)),
        },
        gauge("open_file_descriptor_count", int(open_fds)),
        gauge("max_file_descriptor_count", max_fds as i64),
        gauge("auth_failed_count", auth_failed_count(info, node) as i64),
        gauge("last_client_response_size", s.client_responses.last),
        gauge("min_client_response_size", s.client_responses.min),
        gauge("max_client_response_size", s.client_responses.max),
        gauge("non_mtls_local_conn_count", plaintext.0 as i64),
        gauge("non_mtls_remote_conn_count", plaintext.1 as i64),
        gauge("outstanding_tls_handshake", counts.handshakes()),
    ];
    if let Some(counts) = member.and_then(|m| m.followers) {
        // A leader's, as ZooKeeper's leader registers them.
        let voters = info
            .config()
            .servers
            .values()
            .filter(|s| !s.observer)
            .count();
        all.extend([
            gauge("learners", int(counts.learners)),
            gauge("synced_followers", int(counts.synced_followers)),
            // Non-voting followers exist only during a reconfig, which zkd lacks.
            gauge("synced_non_voting_followers", 0),
            gauge("synced_observers", int(counts.synced_observers)),
            gauge("pending_syncs", int(node.pending_syncs())),
            gauge("quorum_size", int(voters)),
        ]);
    }
    all
}

/// The keys and values `mntr` and `monitor` show for `metrics`, as
/// ZooKeeper's default provider names them.
pub fn monitor_values(metrics: &[Metric]) -> Vec<(String, Number)> {
    let mut out = Vec::new();
    for m in metrics {
        match &m.reading {
            Reading::Counter(v) => out.push((m.name.to_owned(), Number::Int(*v as i64))),
            Reading::Gauge(v) => out.push((m.name.to_owned(), *v)),
            // ZooKeeper's default provider names each `KEY_NAME`.
            Reading::GaugeSet(values) => out.extend(
                values
                    .iter()
                    .map(|(key, v)| (format!("{key}_{}", m.name), *v)),
            ),
            Reading::Summary(s, detail) => summary_values(m.name, s, *detail, &mut out),
            Reading::SummarySet(values, detail) => {
                for (key, s) in values {
                    summary_values(&format!("{key}_{}", m.name), s, *detail, &mut out);
                }
            }
        }
    }
    out
}

fn summary_values(name: &str, s: &Summary, detail: Detail, out: &mut Vec<(String, Number)>) {
    let int = |v: u64| Number::Int(v as i64);
    out.push((format!("avg_{name}"), Number::Float(s.avg())));
    out.push((format!("min_{name}"), int(s.min())));
    out.push((format!("max_{name}"), int(s.max())));
    out.push((format!("cnt_{name}"), int(s.count())));
    out.push((format!("sum_{name}"), int(s.sum())));
    if detail == Detail::Advanced {
        for (label, q) in [("p50", 0.5), ("p95", 0.95), ("p99", 0.99), ("p999", 0.999)] {
            out.push((format!("{label}_{name}"), int(s.quantile(q).unwrap_or(0))));
        }
    }
}

/// `metrics` in Prometheus' text format (0.0.4), as ZooKeeper's provider
/// (the Java client 0.9) writes it, with this process's `process_*`
/// metrics as its standard exports give them.
pub fn prometheus_text(metrics: &[Metric]) -> String {
    let mut out = String::new();
    for m in metrics {
        let kind = match m.reading {
            Reading::Counter(_) => "counter",
            Reading::Gauge(_) | Reading::GaugeSet(_) => "gauge",
            Reading::Summary(..) | Reading::SummarySet(..) => "summary",
        };
        let _ = writeln!(out, "# HELP {0} {0}\n# TYPE {0} {kind}", m.name);
        match &m.reading {
            Reading::Counter(v) => sample(&mut out, m.name, "", *v as f64),
            Reading::Gauge(v) => sample(&mut out, m.name, "", v.as_f64()),
            Reading::GaugeSet(values) => {
                for (key, v) in values {
                    let labels = format!("key=\"{}\",", label_value(key));
                    sample(&mut out, m.name, &labels, v.as_f64());
                }
            }
            Reading::Summary(s, detail) => summary_samples(&mut out, m.name, "", s, *detail),
            Reading::SummarySet(values, detail) => {
                for (key, s) in values {
                    let labels = format!("key=\"{}\",", label_value(key));
                    summary_samples(&mut out, m.name, &labels, s, *detail);
                }
            }
        }
    }
    process_metrics(&mut out);
    out
}

/// A summary's samples; `labels` (a set's key) come before the quantile's.
fn summary_samples(out: &mut String, name: &str, labels: &str, s: &Summary, detail: Detail) {
    let quantiles: &[f64] = match detail {
        Detail::Basic => &[0.5],
        Detail::Advanced => &[0.5, 0.9, 0.99],
    };
    for q in quantiles {
        let value = s.quantile(*q).map_or(f64::NAN, |v| v as f64);
        sample(out, name, &format!("{labels}quantile=\"{q}\","), value);
    }
    sample(out, &format!("{name}_count"), labels, s.count() as f64);
    sample(out, &format!("{name}_sum"), labels, s.sum() as f64);
}

/// One sample line; `labels` as the Java client writes them (`k="v",`).
fn sample(out: &mut String, name: &str, labels: &str, value: f64) {
    let labels = if labels.is_empty() {
        String::new()
    } else {
        format!("{{{labels}}}")
    };
    let _ = writeln!(out, "{name}{labels} {}", java_double(value));
}

/// A label's value escaped as the text format says: a quota's key is a
/// path segment any client may write, and `"`, `\\` or a line break in it
/// would otherwise end the label and make the whole scrape unreadable.
fn label_value(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// `value` as Java's `Double.toString` (and the Prometheus client's
/// `doubleToGoString`) writes it: `3.0`, `0.25`, `1.5E7`, `NaN`, `+Inf`.
pub fn java_double(value: f64) -> String {
    if value.is_nan() {
        return "NaN".into();
    }
    if value.is_infinite() {
        return if value > 0.0 { "+Inf" } else { "-Inf" }.into();
    }
    let magnitude = value.abs();
    if magnitude != 0.0 && !(1e-3..1e7).contains(&magnitude) {
        return format!("{value:E}");
    }
    if value.fract() == 0.0 {
        format!("{value:.1}")
    } else {
        format!("{value}")
    }
}

/// The Prometheus Java client's standard `process_*` exports, read from /proc.
fn process_metrics(out: &mut String) {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command's closing parenthesis: state is field 3.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or(vec![], |(_, r)| r.split_whitespace().collect());
    let field = |n: usize| {
        fields
            .get(n - 3)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    let ticks = 100.0; // USER_HZ on Linux
    let page = 4096.0;
    let boot = boot_time_seconds();
    let (open_fds, max_fds) = fd_counts();
    let rows = [
        (
            "process_cpu_seconds_total",
            "counter",
            "Total user and system CPU time spent in seconds.",
            (field(14) + field(15)) / ticks,
        ),
        (
            "process_start_time_seconds",
            "gauge",
            "Start time of the process since unix epoch in seconds.",
            boot + field(22) / ticks,
        ),
        (
            "process_open_fds",
            "gauge",
            "Number of open file descriptors.",
            open_fds as f64,
        ),
        (
            "process_max_fds",
            "gauge",
            "Maximum number of open file descriptors.",
            max_fds as f64,
        ),
        (
            "process_virtual_memory_bytes",
            "gauge",
            "Virtual memory size in bytes.",
            field(23),
        ),
        (
            "process_resident_memory_bytes",
            "gauge",
            "Resident memory size in bytes.",
            field(24) * page,
        ),
    ];
    for (name, kind, help, value) in rows {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        sample(out, name, "", value);
    }
}

/// When the machine booted, in seconds since the Unix epoch.
fn boot_time_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    stat.lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_are_written_as_java_writes_them() {
        assert_eq!(java_double(3.0), "3.0");
        assert_eq!(java_double(0.25), "0.25");
        assert_eq!(java_double(0.0), "0.0");
        assert_eq!(java_double(15_000_000.0), "1.5E7");
        assert_eq!(java_double(f64::NAN), "NaN");
        assert_eq!(java_double(f64::INFINITY), "+Inf");
    }

    #[test]
    fn label_values_escape_what_would_end_them() {
        assert_eq!(label_value("q"), "q");
        assert_eq!(label_value("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
