//! `zkd serve` with a bad zoo.cfg stops with an error naming the key; an
//! unknown key is only logged.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn write_cfg(dir: &std::path::Path, extra: &str) -> std::path::PathBuf {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let cfg = dir.join("zoo.cfg");
    std::fs::write(
        &cfg,
        format!(
            "dataDir={}\nclientPort={port}\nclientPortAddress=127.0.0.1\n{extra}",
            dir.join("data").display()
        ),
    )
    .unwrap();
    cfg
}

/// `zkd serve --config cfg` with stderr captured.
fn spawn_zkd(cfg: &std::path::Path) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_zkd"))
        .args(["serve", "--config"])
        .arg(cfg)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn invalid_value_is_an_error_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = write_cfg(dir.path(), "tickTime=often\n");
    let out = Command::new(env!("CARGO_BIN_EXE_zkd"))
        .args(["serve", "--config"])
        .arg(&cfg)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("tickTime") && stderr.contains("often"),
        "{stderr}"
    );
}

#[test]
fn unknown_keys_are_logged_not_fatal() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = write_cfg(dir.path(), "someFutureKey=1\n");
    let mut child = spawn_zkd(&cfg);
    let mut stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let deadline = Instant::now() + Duration::from_secs(3);
    while Instant::now() < deadline {
        assert!(
            child.try_wait().unwrap().is_none(),
            "zkd exited on an unknown key"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let text = reader.join().unwrap();
    assert!(
        text.contains("unknown configuration key") && text.contains("someFutureKey"),
        "{text}"
    );
}

/// Waits (bounded) for `child` to exit; its stderr and exit code.
fn wait_exit(mut child: std::process::Child) -> (Option<i32>, String) {
    let deadline = Instant::now() + Duration::from_secs(5);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if Instant::now() > deadline {
            child.kill().unwrap();
            child.wait().unwrap();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    (status.and_then(|s| s.code()), stderr)
}

const THREE_MEMBERS: &str =
    "server.1=127.0.0.1:2888:3888\nserver.2=127.0.0.1:2889:3889\nserver.3=127.0.0.1:2890:3890\n";

#[test]
fn an_ensemble_member_without_myid_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = write_cfg(dir.path(), THREE_MEMBERS);
    let (code, stderr) = wait_exit(spawn_zkd(&cfg));
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("myid"), "{stderr}");
}

#[test]
fn a_myid_without_its_server_line_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("data")).unwrap();
    std::fs::write(dir.path().join("data").join("myid"), "7").unwrap();
    let cfg = write_cfg(dir.path(), THREE_MEMBERS);
    let (code, stderr) = wait_exit(spawn_zkd(&cfg));
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("server.7"), "{stderr}");
}
