//! A disk that fails under a running zkd (fsync and fdatasync return EIO,
//! injected with libfiu's `fiu-run`/`fiu-ctrl`): the node stops with one
//! fatal log line naming the file and the error and a non-zero exit, never
//! panics, and acknowledges nothing after the failure. A restart serves what
//! was acknowledged before it.

use std::process::Command;
use std::time::Duration;
use zkd_client_tests::oracle::require_tool;
use zkd_client_tests::{connect, persistent, within, ServerOptions, ZkdProcess};

const FIU_RUN: &str = "/usr/bin/fiu-run";
const FIU_CTRL: &str = "/usr/bin/fiu-ctrl";

fn fiu_ctrl(pid: u32, command: &str) {
    let status = Command::new(FIU_CTRL)
        .args(["-c", command, &pid.to_string()])
        .status()
        .expect("run fiu-ctrl");
    assert!(status.success(), "fiu-ctrl {command}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_fsync_error_stops_the_node_cleanly_and_acknowledges_nothing_after() {
    require_tool(FIU_RUN);
    require_tool(FIU_CTRL);
    let mut server = ZkdProcess::start_with(ServerOptions::default().wrapped_in(&[FIU_RUN, "-x"]));
    let client = connect(&server.addr(), Duration::from_secs(10)).await;
    for i in 0..20 {
        let path = format!("/before-{i}");
        within(client.create(&path, b"kept", &persistent()))
            .await
            .unwrap();
    }
    let pid = server.pid().expect("running");
    for call in ["fsync", "fdatasync"] {
        fiu_ctrl(pid, &format!("enable name=posix/io/sync/{call},failinfo=5"));
    }
    let mut acknowledged_after = Vec::new();
    for i in 0..20 {
        let path = format!("/after-{i}");
        match tokio::time::timeout(
            Duration::from_secs(2),
            client.create(&path, b"x", &persistent()),
        )
        .await
        {
            Ok(Ok(_)) => acknowledged_after.push(path),
            // The node is gone: nothing later can be acknowledged either.
            _ => break,
        }
    }
    assert!(
        acknowledged_after.is_empty(),
        "acknowledged after the disk failed: {acknowledged_after:?}"
    );
    let status = tokio::task::block_in_place(|| server.wait_for_exit(Duration::from_secs(10)))
        .expect("zkd keeps running on a failed disk");
    let log = server.log();
    assert!(!status.success(), "exit status {status}");
    assert!(!log.contains("panicked"), "zkd panicked:\n{log}");
    let fatal: Vec<&str> = log.lines().filter(|l| l.contains("fatal")).collect();
    assert_eq!(fatal.len(), 1, "one fatal line:\n{log}");
    assert!(
        fatal[0].contains("Input/output error") && fatal[0].contains("zkd/"),
        "the fatal line names the error and the file: {}",
        fatal[0]
    );
    drop(client);

    // fiu-run without enabled failpoints is a healthy disk again.
    tokio::task::block_in_place(|| server.restart());
    let client = connect(&server.addr(), Duration::from_secs(10)).await;
    for i in 0..20 {
        let path = format!("/before-{i}");
        let (data, _) = within(client.get_data(&path)).await.unwrap();
        assert_eq!(data, b"kept", "{path}");
    }
}
