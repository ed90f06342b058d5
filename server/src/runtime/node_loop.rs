//! The node loop: one task that owns the node and the member, takes in
//! client requests, peer messages, storage reports, four-letter words and
//! timers, and carries out what they ask for.

use super::operator::OperatorQuery;
use super::*;

/// The next message of `rx`, or never without one.
async fn recv_if_any<T>(rx: &mut Option<mpsc::Receiver<T>>) -> Option<T> {
    match rx.as_mut() {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

pub(super) struct NodeLoop {
    pub(super) node: Node,
    pub(super) clock: Clock,
    /// The time the loop last woke. Everything done for one wake-up happens at
    /// that instant as far as the core can tell, so the clock is read once per
    /// wake-up, not at each step (the reads were 2% of a member's CPU under load).
    pub(super) now: Now,
    pub(super) jobs: storage_worker::JobSender,
    /// How much of the node's snapshot pieces storage is done with.
    pub(super) snapshot_progress: storage_worker::SnapshotProgress,
    /// Each connection's queue to its writer.
    pub(super) conns: BTreeMap<ConnId, Arc<connection::Flow>>,
    pub(super) info: super::server_info::ServerInfo,
    /// The election and Zab side, in an ensemble.
    pub(super) member: Option<Membership>,
    /// The node's commands being carried out: a list kept from one wake-up
    /// to the next (see [`take_queued`](crate::core::take_queued)).
    pub(super) routed: VecDeque<Command>,
    /// With reconfig: the files a configuration that takes effect is
    /// recorded in.
    pub(super) config_files: Option<crate::config::ConfigFiles>,
    /// A test's fault switches (`zkd.faults.enable` only).
    pub(super) faults: Option<faults::Faults>,
    /// The AdminServer's commands, when it runs (taken by `run`).
    pub(super) operator: Option<mpsc::Receiver<OperatorQuery>>,
}

/// An ensemble member's election and Zab side, and its links to the others.
pub(super) struct Membership {
    pub(super) member: member_driver::MemberDriver,
    pub(super) peers: peer::PeerNetwork,
}

/// Peer events taken in before the member's overdue timers run.
const MAX_PEER_EVENTS_BEFORE_TIMERS: usize = 256;

impl NodeLoop {
    pub(super) async fn run(
        &mut self,
        mut inbound: mpsc::Receiver<Inbound>,
        mut words: mpsc::Receiver<FourLetterWord>,
        mut reports: mpsc::UnboundedReceiver<StorageReport>,
        mut peer_events: Option<mpsc::Receiver<peer::PeerEvent>>,
        mut fault_requests: Option<mpsc::Receiver<faults::Request>>,
        shutdown: impl Future<Output = ()>,
    ) -> Result<(), ServeError> {
        tokio::pin!(shutdown);
        let mut operator = self.operator.take();
        self.with_member(|m, node, now, io| m.look(node, now, io))?;
        loop {
            if self.member.as_ref().is_some_and(|m| m.member.blocked()) {
                // Planted (blocking-storage-reads): the loop does nothing
                // else until the read it asked for is done.
                let report = reports.recv().await;
                self.storage_report(report)?;
                continue;
            }
            self.overdue_timers(&mut peer_events)?;
            let deadline = self.next_deadline();
            // A test's cut-clients leaves client traffic (4lw too) unread.
            let clients = !self.clients_cut();
            let idle_work = self.has_idle_work();
            let sleep = sleep_until(deadline);
            // biased: storage reports first so replies are not starved by new requests.
            // Every arm is cancel-safe: channel receives lose nothing when another arm wins.
            tokio::select! {
                biased;
                _ = &mut shutdown => return Ok(()),
                report = reports.recv() => self.storage_report(report)?,
                Some(event) = recv_if_any(&mut peer_events) => {
                    self.woke();
                    self.with_member(|m, node, now, io| m.handle_peer(node, now, io, event))?
                }
                Some((command, reply)) = recv_if_any(&mut fault_requests) => {
                    self.woke();
                    let _ = reply.send(self.fault(command));
                }
                Some(FourLetterWord { word, reply }) = words.recv(), if clients => {
                    self.woke();
                    let member = self.member_view();
                    let _ = reply.send(self.info.answer(&word, &mut self.node, member));
                }
                Some(query) = recv_if_any(&mut operator) => {
                    self.woke();
                    self.operator(query);
                }
                msg = inbound.recv(), if clients && self.node.outstanding() < crate::core::MAX_OUTSTANDING => match msg {
                    Some(msg) => self.inbound(msg),
                    None => return Ok(()),
                },
                // Background work (a SNAP's image) whenever nothing above is
                // ready, a slice at a time: then the connections' and links'
                // tasks on this thread run (a link drains what it sent).
                _ = std::future::ready(()), if idle_work => self.idle_turn().await?,
                _ = sleep => {
                    let now = self.woke();
                    self.node.handle_timeout(now);
                    self.with_member(|m, node, now, io| m.handle_timeout(node, now, io))?;
                }
            }
            self.route_commands()?;
        }
    }

    /// Whether a test cut this member off from its clients.
    fn clients_cut(&self) -> bool {
        self.faults
            .as_ref()
            .is_some_and(faults::Faults::clients_cut)
    }

    /// Whether the member has work for the loop when nothing else is ready.
    fn has_idle_work(&self) -> bool {
        self.member
            .as_ref()
            .is_some_and(|m| m.member.has_idle_work())
    }

    /// One slice of the member's idle work, then the connections' and
    /// links' tasks on this thread run (a link drains what it was given).
    async fn idle_turn(&mut self) -> Result<(), ServeError> {
        self.woke();
        self.with_member(|m, node, now, io| m.handle_idle(node, now, io))?;
        tokio::task::yield_now().await;
        Ok(())
    }

    /// Runs the node's and the member's timers that are due. Timeouts run
    /// even when requests never stop coming: the loop's select is biased
    /// towards I/O, so a busy loop could otherwise starve expiry.
    fn overdue_timers(
        &mut self,
        peer_events: &mut Option<mpsc::Receiver<peer::PeerEvent>>,
    ) -> Result<(), ServeError> {
        let now = self.now;
        let due = |t: Option<u64>| t.is_some_and(|due| due <= now.mono_ms);
        if due(self.node.poll_timeout()) {
            self.node.handle_timeout(now);
            self.route_commands()?;
        }
        if !due(self.member.as_ref().and_then(|m| m.member.poll_timeout())) {
            return Ok(());
        }
        // What peers sent while this loop was busy comes first: a peer is
        // silent only if nothing of it waits here (ZooKeeper's timeouts
        // count per read, not the reader's own stalls).
        let first = if active(Failpoint::SyncTimedWhole) {
            0
        } else {
            MAX_PEER_EVENTS_BEFORE_TIMERS
        };
        for _ in 0..first {
            match peer_events.as_mut().map(|rx| rx.try_recv()) {
                Some(Ok(event)) => {
                    self.with_member(|m, node, now, io| m.handle_peer(node, now, io, event))?
                }
                _ => break,
            }
        }
        self.with_member(|m, node, now, io| m.handle_timeout(node, now, io))
    }

    /// When the node's or the member's next timer is due.
    fn next_deadline(&self) -> Option<std::time::Instant> {
        let due = [
            self.node.poll_timeout(),
            self.member.as_ref().and_then(|m| m.member.poll_timeout()),
        ]
        .into_iter()
        .flatten()
        .min();
        due.map(|ms| self.clock.instant_at(ms))
    }

    /// A report of the storage thread (`None`: it stopped).
    fn storage_report(&mut self, report: Option<StorageReport>) -> Result<(), ServeError> {
        let now = self.woke();
        match report {
            Some(report) if self.member.is_some() => {
                self.with_member(|m, node, now, io| m.handle_report(node, now, io, report))?
            }
            Some(StorageReport::Persisted(zxid)) => {
                self.node.handle_event(now, Event::Persisted { zxid })
            }
            Some(StorageReport::Failed(e)) => return Err(ServeError::Storage(e)),
            // Standalone submits no barriers, rebuilds or reads.
            Some(
                StorageReport::Reached(_)
                | StorageReport::Rebuilt(_)
                | StorageReport::DurableState(_)
                | StorageReport::Logged(_)
                | StorageReport::LoggedFor { .. },
            ) => {}
            None => return Err(ServeError::Storage("storage worker stopped".into())),
        }
        Ok(())
    }

    /// Runs one step of the member (if this node is one), then routes what
    /// the node asked for.
    fn with_member(
        &mut self,
        step: impl FnOnce(
            &mut member_driver::MemberDriver,
            &mut Node,
            Now,
            member_driver::MemberIo<'_>,
        ) -> Result<(), ServeError>,
    ) -> Result<(), ServeError> {
        let Some(Membership { member, peers }) = self.member.as_mut() else {
            return Ok(());
        };
        let io = member_driver::MemberIo {
            links: peers,
            jobs: &mut self.jobs,
        };
        step(member, &mut self.node, self.now, io)?;
        self.route_commands()
    }

    /// Answers an AdminServer command or a Prometheus scrape.
    fn operator(&mut self, query: OperatorQuery) {
        let member = self.member_view();
        match query {
            OperatorQuery::Admin(query) => {
                let cx = admin::Context {
                    member,
                    info: &mut self.info,
                    node: &mut self.node,
                };
                let _ = query
                    .reply
                    .send(admin::answer(cx, query.command, &query.args));
            }
            OperatorQuery::Metrics(reply) => {
                let metrics = metrics_report::gather(&self.info, &self.node, member);
                let _ = reply.send(metrics_report::prometheus_text(&metrics));
            }
        }
    }

    /// Where this member stands in its ensemble (`mntr`, the AdminServer).
    fn member_view(&self) -> Option<crate::core::member::MemberView> {
        self.member.as_ref().map(|m| m.member.member().view())
    }

    /// Reads the clock after a wake-up.
    fn woke(&mut self) -> Now {
        self.now = self.clock.now();
        self.node.snapshot_stored(self.snapshot_progress.stored());
        self.now
    }

    fn inbound(&mut self, msg: Inbound) {
        let now = self.woke();
        match msg {
            Inbound::Connected {
                conn,
                remote_ip,
                remote_port,
                certified,
                flow,
            } => {
                self.conns.insert(conn, flow);
                let connected = Event::Connected {
                    conn,
                    remote_ip,
                    remote_port,
                };
                self.node.handle_event(now, connected);
                if let Some(subject) = certified {
                    let certified = Event::Certified { conn, subject };
                    self.node.handle_event(now, certified);
                }
            }
            Inbound::Handshake { conn, request } => self
                .node
                .handle_event(now, Event::Handshake { conn, request }),
            Inbound::Frame { conn, frame } => {
                self.node.handle_event(now, Event::Request { conn, frame })
            }
            Inbound::Disconnected { conn } => {
                self.conns.remove(&conn);
                self.node.handle_event(now, Event::Disconnected { conn });
            }
        }
    }

    /// Carries out what the node asked for: a member routes what concerns
    /// the ensemble itself; the rest is written to connections (or, standalone,
    /// submitted to storage).
    fn route_commands(&mut self) -> Result<(), ServeError> {
        let mut commands = std::mem::take(&mut self.routed);
        match self.member.as_mut() {
            Some(Membership { member, peers }) => {
                let io = member_driver::MemberIo {
                    links: peers,
                    jobs: &mut self.jobs,
                };
                member.route_node_commands(&mut self.node, self.now, io, &mut commands)?
            }
            None => self.node.take_commands(&mut commands),
        }
        while let Some(command) = commands.pop_front() {
            match command {
                Command::Reply { conn, frame } => self.write(conn, frame, true),
                Command::Send { conn, frame } => self.write(conn, frame, false),
                Command::Close { conn } => {
                    if let Some(flow) = self.conns.remove(&conn) {
                        flow.close();
                    }
                }
                Command::Persist { txn } => self.submit(StorageJob::Persist {
                    zxid: txn.zxid(),
                    record: txn.to_bytes(),
                    permit: None,
                })?,
                Command::SnapshotPiece(piece) => self.submit(StorageJob::SnapshotPiece(piece))?,
                Command::RecordEnsembleConfig(config) => self.record_ensemble_config(&config),
                // A standalone node asks nothing of an ensemble.
                Command::Forward(_) | Command::Revalidate { .. } | Command::Revalidated { .. } => {}
            }
        }
        self.routed = commands;
        Ok(())
    }

    /// A configuration took effect: the peer links learn the members it
    /// adds or moves, and the config files record it, as ZooKeeper's do; a failure
    /// to write them is logged (the member runs on, as ZooKeeper's does,
    /// and a restart finds the older files).
    fn record_ensemble_config(&mut self, config: &EnsembleConfig) {
        if let Some(Membership { peers, .. }) = self.member.as_mut() {
            peers.learn_servers(config.servers());
        }
        let Some(files) = &self.config_files else {
            return;
        };
        match files.record(config.server_lines(), config.version) {
            Ok(path) => tracing::info!(path = %path.display(), "ensemble configuration recorded"),
            Err(e) => tracing::error!("recording the ensemble configuration: {e}"),
        }
    }

    fn write(&mut self, conn: ConnId, frame: Bytes, answers_request: bool) {
        let Some(flow) = self.conns.get(&conn) else {
            return;
        };
        if flow.queued(frame.len()) > MAX_CONNECTION_QUEUE_BYTES {
            // A client that reads nothing while its watches fire: cut it off
            // rather than hold its notifications without bound.
            tracing::warn!(
                conn = conn.0,
                "closing a connection whose client does not read what it is sent"
            );
            self.drop_connection(conn);
            return;
        }
        flow.send(frame, answers_request);
    }

    /// Drops a connection at once, its session left to live or expire.
    pub(super) fn drop_connection(&mut self, conn: ConnId) {
        if let Some(flow) = self.conns.remove(&conn) {
            flow.end();
            self.node
                .handle_event(self.now, Event::Disconnected { conn });
        }
    }

    fn submit(&self, job: StorageJob) -> Result<(), ServeError> {
        self.jobs
            .send(job)
            .map_err(|_| ServeError::Storage("storage worker stopped".into()))
    }
}

/// Sleeps until `deadline`, or for ever without one.
async fn sleep_until(deadline: Option<std::time::Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d.into()).await,
        None => std::future::pending().await,
    }
}
