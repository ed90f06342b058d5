//! The client that changes the membership in `membership` runs: now and
//! then it removes a voter or adds one back by reconfig (incremental, from
//! any version), and in the quiet end it asks for every member back (bulk)
//! until that is acknowledged or refused as no change. What it must see:
//! two configurations acknowledged at one version are the same.

use super::requests::Op;
use crate::sim::membership::server_line;
use crate::sim::rng::Rng;
use crate::sim::Violation;
use bytes::Bytes;
use std::collections::{BTreeMap, VecDeque};
use zkd_protocol::records::ReconfigRequest;
use zkd_protocol::ErrorCode;

/// The membership client's requests, and what it was answered.
#[derive(Debug)]
pub(super) struct Reconfigs {
    /// Voters the run starts with, ids 1 to `voters`; observers after them.
    voters: u64,
    observers: u64,
    /// No change is asked for before then.
    next_ms: u64,
    /// Every configuration a reconfig was acknowledged with, by version.
    acked: BTreeMap<i64, Bytes>,
    /// Every voter is back: the quiet end's reconfig was acknowledged, or
    /// refused as one that changes nothing.
    all_back: bool,
    /// Random changes (random runs); a script asks for its own instead.
    random: bool,
    /// Changes a script asked for, sent in order.
    queued: VecDeque<ReconfigRequest>,
}

impl Reconfigs {
    pub(super) fn new((voters, observers): (u64, u64)) -> Reconfigs {
        Reconfigs {
            voters,
            observers,
            next_ms: 500,
            acked: BTreeMap::new(),
            all_back: false,
            random: true,
            queued: VecDeque::new(),
        }
    }

    /// No random changes from now on: only those [`queue`](Self::queue)d,
    /// and no bulk one at the end.
    pub(super) fn scripted(&mut self) {
        self.random = false;
    }

    /// A script's change, sent as soon as the client is idle.
    pub(super) fn queue(&mut self, change: ReconfigRequest) {
        self.queued.push_back(change);
    }

    /// The next change to ask for at `now`: a random one while clients
    /// write, every voter back once they stop.
    pub(super) fn choose(&mut self, now: u64, writing: bool, rng: &mut Rng) -> Option<Op> {
        if let Some(change) = self.queued.pop_front() {
            return Some(Op::Reconfig(change));
        }
        if !self.random {
            return None;
        }
        if !writing {
            return (!self.all_back).then(|| Op::Reconfig(self.everyone()));
        }
        if now < self.next_ms {
            return None;
        }
        self.next_ms = now + 400 + rng.below(1_100);
        let id = 1 + rng.below(self.voters);
        let change = match rng.below(2) {
            0 => ReconfigRequest {
                leaving_servers: id.to_string(),
                cur_config_id: -1,
                ..ReconfigRequest::default()
            },
            _ => ReconfigRequest {
                joining_servers: server_line(id, false),
                cur_config_id: -1,
                ..ReconfigRequest::default()
            },
        };
        Some(Op::Reconfig(change))
    }

    /// A bulk change to the members the run started with.
    fn everyone(&self) -> ReconfigRequest {
        let all = 1..=self.voters + self.observers;
        let lines: Vec<String> = all.map(|id| server_line(id, id > self.voters)).collect();
        ReconfigRequest {
            new_members: lines.join(","),
            cur_config_id: -1,
            ..ReconfigRequest::default()
        }
    }

    /// `change` was acknowledged with configuration `data`.
    pub(super) fn acknowledged(
        &mut self,
        change: &ReconfigRequest,
        data: Option<Bytes>,
    ) -> Result<(), Violation> {
        let data = data.unwrap_or_default();
        let version = std::str::from_utf8(&data)
            .ok()
            .and_then(|t| t.lines().last()?.strip_prefix("version="))
            .and_then(|v| i64::from_str_radix(v, 16).ok())
            .ok_or_else(|| Violation(format!("reconfig: an answer without a version: {data:?}")))?;
        if let Some(other) = self.acked.insert(version, data.clone()) {
            if other != data {
                return Err(Violation(format!(
                    "reconfig: two configurations acknowledged at version {version:x}: {other:?} and {data:?}"
                )));
            }
        }
        self.all_back |= !change.new_members.is_empty();
        Ok(())
    }

    /// `change` was refused with `err`: the quiet end's, as one that
    /// changes nothing, means every voter is back.
    pub(super) fn refused(&mut self, change: &ReconfigRequest, err: i32) {
        if !change.new_members.is_empty() && err == ErrorCode::BadArguments.code() {
            self.all_back = true;
        }
    }

    /// Every configuration acknowledged, by version.
    pub(super) fn acked(&self) -> &BTreeMap<i64, Bytes> {
        &self.acked
    }
}
