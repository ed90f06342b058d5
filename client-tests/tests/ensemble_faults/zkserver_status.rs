//! (c) `zkServer.sh status`.

use super::*;

const ZKSERVER_SH: &str = "/usr/share/zookeeper/bin/zkServer.sh";

/// Runs `zkServer.sh status <cfg>` (bounded by 60 s): exit status and output.
fn zkserver_status(cfg: &std::path::Path) -> (bool, String) {
    let log_dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(ZKSERVER_SH)
        .arg("status")
        .arg(cfg)
        .env("ZOO_LOG_DIR", log_dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run zkServer.sh");
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("zkServer.sh status {} took over 60 s", cfg.display());
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    (status.success(), out)
}

/// Debian's `zkServer.sh status`, given each member's zoo.cfg, finds its
/// client port there, asks `srvr` through ZooKeeper's own Java client and
/// prints `Mode: leader` or `Mode: follower`; for a member that is down it
/// says so and fails.
#[test]
fn zkserver_sh_status_reports_each_members_mode() {
    require_tool(ZKSERVER_SH);
    require_tool(zkd_client_tests::oracle::ZOOKEEPER_JAR);
    let mut ensemble = Ensemble::start(3);
    let leader = ensemble.leader().expect("a leader");
    for (i, member) in ensemble.members.iter().enumerate() {
        let (ok, out) = zkserver_status(member.config_path());
        let want = if i == leader {
            "Mode: leader"
        } else {
            "Mode: follower"
        };
        assert!(ok, "member {}: zkServer.sh status failed:\n{out}", i + 1);
        assert!(
            out.lines().any(|l| l.trim() == want),
            "member {}: want {want:?}:\n{out}",
            i + 1
        );
        assert!(
            out.contains(&format!("Client port found: {}.", member.port)),
            "{out}"
        );
    }
    let follower = (0..3).find(|i| *i != leader).unwrap();
    ensemble.members[follower].kill9();
    let (ok, out) = zkserver_status(ensemble.members[follower].config_path());
    assert!(
        !ok && out.contains("Error contacting service"),
        "a stopped member:\n{out}"
    );
}
