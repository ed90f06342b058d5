//! Membership changed by rolling restarts with new static configs, reconfig
//! disabled: ZOOKEEPER-3829's sequence (with -3814, -3830 and -3842 the same
//! family). Members 1-3 run with the servers 1,2,3; member 4 starts with
//! 1,2,3,4; then 1, 2 and 3 are restarted one at a time with 1,2,3,4, and
//! the leader once more so that member 4 leads. In ZooKeeper 3.5.0-3.5.8
//! such a leader could commit nothing.
//!
//! Where zkd differs from ZooKeeper (issue 49): a leader takes only the
//! members of its configuration as learners (a learner is sent the whole
//! tree), so member 4 does not follow the leader of 1,2,3 without a vote,
//! as ZooKeeper's does: it serves once a leader's configuration names it,
//! here after the last of 1-3 restarted. The ensemble takes a write after
//! every step, every member serves every acknowledged write at the end,
//! and `/zookeeper/config` lists the four servers. Then the way back:
//! member 4 stops and 1-3 are restarted with 1,2,3, and writes go on.

use std::path::Path;
use std::time::{Duration, Instant};
use zkd_client_tests::process::ZkdProcess;
use zkd_client_tests::side_by_side::MemberPorts;
use zkd_client_tests::{connect, persistent, within};
use zookeeper_client as zk;

const SESSION: Duration = Duration::from_secs(6);
const MEMBERS: usize = 4;
/// How long an election and sync may take.
const SETTLE: Duration = Duration::from_secs(30);

/// zoo.cfg for a member with dataDir `data` in an ensemble of `ids`.
fn zoo_cfg(ports: &MemberPorts, data: &Path, ids: &[usize]) -> String {
    let mut text = format!(
        "tickTime=500\ninitLimit=10\nsyncLimit=4\ndataDir={}\n\
         4lw.commands.whitelist=*\nadmin.enableServer=false\n",
        data.display()
    );
    for id in ids {
        text.push_str(&ports.server_line(*id));
    }
    text
}

/// Starts member `id` with the servers `ids`.
fn start(ports: &MemberPorts, id: usize, ids: &[usize]) -> ZkdProcess {
    let config = |data: &Path| zoo_cfg(ports, data, ids);
    ZkdProcess::try_start_from(config, "127.0.0.1", ports.0[id - 1][0], id as u64)
        .unwrap_or_else(|e| panic!("member {id}: {e}"))
}

/// Restarts `member` with the servers `ids` in its zoo.cfg.
fn restart_with(ports: &MemberPorts, member: &mut ZkdProcess, ids: &[usize]) {
    member.kill9();
    let text = std::fs::read_to_string(member.config_path()).expect("zoo.cfg");
    let data = text
        .lines()
        .find_map(|l| l.strip_prefix("dataDir="))
        .expect("dataDir")
        .to_owned();
    std::fs::write(member.config_path(), zoo_cfg(ports, Path::new(&data), ids)).expect("zoo.cfg");
    member.restart();
}

/// Creates `/r/<name>` through the members `ids`, retrying while they elect.
async fn write(ports: &MemberPorts, ids: &[usize], name: &str) {
    let deadline = Instant::now() + SETTLE;
    let path = format!("/r/{name}");
    loop {
        let attempt = async {
            let client = zk::Client::connector()
                .with_session_timeout(SESSION)
                .with_fail_eagerly()
                .connect(&ports.clients(ids))
                .await?;
            match within(client.create("/r", b"", &persistent())).await {
                Ok(_) | Err(zk::Error::NodeExists) => {}
                Err(e) => return Err(e),
            }
            within(client.create(&path, b"", &persistent()))
                .await
                .map(|_| ())
        };
        match tokio::time::timeout(Duration::from_secs(10), attempt).await {
            Ok(Ok(())) | Ok(Err(zk::Error::NodeExists)) => return,
            failed => assert!(
                Instant::now() < deadline,
                "write {name} through {ids:?}: {failed:?}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// What member `id` serves: the children of `/r`, and the servers in
/// `/zookeeper/config`.
async fn served(ports: &MemberPorts, id: usize) -> (Vec<String>, Vec<String>) {
    let client = connect(&ports.clients(&[id]), SESSION).await;
    within(client.sync("/r")).await.expect("sync");
    let mut children = within(client.list_children("/r")).await.expect("children");
    children.sort();
    let (config, _) = within(client.get_data("/zookeeper/config"))
        .await
        .expect("config");
    let servers = String::from_utf8_lossy(&config)
        .lines()
        .filter_map(|l| Some(l.split_once('=')?.0.to_owned()))
        .filter(|k| k.starts_with("server."))
        .collect();
    (children, servers)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn membership_changes_by_rolling_restarts_with_new_static_configs() {
    let ports = MemberPorts::fresh(MEMBERS);
    let (old, new) = ([1, 2, 3], [1, 2, 3, 4]);
    let mut members: Vec<ZkdProcess> = old.iter().map(|id| start(&ports, *id, &old)).collect();
    ports.wait_serving(&old, SETTLE);
    write(&ports, &old, "start").await;

    members.push(start(&ports, 4, &new));
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(
        ports.mode(4),
        None,
        "member 4 learned from a leader whose configuration leaves it out"
    );
    write(&ports, &new, "member 4 started").await;
    for id in old {
        restart_with(&ports, &mut members[id - 1], &new);
        write(&ports, &new, &format!("member {id} restarted with 1-4")).await;
    }
    ports.wait_serving(&new, SETTLE);
    write(&ports, &new, "four members").await;
    // ZOOKEEPER-3830's moment: the new member leads (the highest sid, as
    // up to date as the rest, once the leader restarts) and commits.
    let leader = new
        .into_iter()
        .find(|id| ports.mode(*id).as_deref() == Some("leader"));
    if let Some(leader) = leader.filter(|id| *id != 4) {
        restart_with(&ports, &mut members[leader - 1], &new);
        ports.wait_serving(&new, SETTLE);
    }
    assert_eq!(
        ports.mode(4).as_deref(),
        Some("leader"),
        "the new member leads"
    );
    write(&ports, &new, "member 4 leads").await;
    let mut names: Vec<String> = [
        "four members",
        "member 4 leads",
        "member 1 restarted with 1-4",
        "member 2 restarted with 1-4",
        "member 3 restarted with 1-4",
        "member 4 started",
        "start",
    ]
    .map(String::from)
    .to_vec();
    names.sort();
    let servers: Vec<String> = new.map(|id| format!("server.{id}")).to_vec();
    for id in new {
        assert_eq!(
            served(&ports, id).await,
            (names.clone(), servers.clone()),
            "member {id}"
        );
    }

    // And back: member 4 leaves, the others are restarted with 1,2,3.
    members[3].kill9();
    for id in old {
        restart_with(&ports, &mut members[id - 1], &old);
        write(&ports, &old, &format!("member {id} restarted with 1-3")).await;
    }
    ports.wait_serving(&old, SETTLE);
    let servers: Vec<String> = old.map(|id| format!("server.{id}")).to_vec();
    for id in old {
        let (children, shown) = served(&ports, id).await;
        assert_eq!(children.len(), names.len() + 3, "member {id}: {children:?}");
        assert_eq!(shown, servers, "member {id}");
    }
}
