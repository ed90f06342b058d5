//! Running the members: start, re-print their output, report the leader, stop.

use super::*;

/// Runs `zkd ensemble` to the end; returns the process exit code.
pub fn run(args: &EnsembleArgs) -> ExitCode {
    let prepared = match prepare(args) {
        Ok(prepared) => prepared,
        Err(e) => {
            tracing::error!("{e}");
            return ExitCode::from(e.exit_code());
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!("cannot start runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(supervise(prepared))
}

/// Prints the connect string on stdout and how to reach the ensemble on
/// stderr; writes the fault API's address to DIR. Returns that file.
fn announce(dir: &Path, members: &[Member], fault_port: u16, reconfig: bool) -> PathBuf {
    let connect = connect_string(members);
    {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{connect}");
        let _ = out.flush();
    }
    status_line(&format!(
        "{} starting in {}; connect with: zkCli.sh -server {connect}",
        plural(members.len()),
        dir.display()
    ));
    let api_file = dir.join(FAULT_API_FILE);
    let url = format!("http://127.0.0.1:{fault_port}");
    if let Err(e) = write_whole(&api_file, &format!("{url}\n")) {
        tracing::warn!("cannot write {}: {e}", api_file.display());
    }
    status_line(&format!(
        "fault API on {url} (GET /status, POST /faults), or: zkd fault --dir {} VERB",
        dir.display()
    ));
    if reconfig {
        status_line(&format!(
            "reconfig is on: reconfigure as the super user (addauth digest super:PASSWORD, the \
             password in {}), or: zkd fault --dir {} remove N|leader, add N",
            dir.join(PASSWORD_FILE).display(),
            dir.display()
        ));
    }
    api_file
}

/// A started member.
struct Running {
    id: usize,
    child: Child,
}

/// Starts `zkd serve` for `m`, with its output forwarded by two threads.
pub(super) fn start(
    exe: &Path,
    dir: &Path,
    m: &Member,
    forwarders: &mut Vec<JoinHandle<()>>,
) -> std::io::Result<Child> {
    let node = node_dir(dir, m.id);
    let mut child = Command::new(exe)
        .arg("serve")
        .arg("--config")
        .arg(node.join("zoo.cfg"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    if let Some(out) = child.stdout.take() {
        forwarders.push(forward(out, m.id)?);
    }
    if let Some(err) = child.stderr.take() {
        forwarders.push(forward(err, m.id)?);
    }
    let pid_file = node.join(PID_FILE);
    if let Err(e) = write_whole(&pid_file, &format!("{}\n", child.id())) {
        tracing::warn!("cannot write {}: {e}", pid_file.display());
    }
    Ok(child)
}

/// Re-prints each line of `stream` on stderr as `[node{id}] line`.
fn forward(stream: impl Read + Send + 'static, id: usize) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name(format!("node{id}-output"))
        .spawn(move || {
            let mut reader = BufReader::new(stream);
            let prefix = format!("[node{id}] ");
            let mut line = Vec::new();
            loop {
                line.clear();
                line.extend_from_slice(prefix.as_bytes());
                match reader.read_until(b'\n', &mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        if !line.ends_with(b"\n") {
                            line.push(b'\n');
                        }
                        let _ = std::io::stderr().lock().write_all(&line);
                    }
                }
            }
        })
}

async fn supervise(prepared: Prepared) -> ExitCode {
    let Prepared {
        dir,
        members,
        fault_port,
        super_user,
    } = prepared;
    use tokio::signal::unix::{signal, SignalKind};
    // Before any child exists, so that a signal can never be missed.
    let (mut interrupt, mut terminate) = match (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) {
        (Ok(i), Ok(t)) => (i, t),
        (Err(e), _) | (_, Err(e)) => {
            tracing::error!("cannot handle signals: {e}");
            return ExitCode::FAILURE;
        }
    };
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => {
            tracing::error!("cannot find the zkd executable: {e}");
            return ExitCode::FAILURE;
        }
    };
    let ensemble = Arc::new(Mutex::new(Ensemble {
        exe,
        dir: dir.clone(),
        members: members.clone(),
        running: BTreeMap::new(),
        forwarders: Vec::new(),
        faults: InForce::default(),
        super_user: super_user.clone(),
        stopping: false,
    }));
    let lock = || ensemble.lock().unwrap_or_else(|e| e.into_inner());
    let api = tokio::net::TcpListener::bind(("127.0.0.1", fault_port)).await;
    let started = api.map_err(|e| format!("fault API port 127.0.0.1:{fault_port}: {e}"));
    let started = started.and_then(|api| {
        for m in &members {
            let mut e = lock();
            let Ensemble {
                exe, forwarders, ..
            } = &mut *e;
            let child = start(exe, &dir, m, forwarders)
                .map_err(|err| format!("cannot start node{}: {err}", m.id))?;
            e.running.insert(m.id, child);
        }
        Ok(api)
    });
    let api = match started {
        Ok(api) => api,
        Err(why) => {
            tracing::error!("{why}");
            shut_down(&ensemble, &mut interrupt, &mut terminate).await;
            return ExitCode::FAILURE;
        }
    };
    let api_file = announce(&dir, &members, fault_port, super_user.is_some());
    let api_task = tokio::spawn(http::serve(api, Arc::new(Control::new(ensemble.clone()))));
    let watcher = tokio::spawn(watch_leader(members));
    let mut failed = false;
    let mut check = tokio::time::interval(Duration::from_millis(100));
    let signalled = loop {
        tokio::select! {
            _ = interrupt.recv() => break Some("SIGINT"),
            _ = terminate.recv() => break Some("SIGTERM"),
            _ = check.tick() => {
                let mut e = lock();
                failed |= reap_members(&mut e);
                // Members a fault took down are waiting for a restart or heal.
                if e.running.is_empty() && e.faults.down.is_empty() {
                    break None;
                }
            }
        }
    };
    watcher.abort();
    api_task.abort();
    let _ = std::fs::remove_file(&api_file);
    let code = match signalled {
        Some(signal) => {
            let left = lock().running.len();
            if left > 0 {
                status_line(&format!("{signal}: stopping {}", plural(left)));
            }
            if shut_down(&ensemble, &mut interrupt, &mut terminate).await {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        None => {
            status_line("all members have exited");
            shut_down(&ensemble, &mut interrupt, &mut terminate).await;
            if failed {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            }
        }
    };
    code
}

/// Stops every member still running (paused ones are resumed first) and
/// waits for their output; true if none needed SIGKILL.
async fn shut_down(
    ensemble: &Mutex<Ensemble>,
    interrupt: &mut tokio::signal::unix::Signal,
    terminate: &mut tokio::signal::unix::Signal,
) -> bool {
    let (running, forwarders) = {
        let mut e = ensemble.lock().unwrap_or_else(|e| e.into_inner());
        e.stopping = true;
        let running = std::mem::take(&mut e.running);
        (running, std::mem::take(&mut e.forwarders))
    };
    let mut running: Vec<Running> = running
        .into_iter()
        .map(|(id, child)| Running { id, child })
        .collect();
    for r in &running {
        if let Ok(pid) = i32::try_from(r.child.id()) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGCONT,
            );
        }
    }
    let clean = stop(&mut running, interrupt, terminate).await;
    join(forwarders);
    clean
}

/// Reports and forgets the members that have exited; true if one failed
/// unasked (an exit a disk-error fault armed is the fault's, not a failure).
fn reap_members(e: &mut Ensemble) -> bool {
    let mut failed = false;
    let ids: Vec<usize> = e.running.keys().copied().collect();
    for id in ids {
        let Some(child) = e.running.get_mut(&id) else {
            continue;
        };
        match child.try_wait() {
            Ok(Some(status)) => {
                e.running.remove(&id);
                status_line(&format!("node{id} exited with {}", describe_status(status)));
                if e.faults.disk_error.remove(&id) {
                    e.faults.down.insert(id);
                } else {
                    failed |= !status.success();
                }
            }
            Ok(None) => {}
            Err(err) => tracing::warn!("cannot wait for node{id}: {err}"),
        }
    }
    failed
}

/// Waits for the output forwarders, which end when their member's pipes close.
fn join(forwarders: Vec<JoinHandle<()>>) {
    for f in forwarders {
        let _ = f.join();
    }
}

/// Reports and forgets the members that have exited; true if one failed.
fn reap(running: &mut Vec<Running>) -> bool {
    let mut failed = false;
    running.retain_mut(|r| match r.child.try_wait() {
        Ok(Some(status)) => {
            status_line(&format!(
                "node{} exited with {}",
                r.id,
                describe_status(status)
            ));
            failed |= !status.success();
            false
        }
        Ok(None) => true,
        Err(e) => {
            tracing::warn!("cannot wait for node{}: {e}", r.id);
            true
        }
    });
    failed
}

/// SIGTERM to every member, then SIGKILL to those still running after
/// [`STOP_GRACE`] (or at once on a second signal). True if none needed SIGKILL.
async fn stop(
    running: &mut Vec<Running>,
    interrupt: &mut tokio::signal::unix::Signal,
    terminate: &mut tokio::signal::unix::Signal,
) -> bool {
    use nix::sys::signal::{kill, Signal};
    use nix::unistd::Pid;
    for r in running.iter() {
        // The child is not reaped until try_wait/wait sees it, so its pid is still ours.
        if let Ok(pid) = i32::try_from(r.child.id()) {
            if let Err(e) = kill(Pid::from_raw(pid), Signal::SIGTERM) {
                tracing::warn!("cannot send SIGTERM to node{}: {e}", r.id);
            }
        }
    }
    let deadline = tokio::time::Instant::now() + STOP_GRACE;
    let mut hurried = false;
    loop {
        reap(running);
        if running.is_empty() {
            return true;
        }
        if hurried || tokio::time::Instant::now() >= deadline {
            break;
        }
        let wake = deadline.min(tokio::time::Instant::now() + Duration::from_millis(100));
        tokio::select! {
            _ = tokio::time::sleep_until(wake) => {}
            _ = interrupt.recv() => hurried = true,
            _ = terminate.recv() => hurried = true,
        }
    }
    for r in running.iter_mut() {
        status_line(&format!(
            "node{} is still running{}; killing it",
            r.id,
            if hurried {
                " (second signal)".to_owned()
            } else {
                format!(" after {} s", STOP_GRACE.as_secs())
            }
        ));
        let _ = r.child.kill();
        match r.child.wait() {
            Ok(status) => status_line(&format!(
                "node{} exited with {}",
                r.id,
                describe_status(status)
            )),
            Err(e) => tracing::warn!("cannot wait for node{}: {e}", r.id),
        }
    }
    running.clear();
    false
}

/// Asks every member `srvr` each [`POLL_INTERVAL`] and prints a line whenever
/// the set of members answering leader changes.
async fn watch_leader(members: Vec<Member>) {
    let start = tokio::time::Instant::now() + POLL_INTERVAL;
    let mut tick = tokio::time::interval_at(start, POLL_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let single = members.len() == 1;
    let mut last: Option<Vec<usize>> = None;
    loop {
        tick.tick().await;
        let polls: Vec<_> = members
            .iter()
            .map(|m| tokio::spawn(srvr_mode(m.host.clone(), m.client_port)))
            .collect();
        let mut leaders = Vec::new();
        for (m, poll) in members.iter().zip(polls) {
            if let Ok(Some(mode)) = poll.await {
                if mode == "leader" || (single && mode == "standalone") {
                    leaders.push(m.id);
                }
            }
        }
        if last.as_ref() != Some(&leaders) {
            status_line(&describe_leaders(&members, &leaders));
            last = Some(leaders);
        }
    }
}

/// The `Mode:` a member reports to `srvr`, or None when it does not answer
/// within [`POLL_TIMEOUT`].
pub async fn srvr_mode(host: String, port: u16) -> Option<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect((host.as_str(), port))
            .await
            .ok()?;
        stream.write_all(b"srvr").await.ok()?;
        let mut reply = Vec::new();
        (&mut stream)
            .take(64 * 1024)
            .read_to_end(&mut reply)
            .await
            .ok()?;
        parse_mode(&String::from_utf8_lossy(&reply)).map(str::to_owned)
    };
    tokio::time::timeout(POLL_TIMEOUT, exchange)
        .await
        .ok()
        .flatten()
}
