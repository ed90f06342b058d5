//! (a) sync on a partitioned old leader (ZOOKEEPER-1675).

use super::*;

/// What one sync-then-read by the client of the old leader gave.
#[derive(Debug)]
enum Outcome {
    Read(Vec<u8>),
    Failed(String),
}

/// Client A is connected to the leader L only. L is cut off from the other two
/// members, which elect a new leader and acknowledge `/x = new`. From then on,
/// every `sync("/x")` + `get("/x")` A completes through L must see `new`;
/// failing (connection loss, timeout) is fine, the old value is not.
///
/// ZooKeeper 3.8 answers a sync on the leader locally, so in the window
/// between the new leader's first commit and L noticing it lost its quorum, A
/// reads the old value. To hold that window open for seconds rather than
/// hoping to hit it, L's syncLimit is 12 ticks (6 s before it gives up on its
/// followers) and the followers' is 2 (1 s before they give up on L). The test
/// checks that L still claimed to lead when the write was acknowledged, so a
/// run that missed the window fails instead of passing vacuously. A zkd whose
/// leader answers sync locally, as ZooKeeper's does, fails here with nearly
/// every sync + read after the acknowledgement returning `old`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sync_then_read_on_a_partitioned_old_leader_is_never_stale() {
    const FOLLOWER_SYNC_LIMIT: u64 = 2;
    const LEADER_SYNC_LIMIT: u64 = 12;
    let l = 2;
    let options = (0..3)
        .map(|i| {
            member_options(if i == l {
                LEADER_SYNC_LIMIT
            } else {
                FOLLOWER_SYNC_LIMIT
            })
        })
        .collect();
    // Member 3 first: with equal logs the largest myid of the first quorum leads.
    let mut ensemble = Ensemble::start_in_namespaces(options, &[2, 1, 0]);
    for _ in 0..3 {
        let leader = ensemble.leader().expect("a leader");
        if leader == l {
            break;
        }
        // Re-elect among the other two, which include member 3.
        ensemble.members[leader].restart();
        ensemble.wait_until_serving(&[0, 1, 2]);
    }
    assert_eq!(
        ensemble.leader(),
        Some(l),
        "member {} should lead; logs:\n{}",
        l + 1,
        ensemble.logs()
    );

    let a = connect(&ensemble.members[l].addr(), SESSION).await;
    within(a.create("/x", b"old", &persistent())).await.unwrap();
    let b = connect(&ensemble.connect_string(&[0, 1]), SESSION).await;
    within(b.sync("/x")).await.unwrap();
    assert_eq!(within(b.get_data("/x")).await.unwrap().0, b"old");
    within(a.sync("/x")).await.unwrap();

    // Watch L's srvr from a thread of its own: when does it stop serving?
    let (host, port) = (ensemble.members[l].host.clone(), ensemble.members[l].port);
    let done = Arc::new(AtomicBool::new(false));
    let partitioned = Instant::now();
    ensemble.isolate(l);
    let watcher = {
        let done = done.clone();
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) && partitioned.elapsed() < Duration::from_secs(30) {
                let serving = four_letter_word_at(&host, port, "srvr")
                    .is_ok_and(|r| r.lines().any(|l| l.starts_with("Mode: ")));
                if !serving {
                    return Some(partitioned.elapsed());
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            None
        })
    };

    // A new leader among the other two.
    let deadline = partitioned + Duration::from_secs(20);
    let new_leader = loop {
        if let Some(i) = [0, 1]
            .into_iter()
            .find(|i| ensemble.mode(*i).as_deref() == Some("leader"))
        {
            break i;
        }
        assert!(
            Instant::now() < deadline,
            "no new leader among members 1 and 2 within 20 s; logs:\n{}",
            ensemble.logs()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    eventually(Duration::from_secs(20), "set /x = new through B", || {
        b.set_data("/x", b"new", None)
    })
    .await;
    let acked = partitioned.elapsed();
    let old_leader_mode = ensemble.mode(l);
    assert_eq!(
        old_leader_mode.as_deref(),
        Some("leader"),
        "the old leader had stopped claiming to lead before the new leader (member {}) \
         acknowledged /x = new {acked:?} after the partition: this run could not catch a stale read",
        new_leader + 1
    );

    // A: sync + read through L, over and over, until a while after L should
    // have stepped down.
    let until = partitioned
        + Duration::from_millis((LEADER_SYNC_LIMIT + 2) * TICK_MS)
        + Duration::from_secs(2);
    let mut outcomes: Vec<(Duration, Outcome)> = Vec::new();
    while Instant::now() < until {
        let started = partitioned.elapsed();
        let outcome = match tokio::time::timeout(Duration::from_secs(1), a.sync("/x")).await {
            Ok(Ok(())) => {
                match tokio::time::timeout(Duration::from_secs(1), a.get_data("/x")).await {
                    Ok(Ok((data, _))) => Outcome::Read(data),
                    Ok(Err(e)) => Outcome::Failed(format!("get: {e}")),
                    Err(_) => Outcome::Failed("get timed out".into()),
                }
            }
            Ok(Err(e)) => Outcome::Failed(format!("sync: {e}")),
            Err(_) => Outcome::Failed("sync timed out".into()),
        };
        if matches!(outcome, Outcome::Failed(_)) {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        outcomes.push((started, outcome));
    }
    let stale: Vec<(Duration, String)> = outcomes
        .iter()
        .filter_map(|(t, o)| match o {
            Outcome::Read(d) if d != b"new" => Some((*t, String::from_utf8_lossy(d).into_owned())),
            _ => None,
        })
        .collect();
    assert!(
        stale.is_empty(),
        "{} of {} sync + reads through the partitioned old leader returned a value older than \
         /x = new, acknowledged {acked:?} after the partition; the first (started after, value): {:?}",
        stale.len(),
        outcomes.len(),
        &stale[..stale.len().min(5)]
    );
    assert!(!outcomes.is_empty());

    // L stops serving once it has been without its followers for its syncLimit.
    done.store(true, Ordering::Relaxed);
    let stopped = watcher.join().unwrap();
    let bound = Duration::from_millis((LEADER_SYNC_LIMIT + 2) * TICK_MS) + Duration::from_secs(1);
    assert!(
        stopped.is_some_and(|t| t <= bound),
        "the partitioned old leader stopped serving after {stopped:?}, bound {bound:?}; log:\n{}",
        ensemble.members[l].log()
    );
    let fresh = outcomes
        .iter()
        .filter(|(_, o)| matches!(o, Outcome::Read(_)))
        .count();
    let failures: BTreeSet<&str> = outcomes
        .iter()
        .filter_map(|(_, o)| match o {
            Outcome::Failed(why) => Some(why.as_str()),
            Outcome::Read(_) => None,
        })
        .collect();
    eprintln!(
        "new leader: member {}; /x = new acknowledged {acked:?} after the partition; the old leader \
         stopped serving after {stopped:?}; A: {} sync+reads, {fresh} fresh, failures {failures:?}",
        new_leader + 1,
        outcomes.len()
    );

    // Heal: one leader, everyone has /x = new.
    ensemble.heal(l);
    ensemble.wait_until_serving(&[0, 1, 2]);
    let modes: Vec<Option<String>> = (0..3).map(|i| ensemble.mode(i)).collect();
    assert_eq!(
        modes
            .iter()
            .filter(|m| m.as_deref() == Some("leader"))
            .count(),
        1,
        "{modes:?}"
    );
    assert_eq!(
        modes
            .iter()
            .filter(|m| m.as_deref() == Some("follower"))
            .count(),
        2,
        "{modes:?}"
    );
    for i in 0..3 {
        let reader = connect(&ensemble.members[i].addr(), SESSION).await;
        within(reader.sync("/x")).await.unwrap();
        assert_eq!(
            within(reader.get_data("/x")).await.unwrap().0,
            b"new",
            "member {} after healing",
            i + 1
        );
    }
    assert_no_panic(&ensemble);
}
