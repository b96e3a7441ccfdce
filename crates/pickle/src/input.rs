//! Where the decoder reads its bytes from: a slice held in memory (strings borrow from it), or a
//! reader read through a bounded buffer (strings are copied out; the file is never held whole).

use std::borrow::Cow;
use std::io::{self, Read};

/// Longest operand of the text opcodes (INT, LONG, FLOAT, PUT, GET) looked at for its newline:
/// every operand the decoder accepts is far shorter.
pub const MAX_LINE: usize = 4096;

/// The bytes of one pickle, read front to back.
pub trait Input<'a> {
    /// Size of the whole input in bytes.
    fn len(&self) -> usize;
    /// Offset of the next byte.
    fn pos(&self) -> usize;
    /// The next byte; `None` at the end of the input.
    fn byte(&mut self) -> io::Result<Option<u8>>;
    /// The next `n` bytes (the caller checked that they exist).
    fn bytes(&mut self, n: usize) -> io::Result<&[u8]>;
    /// The next `n` bytes to keep: borrowed when the input lives long enough, else copied.
    fn keep(&mut self, n: usize) -> io::Result<Cow<'a, [u8]>>;
    /// The bytes before the next newline within [`MAX_LINE`] bytes, consuming the newline;
    /// `None` (nothing consumed) when there is none.
    fn line(&mut self) -> io::Result<Option<&[u8]>>;
    /// Up to `n` bytes from the current position, without consuming them.
    fn peek(&mut self, n: usize) -> io::Result<&[u8]>;
    /// The bytes before the next newline, however far (a protocol 0 string), consuming the
    /// newline; `None` when the input ends first.
    fn long_line(&mut self) -> io::Result<Option<Vec<u8>>>;
}

/// A pickle held in memory.
pub struct SliceInput<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> SliceInput<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        SliceInput { data, pos: 0 }
    }
}

impl<'a> Input<'a> for SliceInput<'a> {
    #[inline]
    fn len(&self) -> usize {
        self.data.len()
    }

    #[inline]
    fn pos(&self) -> usize {
        self.pos
    }

    #[inline]
    fn byte(&mut self) -> io::Result<Option<u8>> {
        let byte = self.data.get(self.pos).copied();
        self.pos += usize::from(byte.is_some());
        Ok(byte)
    }

    #[inline]
    fn bytes(&mut self, n: usize) -> io::Result<&[u8]> {
        let bytes = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(bytes)
    }

    fn keep(&mut self, n: usize) -> io::Result<Cow<'a, [u8]>> {
        let bytes = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(Cow::Borrowed(bytes))
    }

    fn line(&mut self) -> io::Result<Option<&[u8]>> {
        let rest = &self.data[self.pos..];
        let window = &rest[..rest.len().min(MAX_LINE + 1)];
        Ok(window.iter().position(|&b| b == b'\n').map(|end| {
            self.pos += end + 1;
            &rest[..end]
        }))
    }

    fn peek(&mut self, n: usize) -> io::Result<&[u8]> {
        Ok(&self.data[self.pos..self.data.len().min(self.pos + n)])
    }

    fn long_line(&mut self) -> io::Result<Option<Vec<u8>>> {
        let rest = &self.data[self.pos..];
        Ok(rest.iter().position(|&b| b == b'\n').map(|end| {
            self.pos += end + 1;
            rest[..end].to_vec()
        }))
    }
}

/// Bytes of the read buffer: operands and strings up to this size are read through it.
const BUFFER: usize = 1 << 20;

/// A pickle read from a reader of known size through a buffer of [`BUFFER`] bytes.
pub struct ReadInput<R> {
    reader: R,
    buf: Box<[u8]>,
    /// The unread bytes are `buf[start..end]`.
    start: usize,
    end: usize,
    /// Bytes taken from the reader so far.
    read: usize,
    len: usize,
}

impl<R: Read> ReadInput<R> {
    /// Reads `len` bytes from `reader` (more are never read; fewer is an error when reached).
    pub fn new(reader: R, len: usize) -> Self {
        ReadInput {
            reader,
            buf: vec![0; BUFFER.min(len.max(64))].into_boxed_slice(),
            start: 0,
            end: 0,
            read: 0,
            len,
        }
    }

    /// Makes at least `n` (at most the buffer's size) unread bytes available, or as many as
    /// the input has left.
    #[cold]
    fn fill(&mut self, n: usize) -> io::Result<()> {
        let n = n.min(self.buf.len());
        if self.end - self.start >= n {
            return Ok(());
        }
        self.buf.copy_within(self.start..self.end, 0);
        self.end -= self.start;
        self.start = 0;
        while self.end < n && self.read < self.len {
            let room = (self.buf.len() - self.end).min(self.len - self.read);
            let got = self.reader.read(&mut self.buf[self.end..self.end + room]);
            match got {
                Ok(0) => return Err(shrunk()),
                Ok(got) => {
                    self.end += got;
                    self.read += got;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

fn shrunk() -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        "the file ended before its size (did it change while being read?)",
    )
}

impl<'a, R: Read> Input<'a> for ReadInput<R> {
    #[inline]
    fn len(&self) -> usize {
        self.len
    }

    #[inline]
    fn pos(&self) -> usize {
        self.read - (self.end - self.start)
    }

    #[inline]
    fn byte(&mut self) -> io::Result<Option<u8>> {
        if self.start == self.end {
            if self.read == self.len {
                return Ok(None);
            }
            self.fill(1)?;
        }
        let byte = self.buf[self.start];
        self.start += 1;
        Ok(Some(byte))
    }

    #[inline]
    fn bytes(&mut self, n: usize) -> io::Result<&[u8]> {
        if self.end - self.start < n {
            if n > self.buf.len() {
                // Operands are at most 8 bytes and integers at most 16: never this long.
                return Err(io::Error::other("operand longer than the read buffer"));
            }
            self.fill(n)?;
            if self.end - self.start < n {
                return Err(shrunk());
            }
        }
        let bytes = &self.buf[self.start..self.start + n];
        self.start += n;
        Ok(bytes)
    }

    fn keep(&mut self, n: usize) -> io::Result<Cow<'a, [u8]>> {
        if n <= self.buf.len() {
            return Ok(Cow::Owned(self.bytes(n)?.to_vec()));
        }
        // Longer than the buffer: what is buffered, then the rest straight from the reader.
        let mut out = Vec::with_capacity(n);
        out.extend_from_slice(&self.buf[self.start..self.end]);
        self.start = self.end;
        let rest = n - out.len();
        if rest > self.len - self.read {
            return Err(shrunk());
        }
        (&mut self.reader).take(rest as u64).read_to_end(&mut out)?;
        if out.len() != n {
            return Err(shrunk());
        }
        self.read += rest;
        Ok(Cow::Owned(out))
    }

    fn line(&mut self) -> io::Result<Option<&[u8]>> {
        if self.end - self.start <= MAX_LINE {
            self.fill(MAX_LINE + 1)?;
        }
        let window = &self.buf[self.start..self.end.min(self.start + MAX_LINE + 1)];
        let Some(end) = window.iter().position(|&b| b == b'\n') else {
            return Ok(None);
        };
        let line = &self.buf[self.start..self.start + end];
        self.start += end + 1;
        Ok(Some(line))
    }

    fn peek(&mut self, n: usize) -> io::Result<&[u8]> {
        self.fill(n)?;
        Ok(&self.buf[self.start..self.end.min(self.start + n)])
    }

    fn long_line(&mut self) -> io::Result<Option<Vec<u8>>> {
        // Grows with the line only: the line's bytes are the string the caller keeps.
        let mut out = Vec::new();
        loop {
            if self.start == self.end {
                if self.read == self.len {
                    return Ok(None);
                }
                self.fill(1)?;
            }
            let window = &self.buf[self.start..self.end];
            if let Some(end) = window.iter().position(|&b| b == b'\n') {
                out.extend_from_slice(&window[..end]);
                self.start += end + 1;
                return Ok(Some(out));
            }
            out.extend_from_slice(window);
            self.start = self.end;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader that hands out at most 3 bytes per call.
    struct Trickle<'d>(&'d [u8]);

    impl Read for Trickle<'_> {
        fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
            let n = out.len().min(3).min(self.0.len());
            out[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    #[test]
    fn reader_input_reads_what_the_slice_input_reads() {
        let data: Vec<u8> = (0..3000u32).map(|i| (i % 251) as u8).collect();
        let mut text = b"12345\n".to_vec();
        text.extend(&data);
        let mut a = SliceInput::new(&text);
        let mut b = ReadInput::new(Trickle(&text), text.len());
        assert_eq!(a.line().unwrap(), Some(&b"12345"[..]));
        assert_eq!(b.line().unwrap(), Some(&b"12345"[..]));
        assert_eq!(a.peek(4).unwrap(), b.peek(4).unwrap());
        assert_eq!(a.bytes(7).unwrap(), b.bytes(7).unwrap());
        assert_eq!(a.byte().unwrap(), b.byte().unwrap());
        assert_eq!(a.keep(2000).unwrap(), b.keep(2000).unwrap());
        assert_eq!(a.pos(), b.pos());
        let rest = a.len() - a.pos();
        assert_eq!(a.keep(rest).unwrap(), b.keep(rest).unwrap());
        assert_eq!((a.byte().unwrap(), b.byte().unwrap()), (None, None));
    }

    #[test]
    fn strings_longer_than_the_buffer() {
        let data: Vec<u8> = (0..(3 * BUFFER + 5)).map(|i| (i % 13) as u8).collect();
        let mut input = ReadInput::new(&data[..], data.len());
        assert_eq!(input.bytes(5).unwrap(), &data[..5]);
        let kept = input.keep(3 * BUFFER).unwrap();
        assert_eq!(&kept[..], &data[5..]);
        assert_eq!(input.pos(), data.len());
        assert_eq!(input.byte().unwrap(), None);
    }

    #[test]
    fn a_file_shorter_than_its_size_is_an_error() {
        let mut input = ReadInput::new(&b"abc"[..], 10);
        assert_eq!(input.bytes(3).unwrap(), b"abc");
        assert!(input.byte().is_err());
    }
}
