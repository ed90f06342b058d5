//! Apache Curator (Debian's libcurator-recipes-java, with the stock Java
//! client) under `zkd ensemble`'s faults: `curator/LeaderLatchUnderFaults.java`,
//! the runnable example of the README, drives the faults through the HTTP
//! fault API and checks that a LeaderLatch's leadership moves when the
//! latch leader's ZooKeeper member is isolated (the leader talks to that
//! member only, so its session expires), and moves back when the new
//! leader's session is expired.

use std::path::Path;
use std::process::Command;
use zkd_client_tests::fault_ensemble::FaultEnsemble;
use zkd_client_tests::oracle::require_tool;

const JARS: [&str; 7] = [
    "/usr/share/java/curator-recipes.jar",
    "/usr/share/java/curator-framework.jar",
    "/usr/share/java/curator-client.jar",
    "/usr/share/java/guava.jar",
    "/usr/share/java/zookeeper.jar",
    "/usr/share/java/zookeeper-jute.jar",
    "/usr/share/java/slf4j-api.jar",
];

#[test]
fn a_curator_leader_latch_moves_when_its_member_is_isolated_and_its_session_expires() {
    for jar in JARS {
        require_tool(jar);
    }
    require_tool("/usr/bin/javac");
    let work = tempfile::tempdir().unwrap();
    let source =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/curator/LeaderLatchUnderFaults.java");
    let classpath = JARS.join(":");
    let javac = Command::new("javac")
        .args(["-implicit:none", "-cp", &classpath, "-d"])
        .arg(work.path())
        .arg(source)
        .output()
        .expect("javac");
    assert!(
        javac.status.success(),
        "javac: {}",
        String::from_utf8_lossy(&javac.stderr)
    );

    let ensemble = FaultEnsemble::start(3);
    let mut child = Command::new("java")
        .arg("-cp")
        .arg(format!("{}:{classpath}", work.path().display()))
        .arg("LeaderLatchUnderFaults")
        .arg(ensemble.connect_string())
        .arg(ensemble.api())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("java");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(180);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!(
                "LeaderLatchUnderFaults timed out; ensemble log:\n{}",
                ensemble.log()
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let out = child.wait_with_output().unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && text.contains("curator fault checks passed"),
        "{text}"
    );
}
