//! The width and indexing of an svmlight file in one pass over its bytes: what
//! [`super::scan_svmlight`] finds of them, without copying lines or collecting tasks (the
//! streaming driver learns the tasks as they come), so the pass before learning costs little
//! more than reading the file.

use std::io::ErrorKind;
use std::sync::atomic::{AtomicBool, Ordering};

use super::{io_message, is_stream, parse_index, read_twice_message, source, ReadError};

const BOM: &[u8] = b"\xEF\xBB\xBF";

/// Files at least this long, plain (not gzip), are scanned in two halves at once.
const PARALLEL_MIN_BYTES: u64 = 16 << 20;

/// The largest feature index of an svmlight file and whether an index 0 appears, counted as
/// [`super::scan_svmlight`] counts them: every `index:value` token before a line's `#`, `qid:`
/// left out, indices that do not parse and lines longer than `max_line_bytes` passed over. A
/// large plain file is scanned in two halves on two threads (split at a line end). A stream
/// ([`is_stream`]) is refused: the pass would consume what learning must read. The interrupt
/// hook ([`crate::interrupt`]) is polled at every block read ([`ReadError::interrupted`]).
pub fn svmlight_width(path: &str, max_line_bytes: usize) -> Result<(Option<u64>, bool), ReadError> {
    let fail = |line, message| ReadError {
        path: path.to_string(),
        line,
        message,
    };
    if is_stream(path) {
        return Err(fail(None, read_twice_message("the svmlight width pass")));
    }
    let stop = AtomicBool::new(false);
    let poll = || {
        let stopped = stop.load(Ordering::Relaxed) || crate::interrupt::check_now().is_err();
        if stopped {
            stop.store(true, Ordering::Relaxed);
        }
        stopped
    };
    let found = two_halves(path, max_line_bytes, PARALLEL_MIN_BYTES, &stop, &poll);
    if stop.load(Ordering::Relaxed) {
        return Err(ReadError::interrupted(path));
    }
    if let Some(found) = found {
        return Ok(found);
    }
    let mut inner = source::open(path).map_err(|e| fail(None, io_message(&e)))?;
    let mut scan = Scan::default();
    let done = scan_lines(&mut inner, max_line_bytes, &mut scan, &poll)
        .map_err(|e| fail(Some(scan.lineno + 1), io_message(&e)))?;
    if !done {
        return Err(ReadError::interrupted(path));
    }
    Ok((scan.max_index, scan.has_zero))
}

/// The scan of a plain file of at least `min_bytes`, its two halves (split after the first line
/// end past the middle) on two threads; `None` for standard input, a gzip or small file, or any
/// failure (the one-thread pass then reads the file and reports what failed, with its line).
/// `poll` is asked on this thread whether to stop (it sets `stop`); the other thread reads
/// `stop`.
fn two_halves(
    path: &str,
    max_line_bytes: usize,
    min_bytes: u64,
    stop: &AtomicBool,
    poll: &dyn Fn() -> bool,
) -> Option<(Option<u64>, bool)> {
    use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
    if path == "-" {
        return None;
    }
    let mut file = std::fs::File::open(path).ok()?;
    let len = file.metadata().ok()?.len();
    let mut magic = [0u8; 2];
    if len < min_bytes.max(2) || file.read_exact(&mut magic).is_err() || magic == [0x1f, 0x8b] {
        return None;
    }
    // The split: just after the first '\n' at or past the middle (found within 1 MiB).
    file.seek(SeekFrom::Start(len / 2)).ok()?;
    let mut probe = BufReader::with_capacity(1 << 16, (&file).take(1 << 20));
    let mut skipped = Vec::new();
    probe.read_until(b'\n', &mut skipped).ok()?;
    if skipped.last() != Some(&b'\n') {
        return None;
    }
    let split = len / 2 + skipped.len() as u64;
    std::thread::scope(|threads| {
        let second = threads.spawn(|| -> Option<Scan> {
            let mut file = std::fs::File::open(path).ok()?;
            file.seek(SeekFrom::Start(split)).ok()?;
            let mut inner = BufReader::with_capacity(1 << 20, file);
            let mut scan = Scan {
                lineno: 1, // not the first line: no byte-order mark to drop
                ..Scan::default()
            };
            let stopped = || stop.load(Ordering::Relaxed);
            scan_lines(&mut inner, max_line_bytes, &mut scan, &stopped)
                .ok()?
                .then_some(scan)
        });
        let first = (|| {
            let file = std::fs::File::open(path).ok()?;
            let mut inner = BufReader::with_capacity(1 << 20, file.take(split));
            let mut scan = Scan::default();
            let done = scan_lines(&mut inner, max_line_bytes, &mut scan, poll);
            if matches!(done, Ok(false)) {
                stop.store(true, Ordering::Relaxed); // the other half stops at its next block
            }
            done.ok()?.then_some(scan)
        })();
        let second = second.join().ok()?;
        merge(first?, second?)
    })
}

/// The width and indexing of two halves' scans.
fn merge(first: Scan, second: Scan) -> Option<(Option<u64>, bool)> {
    let max_index = match (first.max_index, second.max_index) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    };
    Some((max_index, first.has_zero || second.has_zero))
}

/// Scans every line of `inner` into `scan` (no line copied unless a block boundary cuts it);
/// `Ok(false)` when `stop()`, asked before each block, said to stop.
fn scan_lines(
    inner: &mut dyn std::io::BufRead,
    max_line_bytes: usize,
    scan: &mut Scan,
    stop: &dyn Fn() -> bool,
) -> std::io::Result<bool> {
    // A line cut by the end of a block; `None` once it is longer than the cap.
    let mut carry: Option<Vec<u8>> = Some(Vec::new());
    loop {
        if stop() {
            return Ok(false);
        }
        let block = match inner.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let n = block.len();
        if n == 0 {
            match carry {
                Some(c) if !c.is_empty() => scan.line(&c),
                None => scan.lineno += 1, // a last line over the cap
                _ => {}
            }
            return Ok(true);
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
}

#[derive(Default)]
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::scan_svmlight;

    #[test]
    fn two_halves_find_what_one_pass_finds() {
        let long = format!("1 qid:a 99:1 {}\n", "y".repeat(400));
        let mut texts = vec![
            "\u{feff}1 qid:a 0:1 7:2 # 99:1\r\n-1 qid:b 3:1\r\n1 5:1\n".repeat(50),
            format!("{}{long}{}", "1 2:1\n".repeat(40), "1 3:1\n".repeat(40)), // the long line at the split
            (0..300)
                .map(|i| format!("1 qid:t {}:1\n", 1 + (i * 37) % 1000))
                .collect(),
            "1 4:1\n1 8:1".to_string(), // no final newline
        ];
        texts.push(texts[2].replace("1 qid:t 1:1", "1 qid:t 0:1"));
        for (k, text) in texts.iter().enumerate() {
            let path = std::env::temp_dir().join(format!("omtl-width-{}-{k}.svm", std::process::id()));
            std::fs::write(&path, text).unwrap();
            let path = path.to_string_lossy().into_owned();
            for cap in [100, 1 << 20] {
                let scan = scan_svmlight(&path, cap).unwrap();
                let halves =
                    two_halves(&path, cap, 0, &AtomicBool::new(false), &|| false).expect("a plain file splits");
                assert_eq!(halves, (scan.max_index, scan.has_zero), "{k} {cap}");
            }
        }
    }
}
