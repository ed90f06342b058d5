//! (d) the election recipe while the ensemble's leader is killed.

use super::*;

/// What the contenders share with the test.
#[derive(Default)]
struct Board {
    /// The contenders that believe they lead right now.
    leading: Mutex<BTreeSet<usize>>,
    /// Every claim, in order.
    claims: Mutex<Vec<usize>>,
    /// Two contenders believing they lead at once, and other impossibilities.
    violations: Mutex<Vec<String>>,
}

impl Board {
    fn claim(&self, who: usize) {
        let mut leading = self.leading.lock().unwrap();
        if !leading.is_empty() {
            self.violations
                .lock()
                .unwrap()
                .push(format!("contender {who} leads while {leading:?} also do"));
        }
        leading.insert(who);
        self.claims.lock().unwrap().push(who);
    }

    fn relinquish(&self, who: usize) {
        self.leading.lock().unwrap().remove(&who);
    }

    fn leaders(&self) -> Vec<usize> {
        self.leading.lock().unwrap().iter().copied().collect()
    }
}

/// How a contender's run ended.
#[derive(Debug, PartialEq, Eq)]
enum End {
    /// Told to stop: relinquished, then its session is closed.
    Stopped,
    /// Its node vanished or its session ended under it.
    Lost(String),
}

/// The recipe: a node under /election, watch only the next-lower one, lead
/// when lowest. A leader that loses its connection stops believing it leads
/// until it has checked again that its node is still the lowest.
async fn contend(
    who: usize,
    client: zk::Client,
    me: String,
    board: Arc<Board>,
    mut stop: watch::Receiver<bool>,
) -> End {
    let name = me.rsplit('/').next().unwrap().to_owned();
    let mut state = client.state_watcher();
    loop {
        if *stop.borrow() {
            board.relinquish(who);
            drop(client); // closes the session: the node goes
            return End::Stopped;
        }
        let kids =
            match tokio::time::timeout(Duration::from_secs(3), client.list_children("/election"))
                .await
            {
                Ok(Ok(kids)) => kids,
                Ok(Err(e @ (zk::Error::SessionExpired | zk::Error::ClientClosed))) => {
                    board.relinquish(who);
                    return End::Lost(e.to_string());
                }
                _ => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
        let mut kids = kids;
        kids.sort();
        let Some(pos) = kids.iter().position(|k| *k == name) else {
            board.relinquish(who);
            return End::Lost(format!("node {me} is gone"));
        };
        if pos == 0 {
            board.claim(who);
            // Lead until told to stop or the connection drops.
            loop {
                tokio::select! {
                    _ = stop.changed() => break,
                    s = state.changed() => {
                        if s != zk::SessionState::SyncConnected {
                            board.relinquish(who);
                            break;
                        }
                    }
                }
            }
            continue;
        }
        let pred = format!("/election/{}", kids[pos - 1]);
        let watcher =
            match tokio::time::timeout(Duration::from_secs(3), client.check_and_watch_stat(&pred))
                .await
            {
                Ok(Ok((Some(_), watcher))) => watcher,
                Ok(Ok((None, _))) => continue,
                _ => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
        tokio::select! {
            _ = stop.changed() => {}
            event = watcher.changed() => {
                if event.event_type == zk::EventType::Session {
                    // Expired or closed: the watch is gone, and with it the session.
                    board.relinquish(who);
                    return End::Lost(format!("session event {:?}", event.session_state));
                }
            }
        }
    }
}

/// The member whose `cons` lists `session`.
fn member_of(ensemble: &Ensemble, session: zk::SessionId) -> Option<usize> {
    let needle = format!("sid={session},");
    (0..ensemble.members.len()).find(|i| {
        let m = &ensemble.members[*i];
        four_letter_word_at(&m.host, m.port, "cons").is_ok_and(|c| c.contains(&needle))
    })
}

/// Waits until every session in `sessions` is on one of `survivors` again,
/// within the session timeout from `killed`.
async fn sessions_come_back(
    ensemble: &Ensemble,
    sessions: &[zk::SessionId],
    survivors: &[usize],
    killed: Instant,
) {
    for session in sessions {
        loop {
            if let Some(m) = member_of(ensemble, *session) {
                assert!(
                    survivors.contains(&m),
                    "session {session} on dead member {m}"
                );
                break;
            }
            assert!(
                killed.elapsed() < SESSION,
                "session {session} is on no surviving member {survivors:?} after {:?}; logs:\n{}",
                killed.elapsed(),
                ensemble.logs()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// Waits until exactly `who` believes it leads.
async fn wait_for_leader(board: &Board, who: usize, limit: Duration, context: &str) {
    let deadline = Instant::now() + limit;
    while board.leaders() != [who] {
        assert!(
            Instant::now() < deadline,
            "{context}: contender {who} does not lead within {limit:?}; leading {:?}, claims {:?}",
            board.leaders(),
            board.claims.lock().unwrap()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Five contenders, contender k connected first to member k % 3 with the
/// other members as fallbacks. At most one of them ever believes it leads;
/// after the ensemble's leader is killed with kill -9, every session survives
/// (the clients move to the other members within the session timeout), the
/// same contender leads, and closing each leader's session hands leadership
/// to the next in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn election_recipe_keeps_one_leader_while_the_ensembles_leader_is_killed() {
    let mut ensemble = Ensemble::start_with(3, member_options(2));
    let setup = connect(&ensemble.all(), SESSION).await;
    within(setup.create("/election", b"", &persistent()))
        .await
        .unwrap();
    drop(setup);
    let seq = zk::CreateMode::EphemeralSequential.with_acls(zk::Acls::anyone_all());
    let board = Arc::new(Board::default());
    let mut stops = Vec::new();
    let mut runs = Vec::new();
    let mut sessions = Vec::new();
    for k in 0..5 {
        let home = k % 3;
        let order = [home, (home + 1) % 3, (home + 2) % 3];
        // The client picks its first member at random: reconnect until it
        // lands on its home member.
        let mut attempt = 0;
        let client = loop {
            let client = connect(&ensemble.connect_string(&order), SESSION).await;
            if member_of(&ensemble, client.session_id()) == Some(home) {
                break client;
            }
            attempt += 1;
            assert!(
                attempt < 40,
                "contender {k} never landed on member {}",
                home + 1
            );
        };
        let (_, n) = within(client.create("/election/n-", b"", &seq))
            .await
            .unwrap();
        let me = format!("/election/n-{n}");
        sessions.push(client.session_id());
        let (tx, rx) = watch::channel(false);
        stops.push(tx);
        runs.push(Some(tokio::spawn(contend(
            k,
            client,
            me,
            board.clone(),
            rx,
        ))));
    }
    wait_for_leader(&board, 0, Duration::from_secs(10), "start").await;

    // 0 hands over to 1.
    stops[0].send(true).unwrap();
    assert_eq!(runs[0].take().unwrap().await.unwrap(), End::Stopped);
    wait_for_leader(&board, 1, Duration::from_secs(10), "0 closed its session").await;

    // kill -9 the ensemble's leader.
    let first = ensemble.leader().expect("a leader");
    let moved: Vec<usize> = (1..5).filter(|k| k % 3 == first).collect();
    ensemble.members[first].kill9();
    let killed = Instant::now();
    let survivors: Vec<usize> = (0..3).filter(|i| *i != first).collect();
    tokio::task::block_in_place(|| ensemble.wait_until_serving(&survivors));
    sessions_come_back(&ensemble, &sessions[1..], &survivors, killed).await;
    wait_for_leader(&board, 1, Duration::from_secs(10), "after the kill").await;
    for (k, run) in runs.iter().enumerate() {
        if let Some(run) = run {
            assert!(!run.is_finished(), "contender {k} ended after the kill");
        }
    }

    // Each leader closes its session, the next one leads.
    for k in 1..3 {
        stops[k].send(true).unwrap();
        assert_eq!(runs[k].take().unwrap().await.unwrap(), End::Stopped);
        let context = format!("{k} closed its session");
        wait_for_leader(&board, k + 1, Duration::from_secs(10), &context).await;
    }

    // The killed member returns; then the new ensemble leader is killed just
    // as contender 3 closes its session. Its closeSession may be lost with
    // the leader: then the session expires, and 4 leads after that.
    tokio::task::block_in_place(|| {
        ensemble.members[first].restart();
        ensemble.wait_until_serving(&[0, 1, 2]);
    });
    let second = ensemble.leader().expect("a leader");
    stops[3].send(true).unwrap();
    ensemble.members[second].kill9();
    let killed = Instant::now();
    assert_eq!(runs[3].take().unwrap().await.unwrap(), End::Stopped);
    let survivors: Vec<usize> = (0..3).filter(|i| *i != second).collect();
    tokio::task::block_in_place(|| ensemble.wait_until_serving(&survivors));
    sessions_come_back(&ensemble, &sessions[4..], &survivors, killed).await;
    wait_for_leader(
        &board,
        4,
        SESSION + Duration::from_secs(10),
        "3 closed its session as the ensemble's leader was killed",
    )
    .await;
    stops[4].send(true).unwrap();
    assert_eq!(runs[4].take().unwrap().await.unwrap(), End::Stopped);

    let violations = board.violations.lock().unwrap().clone();
    assert!(violations.is_empty(), "{violations:?}");
    let claims = board.claims.lock().unwrap().clone();
    let mut distinct = claims.clone();
    distinct.dedup();
    assert_eq!(distinct, [0, 1, 2, 3, 4], "claims in order: {claims:?}");
    eprintln!(
        "contenders {moved:?} were on member {}, killed first; member {} was killed second; claims {claims:?}",
        first + 1,
        second + 1
    );
    assert_no_panic(&ensemble);
}
