//! Turns an applied txn's outcome into the client's reply frame.

use crate::core::reply;
use zkd_protocol::records::*;
use zkd_protocol::{OpCode, Record};
use zkd_storage::{TxnBody, TxnOutcome};

/// The reply to a write request with opcode `op`, once its txn `body` was applied.
pub fn write_reply(
    xid: i32,
    zxid: i64,
    op: OpCode,
    body: &TxnBody,
    outcome: &TxnOutcome,
) -> bytes::Bytes {
    match outcome {
        TxnOutcome::Error(code) => reply::bare(xid, zxid, *code),
        // A CreateResponse is its path alone: encoded from the outcome's, not a copy.
        TxnOutcome::Created { path, .. } if op == OpCode::Create => {
            reply::with_record(xid, zxid, path)
        }
        // A Create2Response: the path, then the stat.
        TxnOutcome::Created { path, stat } => reply::with_fields(xid, zxid, |out| {
            path.encode(out);
            stat.encode(out);
        }),
        // A reconfig answers with the configuration it made and its stat.
        TxnOutcome::DataSet { stat } => match body {
            TxnBody::Reconfig(t) => reply::with_record(
                xid,
                zxid,
                &GetDataResponse {
                    data: t.data.clone(),
                    stat: stat.clone(),
                },
            ),
            _ => reply::with_record(xid, zxid, &SetDataResponse { stat: stat.clone() }),
        },
        TxnOutcome::AclSet { stat } => {
            reply::with_record(xid, zxid, &SetAclResponse { stat: stat.clone() })
        }
        TxnOutcome::Multi(outcomes) => {
            let subs: &[TxnBody] = match body {
                TxnBody::Multi(subs) => subs,
                _ => &[],
            };
            let results = subs
                .iter()
                .zip(outcomes)
                .map(|(b, o)| multi_result(b, o))
                .collect();
            reply::with_record(xid, zxid, &MultiResponse { results })
        }
        TxnOutcome::Deleted
        | TxnOutcome::Checked
        | TxnOutcome::SessionClosed
        | TxnOutcome::SessionCreated => reply::bare(xid, zxid, 0),
    }
}

/// One multi result. A plain create echoes type 1 (kazoo parses only that);
/// create2, createContainer and createTTL give type 15 with a stat (3.9+).
fn multi_result(body: &TxnBody, outcome: &TxnOutcome) -> MultiResult {
    match (body, outcome) {
        (_, TxnOutcome::Error(err)) => MultiResult::Error { err: *err },
        (TxnBody::Create(OpCode::Create, _), TxnOutcome::Created { path, .. }) => {
            MultiResult::Create { path: path.clone() }
        }
        (_, TxnOutcome::Created { path, stat }) => MultiResult::Create2 {
            path: path.clone(),
            stat: stat.clone(),
        },
        (_, TxnOutcome::Deleted) => MultiResult::Delete,
        (_, TxnOutcome::DataSet { stat }) => MultiResult::SetData { stat: stat.clone() },
        (_, TxnOutcome::Checked) => MultiResult::Check,
        // Not produced by a multi; keep the reply well-formed anyway.
        _ => MultiResult::Error {
            err: zkd_protocol::ErrorCode::SystemError.code(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The create replies, encoded from the outcome's fields, are the
    /// records ZooKeeper sends.
    #[test]
    fn create_replies_are_their_records() {
        let stat = Stat {
            czxid: 7,
            mzxid: 7,
            pzxid: 7,
            data_length: 3,
            ..Stat::default()
        };
        let outcome = TxnOutcome::Created {
            path: "/a/b".into(),
            stat: stat.clone(),
        };
        let body = TxnBody::Error(ErrorTxn { err: 0 });
        let path = "/a/b".to_owned();
        assert_eq!(
            write_reply(5, 7, OpCode::Create, &body, &outcome),
            reply::with_record(5, 7, &CreateResponse { path: path.clone() })
        );
        assert_eq!(
            write_reply(5, 7, OpCode::Create2, &body, &outcome),
            reply::with_record(5, 7, &Create2Response { path, stat })
        );
    }
}
