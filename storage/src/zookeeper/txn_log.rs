//! Apache ZooKeeper's txn logs (`version-2/log.<first zxid>`): the file
//! header (`ZKLG`, version 2, dbid), then records of an Adler-32 (a long),
//! the entry as a jute buffer (TxnHeader, txn, and since 3.6 a TxnDigest),
//! and the end-of-record byte `B`. Files are preallocated, so a zero length
//! ends the log. A torn last record ends its file, as ZooKeeper's reader
//! takes it ("Last transaction was partial"); a record whose checksum does
//! not match stops the read, as ZooKeeper's start stops ("CRC check failed").

use super::jute_reader::{JuteReader, ReadError};
use super::FileError;
use crate::txn::{Txn, TxnBody};
use bytes::{Buf, Bytes};
use std::fs::File;
use std::path::Path;
use zkd_protocol::records::{CloseSessionTxn, ErrorTxn, TxnHeader};
use zkd_protocol::{OpCode, Record};

/// "ZKLG".
const LOG_MAGIC: i32 = 0x5a4b_4c47;
const VERSION: i32 = 2;
/// The end-of-record byte.
const EOR: u8 = b'B';

/// One logged txn, with the tree digest ZooKeeper computed after it.
#[derive(Debug)]
pub struct LoggedTxn {
    pub txn: Txn,
    pub digest: Option<i64>,
}

/// How a log file ended.
#[derive(Debug, PartialEq, Eq)]
pub enum LogEnd {
    /// At the end of its records (end of file, or the preallocated zeros).
    Clean,
    /// In a record cut short at this offset: ZooKeeper drops it.
    Torn(u64),
}

/// Reads every record of the log at `path` in order, handing each to `each`.
pub fn read(
    path: &Path,
    mut each: impl FnMut(LoggedTxn) -> Result<(), FileError>,
) -> Result<LogEnd, FileError> {
    let file = File::open(path).map_err(|e| FileError::io(path, 0, e))?;
    let mut r = JuteReader::new(file);
    header(&mut r).map_err(|e| FileError::read(path, r.offset(), e))?;
    loop {
        let at = r.offset();
        let entry = match record(&mut r) {
            Ok(Some(entry)) => entry,
            Ok(None) => return Ok(LogEnd::Clean),
            Err(ReadError::End) => return Ok(LogEnd::Torn(at)),
            Err(e) => return Err(FileError::read(path, at, e)),
        };
        let Some(bytes) = entry else {
            return Ok(LogEnd::Torn(at));
        };
        let txn =
            decode(bytes).map_err(|what| FileError::read(path, at, ReadError::Invalid(what)))?;
        each(txn)?;
    }
}

fn header(r: &mut JuteReader<File>) -> Result<(), ReadError> {
    if r.int()? != LOG_MAGIC {
        return Err(ReadError::Invalid(
            "not a ZooKeeper txn log (its magic is not ZKLG)",
        ));
    }
    if r.int()? != VERSION {
        return Err(ReadError::Invalid("a txn log format other than version 2"));
    }
    r.long()?; // dbid
    Ok(())
}

/// The next record's entry: `None` at the end of the records, `Some(None)`
/// for a record without its end mark (torn), an error for a checksum that
/// does not match.
fn record(r: &mut JuteReader<File>) -> Result<Option<Option<Vec<u8>>>, ReadError> {
    if r.at_end()? {
        return Ok(None);
    }
    let crc = r.long()?;
    let Some(bytes) = r.buffer()? else {
        return Err(ReadError::Invalid("a record of null length"));
    };
    if bytes.is_empty() {
        return Ok(None);
    }
    if r.byte()? != EOR {
        return Ok(Some(None));
    }
    if crc != i64::from(adler2::adler32_slice(&bytes)) {
        return Err(ReadError::Invalid(
            "CRC check failed: the record's Adler-32 does not match",
        ));
    }
    Ok(Some(Some(bytes)))
}

/// A record's entry: the header, the txn (a closeSession of before 3.6
/// has none), and the digest after it if there is one.
fn decode(bytes: Vec<u8>) -> Result<LoggedTxn, &'static str> {
    let mut b = Bytes::from(bytes);
    let header = TxnHeader::decode(&mut b).map_err(|_| "a txn header that does not decode")?;
    let body = if header.r#type == OpCode::CloseSession as i32 && !b.has_remaining() {
        TxnBody::CloseSession(CloseSessionTxn::default())
    } else {
        TxnBody::decode(header.r#type, &mut b).map_err(|_| "a txn that does not decode")?
    };
    let body = failed_whole(body);
    // TxnDigest: its version, then the tree's digest.
    let digest = (b.remaining() >= 12).then(|| {
        b.get_i32();
        b.get_i64()
    });
    Ok(LoggedTxn {
        txn: Txn { header, body },
        digest,
    })
}

/// A multi as ZooKeeper's tree applies it: ZooKeeper logs the ops before a
/// failed one with their own types, and its DataTree then applies none of
/// them (each becomes an error). zkd's tree takes a failed multi with every
/// op an error, so that is what the log's is turned into.
fn failed_whole(body: TxnBody) -> TxnBody {
    let TxnBody::Multi(ops) = body else {
        return body;
    };
    if !ops.iter().any(|op| matches!(op, TxnBody::Error(_))) {
        return TxnBody::Multi(ops);
    }
    // Before the failure: OK (0); the failure: its code; after: RUNTIMEINCONSISTENCY.
    let mut failed = false;
    let ops = ops.into_iter().map(|op| {
        let err = match op {
            TxnBody::Error(e) => {
                failed = true;
                e.err
            }
            _ if failed => -2,
            _ => 0,
        };
        TxnBody::Error(ErrorTxn { err })
    });
    TxnBody::Multi(ops.collect())
}
