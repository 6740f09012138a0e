//! Where the bytes come from: a file or standard input (`-`), gzip-compressed or not (told by
//! the gzip magic bytes, so a compressed standard input works too), cut into lines of bounded
//! length with CRLF endings and a leading UTF-8 byte-order mark removed.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};

use flate2::read::MultiGzDecoder;

const BUFFER_BYTES: usize = 1 << 20;
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// Opens `path` (`"-"`: standard input), decompressing a gzip stream.
pub fn open(path: &str) -> std::io::Result<Box<dyn BufRead + Send>> {
    let raw: Box<dyn Read + Send> = if path == "-" {
        Box::new(std::io::stdin())
    } else {
        Box::new(File::open(path)?)
    };
    let mut buffered = BufReader::with_capacity(BUFFER_BYTES, raw);
    let head = buffered.fill_buf()?;
    if head.len() >= 2 && head[0] == 0x1f && head[1] == 0x8b {
        // MultiGzDecoder: `cat a.gz b.gz` is one valid gzip stream of several members.
        return Ok(Box::new(BufReader::with_capacity(
            BUFFER_BYTES,
            MultiGzDecoder::new(buffered),
        )));
    }
    Ok(Box::new(buffered))
}

/// Why a line could not be read.
pub enum LineError {
    /// The line is longer than the cap; it was skipped to its end (the stream can go on).
    TooLong(u64),
    /// The stream itself failed (an I/O error, a corrupt gzip stream): nothing more can be read.
    Io(std::io::Error),
}

/// Lines of at most `max_bytes` bytes, numbered from 1, without their `\n`, `\r\n` or BOM.
pub struct Lines {
    inner: Box<dyn BufRead + Send>,
    buf: Vec<u8>,
    max_bytes: usize,
    /// The number of the line last returned.
    pub lineno: u64,
    /// Bytes read so far (decompressed).
    pub bytes: u64,
}

impl Lines {
    /// Lines of `inner`, each at most `max_bytes` bytes.
    pub fn new(inner: Box<dyn BufRead + Send>, max_bytes: usize) -> Self {
        Self {
            inner,
            buf: Vec::new(),
            max_bytes,
            lineno: 0,
            bytes: 0,
        }
    }

    /// The next line, or `None` at the end of the stream.
    pub fn next_line(&mut self) -> Result<Option<&[u8]>, LineError> {
        self.buf.clear();
        let mut too_long: u64 = 0;
        let mut any = false;
        loop {
            let avail = match self.inner.fill_buf() {
                Ok(a) => a,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(LineError::Io(e)),
            };
            if avail.is_empty() {
                break;
            }
            any = true;
            let (end, found) = match memchr::memchr(b'\n', avail) {
                Some(i) => (i, true),
                None => (avail.len(), false),
            };
            if too_long == 0 && self.buf.len() + end <= self.max_bytes {
                self.buf.extend_from_slice(&avail[..end]);
            } else {
                // Past the cap: count the bytes, keep none (memory stays bounded).
                too_long += (self.buf.len() + end) as u64;
                self.buf.clear();
            }
            let used = end + usize::from(found);
            self.inner.consume(used);
            self.bytes += used as u64;
            if found {
                break;
            }
        }
        if !any {
            return Ok(None);
        }
        self.lineno += 1;
        if too_long > 0 {
            return Err(LineError::TooLong(too_long));
        }
        let mut line = &self.buf[..];
        if self.lineno == 1 && line.starts_with(BOM) {
            line = &line[BOM.len()..];
        }
        if let Some(stripped) = line.strip_suffix(b"\r") {
            line = stripped;
        }
        Ok(Some(line))
    }
}
