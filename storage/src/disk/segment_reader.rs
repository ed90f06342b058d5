//! Reads a log segment front to back a piece at a time, for the scan that
//! checks it when the log opens. Read whole, a 64 MiB segment was a 64 MiB
//! buffer the restart faulted in page by page (15k page faults, two fifths
//! of a restart's) only to drop it, while the snapshot decoding beside it
//! waited on the same address space.

use std::fs::File;
use std::io::Read;

/// Bytes read at a time; a record longer than this is read whole.
const PIECE_BYTES: usize = 1 << 20;

/// A cursor over a segment file, holding the bytes from the cursor to the
/// end of the last piece read.
pub(super) struct SegmentReader {
    file: File,
    buf: Vec<u8>,
    /// Where the cursor is in `buf`.
    start: usize,
    /// The file offset of `buf[0]`.
    base: u64,
    eof: bool,
}

impl SegmentReader {
    /// A reader at the start of `file`.
    pub(super) fn new(file: File) -> SegmentReader {
        SegmentReader {
            file,
            buf: Vec::new(),
            start: 0,
            base: 0,
            eof: false,
        }
    }

    /// The file offset of the cursor.
    pub(super) fn offset(&self) -> u64 {
        self.base + self.start as u64
    }

    /// The bytes from the cursor on that have been read: at least `want`
    /// of them unless the file ends first.
    pub(super) fn ahead(&mut self, want: usize) -> std::io::Result<&[u8]> {
        if self.buf.len() - self.start < want {
            self.refill(want)?;
        }
        Ok(&self.buf[self.start..])
    }

    /// Moves the cursor `n` bytes on (no further than what was read).
    pub(super) fn advance(&mut self, n: usize) {
        self.start = (self.start + n).min(self.buf.len());
    }

    /// Whether every byte from the cursor to the end of the file is zero
    /// (the room a segment is grown by). Moves the cursor to the end.
    pub(super) fn rest_is_zeros(&mut self) -> std::io::Result<bool> {
        loop {
            let rest = self.ahead(1)?;
            if rest.is_empty() {
                return Ok(true);
            }
            if rest.iter().any(|b| *b != 0) {
                return Ok(false);
            }
            let n = rest.len();
            self.advance(n);
        }
    }

    /// Keeps the unread bytes and reads on until `want` of them are held or
    /// the file ends.
    fn refill(&mut self, want: usize) -> std::io::Result<()> {
        self.buf.drain(..self.start);
        self.base += self.start as u64;
        self.start = 0;
        let size = want.max(PIECE_BYTES);
        while self.buf.len() < want && !self.eof {
            let have = self.buf.len();
            self.buf.resize(size, 0);
            let read = loop {
                match self.file.read(&mut self.buf[have..]) {
                    Ok(n) => break n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(e) => {
                        self.buf.truncate(have);
                        return Err(e);
                    }
                }
            };
            self.buf.truncate(have + read);
            self.eof = read == 0;
        }
        Ok(())
    }
}
