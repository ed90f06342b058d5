//! Quotas through Debian's zkCli (`setquota`, `listquota`, `delquota`),
//! with `enforceQuota=true`, on Apache ZooKeeper 3.8 and on zkd: the same
//! script must print the same lines on both, over-quota writes included.

use zkd_client_tests::oracle::{require_tool, ZooKeeperProcess, ZOOKEEPER_JAR};
use zkd_client_tests::process::four_letter_word;
use zkd_client_tests::zkcli::{zkcli, ZKCLI};
use zkd_client_tests::{ServerOptions, ZkdProcess};

/// A tree under a quota, limits set, changed and taken away, with writes
/// over each hard limit refused and not counted.
const SCRIPT: &str = "\
create /app a
create /app/one 12345
setquota -N 4 /app
setquota -B 20 /app
setquota -n 2 /app
listquota /app
get /zookeeper/quota/app/zookeeper_limits
get /zookeeper/quota/app/zookeeper_stats
create /app/two
create /app/three
create /app/four
set /app/one 1234567890123456789012
set /app/one 1234567890
listquota /app
delete /app/three
create /app/four
create /app/four/deep
create /app/four/deep/deeper
setquota -n 1 /app/four
setquota -n 1 /nowhere
setquota -N 2 /zookeeper/quota/x
delquota -N /app
create /app/five
create /app/six
listquota /app
deleteall /app/four
listquota /app
delquota /app
listquota /app
ls /zookeeper/quota
create /app/seven
setquota -N 1 /other
create /other/x
quit
";

/// What the script must print on both servers, for the lines that carry
/// the counts (a test of zkd by itself, whatever ZooKeeper printed).
const EXPECTED_COUNTS: [&str; 3] = [
    // After setquota: /app and /app/one, 1 + 5 bytes.
    "Output stat for /app count=2,bytes=6",
    // The refused create and set are not counted.
    "Output stat for /app count=4,bytes=11",
    // /app/four's subtree (3 nodes) is gone, five and six came.
    "Output stat for /app count=5,bytes=11",
];

#[test]
fn zkcli_quota_commands_print_the_same_on_zookeeper_and_zkd() {
    require_tool(ZKCLI);
    require_tool(ZOOKEEPER_JAR);
    let zk = ZooKeeperProcess::start_configured(2000, &[], "enforceQuota=true\n");
    let zkd = ZkdProcess::start_with(ServerOptions::default().with("enforceQuota", "true"));
    let theirs = zkcli(&format!("127.0.0.1:{}", zk.port), SCRIPT);
    let ours = zkcli(&zkd.addr(), SCRIPT);
    assert_eq!(ours, theirs, "zkCli on zkd vs on ZooKeeper");
    for line in EXPECTED_COUNTS {
        assert!(
            ours.iter().any(|l| l == line),
            "{line:?} missing: {ours:#?}"
        );
    }
    let refused = ours
        .iter()
        .filter(|l| l.contains("Quota has exceeded"))
        .count();
    assert!(
        refused >= 3,
        "the over-quota writes were refused: {ours:#?}"
    );
}

/// Counts survive a restart that loads a snapshot taken mid-way and
/// replays the log after it; without `enforceQuota` nothing is refused.
/// A client's write to a stats node is replaced by the count, where
/// ZooKeeper keeps the text and counts on from it until its next restart.
#[test]
fn quota_counts_survive_a_restart_and_are_only_counted_when_not_enforced() {
    require_tool(ZKCLI);
    let data = tempfile::tempdir().expect("tempdir");
    let options = || ServerOptions {
        data_dir: Some(data.path().to_owned()),
        ..ServerOptions::default().with("snapCount", "4")
    };
    let mut script = String::from("create /t\nsetquota -N 3 /t\n");
    for i in 0..12 {
        script.push_str(&format!("create /t/n{i} {}\n", "x".repeat(i)));
    }
    script.push_str("delete /t/n0\nset /zookeeper/quota/t/zookeeper_stats count=99,bytes=99\n");
    script.push_str("listquota /t\nquit\n");
    let before = {
        let zkd = ZkdProcess::start_with(options());
        zkcli(&zkd.addr(), &script)
    };
    assert!(
        !before.iter().any(|l| l.contains("Quota has exceeded")),
        "{before:#?}"
    );
    // /t and n1..n11: 12 nodes, 1 + 2 + ... + 11 bytes.
    let counted = "Output stat for /t count=12,bytes=66";
    assert!(before.iter().any(|l| l == counted), "{before:#?}");
    let zkd = ZkdProcess::start_with(options());
    let after = zkcli(
        &zkd.addr(),
        "listquota /t\ncreate /t/after 12345\nlistquota /t\nquit\n",
    );
    assert!(
        after.iter().any(|l| l == counted),
        "after a restart: {after:#?}"
    );
    let counting = "Output stat for /t count=13,bytes=71";
    assert!(
        after.iter().any(|l| l == counting),
        "after a restart: {after:#?}"
    );
    // ZooKeeper 3.9's gauge sets, keyed by the top path segment.
    let mntr = four_letter_word(zkd.port, "mntr").expect("mntr");
    for line in [
        "zk_t_quota_count_limit_per_namespace\t3",
        "zk_t_quota_bytes_limit_per_namespace\t-1",
        "zk_t_quota_count_usage_per_namespace\t13",
        "zk_t_quota_bytes_usage_per_namespace\t71",
    ] {
        assert!(mntr.lines().any(|l| l == line), "{line:?} not in {mntr}");
    }
}
