//! A client request after the handshake: `RequestHeader` + the op's record,
//! decoded into one typed value.

use crate::jute::{DecodeError, Record};
use crate::op_code::OpCode;
use crate::records::*;
use bytes::{BufMut, Bytes};

/// Every request a client may send after the ConnectRequest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClientRequest {
    /// create (1), create2 (15) or createContainer (19).
    Create(OpCode, CreateRequest),
    /// createTTL (21).
    CreateTtl(CreateTtlRequest),
    /// delete (2).
    Delete(DeleteRequest),
    /// deleteContainer (20): a path sent as a jute buffer.
    DeleteContainer(String),
    /// exists (3).
    Exists(ExistsRequest),
    /// getData (4).
    GetData(GetDataRequest),
    /// setData (5).
    SetData(SetDataRequest),
    /// getACL (6).
    GetAcl(GetAclRequest),
    /// setACL (7).
    SetAcl(SetAclRequest),
    /// getChildren (8).
    GetChildren(GetChildrenRequest),
    /// getChildren2 (12).
    GetChildren2(GetChildren2Request),
    /// sync (9).
    Sync(SyncRequest),
    /// ping (11).
    Ping,
    /// check (13) outside a multi.
    Check(CheckVersionRequest),
    /// multi (14).
    Multi(MultiRequest),
    /// multiRead (22).
    MultiRead(MultiRequest),
    /// reconfig (16).
    Reconfig(ReconfigRequest),
    /// checkWatches (17).
    CheckWatches(CheckWatchesRequest),
    /// removeWatches (18).
    RemoveWatches(RemoveWatchesRequest),
    /// auth (100).
    Auth(AuthPacket),
    /// setWatches (101).
    SetWatches(SetWatches),
    /// setWatches2 (105).
    SetWatches2(SetWatches2),
    /// sasl (102).
    Sasl(GetSaslRequest),
    /// getEphemerals (103).
    GetEphemerals(GetEphemeralsRequest),
    /// getAllChildrenNumber (104).
    GetAllChildrenNumber(GetAllChildrenNumberRequest),
    /// addWatch (106).
    AddWatch(AddWatchRequest),
    /// whoAmI (107).
    WhoAmI,
    /// closeSession (-11).
    CloseSession,
}

/// Why a request frame could not be turned into a [`ClientRequest`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RequestError {
    /// The frame is shorter than a RequestHeader: nothing to answer.
    NoHeader,
    /// Opcode unknown or not accepted from clients: UNIMPLEMENTED, then close.
    Unimplemented { xid: i32, op: i32 },
    /// The body did not decode: MARSHALLINGERROR.
    Marshalling { xid: i32, op: OpCode },
}

impl ClientRequest {
    /// Decodes a whole request frame (header and body).
    pub fn decode_frame(mut frame: Bytes) -> Result<(RequestHeader, ClientRequest), RequestError> {
        let header = RequestHeader::decode(&mut frame).map_err(|_| RequestError::NoHeader)?;
        let op = OpCode::from_i32(header.r#type).ok_or(RequestError::Unimplemented {
            xid: header.xid,
            op: header.r#type,
        })?;
        let request = Self::decode_body(op, &mut frame).map_err(|e| match e {
            BodyError::Unimplemented => RequestError::Unimplemented {
                xid: header.xid,
                op: op as i32,
            },
            BodyError::Decode(_) => RequestError::Marshalling {
                xid: header.xid,
                op,
            },
        })?;
        Ok((header, request))
    }

    /// The request of type `op_type` whose body (no header) is `body`, if
    /// it decodes: what a follower forwards to its leader.
    pub fn decode_forwarded(op_type: i32, mut body: Bytes) -> Option<ClientRequest> {
        let op = OpCode::from_i32(op_type)?;
        Self::decode_body(op, &mut body).ok()
    }

    fn decode_body(op: OpCode, buf: &mut Bytes) -> Result<ClientRequest, BodyError> {
        use ClientRequest as R;
        Ok(match op {
            OpCode::Create | OpCode::Create2 | OpCode::CreateContainer => {
                R::Create(op, Record::decode(buf)?)
            }
            OpCode::CreateTtl => R::CreateTtl(Record::decode(buf)?),
            OpCode::Delete => R::Delete(Record::decode(buf)?),
            OpCode::DeleteContainer => {
                let raw = Bytes::decode(buf)?;
                R::DeleteContainer(String::from_utf8_lossy(&raw).into_owned())
            }
            OpCode::Exists => R::Exists(Record::decode(buf)?),
            OpCode::GetData => R::GetData(Record::decode(buf)?),
            OpCode::SetData => R::SetData(Record::decode(buf)?),
            OpCode::GetAcl => R::GetAcl(Record::decode(buf)?),
            OpCode::SetAcl => R::SetAcl(Record::decode(buf)?),
            OpCode::GetChildren => R::GetChildren(Record::decode(buf)?),
            OpCode::GetChildren2 => R::GetChildren2(Record::decode(buf)?),
            OpCode::Sync => R::Sync(Record::decode(buf)?),
            OpCode::Ping => R::Ping,
            OpCode::Check => R::Check(Record::decode(buf)?),
            OpCode::Multi => R::Multi(MultiRequest::decode(buf, false)?),
            OpCode::MultiRead => R::MultiRead(MultiRequest::decode(buf, true)?),
            OpCode::Reconfig => R::Reconfig(Record::decode(buf)?),
            OpCode::CheckWatches => R::CheckWatches(Record::decode(buf)?),
            OpCode::RemoveWatches => R::RemoveWatches(Record::decode(buf)?),
            OpCode::Auth => R::Auth(Record::decode(buf)?),
            OpCode::SetWatches => R::SetWatches(Record::decode(buf)?),
            OpCode::SetWatches2 => R::SetWatches2(Record::decode(buf)?),
            OpCode::Sasl => R::Sasl(Record::decode(buf)?),
            OpCode::GetEphemerals => R::GetEphemerals(Record::decode(buf)?),
            OpCode::GetAllChildrenNumber => R::GetAllChildrenNumber(Record::decode(buf)?),
            OpCode::AddWatch => R::AddWatch(Record::decode(buf)?),
            OpCode::WhoAmI => R::WhoAmI,
            OpCode::CloseSession => R::CloseSession,
            OpCode::Notification | OpCode::CreateSession | OpCode::Error => {
                return Err(BodyError::Unimplemented)
            }
        })
    }

    /// The opcode this request is sent with.
    pub fn op_code(&self) -> OpCode {
        use ClientRequest as R;
        match self {
            R::Create(op, _) => *op,
            R::CreateTtl(_) => OpCode::CreateTtl,
            R::Delete(_) => OpCode::Delete,
            R::DeleteContainer(_) => OpCode::DeleteContainer,
            R::Exists(_) => OpCode::Exists,
            R::GetData(_) => OpCode::GetData,
            R::SetData(_) => OpCode::SetData,
            R::GetAcl(_) => OpCode::GetAcl,
            R::SetAcl(_) => OpCode::SetAcl,
            R::GetChildren(_) => OpCode::GetChildren,
            R::GetChildren2(_) => OpCode::GetChildren2,
            R::Sync(_) => OpCode::Sync,
            R::Ping => OpCode::Ping,
            R::Check(_) => OpCode::Check,
            R::Multi(_) => OpCode::Multi,
            R::MultiRead(_) => OpCode::MultiRead,
            R::Reconfig(_) => OpCode::Reconfig,
            R::CheckWatches(_) => OpCode::CheckWatches,
            R::RemoveWatches(_) => OpCode::RemoveWatches,
            R::Auth(_) => OpCode::Auth,
            R::SetWatches(_) => OpCode::SetWatches,
            R::SetWatches2(_) => OpCode::SetWatches2,
            R::Sasl(_) => OpCode::Sasl,
            R::GetEphemerals(_) => OpCode::GetEphemerals,
            R::GetAllChildrenNumber(_) => OpCode::GetAllChildrenNumber,
            R::AddWatch(_) => OpCode::AddWatch,
            R::WhoAmI => OpCode::WhoAmI,
            R::CloseSession => OpCode::CloseSession,
        }
    }

    /// Whether this request changes the tree (and so goes through the log).
    pub fn is_write(&self) -> bool {
        use ClientRequest as R;
        matches!(
            self,
            R::Create(..)
                | R::CreateTtl(_)
                | R::Delete(_)
                | R::DeleteContainer(_)
                | R::SetData(_)
                | R::SetAcl(_)
                | R::Check(_)
                | R::Multi(_)
                | R::Reconfig(_)
                | R::CloseSession
        )
    }

    /// Encodes the body (without header), as a client would send it.
    pub fn encode_body(&self, buf: &mut impl BufMut) {
        use ClientRequest as R;
        match self {
            R::Create(_, r) => r.encode(buf),
            R::CreateTtl(r) => r.encode(buf),
            R::Delete(r) => r.encode(buf),
            R::DeleteContainer(p) => Bytes::copy_from_slice(p.as_bytes()).encode(buf),
            R::Exists(r) => r.encode(buf),
            R::GetData(r) => r.encode(buf),
            R::SetData(r) => r.encode(buf),
            R::GetAcl(r) => r.encode(buf),
            R::SetAcl(r) => r.encode(buf),
            R::GetChildren(r) => r.encode(buf),
            R::GetChildren2(r) => r.encode(buf),
            R::Sync(r) => r.encode(buf),
            R::Check(r) => r.encode(buf),
            R::Multi(r) | R::MultiRead(r) => r.encode(buf),
            R::Reconfig(r) => r.encode(buf),
            R::CheckWatches(r) => r.encode(buf),
            R::RemoveWatches(r) => r.encode(buf),
            R::Auth(r) => r.encode(buf),
            R::SetWatches(r) => r.encode(buf),
            R::SetWatches2(r) => r.encode(buf),
            R::Sasl(r) => r.encode(buf),
            R::GetEphemerals(r) => r.encode(buf),
            R::GetAllChildrenNumber(r) => r.encode(buf),
            R::AddWatch(r) => r.encode(buf),
            R::Ping | R::WhoAmI | R::CloseSession => {}
        }
    }
}

enum BodyError {
    Unimplemented,
    Decode(#[allow(dead_code)] DecodeError),
}

impl From<DecodeError> for BodyError {
    fn from(e: DecodeError) -> Self {
        BodyError::Decode(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_opcode_is_unimplemented() {
        let frame = RequestHeader { xid: 7, r#type: 50 }.to_bytes();
        assert_eq!(
            ClientRequest::decode_frame(frame),
            Err(RequestError::Unimplemented { xid: 7, op: 50 })
        );
    }

    #[test]
    fn truncated_body_is_marshalling_error() {
        let mut frame = Vec::new();
        RequestHeader { xid: 3, r#type: 4 }.encode(&mut frame);
        frame.extend_from_slice(&[0, 0, 0, 9, b'/']);
        assert_eq!(
            ClientRequest::decode_frame(Bytes::from(frame)),
            Err(RequestError::Marshalling {
                xid: 3,
                op: OpCode::GetData
            })
        );
    }
}
