//! The deterministic txns the tree applies. The leader validates a request,
//! stamps time and zxid into a `TxnHeader` and turns it into one of these;
//! every member applies the same bytes and builds the same tree.
//!
//! The encoding is ZooKeeper's own log entry: `TxnHeader` then the record of
//! the header's type.

use bytes::{BufMut, Bytes};
use zkd_protocol::records::*;
use zkd_protocol::{DecodeError, OpCode, Record, Zxid};

/// One logged transaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Txn {
    /// Session, cxid, zxid, time and type.
    pub header: TxnHeader,
    /// What it does.
    pub body: TxnBody,
}

/// The effect of a txn, one variant per txn record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TxnBody {
    /// create (op 1) or create2 (op 15).
    Create(OpCode, CreateTxn),
    /// createContainer.
    CreateContainer(CreateContainerTxn),
    /// createTTL.
    CreateTtl(CreateTtlTxn),
    /// delete (op 2) or deleteContainer (op 20).
    Delete(OpCode, DeleteTxn),
    /// setData.
    SetData(SetDataTxn),
    /// reconfig: the new ensemble configuration written to
    /// `/zookeeper/config`, as ZooKeeper logs it (a setData record).
    Reconfig(SetDataTxn),
    /// setACL.
    SetAcl(SetAclTxn),
    /// check, only inside a multi.
    Check(CheckVersionTxn),
    /// multi: every sub-txn, or all ErrorTxns if the multi failed.
    Multi(Vec<TxnBody>),
    /// createSession.
    CreateSession(CreateSessionTxn),
    /// closeSession with the ephemerals to delete.
    CloseSession(CloseSessionTxn),
    /// A write that failed validation; it still consumes its zxid.
    Error(ErrorTxn),
}

impl TxnBody {
    /// The txn type written in the header (or a multi's sub-`Txn`).
    pub fn type_code(&self) -> i32 {
        match self {
            TxnBody::Create(op, _) | TxnBody::Delete(op, _) => *op as i32,
            TxnBody::CreateContainer(_) => OpCode::CreateContainer as i32,
            TxnBody::CreateTtl(_) => OpCode::CreateTtl as i32,
            TxnBody::SetData(_) => OpCode::SetData as i32,
            TxnBody::Reconfig(_) => OpCode::Reconfig as i32,
            TxnBody::SetAcl(_) => OpCode::SetAcl as i32,
            TxnBody::Check(_) => OpCode::Check as i32,
            TxnBody::Multi(_) => OpCode::Multi as i32,
            TxnBody::CreateSession(_) => OpCode::CreateSession as i32,
            TxnBody::CloseSession(_) => OpCode::CloseSession as i32,
            TxnBody::Error(_) => OpCode::Error as i32,
        }
    }

    /// Appends the record (without header).
    pub fn encode(&self, buf: &mut impl BufMut) {
        match self {
            TxnBody::Create(_, t) => t.encode(buf),
            TxnBody::CreateContainer(t) => t.encode(buf),
            TxnBody::CreateTtl(t) => t.encode(buf),
            TxnBody::Delete(_, t) => t.encode(buf),
            TxnBody::SetData(t) | TxnBody::Reconfig(t) => t.encode(buf),
            TxnBody::SetAcl(t) => t.encode(buf),
            TxnBody::Check(t) => t.encode(buf),
            TxnBody::CreateSession(t) => t.encode(buf),
            TxnBody::CloseSession(t) => t.encode(buf),
            TxnBody::Error(t) => t.encode(buf),
            TxnBody::Multi(subs) => {
                let txns: Vec<zkd_protocol::records::Txn> = subs
                    .iter()
                    .map(|s| {
                        let mut data = Vec::new();
                        s.encode(&mut data);
                        zkd_protocol::records::Txn {
                            r#type: s.type_code(),
                            data: data.into(),
                        }
                    })
                    .collect();
                MultiTxn { txns }.encode(buf);
            }
        }
    }

    /// Reads the record of txn type `kind`.
    pub fn decode(kind: i32, buf: &mut Bytes) -> Result<TxnBody, DecodeError> {
        let op = OpCode::from_i32(kind).ok_or(DecodeError::Invalid("txn type"))?;
        Ok(match op {
            OpCode::Create | OpCode::Create2 => TxnBody::Create(op, Record::decode(buf)?),
            OpCode::CreateContainer => TxnBody::CreateContainer(Record::decode(buf)?),
            OpCode::CreateTtl => TxnBody::CreateTtl(Record::decode(buf)?),
            OpCode::Delete | OpCode::DeleteContainer => TxnBody::Delete(op, Record::decode(buf)?),
            OpCode::SetData => TxnBody::SetData(Record::decode(buf)?),
            OpCode::Reconfig => TxnBody::Reconfig(Record::decode(buf)?),
            OpCode::SetAcl => TxnBody::SetAcl(Record::decode(buf)?),
            OpCode::Check => TxnBody::Check(Record::decode(buf)?),
            OpCode::CreateSession => TxnBody::CreateSession(Record::decode(buf)?),
            OpCode::CloseSession => TxnBody::CloseSession(Record::decode(buf)?),
            OpCode::Error => TxnBody::Error(Record::decode(buf)?),
            OpCode::Multi => {
                let multi = MultiTxn::decode(buf)?;
                let mut subs = Vec::with_capacity(multi.txns.len());
                for sub in multi.txns {
                    subs.push(TxnBody::decode(sub.r#type, &mut sub.data.clone())?);
                }
                TxnBody::Multi(subs)
            }
            _ => return Err(DecodeError::Invalid("txn type")),
        })
    }
}

impl Txn {
    /// The txn's zxid.
    pub fn zxid(&self) -> Zxid {
        Zxid(self.header.zxid)
    }

    /// Encodes header and record, as stored in the log.
    pub fn to_bytes(&self) -> Bytes {
        zkd_protocol::jute::encode_exact(|out| {
            self.header.encode(out);
            self.body.encode(out);
        })
    }

    /// The leader's time stamp in an encoded txn's header (client id,
    /// cxid and zxid come before it), without decoding the rest.
    pub fn stamped_time(record: &[u8]) -> Option<i64> {
        let time = record.get(20..28)?;
        Some(i64::from_be_bytes(time.try_into().ok()?))
    }

    /// Decodes a log entry.
    pub fn from_bytes(mut bytes: Bytes) -> Result<Txn, DecodeError> {
        let header = TxnHeader::decode(&mut bytes)?;
        let body = TxnBody::decode(header.r#type, &mut bytes)?;
        Ok(Txn { header, body })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multi_round_trips() {
        let txn = Txn {
            header: TxnHeader {
                client_id: 5,
                cxid: 2,
                zxid: 9,
                time: 100,
                r#type: 14,
            },
            body: TxnBody::Multi(vec![
                TxnBody::Create(
                    OpCode::Create,
                    CreateTxn {
                        path: "/a".into(),
                        data: None,
                        acl: vec![Acl::world(31)].into(),
                        ephemeral: false,
                        parent_c_version: 1,
                    },
                ),
                TxnBody::Error(ErrorTxn { err: -2 }),
            ]),
        };
        assert_eq!(Txn::from_bytes(txn.to_bytes()).unwrap(), txn);
        assert_eq!(Txn::stamped_time(&txn.to_bytes()), Some(100));
        assert_eq!(Txn::stamped_time(&txn.to_bytes()[..27]), None);
    }
}
