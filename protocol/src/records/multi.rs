//! multi (14) and multiRead (22): a sequence of (MultiHeader, record) pairs
//! ended by `MultiHeader(-1, true, -1)`, with no count prefix.

use super::data::Stat;
use super::proto::{
    CheckVersionRequest, CreateRequest, CreateTtlRequest, DeleteRequest, GetChildrenRequest,
    GetDataRequest, SetDataRequest,
};
use crate::jute::{DecodeError, Record};
use crate::jute_record;
use crate::op_code::OpCode;
use bytes::{BufMut, Bytes};

jute_record! {
    /// Precedes each op of a multi request and each result of a multi reply.
    pub struct MultiHeader {
        /// Opcode of the op, or of the result (-1 for an error result).
        pub r#type: i32,
        /// True only on the terminator.
        pub done: bool,
        /// -1 in requests; the result's code in replies.
        pub err: i32,
    }
}

impl MultiHeader {
    const END: MultiHeader = MultiHeader {
        r#type: -1,
        done: true,
        err: -1,
    };
}

/// One op inside a multi or multiRead request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MultiOp {
    /// create (1), create2 (15) or createContainer (19); the opcode is kept so the
    /// result can echo it.
    Create(OpCode, CreateRequest),
    /// createTTL (21).
    CreateTtl(CreateTtlRequest),
    /// delete (2).
    Delete(DeleteRequest),
    /// setData (5).
    SetData(SetDataRequest),
    /// check (13).
    Check(CheckVersionRequest),
    /// getData (4), multiRead only.
    GetData(GetDataRequest),
    /// getChildren (8), multiRead only.
    GetChildren(GetChildrenRequest),
}

impl MultiOp {
    fn op_code(&self) -> OpCode {
        match self {
            MultiOp::Create(op, _) => *op,
            MultiOp::CreateTtl(_) => OpCode::CreateTtl,
            MultiOp::Delete(_) => OpCode::Delete,
            MultiOp::SetData(_) => OpCode::SetData,
            MultiOp::Check(_) => OpCode::Check,
            MultiOp::GetData(_) => OpCode::GetData,
            MultiOp::GetChildren(_) => OpCode::GetChildren,
        }
    }

    /// The path the op names.
    pub fn path(&self) -> &str {
        match self {
            MultiOp::Create(_, r) => &r.path,
            MultiOp::CreateTtl(r) => &r.path,
            MultiOp::Delete(r) => &r.path,
            MultiOp::SetData(r) => &r.path,
            MultiOp::Check(r) => &r.path,
            MultiOp::GetData(r) => &r.path,
            MultiOp::GetChildren(r) => &r.path,
        }
    }

    fn encode_body(&self, buf: &mut impl BufMut) {
        match self {
            MultiOp::Create(_, r) => r.encode(buf),
            MultiOp::CreateTtl(r) => r.encode(buf),
            MultiOp::Delete(r) => r.encode(buf),
            MultiOp::SetData(r) => r.encode(buf),
            MultiOp::Check(r) => r.encode(buf),
            MultiOp::GetData(r) => r.encode(buf),
            MultiOp::GetChildren(r) => r.encode(buf),
        }
    }

    fn decode_body(op: i32, read_only: bool, buf: &mut Bytes) -> Result<MultiOp, DecodeError> {
        let op = OpCode::from_i32(op).ok_or(DecodeError::Invalid("multi op type"))?;
        let decoded = match op {
            OpCode::Create | OpCode::Create2 | OpCode::CreateContainer if !read_only => {
                MultiOp::Create(op, Record::decode(buf)?)
            }
            OpCode::CreateTtl if !read_only => MultiOp::CreateTtl(Record::decode(buf)?),
            OpCode::Delete if !read_only => MultiOp::Delete(Record::decode(buf)?),
            OpCode::SetData if !read_only => MultiOp::SetData(Record::decode(buf)?),
            OpCode::Check if !read_only => MultiOp::Check(Record::decode(buf)?),
            OpCode::GetData if read_only => MultiOp::GetData(Record::decode(buf)?),
            OpCode::GetChildren if read_only => MultiOp::GetChildren(Record::decode(buf)?),
            // ZooKeeper fails to deserialize any other mix: MARSHALLINGERROR.
            _ => return Err(DecodeError::Invalid("op not allowed in this multi")),
        };
        Ok(decoded)
    }
}

/// The body of a multi or multiRead request.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MultiRequest {
    /// The ops, in order.
    pub ops: Vec<MultiOp>,
}

impl MultiRequest {
    /// Encodes the ops and the terminator.
    pub fn encode(&self, buf: &mut impl BufMut) {
        for op in &self.ops {
            MultiHeader {
                r#type: op.op_code() as i32,
                done: false,
                err: -1,
            }
            .encode(buf);
            op.encode_body(buf);
        }
        MultiHeader::END.encode(buf);
    }

    /// Decodes a multi (`read_only` false) or multiRead (`read_only` true) body.
    pub fn decode(buf: &mut Bytes, read_only: bool) -> Result<MultiRequest, DecodeError> {
        let mut ops = Vec::new();
        loop {
            let header = MultiHeader::decode(buf)?;
            if header.done {
                return Ok(MultiRequest { ops });
            }
            ops.push(MultiOp::decode_body(header.r#type, read_only, buf)?);
        }
    }
}

/// One result of a multi or multiRead reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MultiResult {
    /// Result of a plain create (type 1): path only.
    Create { path: String },
    /// Result of create2, createContainer or createTTL (type 15, 3.9+).
    Create2 { path: String, stat: Stat },
    /// Result of delete.
    Delete,
    /// Result of setData.
    SetData { stat: Stat },
    /// Result of check.
    Check,
    /// Result of a multiRead getData.
    GetData { data: Option<Bytes>, stat: Stat },
    /// Result of a multiRead getChildren.
    GetChildren { children: Vec<String> },
    /// A failed op (its code), or an op skipped because another failed (0 or -2).
    Error { err: i32 },
}

/// The body of a multi or multiRead reply.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MultiResponse {
    /// One result per op, in op order.
    pub results: Vec<MultiResult>,
}

impl Record for MultiResponse {
    fn encode(&self, buf: &mut impl BufMut) {
        for result in &self.results {
            encode_result(result, buf);
        }
        MultiHeader::END.encode(buf);
    }

    fn decode(buf: &mut Bytes) -> Result<Self, DecodeError> {
        let mut results = Vec::new();
        loop {
            let header = MultiHeader::decode(buf)?;
            if header.done {
                return Ok(MultiResponse { results });
            }
            results.push(decode_result(header.r#type, buf)?);
        }
    }
}

fn encode_result(result: &MultiResult, buf: &mut impl BufMut) {
    let header = |t: OpCode, buf: &mut _| {
        MultiHeader {
            r#type: t as i32,
            done: false,
            err: 0,
        }
        .encode(buf)
    };
    match result {
        MultiResult::Create { path } => {
            header(OpCode::Create, buf);
            path.encode(buf);
        }
        MultiResult::Create2 { path, stat } => {
            header(OpCode::Create2, buf);
            path.encode(buf);
            stat.encode(buf);
        }
        MultiResult::Delete => header(OpCode::Delete, buf),
        MultiResult::SetData { stat } => {
            header(OpCode::SetData, buf);
            stat.encode(buf);
        }
        MultiResult::Check => header(OpCode::Check, buf),
        MultiResult::GetData { data, stat } => {
            header(OpCode::GetData, buf);
            data.encode(buf);
            stat.encode(buf);
        }
        MultiResult::GetChildren { children } => {
            header(OpCode::GetChildren, buf);
            children.encode(buf);
        }
        MultiResult::Error { err } => {
            MultiHeader {
                r#type: -1,
                done: false,
                err: *err,
            }
            .encode(buf);
            err.encode(buf);
        }
    }
}

fn decode_result(kind: i32, buf: &mut Bytes) -> Result<MultiResult, DecodeError> {
    let op = OpCode::from_i32(kind).ok_or(DecodeError::Invalid("multi result type"))?;
    Ok(match op {
        OpCode::Create => MultiResult::Create {
            path: Record::decode(buf)?,
        },
        OpCode::Create2 => MultiResult::Create2 {
            path: Record::decode(buf)?,
            stat: Record::decode(buf)?,
        },
        OpCode::Delete => MultiResult::Delete,
        OpCode::SetData => MultiResult::SetData {
            stat: Record::decode(buf)?,
        },
        OpCode::Check => MultiResult::Check,
        OpCode::GetData => MultiResult::GetData {
            data: Record::decode(buf)?,
            stat: Record::decode(buf)?,
        },
        OpCode::GetChildren => MultiResult::GetChildren {
            children: Record::decode(buf)?,
        },
        OpCode::Error => MultiResult::Error {
            err: Record::decode(buf)?,
        },
        _ => return Err(DecodeError::Invalid("multi result type")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Bytes {
        let s: String = s.split_whitespace().collect();
        Bytes::from(
            (0..s.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
                .collect::<Vec<_>>(),
        )
    }

    #[test]
    fn failed_multi_reply_matches_capture() {
        // Spec appendix A: failure at op 2 of 3.
        let reply = MultiResponse {
            results: vec![
                MultiResult::Error { err: 0 },
                MultiResult::Error { err: -110 },
                MultiResult::Error { err: -2 },
            ],
        };
        let expected = hex(
            "ffffffff 00 00000000 00000000  ffffffff 00 ffffff92 ffffff92
             ffffffff 00 fffffffe fffffffe  ffffffff 01 ffffffff",
        );
        assert_eq!(reply.to_bytes(), expected);
        assert_eq!(MultiResponse::decode(&mut expected.clone()).unwrap(), reply);
    }

    #[test]
    fn mixed_read_and_write_ops_do_not_decode() {
        let req = MultiRequest {
            ops: vec![MultiOp::GetData(GetDataRequest {
                path: "/a".into(),
                watch: false,
            })],
        };
        let mut out = Vec::new();
        req.encode(&mut out);
        assert!(MultiRequest::decode(&mut Bytes::from(out.clone()), false).is_err());
        assert_eq!(
            MultiRequest::decode(&mut Bytes::from(out), true).unwrap(),
            req
        );
    }
}
