//! What the node holds in each of its modes: a follower's forwarded
//! requests and touched sessions, a leader's session owners and epoch base,
//! the handshakes a member not serving holds for a moment. Each mode's state
//! lives in its variant, so it is gone when the mode ends.

use crate::core::acl::AuthIds;
use crate::core::election::ServerId;
use crate::core::session::SessionId;
use crate::core::types::{ConnId, Mode};
use std::collections::BTreeMap;
use std::sync::Arc;
use zkd_protocol::records::ConnectRequest;
use zkd_protocol::Zxid;

/// How long after it stops serving a member holds new clients' handshakes
/// instead of closing them: long enough for a failover (an election and a
/// sync), short enough that a client of a member cut off from its quorum
/// soon moves on. A stock client that is closed tries its next server at
/// once only in its first pass over the list; then it backs off (the Rust
/// client by 300 ms and more), which held handshakes spare it.
pub(in crate::core) const HOLD_HANDSHAKES_MS: u64 = 500;

/// The node's mode with the state that belongs to it.
#[derive(Debug)]
pub(in crate::core) enum ModeState {
    /// A server of its own: writes start here.
    Standalone,
    /// A member electing or syncing.
    NotServing(NotServing),
    /// The established leader.
    Leading(Leading),
    /// An up-to-date follower.
    Following(Following),
    /// A member without a quorum serving read-only sessions.
    ReadOnly,
}

/// A member electing or syncing.
#[derive(Debug, Default)]
pub(in crate::core) struct NotServing {
    /// Handshakes are held, not refused, until this time (monotonic ms).
    pub hold_until_ms: u64,
    /// Connections whose handshake waits for the member to serve again.
    pub held: Vec<(ConnId, ConnectRequest)>,
    /// Read-only mode: the member looks for a leader, and serves read-only
    /// sessions from then if it has found none.
    pub read_only_at_ms: Option<u64>,
}

/// The established leader.
#[derive(Debug, Default)]
pub(in crate::core) struct Leading {
    /// The member each session is attached to (by its id), so a write from
    /// a member the session left answers SESSIONMOVED. A session with no
    /// entry (a new leader's) belongs to the first to use it.
    pub owners: BTreeMap<SessionId, u64>,
    /// `epoch << 32`, which it reports as processed before the epoch's
    /// first txn, as ZooKeeper's leader does.
    pub epoch_base: Zxid,
    /// The identities the last forwarded request carried, and what they
    /// were built into: a follower's connections mostly hold the same few.
    pub forwarded_auth: Option<(ForwardedIds, Arc<AuthIds>)>,
    /// Requests each follower forwarded that are in flight here (by id).
    /// A follower's own gate holds it to `MAX_OUTSTANDING`; the member
    /// closes the link of one that sends far more (issue 35, finding 7).
    pub forwarded: BTreeMap<u64, usize>,
    /// The leader and the followers synced with it, as its role last said:
    /// a reconfig needs a synced quorum of the next configuration.
    pub synced: Vec<ServerId>,
}

impl Leading {
    /// A txn follower `from` forwarded was committed here.
    pub fn forwarded_landed(&mut self, from: u64) {
        if let Some(n) = self.forwarded.get_mut(&from) {
            *n -= 1;
            if *n == 0 {
                self.forwarded.remove(&from);
            }
        }
    }
}

/// Identities as a forwarded request carries them: `(scheme, id)`, in the
/// order the connection added them.
pub(in crate::core) type ForwardedIds = Vec<(String, String)>;

/// An up-to-date follower.
#[derive(Debug, Default)]
pub(in crate::core) struct Following {
    /// Sessions being created for local connections, by the id this member
    /// chose (ZooKeeper's learners allocate session ids).
    pub creating: BTreeMap<SessionId, ConnId>,
    /// Sessions touched since the last PING, with their timeouts.
    pub touched: BTreeMap<SessionId, i32>,
    /// Requests forwarded to the leader and not answered yet, so
    /// `outstanding` bounds a follower's intake as it does a leader's.
    pub forwarded: usize,
    /// An observer: it serves as a follower does, without a vote.
    pub observer: bool,
}

impl ModeState {
    /// The mode's name without its state.
    pub fn mode(&self) -> Mode {
        match self {
            ModeState::Standalone => Mode::Standalone,
            ModeState::NotServing(_) => Mode::NotServing,
            ModeState::ReadOnly => Mode::ReadOnly,
            ModeState::Leading(_) => Mode::Leading,
            ModeState::Following(f) if f.observer => Mode::Observing,
            ModeState::Following(_) => Mode::Following,
        }
    }

    /// A follower's state, if following.
    pub fn following(&mut self) -> Option<&mut Following> {
        match self {
            ModeState::Following(f) => Some(f),
            _ => None,
        }
    }

    /// A leader's state, if leading.
    pub fn leading(&mut self) -> Option<&mut Leading> {
        match self {
            ModeState::Leading(l) => Some(l),
            _ => None,
        }
    }
}
