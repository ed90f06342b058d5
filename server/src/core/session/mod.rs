//! The session table: timeouts, expiry buckets rounded up to tickTime (as
//! ZooKeeper's `ExpiryQueue`), and the closing flag that makes later requests
//! fail with SESSIONEXPIRED while the closeSession txn is in flight.

mod password;

pub use password::session_password;

use std::collections::{BTreeMap, BTreeSet};

/// A client session id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SessionId(pub i64);

impl std::fmt::Display for SessionId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "0x{:x}", self.0)
    }
}

#[derive(Clone, Debug)]
struct Session {
    timeout_ms: i32,
    expires_at_ms: u64,
    closing: bool,
}

/// Live sessions and when each expires.
#[derive(Debug)]
pub struct SessionTable {
    tick_ms: u64,
    sessions: BTreeMap<SessionId, Session>,
    buckets: BTreeMap<u64, BTreeSet<SessionId>>,
    next_id: i64,
}

impl SessionTable {
    /// An empty table whose ids start from ZooKeeper's layout: server id in the
    /// top byte, then the low 40 bits of `start_ms`, then a 16-bit counter.
    pub fn new(tick_ms: u64, server_id: u8, start_ms: u64) -> SessionTable {
        let base = ((start_ms << 24) >> 8) | ((server_id as u64) << 56);
        let mut next_id = base as i64;
        // 0x8000000000000000 marks containers; never hand it out.
        if next_id == i64::MIN {
            next_id += 1;
        }
        SessionTable {
            tick_ms: tick_ms.max(1),
            sessions: BTreeMap::new(),
            buckets: BTreeMap::new(),
            next_id,
        }
    }

    /// Allocates a fresh session id.
    pub fn next_session_id(&mut self) -> SessionId {
        let id = SessionId(self.next_id);
        self.next_id = self.next_id.wrapping_add(1);
        id
    }

    /// Adds (or re-adds after recovery) a session that expires `timeout_ms` after `now_ms`.
    pub fn add(&mut self, id: SessionId, timeout_ms: i32, now_ms: u64) {
        self.sessions.insert(
            id,
            Session {
                timeout_ms,
                expires_at_ms: 0,
                closing: false,
            },
        );
        self.touch(id, now_ms);
    }

    fn bucket_of(&self, t: u64) -> u64 {
        // Round up to the next tick, as ExpiryQueue does.
        (t / self.tick_ms + 1) * self.tick_ms
    }

    /// Pushes the session's expiry to `now + timeout`. False if it is unknown or closing.
    /// A reattach negotiated `timeout_ms`: later touches use it, as ZooKeeper
    /// touches with the connection's negotiated timeout. It is not persisted:
    /// after a restart the session's created timeout applies again.
    pub fn renegotiate(&mut self, id: SessionId, timeout_ms: i32, now_ms: u64) -> bool {
        if let Some(session) = self.sessions.get_mut(&id) {
            session.timeout_ms = timeout_ms;
        }
        self.touch(id, now_ms)
    }

    pub fn touch(&mut self, id: SessionId, now_ms: u64) -> bool {
        let Some(session) = self.sessions.get(&id) else {
            return false;
        };
        if session.closing {
            return false;
        }
        let new_expiry = self.bucket_of(now_ms + session.timeout_ms.max(0) as u64);
        let old_expiry = session.expires_at_ms;
        if new_expiry == old_expiry {
            return true;
        }
        self.unbucket(id, old_expiry);
        self.buckets.entry(new_expiry).or_default().insert(id);
        if let Some(s) = self.sessions.get_mut(&id) {
            s.expires_at_ms = new_expiry;
        }
        true
    }

    fn unbucket(&mut self, id: SessionId, expiry: u64) {
        if let Some(bucket) = self.buckets.get_mut(&expiry) {
            bucket.remove(&id);
            if bucket.is_empty() {
                self.buckets.remove(&expiry);
            }
        }
    }

    /// Whether the session exists and is not closing.
    pub fn is_live(&self, id: SessionId) -> bool {
        self.sessions.get(&id).is_some_and(|s| !s.closing)
    }

    /// Whether the session exists (closing or not).
    pub fn contains(&self, id: SessionId) -> bool {
        self.sessions.contains_key(&id)
    }

    /// The negotiated timeout of a session.
    pub fn timeout_ms(&self, id: SessionId) -> Option<i32> {
        self.sessions.get(&id).map(|s| s.timeout_ms)
    }

    /// Marks a session closing: it stops being touched and serves no requests.
    pub fn set_closing(&mut self, id: SessionId) {
        let Some(expiry) = self.sessions.get(&id).map(|s| s.expires_at_ms) else {
            return;
        };
        self.unbucket(id, expiry);
        if let Some(s) = self.sessions.get_mut(&id) {
            s.closing = true;
        }
    }

    /// Forgets a session (its closeSession txn was applied).
    pub fn remove(&mut self, id: SessionId) {
        if let Some(s) = self.sessions.remove(&id) {
            self.unbucket(id, s.expires_at_ms);
        }
    }

    /// When the next bucket expires, if any session is live.
    pub fn next_expiry_ms(&self) -> Option<u64> {
        self.buckets.keys().next().copied()
    }

    /// Sessions whose expiry is at or before `now_ms`; they are marked closing.
    pub fn expire(&mut self, now_ms: u64) -> Vec<SessionId> {
        let mut expired = Vec::new();
        while let Some((&at, _)) = self.buckets.first_key_value() {
            if at > now_ms {
                break;
            }
            if let Some((_, ids)) = self.buckets.pop_first() {
                expired.extend(ids);
            }
        }
        for id in &expired {
            if let Some(s) = self.sessions.get_mut(id) {
                s.closing = true;
            }
        }
        expired
    }

    /// Number of sessions.
    pub fn len(&self) -> usize {
        self.sessions.len()
    }

    /// Whether there are no sessions.
    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }

    /// Sessions grouped by expiry bucket, for `dump`.
    pub fn buckets(&self) -> impl Iterator<Item = (u64, &BTreeSet<SessionId>)> {
        self.buckets.iter().map(|(t, s)| (*t, s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_carry_the_server_byte_and_count_up() {
        let mut t = SessionTable::new(2000, 1, 0x1234_5678);
        let a = t.next_session_id();
        let b = t.next_session_id();
        assert_eq!((a.0 as u64) >> 56, 1);
        assert_eq!(b.0, a.0 + 1);
        assert_eq!(a.0 & 0xffff, 0);
    }

    #[test]
    fn expiry_rounds_up_to_the_tick_and_touch_defers_it() {
        let mut t = SessionTable::new(2000, 1, 0);
        let s = t.next_session_id();
        t.add(s, 4000, 100);
        assert_eq!(t.next_expiry_ms(), Some(6000));
        assert!(t.expire(5999).is_empty());
        t.touch(s, 3000);
        assert_eq!(t.next_expiry_ms(), Some(8000));
        assert_eq!(t.expire(8000), vec![s]);
        assert!(!t.is_live(s));
        assert!(!t.touch(s, 8001));
    }
}
