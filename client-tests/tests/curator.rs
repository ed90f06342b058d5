//! Apache Curator (Debian's libcurator-recipes-java, with the stock Java
//! client) under `zkd ensemble`'s faults: `curator/LeaderLatchUnderFaults.java`,
//! the runnable example of the README, drives the faults through the HTTP
//! fault API and checks that a LeaderLatch's leadership moves when the
//! latch leader's ZooKeeper member is isolated (the leader talks to that
//! member only, so its session expires), and moves back when the new
//! leader's session is expired. And Curator's EnsembleTracker
//! (`curator/EnsembleTrackerFollows.java`), side by side with ZooKeeper 3.8:
//! a member removed by reconfig leaves the client's connection string,
//! and the client keeps working once that member is gone.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;
use zkd_client_tests::fault_ensemble::FaultEnsemble;
use zkd_client_tests::oracle::require_tool;
use zkd_client_tests::side_by_side::{start_zkd, start_zookeeper, Member, MemberPorts};

const JARS: [&str; 7] = [
    "/usr/share/java/curator-recipes.jar",
    "/usr/share/java/curator-framework.jar",
    "/usr/share/java/curator-client.jar",
    "/usr/share/java/guava.jar",
    "/usr/share/java/zookeeper.jar",
    "/usr/share/java/zookeeper-jute.jar",
    "/usr/share/java/slf4j-api.jar",
];

/// Compiles `tests/curator/<name>.java` into `work`; the classpath to run it.
fn compile(work: &Path, name: &str) -> String {
    for jar in JARS {
        require_tool(jar);
    }
    require_tool("/usr/bin/javac");
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/curator/{name}.java"));
    let classpath = JARS.join(":");
    let javac = Command::new("javac")
        .args(["-implicit:none", "-cp", &classpath, "-d"])
        .arg(work)
        .arg(source)
        .output()
        .expect("javac");
    assert!(
        javac.status.success(),
        "javac: {}",
        String::from_utf8_lossy(&javac.stderr)
    );
    format!("{}:{classpath}", work.display())
}

#[test]
fn a_curator_leader_latch_moves_when_its_member_is_isolated_and_its_session_expires() {
    let work = tempfile::tempdir().unwrap();
    let classpath = compile(work.path(), "LeaderLatchUnderFaults");

    let ensemble = FaultEnsemble::start(3);
    let mut child = Command::new("java")
        .arg("-cp")
        .arg(&classpath)
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

/// How long the members may take to elect and sync (ZooKeeper's take seconds).
const SETTLE: Duration = Duration::from_secs(40);

/// The zoo.cfg of the tracker's runs: three members whose lines carry their
/// client ports, reconfig enabled, and skipACL (no super user needed).
fn tracker_cfg(ports: &MemberPorts, data: &Path) -> String {
    let mut text = format!(
        "tickTime=500\ninitLimit=10\nsyncLimit=4\ndataDir={}\nreconfigEnabled=true\n\
         skipACL=yes\n4lw.commands.whitelist=*\nadmin.enableServer=false\n",
        data.display()
    );
    for id in 1..=3 {
        text.push_str(&ports.server_line(id));
    }
    text
}

/// EnsembleTrackerFollows against the members on `ports`, connected to a
/// follower B, which it removes and the test then kills; its lines, with
/// the ports named by role (L the leader, A the other follower).
fn tracker_run(
    ports: &MemberPorts,
    members: &mut [Box<dyn Member>],
    classpath: &str,
) -> Vec<String> {
    let leader = ports.wait_serving(&[1, 2, 3], SETTLE);
    let mut followers = (1..=3).filter(|id| *id != leader);
    let (a, b) = (followers.next().unwrap(), followers.next().unwrap());
    let mut child = Command::new("timeout")
        .args(["120", "java", "-cp", classpath, "EnsembleTrackerFollows"])
        .arg(ports.clients(&[b]))
        .arg(b.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("java");
    let (tx, lines) = mpsc::channel();
    let stdout = child.stdout.take().expect("stdout");
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut seen = Vec::new();
    let next = |seen: &mut Vec<String>| {
        let line = lines
            .recv_timeout(Duration::from_secs(90))
            .unwrap_or_else(|_| panic!("EnsembleTrackerFollows stopped after {seen:#?}"));
        seen.push(line.clone());
        line
    };
    while next(&mut seen) != "kill" {}
    members[b - 1].kill();
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(b"go\n")
        .expect("write to java");
    while next(&mut seen) != "curator ensemble tracker: ok" {}
    let _ = child.wait();
    let roles = [(leader, "L"), (a, "A"), (b, "B")];
    let label = |line: &String| {
        roles.iter().fold(line.clone(), |l, (id, role)| {
            l.replace(&ports.0[id - 1][0].to_string(), &format!("C{role}"))
        })
    };
    // The tracked members in order of their role names: their ports, by
    // which Java sorted them, differ between the runs.
    let sorted = |line: String| match line.strip_prefix("tracked: ") {
        Some(list) => {
            let mut members: Vec<&str> = list.split(',').collect();
            members.sort_unstable();
            format!("tracked: {}", members.join(","))
        }
        None => line,
    };
    seen.iter().map(label).map(sorted).collect()
}

#[test]
fn curator_ensemble_tracker_follows_a_reconfig_as_on_zookeeper() {
    let work = tempfile::tempdir().unwrap();
    let classpath = compile(work.path(), "EnsembleTrackerFollows");
    let ports = MemberPorts::fresh(3);
    let mut members = start_zookeeper(3, |data| tracker_cfg(&ports, data));
    let theirs = tracker_run(&ports, &mut members, &classpath);
    drop(members);

    let ports = MemberPorts::fresh(3);
    let mut members = start_zkd(&ports, |data| tracker_cfg(&ports, data));
    let ours = tracker_run(&ports, &mut members, &classpath);
    drop(members);
    assert_eq!(ours, theirs, "zkd (left) and ZooKeeper 3.8 (right) differ");
    assert!(
        ours.iter()
            .any(|l| l.starts_with("tracked: ") && !l.contains("CB")),
        "{ours:#?}"
    );
}
