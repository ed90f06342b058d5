//! The op generator: seeded random ops from the sessions, and the create
//! modes and ACLs that their choices stand for.

use super::*;

const PATHS: [&str; 9] = [
    "/a",
    "/b",
    "/c",
    "/a/x",
    "/a/y",
    "/b/x",
    "/a/x/y",
    "/c/q",
    "/zookeeper/u",
];
// digest of user:pass; session 0 authenticates as it.
const USER_DIGEST: &str = "user:smGaoVKd/cQkjm7b88GyorAUz20=";
/// Create flags that are no CreateMode.
const BAD_FLAGS: [i32; 6] = [7, 8, 9, 42, -1, 100];

#[derive(Clone, Debug)]
pub(super) enum Op {
    Create {
        s: usize,
        path: String,
        data: Vec<u8>,
        mode: u8,
        acl: u8,
    },
    Delete {
        s: usize,
        path: String,
        version: Option<i32>,
    },
    SetData {
        s: usize,
        path: String,
        data: Vec<u8>,
        version: Option<i32>,
    },
    GetData {
        s: usize,
        path: String,
        watch: bool,
    },
    Exists {
        s: usize,
        path: String,
        watch: bool,
    },
    Children {
        s: usize,
        path: String,
        watch: bool,
    },
    GetAcl {
        s: usize,
        path: String,
    },
    SetAcl {
        s: usize,
        path: String,
        acl: u8,
        version: Option<i32>,
    },
    Multi {
        s: usize,
        ops: Vec<Op>,
    },
    MultiRead {
        s: usize,
        reads: Vec<(bool, String)>,
    },
    Count {
        s: usize,
        path: String,
    },
    Ephemerals {
        s: usize,
    },
    /// A multi from the raw session whose op `bad` has invalid create flags.
    BadMulti {
        ops: Vec<Op>,
        bad: usize,
        flags: i32,
    },
    /// whoAmI from the raw session.
    WhoAmI,
}

impl Op {
    /// The session that sends the op; the raw session is number [`SESSIONS`].
    pub(super) fn session(&self) -> usize {
        match self {
            Op::Create { s, .. }
            | Op::Delete { s, .. }
            | Op::SetData { s, .. }
            | Op::GetData { s, .. }
            | Op::Exists { s, .. }
            | Op::Children { s, .. }
            | Op::GetAcl { s, .. }
            | Op::SetAcl { s, .. }
            | Op::Multi { s, .. }
            | Op::MultiRead { s, .. }
            | Op::Count { s, .. }
            | Op::Ephemerals { s } => *s,
            Op::BadMulti { .. } | Op::WhoAmI => SESSIONS,
        }
    }

    /// Whether the op may write (and so consume a zxid, even when it fails).
    pub(super) fn writes(&self) -> bool {
        matches!(
            self,
            Op::Create { .. }
                | Op::Delete { .. }
                | Op::SetData { .. }
                | Op::SetAcl { .. }
                | Op::Multi { .. }
                | Op::BadMulti { .. }
        )
    }
}

fn path(rng: &mut StdRng) -> String {
    PATHS[rng.gen_range(0..PATHS.len())].to_owned()
}

fn version(rng: &mut StdRng) -> Option<i32> {
    if rng.gen_bool(0.6) {
        None
    } else {
        Some(rng.gen_range(0..3))
    }
}

fn write_op(rng: &mut StdRng, s: usize) -> Op {
    match rng.gen_range(0..10) {
        0..=4 => Op::Create {
            s,
            path: path(rng),
            data: vec![rng.gen(); rng.gen_range(0..4)],
            mode: rng.gen_range(0..6),
            acl: rng.gen_range(0..4),
        },
        5..=6 => Op::Delete {
            s,
            path: path(rng),
            version: version(rng),
        },
        _ => Op::SetData {
            s,
            path: path(rng),
            data: vec![rng.gen(); rng.gen_range(0..4)],
            version: version(rng),
        },
    }
}

pub(super) fn random_op(rng: &mut StdRng) -> Op {
    let s = rng.gen_range(0..SESSIONS);
    match rng.gen_range(0..20) {
        0..=7 => write_op(rng, s),
        8 => Op::GetData {
            s,
            path: path(rng),
            watch: rng.gen(),
        },
        9 => Op::Exists {
            s,
            path: path(rng),
            watch: rng.gen(),
        },
        10 => Op::Children {
            s,
            path: path(rng),
            watch: rng.gen(),
        },
        11 => Op::GetAcl { s, path: path(rng) },
        12 => Op::SetAcl {
            s,
            path: path(rng),
            acl: rng.gen_range(0..4),
            version: version(rng),
        },
        13..=15 => Op::Multi {
            s,
            ops: (0..rng.gen_range(1..5)).map(|_| write_op(rng, s)).collect(),
        },
        16 => Op::MultiRead {
            s,
            reads: (0..rng.gen_range(1..4))
                .map(|_| (rng.gen(), path(rng)))
                .collect(),
        },
        17 => Op::Count { s, path: path(rng) },
        18 if rng.gen_bool(0.5) => Op::Ephemerals { s },
        18 if rng.gen_bool(0.3) => Op::WhoAmI,
        18 => {
            let ops: Vec<Op> = (0..rng.gen_range(1..4)).map(|_| write_op(rng, s)).collect();
            Op::BadMulti {
                bad: rng.gen_range(0..ops.len()),
                flags: BAD_FLAGS[rng.gen_range(0..BAD_FLAGS.len())],
                ops,
            }
        }
        _ => Op::GetData {
            s,
            path: path(rng),
            watch: true,
        },
    }
}

pub(super) fn acl_list(choice: u8) -> Vec<zk::Acl> {
    let read = zk::Acl::new(zk::Permission::READ, zk::AuthId::anyone());
    match choice {
        0 => vec![zk::Acl::new(zk::Permission::ALL, zk::AuthId::anyone())],
        1 => vec![read],
        2 => vec![
            zk::Acl::new(zk::Permission::ALL, zk::AuthId::new("digest", USER_DIGEST)),
            read,
        ],
        _ => vec![
            zk::Acl::new(zk::Permission::ALL, zk::AuthId::authed()),
            read,
        ],
    }
}

pub(super) fn create_options(mode: u8, acls: &[zk::Acl]) -> zk::CreateOptions<'_> {
    let acls = zk::Acls::new(acls);
    match mode {
        0 => zk::CreateMode::Persistent.with_acls(acls),
        1 => zk::CreateMode::Ephemeral.with_acls(acls),
        2 => zk::CreateMode::PersistentSequential.with_acls(acls),
        3 => zk::CreateMode::EphemeralSequential.with_acls(acls),
        4 => zk::CreateMode::Container.with_acls(acls),
        _ => zk::CreateMode::Persistent
            .with_acls(acls)
            .with_ttl(Duration::from_secs(3600)),
    }
}
