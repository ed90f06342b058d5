//! Planted bugs, for showing that the fault-testing harness (`zkd-nemesis`)
//! and the simulator catch what they claim to catch.
//!
//! A checker that never fails proves nothing: it may be blind. So a build
//! with the `failpoints` cargo feature carries a handful of known, realistic
//! bugs, each planted at the spot where a real one would live and each off
//! unless named in the environment variable `ZKD_FAILPOINTS` (comma-separated,
//! kebab-case, e.g. `ZKD_FAILPOINTS=ack-before-fsync,commit-without-quorum`).
//! A harness run against such a build with a failpoint on must report an
//! anomaly; one with none on must report none.
//!
//! The set is read once per process (the first [`active`] call or [`init`])
//! and never changes, so a member behaves the same way for its whole life.
//!
//! Without the feature, [`active`] is a `const fn` returning `false`: every
//! planted branch is dead code the compiler removes, and the production
//! binary has no way to misbehave on purpose. [`init`] then refuses a set
//! `ZKD_FAILPOINTS`, so a run that expects a bug cannot silently use a
//! correct binary and call its checks blind.
//!
//! Unknown names are refused at startup by [`init`] (`zkd serve` exits 2):
//! a typo would otherwise turn a run meant to plant a bug into a clean run.
//! Where [`init`] was never called (tests), [`active`] logs the error once
//! and ignores the unknown name.

/// The environment variable naming the active failpoints.
pub const ENV: &str = "ZKD_FAILPOINTS";

/// A planted bug. Each names the correct behaviour it breaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failpoint {
    /// Every member acknowledges a proposal as soon as it is handed to the
    /// log, before it is fsynced: followers send their ACK and the leader
    /// counts its own. A power loss on every member then loses writes that
    /// clients saw acknowledged (breaks "durable before acknowledged").
    AckBeforeFsync,
    /// A leader that loses its quorum keeps leading: it keeps serving reads
    /// and answers `sync` locally, at once, as ZooKeeper 3.8 does
    /// (ZOOKEEPER-1675), while it can no longer commit a write. Its clients
    /// read stale data after a sync once the rest elected a new leader.
    DeposedLeaderServes,
    /// A closeSession txn (a close or an expiry), when applied, leaves the
    /// session's ephemeral nodes in place (ZOOKEEPER-1208 and kin).
    CloseKeepsEphemerals,
    /// SetWatches after a reconnect re-arms a data watch whose node changed
    /// after the client's last zxid instead of firing the missed
    /// NodeDataChanged at once: the client misses that change.
    SetwatchesRearm,
    /// acceptedEpoch and currentEpoch change in memory but are never written
    /// to disk: after a restart the member forgets the epochs it promised.
    SkipEpochWrite,
    /// The leader commits a proposal once its own log has it durably,
    /// without waiting for a quorum of acks: a leader cut off in a minority
    /// acknowledges writes the next leader never had.
    CommitWithoutQuorum,
    /// The storage thread reports appends persisted without syncing them
    /// (no flush, no fsync): acknowledgements rest on the page cache, which
    /// a power loss empties.
    SkipFsync,
    /// A leader syncs a follower that logged some of its uncommitted
    /// proposals with a DIFF that keeps them (no TRUNC to the last
    /// committed zxid): the follower serves txns that may never commit.
    DiffUncommitted,
    /// A member starts a local snapshot while it is not serving (its tree
    /// may hold txns a sync takes back), and a tree replaced by a TRUNC
    /// reload or a SNAP install keeps the snapshot in progress, which then
    /// mixes the two trees (ZOOKEEPER-1549/1558).
    SnapshotAnyTree,
    /// A member whose tree differs from the leader's (by the COMMIT's
    /// digest, or a committed txn failing to apply) logs it and serves on,
    /// as ZooKeeper does (ZOOKEEPER-2846): its clients read a wrong tree.
    ServeDiverged,
    /// Liveness during a sync is timed per sync, not per read: the pieces
    /// of a SNAP, the pings during its install and the image moving on do
    /// not show the link alive, so a SNAP longer than initLimit never
    /// finishes.
    SyncTimedWhole,
    /// Events a closed or replaced quorum link queued reach the member's
    /// current role (a COMMIT or a close of the old link, seen by a new sync).
    StaleLinkEvents,
    /// A follower's proposals give back their share of the bytes in flight
    /// as soon as they are read, not once durable: a disk slower than the
    /// leader's lets the storage queue, and the follower's memory, grow
    /// without bound.
    UnboundedIntake,
    /// The election's shortcut decides once every voter that can answer
    /// agrees, without the quorum the finalize wait needs: a member that
    /// cannot reach the others elects itself alone.
    ShortcutWithoutQuorum,
    /// The committed txn whose apply showed the tree diverged (it failed,
    /// or the digest after it differs from the leader's) still fires its
    /// watches and answers its client before the member stops serving.
    DivergedTxnAnswers,
    /// A follower compares its tree with the leader's digest below the end
    /// of a fuzzy image, where the tree already holds later txns: it calls
    /// itself diverged, and is SNAPped again for as long as writes go on.
    DigestWhileFuzzy,
    /// A leader never pauses a follower whose link backs up: a follower
    /// slower than the others has its link closed at the link's bound and
    /// syncs again by SNAP, again and again while writes go on.
    UnpacedFollowers,
    /// A member whose tree was found diverged from its leader's forgets it
    /// in the election (and across restarts): it proposes itself and may
    /// lead with the tree it rebuilt from its own disk.
    DivergedMayLead,
    /// A local snapshot's slices are written on their timer however far
    /// the disk lags: on a slow disk its image queues in memory.
    UnpacedSnapshots,
    /// A leader TRUNCs a follower below the lowest point its log can be
    /// cut back to (no snapshot it can rebuild from lies below the cut),
    /// instead of sending a SNAP: the follower's storage refuses the cut.
    TruncBelowLogBase,
    /// The node loop waits for each storage read it asks for (a round's
    /// durable state, a rebuild, a log read for a reload or for a lagging
    /// follower), as if it did the read itself: its timers, pings and peer
    /// events stall meanwhile (issue 14, finding 7).
    BlockingStorageReads,
    /// A follower activates at UPTODATE only the configuration its
    /// leader's NEWLEADER announced, not a reconfig committed during its
    /// sync: it serves with a configuration the others left (ZOOKEEPER-2172).
    UptodateAnnouncedOnly,
    /// A looking member ignores the configuration election notifications
    /// carry: one that missed a reconfig (down, or removed and added back)
    /// counts the wrong voters and may never rejoin.
    NotifiedConfigIgnored,
    /// A leader syncs learners outside its configuration, as ZooKeeper's
    /// does: whoever sends FOLLOWERINFO under a stranger's sid is sent the
    /// whole tree, ACLs aside, and may forward requests once synced.
    StrangersLearn,
    /// The peer ports take a member's sid from any address, as ZooKeeper's
    /// do: an impostor from elsewhere replaces a member's link and learns.
    AnyAddress,
    /// A leader takes a learner's REQUESTs, REVALIDATEs and session
    /// touches before its sync, as zkd did: a connection that proved
    /// nothing but a sid forwards requests with the identities it names.
    RequestsBeforeSync,
    /// Handshake slots are one pool for every remote address, as
    /// ZooKeeper's: silent sockets from one host hold them all, and a
    /// restarted member cannot rejoin while they are held.
    SharedHandshakeSlots,
    /// A looking member takes a newer configuration from any election
    /// notification, a stranger's included, as ZooKeeper's does: one
    /// forged frame rewrites its members and its zoo.cfg.dynamic.
    ConfigsFromAnyone,
    /// A learner with an empty log (last zxid 0) is sent a DIFF of the
    /// leader's history however late it starts, as ZooKeeper's leader did
    /// when its committed log's lower bound read 0 (ZOOKEEPER-4352): a new
    /// member misses every txn before it.
    DiffForEmptyLearner,
    /// A member that boots, or installs a SNAP or a reload, shows its own
    /// configuration in `/zookeeper/config` over a later reconfig its tree
    /// holds: leading next, it counts the members that reconfig removed.
    ConfigNodeOverwritten,
    /// Without reconfig, a leader's NEWLEADER still carries its
    /// configuration and its followers take it over their own zoo.cfg's
    /// (ZOOKEEPER-3814): a rolling restart that adds a member never gets
    /// the new membership into effect (ZOOKEEPER-3829).
    ConfigHandedOnWithoutReconfig,
}

impl Failpoint {
    /// Every failpoint, in the order of the bit masks below.
    pub const ALL: [Failpoint; 31] = [
        Failpoint::AckBeforeFsync,
        Failpoint::DeposedLeaderServes,
        Failpoint::CloseKeepsEphemerals,
        Failpoint::SetwatchesRearm,
        Failpoint::SkipEpochWrite,
        Failpoint::CommitWithoutQuorum,
        Failpoint::SkipFsync,
        Failpoint::DiffUncommitted,
        Failpoint::SnapshotAnyTree,
        Failpoint::ServeDiverged,
        Failpoint::SyncTimedWhole,
        Failpoint::StaleLinkEvents,
        Failpoint::UnboundedIntake,
        Failpoint::ShortcutWithoutQuorum,
        Failpoint::DivergedTxnAnswers,
        Failpoint::DigestWhileFuzzy,
        Failpoint::UnpacedFollowers,
        Failpoint::DivergedMayLead,
        Failpoint::UnpacedSnapshots,
        Failpoint::TruncBelowLogBase,
        Failpoint::BlockingStorageReads,
        Failpoint::UptodateAnnouncedOnly,
        Failpoint::NotifiedConfigIgnored,
        Failpoint::StrangersLearn,
        Failpoint::AnyAddress,
        Failpoint::RequestsBeforeSync,
        Failpoint::SharedHandshakeSlots,
        Failpoint::ConfigsFromAnyone,
        Failpoint::DiffForEmptyLearner,
        Failpoint::ConfigNodeOverwritten,
        Failpoint::ConfigHandedOnWithoutReconfig,
    ];

    /// The kebab-case name `ZKD_FAILPOINTS` uses.
    pub const fn name(self) -> &'static str {
        match self {
            Failpoint::AckBeforeFsync => "ack-before-fsync",
            Failpoint::DeposedLeaderServes => "deposed-leader-serves",
            Failpoint::CloseKeepsEphemerals => "close-keeps-ephemerals",
            Failpoint::SetwatchesRearm => "setwatches-rearm",
            Failpoint::SkipEpochWrite => "skip-epoch-write",
            Failpoint::CommitWithoutQuorum => "commit-without-quorum",
            Failpoint::SkipFsync => "skip-fsync",
            Failpoint::DiffUncommitted => "diff-uncommitted",
            Failpoint::SnapshotAnyTree => "snapshot-any-tree",
            Failpoint::ServeDiverged => "serve-diverged",
            Failpoint::SyncTimedWhole => "sync-timed-whole",
            Failpoint::StaleLinkEvents => "stale-link-events",
            Failpoint::UnboundedIntake => "unbounded-intake",
            Failpoint::ShortcutWithoutQuorum => "shortcut-without-quorum",
            Failpoint::DivergedTxnAnswers => "diverged-txn-answers",
            Failpoint::DigestWhileFuzzy => "digest-while-fuzzy",
            Failpoint::UnpacedFollowers => "unpaced-followers",
            Failpoint::DivergedMayLead => "diverged-may-lead",
            Failpoint::UnpacedSnapshots => "unpaced-snapshots",
            Failpoint::TruncBelowLogBase => "trunc-below-log-base",
            Failpoint::BlockingStorageReads => "blocking-storage-reads",
            Failpoint::UptodateAnnouncedOnly => "uptodate-announced-only",
            Failpoint::NotifiedConfigIgnored => "notified-config-ignored",
            Failpoint::StrangersLearn => "strangers-learn",
            Failpoint::AnyAddress => "any-address",
            Failpoint::RequestsBeforeSync => "requests-before-sync",
            Failpoint::SharedHandshakeSlots => "shared-handshake-slots",
            Failpoint::ConfigsFromAnyone => "configs-from-anyone",
            Failpoint::DiffForEmptyLearner => "diff-for-empty-learner",
            Failpoint::ConfigNodeOverwritten => "config-node-overwritten",
            Failpoint::ConfigHandedOnWithoutReconfig => "config-handed-on-without-reconfig",
        }
    }

    /// The failpoint called `name`, if there is one.
    pub fn from_name(name: &str) -> Option<Failpoint> {
        Failpoint::ALL.into_iter().find(|f| f.name() == name)
    }

    // One bit per failpoint, so the active set is a plain integer.
    #[cfg(feature = "failpoints")]
    const fn bit(self) -> u32 {
        1 << self as u32
    }
}

/// Parses a `ZKD_FAILPOINTS` value: names separated by commas, blanks
/// around them and empty entries ignored. Errs naming every unknown name.
pub fn parse(value: &str) -> Result<Vec<Failpoint>, String> {
    let mut found = Vec::new();
    let mut unknown = Vec::new();
    for name in value.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        match Failpoint::from_name(name) {
            Some(f) if !found.contains(&f) => found.push(f),
            Some(_) => {}
            None => unknown.push(name),
        }
    }
    if unknown.is_empty() {
        Ok(found)
    } else {
        let known: Vec<&str> = Failpoint::ALL.iter().map(|f| f.name()).collect();
        Err(format!(
            "{ENV}: unknown failpoint(s) {unknown:?}; known: {}",
            known.join(", ")
        ))
    }
}

#[cfg(feature = "failpoints")]
mod imp {
    use super::{parse, Failpoint, ENV};
    use std::sync::OnceLock;

    // Read once: a failpoint must not come and go during a member's life.
    static ACTIVE: OnceLock<u32> = OnceLock::new();

    fn from_env() -> Result<Vec<Failpoint>, String> {
        match std::env::var(ENV) {
            Ok(value) => parse(&value),
            Err(std::env::VarError::NotPresent) => Ok(Vec::new()),
            Err(e) => Err(format!("{ENV}: {e}")),
        }
    }

    fn mask(found: &[Failpoint]) -> u32 {
        found.iter().fold(0, |m, f| m | f.bit())
    }

    pub fn active(failpoint: Failpoint) -> bool {
        let mask = *ACTIVE.get_or_init(|| match from_env() {
            Ok(found) => mask(&found),
            Err(e) => {
                // No `init` ran (a test): keep going without the unknown names.
                tracing::error!("{e}; ignoring the unknown names");
                from_env_lenient()
            }
        });
        mask & failpoint.bit() != 0
    }

    fn from_env_lenient() -> u32 {
        let value = std::env::var(ENV).unwrap_or_default();
        let known: Vec<Failpoint> = value
            .split(',')
            .filter_map(|n| Failpoint::from_name(n.trim()))
            .collect();
        mask(&known)
    }

    pub fn init() -> Result<(), String> {
        let found = from_env()?;
        let _ = ACTIVE.set(mask(&found));
        for f in found {
            tracing::warn!(
                "failpoint {} active: this build misbehaves on purpose",
                f.name()
            );
        }
        Ok(())
    }
}

/// Whether `failpoint` is planted in this process: named in
/// `ZKD_FAILPOINTS`, read once.
#[cfg(feature = "failpoints")]
pub fn active(failpoint: Failpoint) -> bool {
    imp::active(failpoint) || planted::here(failpoint)
}

/// Unit tests plant a bug on their own thread only (the simulator runs a
/// whole ensemble in one thread), so tests with and without it share a
/// process.
#[cfg(all(feature = "failpoints", test))]
pub mod planted {
    use super::Failpoint;
    use std::cell::Cell;

    thread_local! {
        static MASK: Cell<u32> = const { Cell::new(0) };
    }

    /// Runs `f` with `failpoint` planted on this thread.
    pub fn with<T>(failpoint: Failpoint, f: impl FnOnce() -> T) -> T {
        let before = MASK.get();
        MASK.set(before | failpoint.bit());
        let out = f();
        MASK.set(before);
        out
    }

    pub(super) fn here(failpoint: Failpoint) -> bool {
        MASK.get() & failpoint.bit() != 0
    }
}

#[cfg(all(feature = "failpoints", not(test)))]
mod planted {
    #[inline(always)]
    pub(super) fn here(_: super::Failpoint) -> bool {
        false
    }
}

/// Whether `failpoint` is planted in this process: never, in a build
/// without the `failpoints` feature (so every planted branch is dead code).
#[cfg(not(feature = "failpoints"))]
#[inline(always)]
pub const fn active(_failpoint: Failpoint) -> bool {
    false
}

/// Reads `ZKD_FAILPOINTS` at startup and logs a warning for each active
/// failpoint. Errs on an unknown name, so `zkd serve` refuses to start
/// rather than run without the bug it was asked to plant.
#[cfg(feature = "failpoints")]
pub fn init() -> Result<(), String> {
    imp::init()
}

/// Without the feature nothing can be planted: a set `ZKD_FAILPOINTS` is
/// refused, so a run meant to show a bug is not quietly a clean run.
#[cfg(not(feature = "failpoints"))]
pub fn init() -> Result<(), String> {
    match std::env::var_os(ENV) {
        Some(v) if !v.is_empty() => Err(format!(
            "{ENV} is set but this zkd was built without the `failpoints` feature"
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for f in Failpoint::ALL {
            assert_eq!(Failpoint::from_name(f.name()), Some(f));
        }
    }

    #[test]
    fn parse_takes_a_list_and_refuses_unknown_names() {
        assert_eq!(
            parse(" ack-before-fsync,,commit-without-quorum ,ack-before-fsync"),
            Ok(vec![
                Failpoint::AckBeforeFsync,
                Failpoint::CommitWithoutQuorum
            ])
        );
        assert_eq!(parse(""), Ok(vec![]));
        let err = parse("ack-before-fsync,nope").unwrap_err();
        assert!(
            err.contains("nope") && err.contains("skip-epoch-write"),
            "{err}"
        );
    }

    #[cfg(not(feature = "failpoints"))]
    #[test]
    fn nothing_is_active_without_the_feature() {
        // Checked at compile time: `active` is a constant false, so every
        // planted branch folds away.
        const _: () = assert!(!active(Failpoint::AckBeforeFsync));
        assert!(Failpoint::ALL.into_iter().all(|f| !active(f)));
    }
}
