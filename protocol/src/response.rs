//! The body of a reply, typed by the opcode of the request it answers.
//! Clients read a body only when the ReplyHeader's err is 0.

use crate::jute::{DecodeError, Record};
use crate::records::*;
use bytes::{BufMut, Bytes};

/// A reply body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClientResponse {
    /// create (1).
    Create(CreateResponse),
    /// create2, createContainer, createTTL (15, 19, 21).
    Create2(Create2Response),
    /// exists (3).
    Exists(ExistsResponse),
    /// getData (4).
    GetData(GetDataResponse),
    /// setData (5).
    SetData(SetDataResponse),
    /// getACL (6).
    GetAcl(GetAclResponse),
    /// setACL (7).
    SetAcl(SetAclResponse),
    /// getChildren (8).
    GetChildren(GetChildrenResponse),
    /// sync (9).
    Sync(SyncResponse),
    /// getChildren2 (12).
    GetChildren2(GetChildren2Response),
    /// multi and multiRead (14, 22).
    Multi(MultiResponse),
    /// getEphemerals (103).
    GetEphemerals(GetEphemeralsResponse),
    /// getAllChildrenNumber (104).
    GetAllChildrenNumber(GetAllChildrenNumberResponse),
    /// addWatch (106).
    AddWatch(ErrorResponse),
    /// whoAmI (107).
    WhoAmI(WhoAmIResponse),
    /// Ops that answer with the header alone (delete, ping, auth, setWatches, ...).
    Empty,
}

impl ClientResponse {
    /// Decodes the body of a successful reply to opcode `op`.
    pub fn decode(op: i32, buf: &mut Bytes) -> Result<ClientResponse, DecodeError> {
        use ClientResponse as R;
        Ok(match op {
            1 => R::Create(Record::decode(buf)?),
            15 | 19 | 21 => R::Create2(Record::decode(buf)?),
            3 => R::Exists(Record::decode(buf)?),
            4 => R::GetData(Record::decode(buf)?),
            5 => R::SetData(Record::decode(buf)?),
            6 => R::GetAcl(Record::decode(buf)?),
            7 => R::SetAcl(Record::decode(buf)?),
            8 => R::GetChildren(Record::decode(buf)?),
            9 => R::Sync(Record::decode(buf)?),
            12 => R::GetChildren2(Record::decode(buf)?),
            14 | 22 => R::Multi(Record::decode(buf)?),
            103 => R::GetEphemerals(Record::decode(buf)?),
            104 => R::GetAllChildrenNumber(Record::decode(buf)?),
            106 => R::AddWatch(Record::decode(buf)?),
            107 => R::WhoAmI(Record::decode(buf)?),
            2 | 11 | 13 | 17 | 18 | 20 | 100 | 101 | 105 | -11 => R::Empty,
            _ => return Err(DecodeError::Invalid("no reply layout for this opcode")),
        })
    }

    /// Encodes the body.
    pub fn encode(&self, buf: &mut impl BufMut) {
        use ClientResponse as R;
        match self {
            R::Create(r) => r.encode(buf),
            R::Create2(r) => r.encode(buf),
            R::Exists(r) => r.encode(buf),
            R::GetData(r) => r.encode(buf),
            R::SetData(r) => r.encode(buf),
            R::GetAcl(r) => r.encode(buf),
            R::SetAcl(r) => r.encode(buf),
            R::GetChildren(r) => r.encode(buf),
            R::Sync(r) => r.encode(buf),
            R::GetChildren2(r) => r.encode(buf),
            R::Multi(r) => r.encode(buf),
            R::GetEphemerals(r) => r.encode(buf),
            R::GetAllChildrenNumber(r) => r.encode(buf),
            R::AddWatch(r) => r.encode(buf),
            R::WhoAmI(r) => r.encode(buf),
            R::Empty => {}
        }
    }
}
