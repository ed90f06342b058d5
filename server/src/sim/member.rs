//! One simulated member: election, its Zab role, its tree, and its storage
//! (a `MemStorage` whose unsynced appends a crash loses), driven by the
//! simulation's events. It executes what the cores ask, like the runtime.

use crate::core::election::{
    Election, ElectionCommand, ElectionConfig, Notification, ServerId, ServerState, Vote,
};
use crate::core::zab::{
    DurableState, Follower, Leader, SnapshotSource, StorageOp, Timing, Voters, ZabCommand,
    ZabMessage,
};
use crate::failpoints::{active, Failpoint};
use crate::runtime::recovery;
use bytes::Bytes;
use std::collections::{BTreeMap, VecDeque};
use zkd_protocol::Zxid;
use zkd_storage::{DataTree, EpochStore, MemStorage, Txn, TxnLog};

/// What a member sends.
#[derive(Clone, Debug)]
pub enum Wire {
    Election(Notification),
    Zab(ZabMessage),
}

/// What the member asks of the simulation.
#[derive(Debug)]
pub enum Effect {
    Send {
        to: ServerId,
        wire: Wire,
    },
    Disconnect {
        peer: ServerId,
    },
    /// A storage operation to run later (fsync latency).
    Storage(StorageOp),
    /// The member applied `zxid`; the tree's digest after it.
    Delivered {
        zxid: Zxid,
        txn: Bytes,
        digest: u64,
    },
    /// A leader is established in `epoch`, its tree at `last_zxid`.
    Established {
        epoch: u32,
        last_zxid: Zxid,
    },
    /// A write this leader proposed is committed: the client is answered.
    Acknowledged {
        zxid: Zxid,
        path: String,
    },
    /// The role ended: the simulation flushes this member's storage queue
    /// (as the runtime drains its storage thread), then calls `look`.
    RoleEnded,
    /// The member found its tree diverged from the leader's and stopped serving.
    Diverged {
        zxid: Zxid,
    },
}

/// Whether the tree diverged from a leader's, and what is left to repair
/// (as the runtime's member: rebuilt from disk, then a SNAP).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Divergence {
    None,
    Rebuild,
    AwaitingSnapshot,
}

/// The member's Zab role.
#[derive(Debug)]
pub enum Role {
    Looking,
    Leading(Leader),
    Following(Follower),
}

/// One member of the simulated ensemble.
#[derive(Debug)]
pub struct Member {
    pub id: ServerId,
    voters: Voters,
    timing: Timing,
    pub storage: MemStorage,
    pub tree: DataTree,
    pub election: Election,
    pub role: Role,
    /// The writes this incarnation proposed as leader, by zxid.
    proposed: BTreeMap<Zxid, String>,
    diverged: Divergence,
    effects: VecDeque<Effect>,
}

/// The in-memory window the simulated members keep for DIFF.
pub const HISTORY_WINDOW: usize = 64;

/// Snapshots a member keeps (the runtime's autopurge.snapRetainCount default).
const SNAP_RETAIN: usize = 3;

impl Member {
    /// Starts (or restarts) a member on `storage`: recover, then look for a leader.
    pub fn start(
        id: ServerId,
        voters: Voters,
        timing: Timing,
        storage: MemStorage,
        now_ms: u64,
    ) -> Member {
        let tree =
            recovery::recover(&mut storage.clone()).expect("the simulated disk must recover");
        let config = ElectionConfig {
            my_id: id,
            voters: voters.0.clone(),
            finalize_wait_ms: 200,
            max_notification_interval_ms: 1600,
        };
        let mut member = Member {
            id,
            election: Election::new(
                config,
                Vote {
                    leader: id,
                    zxid: Zxid::ZERO,
                    peer_epoch: 0,
                },
            ),
            voters,
            timing,
            storage,
            tree,
            role: Role::Looking,
            proposed: BTreeMap::new(),
            diverged: Divergence::None,
            effects: VecDeque::new(),
        };
        member.look(now_ms);
        member
    }

    /// A line for failure reports: role, epochs, tree.
    pub fn describe(&self) -> String {
        let role = match &self.role {
            Role::Looking => format!("looking (round {})", self.election.logical_clock()),
            Role::Leading(l) => format!(
                "leading epoch {} (established: {}, synced {:?})",
                l.epoch(),
                l.is_established(),
                l.synced()
            ),
            Role::Following(f) => format!("following {} (serving: {})", f.leader(), f.is_serving()),
        };
        format!(
            "member {}: {role}; accepted/current epoch {}/{}; tree at {}",
            self.id,
            self.storage.accepted_epoch().unwrap_or(0),
            self.storage.current_epoch().unwrap_or(0),
            self.tree.last_zxid()
        )
    }

    /// Effects so far, in order.
    pub fn drain(&mut self) -> Vec<Effect> {
        self.effects.drain(..).collect()
    }

    /// A message from `from`.
    pub fn receive(&mut self, now_ms: u64, from: ServerId, wire: Wire) {
        match wire {
            Wire::Election(n) => {
                self.election.handle_notification(now_ms, n);
                self.after_election(now_ms);
            }
            Wire::Zab(message) => {
                match &mut self.role {
                    Role::Leading(l) => l.handle_message(now_ms, from, message),
                    Role::Following(f) => f.handle_message(now_ms, from, message),
                    Role::Looking => self.effects.push_back(Effect::Disconnect { peer: from }),
                }
                self.after_zab();
            }
        }
    }

    /// The link to `peer` broke.
    pub fn disconnected(&mut self, now_ms: u64, peer: ServerId) {
        match &mut self.role {
            Role::Leading(l) => l.peer_disconnected(peer),
            Role::Following(f) if f.leader() == peer => f.leader_disconnected(now_ms),
            _ => {}
        }
        self.after_zab();
    }

    /// Timers.
    pub fn tick(&mut self, now_ms: u64) {
        self.election.handle_timeout(now_ms);
        self.after_election(now_ms);
        match &mut self.role {
            Role::Leading(l) => l.handle_timeout(now_ms),
            Role::Following(f) => f.handle_timeout(now_ms),
            Role::Looking => {}
        }
        self.after_zab();
    }

    /// When `tick` next has work.
    pub fn next_timeout(&self) -> Option<u64> {
        let role = match &self.role {
            Role::Leading(l) => l.poll_timeout(),
            Role::Following(f) => f.poll_timeout(),
            Role::Looking => None,
        };
        [self.election.poll_timeout(), role]
            .into_iter()
            .flatten()
            .min()
    }

    /// A client write at the leader: creates `path`. Its zxid, or None if not serving.
    pub fn write(&mut self, now_ms: u64, path: &str) -> Option<Zxid> {
        let Role::Leading(l) = &mut self.role else {
            return None;
        };
        let Some(zxid) = l.next_zxid() else {
            self.after_zab();
            return None;
        };
        let txn = create_txn(zxid, now_ms, path);
        l.propose(zxid, txn);
        self.proposed.insert(zxid, path.to_owned());
        self.after_zab();
        Some(zxid)
    }

    /// Runs one storage operation now (the simulation delays them).
    pub fn execute(&mut self, op: StorageOp) {
        let storage = &mut self.storage;
        let token = match op {
            StorageOp::Append { zxid, txn } => {
                storage.append(zxid, txn).expect("append");
                storage.sync().expect("sync");
                self.persisted(zxid);
                None
            }
            StorageOp::TruncateAndReload { after } => {
                zkd_storage::store::truncate_history(storage, after).unwrap_or_else(|e| {
                    panic!("member {}: TRUNC to {after} impossible: {e}", self.id)
                });
                // As the runtime: a tree at or below the cut takes the log's
                // next txns; any other is rebuilt.
                if self.tree.last_zxid() <= after {
                    self.catch_up_tree(after);
                } else {
                    self.tree = recovery::recover(storage).expect("reload after truncation");
                }
                None
            }
            StorageOp::InstallSnapshot { zxid, image, .. } => {
                zkd_storage::store::install_snapshot(storage, zxid, image)
                    .expect("install snapshot");
                self.tree = recovery::recover(storage).expect("reload after a snapshot");
                self.diverged = Divergence::None;
                None
            }
            StorageOp::SetAcceptedEpoch(e) => {
                storage.set_accepted_epoch(e).expect("epoch");
                None
            }
            StorageOp::SetCurrentEpoch(e) => {
                storage.set_current_epoch(e).expect("epoch");
                None
            }
            StorageOp::Barrier(token) => Some(token),
        };
        if let Some(token) = token {
            match &mut self.role {
                Role::Leading(l) => l.handle_reached(token),
                Role::Following(f) => f.handle_reached(token),
                Role::Looking => {}
            }
        }
        self.after_zab();
    }

    /// A local snapshot, for scripts (ZooKeeper's takeSnapshot, the
    /// runtime's `StorageJob::Snapshot`): saves the tree as it is now, keeps
    /// the newest [`SNAP_RETAIN`] snapshots and purges the log through the
    /// oldest kept, as the runtime's storage worker does. Durable at once;
    /// the caller runs the member's queued storage operations first (the
    /// runtime saves a snapshot after the appends submitted before it). The
    /// tree holds what was delivered, plus, after a restart, every txn the
    /// log held (recovery replays the whole log): a snapshot taken before
    /// the next sync may hold txns no quorum has (a dirty snapshot,
    /// ZOOKEEPER-1549). Returns the snapshot's zxid.
    pub fn snapshot(&mut self) -> Zxid {
        use zkd_storage::SnapshotStore;
        let zxid = self.tree.last_zxid();
        let storage = &mut self.storage;
        storage
            .save_snapshot(zxid, self.tree.to_image())
            .expect("snapshot");
        if let Some(oldest) = storage.purge_snapshots(SNAP_RETAIN).expect("retention") {
            storage.purge_through(oldest).expect("purge");
        }
        zxid
    }

    fn persisted(&mut self, zxid: Zxid) {
        match &mut self.role {
            Role::Leading(l) => l.handle_persisted(zxid),
            Role::Following(f) => f.handle_persisted(zxid),
            Role::Looking => {}
        }
    }

    /// Applies what the log holds beyond the tree through `through`
    /// (logged in an earlier role, not applied there), as the runtime does.
    fn catch_up_tree(&mut self, through: Zxid) {
        loop {
            let page = self
                .storage
                .read_range(self.tree.last_zxid(), 256)
                .expect("log");
            let mut applied = false;
            for (zxid, bytes) in page {
                if zxid > through {
                    return;
                }
                self.tree
                    .apply(&Txn::from_bytes(bytes).expect("logged txns decode"));
                applied = true;
            }
            if !applied {
                return;
            }
        }
    }

    fn durable_state(&self) -> DurableState {
        recovery::durable_state(&self.storage, HISTORY_WINDOW)
            .expect("the simulated disk reads back")
    }

    /// Starts an election round from what is durable now.
    pub fn look(&mut self, now_ms: u64) {
        self.role = Role::Looking;
        self.proposed.clear();
        if self.diverged == Divergence::Rebuild {
            self.tree = recovery::rebuild(&self.storage).expect("the simulated disk recovers");
            self.diverged = Divergence::AwaitingSnapshot;
        }
        let state = self.durable_state();
        let own = Vote {
            leader: self.id,
            zxid: state.history.last_zxid(),
            peer_epoch: state.current_epoch,
        };
        self.election.look(now_ms, own);
        self.after_election(now_ms);
    }

    fn after_election(&mut self, now_ms: u64) {
        for ElectionCommand::Send { to, notification } in
            self.election.drain_commands().collect::<Vec<_>>()
        {
            if to == self.id {
                continue;
            }
            self.effects.push_back(Effect::Send {
                to,
                wire: Wire::Election(notification),
            });
        }
        let Some(outcome) = self.election.take_outcome() else {
            return;
        };
        let state = self.durable_state();
        // As the runtime: a leader's tree takes its whole log, a follower's
        // only what lies below the in-memory window.
        let through = match outcome.state {
            ServerState::Leading => state.history.last_zxid(),
            _ => state.history.base(),
        };
        self.catch_up_tree(through);
        self.role = match outcome.state {
            ServerState::Leading => Role::Leading(Leader::new(
                self.id,
                self.voters.clone(),
                self.timing,
                state,
                self.tree.last_zxid(),
                now_ms,
            )),
            _ => {
                let follower = Follower::new(
                    outcome.vote.leader,
                    self.timing,
                    state,
                    self.tree.last_zxid(),
                    now_ms,
                );
                Role::Following(match self.diverged {
                    Divergence::None => follower,
                    _ => follower.asking_for_snapshot(),
                })
            }
        };
        self.after_zab();
    }

    fn after_zab(&mut self) {
        loop {
            let commands: Vec<ZabCommand> = match &mut self.role {
                Role::Leading(l) => l.drain_commands().collect(),
                Role::Following(f) => f.drain_commands().collect(),
                Role::Looking => return,
            };
            if commands.is_empty() {
                return;
            }
            for command in commands {
                if self.run(command) {
                    self.role = Role::Looking;
                    self.proposed.clear();
                    self.effects.push_back(Effect::RoleEnded);
                    return;
                }
            }
        }
    }

    /// Carries out one command; true when the role ended.
    fn run(&mut self, command: ZabCommand) -> bool {
        match command {
            ZabCommand::Send { to, message } => {
                // As the runtime: the leader's COMMIT carries its tree's digest.
                let message = match message {
                    ZabMessage::Commit { zxid, .. } if self.tree.last_zxid() == zxid => {
                        ZabMessage::Commit {
                            zxid,
                            digest: Some(self.tree.digest()),
                        }
                    }
                    other => other,
                };
                self.effects.push_back(Effect::Send {
                    to,
                    wire: Wire::Zab(message),
                })
            }
            ZabCommand::CheckDigest { zxid, digest } => {
                let differs = self.tree.last_zxid() == zxid && self.tree.digest() != digest;
                if differs && !active(Failpoint::ServeDiverged) {
                    self.diverged = Divergence::Rebuild;
                    self.effects.push_back(Effect::Diverged { zxid });
                    return true;
                }
            }
            ZabCommand::Storage(op) => self.effects.push_back(Effect::Storage(op)),
            ZabCommand::Deliver { zxid, txn } => {
                let decoded = Txn::from_bytes(txn.clone()).expect("txns decode");
                assert_eq!(
                    decoded.zxid(),
                    zxid,
                    "member {}: delivered txn carries its zxid",
                    self.id
                );
                self.tree.apply(&decoded);
                self.effects.push_back(Effect::Delivered {
                    zxid,
                    txn,
                    digest: self.tree.digest(),
                });
                if let Some(path) = self.proposed.remove(&zxid) {
                    self.effects.push_back(Effect::Acknowledged { zxid, path });
                }
            }
            ZabCommand::SendSnapshot { to } => {
                // An exact image: the simulator's tree does not change while it is written.
                let zxid = self.tree.last_zxid();
                let image = SnapshotSource::Whole(self.tree.to_image());
                self.effects.push_back(Effect::Send {
                    to,
                    wire: Wire::Zab(ZabMessage::Snap {
                        zxid,
                        image,
                        fuzzy_through: zxid,
                    }),
                });
            }
            ZabCommand::Disconnect { peer } => self.effects.push_back(Effect::Disconnect { peer }),
            ZabCommand::Serving => match &self.role {
                // Every member reports the new epoch to lookers from now on
                // (ZooKeeper's updateElectionVote), so late joiners see agreement.
                Role::Leading(l) => {
                    let epoch = l.epoch();
                    self.election.update_peer_epoch(epoch);
                    self.effects.push_back(Effect::Established {
                        epoch,
                        last_zxid: self.tree.last_zxid(),
                    });
                }
                Role::Following(f) => self.election.update_peer_epoch(f.current_epoch()),
                Role::Looking => {}
            },
            ZabCommand::Abandon { .. } => return true,
        }
        false
    }
}

/// A create of `path` stamped with `zxid`: the simulated client write.
pub(super) fn create_txn(zxid: Zxid, now_ms: u64, path: &str) -> Bytes {
    use zkd_protocol::records::{Acl, CreateTxn, TxnHeader};
    let body = zkd_storage::TxnBody::Create(
        zkd_protocol::OpCode::Create,
        CreateTxn {
            path: path.into(),
            data: Some(Bytes::copy_from_slice(path.as_bytes())),
            acl: vec![Acl::world(31)],
            ephemeral: false,
            parent_c_version: 0,
        },
    );
    Txn {
        header: TxnHeader {
            client_id: 1,
            cxid: 0,
            zxid: zxid.0,
            time: now_ms as i64,
            r#type: body.type_code(),
        },
        body,
    }
    .to_bytes()
}
