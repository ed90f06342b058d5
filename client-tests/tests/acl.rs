//! ACLs and authentication: world, auth, digest and ip schemes, `addauth
//! digest`, superDigest, getACL masking and permission checks per op.

use std::time::Duration;
use zkd_client_tests::{connect, persistent, within, ServerOptions, ZkdProcess};
use zookeeper_client as zk;

const SESSION: Duration = Duration::from_secs(10);
// digest of "user:pass" as ZooKeeper computes it (base64 of SHA-1).
const USER_PASS: &str = "user:smGaoVKd/cQkjm7b88GyorAUz20=";

fn acl(perm: zk::Permission, scheme: &str, id: &str) -> zk::Acl {
    zk::Acl::new(perm, zk::AuthId::new(scheme, id))
}

#[tokio::test]
async fn digest_acl_guards_every_operation() {
    let server = ZkdProcess::start();
    let admin = connect(&server.addr(), SESSION).await;
    within(admin.auth("digest", b"user:pass")).await.unwrap();
    let stranger = connect(&server.addr(), SESSION).await;
    let acls = [acl(zk::Permission::ALL, "digest", USER_PASS)];
    let opts = zk::CreateMode::Persistent.with_acls(zk::Acls::new(&acls));
    within(admin.create("/locked", b"secret", &opts))
        .await
        .unwrap();

    assert_eq!(
        within(stranger.get_data("/locked")).await.unwrap_err(),
        zk::Error::NoAuth
    );
    assert_eq!(
        within(stranger.set_data("/locked", b"x", None))
            .await
            .unwrap_err(),
        zk::Error::NoAuth
    );
    assert_eq!(
        within(stranger.create("/locked/kid", b"", &persistent()))
            .await
            .unwrap_err(),
        zk::Error::NoAuth
    );
    assert_eq!(
        within(stranger.list_children("/locked")).await.unwrap_err(),
        zk::Error::NoAuth
    );
    // 3.9.2+ (ZOOKEEPER-2590): exists on an existing node needs READ; 3.8.0 did not check.
    assert_eq!(
        within(stranger.check_stat("/locked")).await.unwrap_err(),
        zk::Error::NoAuth
    );
    assert_eq!(
        within(stranger.get_acl("/locked")).await.unwrap_err(),
        zk::Error::NoAuth
    );
    assert_eq!(
        within(stranger.set_acl("/locked", zk::Acls::anyone_all().as_ref(), None))
            .await
            .unwrap_err(),
        zk::Error::NoAuth
    );

    // A wrong password is accepted as an auth packet but matches nothing.
    within(stranger.auth("digest", b"user:wrong"))
        .await
        .unwrap();
    assert_eq!(
        within(stranger.get_data("/locked")).await.unwrap_err(),
        zk::Error::NoAuth
    );
    within(stranger.auth("digest", b"user:pass")).await.unwrap();
    assert_eq!(
        within(stranger.get_data("/locked")).await.unwrap().0,
        b"secret"
    );
}

#[tokio::test]
async fn get_acl_masks_digests_without_admin() {
    let server = ZkdProcess::start();
    let owner = connect(&server.addr(), SESSION).await;
    within(owner.auth("digest", b"user:pass")).await.unwrap();
    let acls = [
        acl(zk::Permission::ALL, "digest", USER_PASS),
        acl(zk::Permission::READ, "world", "anyone"),
    ];
    let opts = zk::CreateMode::Persistent.with_acls(zk::Acls::new(&acls));
    within(owner.create("/m", b"", &opts)).await.unwrap();
    let (full, _) = within(owner.get_acl("/m")).await.unwrap();
    assert_eq!(full[0].id(), USER_PASS);
    let reader = connect(&server.addr(), SESSION).await;
    let (masked, _) = within(reader.get_acl("/m")).await.unwrap();
    assert_eq!(masked[0].id(), "user:x");
    assert_eq!(masked[1].id(), "anyone");
}

#[tokio::test]
async fn auth_scheme_expands_to_authenticated_ids_only() {
    let server = ZkdProcess::start();
    let c = connect(&server.addr(), SESSION).await;
    let creator = zk::CreateMode::Persistent.with_acls(zk::Acls::creator_all());
    // Without an authenticated id, `auth` expands to nothing: INVALIDACL (ip does not count).
    assert_eq!(
        within(c.create("/a", b"", &creator)).await.unwrap_err(),
        zk::Error::InvalidAcl
    );
    within(c.auth("digest", b"user:pass")).await.unwrap();
    within(c.create("/a", b"", &creator)).await.unwrap();
    let (acls, _) = within(c.get_acl("/a")).await.unwrap();
    assert_eq!(acls, vec![acl(zk::Permission::ALL, "digest", USER_PASS)]);
}

#[tokio::test]
async fn invalid_acls_are_refused() {
    let server = ZkdProcess::start();
    let c = connect(&server.addr(), SESSION).await;
    for bad in [
        acl(zk::Permission::ALL, "world", "someone"),
        acl(zk::Permission::ALL, "digest", "no-colon"),
        acl(zk::Permission::ALL, "ip", "not-an-ip"),
        acl(zk::Permission::ALL, "nosuchscheme", "x"),
    ] {
        let list = [bad];
        let opts = zk::CreateMode::Persistent.with_acls(zk::Acls::new(&list));
        assert_eq!(
            within(c.create("/bad", b"", &opts)).await.unwrap_err(),
            zk::Error::InvalidAcl,
            "{list:?}"
        );
    }
}

#[tokio::test]
async fn ip_acls_match_address_prefixes() {
    let server = ZkdProcess::start();
    let c = connect(&server.addr(), SESSION).await;
    let local = [acl(zk::Permission::ALL, "ip", "127.0.0.0/8")];
    within(c.create(
        "/local",
        b"ok",
        &zk::CreateMode::Persistent.with_acls(zk::Acls::new(&local)),
    ))
    .await
    .unwrap();
    assert_eq!(within(c.get_data("/local")).await.unwrap().0, b"ok");
    let remote = [acl(zk::Permission::ALL, "ip", "10.1.2.3")];
    within(c.create(
        "/remote",
        b"",
        &zk::CreateMode::Persistent.with_acls(zk::Acls::new(&remote)),
    ))
    .await
    .unwrap();
    assert_eq!(
        within(c.get_data("/remote")).await.unwrap_err(),
        zk::Error::NoAuth
    );
}

#[tokio::test]
async fn super_digest_bypasses_acls_and_who_am_i_lists_ids() {
    // superDigest for "super:admin".
    let digest = "super:xQJmxLMiHGwaqBvst5y6rkB6HQs=";
    let server = ZkdProcess::start_with(
        ServerOptions::default().with("DigestAuthenticationProvider.superDigest", digest),
    );
    let owner = connect(&server.addr(), SESSION).await;
    within(owner.auth("digest", b"user:pass")).await.unwrap();
    let acls = [acl(zk::Permission::ALL, "digest", USER_PASS)];
    within(owner.create(
        "/s",
        b"v",
        &zk::CreateMode::Persistent.with_acls(zk::Acls::new(&acls)),
    ))
    .await
    .unwrap();

    let root = connect(&server.addr(), SESSION).await;
    within(root.auth("digest", b"super:admin")).await.unwrap();
    assert_eq!(within(root.get_data("/s")).await.unwrap().0, b"v");
    let users = within(root.list_auth_users()).await.unwrap();
    let schemes: Vec<&str> = users.iter().map(|u| u.scheme()).collect();
    assert!(
        schemes.contains(&"ip") && schemes.contains(&"super") && schemes.contains(&"digest"),
        "{users:?}"
    );
    let me = within(owner.list_auth_users()).await.unwrap();
    assert!(me.contains(&zk::AuthUser::new("ip", "127.0.0.1")), "{me:?}");
    assert!(me.contains(&zk::AuthUser::new("digest", "user")), "{me:?}");
}
