//! The data model through the stock Rust client: create modes, Stat fields,
//! versions and their errors, sequential numbering, system nodes, multi.

use std::time::Duration;
use zkd_client_tests::{connect, persistent, within, ZkdProcess};
use zookeeper_client as zk;

const SESSION: Duration = Duration::from_secs(10);

#[tokio::test]
async fn fresh_server_has_zookeeper_system_nodes() {
    let server = ZkdProcess::start();
    let c = connect(&server.addr(), SESSION).await;
    assert_eq!(
        within(c.list_children("/")).await.unwrap(),
        vec!["zookeeper".to_string()]
    );
    let mut kids = within(c.list_children("/zookeeper")).await.unwrap();
    kids.sort();
    assert_eq!(kids, vec!["config", "quota"]);
    let (_, root) = within(c.get_data("/")).await.unwrap();
    assert_eq!(root.cversion, -1);
    let (acl, config) = within(c.get_acl("/zookeeper/config")).await.unwrap();
    assert_eq!(config.aversion, -1);
    assert_eq!(
        acl,
        vec![zk::Acl::new(zk::Permission::READ, zk::AuthId::anyone())]
    );
    assert_eq!(within(c.count_descendants_number("/")).await.unwrap(), 3);
    // The config node is read-only for the world.
    assert_eq!(
        within(c.set_data("/zookeeper/config", b"x", None))
            .await
            .unwrap_err(),
        zk::Error::NoAuth
    );
    // System nodes cannot be deleted.
    assert!(matches!(
        within(c.delete("/zookeeper", None)).await.unwrap_err(),
        zk::Error::BadArguments(_)
    ));
}

#[tokio::test]
async fn stat_fields_follow_zookeeper_rules() {
    let server = ZkdProcess::start();
    let c = connect(&server.addr(), SESSION).await;
    let (created, _) = within(c.create("/s", b"abc", &persistent())).await.unwrap();
    assert_eq!(created.czxid, created.mzxid);
    assert_eq!(created.czxid, created.pzxid);
    assert_eq!(created.ctime, created.mtime);
    assert_eq!(
        (created.version, created.cversion, created.aversion),
        (0, 0, 0)
    );
    assert_eq!(
        (
            created.data_length,
            created.num_children,
            created.ephemeral_owner
        ),
        (3, 0, 0)
    );

    let (child, _) = within(c.create("/s/c", b"", &persistent())).await.unwrap();
    let (_, parent) = within(c.get_data("/s")).await.unwrap();
    assert_eq!(
        parent.pzxid, child.czxid,
        "child create moves the parent's pzxid"
    );
    assert_eq!(
        parent.mzxid, created.mzxid,
        "child create leaves the parent's mzxid"
    );
    assert_eq!((parent.cversion, parent.num_children), (1, 1));

    within(c.delete("/s/c", None)).await.unwrap();
    let (_, parent) = within(c.get_data("/s")).await.unwrap();
    assert_eq!(
        parent.cversion, 2,
        "visible cversion counts creates plus deletes"
    );
    assert!(parent.pzxid > child.czxid);

    let set = within(c.set_data("/s", b"defg", Some(0))).await.unwrap();
    assert_eq!((set.version, set.data_length), (1, 4));
    assert!(set.mzxid > created.mzxid);
    assert_eq!(set.czxid, created.czxid);
    let set_acl = within(c.set_acl("/s", zk::Acls::anyone_all().as_ref(), Some(0)))
        .await
        .unwrap();
    assert_eq!(
        (set_acl.aversion, set_acl.mzxid),
        (1, set.mzxid),
        "setACL moves only aversion"
    );
}

#[tokio::test]
async fn versions_and_error_codes() {
    let server = ZkdProcess::start();
    let c = connect(&server.addr(), SESSION).await;
    within(c.create("/v", b"1", &persistent())).await.unwrap();
    assert_eq!(
        within(c.create("/v", b"", &persistent()))
            .await
            .unwrap_err(),
        zk::Error::NodeExists
    );
    assert_eq!(
        within(c.create("/missing/child", b"", &persistent()))
            .await
            .unwrap_err(),
        zk::Error::NoNode
    );
    assert_eq!(
        within(c.set_data("/v", b"2", Some(7))).await.unwrap_err(),
        zk::Error::BadVersion
    );
    assert_eq!(
        within(c.delete("/v", Some(3))).await.unwrap_err(),
        zk::Error::BadVersion
    );
    assert_eq!(
        within(c.set_acl("/v", zk::Acls::anyone_all().as_ref(), Some(5)))
            .await
            .unwrap_err(),
        zk::Error::BadVersion
    );
    within(c.create("/v/kid", b"", &persistent()))
        .await
        .unwrap();
    assert_eq!(
        within(c.delete("/v", None)).await.unwrap_err(),
        zk::Error::NotEmpty
    );
    assert_eq!(
        within(c.delete("/nope", None)).await.unwrap_err(),
        zk::Error::NoNode
    );
    assert_eq!(
        within(c.get_data("/nope")).await.unwrap_err(),
        zk::Error::NoNode
    );
    assert_eq!(within(c.check_stat("/nope")).await.unwrap(), None);
    assert_eq!(
        within(c.set_data("/nope", b"", None)).await.unwrap_err(),
        zk::Error::NoNode
    );
    let eph = zk::CreateMode::Ephemeral.with_acls(zk::Acls::anyone_all());
    within(c.create("/e", b"", &eph)).await.unwrap();
    assert_eq!(
        within(c.create("/e/kid", b"", &persistent()))
            .await
            .unwrap_err(),
        zk::Error::NoChildrenForEphemerals
    );
    // -1 matches any version.
    within(c.set_data("/v", b"3", None)).await.unwrap();
    within(c.delete("/v/kid", Some(0))).await.unwrap();
}

#[tokio::test]
async fn sequential_suffix_comes_from_the_parent_cversion() {
    let server = ZkdProcess::start();
    let c = connect(&server.addr(), SESSION).await;
    within(c.create("/q", b"", &persistent())).await.unwrap();
    let seq = zk::CreateMode::PersistentSequential.with_acls(zk::Acls::anyone_all());
    let (_, first) = within(c.create("/q/n-", b"", &seq)).await.unwrap();
    assert_eq!(first.to_string(), "0000000000");
    within(c.create("/q/plain", b"", &persistent()))
        .await
        .unwrap();
    within(c.delete("/q/plain", None)).await.unwrap();
    // A failed create consumes no sequence number.
    assert!(within(c.create("/q/plain/x-", b"", &seq)).await.is_err());
    let (_, next) = within(c.create("/q/n-", b"", &seq)).await.unwrap();
    assert_eq!(next.to_string(), "0000000002");
    let mut kids = within(c.list_children("/q")).await.unwrap();
    kids.sort();
    assert_eq!(kids, vec!["n-0000000000", "n-0000000002"]);
}

#[tokio::test]
async fn ephemeral_owner_and_list_ephemerals() {
    let server = ZkdProcess::start();
    let c = connect(&server.addr(), SESSION).await;
    let other = connect(&server.addr(), SESSION).await;
    let eph = zk::CreateMode::Ephemeral.with_acls(zk::Acls::anyone_all());
    let (stat, _) = within(c.create("/mine", b"", &eph)).await.unwrap();
    assert_eq!(stat.ephemeral_owner, c.session_id().0);
    within(other.create("/theirs", b"", &eph)).await.unwrap();
    within(c.create("/dir", b"", &persistent())).await.unwrap();
    within(c.create("/dir/e", b"", &eph)).await.unwrap();
    let mut mine = within(c.list_ephemerals("/")).await.unwrap();
    mine.sort();
    assert_eq!(mine, vec!["/dir/e", "/mine"]);
    assert_eq!(
        within(c.list_ephemerals("/dir")).await.unwrap(),
        vec!["/dir/e"]
    );
    drop(c);
    // Closing the session removes its ephemerals only.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(within(other.check_stat("/mine")).await.unwrap(), None);
    assert!(within(other.check_stat("/theirs")).await.unwrap().is_some());
}

#[tokio::test]
async fn null_and_empty_data_and_large_values() {
    let server = ZkdProcess::start();
    let c = connect(&server.addr(), SESSION).await;
    within(c.create("/empty", b"", &persistent()))
        .await
        .unwrap();
    let (data, stat) = within(c.get_data("/empty")).await.unwrap();
    assert!(data.is_empty());
    assert_eq!(stat.data_length, 0);
    let big = vec![7u8; 1000 * 1000];
    within(c.create("/big", &big, &persistent())).await.unwrap();
    let (data, stat) = within(c.get_data("/big")).await.unwrap();
    assert_eq!(data, big);
    assert_eq!(stat.data_length, big.len() as i32);
}

#[tokio::test]
async fn multi_is_all_or_nothing() {
    let server = ZkdProcess::start();
    let c = connect(&server.addr(), SESSION).await;
    within(c.create("/m1", b"", &persistent())).await.unwrap();
    let mut w = c.new_multi_writer();
    w.add_create("/m2", b"x", &persistent()).unwrap();
    w.add_create("/m1", b"", &persistent()).unwrap();
    w.add_set_data("/m1", b"y", None).unwrap();
    let err = within(w.commit()).await.unwrap_err();
    assert_eq!(
        err,
        zk::MultiWriteError::OperationFailed {
            index: 1,
            source: zk::Error::NodeExists
        }
    );
    assert_eq!(
        within(c.check_stat("/m2")).await.unwrap(),
        None,
        "nothing of a failed multi is applied"
    );

    let mut w = c.new_multi_writer();
    w.add_create("/m2", b"x", &persistent()).unwrap();
    w.add_check_version("/m1", 0).unwrap();
    w.add_set_data("/m1", b"y", Some(0)).unwrap();
    w.add_create("/m2/kid", b"", &persistent()).unwrap();
    w.add_delete("/m2/kid", None).unwrap();
    let results = within(w.commit()).await.unwrap();
    assert_eq!(results.len(), 5);
    let zxids: Vec<i64> = results
        .iter()
        .filter_map(|r| match r {
            zk::MultiWriteResult::Create { stat, .. } => Some(stat.czxid),
            zk::MultiWriteResult::SetData { stat } => Some(stat.mzxid),
            _ => None,
        })
        .collect();
    assert!(
        zxids.windows(2).all(|w| w[0] == w[1]),
        "one zxid for the whole multi: {zxids:?}"
    );
    assert!(matches!(&results[0], zk::MultiWriteResult::Create { path, .. } if path == "/m2"));
    assert!(matches!(results[1], zk::MultiWriteResult::Check));
    assert!(matches!(results[4], zk::MultiWriteResult::Delete));
    assert_eq!(within(c.get_data("/m1")).await.unwrap().0, b"y");

    let mut r = c.new_multi_reader();
    r.add_get_data("/m1").unwrap();
    r.add_get_children("/m2").unwrap();
    r.add_get_data("/absent").unwrap();
    let results = within(r.commit()).await.unwrap();
    assert!(matches!(&results[0], zk::MultiReadResult::Data { data, .. } if data == b"y"));
    assert!(
        matches!(&results[1], zk::MultiReadResult::Children { children } if children.is_empty())
    );
    assert!(matches!(
        &results[2],
        zk::MultiReadResult::Error {
            err: zk::Error::NoNode
        }
    ));
}

#[tokio::test]
async fn containers_are_removed_once_emptied() {
    let server = ZkdProcess::start_with(
        zkd_client_tests::ServerOptions::default().with("znode.container.checkIntervalMs", "100"),
    );
    let c = connect(&server.addr(), SESSION).await;
    let container = zk::CreateMode::Container.with_acls(zk::Acls::anyone_all());
    let (stat, _) = within(c.create("/box", b"", &container)).await.unwrap();
    assert_eq!(stat.ephemeral_owner, 0, "containers show no owner");
    within(c.create("/never-used", b"", &container))
        .await
        .unwrap();
    within(c.create("/box/item", b"", &persistent()))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(
        within(c.check_stat("/box")).await.unwrap().is_some(),
        "a non-empty container stays"
    );
    within(c.delete("/box/item", None)).await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while within(c.check_stat("/box")).await.unwrap().is_some() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "emptied container was not removed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        within(c.check_stat("/never-used")).await.unwrap().is_some(),
        "never-used containers stay"
    );
}

#[tokio::test]
async fn ttl_nodes_need_extended_types_and_expire() {
    let plain = ZkdProcess::start();
    let c = connect(&plain.addr(), SESSION).await;
    let ttl = zk::CreateMode::Persistent
        .with_acls(zk::Acls::anyone_all())
        .with_ttl(Duration::from_millis(200));
    assert_eq!(
        within(c.create("/t", b"", &ttl)).await.unwrap_err(),
        zk::Error::Unimplemented
    );

    let server = ZkdProcess::start_with(
        zkd_client_tests::ServerOptions::default()
            .with("extendedTypesEnabled", "true")
            .with("znode.container.checkIntervalMs", "100"),
    );
    let c = connect(&server.addr(), SESSION).await;
    let (stat, _) = within(c.create("/t", b"", &ttl)).await.unwrap();
    assert_eq!(stat.ephemeral_owner, 0, "TTL nodes show no owner");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while within(c.check_stat("/t")).await.unwrap().is_some() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "TTL node was not removed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn sync_and_pipelined_requests_keep_order() {
    let server = ZkdProcess::start();
    let c = connect(&server.addr(), SESSION).await;
    within(c.sync("/")).await.unwrap();
    within(c.create("/p", b"", &persistent())).await.unwrap();
    // Requests are sent when called: issue many before awaiting any.
    let writes: Vec<_> = (0..200)
        .map(|i| c.set_data("/p", format!("{i}").as_bytes(), None))
        .collect();
    let read = c.get_data("/p");
    let mut last = 0;
    for w in writes {
        let stat = within(w).await.unwrap();
        assert!(stat.version > last);
        last = stat.version;
    }
    let (data, stat) = within(read).await.unwrap();
    assert_eq!(data, b"199", "a read sees its session's earlier writes");
    assert_eq!(stat.version, 200);
}
