//! Debian's stock command-line clients against zkd: the Java `zkCli.sh` and
//! the C client's `cli_mt` create, ls, get, set and delete.

use std::process::Stdio;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::process::Command;
use zkd_client_tests::oracle::require_tool;
use zkd_client_tests::{connect, within, ZkdProcess};

const ZKCLI: &str = "/usr/share/zookeeper/bin/zkCli.sh";
const CLI_MT: &str = "/usr/lib/zookeeper/bin/cli_mt";

/// Runs a CLI with `stdin`, killing it if it takes longer than a minute.
async fn run_with_timeout(mut cmd: Command, stdin: &str) -> String {
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = cmd.spawn().expect("spawn cli");
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin.as_bytes()).await.unwrap();
    drop(input);
    let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("cli timed out")
        .expect("cli output");
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

#[tokio::test]
async fn zkcli_creates_lists_gets_sets_and_deletes() {
    require_tool(ZKCLI);
    let server = ZkdProcess::start();
    let script = "create /fromcli hello\nls /\nget /fromcli\nset /fromcli world\nget -s /fromcli\ncreate /fromcli/kid x\ndelete /fromcli/kid\nls /fromcli\nquit\n";
    let mut cmd = Command::new(ZKCLI);
    cmd.args(["-server", &server.addr()]);
    let out = run_with_timeout(cmd, script).await;
    assert!(out.contains("Created /fromcli"), "{out}");
    assert!(out.contains("[fromcli, zookeeper]"), "{out}");
    assert!(out.contains("hello"), "{out}");
    assert!(out.contains("dataVersion = 1"), "{out}");
    assert!(out.contains("Created /fromcli/kid"), "{out}");
    let c = connect(&server.addr(), Duration::from_secs(10)).await;
    assert_eq!(within(c.get_data("/fromcli")).await.unwrap().0, b"world");
    assert!(within(c.list_children("/fromcli"))
        .await
        .unwrap()
        .is_empty());
}

async fn cli_mt(addr: &str, command: &str) -> String {
    let mut cmd = Command::new(CLI_MT);
    cmd.args(["-h", addr, "-c", command]);
    run_with_timeout(cmd, "").await
}

#[tokio::test]
async fn c_client_creates_lists_gets_sets_and_deletes() {
    require_tool(CLI_MT);
    let server = ZkdProcess::start();
    let addr = server.addr();
    let out = cli_mt(&addr, "create /fromc").await;
    assert!(out.contains("[/fromc]: rc = 0"), "{out}");
    let out = cli_mt(&addr, "ls /").await;
    assert!(
        out.contains("\tfromc") && out.contains("\tzookeeper"),
        "{out}"
    );
    let out = cli_mt(&addr, "set /fromc world").await;
    assert!(out.contains("rc = 0"), "{out}");
    let out = cli_mt(&addr, "get /fromc").await;
    assert!(
        out.contains("value_len = 5") && out.contains("world") && out.contains("version=1"),
        "{out}"
    );
    let out = cli_mt(&addr, "delete /fromc").await;
    assert!(out.contains("/fromc: rc = 0"), "{out}");
    // (cli_mt's batch mode never exits after a failed command, so absence is checked below.)
    let c = connect(&addr, Duration::from_secs(10)).await;
    assert_eq!(within(c.check_stat("/fromc")).await.unwrap(), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_java_and_c_clients_work_on_every_member_of_an_ensemble() {
    require_tool(ZKCLI);
    require_tool(CLI_MT);
    let ensemble = zkd_client_tests::ensemble::Ensemble::start(3);
    for i in 0..3 {
        // The Java client on member i: a write (forwarded when i follows), a
        // sync, a read, and the membership as `config` shows it.
        let mut cmd = Command::new(ZKCLI);
        cmd.args(["-server", &ensemble.connect_string(&[i])]);
        let script = format!("create /java{i} v{i}\nsync /\nget /java{i}\nconfig\nquit\n");
        let out = run_with_timeout(cmd, &script).await;
        assert!(out.contains(&format!("Created /java{i}")), "{out}");
        assert!(out.contains(&format!("v{i}")), "{out}");
        assert!(
            out.contains("server.1=127.0.0.1:") && out.contains(":participant"),
            "{out}"
        );
        // The C client on the next member sees it after a sync of its own.
        let next = ensemble.connect_string(&[(i + 1) % 3]);
        let c = connect(&next, Duration::from_secs(10)).await;
        within(c.sync("/")).await.unwrap();
        let out = cli_mt(&next, &format!("get /java{i}")).await;
        assert!(out.contains(&format!("v{i}")), "{out}");
    }
}
