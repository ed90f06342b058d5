//! The version of `/zookeeper/config` with `reconfigEnabled=true`, side by
//! side with Apache ZooKeeper 3.8: the same zoo.cfg on both (three
//! participants, client ports in the server lines, no `version=`). The
//! first leader gives the configuration its epoch's zxid as version
//! (ZOOKEEPER-1783) and every member shows it, with that mzxid; a leader
//! elected later keeps it. Each member backs zoo.cfg up, records the
//! configuration in `zoo.cfg.dynamic.100000000` and points zoo.cfg at it,
//! so that after every member restarts the version is still the first
//! one. (Without reconfig it stays 0: tests/observers.rs.)

use std::path::Path;
use std::time::Duration;
use zkd_client_tests::side_by_side::{start_zkd, start_zookeeper, Member, MemberPorts};
use zkd_client_tests::{connect, within};

const SESSION: Duration = Duration::from_secs(6);
const MEMBERS: usize = 3;
/// How long an election and sync may take (ZooKeeper's take seconds).
const SETTLE: Duration = Duration::from_secs(40);

/// The zoo.cfg every member has, but for its dataDir.
fn zoo_cfg(ports: &MemberPorts, data: &Path) -> String {
    let mut text = format!(
        "tickTime=500\ninitLimit=10\nsyncLimit=4\ndataDir={}\nreconfigEnabled=true\n\
         4lw.commands.whitelist=*\nadmin.enableServer=false\n",
        data.display()
    );
    for id in 1..=MEMBERS {
        text.push_str(&ports.server_line(id));
    }
    text
}

/// `/zookeeper/config` as member `id` shows it, with its mzxid and version.
async fn shown_config(ports: &MemberPorts, id: usize) -> String {
    let client = connect(&ports.clients(&[id]), SESSION).await;
    let (data, stat) = within(client.get_data("/zookeeper/config"))
        .await
        .expect("get /zookeeper/config");
    format!(
        "member {id}: {}\n  mzxid {:#x} version {}",
        ports.named(&String::from_utf8_lossy(&data)),
        stat.mzxid,
        stat.version
    )
}

/// The config files beside member `id`'s zoo.cfg: each name, and its lines
/// sorted (ZooKeeper writes zoo.cfg's in its hash order), paths and ports
/// named.
fn config_files(ports: &MemberPorts, id: usize, member: &dyn Member) -> Vec<String> {
    let config = member.config();
    let dir = config.parent().expect("a directory");
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("the member's directory")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with("zoo.cfg"))
        .collect();
    names.sort();
    let mut out = Vec::new();
    for name in names {
        let text = std::fs::read_to_string(dir.join(&name)).unwrap_or_default();
        let text = text.replace(&dir.display().to_string(), "DIR");
        let mut lines: Vec<&str> = text.lines().collect();
        lines.sort_unstable();
        out.push(format!(
            "member {id} {name}: {}",
            ports.named(&lines.join(" | "))
        ));
    }
    out
}

/// Every member's config once all serve; the same after the leader dies;
/// the config files; the config once every member restarted.
async fn scenario(ports: &MemberPorts, members: &mut [Box<dyn Member>]) -> Vec<String> {
    let all: Vec<usize> = (1..=MEMBERS).collect();
    let leader = ports.wait_serving(&all, SETTLE);
    let mut seen = Vec::new();
    for id in 1..=MEMBERS {
        seen.push(shown_config(ports, id).await);
    }
    members[leader - 1].kill();
    let survivors: Vec<usize> = all.iter().copied().filter(|id| *id != leader).collect();
    ports.wait_serving(&survivors, SETTLE);
    seen.push("the first leader killed, a new one elected".into());
    for id in survivors {
        let line = shown_config(ports, id).await;
        seen.push(line.replace(&format!("member {id}"), "a survivor"));
    }
    for (i, member) in members.iter().enumerate() {
        seen.extend(config_files(ports, i + 1, member.as_ref()));
    }
    for member in members.iter_mut() {
        member.kill();
    }
    for member in members.iter_mut() {
        member.restart();
    }
    ports.wait_serving(&all, SETTLE);
    seen.push("every member restarted".into());
    for id in 1..=MEMBERS {
        seen.push(shown_config(ports, id).await);
    }
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_leader_versions_the_configuration_as_zookeepers_does() {
    let ports = MemberPorts::fresh(MEMBERS);
    let mut members = start_zookeeper(MEMBERS, |data| zoo_cfg(&ports, data));
    let theirs = scenario(&ports, &mut members).await;
    drop(members);

    let ports = MemberPorts::fresh(MEMBERS);
    let mut members = start_zkd(&ports, |data| zoo_cfg(&ports, data));
    let ours = scenario(&ports, &mut members).await;
    assert_eq!(ours, theirs, "zkd (left) and ZooKeeper 3.8 (right) differ");
    assert!(
        ours.iter()
            .any(|l| l.contains("zoo.cfg.dynamic.100000000: server.1=")),
        "{ours:#?}"
    );
    assert!(
        ours[0].ends_with("version=100000000\n  mzxid 0x100000000 version -1"),
        "{ours:#?}"
    );
}
