//! Jute binary encoding (ZooKeeper's `BinaryOutputArchive`/`BinaryInputArchive`).
//!
//! Integers are big-endian; strings, buffers and vectors carry an `int` length
//! where `-1` means null. Records are their fields concatenated in schema
//! order, with no tag and no padding.

use bytes::{Buf, BufMut, Bytes};
use std::fmt;

/// Why a byte sequence could not be decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// The input ended before the record did.
    Incomplete,
    /// The input holds a value jute cannot represent (e.g. a negative length).
    Invalid(&'static str),
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Incomplete => write!(f, "input ended inside a record"),
            DecodeError::Invalid(why) => write!(f, "invalid jute input: {why}"),
        }
    }
}

impl std::error::Error for DecodeError {}

/// A value with a jute binary encoding.
pub trait Record: Sized {
    /// Appends the encoding of `self` to `buf`.
    fn encode(&self, buf: &mut impl BufMut);
    /// Reads one value from the front of `buf`.
    fn decode(buf: &mut Bytes) -> Result<Self, DecodeError>;

    /// Encodes `self` into a buffer of its own (see [`encode_exact`]).
    fn to_bytes(&self) -> Bytes {
        encode_exact(|out| self.encode(out))
    }
}

thread_local! {
    /// Where [`encode_exact`] encodes.
    static SCRATCH: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The scratch buffer's largest kept capacity: a large reply's buffer is not
/// kept for the small ones after it.
const MAX_SCRATCH: usize = 64 << 10;

/// What `encode` writes, as `Bytes` of exactly that size: written into this
/// thread's scratch buffer, then copied once. A fresh `Vec` grew several
/// times for a create or a read's reply, and `Bytes` took another allocation
/// for one with slack.
pub fn encode_exact(encode: impl FnOnce(&mut Vec<u8>)) -> Bytes {
    SCRATCH.with(|scratch| match scratch.try_borrow_mut() {
        Ok(mut out) => {
            out.clear();
            encode(&mut out);
            let bytes = Bytes::copy_from_slice(&out);
            if out.capacity() > MAX_SCRATCH {
                *out = Vec::new();
            }
            bytes
        }
        // Called from inside an encode: a buffer of its own.
        Err(_) => {
            let mut out = Vec::new();
            encode(&mut out);
            Bytes::from(out)
        }
    })
}

fn need(buf: &Bytes, n: usize) -> Result<(), DecodeError> {
    if buf.remaining() < n {
        Err(DecodeError::Incomplete)
    } else {
        Ok(())
    }
}

/// Reads a jute length: `-1` is null (`None`), other negatives are invalid.
fn read_len(buf: &mut Bytes) -> Result<Option<usize>, DecodeError> {
    let len = i32::decode(buf)?;
    match len {
        -1 => Ok(None),
        n if n < 0 => Err(DecodeError::Invalid("negative length")),
        n => Ok(Some(n as usize)),
    }
}

impl Record for i32 {
    fn encode(&self, buf: &mut impl BufMut) {
        buf.put_i32(*self);
    }
    fn decode(buf: &mut Bytes) -> Result<Self, DecodeError> {
        need(buf, 4)?;
        Ok(buf.get_i32())
    }
}

impl Record for i64 {
    fn encode(&self, buf: &mut impl BufMut) {
        buf.put_i64(*self);
    }
    fn decode(buf: &mut Bytes) -> Result<Self, DecodeError> {
        need(buf, 8)?;
        Ok(buf.get_i64())
    }
}

impl Record for bool {
    fn encode(&self, buf: &mut impl BufMut) {
        // kazoo only accepts exactly 1 as true, so never write anything else.
        buf.put_u8(u8::from(*self));
    }
    fn decode(buf: &mut Bytes) -> Result<Self, DecodeError> {
        need(buf, 1)?;
        Ok(buf.get_u8() != 0)
    }
}

/// `ustring`. Null decodes as the empty string; invalid UTF-8 becomes U+FFFD,
/// as Java's decoder does, so path validation rejects it later.
impl Record for String {
    fn encode(&self, buf: &mut impl BufMut) {
        buf.put_i32(self.len() as i32);
        buf.put_slice(self.as_bytes());
    }
    fn decode(buf: &mut Bytes) -> Result<Self, DecodeError> {
        let Some(len) = read_len(buf)? else {
            return Ok(String::new());
        };
        need(buf, len)?;
        let raw = buf.split_to(len);
        Ok(match std::str::from_utf8(&raw) {
            Ok(s) => s.to_owned(),
            Err(_) => String::from_utf8_lossy(&raw).into_owned(),
        })
    }
}

/// `buffer` where null and empty must stay apart (znode data).
impl Record for Option<Bytes> {
    fn encode(&self, buf: &mut impl BufMut) {
        encode_buffer(self.as_deref(), buf);
    }
    fn decode(buf: &mut Bytes) -> Result<Self, DecodeError> {
        let Some(len) = read_len(buf)? else {
            return Ok(None);
        };
        need(buf, len)?;
        Ok(Some(buf.split_to(len)))
    }
}

/// Writes `data` as a jute `buffer` (null as length -1), as `Option<Bytes>`
/// does, for data held elsewhere than in `Bytes` (a znode's, in the tree).
pub fn encode_buffer(data: Option<&[u8]>, buf: &mut impl BufMut) {
    match data {
        None => buf.put_i32(-1),
        Some(b) => {
            buf.put_i32(b.len() as i32);
            buf.put_slice(b);
        }
    }
}

/// `buffer` where null reads as empty (passwords, auth payloads).
impl Record for Bytes {
    fn encode(&self, buf: &mut impl BufMut) {
        buf.put_i32(self.len() as i32);
        buf.put_slice(self);
    }
    fn decode(buf: &mut Bytes) -> Result<Self, DecodeError> {
        Ok(Option::<Bytes>::decode(buf)?.unwrap_or_default())
    }
}

/// `vector<T>`; a null vector reads as empty.
impl<T: Record> Record for Vec<T> {
    fn encode(&self, buf: &mut impl BufMut) {
        buf.put_i32(self.len() as i32);
        for item in self {
            item.encode(buf);
        }
    }
    fn decode(buf: &mut Bytes) -> Result<Self, DecodeError> {
        let Some(len) = read_len(buf)? else {
            return Ok(Vec::new());
        };
        // Every element takes at least one byte: refuse counts the input cannot hold
        // before allocating for them.
        if len > buf.remaining() {
            return Err(DecodeError::Incomplete);
        }
        let mut out = Vec::with_capacity(len.min(1024));
        for _ in 0..len {
            out.push(T::decode(buf)?);
        }
        Ok(out)
    }
}

/// Defines a struct mirroring a `zookeeper.jute` class, with its encoding.
#[macro_export]
macro_rules! jute_record {
    ($(#[$meta:meta])* pub struct $name:ident { $($(#[$fmeta:meta])* pub $field:ident : $ty:ty),* $(,)? }) => {
        $(#[$meta])*
        #[derive(Clone, Debug, Default, PartialEq, Eq)]
        pub struct $name { $($(#[$fmeta])* pub $field: $ty),* }

        impl $crate::jute::Record for $name {
            #[allow(unused_variables)]
            fn encode(&self, buf: &mut impl bytes::BufMut) {
                $($crate::jute::Record::encode(&self.$field, buf);)*
            }
            #[allow(unused_variables)]
            fn decode(buf: &mut bytes::Bytes) -> Result<Self, $crate::jute::DecodeError> {
                Ok($name { $($field: $crate::jute::Record::decode(buf)?),* })
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn null_and_empty_buffers_stay_apart() {
        assert_eq!(None::<Bytes>.to_bytes().as_ref(), &[0xff, 0xff, 0xff, 0xff]);
        let empty = Some(Bytes::new()).to_bytes();
        assert_eq!(empty.as_ref(), &[0, 0, 0, 0]);
        assert_eq!(
            Option::<Bytes>::decode(&mut empty.clone()),
            Ok(Some(Bytes::new()))
        );
    }

    #[test]
    fn negative_lengths_other_than_minus_one_are_invalid() {
        let mut b = Bytes::from_static(&[0xff, 0xff, 0xff, 0xfe]);
        assert!(matches!(
            String::decode(&mut b),
            Err(DecodeError::Invalid(_))
        ));
    }

    #[test]
    fn huge_vector_count_is_refused_without_allocating() {
        let mut b = Bytes::from_static(&[0x7f, 0xff, 0xff, 0xff, 0, 0]);
        assert_eq!(Vec::<i64>::decode(&mut b), Err(DecodeError::Incomplete));
    }
}
