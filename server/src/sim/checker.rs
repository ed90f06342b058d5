//! The invariants checked after every step of a simulation (Zab's, as the
//! fault catalogue's TLA+ list names them).

use crate::core::election::ServerId;
use bytes::Bytes;
use std::collections::BTreeMap;
use zkd_protocol::Zxid;

/// What the checker has seen so far.
#[derive(Debug, Default)]
pub struct Checker {
    /// Leadership: the member established in each epoch.
    leaders: BTreeMap<u32, ServerId>,
    /// Integrity and agreement: the txn delivered at each zxid, by anyone.
    delivered: BTreeMap<Zxid, u64>,
    /// Prefix consistency: the tree digest after applying each zxid.
    digests: BTreeMap<Zxid, u64>,
    /// Total order: the last zxid each member delivered in this incarnation.
    last_delivered: BTreeMap<ServerId, Zxid>,
    /// Writes whose clients were answered: the leader and the created path.
    pub acknowledged: BTreeMap<Zxid, (ServerId, String)>,
}

/// A broken invariant.
#[derive(Debug)]
pub struct Violation(pub String);

impl Checker {
    /// A member restarted: its deliveries start over from its recovered tree.
    pub fn restarted(&mut self, member: ServerId) {
        self.last_delivered.remove(&member);
    }

    /// `member` applied `zxid`, reaching `digest`.
    pub fn delivered(
        &mut self,
        member: ServerId,
        zxid: Zxid,
        txn: &Bytes,
        digest: u64,
    ) -> Result<(), Violation> {
        let hash = fnv(txn);
        if let Some(seen) = self.delivered.insert(zxid, hash) {
            if seen != hash {
                return Err(Violation(format!(
                    "agreement: member {member} delivered another txn at {zxid}"
                )));
            }
        }
        if let Some(seen) = self.digests.insert(zxid, digest) {
            if seen != digest {
                return Err(Violation(format!(
                    "prefix consistency: member {member}'s tree after {zxid} differs from another member's"
                )));
            }
        }
        if let Some(last) = self.last_delivered.insert(member, zxid) {
            if zxid <= last {
                return Err(Violation(format!(
                    "total order: member {member} delivered {zxid} after {last}"
                )));
            }
        }
        Ok(())
    }

    /// `member` established itself as leader of `epoch` with a tree at `last_zxid`.
    pub fn established(
        &mut self,
        member: ServerId,
        epoch: u32,
        last_zxid: Zxid,
        digest: u64,
    ) -> Result<(), Violation> {
        if let Some(other) = self.leaders.insert(epoch, member) {
            if other != member {
                return Err(Violation(format!(
                    "leadership: members {other} and {member} both established epoch {epoch}"
                )));
            }
        }
        // Every write committed in an earlier epoch. A later epoch's came
        // after this one was established, even when this leader learns of
        // its quorum late (it was paused): it can commit nothing more then.
        let earlier = Zxid::new(epoch, 0);
        let missing = (last_zxid < earlier)
            .then(|| self.acknowledged.range(last_zxid.next()..earlier).next())
            .flatten();
        if let Some((&lost, _)) = missing {
            return Err(Violation(format!(
                "leader log completeness: leader {member} of epoch {epoch} ends at {last_zxid}, \
                 without acknowledged write {lost}"
            )));
        }
        if let Some(&seen) = self.digests.get(&last_zxid) {
            if seen != digest {
                return Err(Violation(format!(
                    "leader log completeness: leader {member} of epoch {epoch} holds another \
                     history up to {last_zxid}"
                )));
            }
        }
        Ok(())
    }

    /// A client heard that its write `zxid` committed, from leader `member`.
    pub fn acknowledged(&mut self, member: ServerId, zxid: Zxid, path: String) {
        self.acknowledged.insert(zxid, (member, path));
    }

    /// The digest after `zxid`, if any member applied it.
    pub fn digest_at(&self, zxid: Zxid) -> Option<u64> {
        self.digests.get(&zxid).copied()
    }
}

fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3)
    })
}
