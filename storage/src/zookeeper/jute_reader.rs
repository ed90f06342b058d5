//! Reads the jute records of ZooKeeper's files from a stream, keeping the
//! Adler-32 of every byte read (ZooKeeper's `CheckedInputStream`) and the
//! offset, so a failure names where in the file it is.

use std::io::{BufReader, ErrorKind, Read};

/// Why a read stopped.
#[derive(Debug)]
pub enum ReadError {
    /// The file ended inside (or right before) the value.
    End,
    /// A value no writer of ZooKeeper's makes (a negative or huge length).
    Invalid(&'static str),
    Io(std::io::Error),
}

/// The longest buffer or string read: ZooKeeper's own bound is
/// `jute.maxbuffer` (1 MiB by default) plus its slack; anything past this
/// is a corrupt length, not data.
const MAX_LEN: usize = 64 << 20;

/// A jute stream with its running checksum.
pub struct JuteReader<R> {
    inner: BufReader<R>,
    adler: adler2::Adler32,
    offset: u64,
}

impl<R: Read> JuteReader<R> {
    /// Reads `inner` from its start.
    pub fn new(inner: R) -> Self {
        JuteReader {
            inner: BufReader::with_capacity(1 << 20, inner),
            adler: adler2::Adler32::new(),
            offset: 0,
        }
    }

    /// Bytes read so far.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The Adler-32 of every byte read so far.
    pub fn checksum(&self) -> u32 {
        self.adler.checksum()
    }

    fn fill(&mut self, out: &mut [u8]) -> Result<(), ReadError> {
        match self.inner.read_exact(out) {
            Ok(()) => {
                self.adler.write_slice(out);
                self.offset += out.len() as u64;
                Ok(())
            }
            Err(e) if e.kind() == ErrorKind::UnexpectedEof => Err(ReadError::End),
            Err(e) => Err(ReadError::Io(e)),
        }
    }

    /// One byte.
    pub fn byte(&mut self) -> Result<u8, ReadError> {
        let mut b = [0u8; 1];
        self.fill(&mut b)?;
        Ok(b[0])
    }

    /// A big-endian int.
    pub fn int(&mut self) -> Result<i32, ReadError> {
        let mut b = [0u8; 4];
        self.fill(&mut b)?;
        Ok(i32::from_be_bytes(b))
    }

    /// A big-endian long.
    pub fn long(&mut self) -> Result<i64, ReadError> {
        let mut b = [0u8; 8];
        self.fill(&mut b)?;
        Ok(i64::from_be_bytes(b))
    }

    /// `n` bytes as they are.
    pub fn exact(&mut self, n: usize) -> Result<Vec<u8>, ReadError> {
        let mut out = vec![0u8; n];
        self.fill(&mut out)?;
        Ok(out)
    }

    /// A buffer: its length (-1 for null), then its bytes.
    pub fn buffer(&mut self) -> Result<Option<Vec<u8>>, ReadError> {
        let len = self.int()?;
        if len == -1 {
            return Ok(None);
        }
        let len = usize::try_from(len).map_err(|_| ReadError::Invalid("a negative length"))?;
        if len > MAX_LEN {
            return Err(ReadError::Invalid("an unreasonable length"));
        }
        self.exact(len).map(Some)
    }

    /// A string, as a buffer of UTF-8 (null read as empty, as no path is null).
    pub fn string(&mut self) -> Result<String, ReadError> {
        let bytes = self.buffer()?.unwrap_or_default();
        String::from_utf8(bytes).map_err(|_| ReadError::Invalid("a string that is not UTF-8"))
    }

    /// Whether the stream has ended (no byte is consumed).
    pub fn at_end(&mut self) -> Result<bool, ReadError> {
        use std::io::BufRead;
        self.inner
            .fill_buf()
            .map(|b| b.is_empty())
            .map_err(ReadError::Io)
    }
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::End => write!(f, "the file ends early"),
            ReadError::Invalid(what) => write!(f, "{what}"),
            ReadError::Io(e) => write!(f, "{e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_offsets_and_the_checksum_follow_the_bytes() {
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&7i32.to_be_bytes());
        bytes.extend_from_slice(&(-2i64).to_be_bytes());
        bytes.extend_from_slice(&3i32.to_be_bytes());
        bytes.extend_from_slice(b"abc");
        bytes.extend_from_slice(&(-1i32).to_be_bytes());
        let mut r = JuteReader::new(&bytes[..]);
        assert_eq!(r.int().unwrap(), 7);
        assert_eq!(r.long().unwrap(), -2);
        assert_eq!(r.string().unwrap(), "abc");
        assert_eq!(r.buffer().unwrap(), None);
        assert_eq!(r.offset(), bytes.len() as u64);
        assert_eq!(r.checksum(), adler2::adler32_slice(&bytes));
        assert!(r.at_end().unwrap());
        assert!(matches!(r.int(), Err(ReadError::End)));
        let huge = ((MAX_LEN + 1) as i32).to_be_bytes();
        assert!(matches!(
            JuteReader::new(&huge[..]).buffer(),
            Err(ReadError::Invalid(_))
        ));
    }
}
