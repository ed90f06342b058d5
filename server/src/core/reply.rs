//! Building reply and notification frames.

use bytes::Bytes;
use zkd_protocol::records::{ReplyHeader, WatcherEvent};
use zkd_protocol::{EventType, Record};

/// The xid of watch notifications.
pub const NOTIFICATION_XID: i32 = -1;
/// The xid ping replies always carry.
pub const PING_XID: i32 = -2;
/// KeeperState SyncConnected: the only state the server sends.
const SYNC_CONNECTED: i32 = 3;

/// A reply carrying a record.
pub fn with_record(xid: i32, zxid: i64, record: &impl Record) -> Bytes {
    with_fields(xid, zxid, |out| record.encode(out))
}

/// A reply whose body `encode` writes field by field, for a record whose
/// fields the caller holds but not the record itself.
pub fn with_fields(xid: i32, zxid: i64, encode: impl FnOnce(&mut Vec<u8>)) -> Bytes {
    zkd_protocol::jute::encode_exact(|out| {
        ReplyHeader { xid, zxid, err: 0 }.encode(out);
        encode(out);
    })
}

/// A reply with no body: an error (clients read no body when err != 0), or an
/// op that returns nothing.
pub fn bare(xid: i32, zxid: i64, err: i32) -> Bytes {
    ReplyHeader { xid, zxid, err }.to_bytes()
}

/// A watch notification.
pub fn notification(zxid: i64, event: EventType, path: &str) -> Bytes {
    let event = WatcherEvent {
        r#type: event as i32,
        state: SYNC_CONNECTED,
        path: path.to_owned(),
    };
    with_record(NOTIFICATION_XID, zxid, &event)
}
