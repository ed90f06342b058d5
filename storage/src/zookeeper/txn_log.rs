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

/// Reads every record of the log at `path` in order, handing each to `each`
/// (whose error ends the read).
pub fn read<E: From<FileError>>(
    path: &Path,
    mut each: impl FnMut(LoggedTxn) -> Result<(), E>,
) -> Result<LogEnd, E> {
    let file = File::open(path).map_err(|e| FileError::io(path, 0, e))?;
    let mut r = JuteReader::new(file);
    header(&mut r).map_err(|e| FileError::read(path, r.offset(), e))?;
    loop {
        let at = r.offset();
        let entry = match record(&mut r) {
            Ok(Some(entry)) => entry,
            Ok(None) => return Ok(LogEnd::Clean),
            Err(ReadError::End) => return Ok(LogEnd::Torn(at)),
            Err(e) => return Err(FileError::read(path, at, e).into()),
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

/// A log as ZooKeeper writes one: header, records of `entries`, then
/// `zeros` preallocated zeros.
#[cfg(test)]
pub(crate) fn log_of(entries: &[Vec<u8>], zeros: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for v in [LOG_MAGIC, VERSION] {
        out.extend_from_slice(&v.to_be_bytes());
    }
    out.extend_from_slice(&0i64.to_be_bytes());
    for entry in entries {
        out.extend_from_slice(&i64::from(adler2::adler32_slice(entry)).to_be_bytes());
        out.extend_from_slice(&(entry.len() as i32).to_be_bytes());
        out.extend_from_slice(entry);
        out.push(EOR);
    }
    out.extend(std::iter::repeat_n(0u8, zeros));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use zkd_protocol::records::{CreateTxn, MultiTxn, Txn as SubTxn};

    fn create(zxid: i64, path: &str) -> Txn {
        Txn {
            header: TxnHeader {
                client_id: 1,
                cxid: 1,
                zxid,
                time: 5,
                r#type: OpCode::Create as i32,
            },
            body: TxnBody::Create(
                OpCode::Create,
                CreateTxn {
                    path: path.into(),
                    data: None,
                    acl: vec![zkd_protocol::records::Acl::world(31)].into(),
                    ephemeral: false,
                    parent_c_version: 1,
                },
            ),
        }
    }

    fn read_all(bytes: &[u8]) -> Result<(Vec<i64>, LogEnd), FileError> {
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), bytes).unwrap();
        let mut zxids = Vec::new();
        let end = read(file.path(), |t| {
            zxids.push(t.txn.zxid().0);
            Ok::<_, FileError>(())
        })?;
        Ok((zxids, end))
    }

    #[test]
    fn records_end_at_the_zeros_and_a_torn_last_one_is_dropped() {
        let entries: Vec<Vec<u8>> = (1..=3)
            .map(|z| create(z, &format!("/n{z}")).to_bytes().to_vec())
            .collect();
        let whole = log_of(&entries, 64);
        assert_eq!(read_all(&whole).unwrap(), (vec![1, 2, 3], LogEnd::Clean));
        // Cut inside the third record (no zeros after): dropped, as ZooKeeper drops it.
        let cut = log_of(&entries, 0);
        let cut = &cut[..cut.len() - 5];
        let third = 16 + 2 * (8 + 4 + entries[0].len() + 1) as u64;
        assert_eq!(read_all(cut).unwrap(), (vec![1, 2], LogEnd::Torn(third)));
    }

    #[test]
    fn a_flipped_byte_names_its_record() {
        let entries: Vec<Vec<u8>> = (1..=2)
            .map(|z| create(z, "/n").to_bytes().to_vec())
            .collect();
        let mut bytes = log_of(&entries, 16);
        let second = 16 + 8 + 4 + entries[0].len() + 1;
        bytes[second + 8 + 4 + 3] ^= 1;
        let e = read_all(&bytes).unwrap_err();
        assert_eq!(e.offset, second as u64, "{e}");
        assert!(e.what.contains("CRC"), "{e}");
    }

    #[test]
    fn a_failed_multi_applies_none_of_its_ops() {
        let ok = create(7, "/a");
        let sub = |t: &Txn| SubTxn {
            r#type: t.header.r#type,
            data: zkd_protocol::jute::encode_exact(|out| t.body.encode(out)),
        };
        let failed = SubTxn {
            r#type: OpCode::Error as i32,
            data: ErrorTxn { err: -110 }.to_bytes(),
        };
        let multi = MultiTxn {
            txns: vec![sub(&ok), failed],
        };
        let mut entry = TxnHeader {
            r#type: OpCode::Multi as i32,
            ..ok.header.clone()
        }
        .to_bytes()
        .to_vec();
        entry.extend_from_slice(&multi.to_bytes());
        let logged = decode(entry).unwrap();
        let TxnBody::Multi(ops) = logged.txn.body else {
            panic!("not a multi");
        };
        let codes: Vec<i32> = ops
            .iter()
            .map(|op| match op {
                TxnBody::Error(e) => e.err,
                _ => panic!("an op that would apply: {op:?}"),
            })
            .collect();
        assert_eq!(codes, [0, -110]);
        assert_eq!(logged.digest, None);
    }
}
