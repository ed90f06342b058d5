//! Unit tests of the ensemble layout and its checks.

use super::*;

fn args(nodes: usize, base_port: u16) -> EnsembleArgs {
    EnsembleArgs {
        nodes,
        observers: 0,
        dir: PathBuf::from("unused"),
        base_port,
        host: "127.0.0.1".into(),
        tick_time: 2000,
        fault_port: None,
        reconfig: false,
    }
}

#[test]
fn ports_follow_zookeepers_single_host_layout() {
    let m = members(&args(3, 2181)).unwrap();
    assert_eq!(
        connect_string(&m),
        "127.0.0.1:2181,127.0.0.1:2182,127.0.0.1:2183"
    );
    assert_eq!(m[0].server_line(), "server.1=127.0.0.1:2888:3888");
    assert_eq!(m[2].server_line(), "server.3=127.0.0.1:2890:3890");
    assert_eq!(
        m[0].admin_port, 8080,
        "ZooKeeper's default AdminServer port"
    );
    assert_eq!(m[2].admin_port, 8082);
}

#[test]
fn even_or_oversized_ensembles_and_overflowing_ports_are_refused() {
    for n in [0, 2, 4, 8, 9] {
        assert!(matches!(
            members(&args(n, 2181)),
            Err(EnsembleError::Invalid(_))
        ));
    }
    for n in [1, 3, 5, 7] {
        assert_eq!(members(&args(n, 2181)).unwrap().len(), n);
    }
    assert!(members(&args(7, 65535 - 5905)).is_ok());
    assert!(members(&args(7, 65535 - 5904)).is_err());
    assert!(members(&args(3, 0)).is_err());
}

#[test]
fn zoo_cfg_is_accepted_by_the_config_parser() {
    let m = members(&args(5, 2181)).unwrap();
    let text = zoo_cfg(&m, &m[1], "/tmp/x/node2/data", 2000);
    let mut props = crate::config::parse_properties(&text);
    props.insert("myid".into(), "2".into());
    let c = crate::config::Config::from_properties(&props).unwrap();
    assert_eq!(c.client_port, Some(2182));
    assert_eq!(c.servers.len(), 5);
    assert_eq!(c.servers[&5].election_port, 3892);
    assert_eq!(c.init_limit, Some(10));
    assert!(c.is_quorum());
}

#[test]
fn observers_follow_the_voters_with_observer_lines() {
    let with = |nodes, observers| EnsembleArgs {
        observers,
        ..args(nodes, 2181)
    };
    let m = members(&with(3, 2)).unwrap();
    assert_eq!(m.len(), 5);
    assert_eq!(m[3].server_line(), "server.4=127.0.0.1:2891:3891:observer");
    assert!(!m[2].observer && m[4].observer);
    let text = zoo_cfg(&m, &m[4], "/tmp/x/node5/data", 2000);
    let mut props = crate::config::parse_properties(&text);
    props.insert("myid".into(), "5".into());
    let c = crate::config::Config::from_properties(&props).unwrap();
    assert!(c.servers[&5].observer && c.is_quorum());
    assert!(members(&with(1, 1)).is_err(), "observers need an ensemble");
    assert!(members(&with(5, 3)).is_err(), "at most 7 members in all");
}

#[test]
fn mode_and_leader_lines() {
    let reply = "Zookeeper version: 3.9.5\nZxid: 0x0\nMode: follower\nNode count: 4\n";
    assert_eq!(parse_mode(reply), Some("follower"));
    assert_eq!(parse_mode("imok"), None);
    let m = members(&args(3, 2181)).unwrap();
    assert_eq!(describe_leaders(&m, &[]), "no leader");
    assert_eq!(
        describe_leaders(&m, &[2]),
        "leader is node2 (127.0.0.1:2182)"
    );
}

/// `--reconfig`: zoo.cfg enables reconfig for a super user whose password
/// is kept in DIR; a rerun keeps a recorded membership that names the
/// member, and a member a reconfig left out starts from the flags' members.
#[test]
fn reconfig_files_keep_the_recorded_membership() {
    let dir = tempfile::tempdir().unwrap();
    let user = SuperUser::load_or_create(dir.path()).unwrap();
    assert_eq!(user.password.len(), 32);
    assert_eq!(SuperUser::load_or_create(dir.path()).unwrap(), user, "kept");
    let m = members(&args(3, 2181)).unwrap();
    let text = zoo_cfg_with_reconfig(&m, &m[0], "/tmp/x/node1/data", 2000, &user, None);
    let mut props = crate::config::parse_properties(&text);
    props.insert("myid".into(), "1".into());
    let c = crate::config::Config::from_properties(&props).unwrap();
    assert!(c.reconfig_enabled);
    assert_eq!(c.client_port, Some(2181), "from its server line");
    assert!(text.contains(&format!(
        "DigestAuthenticationProvider.superDigest={}",
        crate::core::acl::digest_id(&format!("super:{}", user.password))
    )));

    let dynamic = dir.path().join("zoo.cfg.dynamic.100000003");
    let pointer = format!("dynamicConfigFile={}", dynamic.display());
    let rewritten = format!("tickTime=2000\n{pointer}\n");
    assert_eq!(recorded_dynamic_file(&rewritten, 1), None, "no file yet");
    std::fs::write(
        &dynamic,
        format!(
            "{}\n{}\n",
            m[0].dynamic_server_line(),
            m[1].dynamic_server_line()
        ),
    )
    .unwrap();
    assert_eq!(recorded_dynamic_file(&rewritten, 1), Some(pointer.as_str()));
    let rerun = zoo_cfg_with_reconfig(&m, &m[0], "/d", 2000, &user, Some(&pointer));
    assert!(rerun.ends_with(&format!("{pointer}\n")) && !rerun.contains("server."));
    assert_eq!(restore_left_out(&rewritten, &m[0], &m), None);

    // Member 3 is not in its recorded file: the flags' members stand.
    assert_eq!(recorded_dynamic_file(&rewritten, 3), None);
    let restored = restore_left_out(&rewritten, &m[2], &m).unwrap();
    assert!(!restored.contains("dynamicConfigFile"), "{restored}");
    assert!(restored.contains("server.3=127.0.0.1:2890:3890:participant;127.0.0.1:2183"));
    assert_eq!(restore_left_out(&text, &m[2], &m), None, "nothing recorded");
}
