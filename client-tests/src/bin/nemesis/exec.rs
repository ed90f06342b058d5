//! `zkd-nemesis --exec "CMD"`: any test suite under a nemesis. CMD runs in
//! a shell with the ensemble's connect string in `ZK_CONNECT` and
//! `ZOOKEEPER_CONNECT`, on a fresh `zkd ensemble` (or the one `--dir` names),
//! while a seeded schedule of faults goes through the ensemble's fault API:
//! a quiet spell, a fault held for a while, `heal`, again, until CMD exits.
//! Then everything is healed and the report written: CMD's exit status and
//! output, and a timeline with the faults, leader changes, session expiries
//! and CMD's lines.
//! The exit status is CMD's. No root is needed.

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use zkd_client_tests::fault_ensemble::{free_base_port, FaultEnsemble, Target};
use zkd_client_tests::nemesis::checker::{Anomaly, Verdict};
use zkd_client_tests::nemesis::history::{Event, FaultWindow, History};
use zkd_client_tests::nemesis::report::{self, RunInfo, WorkloadResult};
use zkd_client_tests::process::four_letter_word_at;

/// A fault the fault API makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ApiFault {
    KillRandom,
    KillLeader,
    KillAll,
    PauseRandom,
    PauseLeader,
    PauseAll,
    PartitionHalves,
    PartitionLeader,
    PartitionOneWay,
    PartitionClient,
    SlowDisk,
    DiskError,
    ExpireSession,
}

/// The names `--nemesis` takes with `--exec`: today's matrix names that the
/// fault API makes, plus `expire-session`.
const NAMES: [(&str, ApiFault); 13] = [
    ("kill-random", ApiFault::KillRandom),
    ("kill-leader", ApiFault::KillLeader),
    ("kill-all", ApiFault::KillAll),
    ("pause-random", ApiFault::PauseRandom),
    ("pause-leader", ApiFault::PauseLeader),
    ("pause-all", ApiFault::PauseAll),
    ("partition-halves", ApiFault::PartitionHalves),
    ("partition-leader", ApiFault::PartitionLeader),
    ("partition-one-way", ApiFault::PartitionOneWay),
    ("partition-client", ApiFault::PartitionClient),
    ("slow-disk", ApiFault::SlowDisk),
    ("disk-error", ApiFault::DiskError),
    ("expire-session", ApiFault::ExpireSession),
];

/// What `--exec` was given.
pub struct ExecArgs<'a> {
    pub cmd: &'a str,
    pub dir: Option<&'a Path>,
    pub members: usize,
    pub nemesis: &'a str,
    pub seed: u64,
    pub out: &'a Path,
    pub tick_ms: u64,
}

/// The faults `--nemesis` names (`none`: no faults; `mix` or `all`: every one).
fn parse_faults(list: &str) -> Result<Vec<ApiFault>, String> {
    let mut faults = Vec::new();
    for name in list.split(',').map(str::trim) {
        match name {
            "none" => {}
            "mix" | "all" => faults.extend(NAMES.iter().map(|(_, f)| *f)),
            _ => match NAMES.iter().find(|(n, _)| *n == name) {
                Some((_, f)) => faults.push(*f),
                None => {
                    let known: Vec<&str> = NAMES.iter().map(|(n, _)| *n).collect();
                    return Err(format!(
                        "--exec cannot inject {name:?}; it takes none, mix, {}",
                        known.join(", ")
                    ));
                }
            },
        }
    }
    Ok(faults)
}

/// Runs CMD under the nemesis; returns CMD's exit code.
pub fn run(args: &ExecArgs) -> i32 {
    let faults = match parse_faults(args.nemesis) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("zkd-nemesis: {e}");
            return 2;
        }
    };
    let ensemble = match args.dir {
        Some(dir) => match FaultEnsemble::attach(dir) {
            Ok(e) => e,
            Err(e) => {
                eprintln!("zkd-nemesis: {e}");
                return 2;
            }
        },
        None => FaultEnsemble::start_with(args.members, free_base_port(), args.tick_ms),
    };
    let started = Instant::now();
    let log = Log::new(started);
    eprintln!(
        "zkd-nemesis: running {:?} on {} with seed {}",
        args.cmd,
        ensemble.connect_string(),
        args.seed
    );
    let done = AtomicBool::new(false);
    let code = std::thread::scope(|s| {
        s.spawn(|| watch_leader(&ensemble, &log, &done));
        if let Some(path) = ensemble.log_path() {
            let (log, done) = (&log, &done);
            s.spawn(move || watch_sessions(&path, log, done));
        }
        s.spawn(|| nemesis(&ensemble, &faults, args.seed, &log, &done));
        let code = run_command(args.cmd, ensemble.connect_string(), &log);
        done.store(true, Ordering::Relaxed);
        code
    });
    match ensemble.heal() {
        Ok(answer) => log.event("ensemble", answer["done"].as_str().unwrap_or("healed")),
        Err(why) if why.contains("nothing to heal") => {}
        Err(why) => log.event("ensemble", &format!("final heal failed: {why}")),
    }
    write_report(args, &ensemble, &log, code, started.elapsed());
    code
}

/// The run's history as it is recorded from several threads.
struct Log {
    started: Instant,
    history: Mutex<History>,
    output: Mutex<Vec<(u64, String)>>,
}

impl Log {
    fn new(started: Instant) -> Log {
        Log {
            started,
            history: Mutex::new(History::default()),
            output: Mutex::new(Vec::new()),
        }
    }

    fn now_ns(&self) -> u64 {
        self.started.elapsed().as_nanos() as u64
    }

    fn event(&self, source: &str, text: &str) {
        let at_ns = self.now_ns();
        let mut h = self.history.lock().unwrap_or_else(|e| e.into_inner());
        h.events.push(Event {
            at_ns,
            source: source.into(),
            text: text.into(),
        });
    }

    fn fault_started(&self, kind: &str, members: Vec<usize>) -> usize {
        let start_ns = self.now_ns();
        let mut h = self.history.lock().unwrap_or_else(|e| e.into_inner());
        h.faults.push(FaultWindow {
            kind: kind.into(),
            members,
            start_ns,
            end_ns: None,
        });
        h.faults.len() - 1
    }

    fn fault_ended(&self, index: usize) {
        let end = self.now_ns();
        let mut h = self.history.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(f) = h.faults.get_mut(index) {
            f.end_ns = Some(end);
        }
    }
}

/// Runs CMD, echoing its output and recording each line; its exit code.
fn run_command(cmd: &str, connect: &str, log: &Log) -> i32 {
    let mut child = match Command::new("sh")
        .args(["-c", cmd])
        .env("ZK_CONNECT", connect)
        .env("ZOOKEEPER_CONNECT", connect)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!("zkd-nemesis: cannot run {cmd:?}: {e}");
            return 127;
        }
    };
    let (out, err) = (child.stdout.take(), child.stderr.take());
    std::thread::scope(|s| {
        if let Some(out) = out {
            s.spawn(|| relay(out, log, false));
        }
        if let Some(err) = err {
            s.spawn(|| relay(err, log, true));
        }
    });
    match child.wait() {
        Ok(status) => status.code().unwrap_or(128),
        Err(_) => 128,
    }
}

/// Echoes each line of `stream` and records it.
fn relay(stream: impl std::io::Read, log: &Log, stderr: bool) {
    for line in BufReader::new(stream).lines().map_while(Result::ok) {
        if stderr {
            let _ = writeln!(std::io::stderr(), "{line}");
        } else {
            let _ = writeln!(std::io::stdout(), "{line}");
        }
        log.event("cmd", &line);
        let at = log.now_ns();
        log.output
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((at, line));
    }
}

/// Records each change of leader, polling the fault API.
fn watch_leader(ensemble: &FaultEnsemble, log: &Log, done: &AtomicBool) {
    let mut last: Option<Option<u64>> = None;
    while !done.load(Ordering::Relaxed) {
        let (code, status) = ensemble.http("GET", "/status", "");
        if code == 200 {
            let leader = status["leader"].as_u64();
            if last != Some(leader) {
                let text = leader.map_or("no leader".into(), |l| format!("leader is node{l}"));
                log.event("ensemble", &text);
                last = Some(leader);
            }
        }
        sleep_unless(Duration::from_millis(250), done);
    }
}

/// Records each session a member expires, from the ensemble's log (an
/// ensemble this run started; an attached one logs elsewhere).
fn watch_sessions(path: &Path, log: &Log, done: &AtomicBool) {
    let Ok(mut file) = std::fs::File::open(path) else {
        return;
    };
    let mut pending = Vec::new();
    loop {
        let more = sleep_unless(Duration::from_millis(100), done);
        let _ = std::io::Read::read_to_end(&mut file, &mut pending);
        while let Some(end) = pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = pending.drain(..=end).collect();
            if let Some(text) = session_expiry(&String::from_utf8_lossy(&line)) {
                log.event("sessions", &text);
            }
        }
        if !more {
            return;
        }
    }
}

/// `node2 expired session 0x...` for a member's `session expired` log line.
fn session_expiry(line: &str) -> Option<String> {
    if !line.contains("session expired") {
        return None;
    }
    let (member, _) = line.strip_prefix('[')?.split_once(']')?;
    let session = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("session="))?;
    Some(format!("{member} expired session {session}"))
}

/// Sleeps `d`, or less once `done` is set; false if it was.
fn sleep_unless(d: Duration, done: &AtomicBool) -> bool {
    let end = Instant::now() + d;
    while Instant::now() < end {
        if done.load(Ordering::Relaxed) {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20).min(end - Instant::now()));
    }
    !done.load(Ordering::Relaxed)
}

/// Quiet 1-3 s, a fault held 2-6 s, heal; until `done`.
fn nemesis(ensemble: &FaultEnsemble, faults: &[ApiFault], seed: u64, log: &Log, done: &AtomicBool) {
    let mut rng = StdRng::seed_from_u64(seed);
    if faults.is_empty() {
        return;
    }
    loop {
        if !sleep_unless(Duration::from_millis(rng.gen_range(1000..3000)), done) {
            return;
        }
        let fault = *faults.choose(&mut rng).expect("faults");
        let hold = Duration::from_millis(rng.gen_range(2000..6000));
        let (kind, answer) = inject(ensemble, fault, &mut rng);
        let window = match answer {
            Ok(done_text) => {
                log.event("ensemble", &done_text);
                Some(log.fault_started(&kind, members_in(&done_text, ensemble.size())))
            }
            Err(why) => {
                log.event("ensemble", &format!("{kind}: not injected: {why}"));
                None
            }
        };
        let held = sleep_unless(hold, done);
        match ensemble.heal() {
            Ok(_) => log.event("ensemble", "healed"),
            Err(why) if why.contains("nothing to heal") => {}
            Err(why) => log.event("ensemble", &format!("heal failed: {why}")),
        }
        if let Some(w) = window {
            log.fault_ended(w);
        }
        if !held {
            return;
        }
    }
}

/// Injects one fault; its kind and the API's `done` line, or why not.
fn inject(
    ensemble: &FaultEnsemble,
    fault: ApiFault,
    rng: &mut StdRng,
) -> (String, Result<String, String>) {
    let n = ensemble.size();
    let any = rng.gen_range(1..=n);
    let others = |m: usize| (1..=n).filter(|i| *i != m).collect::<Vec<_>>();
    let each = |f: &dyn Fn(usize) -> Result<serde_json::Value, String>| {
        let mut last = Err("no member".to_owned());
        for m in 1..=n {
            last = f(m);
        }
        last
    };
    let (kind, answer) = match fault {
        ApiFault::KillRandom => ("kill-random", ensemble.kill(Target::Member(any))),
        ApiFault::KillLeader => ("kill-leader", ensemble.kill(Target::Leader)),
        ApiFault::KillAll => ("kill-all", each(&|m| ensemble.kill(Target::Member(m)))),
        ApiFault::PauseRandom => ("pause-random", ensemble.pause(Target::Member(any))),
        ApiFault::PauseLeader => ("pause-leader", ensemble.pause(Target::Leader)),
        ApiFault::PauseAll => ("pause-all", each(&|m| ensemble.pause(Target::Member(m)))),
        ApiFault::PartitionHalves => {
            let mut all: Vec<usize> = (1..=n).collect();
            all.shuffle(rng);
            let (a, b) = all.split_at(n / 2);
            ("partition-halves", ensemble.partition(a, b))
        }
        ApiFault::PartitionLeader => ("partition-leader", ensemble.isolate(Target::Leader)),
        ApiFault::PartitionOneWay => {
            let (m, rest) = (vec![any], others(any));
            let answer = match rng.gen_bool(0.5) {
                true => ensemble.partition_one_way(&m, &rest),
                false => ensemble.partition_one_way(&rest, &m),
            };
            ("partition-one-way", answer)
        }
        ApiFault::PartitionClient => ("partition-client", ensemble.cut_clients(any)),
        ApiFault::SlowDisk => {
            let ms = rng.gen_range(100..1000);
            ("slow-disk", ensemble.slow_disk(any, ms))
        }
        ApiFault::DiskError => ("disk-error", ensemble.disk_error(any)),
        ApiFault::ExpireSession => {
            let sessions = live_sessions(ensemble);
            match sessions.choose(rng) {
                Some(id) => (
                    "expire-session",
                    ensemble.fault("expire-session", &[id.as_str()]),
                ),
                None => ("expire-session", Err("no live session".into())),
            }
        }
    };
    let answer = answer.map(|a| a["done"].as_str().unwrap_or("").to_owned());
    (kind.to_owned(), answer)
}

/// Every session id the members list in `cons` (`sid=0x...`).
fn live_sessions(ensemble: &FaultEnsemble) -> Vec<String> {
    let mut ids = Vec::new();
    for i in 1..=ensemble.size() {
        let addr = ensemble.address(i);
        let Some((host, port)) = addr.rsplit_once(':') else {
            continue;
        };
        let Ok(cons) = four_letter_word_at(host, port.parse().unwrap_or(0), "cons") else {
            continue;
        };
        for part in cons.split(|c: char| c == ',' || c == '(' || c == ')' || c.is_whitespace()) {
            if let Some(id) = part.strip_prefix("sid=") {
                ids.push(id.to_owned());
            }
        }
    }
    ids.sort();
    ids.dedup();
    ids
}

/// The members (0-based) a `done` line names as `nodeN`.
fn members_in(done: &str, n: usize) -> Vec<usize> {
    let mut members: Vec<usize> = done
        .match_indices("node")
        .filter_map(|(at, _)| {
            let digits: String = done[at + 4..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            digits.parse::<usize>().ok()
        })
        .filter(|m| (1..=n).contains(m))
        .map(|m| m - 1)
        .collect();
    members.sort_unstable();
    members.dedup();
    members
}

/// The report: `timeline.html`, `history.jsonl`, `verdict.*` and CMD's
/// output with times (`output.txt`).
fn write_report(args: &ExecArgs, ensemble: &FaultEnsemble, log: &Log, code: i32, took: Duration) {
    let history = log
        .history
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    let verdict = match code {
        0 => Verdict::Valid,
        _ => Verdict::Invalid {
            anomalies: vec![Anomaly::new(
                "command-failed",
                format!("{:?} exited with {code}", args.cmd),
                Vec::new(),
            )],
        },
    };
    let result = WorkloadResult {
        workload: format!("exec {}", args.cmd),
        nemesis: args.nemesis.to_owned(),
        verdict,
    };
    let mut command = format!(
        "zkd-nemesis --exec {:?} --nemesis {} --seed {}",
        args.cmd, args.nemesis, args.seed
    );
    match args.dir {
        Some(dir) => command.push_str(&format!(" --dir {}", dir.display())),
        None => command.push_str(&format!(
            " --members {} --tick-ms {}",
            args.members, args.tick_ms
        )),
    }
    let info = RunInfo {
        seed: args.seed,
        server: "zkd".into(),
        members: ensemble.size(),
        duration_ns: took.as_nanos() as u64,
        command,
    };
    let out: PathBuf = args.out.to_owned();
    if let Err(e) = report::write_report(&out, &info, &history, &[result]) {
        eprintln!(
            "zkd-nemesis: cannot write the report in {}: {e}",
            out.display()
        );
        return;
    }
    let output = log.output.lock().unwrap_or_else(|e| e.into_inner());
    let text: String = output
        .iter()
        .map(|(at, line)| format!("{:>10.3} {line}\n", *at as f64 / 1e9))
        .collect();
    let _ = std::fs::write(out.join("output.txt"), text);
    let faults = history.faults.len();
    eprintln!(
        "zkd-nemesis: {:?} exited with {code} after {:.1} s and {faults} fault(s); report in {}",
        args.cmd,
        took.as_secs_f64(),
        out.display()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fault_names_parse_and_unknown_ones_are_refused() {
        assert_eq!(parse_faults("none"), Ok(Vec::new()));
        assert_eq!(
            parse_faults("kill-leader,expire-session"),
            Ok(vec![ApiFault::KillLeader, ApiFault::ExpireSession])
        );
        assert_eq!(parse_faults("mix").unwrap().len(), NAMES.len());
        let refused = parse_faults("power-loss-all").unwrap_err();
        assert!(
            refused.contains("cannot inject \"power-loss-all\""),
            "{refused}"
        );
    }

    #[test]
    fn session_expiries_are_read_from_member_logs() {
        let line = "[node2] 2026-11-26T08:52:04.669014Z  INFO zkd_server::core::node: \
                    session expired session=0x1000a2b3c4d0000";
        assert_eq!(
            session_expiry(line).as_deref(),
            Some("node2 expired session 0x1000a2b3c4d0000")
        );
        assert_eq!(session_expiry("[node1] ... leader elected"), None);
    }

    #[test]
    fn members_are_read_from_done_lines() {
        assert_eq!(
            members_in("partition node3 / node1 node2", 3),
            vec![0, 1, 2]
        );
        assert_eq!(members_in("node2 killed (SIGKILL)", 3), vec![1]);
        assert_eq!(
            members_in("session 0x1 expired by the leader, node1", 3),
            vec![0]
        );
    }
}
