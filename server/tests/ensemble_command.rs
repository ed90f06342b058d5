//! `zkd ensemble`: the member files it writes, that a rerun keeps data, what it
//! refuses, and that SIGTERM leaves no member behind. None of this needs the
//! members to form an ensemble (or even to start): a member that exits is only
//! reported.
//!
//! "No member left behind" is checked twice: the pid in each `DIR/node{i}/zkd.pid`
//! (written by the launcher when it starts the member) must be gone, and no process
//! may have DIR on its command line (members run `zkd serve --config DIR/...`).
//!
//! Each test uses its own base port below the ephemeral range, so the tests can
//! run in parallel with each other and with tests that bind port 0.

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A running launcher with its connect-string line and its stderr (collected).
struct Launcher {
    child: Child,
    connect: String,
    stderr: JoinHandle<String>,
}

fn zkd(dir: &Path, nodes: usize, base_port: u16) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_zkd"));
    cmd.arg("ensemble")
        .arg("--nodes")
        .arg(nodes.to_string())
        .arg("--dir")
        .arg(dir)
        .arg("--base-port")
        .arg(base_port.to_string())
        .env("NO_COLOR", "1");
    cmd
}

/// Starts the launcher and waits (at most 10 s) for its connect-string line.
fn launch(dir: &Path, nodes: usize, base_port: u16) -> Launcher {
    let mut child = zkd(dir, nodes, base_port)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start zkd ensemble");
    let stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let stderr = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let Ok(line) = rx.recv_timeout(Duration::from_secs(10)) else {
        let _ = child.kill();
        let _ = child.wait();
        panic!(
            "no connect string within 10 s; stderr:\n{}",
            stderr.join().unwrap()
        );
    };
    Launcher {
        child,
        connect: line.trim_end().to_owned(),
        stderr,
    }
}

/// SIGTERM, then the launcher must exit within 15 s. Returns its status and stderr.
fn terminate(mut l: Launcher) -> (ExitStatus, String) {
    // The launcher may already have exited (members that cannot start today make it
    // stop on its own); it is not reaped yet, so the pid is still its.
    kill(Pid::from_raw(l.child.id() as i32), Signal::SIGTERM).unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    let status = loop {
        if let Some(status) = l.child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = l.child.kill();
            let _ = l.child.wait();
            panic!(
                "zkd ensemble still running 15 s after SIGTERM; stderr:\n{}",
                l.stderr.join().unwrap()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    (status, l.stderr.join().unwrap())
}

/// Pids of live processes whose command line mentions `needle`.
fn processes_mentioning(needle: &str) -> Vec<u32> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        if String::from_utf8_lossy(&cmdline).contains(needle) && !is_zombie(pid) {
            pids.push(pid);
        }
    }
    pids
}

fn is_zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            s.rsplit_once(") ")
                .is_some_and(|(_, rest)| rest.starts_with('Z'))
        })
        .unwrap_or(true)
}

/// Asserts that no member outlived the launcher.
fn assert_no_member_left(dir: &Path, pids: &[u32]) {
    let needle = dir.to_str().unwrap();
    // Give a just-signalled process a moment to disappear from /proc.
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let left = processes_mentioning(needle);
        let pid_alive = pids.iter().any(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(needle))
                && !is_zombie(*pid)
        });
        if left.is_empty() && !pid_alive {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "members still alive after the launcher exited: {left:?} (pid files: {pids:?})"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn pid_files(dir: &Path, nodes: usize) -> Vec<u32> {
    (1..=nodes)
        .map(|i| {
            let path = dir.join(format!("node{i}")).join("zkd.pid");
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            text.trim().parse().unwrap()
        })
        .collect()
}

fn ensemble_dir(tmp: &tempfile::TempDir) -> PathBuf {
    // Canonical, as the launcher writes it in dataDir.
    std::fs::canonicalize(tmp.path()).unwrap().join("ens")
}

#[test]
fn writes_member_files_prints_the_connect_string_and_stops_on_sigterm() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = ensemble_dir(&tmp);
    let launcher = launch(&dir, 3, 22181);
    assert_eq!(
        launcher.connect,
        "127.0.0.1:22181,127.0.0.1:22182,127.0.0.1:22183"
    );
    let pids = pid_files(&dir, 3);
    for i in 1..=3u16 {
        let node = dir.join(format!("node{i}"));
        let data = node.join("data");
        assert_eq!(
            std::fs::read_to_string(data.join("myid")).unwrap().trim(),
            i.to_string()
        );
        let cfg = std::fs::read_to_string(node.join("zoo.cfg")).unwrap();
        let lines: Vec<&str> = cfg.lines().collect();
        for want in [
            "tickTime=2000".to_owned(),
            "initLimit=10".to_owned(),
            "syncLimit=5".to_owned(),
            format!("dataDir={}", data.display()),
            format!("clientPort={}", 22180 + i),
            "clientPortAddress=127.0.0.1".to_owned(),
            "4lw.commands.whitelist=*".to_owned(),
            "server.1=127.0.0.1:22888:23888".to_owned(),
            "server.2=127.0.0.1:22889:23889".to_owned(),
            "server.3=127.0.0.1:22890:23890".to_owned(),
        ] {
            assert!(lines.contains(&want.as_str()), "{want} missing in\n{cfg}");
        }
        assert_eq!(lines.iter().filter(|l| l.starts_with("server.")).count(), 3);
        // What `zkd serve` will read: myid from dataDir, three participants.
        let parsed = zkd_server::config::Config::load(&node.join("zoo.cfg")).unwrap();
        assert_eq!(parsed.my_id, Some(u64::from(i)));
        assert_eq!(parsed.client_port, Some(22180 + i));
        assert!(parsed.is_quorum());
    }
    let (status, stderr) = terminate(launcher);
    assert!(
        status.code().is_some(),
        "the launcher died of a signal: {status:?}\n{stderr}"
    );
    assert!(
        stderr.contains("zkCli.sh -server 127.0.0.1:22181,127.0.0.1:22182,127.0.0.1:22183"),
        "{stderr}"
    );
    assert_no_member_left(&dir, &pids);
}

#[test]
fn a_rerun_keeps_the_data() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = ensemble_dir(&tmp);
    let (_, stderr) = terminate(launch(&dir, 3, 22281));
    let marker = dir.join("node1").join("data").join("marker");
    std::fs::write(&marker, "keep me").unwrap();
    let cfg_before = std::fs::read_to_string(dir.join("node2").join("zoo.cfg")).unwrap();

    let launcher = launch(&dir, 3, 22281);
    assert_eq!(
        launcher.connect,
        "127.0.0.1:22281,127.0.0.1:22282,127.0.0.1:22283"
    );
    let pids = pid_files(&dir, 3);
    let (status, stderr2) = terminate(launcher);
    assert!(status.code().is_some(), "{status:?}\n{stderr}\n{stderr2}");
    assert_eq!(std::fs::read_to_string(&marker).unwrap(), "keep me");
    assert_eq!(
        std::fs::read_to_string(dir.join("node2").join("zoo.cfg")).unwrap(),
        cfg_before
    );
    for i in 1..=3 {
        let myid = dir.join(format!("node{i}")).join("data").join("myid");
        assert_eq!(std::fs::read_to_string(myid).unwrap().trim(), i.to_string());
    }
    assert_no_member_left(&dir, &pids);
}

#[test]
fn even_counts_and_a_mismatching_rerun_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = ensemble_dir(&tmp);
    let out = zkd(&dir, 4, 22381).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(out.stdout.is_empty());
    assert!(
        !dir.exists(),
        "a refused --nodes 4 created {}",
        dir.display()
    );

    let (_, _) = terminate(launch(&dir, 3, 22381));
    let out = zkd(&dir, 5, 22381).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("3 members") && stderr.contains("--nodes 3"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty());
    assert!(!dir.join("node4").exists());
    assert!(!dir.join("node5").exists());
}

#[test]
fn the_sample_ensemble_configs_parse_for_every_member() {
    let conf = Path::new(env!("CARGO_MANIFEST_DIR")).join("../conf");
    for n in [3u64, 5] {
        let text = std::fs::read_to_string(conf.join(format!("zoo-{n}.cfg"))).unwrap();
        for id in 1..=n {
            let mut props = zkd_server::config::parse_properties(&text);
            props.insert("myid".into(), id.to_string());
            props.insert("clientPortAddress".into(), format!("127.0.0.1{id}"));
            let c = zkd_server::config::Config::from_properties(&props)
                .unwrap_or_else(|e| panic!("zoo-{n}.cfg as member {id}: {e}"));
            assert_eq!(c.servers.len() as u64, n);
            assert_eq!(c.servers[&id].host, format!("127.0.0.1{id}"));
            assert!(c.is_quorum());
        }
    }
}
