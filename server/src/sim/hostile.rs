//! Hostile peers (issue 49): in `hostile` runs, connections that are no
//! member's speak the peer wire to the members now and then, as an
//! attacker on their network would. Each goes through the member's
//! [`Admission`], as the runtime's peer layer takes it: the simulated
//! members have addresses of their own (10.0.0.N) and the attacker
//! another, so an impostor of a member is one from elsewhere.
//!
//! - Strangers' votes, forged: any state, zxid, epoch and round (read as
//!   the wire would carry them, and dropped where the runtime's decoder
//!   refuses them), and with reconfig a configuration naming the target
//!   alone at a version past any.
//! - Strangers and impostors asking to learn: FOLLOWERINFO claiming a
//!   later or the last epoch, an ACKEPOCH asking for a snapshot, then
//!   requests as `super` (a session created, a node created), as the
//!   frames of issue 49 did.
//!
//! Every client-visible invariant must hold; and no txn, snapshot or
//! commit is ever sent on a hostile connection (a learner is sent the
//! whole tree, ACLs aside).

use super::{Violation, WholeSim, Wire};
use crate::core::admission::{Admission, Port, Verdict};
use crate::core::election::ServerId;
use crate::core::zab::{ForwardedRequest, ZabMessage};
use crate::driver::peer_wire::notification_from_wire;
use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr};
use zkd_protocol::peer::election as wire_election;
use zkd_protocol::{OpCode, Record, MAX_EPOCH};

/// Sids no configuration names, which strangers claim.
const STRANGERS: [u64; 3] = [50, 51, 52];

/// Connection ids of hostile connections, past any member's.
const FIRST_CONN: u64 = 1 << 62;

/// A forged configuration's version: past any a run reaches.
const FORGED_VERSION: i64 = 0x7fff_0000_0000;

/// The hostile peers of a run, and what they did.
#[derive(Debug, Default)]
pub(super) struct Hostile {
    next_ms: u64,
    next_conn: u64,
    /// Hostile connections opened: nothing of the tree may be sent on them.
    conns: BTreeSet<u64>,
    /// What was sent to a hostile peer that must not have been.
    leaked: Option<String>,
    /// Frames sent, and connections admission refused.
    pub frames: u64,
    pub refused: u64,
}

/// Member `id`'s address.
fn address(id: ServerId) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(10, 0, 0, id.0 as u8))
}

/// The attacker's address.
const ELSEWHERE: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 9, 9));

impl WholeSim {
    /// Now and then, a hostile peer speaks to a member that is up.
    pub(super) fn hostile_due(&mut self) -> Result<(), Violation> {
        let Some(h) = &self.hostile else {
            return Ok(());
        };
        if let Some(leak) = &h.leaked {
            return Err(Violation(format!("confidentiality: {leak}")));
        }
        if self.now < h.next_ms || self.now > self.schedule.faults_until_ms {
            return Ok(());
        }
        let next_ms = self.now + 20 + self.rng.below(200);
        let up = self.up();
        if up.is_empty() {
            return Ok(());
        }
        let target = up[self.rng.below(up.len() as u64) as usize];
        let ids: Vec<ServerId> = self.procs.keys().copied().collect();
        let claimed = match self.rng.below(2) {
            0 => ServerId(STRANGERS[self.rng.below(3) as usize]),
            _ => ids[self.rng.below(ids.len() as u64) as usize],
        };
        if let Some(h) = &mut self.hostile {
            h.next_ms = next_ms;
        }
        match self.rng.below(2) {
            0 => self.forged_vote(target, claimed),
            _ => self.asks_to_learn(target, claimed),
        }
        Ok(())
    }

    /// What `target`'s admission makes of a connection from the attacker
    /// claiming `sid` on `port`.
    fn admitted(&mut self, target: ServerId, port: Port, sid: ServerId) -> bool {
        let mut admission = Admission::new(target);
        for &id in self.procs.keys() {
            admission.set_member(id, vec![address(id)]);
        }
        let verdict = admission.admit(port, sid, ELSEWHERE, false);
        let taken = matches!(verdict, Verdict::Member | Verdict::Stranger);
        if let Some(h) = &mut self.hostile {
            h.refused += u64::from(!taken);
        }
        taken
    }

    /// A vote from `sid`, forged, to `target`'s election port.
    fn forged_vote(&mut self, target: ServerId, sid: ServerId) {
        if !self.admitted(target, Port::Election, sid) {
            return;
        }
        let epoch = self.rng.below(u64::from(MAX_EPOCH) + 2);
        let zxids = [0, -1, i64::MAX, (epoch << 32) as i64 + 7, 1 << 32];
        let config = match self.schedule.membership {
            true => {
                let line = super::membership::server_line(target.0, false);
                format!("{line}\nversion={FORGED_VERSION:x}")
            }
            false => String::new(),
        };
        let n = wire_election::Notification {
            state: self.rng.below(3) as i32,
            leader: [sid.0, target.0][self.rng.below(2) as usize],
            zxid: zxids[self.rng.below(zxids.len() as u64) as usize],
            election_epoch: self.rng.below(1 << 20),
            peer_epoch: epoch,
            sid: sid.0,
            config_version: 0,
            config: config.into(),
        };
        // The runtime's decoder closes the link on what it refuses.
        if let Ok(n) = notification_from_wire(&n) {
            self.hostile_frames(1);
            let delay = 1 + self.rng.below(10);
            self.queue(sid, target, Wire::Notification(n), delay);
        }
    }

    /// FOLLOWERINFO from `sid` on a new connection to `target`'s quorum
    /// port, then ACKEPOCH asking for a snapshot and requests as `super`.
    fn asks_to_learn(&mut self, target: ServerId, sid: ServerId) {
        if !self.admitted(target, Port::Quorum, sid) {
            return;
        }
        let Some(h) = &mut self.hostile else {
            return;
        };
        h.next_conn += 1;
        let conn = FIRST_CONN + h.next_conn;
        h.conns.insert(conn);
        let epochs = [1, MAX_EPOCH - 1, MAX_EPOCH, 1 << 20];
        let accepted_epoch = epochs[self.rng.below(epochs.len() as u64) as usize];
        let session = (sid.0 as i64) << 56 | self.rng.below(1 << 20) as i64;
        let with_requests = self.rng.below(2) == 0;
        let mut messages = vec![
            ZabMessage::FollowerInfo { accepted_epoch },
            ZabMessage::AckEpoch {
                current_epoch: Some(accepted_epoch),
                last_zxid: zkd_protocol::Zxid::ZERO,
                log_base: zkd_protocol::Zxid::ZERO,
                wants_snapshot: true,
            },
        ];
        if with_requests {
            let timeout = 4_000i32.to_be_bytes().to_vec();
            messages.push(forwarded(session, 0, OpCode::CreateSession, timeout));
            let create = create_body(&format!("/hostile-{conn}"));
            messages.push(forwarded(session, 1, OpCode::Create, create));
        }
        self.hostile_frames(messages.len() as u64);
        for message in messages {
            self.queue(sid, target, Wire::Zab { conn, message }, 1);
        }
    }

    fn hostile_frames(&mut self, n: u64) {
        if let Some(h) = &mut self.hostile {
            h.frames += n;
        }
    }

    /// A member sends `wire`: on a hostile connection the attacker reads
    /// it (true: it goes no further), and nothing of the tree may be there.
    pub(super) fn hostile_reads(&mut self, from: ServerId, wire: &Wire) -> bool {
        let Some(h) = &mut self.hostile else {
            return false;
        };
        let (conn, what) = match wire {
            Wire::Snap { conn, .. } => (*conn, "a snapshot".to_string()),
            Wire::Zab { conn, message } => (*conn, format!("{message:?}")),
            // A close ends the connection as any other's.
            _ => return false,
        };
        if !h.conns.contains(&conn) {
            return false;
        }
        let tree = !matches!(
            wire,
            Wire::Zab {
                message: ZabMessage::LeaderInfo { .. } | ZabMessage::Ping { .. },
                ..
            }
        );
        if tree && h.leaked.is_none() {
            h.leaked = Some(format!("member {from} sent {what:.120} to a hostile peer"));
        }
        true
    }
}

/// A REQUEST as a follower forwards it, as `super`.
fn forwarded(session: i64, cxid: i32, op: OpCode, body: Vec<u8>) -> ZabMessage {
    ZabMessage::Request(ForwardedRequest {
        session,
        cxid,
        op_type: op as i32,
        body: body.into(),
        auth: vec![("super".into(), String::new())],
    })
}

/// A create request's body: `path`, open to anyone, persistent.
fn create_body(path: &str) -> Vec<u8> {
    use zkd_protocol::records::{Acl, CreateRequest, Id};
    let anyone = Id {
        scheme: "world".into(),
        id: "anyone".into(),
    };
    let request = CreateRequest {
        path: path.into(),
        data: None,
        acl: vec![Acl {
            perms: 31,
            id: anyone,
        }],
        flags: 0,
    };
    request.to_bytes().to_vec()
}
