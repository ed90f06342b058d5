//! `org.apache.zookeeper.data`: identities, ACLs and node statistics.

use crate::jute_record;

jute_record! {
    /// An identity: `scheme:id`, e.g. `world:anyone` or `digest:user:hash`.
    pub struct Id {
        /// Authentication scheme (`world`, `auth`, `digest`, `ip`, `super`, ...).
        pub scheme: String,
        /// Scheme-specific identity.
        pub id: String,
    }
}

jute_record! {
    /// One ACL entry: a permission bit set granted to an identity.
    pub struct Acl {
        /// `Perms` bits.
        pub perms: i32,
        /// Who is granted them.
        pub id: Id,
    }
}

jute_record! {
    /// Node statistics as clients see them.
    pub struct Stat {
        /// Created zxid.
        pub czxid: i64,
        /// Last data-modification zxid.
        pub mzxid: i64,
        /// Creation time, ms.
        pub ctime: i64,
        /// Last data-modification time, ms.
        pub mtime: i64,
        /// Data version.
        pub version: i32,
        /// Child version (creates plus deletes of children).
        pub cversion: i32,
        /// ACL version.
        pub aversion: i32,
        /// Owning session of an ordinary ephemeral, else 0.
        pub ephemeral_owner: i64,
        /// Length of the data.
        pub data_length: i32,
        /// Number of children.
        pub num_children: i32,
        /// Last zxid that changed the set of children.
        pub pzxid: i64,
    }
}

jute_record! {
    /// Node statistics as the server stores them.
    pub struct StatPersisted {
        /// Created zxid.
        pub czxid: i64,
        /// Last data-modification zxid.
        pub mzxid: i64,
        /// Creation time, ms.
        pub ctime: i64,
        /// Last data-modification time, ms.
        pub mtime: i64,
        /// Data version.
        pub version: i32,
        /// Number of children ever created.
        pub cversion: i32,
        /// ACL version.
        pub aversion: i32,
        /// 0, a session id, the container marker or a TTL marker.
        pub ephemeral_owner: i64,
        /// Last zxid that changed the set of children.
        pub pzxid: i64,
    }
}

jute_record! {
    /// One authenticated identity of a connection, as `whoAmI` reports it.
    pub struct ClientInfo {
        /// Authentication scheme.
        pub auth_scheme: String,
        /// User name within the scheme.
        pub user: String,
    }
}

impl Acl {
    /// `world:anyone` with the given permissions.
    pub fn world(perms: i32) -> Acl {
        Acl {
            perms,
            id: Id {
                scheme: "world".into(),
                id: "anyone".into(),
            },
        }
    }
}
