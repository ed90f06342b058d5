//! Four-letter words on the client port, with ZooKeeper's output formats.

use super::metrics_report::{self, Number};
use super::server_info::{version_string, ServerInfo};
use crate::core::connection::Conn;
use crate::core::member::MemberView;
use crate::core::{ConnId, Mode, Node};
use std::fmt::Write;

impl ServerInfo {
    /// The reply to `word`, honouring the whitelist. `followers` is the
    /// leader's (followers, synced followers).
    pub fn answer(&self, word: &str, node: &mut Node, member: Option<MemberView>) -> String {
        if !self.config().four_letter_whitelist.allows(word) {
            return format!("{word} is not executed because it is not in the whitelist.\n");
        }
        let exempt = matches!(word, "ruok" | "conf" | "envi" | "dirs" | "isro");
        if node.mode() == Mode::NotServing && !exempt {
            // ZooKeeper's answer while it elects or syncs.
            return "This ZooKeeper instance is not currently serving requests\n".into();
        }
        match word {
            "ruok" => "imok".into(),
            // ZooKeeper's IsroCommand: "null" while it serves nobody.
            "isro" => match node.mode() {
                Mode::NotServing => "null",
                Mode::ReadOnly => "ro",
                _ => "rw",
            }
            .into(),
            "srvr" => self.srvr(node, false),
            "stat" => self.srvr(node, true),
            "conf" => self.conf(),
            "cons" => cons(node),
            "envi" => envi(),
            "mntr" => self.mntr(node, member),
            "wchs" => {
                let (conns, paths, total) = node.watches().data_summary();
                format!("{conns} connections watching {paths} paths\nTotal watches:{total}\n")
            }
            "wchc" => wchc(node),
            "wchp" => wchp(node),
            "dirs" => {
                let (data, log) = self.disk_usage();
                format!("datadir_size: {data}\nlogdir_size: {log}\n")
            }
            "dump" => dump(node),
            "crst" => {
                node.reset_connection_stats();
                "Connection stats reset.\n".into()
            }
            "srst" => {
                node.reset_stats();
                "Server stats reset.\n".into()
            }
            _ => String::new(),
        }
    }

    fn srvr(&self, node: &Node, with_clients: bool) -> String {
        let s = node.stats();
        let mut out = format!("Zookeeper version: {}\n", version_string());
        if with_clients {
            out.push_str("Clients:\n");
            for conn in node.connections().values() {
                let _ = writeln!(out, "{}", brief(conn));
            }
            out.push('\n');
        }
        let _ = write!(
            out,
            "Latency min/avg/max: {}/{:.4}/{}\nReceived: {}\nSent: {}\nConnections: {}\nOutstanding: {}\nZxid: {}\nMode: {}\nNode count: {}\n",
            s.latency.min_ms,
            s.latency.avg_ms(),
            s.latency.max_ms,
            s.packets_received,
            s.packets_sent,
            node.connections().len(),
            node.outstanding(),
            node.processed_zxid(),
            node.mode().name(),
            node.tree().node_count(),
        );
        out
    }

    fn conf(&self) -> String {
        let c = self.config();
        let (data, log) = self.disk_usage();
        format!(
            "clientPort={}\nsecureClientPort={}\ndataDir={}\ndataDirSize={data}\ndataLogDir={}\ndataLogSize={log}\ntickTime={}\nmaxClientCnxns={}\nminSessionTimeout={}\nmaxSessionTimeout={}\nclientPortListenBacklog=-1\nserverId={}\n",
            c.client_port.map_or(-1, i32::from),
            c.tls.as_ref().and_then(|t| t.port).map_or(-1, i32::from),
            c.data_dir.join(zkd_storage::disk::layout::ZKD_DIR).display(),
            c.data_log_dir.join(zkd_storage::disk::layout::ZKD_DIR).display(),
            c.tick_time_ms,
            c.max_client_cnxns,
            c.min_session_timeout_ms,
            c.max_session_timeout_ms,
            c.my_id.unwrap_or(0),
        )
    }

    /// ZooKeeper's `mntr`: `zk_` and each key of `monitor`, a tab, its value.
    fn mntr(&self, node: &Node, member: Option<MemberView>) -> String {
        let mut out = format!(
            "zk_version\t{}\nzk_server_state\t{}\n",
            version_string(),
            node.mode().name()
        );
        let metrics = metrics_report::gather(self, node, member);
        for (key, value) in metrics_report::monitor_values(&metrics) {
            let value = match value {
                Number::Int(i) => i.to_string(),
                Number::Float(f) => metrics_report::java_double(f),
            };
            let _ = writeln!(out, "zk_{key}\t{value}");
        }
        if let Some(counts) = member.and_then(|m| m.followers) {
            // ZooKeeper 3.4's name for learners, which older checks read.
            let _ = writeln!(out, "zk_followers\t{}", counts.learners);
        }
        out
    }
}

/// ` /ip:port[1](queued=N,recved=N,sent=N)` as `stat` shows a connection.
fn brief(conn: &Conn) -> String {
    format!(
        " /{}:{}[1](queued={},recved={},sent={})",
        conn.remote_ip,
        conn.remote_port,
        conn.queue.len(),
        conn.stats.received,
        conn.stats.sent
    )
}

fn cons(node: &Node) -> String {
    let mut out = String::new();
    for conn in node.connections().values() {
        let s = &conn.stats;
        let mut line = brief(conn);
        if let Some(session) = conn.session() {
            line.pop();
            let avg = s.latency.total_ms.checked_div(s.latency.count).unwrap_or(0);
            let timeout = node.sessions().timeout_ms(session).unwrap_or(0);
            let _ = write!(
                line,
                ",sid={session},lop={},est={},to={timeout},lcxid=0x{:x},lzxid=0x{:x},lresp={},llat={},minlat={},avglat={avg},maxlat={})",
                if s.last_op.is_empty() { "NA" } else { s.last_op },
                s.established_ms,
                s.last_cxid,
                s.last_zxid,
                s.last_response_ms,
                s.latency.last_ms,
                s.latency.min_ms,
                s.latency.max_ms,
            );
        }
        out.push_str(&line);
        out.push('\n');
    }
    out.push('\n');
    out
}

fn session_of(node: &Node, conn: ConnId) -> String {
    node.connections()
        .get(&conn)
        .and_then(|c| c.session())
        .map_or_else(|| "0x0".into(), |s| s.to_string())
}

fn wchc(node: &Node) -> String {
    let mut out = String::new();
    for (conn, paths) in node.watches().data_paths_by_conn() {
        let _ = writeln!(out, "{}", session_of(node, conn));
        for path in paths {
            let _ = writeln!(out, "\t{path}");
        }
    }
    out
}

fn wchp(node: &Node) -> String {
    let mut out = String::new();
    for (path, conns) in node.watches().data_conns_by_path() {
        let _ = writeln!(out, "{path}");
        for conn in conns {
            let _ = writeln!(out, "\t{}", session_of(node, conn));
        }
    }
    out
}

fn dump(node: &Node) -> String {
    let sessions = node.sessions();
    let buckets: Vec<_> = sessions.buckets().collect();
    let mut out = format!(
        "SessionTracker dump:\nSession Sets ({})/({}):\n",
        buckets.len(),
        sessions.len()
    );
    for (at, ids) in buckets {
        let _ = writeln!(out, "{} expire at {at}:", ids.len());
        for id in ids {
            let _ = writeln!(out, "\t{id}");
        }
    }
    let tree = node.tree();
    let owners: Vec<_> = tree
        .sessions()
        .keys()
        .filter(|id| !tree.ephemerals_of(**id).is_empty())
        .collect();
    let _ = write!(
        out,
        "ephemeral nodes dump:\nSessions with Ephemerals ({}):\n",
        owners.len()
    );
    for id in owners {
        let _ = writeln!(out, "0x{id:x}:");
        for path in tree.ephemerals_of(*id) {
            let _ = writeln!(out, "\t{path}");
        }
    }
    out.push_str("Connections dump:\n");
    out
}

fn envi() -> String {
    let host = std::fs::read_to_string("/etc/hostname").unwrap_or_default();
    let var = |k: &str| std::env::var(k).unwrap_or_default();
    let dir = std::env::current_dir()
        .map(|d| d.display().to_string())
        .unwrap_or_default();
    format!(
        "Environment:\nzookeeper.version={}\nhost.name={}\nos.name={}\nos.arch={}\nuser.name={}\nuser.home={}\nuser.dir={dir}\n",
        version_string(),
        host.trim(),
        std::env::consts::OS,
        std::env::consts::ARCH,
        var("USER"),
        var("HOME"),
    )
}

/// Open file descriptors, and the most this process may open.
pub fn fd_counts() -> (usize, u64) {
    let open = std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count());
    let max = std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|l| {
            l.lines()
                .find(|line| line.starts_with("Max open files"))
                .and_then(|line| line.split_whitespace().nth(3).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0);
    (open, max)
}
