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

/// A reply frame: header, then the body only when `err` is 0.
pub fn frame(xid: i32, zxid: i64, err: i32, body: Option<&dyn Fn(&mut Vec<u8>)>) -> Bytes {
    let mut out = Vec::with_capacity(64);
    ReplyHeader { xid, zxid, err }.encode(&mut out);
    if err == 0 {
        if let Some(write) = body {
            write(&mut out);
        }
    }
    Bytes::from(out)
}

/// A reply carrying a record.
pub fn with_record(xid: i32, zxid: i64, record: &impl Record) -> Bytes {
    frame(xid, zxid, 0, Some(&|out: &mut Vec<u8>| record.encode(out)))
}

/// A reply with no body (error, or an op that returns nothing).
pub fn bare(xid: i32, zxid: i64, err: i32) -> Bytes {
    frame(xid, zxid, err, None)
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
