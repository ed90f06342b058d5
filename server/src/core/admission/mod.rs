//! Who may speak on a member's peer ports, decided without I/O, as
//! quinn-proto's `Endpoint` decides about connections: the runtime's
//! `peer/` asks it about each connection (its remote address, the sid its
//! first frame claims, whether quorum TLS or SASL authenticated it) and
//! keeps only sockets.
//!
//! The rules (issue 49; `server/README.md`, Security):
//! * A configured sid is taken only from its member's configured host (the
//!   addresses that host resolves to; the runtime resolves it again on a
//!   refusal, so a moved member or a rescheduled pod still gets in), unless
//!   quorum TLS or SASL authenticated the link, which then decides.
//! * A sid outside the configuration (a stranger) is answered with votes on
//!   the election port and refused on the quorum port: a learner receives
//!   the whole tree, ACLs aside. The leader's role then admits only the
//!   current and proposed configurations' members as learners.
//! * Handshakes in progress are counted per remote address: each member's
//!   addresses have slots of their own that no flood from elsewhere takes,
//!   and everyone else shares a few.

use crate::core::election::ServerId;
use crate::failpoints::{active, Failpoint};
use std::collections::BTreeMap;
use std::net::IpAddr;

#[cfg(test)]
mod tests;

/// Handshakes in progress from one member's address at most (a member
/// dials each port of each peer at most once at a time; restarts overlap).
pub const MEMBER_HANDSHAKES: usize = 16;

/// Handshakes in progress from any one other address at most.
pub const ADDRESS_HANDSHAKES: usize = 4;

/// Handshakes in progress from all other addresses together at most.
pub const STRANGER_HANDSHAKES: usize = 16;

/// Which peer port a connection came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Port {
    Election,
    Quorum,
}

/// What becomes of a connection whose first frame claims a sid.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// A configured member's link.
    Member,
    /// Outside the configuration, on the election port: answered with votes.
    Stranger,
    /// Closed.
    Refused(Refusal),
}

/// Why a connection is closed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// It claims this member's own sid.
    OwnSid,
    /// It claims a member's sid from an address that member's host is not.
    WrongAddress { sid: ServerId, remote: IpAddr },
    /// A stranger on the quorum port: only members learn.
    NotAMember { sid: ServerId },
    /// Its address has no handshake slot free.
    HandshakesFull { remote: IpAddr },
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::OwnSid => f.write_str("it claims this member's own sid"),
            Refusal::WrongAddress { sid, remote } => write!(
                f,
                "it claims sid {sid}, whose host is not {remote} (and quorum TLS or SASL did not authenticate it)"
            ),
            Refusal::NotAMember { sid } => write!(
                f,
                "sid {sid} is no member of the configuration: only members learn"
            ),
            Refusal::HandshakesFull { remote } => {
                write!(f, "too many handshakes in progress from {remote}")
            }
        }
    }
}

/// One handshake's slot, from [`Admission::start_handshake`].
#[derive(Debug)]
pub struct HandshakeSlot {
    remote: IpAddr,
    /// Counted among the strangers' (its address was no member's then).
    stranger: bool,
}

/// The admission state of one member's peer ports.
#[derive(Debug)]
pub struct Admission {
    me: ServerId,
    /// Every member this one knows (its configuration's, and those of
    /// configurations proposed or activated since), with the addresses its
    /// host resolved to (none yet: resolved on its first connection).
    members: BTreeMap<ServerId, Vec<IpAddr>>,
    /// Handshakes in progress, by remote address.
    pending: BTreeMap<IpAddr, usize>,
    /// Of those, the ones from addresses that are no member's.
    pending_strangers: usize,
}

impl Admission {
    /// A member `me` that knows no other yet.
    pub fn new(me: ServerId) -> Admission {
        Admission {
            me,
            members: BTreeMap::new(),
            pending: BTreeMap::new(),
            pending_strangers: 0,
        }
    }

    /// `sid` is a member whose host resolves to `addrs` (replacing what
    /// it resolved to before).
    pub fn set_member(&mut self, sid: ServerId, addrs: Vec<IpAddr>) {
        self.members.insert(sid, addrs);
    }

    /// Whether `remote` is some member's address.
    fn is_member_address(&self, remote: IpAddr) -> bool {
        self.members.values().any(|addrs| addrs.contains(&remote))
    }

    /// A connection from `remote` starts its handshake: a slot, to be
    /// given back to [`end_handshake`](Self::end_handshake), or why not.
    pub fn start_handshake(&mut self, remote: IpAddr) -> Result<HandshakeSlot, Refusal> {
        // Planted (shared-handshake-slots): one pool for every address.
        let shared = active(Failpoint::SharedHandshakeSlots);
        let stranger = shared || !self.is_member_address(remote);
        let now = self.pending.get(&remote).copied().unwrap_or(0);
        let full = match (stranger, shared) {
            (false, _) => now >= MEMBER_HANDSHAKES,
            (true, true) => self.pending_strangers >= STRANGER_HANDSHAKES,
            (true, false) => {
                now >= ADDRESS_HANDSHAKES || self.pending_strangers >= STRANGER_HANDSHAKES
            }
        };
        if full {
            return Err(Refusal::HandshakesFull { remote });
        }
        *self.pending.entry(remote).or_default() += 1;
        self.pending_strangers += usize::from(stranger);
        Ok(HandshakeSlot { remote, stranger })
    }

    /// A handshake ended (its link is up, or it was closed): its slot is free.
    pub fn end_handshake(&mut self, slot: HandshakeSlot) {
        if let Some(n) = self.pending.get_mut(&slot.remote) {
            *n -= 1;
            if *n == 0 {
                self.pending.remove(&slot.remote);
            }
        }
        self.pending_strangers -= usize::from(slot.stranger);
    }

    /// Handshakes in progress from `remote`.
    #[cfg(test)]
    pub fn handshakes_from(&self, remote: IpAddr) -> usize {
        self.pending.get(&remote).copied().unwrap_or(0)
    }

    /// What becomes of a connection on `port` from `remote` whose first
    /// frame claims `sid`; `authenticated`: quorum TLS (a verified
    /// certificate) or quorum SASL proved it one of the ensemble's.
    pub fn admit(&self, port: Port, sid: ServerId, remote: IpAddr, authenticated: bool) -> Verdict {
        if sid == self.me {
            return Verdict::Refused(Refusal::OwnSid);
        }
        // Planted: any address passes (any-address); strangers learn
        // (strangers-learn), as on ZooKeeper's ports.
        let vouched = authenticated || active(Failpoint::AnyAddress);
        match self.members.get(&sid) {
            Some(addrs) if vouched || from_host(addrs, remote) => Verdict::Member,
            Some(_) => Verdict::Refused(Refusal::WrongAddress { sid, remote }),
            None if port == Port::Election || active(Failpoint::StrangersLearn) => {
                Verdict::Stranger
            }
            None => Verdict::Refused(Refusal::NotAMember { sid }),
        }
    }
}

/// Whether `remote` is one of a member's addresses. A host written as the
/// wildcard (a member's own line as `0.0.0.0`, seen from its peers) names no
/// address to check, and matches any.
fn from_host(addrs: &[IpAddr], remote: IpAddr) -> bool {
    addrs.iter().any(|a| *a == remote || a.is_unspecified())
}
