//! The tree digest: one `u64` that summarises the whole replicated state.
//!
//! Why: members of an ensemble (and the nodes of the deterministic simulator)
//! must hold identical trees after applying the same txns. Comparing whole
//! trees is O(n); comparing `DataTree::digest()` at equal zxids is O(1) and
//! catches a divergence (a replay bug, a lost or doubled txn, a non-deterministic
//! apply) at the zxid where it first appears. ZooKeeper does the same with
//! `DigestCalculator` / `TxnDigest` (ZOOKEEPER-3114); this is our own
//! definition, not wire-compatible with it.
//!
//! Definition (stable: fixed constants, little-endian words, no `RandomState`,
//! no platform-dependent types):
//!
//! * A node's term is `node_hash(content_hash(path, data, acl), stat)`:
//!   - `content_hash` absorbs the path's bytes, a tag for the data (0 for
//!     `None`, 1 for `Some`, so null and empty differ) and the data's bytes, then
//!     the number of ACL entries and each entry's perms, scheme and id.
//!     Every byte string is preceded by its length, so fields cannot run into
//!     each other.
//!   - `node_hash` continues from that state with the persisted stat: czxid,
//!     mzxid, pzxid, ctime, mtime, ephemeralOwner, then version, cversion and
//!     aversion, and finishes with murmur3's 64-bit finaliser.
//! * `/zookeeper/config` has no term: each member sets it from its own
//!   configuration, at its own moment (a new version activates on the leader
//!   when it is established, on a follower at UPTODATE). ZooKeeper leaves all
//!   of `/zookeeper/` out of its digest.
//! * A session's term is `session_hash(id, timeout)`.
//! * `digest = Σ node terms + Σ session terms` (wrapping). A sum, not a xor,
//!   so two identical terms do not cancel; order-independent, so it can be kept
//!   incrementally: every change subtracts the old term and adds the new one.
//!
//! Children lists are not hashed (the paths imply them) and neither is the
//! last zxid (digests are compared at equal zxids). Node content hashes are
//! cached in [`DataNode`](super::DataNode), so a change to a stat alone (the
//! parent's pzxid and cversion on every create and delete) costs a few
//! multiplies and never re-reads the data.
//!
//! The mixing step is a folded 64×64→128-bit multiply (as in wyhash and
//! foldhash), taking two input words at a time; data over 64 bytes runs in
//! four independent lanes. It is well mixed for accidental differences, which
//! is what a divergence check needs; it is not meant to resist inputs crafted
//! to collide.

use zkd_protocol::records::{Acl, StatPersisted};

/// Whether the node at `path` has a term in the digest: all but
/// `/zookeeper/config`.
pub(super) fn counts(path: &[u8]) -> bool {
    path != b"/zookeeper/config"
}

/// Multiplier keys (digits of π, as odd 64-bit words; any fixed values do).
const K: [u64; 5] = [
    0x243f_6a88_85a3_08d3,
    0x1319_8a2e_0370_7345,
    0xa409_3822_299f_31d1,
    0x082e_fa98_ec4e_6c89,
    0x4528_21e6_38d0_1377,
];
/// Start state of a node hash.
const NODE_SEED: u64 = 0xbe54_66cf_34e9_0c6d;
/// Start state of a session hash.
const SESSION_SEED: u64 = 0xc0ac_29b7_c97c_50dd;

/// Folded multiply: the xor of the high and low halves of the 128-bit product.
#[inline(always)]
fn fold(a: u64, b: u64) -> u64 {
    let r = u128::from(a) * u128::from(b);
    (r as u64) ^ ((r >> 64) as u64)
}

/// murmur3's fmix64: every input bit affects every output bit.
#[inline(always)]
fn finish(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^ (x >> 33)
}

#[inline(always)]
fn word_at(b: &[u8], i: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[i..i + 8]);
    u64::from_le_bytes(w)
}

#[inline(always)]
fn half_at(b: &[u8], i: usize) -> u64 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&b[i..i + 4]);
    u64::from(u32::from_le_bytes(w))
}

/// The last 0..16 bytes as two words. With the length (absorbed alongside)
/// the pair determines the bytes: the reads overlap but cover every byte.
#[inline(always)]
fn tail_words(t: &[u8]) -> (u64, u64) {
    let n = t.len();
    if n >= 8 {
        (word_at(t, 0), word_at(t, n - 8))
    } else if n >= 4 {
        (half_at(t, 0), half_at(t, n - 4))
    } else if n > 0 {
        (
            u64::from(t[0]) << 16 | u64::from(t[n / 2]) << 8 | u64::from(t[n - 1]),
            0,
        )
    } else {
        (0, 0)
    }
}

/// A streaming hash over 64-bit words, absorbed two at a time.
struct Hasher(u64);

impl Hasher {
    #[inline(always)]
    fn pair(&mut self, a: u64, b: u64) {
        self.0 = fold(a ^ self.0, b ^ K[0]);
    }

    /// The bytes as little-endian words, then the last (up to 16) bytes
    /// together with the length.
    fn bytes(&mut self, b: &[u8]) {
        let mut rest = b;
        if b.len() > 64 {
            let mut lanes = [self.0 ^ K[1], self.0 ^ K[2], self.0 ^ K[3], self.0 ^ K[4]];
            let mut blocks = b.chunks_exact(64);
            for block in &mut blocks {
                for (j, lane) in lanes.iter_mut().enumerate() {
                    let (a, c) = (word_at(block, 16 * j), word_at(block, 16 * j + 8));
                    *lane = fold(a ^ *lane, c ^ K[j + 1]);
                }
            }
            rest = blocks.remainder();
            self.pair(lanes[0], lanes[1]);
            self.pair(lanes[2], lanes[3]);
        }
        while rest.len() > 16 {
            self.pair(word_at(rest, 0), word_at(rest, 8));
            rest = &rest[16..];
        }
        let (a, c) = tail_words(rest);
        self.pair(a, c ^ (b.len() as u64).rotate_left(32));
    }
}

/// The hash of what only setData and setACL change: path, data and ACL.
/// An unfinished hasher state, continued by [`node_hash`].
pub(super) fn content_hash(path: &[u8], data: Option<&[u8]>, acl: &[Acl]) -> u64 {
    let mut h = Hasher(NODE_SEED);
    h.bytes(path);
    match data {
        None => h.pair(0, 0),
        Some(d) => {
            h.pair(1, 0);
            h.bytes(d);
        }
    }
    h.pair(acl.len() as u64, 0);
    for entry in acl {
        h.pair(entry.perms as u32 as u64, 0);
        h.bytes(entry.id.scheme.as_bytes());
        h.bytes(entry.id.id.as_bytes());
    }
    h.0
}

/// A node's term in the digest: its content hash with its persisted stat.
#[inline]
pub(super) fn node_hash(content: u64, s: &StatPersisted) -> u64 {
    let mut h = Hasher(content);
    h.pair(s.czxid as u64, s.mzxid as u64);
    h.pair(s.pzxid as u64, s.ctime as u64);
    h.pair(s.mtime as u64, s.ephemeral_owner as u64);
    h.pair(
        (s.version as u32 as u64) << 32 | s.cversion as u32 as u64,
        s.aversion as u32 as u64,
    );
    finish(h.0)
}

/// A session's term in the digest.
pub(super) fn session_hash(id: i64, timeout: i32) -> u64 {
    let mut h = Hasher(SESSION_SEED);
    h.pair(id as u64, timeout as u32 as u64);
    finish(h.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(b: &[u8]) -> u64 {
        let mut h = Hasher(NODE_SEED);
        h.bytes(b);
        finish(h.0)
    }

    #[test]
    fn byte_strings_of_every_length_and_any_one_bit_flip_differ() {
        let base: Vec<u8> = (0..300u32).map(|i| (i * 7 + 3) as u8).collect();
        let mut seen = std::collections::HashSet::new();
        for len in 0..=base.len() {
            assert!(seen.insert(h(&base[..len])), "length {len} collides");
        }
        // Trailing zeros are not padding.
        assert_ne!(h(b"ab"), h(b"ab\0"));
        for len in [1, 15, 16, 17, 64, 65, 200, 300] {
            for bit in 0..len * 8 {
                let mut v = base[..len].to_vec();
                v[bit / 8] ^= 1 << (bit % 8);
                assert!(seen.insert(h(&v)), "len {len} bit {bit} collides");
            }
        }
    }

    #[test]
    fn fields_do_not_run_into_each_other() {
        let acl = [Acl::world(zkd_protocol::Perms::ALL)];
        let a = content_hash(b"/ab", Some(b"c"), &acl);
        let b = content_hash(b"/a", Some(b"bc"), &acl);
        let null = content_hash(b"/a", None, &acl);
        let empty = content_hash(b"/a", Some(b""), &acl);
        let no_acl = content_hash(b"/a", Some(b""), &[]);
        let all = [a, b, null, empty, no_acl];
        for i in 0..all.len() {
            for j in 0..i {
                assert_ne!(all[i], all[j], "{i} vs {j}");
            }
        }
        // Swapping two stat fields changes the term.
        let s = StatPersisted {
            version: 1,
            cversion: 2,
            ..StatPersisted::default()
        };
        let swapped = StatPersisted {
            version: 2,
            cversion: 1,
            ..StatPersisted::default()
        };
        assert_ne!(node_hash(a, &s), node_hash(a, &swapped));
    }

    /// Members built from different binaries compare digests: the definition
    /// must not drift. A change here is a format change.
    #[test]
    fn the_hash_is_pinned() {
        let acl = [Acl::world(zkd_protocol::Perms::ALL)];
        let content = content_hash(b"/zkd", Some(&[7u8; 100]), &acl);
        let stat = StatPersisted {
            czxid: 1,
            mzxid: 2,
            ctime: 3,
            mtime: 4,
            version: 5,
            cversion: 6,
            aversion: 7,
            ephemeral_owner: 8,
            pzxid: 9,
        };
        assert_eq!(node_hash(content, &stat), PINNED_NODE);
        assert_eq!(session_hash(0x0100_0000_0000_0001, 30_000), PINNED_SESSION);
    }
    const PINNED_NODE: u64 = 0x53be_c4fe_ce67_4551;
    const PINNED_SESSION: u64 = 0x3080_6296_08d6_ccaa;
}
