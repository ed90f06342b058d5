//! The sequential-ephemeral leader-election recipe with five contenders, each
//! watching only its predecessor: closing the leader's session notifies only
//! its successor, and a contender that dies mid-chain re-points only its
//! successor.

use std::time::Duration;
use tokio::sync::mpsc;
use zkd_client_tests::{persistent, within, ServerOptions, ZkdProcess};
use zookeeper_client as zk;

struct Contender {
    client: Option<zk::Client>,
    path: String,
}

/// Watches the contender's predecessor (if any); the event arrives on `events` tagged with `who`.
async fn watch_predecessor(
    client: &zk::Client,
    me: &str,
    who: usize,
    events: mpsc::UnboundedSender<(usize, zk::WatchedEvent)>,
) -> bool {
    loop {
        let mut kids = within(client.list_children("/election")).await.unwrap();
        kids.sort();
        let name = me.rsplit('/').next().unwrap();
        let pos = kids
            .iter()
            .position(|k| k == name)
            .expect("own node present");
        if pos == 0 {
            return true; // leader
        }
        let pred = format!("/election/{}", kids[pos - 1]);
        let (stat, w) = within(client.check_and_watch_stat(&pred)).await.unwrap();
        if stat.is_none() {
            continue; // predecessor vanished meanwhile: look again
        }
        tokio::spawn(async move {
            let ev = w.changed().await;
            // A contender's own session ending is not news about its predecessor.
            if ev.event_type != zk::EventType::Session {
                let _ = events.send((who, ev));
            }
        });
        return false;
    }
}

async fn expect_only(
    rx: &mut mpsc::UnboundedReceiver<(usize, zk::WatchedEvent)>,
    who: usize,
    deleted: &str,
    within_ms: u64,
) {
    let (got, ev) = tokio::time::timeout(Duration::from_millis(within_ms), rx.recv())
        .await
        .expect("successor notified")
        .unwrap();
    assert_eq!(got, who, "the wrong contender was notified");
    assert_eq!(
        (ev.event_type, ev.path.as_str()),
        (zk::EventType::NodeDeleted, deleted)
    );
    // Nobody else hears anything: no herd.
    let extra = tokio::time::timeout(Duration::from_millis(500), rx.recv()).await;
    assert!(
        extra.is_err(),
        "another contender was notified: {:?}",
        extra.map(|e| e.map(|(w, _)| w))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn election_notifies_only_the_successor() {
    let server = ZkdProcess::start_with(ServerOptions {
        tick_time_ms: 100,
        ..Default::default()
    });
    let (tx, mut rx) = mpsc::unbounded_channel();
    let setup = zkd_client_tests::connect(&server.addr(), Duration::from_secs(10)).await;
    within(setup.create("/election", b"", &persistent()))
        .await
        .unwrap();
    let seq = zk::CreateMode::EphemeralSequential.with_acls(zk::Acls::anyone_all());

    let mut contenders = Vec::new();
    for i in 0..5 {
        // Contender 2 will "crash": detached, so dropping it sends no closeSession.
        let connector = zk::Client::connector().with_session_timeout(Duration::from_millis(1000));
        let connector = if i == 2 {
            connector.with_detached()
        } else {
            connector
        };
        let client = within(connector.connect(&server.addr())).await.unwrap();
        let (_, n) = within(client.create("/election/n-", b"", &seq))
            .await
            .unwrap();
        contenders.push(Contender {
            client: Some(client),
            path: format!("/election/n-{n}"),
        });
    }
    for (i, c) in contenders.iter().enumerate() {
        let leader = watch_predecessor(c.client.as_ref().unwrap(), &c.path, i, tx.clone()).await;
        assert_eq!(leader, i == 0, "only the lowest sequence number leads");
    }

    // The leader closes its session: only contender 1 hears of it, and leads.
    contenders[0].client.take();
    expect_only(&mut rx, 1, &contenders[0].path, 5000).await;
    assert!(
        watch_predecessor(
            contenders[1].client.as_ref().unwrap(),
            &contenders[1].path,
            1,
            tx.clone()
        )
        .await
    );

    // Contender 2 dies mid-chain; its session expires; only 3 is told, and 3 re-points to 1.
    contenders[2].client.take();
    expect_only(&mut rx, 3, &contenders[2].path, 5000).await;
    assert!(
        !watch_predecessor(
            contenders[3].client.as_ref().unwrap(),
            &contenders[3].path,
            3,
            tx.clone()
        )
        .await
    );

    // Proof that 3 now watches 1: when 1 leaves, 3 (and only 3) is told and leads.
    contenders[1].client.take();
    expect_only(&mut rx, 3, &contenders[1].path, 5000).await;
    assert!(
        watch_predecessor(
            contenders[3].client.as_ref().unwrap(),
            &contenders[3].path,
            3,
            tx.clone()
        )
        .await
    );
    let mut left = within(setup.list_children("/election")).await.unwrap();
    left.sort();
    let expected: Vec<String> = [3, 4]
        .iter()
        .map(|i| {
            contenders[*i]
                .path
                .trim_start_matches("/election/")
                .to_owned()
        })
        .collect();
    assert_eq!(left, expected);
}
