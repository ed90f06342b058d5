//! Watches through the stock Rust client: one-shot data, child and exist
//! watches, persistent and persistent-recursive watches, ACL filtering.

use std::time::Duration;
use zkd_client_tests::{connect, persistent, within, ZkdProcess};
use zookeeper_client as zk;

const SESSION: Duration = Duration::from_secs(10);

async fn no_event(w: &mut zk::PersistentWatcher) {
    let got = tokio::time::timeout(Duration::from_millis(300), w.changed()).await;
    assert!(
        got.is_err(),
        "unexpected event {:?}",
        got.map(|e| (e.event_type, e.path))
    );
}

#[tokio::test]
async fn one_shot_watches_fire_once_with_the_txn_zxid() {
    let server = ZkdProcess::start();
    let c = connect(&server.addr(), SESSION).await;
    let writer = connect(&server.addr(), SESSION).await;
    within(c.create("/w", b"", &persistent())).await.unwrap();

    let (_, _, data_watch) = within(c.get_and_watch_data("/w")).await.unwrap();
    let (_, child_watch) = within(c.list_and_watch_children("/w")).await.unwrap();
    let (none, exist_watch) = within(c.check_and_watch_stat("/w/new")).await.unwrap();
    assert_eq!(none, None);

    let set = within(writer.set_data("/w", b"x", None)).await.unwrap();
    let ev = within(data_watch.changed()).await;
    assert_eq!(
        (ev.event_type, ev.path.as_str()),
        (zk::EventType::NodeDataChanged, "/w")
    );
    // 3.9 (ZOOKEEPER-4655) puts the txn zxid in the notification; 3.8 sent -1.
    assert_eq!(ev.zxid, set.mzxid);

    let (created, _) = within(writer.create("/w/new", b"", &persistent()))
        .await
        .unwrap();
    let ev = within(exist_watch.changed()).await;
    assert_eq!(
        (ev.event_type, ev.path.as_str(), ev.zxid),
        (zk::EventType::NodeCreated, "/w/new", created.czxid)
    );
    let ev = within(child_watch.changed()).await;
    assert_eq!(
        (ev.event_type, ev.path.as_str()),
        (zk::EventType::NodeChildrenChanged, "/w")
    );

    // One-shot: the next change is not reported to the spent watches, and a
    // fresh data watch sees a delete.
    let (_, _, data_watch) = within(c.get_and_watch_data("/w/new")).await.unwrap();
    within(writer.delete("/w/new", None)).await.unwrap();
    let ev = within(data_watch.changed()).await;
    assert_eq!(
        (ev.event_type, ev.path.as_str()),
        (zk::EventType::NodeDeleted, "/w/new")
    );
}

#[tokio::test]
async fn persistent_watch_sees_its_own_node_and_child_list() {
    let server = ZkdProcess::start();
    let c = connect(&server.addr(), SESSION).await;
    let writer = connect(&server.addr(), SESSION).await;
    let mut w = within(c.watch("/p", zk::AddWatchMode::Persistent))
        .await
        .unwrap();
    within(writer.create("/p", b"", &persistent()))
        .await
        .unwrap();
    assert_eq!(
        within(w.changed()).await.event_type,
        zk::EventType::NodeCreated
    );
    within(writer.create("/p/a", b"", &persistent()))
        .await
        .unwrap();
    let ev = within(w.changed()).await;
    assert_eq!(
        (ev.event_type, ev.path.as_str()),
        (zk::EventType::NodeChildrenChanged, "/p")
    );
    within(writer.create("/p/a/deep", b"", &persistent()))
        .await
        .unwrap();
    no_event(&mut w).await;
    within(writer.set_data("/p", b"1", None)).await.unwrap();
    assert_eq!(
        within(w.changed()).await.event_type,
        zk::EventType::NodeDataChanged
    );
    within(writer.set_data("/p", b"2", None)).await.unwrap();
    assert_eq!(
        within(w.changed()).await.event_type,
        zk::EventType::NodeDataChanged,
        "persistent watches stay"
    );
}

#[tokio::test]
async fn recursive_watch_sees_descendants_but_never_child_events() {
    let server = ZkdProcess::start();
    let c = connect(&server.addr(), SESSION).await;
    let writer = connect(&server.addr(), SESSION).await;
    within(writer.create("/r", b"", &persistent()))
        .await
        .unwrap();
    let mut w = within(c.watch("/r", zk::AddWatchMode::PersistentRecursive))
        .await
        .unwrap();
    within(writer.create("/r/a", b"", &persistent()))
        .await
        .unwrap();
    let ev = within(w.changed()).await;
    assert_eq!(
        (ev.event_type, ev.path.as_str()),
        (zk::EventType::NodeCreated, "/r/a")
    );
    within(writer.create("/r/a/b", b"", &persistent()))
        .await
        .unwrap();
    let ev = within(w.changed()).await;
    assert_eq!(
        (ev.event_type, ev.path.as_str()),
        (zk::EventType::NodeCreated, "/r/a/b")
    );
    within(writer.set_data("/r/a", b"x", None)).await.unwrap();
    let ev = within(w.changed()).await;
    assert_eq!(
        (ev.event_type, ev.path.as_str()),
        (zk::EventType::NodeDataChanged, "/r/a")
    );
    within(writer.delete("/r/a/b", None)).await.unwrap();
    let ev = within(w.changed()).await;
    assert_eq!(
        (ev.event_type, ev.path.as_str()),
        (zk::EventType::NodeDeleted, "/r/a/b")
    );
    within(writer.create("/other", b"", &persistent()))
        .await
        .unwrap();
    no_event(&mut w).await;
}

#[tokio::test]
async fn notifications_are_filtered_by_read_permission() {
    // 3.9.2+ (ZOOKEEPER-4799): a watcher without READ on the node hears nothing.
    let server = ZkdProcess::start();
    let owner = connect(&server.addr(), SESSION).await;
    within(owner.auth("digest", b"alice:secret")).await.unwrap();
    let snoop = connect(&server.addr(), SESSION).await;
    let mut w = within(snoop.watch("/", zk::AddWatchMode::PersistentRecursive))
        .await
        .unwrap();
    let private = zk::CreateMode::Persistent.with_acls(zk::Acls::creator_all());
    within(owner.create("/private", b"", &private))
        .await
        .unwrap();
    no_event(&mut w).await;
    within(owner.create("/public", b"", &persistent()))
        .await
        .unwrap();
    let ev = within(w.changed()).await;
    assert_eq!(ev.path, "/public");
}

#[tokio::test]
async fn child_watch_fires_on_delete_of_the_watched_node() {
    let server = ZkdProcess::start();
    let c = connect(&server.addr(), SESSION).await;
    within(c.create("/gone", b"", &persistent())).await.unwrap();
    let (_, w) = within(c.list_and_watch_children("/gone")).await.unwrap();
    within(c.delete("/gone", None)).await.unwrap();
    let ev = within(w.changed()).await;
    assert_eq!(
        (ev.event_type, ev.path.as_str()),
        (zk::EventType::NodeDeleted, "/gone")
    );
}
