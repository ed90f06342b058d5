//! Client-port framing: a 4-byte big-endian length, then that many bytes.
//!
//! Parsing is two-phase (is a whole frame here? then split it off), so a
//! connection task can own its read buffer and never block mid-frame. A length
//! below zero or above `jute.maxbuffer` is a per-connection fatal error, as in
//! ZooKeeper ("Len error").

use bytes::{Buf, BufMut, Bytes, BytesMut};
use std::io;
use tokio_util::codec::{Decoder, Encoder};

/// Splits a byte stream into frames and writes length-prefixed frames.
#[derive(Clone, Debug)]
pub struct FrameCodec {
    max_frame: usize,
}

impl FrameCodec {
    /// A codec refusing frames longer than `max_frame` (jute.maxbuffer).
    pub fn new(max_frame: usize) -> FrameCodec {
        FrameCodec { max_frame }
    }
}

/// The first four bytes of a fresh connection, as a four-letter word if they spell one.
pub fn four_letter_word(prefix: &[u8]) -> Option<&str> {
    let word = std::str::from_utf8(prefix.get(..4)?).ok()?;
    const WORDS: [&str; 15] = [
        "ruok", "isro", "srvr", "stat", "conf", "cons", "envi", "mntr", "wchs", "wchc", "wchp",
        "dirs", "dump", "crst", "srst",
    ];
    WORDS.contains(&word).then_some(word)
}

impl Decoder for FrameCodec {
    type Item = Bytes;
    type Error = io::Error;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<Bytes>, io::Error> {
        if src.len() < 4 {
            return Ok(None);
        }
        let len = i32::from_be_bytes([src[0], src[1], src[2], src[3]]);
        if len < 0 || len as usize > self.max_frame {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("Len error {len}"),
            ));
        }
        let len = len as usize;
        if src.len() < 4 + len {
            src.reserve(4 + len - src.len());
            return Ok(None);
        }
        src.advance(4);
        Ok(Some(src.split_to(len).freeze()))
    }
}

impl Encoder<Bytes> for FrameCodec {
    type Error = io::Error;

    fn encode(&mut self, item: Bytes, dst: &mut BytesMut) -> Result<(), io::Error> {
        dst.reserve(4 + item.len());
        dst.put_i32(item.len() as i32);
        dst.put_slice(&item);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_for_a_whole_frame() {
        let mut codec = FrameCodec::new(16);
        let mut buf = BytesMut::from(&[0, 0, 0, 3, 1, 2][..]);
        assert_eq!(codec.decode(&mut buf).unwrap(), None);
        buf.put_u8(3);
        assert_eq!(
            codec.decode(&mut buf).unwrap().unwrap().as_ref(),
            &[1, 2, 3]
        );
        assert!(buf.is_empty());
    }

    #[test]
    fn rejects_oversize_and_negative_lengths() {
        let mut codec = FrameCodec::new(16);
        assert!(codec.decode(&mut BytesMut::from(&b"abcd"[..])).is_err());
        assert!(codec
            .decode(&mut BytesMut::from(&[0xff, 0xff, 0xff, 0xfe][..]))
            .is_err());
    }

    #[test]
    fn recognises_four_letter_words() {
        assert_eq!(four_letter_word(b"ruok"), Some("ruok"));
        assert_eq!(four_letter_word(b"abcd"), None);
    }
}
