//! The width and indexing of an svmlight file in one pass over its bytes: what
//! [`super::scan_svmlight`] finds of them, without copying lines or collecting tasks (the
//! streaming driver learns the tasks as they come), so the pass before learning costs little
//! more than reading the file.

use std::io::ErrorKind;

use super::{io_message, parse_index, source, ReadError};

const BOM: &[u8] = b"\xEF\xBB\xBF";

/// The largest feature index of an svmlight file and whether an index 0 appears, counted as
/// [`super::scan_svmlight`] counts them: every `index:value` token before a line's `#`, `qid:`
/// left out, indices that do not parse and lines longer than `max_line_bytes` passed over.
pub fn svmlight_width(path: &str, max_line_bytes: usize) -> Result<(Option<u64>, bool), ReadError> {
    let fail = |line, message| ReadError {
        path: path.to_string(),
        line,
        message,
    };
    let mut inner = source::open(path).map_err(|e| fail(None, io_message(&e)))?;
    let mut scan = Scan {
        max_index: None,
        has_zero: false,
        lineno: 0,
    };
    // A line cut by the end of a block; `None` once it is longer than the cap.
    let mut carry: Option<Vec<u8>> = Some(Vec::new());
    loop {
        let block = match inner.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(fail(Some(scan.lineno + 1), io_message(&e))),
        };
        let n = block.len();
        if n == 0 {
            match carry {
                Some(c) if !c.is_empty() => scan.line(&c),
                None => scan.lineno += 1, // a last line over the cap
                _ => {}
            }
            break;
        }
        let mut rest = block;
        if let Some(first) = memchr::memchr(b'\n', rest) {
            // The carried line ends here.
            match carry.as_mut() {
                Some(c) if c.len() + first <= max_line_bytes => {
                    c.extend_from_slice(&rest[..first]);
                    scan.line(c);
                }
                _ => scan.lineno += 1,
            }
            rest = &rest[first + 1..];
            carry = Some(Vec::new());
            let mut at = 0;
            while let Some(i) = memchr::memchr(b'\n', &rest[at..]) {
                let line = &rest[at..at + i];
                if line.len() <= max_line_bytes {
                    scan.line(line);
                } else {
                    scan.lineno += 1;
                }
                at += i + 1;
            }
            rest = &rest[at..];
        }
        carry = match carry {
            Some(mut c) if c.len() + rest.len() <= max_line_bytes => {
                c.extend_from_slice(rest);
                Some(c)
            }
            _ => None,
        };
        inner.consume(n);
    }
    Ok((scan.max_index, scan.has_zero))
}

struct Scan {
    max_index: Option<u64>,
    has_zero: bool,
    lineno: u64,
}

impl Scan {
    #[inline]
    fn line(&mut self, line: &[u8]) {
        self.lineno += 1;
        let mut line = line;
        if self.lineno == 1 {
            line = line.strip_prefix(BOM).unwrap_or(line);
        }
        let body = match memchr::memchr(b'#', line) {
            Some(i) => &line[..i],
            None => line,
        };
        for colon in memchr::memchr_iter(b':', body) {
            let start = body[..colon]
                .iter()
                .rposition(u8::is_ascii_whitespace)
                .map_or(0, |p| p + 1);
            let index = &body[start..colon];
            if index == b"qid" {
                continue;
            }
            if let Some(j) = parse_index(index) {
                self.has_zero |= j == 0;
                self.max_index = Some(self.max_index.map_or(j, |m| m.max(j)));
            }
        }
    }
}
