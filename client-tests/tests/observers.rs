//! Observers and the 3.5+ configuration, side by side with Apache ZooKeeper
//! 3.8: the same zoo.cfg on both, with the client ports in the `server.N`
//! lines (no `clientPort`), three participants and two `:observer` members.
//! One scenario runs on each and what a client and an operator see must be
//! the same:
//!
//! - `srvr` says `Mode: observer` on the observers, and the leader's `mntr`
//!   counts them apart from its followers;
//! - `/zookeeper/config` lists both roles, with the client addresses;
//! - a write through one observer is read through the other;
//! - the leader killed, the observers follow the new one and still write;
//! - a second voter killed, one voter and two observers are no quorum: the
//!   observers stop serving (had they votes, they would make one).

use std::path::Path;
use std::time::{Duration, Instant};
use zkd_client_tests::process::four_letter_word;
use zkd_client_tests::side_by_side::{start_zkd, start_zookeeper, Member, MemberPorts};
use zkd_client_tests::{connect, persistent, within};
use zookeeper_client as zk;

const SESSION: Duration = Duration::from_secs(6);
/// Participants are members 1 to 3, observers 4 and 5.
const MEMBERS: usize = 5;
const OBSERVERS: [usize; 2] = [4, 5];
/// How long an election and sync may take (ZooKeeper's take seconds).
const SETTLE: Duration = Duration::from_secs(40);

/// The zoo.cfg every member has, but for its dataDir: the 3.5+ forms of
/// the server line (`;host:port`, `;port`, `:participant`, `:observer`).
fn zoo_cfg(ports: &MemberPorts, data: &Path) -> String {
    let mut text = format!(
        "tickTime=500\ninitLimit=10\nsyncLimit=4\ndataDir={}\n\
         4lw.commands.whitelist=*\nadmin.enableServer=false\n",
        data.display()
    );
    for (i, [c, q, e]) in ports.0.iter().enumerate() {
        let id = i + 1;
        text.push_str(&match id {
            1 => format!("server.{id}=127.0.0.1:{q}:{e};127.0.0.1:{c}\n"),
            2 => format!("server.{id}=127.0.0.1:{q}:{e}:participant;{c}\n"),
            3 => format!("server.{id}=127.0.0.1:{q}:{e}:participant;127.0.0.1:{c}\n"),
            _ => format!("server.{id}=127.0.0.1:{q}:{e}:observer;127.0.0.1:{c}\n"),
        });
    }
    text
}

/// The leader's `mntr` lines that count its learners, sorted (ZooKeeper's
/// order of them is its metrics registry's).
fn learner_counts(ports: &MemberPorts, leader: usize) -> Vec<String> {
    let mntr = four_letter_word(ports.0[leader - 1][0], "mntr").expect("mntr");
    let keys = [
        "zk_learners",
        "zk_synced_followers",
        "zk_synced_observers",
        "zk_quorum_size",
    ];
    let mut lines: Vec<String> = (mntr.lines())
        .filter(|l| keys.iter().any(|k| l.split('\t').next() == Some(k)))
        .map(str::to_owned)
        .collect();
    lines.sort();
    lines
}

/// Reads `path` through `addr` until it holds `want` (an observer applies
/// a commit a moment after the writer hears of it).
async fn read_until(addr: &str, path: &str, want: &[u8]) -> Vec<u8> {
    let client = connect(addr, SESSION).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (data, _) = within(client.get_data(path)).await.expect("get");
        if data == want || Instant::now() > deadline {
            return data;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Writes `data` to `/o` through `addr`, creating it the first time; the
/// member may still be finding its new leader, so it is retried.
async fn write(addr: &str, data: &[u8]) {
    let deadline = Instant::now() + SETTLE;
    loop {
        let attempt = async {
            let client = connect(addr, SESSION).await;
            match within(client.set_data("/o", data, None)).await {
                Err(zk::Error::NoNode) => within(client.create("/o", data, &persistent()))
                    .await
                    .map(|_| ()),
                other => other.map(|_| ()),
            }
        };
        match tokio::time::timeout(Duration::from_secs(10), attempt).await {
            Ok(Ok(())) => return,
            failed => assert!(
                Instant::now() < deadline,
                "write through {addr}: {failed:?}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The scenario of the module doc; what it saw, line by line.
async fn scenario(ports: &MemberPorts, members: &mut [Box<dyn Member>]) -> Vec<String> {
    let mut seen = Vec::new();
    let all: Vec<usize> = (1..=MEMBERS).collect();
    let leader = ports.wait_serving(&all, SETTLE);
    seen.push(format!("leader is a participant: {}", leader <= 3));
    for id in OBSERVERS {
        seen.push(format!("member {id}: {:?}", ports.mode(id)));
    }
    seen.extend(learner_counts(ports, leader));

    write(&ports.clients(&[4]), b"one").await;
    let read = read_until(&ports.clients(&[5]), "/o", b"one").await;
    seen.push(format!("through 5: {:?}", String::from_utf8_lossy(&read)));
    let client = connect(&ports.clients(&[4]), SESSION).await;
    let (config, stat) = within(client.get_data("/zookeeper/config"))
        .await
        .expect("config");
    seen.push(ports.named(&String::from_utf8_lossy(&config)));
    seen.push(format!(
        "config mzxid {:#x} version {}",
        stat.mzxid, stat.version
    ));
    drop(client);

    members[leader - 1].kill();
    let voters: Vec<usize> = (1..=3).filter(|id| *id != leader).collect();
    let survivors: Vec<usize> = voters.iter().copied().chain(OBSERVERS).collect();
    let next = ports.wait_serving(&survivors, SETTLE);
    seen.push(format!(
        "a new leader among the voters: {}",
        voters.contains(&next)
    ));
    write(&ports.clients(&[5]), b"two").await;
    let read = read_until(&ports.clients(&[4]), "/o", b"two").await;
    seen.push(format!(
        "after the leader's death, through 4: {:?}",
        String::from_utf8_lossy(&read)
    ));

    members[next - 1].kill();
    let quiet_from = Instant::now() + Duration::from_secs(8);
    let quiet_until = quiet_from + Duration::from_secs(4);
    while Instant::now() < quiet_until {
        let serving: Vec<usize> = survivors
            .iter()
            .copied()
            .filter(|id| *id != next)
            .filter(|id| ports.mode(*id).is_some())
            .collect();
        if Instant::now() >= quiet_from {
            assert!(
                serving.is_empty(),
                "one voter and two observers serve as {serving:?}"
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    seen.push("one voter and two observers: nobody serves".into());
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observers_serve_without_a_vote_as_zookeepers_do() {
    let ports = MemberPorts::fresh(MEMBERS);
    let mut members = start_zookeeper(MEMBERS, |data| zoo_cfg(&ports, data));
    let theirs = scenario(&ports, &mut members).await;
    drop(members);

    let ports = MemberPorts::fresh(MEMBERS);
    let mut members = start_zkd(&ports, |data| zoo_cfg(&ports, data));
    let ours = scenario(&ports, &mut members).await;
    assert_eq!(ours, theirs, "zkd (left) and ZooKeeper 3.8 (right) differ");
    // What both saw, so that a change on both sides is noticed too.
    assert!(
        ours.contains(&"member 4: Some(\"observer\")".to_owned()),
        "{ours:#?}"
    );
    assert!(
        ours.contains(&"zk_synced_observers\t2".to_owned()),
        "{ours:#?}"
    );
}
