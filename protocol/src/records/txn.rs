//! `org.apache.zookeeper.txn`: the deterministic transactions the leader logs
//! and every member applies.

use super::data::Acl;
use super::SharedAcl;
use crate::jute_record;
use bytes::Bytes;

jute_record! {
    /// Precedes every logged transaction.
    pub struct TxnHeader {
        /// The session that issued it.
        pub client_id: i64,
        /// The client's xid.
        pub cxid: i32,
        pub zxid: i64,
        /// Leader wall-clock time, ms.
        pub time: i64,
        /// Opcode of the txn, -1 for an error txn.
        pub r#type: i32,
    }
}
jute_record! {
    /// create / create2.
    pub struct CreateTxn {
        pub path: String,
        pub data: Option<Bytes>,
        pub acl: SharedAcl,
        pub ephemeral: bool,
        /// The parent's persisted cversion after this create.
        pub parent_c_version: i32,
    }
}
jute_record! {
    /// createTTL.
    pub struct CreateTtlTxn {
        pub path: String,
        pub data: Option<Bytes>,
        pub acl: SharedAcl,
        pub parent_c_version: i32,
        pub ttl: i64,
    }
}
jute_record! {
    /// createContainer.
    pub struct CreateContainerTxn {
        pub path: String,
        pub data: Option<Bytes>,
        pub acl: SharedAcl,
        pub parent_c_version: i32,
    }
}
jute_record! {
    /// delete and deleteContainer.
    pub struct DeleteTxn { pub path: String }
}
jute_record! {
    /// setData; `version` is the new version.
    pub struct SetDataTxn { pub path: String, pub data: Option<Bytes>, pub version: i32 }
}
jute_record! {
    /// check inside multi.
    pub struct CheckVersionTxn { pub path: String, pub version: i32 }
}
jute_record! {
    /// setACL; `version` is the new aversion.
    pub struct SetAclTxn { pub path: String, pub acl: Vec<Acl>, pub version: i32 }
}
jute_record! {
    /// createSession.
    pub struct CreateSessionTxn { pub time_out: i32 }
}
jute_record! {
    /// closeSession: the ephemerals it deletes.
    pub struct CloseSessionTxn { pub paths2_delete: Vec<String> }
}
jute_record! {
    /// A write that failed validation.
    pub struct ErrorTxn { pub err: i32 }
}
jute_record! {
    /// One sub-transaction of a multi.
    pub struct Txn { pub r#type: i32, pub data: Bytes }
}
jute_record! {
    /// multi.
    pub struct MultiTxn { pub txns: Vec<Txn> }
}
