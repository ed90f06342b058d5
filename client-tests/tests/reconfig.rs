//! Dynamic reconfiguration through zkCli's `reconfig`, side by side with
//! Apache ZooKeeper 3.8: the same zoo.cfg on both (three participants,
//! `reconfigEnabled=true`, a super user). On each, what zkCli prints and
//! what every member's `/zookeeper/config` shows must be the same:
//! a reconfig without the super user, and one from a stale version, are
//! refused; a follower is removed, then added back, and serves what was
//! written meanwhile; then the leader is removed while a client writes,
//! the others elect again, and every acknowledged write is there.
//!
//! Members are named by role (L the first leader, A and B its followers by
//! id), since which member leads first may differ between the two runs.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use zkd_client_tests::oracle::require_tool;
use zkd_client_tests::side_by_side::{start_zkd, start_zookeeper, Member, MemberPorts};
use zkd_client_tests::zkcli::{zkcli, ZKCLI};
use zkd_client_tests::ZkdProcess;
use zkd_client_tests::{connect, within};
use zookeeper_client as zk;

const SESSION: Duration = Duration::from_secs(6);
const MEMBERS: usize = 3;
/// How long an election and sync may take (ZooKeeper's take seconds).
const SETTLE: Duration = Duration::from_secs(40);
/// `super:test`, as ZooKeeper's DigestAuthenticationProvider hashes it.
const SUPER_DIGEST: &str = "super:D/InIHSb7yEEbrWz8b9l71RjZJU=";
const AUTH: &str = "addauth digest super:test\n";

/// Who may reconfig: the super user.
fn super_user() -> String {
    format!("DigestAuthenticationProvider.superDigest={SUPER_DIGEST}\n")
}

/// Who may reconfig: anyone, no ACL being checked.
const SKIP_ACL: &str = "skipACL=yes\n";

/// The zoo.cfg of a member with the servers `ids`, but for its dataDir.
/// ZooKeeper makes the keys it does not know system properties, the super
/// digest and skipACL among them.
fn zoo_cfg(ports: &MemberPorts, data: &Path, ids: &[usize]) -> String {
    zoo_cfg_allowing(ports, data, ids, &super_user())
}

/// The zoo.cfg of a member with the servers `ids`, with `access` saying
/// who may reconfig.
fn zoo_cfg_allowing(ports: &MemberPorts, data: &Path, ids: &[usize], access: &str) -> String {
    let mut text = format!(
        "tickTime=500\ninitLimit=10\nsyncLimit=4\ndataDir={}\nreconfigEnabled=true\n\
         {access}4lw.commands.whitelist=*\nadmin.enableServer=false\n",
        data.display()
    );
    for id in ids {
        text.push_str(&ports.server_line(*id));
    }
    text
}

/// Every member's zoo.cfg in the side-by-side runs.
fn three(ports: &MemberPorts, data: &Path) -> String {
    zoo_cfg(ports, data, &[1, 2, 3])
}

/// zkCli's lines for `script` against `addr`, off the async workers.
async fn run_zkcli(addr: String, script: &str) -> Vec<String> {
    let script = script.to_owned();
    tokio::task::spawn_blocking(move || zkcli(&addr, &script))
        .await
        .expect("zkCli")
}

/// Members by role: the first leader `L`, its followers `A` and `B`.
struct Roles<'p> {
    ports: &'p MemberPorts,
    ids: BTreeMap<&'static str, usize>,
}

impl<'p> Roles<'p> {
    /// Waits until the members serve, and names them by role.
    fn find(ports: &'p MemberPorts) -> Roles<'p> {
        let all: Vec<usize> = (1..=MEMBERS).collect();
        let leader = ports.wait_serving(&all, SETTLE);
        let mut followers = all.iter().copied().filter(|id| *id != leader);
        let (a, b) = (followers.next().unwrap(), followers.next().unwrap());
        let ids = BTreeMap::from([("L", leader), ("A", a), ("B", b)]);
        Roles { ports, ids }
    }

    /// `role`'s server line, as a reconfig's joining list names it.
    fn server_line(&self, role: &str) -> String {
        self.ports.server_line(self.id(role)).trim_end().to_owned()
    }

    fn id(&self, role: &str) -> usize {
        self.ids[role]
    }

    fn addr(&self, role: &str) -> String {
        self.ports.clients(&[self.id(role)])
    }

    /// `text` with ids and ports named by role, its lines sorted.
    fn label(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for (role, &id) in &self.ids {
            for (kind, port) in ["C", "Q", "E"].iter().zip(self.ports.0[id - 1]) {
                out = out.replace(&port.to_string(), &format!("{kind}{role}"));
            }
            out = out.replace(&format!("server.{id}="), &format!("server.{role}="));
        }
        let mut lines: Vec<&str> = out.lines().collect();
        lines.sort_unstable();
        lines.join(" | ")
    }

    /// zkCli's output for `script` run against `role`, labelled.
    async fn zkcli(&self, role: &str, script: &str) -> String {
        let lines = run_zkcli(self.addr(role), script).await;
        self.label(&lines.join("\n"))
    }

    /// `/zookeeper/config` as `role` shows it, labelled, with its version
    /// left out when it depends on how many writes came before.
    async fn config(&self, role: &str, keep_version: bool) -> String {
        let client = connect(&self.addr(role), SESSION).await;
        let (data, _) = within(client.get_data("/zookeeper/config"))
            .await
            .expect("get /zookeeper/config");
        let text = String::from_utf8_lossy(&data);
        let text = match keep_version {
            true => text.into_owned(),
            false => text
                .lines()
                .filter(|l| !l.starts_with("version="))
                .collect::<Vec<_>>()
                .join("\n"),
        };
        format!("{role} shows {}", self.label(&text))
    }

    fn wait_serving(&self, roles: &[&str]) {
        let ids: Vec<usize> = roles.iter().map(|r| self.id(r)).collect();
        self.ports.wait_serving(&ids, SETTLE);
    }
}

/// Creates `/w-N` with increasing N until told to stop, through the
/// members at `connect`; the N whose create was acknowledged.
async fn write_until(connect_string: String, stop: Arc<AtomicBool>) -> Vec<u32> {
    let client = connect(&connect_string, SESSION).await;
    let mut acked = Vec::new();
    let mut n = 0;
    while !stop.load(Ordering::Relaxed) {
        let path = format!("/w-{n}");
        let options = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
        match tokio::time::timeout(Duration::from_secs(5), client.create(&path, b"", &options))
            .await
        {
            Ok(Ok(_)) => acked.push(n),
            _ => tokio::time::sleep(Duration::from_millis(50)).await,
        }
        n += 1;
    }
    acked
}

async fn scenario(ports: &MemberPorts) -> Vec<String> {
    let roles = Roles::find(ports);
    let (leader, a, b) = (roles.id("L"), roles.id("A"), roles.id("B"));
    let mut seen = Vec::new();

    seen.push(roles.zkcli("A", &format!("reconfig -remove {b}\n")).await);
    let stale = format!("{AUTH}reconfig -remove {b} -v 1\n");
    seen.push(roles.zkcli("A", &stale).await);
    let remove = format!("{AUTH}reconfig -remove {b}\n");
    seen.push(roles.zkcli("A", &remove).await);
    roles.wait_serving(&["L", "A"]);
    for role in ["L", "A"] {
        seen.push(roles.config(role, true).await);
    }

    let writer = connect(&roles.addr("L"), SESSION).await;
    let options = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
    within(writer.create("/while-removed", b"x", &options))
        .await
        .expect("a write without B");
    let add = format!("{AUTH}reconfig -add {}\n", roles.server_line("B"));
    seen.push(roles.zkcli("A", &add).await);
    roles.wait_serving(&["L", "A", "B"]);
    let rejoined = connect(&roles.addr("B"), SESSION).await;
    within(rejoined.sync("/while-removed")).await.expect("sync");
    let (data, _) = within(rejoined.get_data("/while-removed"))
        .await
        .expect("B serves what was written while it was out");
    seen.push(format!("B reads {:?}", String::from_utf8_lossy(&data)));
    for role in ["L", "A", "B"] {
        seen.push(roles.config(role, true).await);
    }

    let stop = Arc::new(AtomicBool::new(false));
    let writes = tokio::spawn(write_until(ports.clients(&[a, b]), stop.clone()));
    tokio::time::sleep(Duration::from_millis(500)).await;
    // What zkCli prints here depends on when A's clients are moved by the
    // election: only what follows is compared.
    let remove_leader = format!("{AUTH}reconfig -remove {leader}\n");
    roles.zkcli("A", &remove_leader).await;
    roles.wait_serving(&["A", "B"]);
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, Ordering::Relaxed);
    let acked = writes.await.expect("writer");
    assert!(!acked.is_empty(), "no write was acknowledged");
    for role in ["A", "B"] {
        seen.push(roles.config(role, false).await);
        let client = connect(&roles.addr(role), SESSION).await;
        within(client.sync("/")).await.expect("sync");
        for n in &acked {
            let path = format!("/w-{n}");
            let found = within(client.check_stat(&path)).await.expect("exists");
            assert!(found.is_some(), "{role} lost acknowledged {path}");
        }
    }
    seen.push("every acknowledged write is on A and B".into());
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zkcli_reconfig_removes_and_adds_members_as_on_zookeeper() {
    require_tool(ZKCLI);
    let ports = MemberPorts::fresh(MEMBERS);
    let members = start_zookeeper(MEMBERS, |data| three(&ports, data));
    let theirs = scenario(&ports).await;
    drop(members);

    let ports = MemberPorts::fresh(MEMBERS);
    let members: Vec<Box<dyn Member>> = start_zkd(&ports, |data| three(&ports, data));
    let ours = scenario(&ports).await;
    drop(members);
    assert_eq!(ours, theirs, "zkd (left) and ZooKeeper 3.8 (right) differ");
    // ZooKeeper's answers, which zkd's equal: NOAUTH, BADVERSION, and two
    // committed configurations.
    assert_eq!(ours[0], "Insufficient permission : ", "{ours:#?}");
    assert_eq!(ours[1], "version No is not valid : ", "{ours:#?}");
    let committed = ours
        .iter()
        .filter(|l| l.starts_with("Committed new configuration: | server.A="));
    assert_eq!(committed.count(), 2, "{ours:#?}");
}

/// A server none of the members started with joins: it starts with the
/// servers 1-4 (as ZooKeeper's guide has a joiner start), `reconfig -add`
/// names it, the members learn its addresses, and it syncs, serves what
/// was written before, and votes: with one of the first three down, writes
/// still need it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_server_joins_by_reconfig_and_votes() {
    require_tool(ZKCLI);
    let ports = MemberPorts::fresh(4);
    let start = |id: usize, ids: &'static [usize]| {
        let config = |data: &Path| zoo_cfg(&ports, data, ids);
        ZkdProcess::try_start_from(config, "127.0.0.1", ports.0[id - 1][0], id as u64)
            .unwrap_or_else(|e| panic!("member {id}: {e}"))
    };
    let mut members: Vec<ZkdProcess> = (1..=3).map(|id| start(id, &[1, 2, 3])).collect();
    let leader = ports.wait_serving(&[1, 2, 3], SETTLE);
    let options = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
    let client = connect(&ports.clients(&[leader]), SESSION).await;
    within(client.create("/before", b"b", &options))
        .await
        .expect("a write before the join");
    members.push(start(4, &[1, 2, 3, 4]));
    let [c, q, e] = ports.0[3];
    let add = format!("{AUTH}reconfig -add server.4=127.0.0.1:{q}:{e};{c}\n");
    let said = run_zkcli(ports.clients(&[leader]), &add).await;
    assert!(
        said.iter().any(|l| l.starts_with("server.4=127.0.0.1")),
        "{said:#?}"
    );
    ports.wait_serving(&[1, 2, 3, 4], SETTLE);
    let joined = connect(&ports.clients(&[4]), SESSION).await;
    within(joined.sync("/before")).await.expect("sync");
    let (data, _) = within(joined.get_data("/before"))
        .await
        .expect("the joiner reads");
    assert_eq!(data, b"b");
    let (config, _) = within(joined.get_data("/zookeeper/config"))
        .await
        .expect("config");
    let servers = String::from_utf8_lossy(&config);
    assert_eq!(
        servers.lines().filter(|l| l.starts_with("server.")).count(),
        4,
        "{servers}"
    );
    // Four voters: with a follower of the first three down, a write needs 4's ack.
    let down = (1..=3).find(|id| *id != leader).unwrap();
    members[down - 1].kill9();
    within(client.create("/after", b"a", &options))
        .await
        .expect("a write with the joiner's vote");
    let (data, _) = within(joined.get_data("/after"))
        .await
        .expect("the joiner has it");
    assert_eq!(data, b"a");
}

/// A member moves: server 1 is replaced by a new machine (an empty disk,
/// other ports), `reconfig -add` giving id 1 its new addresses while it is
/// down, as ZooKeeper's incremental reconfig allows. The others must dial
/// it there: 1 is the smallest sid, so each calls it back at the address
/// its configuration gives. It syncs, serves what was written before, and
/// votes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_moved_by_reconfig_is_reached_at_its_new_addresses() {
    require_tool(ZKCLI);
    // Member 1's new ports are the fourth set, watched as "member 4".
    let ports = MemberPorts::fresh(4);
    let [c, q, e] = ports.0[3];
    let moved = format!("server.1=127.0.0.1:{q}:{e};{c}\n");
    // As the configuration shows it: `...:participant;0.0.0.0:c`.
    let moved_to = format!("server.1=127.0.0.1:{q}:{e}:");
    let mut members: Vec<ZkdProcess> = (1..=3)
        .map(|id| {
            let config = |data: &Path| zoo_cfg(&ports, data, &[1, 2, 3]);
            ZkdProcess::try_start_from(config, "127.0.0.1", ports.0[id - 1][0], id as u64)
                .unwrap_or_else(|e| panic!("member {id}: {e}"))
        })
        .collect();
    ports.wait_serving(&[1, 2, 3], SETTLE);
    let options = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
    let client = connect(&ports.clients(&[2, 3]), SESSION).await;
    within(client.create("/before", b"b", &options))
        .await
        .expect("a write before the move");
    members[0].kill9();
    ports.wait_serving(&[2, 3], SETTLE);
    let said = run_zkcli(
        ports.clients(&[2, 3]),
        &format!("{AUTH}reconfig -add {moved}"),
    )
    .await;
    assert!(said.iter().any(|l| l.starts_with(&moved_to)), "{said:#?}");
    let new_machine = |data: &Path| {
        let mut text = zoo_cfg(&ports, data, &[2, 3]);
        text.push_str(&moved);
        text
    };
    let _moved = ZkdProcess::try_start_from(new_machine, "127.0.0.1", c, 1)
        .unwrap_or_else(|e| panic!("member 1 at its new ports: {e}"));
    ports.wait_serving(&[2, 3, 4], SETTLE);
    let there = connect(&ports.clients(&[4]), SESSION).await;
    within(there.sync("/before")).await.expect("sync");
    let (data, _) = within(there.get_data("/before")).await.expect("it reads");
    assert_eq!(data, b"b");
    for id in [2, 3, 4] {
        let reader = connect(&ports.clients(&[id]), SESSION).await;
        within(reader.sync("/zookeeper/config"))
            .await
            .expect("sync");
        let (config, _) = within(reader.get_data("/zookeeper/config"))
            .await
            .expect("config");
        let config = String::from_utf8_lossy(&config).into_owned();
        assert!(
            config.contains(&moved_to),
            "member at {id}'s ports: {config}"
        );
    }
    // It votes: with a follower of 2 and 3 down, a write needs its ack.
    let leader = [2, 3]
        .into_iter()
        .find(|id| ports.mode(*id).as_deref() == Some("leader"));
    let down = [2, 3].into_iter().find(|id| Some(*id) != leader).unwrap();
    members[down - 1].kill9();
    let writer = connect(&ports.clients(&[4]), SESSION).await;
    within(writer.create("/after", b"a", &options))
        .await
        .expect("a write with the moved member's vote");
}

/// `kazoo/reconfig.py` against `addr`: what it printed, each line.
async fn run_kazoo(addr: String, leaving: usize, joining: String) -> Vec<String> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/kazoo/reconfig.py");
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new("timeout")
            .args(["120", "python3"])
            .arg(script)
            .args([addr, leaving.to_string(), joining])
            .output()
            .expect("python3")
    })
    .await
    .expect("kazoo");
    let lines: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect();
    assert_eq!(
        lines.last().map(String::as_str),
        Some("kazoo reconfig: ok"),
        "{lines:#?}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    lines
}

/// kazoo removes B and adds it back, with no super user but skipACL.
async fn kazoo_scenario(ports: &MemberPorts) -> Vec<String> {
    let roles = Roles::find(ports);
    let out = run_kazoo(roles.addr("A"), roles.id("B"), roles.server_line("B")).await;
    // Server lines come in id order, and ids differ between the runs: the
    // lines, each named by its step, are compared sorted.
    let mut seen: Vec<String> = out.iter().map(|l| roles.label(l)).collect();
    seen.sort_unstable();
    roles.wait_serving(&["L", "A", "B"]);
    for role in ["L", "A", "B"] {
        seen.push(roles.config(role, true).await);
    }
    seen
}

/// kazoo's `reconfig()` on both, with `skipACL=yes` standing in for the
/// super user: the same answers (a stale version and a change that changes
/// nothing refused), and the same `/zookeeper/config` on every member.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kazoo_reconfig_with_skip_acl_as_on_zookeeper() {
    require_tool(ZKCLI);
    let cfg =
        |ports: &MemberPorts, data: &Path| zoo_cfg_allowing(ports, data, &[1, 2, 3], SKIP_ACL);
    let ports = MemberPorts::fresh(MEMBERS);
    let members = start_zookeeper(MEMBERS, |data| cfg(&ports, data));
    let theirs = kazoo_scenario(&ports).await;
    drop(members);

    let ports = MemberPorts::fresh(MEMBERS);
    let members: Vec<Box<dyn Member>> = start_zkd(&ports, |data| cfg(&ports, data));
    let ours = kazoo_scenario(&ports).await;
    drop(members);
    assert_eq!(ours, theirs, "zkd (left) and ZooKeeper 3.8 (right) differ");
    assert!(
        ours.contains(&"stale: BadVersionError".to_owned()),
        "{ours:#?}"
    );
    let added = ours.iter().filter(|l| l.starts_with("add: server."));
    assert_eq!(added.count(), 3, "{ours:#?}");
}
