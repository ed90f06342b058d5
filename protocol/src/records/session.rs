//! The handshake records. The trailing `readOnly` byte is optional on the wire
//! (clients before 3.4 omit it), so these two are decoded by hand.

use crate::jute::{DecodeError, Record};
use bytes::{Buf, BufMut, Bytes};

/// First frame from a client.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConnectRequest {
    /// Always 0.
    pub protocol_version: i32,
    /// Highest zxid the client has seen.
    pub last_zxid_seen: i64,
    /// Requested session timeout, ms.
    pub time_out: i32,
    /// 0 for a new session, else the session to reattach.
    pub session_id: i64,
    /// Session password (16 bytes).
    pub passwd: Bytes,
    /// `Some` if the client sent the readOnly byte; the reply then carries one too.
    pub read_only: Option<bool>,
}

impl Record for ConnectRequest {
    fn encode(&self, buf: &mut impl BufMut) {
        self.protocol_version.encode(buf);
        self.last_zxid_seen.encode(buf);
        self.time_out.encode(buf);
        self.session_id.encode(buf);
        self.passwd.encode(buf);
        if let Some(ro) = self.read_only {
            ro.encode(buf);
        }
    }
    fn decode(buf: &mut Bytes) -> Result<Self, DecodeError> {
        Ok(ConnectRequest {
            protocol_version: Record::decode(buf)?,
            last_zxid_seen: Record::decode(buf)?,
            time_out: Record::decode(buf)?,
            session_id: Record::decode(buf)?,
            passwd: Record::decode(buf)?,
            read_only: if buf.has_remaining() {
                Some(bool::decode(buf)?)
            } else {
                None
            },
        })
    }
}

/// First frame from the server.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConnectResponse {
    /// Always 0.
    pub protocol_version: i32,
    /// Negotiated timeout, ms; 0 means the session is invalid or expired.
    pub time_out: i32,
    /// The session id, 0 when invalid.
    pub session_id: i64,
    /// Session password (16 bytes, zeros when invalid).
    pub passwd: Bytes,
    /// Sent only if the client's request carried the readOnly byte.
    pub read_only: Option<bool>,
}

impl Record for ConnectResponse {
    fn encode(&self, buf: &mut impl BufMut) {
        self.protocol_version.encode(buf);
        self.time_out.encode(buf);
        self.session_id.encode(buf);
        self.passwd.encode(buf);
        if let Some(ro) = self.read_only {
            ro.encode(buf);
        }
    }
    fn decode(buf: &mut Bytes) -> Result<Self, DecodeError> {
        Ok(ConnectResponse {
            protocol_version: Record::decode(buf)?,
            time_out: Record::decode(buf)?,
            session_id: Record::decode(buf)?,
            passwd: Record::decode(buf)?,
            read_only: if buf.has_remaining() {
                Some(bool::decode(buf)?)
            } else {
                None
            },
        })
    }
}
