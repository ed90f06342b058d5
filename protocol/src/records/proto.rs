//! `org.apache.zookeeper.proto`: request and response records of the client port.

use super::data::{Acl, ClientInfo, Stat};
use crate::jute_record;
use bytes::Bytes;

jute_record! {
    /// Precedes every request after the handshake.
    pub struct RequestHeader {
        /// Client-chosen id, echoed in the reply.
        pub xid: i32,
        /// The opcode.
        pub r#type: i32,
    }
}

jute_record! {
    /// Precedes every reply and notification.
    pub struct ReplyHeader {
        /// The request's xid, or -1 (notification), -2 (ping), -4 (auth).
        pub xid: i32,
        /// lastProcessedZxid when the reply was built (the write's own zxid for writes).
        pub zxid: i64,
        /// Error code; 0 = OK.
        pub err: i32,
    }
}

jute_record! {
    /// Re-registers a client's watches after reconnect.
    pub struct SetWatches {
        /// The client's last seen zxid.
        pub relative_zxid: i64,
        /// Paths with data watches.
        pub data_watches: Vec<String>,
        /// Paths with exist watches.
        pub exist_watches: Vec<String>,
        /// Paths with child watches.
        pub child_watches: Vec<String>,
    }
}

jute_record! {
    /// SetWatches with persistent watches too (3.6+).
    pub struct SetWatches2 {
        /// The client's last seen zxid.
        pub relative_zxid: i64,
        /// Paths with data watches.
        pub data_watches: Vec<String>,
        /// Paths with exist watches.
        pub exist_watches: Vec<String>,
        /// Paths with child watches.
        pub child_watches: Vec<String>,
        /// Paths with persistent watches.
        pub persistent_watches: Vec<String>,
        /// Paths with persistent-recursive watches.
        pub persistent_recursive_watches: Vec<String>,
    }
}

jute_record! {
    /// Adds an authentication identity to the connection.
    pub struct AuthPacket {
        /// Always 0.
        pub r#type: i32,
        /// Scheme, e.g. `digest`.
        pub scheme: String,
        /// Scheme-specific credentials, e.g. `user:password`.
        pub auth: Bytes,
    }
}

jute_record! {
    /// getData.
    pub struct GetDataRequest { pub path: String, pub watch: bool }
}
jute_record! {
    /// setData.
    pub struct SetDataRequest { pub path: String, pub data: Option<Bytes>, pub version: i32 }
}
jute_record! {
    /// reconfig.
    pub struct ReconfigRequest {
        pub joining_servers: String,
        pub leaving_servers: String,
        pub new_members: String,
        pub cur_config_id: i64,
    }
}
jute_record! {
    /// setData reply.
    pub struct SetDataResponse { pub stat: Stat }
}
jute_record! {
    /// sasl.
    pub struct GetSaslRequest { pub token: Bytes }
}
jute_record! {
    /// sasl reply.
    pub struct SetSaslResponse { pub token: Bytes }
}
jute_record! {
    /// create, create2 and createContainer.
    pub struct CreateRequest {
        pub path: String,
        pub data: Option<Bytes>,
        pub acl: Vec<Acl>,
        /// CreateMode flags.
        pub flags: i32,
    }
}
jute_record! {
    /// createTTL.
    pub struct CreateTtlRequest {
        pub path: String,
        pub data: Option<Bytes>,
        pub acl: Vec<Acl>,
        pub flags: i32,
        /// Time to live, ms.
        pub ttl: i64,
    }
}
jute_record! {
    /// delete.
    pub struct DeleteRequest { pub path: String, pub version: i32 }
}
jute_record! {
    /// getChildren.
    pub struct GetChildrenRequest { pub path: String, pub watch: bool }
}
jute_record! {
    /// getAllChildrenNumber.
    pub struct GetAllChildrenNumberRequest { pub path: String }
}
jute_record! {
    /// getChildren2.
    pub struct GetChildren2Request { pub path: String, pub watch: bool }
}
jute_record! {
    /// check (inside multi).
    pub struct CheckVersionRequest { pub path: String, pub version: i32 }
}
jute_record! {
    /// sync.
    pub struct SyncRequest { pub path: String }
}
jute_record! {
    /// sync reply.
    pub struct SyncResponse { pub path: String }
}
jute_record! {
    /// getACL.
    pub struct GetAclRequest { pub path: String }
}
jute_record! {
    /// setACL; `version` is compared with the node's aversion.
    pub struct SetAclRequest { pub path: String, pub acl: Vec<Acl>, pub version: i32 }
}
jute_record! {
    /// setACL reply.
    pub struct SetAclResponse { pub stat: Stat }
}
jute_record! {
    /// addWatch; mode 0 = persistent, 1 = persistent-recursive.
    pub struct AddWatchRequest { pub path: String, pub mode: i32 }
}
jute_record! {
    /// A watch notification (after ReplyHeader xid -1).
    pub struct WatcherEvent {
        /// EventType.
        pub r#type: i32,
        /// KeeperState; the server always sends 3 (SyncConnected).
        pub state: i32,
        pub path: String,
    }
}
jute_record! {
    /// addWatch reply and multi error results.
    pub struct ErrorResponse { pub err: i32 }
}
jute_record! {
    /// create reply.
    pub struct CreateResponse { pub path: String }
}
jute_record! {
    /// create2, createContainer and createTTL reply.
    pub struct Create2Response { pub path: String, pub stat: Stat }
}
jute_record! {
    /// exists.
    pub struct ExistsRequest { pub path: String, pub watch: bool }
}
jute_record! {
    /// exists reply.
    pub struct ExistsResponse { pub stat: Stat }
}
jute_record! {
    /// getData reply.
    pub struct GetDataResponse { pub data: Option<Bytes>, pub stat: Stat }
}
jute_record! {
    /// getChildren reply.
    pub struct GetChildrenResponse { pub children: Vec<String> }
}
jute_record! {
    /// getAllChildrenNumber reply.
    pub struct GetAllChildrenNumberResponse { pub total_number: i32 }
}
jute_record! {
    /// getChildren2 reply.
    pub struct GetChildren2Response { pub children: Vec<String>, pub stat: Stat }
}
jute_record! {
    /// getACL reply.
    pub struct GetAclResponse { pub acl: Vec<Acl>, pub stat: Stat }
}
jute_record! {
    /// checkWatches.
    pub struct CheckWatchesRequest { pub path: String, pub r#type: i32 }
}
jute_record! {
    /// removeWatches.
    pub struct RemoveWatchesRequest { pub path: String, pub r#type: i32 }
}
jute_record! {
    /// getEphemerals.
    pub struct GetEphemeralsRequest { pub prefix_path: String }
}
jute_record! {
    /// getEphemerals reply.
    pub struct GetEphemeralsResponse { pub ephemerals: Vec<String> }
}
jute_record! {
    /// whoAmI reply.
    pub struct WhoAmIResponse { pub client_info: Vec<ClientInfo> }
}
