//! The write-ahead log: a sequence of segment files `wal-<first lsn>.log` in the state
//! directory, each a run of records
//!
//! | field    | bytes | content                                                   |
//! |----------|-------|-----------------------------------------------------------|
//! | length   | 4     | little-endian: the body's length                          |
//! | checksum | 4     | little-endian CRC-32 (IEEE) of the body                   |
//! | body     | length| the record's log sequence number (8 bytes), kind (1), payload |
//!
//! Log sequence numbers (lsn) are consecutive across segments; a segment is named after its
//! first. Reading checks every record: a bad record at the end of the last segment (cut short,
//! or failing its checksum with nothing but zero bytes after it) is a torn write that was never
//! acknowledged, and is dropped; any other bad record is corruption, reported with its file and
//! offset. docs/DECISIONS.md ("Serving") has the protocol around it.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// The largest record body read back (a request's body is capped far below it).
pub const MAX_RECORD: usize = 1 << 30;
/// The bytes before a record's body.
pub const FRAME: usize = 8;

/// The name of the segment whose first record has `lsn`.
pub fn segment_name(lsn: u64) -> String {
    format!("wal-{lsn:020}.log")
}

/// The segments in `dir`, by first lsn.
pub fn segments(dir: &Path) -> io::Result<Vec<(u64, PathBuf)>> {
    let mut found = Vec::new();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some(lsn) = name
            .strip_prefix("wal-")
            .and_then(|s| s.strip_suffix(".log"))
            .filter(|s| s.len() == 20)
            .and_then(|s| s.parse::<u64>().ok())
        else {
            continue;
        };
        found.push((lsn, entry.path()));
    }
    found.sort();
    Ok(found)
}

/// Appends one record (frame and body) to `out`.
pub fn encode(out: &mut Vec<u8>, lsn: u64, kind: u8, payload: &[u8]) {
    let len = 9 + payload.len();
    let start = out.len();
    out.extend_from_slice(&(len as u32).to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&lsn.to_le_bytes());
    out.push(kind);
    out.extend_from_slice(payload);
    let crc = crc32fast::hash(&out[start + FRAME..]);
    out[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
}

/// A record read back.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    /// Its log sequence number.
    pub lsn: u64,
    /// Its kind.
    pub kind: u8,
    /// Its payload.
    pub payload: Vec<u8>,
}

/// A segment read back.
#[derive(Debug)]
pub struct Segment {
    /// Its records, in order.
    pub records: Vec<Record>,
    /// The length of its valid records (where a torn tail began, if any).
    pub valid_len: u64,
    /// Whether a torn tail was found (and is to be cut off).
    pub torn: bool,
}

/// Reads and checks the segment at `path` (`last`: the newest segment, where a torn tail is
/// allowed). A corrupt record is an error naming its offset.
pub fn read(path: &Path, last: bool) -> Result<Segment, String> {
    let data = fs::read(path).map_err(|e| e.to_string())?;
    let mut records = Vec::new();
    let mut at = 0usize;
    while at < data.len() {
        let problem = match check(&data[at..]) {
            Ok((lsn, kind, body_len)) => {
                records.push(Record {
                    lsn,
                    kind,
                    payload: data[at + FRAME + 9..at + FRAME + body_len].to_vec(),
                });
                at += FRAME + body_len;
                continue;
            }
            Err(problem) => problem,
        };
        let end = match problem {
            Problem::Short => data.len(),
            Problem::Checksum(body_len) | Problem::Malformed(body_len) => at + FRAME + body_len,
        };
        let torn = last && data[end.min(data.len())..].iter().all(|&b| b == 0);
        if torn {
            return Ok(Segment {
                records,
                valid_len: at as u64,
                torn: true,
            });
        }
        let what = match problem {
            Problem::Short => "cut short",
            Problem::Checksum(_) => "checksum mismatch",
            Problem::Malformed(_) => "malformed",
        };
        return Err(format!("corrupt record at offset {at} ({what})"));
    }
    Ok(Segment {
        records,
        valid_len: at as u64,
        torn: false,
    })
}

enum Problem {
    /// The frame or body runs past the end of the file.
    Short,
    /// The body (of this length) fails its checksum.
    Checksum(usize),
    /// The body (of this length) is too short for a record.
    Malformed(usize),
}

/// Checks the record at the start of `data`: its lsn, kind and body length.
fn check(data: &[u8]) -> Result<(u64, u8, usize), Problem> {
    if data.len() < FRAME {
        return Err(Problem::Short);
    }
    let len = u32::from_le_bytes(data[..4].try_into().expect("4 bytes")) as usize;
    if len > MAX_RECORD || data.len() - FRAME < len {
        return Err(Problem::Short);
    }
    let crc = u32::from_le_bytes(data[4..8].try_into().expect("4 bytes"));
    let body = &data[FRAME..FRAME + len];
    if crc32fast::hash(body) != crc {
        return Err(Problem::Checksum(len));
    }
    if len < 9 {
        return Err(Problem::Malformed(len));
    }
    let lsn = u64::from_le_bytes(body[..8].try_into().expect("8 bytes"));
    Ok((lsn, body[8], len))
}

/// Flushes a directory's entries to disk (file creation, rename and removal).
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// The segment records are appended to.
#[derive(Debug)]
pub struct Writer {
    path: PathBuf,
    file: File,
    /// Bytes written and not undone.
    len: u64,
}

impl Writer {
    /// A new, empty segment for records from `lsn` on (the directory flushed).
    pub fn create(dir: &Path, lsn: u64) -> io::Result<Self> {
        let path = dir.join(segment_name(lsn));
        let file = OpenOptions::new().write(true).create_new(true).open(&path)?;
        sync_dir(dir)?;
        Ok(Writer { path, file, len: 0 })
    }

    /// The segment for records from `lsn` on: created, or, if a segment of that name exists
    /// (it then holds no valid record: every record up to `lsn - 1` was replayed), emptied.
    pub fn start(dir: &Path, lsn: u64) -> io::Result<Self> {
        let path = dir.join(segment_name(lsn));
        if path.exists() {
            return Self::reopen(&path, 0);
        }
        Self::create(dir, lsn)
    }

    /// The segment at `path`, to append to after its first `len` bytes (a torn tail beyond
    /// them cut off and flushed).
    pub fn reopen(path: &Path, len: u64) -> io::Result<Self> {
        let file = OpenOptions::new().write(true).open(path)?;
        if file.metadata()?.len() != len {
            file.set_len(len)?;
            file.sync_all()?;
        }
        let mut writer = Writer {
            path: path.to_path_buf(),
            file,
            len,
        };
        io::Seek::seek(&mut writer.file, io::SeekFrom::Start(len))?;
        Ok(writer)
    }

    /// The segment's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The bytes written.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether nothing was written.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Appends `bytes` (whole records). On an error the segment is cut back to where it was,
    /// if the file system lets it: `Err((error, false))` says it did not, and the segment may
    /// hold part of the records.
    pub fn append(&mut self, bytes: &[u8]) -> Result<(), (io::Error, bool)> {
        match self.file.write_all(bytes) {
            Ok(()) => {
                self.len += bytes.len() as u64;
                Ok(())
            }
            Err(e) => Err((e, self.undo_to(self.len))),
        }
    }

    /// Another handle of the segment's file (to flush it from another thread).
    pub fn try_clone(&self) -> io::Result<File> {
        self.file.try_clone()
    }

    /// Flushes the segment's data to disk.
    pub fn sync(&mut self) -> io::Result<()> {
        self.file.sync_data()
    }

    /// Cuts the segment back to `len` bytes; whether that worked.
    pub fn undo_to(&mut self, len: u64) -> bool {
        let cut = self.file.set_len(len).is_ok()
            && io::Seek::seek(&mut self.file, io::SeekFrom::Start(len)).is_ok()
            && self.file.sync_all().is_ok();
        if cut {
            self.len = len;
        }
        cut
    }
}
