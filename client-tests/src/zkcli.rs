//! Debian's zkCli (Apache ZooKeeper 3.8's shell) run on a script, its
//! output cut to what a comparison of two servers needs.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

/// Debian's zkCli.
pub const ZKCLI: &str = "/usr/share/zookeeper/bin/zkCli.sh";

/// zkCli fed `script` on stdin against `addr`: its lines, less logging,
/// the prompt and what names the server's port. Killed after two minutes.
pub fn zkcli(addr: &str, script: &str) -> Vec<String> {
    let mut child = Command::new(ZKCLI)
        .args(["-server", addr])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("zkCli");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(script.as_bytes()).expect("script");
    drop(stdin);
    let pid = child.id();
    let watchdog = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(120));
        // Only our own zkCli, if it is still there.
        let _ = Command::new("kill").arg(pid.to_string()).status();
    });
    let out = child.wait_with_output().expect("zkCli output");
    drop(watchdog);
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    let prompt = format!("[zk: {addr}(CONNECTED) ");
    text.lines()
        .map(|l| match l.find(&prompt) {
            // "[zk: host:port(CONNECTED) 3] " then the command's first output line.
            Some(at) => l[at..].split_once("] ").map_or("", |(_, rest)| rest),
            None => l,
        })
        .filter(|l| {
            !l.trim().is_empty() && !l.starts_with("WATCHER") && !l.starts_with("WatchedEvent")
        })
        .filter(|l| {
            !l.contains(" INFO ")
                && !l.contains(" WARN ")
                && !l.contains(" ERROR ")
                && !l.contains("SLF4J")
        })
        .filter(|l| {
            !l.starts_with("Connecting to")
                && !l.starts_with("Welcome to ZooKeeper")
                && !l.starts_with("JLine")
        })
        .map(str::to_owned)
        .collect()
}
