//! Streaming readers for the data files `omtl learn` reads: svmlight/libsvm with `qid:` tasks,
//! Vowpal Wabbit's text format and CSV, plain or gzip-compressed, from a file or standard input.
//!
//! A [`Reader`] yields [`Chunk`]s of at most `chunk_rows` rows and about `chunk_bytes` bytes of
//! input, each a CSR matrix (rows sorted, duplicates summed, zeros dropped) with labels as
//! written, task ids (numbered in order of first appearance; each chunk lists the tasks it
//! introduces) and the line number of every row. So memory is bounded by the chunk size, not by
//! the file. A malformed line is a [`ReadError`] naming the file and line, or, with
//! `skip_bad_lines`, counted in the chunk and skipped. [`spawn`] runs a reader on its own
//! thread behind a bounded channel, so parsing overlaps learning.
//!
//! The formats (docs/cli.md has the user-facing description):
//! - svmlight: `label [qid:task] index:value ... [# comment]`, label -1/+1 or 0/1.
//! - VW: `label [importance] ['tag]|namespace[:scale] name[:value] ...`; the task is the one
//!   name of the task namespace (default `t`), or the tag. A name is hashed into the width as
//!   scikit-learn's `FeatureHasher` does ([`crate::hashing::feature_column`]), under the key
//!   `name` in the default namespace and `ns^name` in namespace `ns`; a name of digits only is
//!   the column index itself (modulo the width, as VW masks indices into its table).
//! - CSV: a header row; a task column, a label column, every other column a numeric feature.

mod csv;
pub mod driver;
pub mod source;
mod svmlight;
mod vw;
mod width;

pub use width::svmlight_width;

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::thread::JoinHandle;

use source::{LineError, Lines};

/// The default cap on one line: far above any real example, far below the machine's memory.
pub const DEFAULT_MAX_LINE_BYTES: usize = 64 << 20;

/// The widest feature space the engine takes: its column indices are `u32`.
pub const MAX_COLUMNS: u64 = u32::MAX as u64;

/// Feature indices at or above this are refused as written (they are not 64-bit signed).
pub const MAX_INDEX: u64 = 1 << 63;

/// A file format the readers take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// svmlight/libsvm, the task in `qid:`.
    Svmlight,
    /// Vowpal Wabbit's text format, the task in a namespace or the tag.
    Vw,
    /// CSV with a header row, a task column and a label column.
    Csv,
}

/// The formats a file's extension names (a `.gz` suffix is looked through); `parquet` is read
/// by the caller (as a table), the others by [`Reader`].
pub const EXTENSIONS: &[(&str, &str)] = &[
    ("svm", "svmlight"),
    ("svmlight", "svmlight"),
    ("libsvm", "svmlight"),
    ("txt", "svmlight"),
    ("dat", "svmlight"),
    ("vw", "vw"),
    ("csv", "csv"),
    ("parquet", "parquet"),
    ("pq", "parquet"),
];

/// The format `path`'s extension names ([`EXTENSIONS`], case-insensitive, `.gz` looked through).
pub fn format_of_path(path: &str) -> Option<&'static str> {
    let p = std::path::Path::new(path);
    let mut ext = p.extension()?.to_string_lossy().to_lowercase();
    if ext == "gz" {
        ext = std::path::Path::new(p.file_stem()?)
            .extension()?
            .to_string_lossy()
            .to_lowercase();
    }
    EXTENSIONS.iter().find(|(e, _)| *e == ext).map(|(_, f)| *f)
}

impl Format {
    /// The format named `"svmlight"`, `"vw"` or `"csv"`; otherwise a message listing them.
    pub fn parse(name: &str) -> Result<Self, String> {
        match name {
            "svmlight" => Ok(Self::Svmlight),
            "vw" => Ok(Self::Vw),
            "csv" => Ok(Self::Csv),
            other => Err(format!("unknown format {other:?} (svmlight, vw or csv)")),
        }
    }
}

/// How to read a file.
#[derive(Clone, Debug)]
pub struct Options {
    /// The file's format.
    pub format: Format,
    /// Rows per chunk at most (>= 1).
    pub chunk_rows: usize,
    /// A chunk ends once it holds this many bytes of input (one long line may exceed it).
    pub chunk_bytes: usize,
    /// Longer lines are errors (or skipped).
    pub max_line_bytes: usize,
    /// Skip a malformed line (counted in [`Chunk::n_skipped`]) instead of failing.
    pub skip_bad_lines: bool,
    /// The width of the feature space: svmlight and CSV columns must lie below it, VW names
    /// are hashed into it. At most [`MAX_COLUMNS`].
    pub n_features: u64,
    /// svmlight: index 0 is column 0 (else index 1 is, and an index 0 is an error).
    pub zero_based: bool,
    /// VW: the namespace whose one feature name is the task; `None`: the tag is the task.
    pub vw_task_namespace: Option<String>,
    /// CSV: the columns of the task and the label.
    pub csv_task_column: String,
    /// CSV: the column of the label.
    pub csv_label_column: String,
    /// CSV: the feature columns, in model order (default every other column, in file order).
    pub csv_feature_columns: Option<Vec<String>>,
    /// Whether every row must have a label (`omtl predict` does not need them).
    pub require_labels: bool,
}

impl Options {
    /// The defaults for `format` over `n_features` columns: chunks of at most 8192 rows and
    /// about 1 MiB of input, lines up to [`DEFAULT_MAX_LINE_BYTES`], bad lines are errors,
    /// svmlight indices 1-based, the VW task namespace `t`, the CSV columns `task` and `label`,
    /// labels required.
    pub fn new(format: Format, n_features: u64) -> Self {
        Self {
            format,
            chunk_rows: 8192,
            chunk_bytes: 1 << 20,
            max_line_bytes: DEFAULT_MAX_LINE_BYTES,
            skip_bad_lines: false,
            n_features,
            zero_based: false,
            vw_task_namespace: Some("t".into()),
            csv_task_column: "task".into(),
            csv_label_column: "label".into(),
            csv_feature_columns: None,
            require_labels: true,
        }
    }
}

/// A file that cannot be read: `"{path}, line {line}: {message}"`.
#[derive(Debug, Clone)]
pub struct ReadError {
    /// The file (`-` for standard input).
    pub path: String,
    /// The line (from 1), when the error is about one.
    pub line: Option<u64>,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = if self.path == "-" { "<stdin>" } else { &self.path };
        match self.line {
            Some(n) => write!(f, "{path}, line {n}: {}", self.message),
            None => write!(f, "{path}: {}", self.message),
        }
    }
}

impl std::error::Error for ReadError {}

/// The message of a pass stopped by an interrupt ([`ReadError::interrupted`]).
const INTERRUPTED: &str = "interrupted";

impl ReadError {
    /// A pass over `path` stopped by the interrupt hook ([`crate::interrupt`]).
    pub fn interrupted(path: &str) -> Self {
        ReadError {
            path: path.to_string(),
            line: None,
            message: INTERRUPTED.into(),
        }
    }

    /// Whether this is [`ReadError::interrupted`].
    pub fn is_interrupt(&self) -> bool {
        self.line.is_none() && self.message == INTERRUPTED
    }
}

/// Rows read from a file: a CSR matrix and, per row, the label, task id and line number.
#[derive(Debug, Default, Clone)]
pub struct Chunk {
    /// CSR row pointers: row `i` is `indices[indptr[i]..indptr[i + 1]]` (`n_rows + 1` entries).
    pub indptr: Vec<u64>,
    /// Column indices, sorted and distinct within a row, each `< n_features`.
    pub indices: Vec<u32>,
    /// The non-zero values at those columns.
    pub data: Vec<f64>,
    /// As written (-1, 0 or +1); NaN for a row without a label.
    pub labels: Vec<f64>,
    /// Each row's task id (numbered from 0 in order of first appearance in the file).
    pub task_ids: Vec<u32>,
    /// The tasks first seen in this chunk, in id order (they continue the earlier chunks' ids).
    pub new_tasks: Vec<String>,
    /// Each row's line number in the file (from 1).
    pub lines: Vec<u64>,
    /// Lines skipped in this chunk (`skip_bad_lines`), and the first one's message.
    pub n_skipped: u64,
    /// The message of the first line skipped in this chunk.
    pub first_skipped: Option<String>,
    /// Input bytes read up to the end of this chunk.
    pub bytes_read: u64,
    /// CSV: the feature columns' names (in the first chunk only).
    pub feature_columns: Vec<String>,
}

impl Chunk {
    /// Number of rows.
    pub fn n_rows(&self) -> usize {
        self.labels.len()
    }
}

/// One parsed line, before it joins a chunk.
pub(crate) struct Row<'a> {
    pub label: Option<f64>,
    pub task: Option<Cow<'a, [u8]>>,
}

/// Builds a chunk row by row; a parser pushes features, then the row is finished or undone.
pub(crate) struct Builder {
    pub chunk: Chunk,
    pairs: Vec<(u32, f64)>,
}

impl Builder {
    /// A builder writing into `spare`'s buffers (emptied, their capacity kept).
    fn reusing(mut spare: Chunk) -> Self {
        let c = &mut spare;
        for v in [&mut c.indptr, &mut c.lines] {
            v.clear();
        }
        c.indptr.push(0);
        c.indices.clear();
        c.data.clear();
        c.labels.clear();
        c.task_ids.clear();
        c.new_tasks.clear();
        c.feature_columns.clear();
        c.n_skipped = 0;
        c.first_skipped = None;
        c.bytes_read = 0;
        Self {
            chunk: spare,
            pairs: Vec::new(),
        }
    }

    #[inline]
    pub fn push(&mut self, column: u32, value: f64) {
        if value != 0.0 {
            self.pairs.push((column, value));
        }
    }

    fn discard_row(&mut self) {
        self.pairs.clear();
    }

    /// Sorts the row's features by column and sums duplicates (as scikit-learn and VW do) into
    /// the chunk; a sum that overflows to infinity is an error, and the row is taken back.
    fn push_features(&mut self) -> Result<(), String> {
        if !self.pairs.windows(2).all(|w| w[0].0 < w[1].0) {
            self.pairs.sort_by_key(|p| p.0);
        }
        let c = &mut self.chunk;
        let start = c.indices.len();
        let mut last: Option<u32> = None;
        for &(j, v) in &self.pairs {
            if last == Some(j) {
                *c.data.last_mut().expect("a previous entry") += v;
            } else {
                c.indices.push(j);
                c.data.push(v);
                last = Some(j);
            }
        }
        self.pairs.clear();
        if let Some(at) = c.data[start..].iter().position(|v| !v.is_finite()) {
            let column = c.indices[start + at];
            c.indices.truncate(start);
            c.data.truncate(start);
            return Err(format!(
                "feature column {column} is not finite once its duplicates are summed"
            ));
        }
        Ok(())
    }

    /// Takes back the features [`Builder::push_features`] added for a row that is not kept.
    fn drop_features(&mut self) {
        let start = *self.chunk.indptr.last().expect("indptr starts with 0") as usize;
        self.chunk.indices.truncate(start);
        self.chunk.data.truncate(start);
    }

    /// Ends the row whose features were pushed.
    fn finish_row(&mut self, label: f64, task: u32, line: u64) {
        let c = &mut self.chunk;
        c.indptr.push(c.indices.len() as u64);
        c.labels.push(label);
        c.task_ids.push(task);
        c.lines.push(line);
    }
}

/// A format's line parser.
pub(crate) trait LineParser: Send {
    /// Parses a line into features pushed on `out` and the row's label and task; `Ok(None)` for
    /// a line that holds no example (blank, a comment, a CSV header).
    fn parse<'a>(&mut self, line: &'a [u8], out: &mut Builder) -> Result<Option<Row<'a>>, String>;

    /// CSV: the feature columns (known once the header is read).
    fn feature_columns(&self) -> Vec<String> {
        Vec::new()
    }

    /// Whether the last error spoils the whole file (a CSV header), so skipping cannot go on.
    fn fatal(&self) -> bool {
        false
    }
}

/// Reads a file chunk by chunk (an iterator of chunks).
pub struct Reader {
    path: String,
    opts: Options,
    lines: Lines,
    parser: Box<dyn LineParser>,
    checks: RowChecks,
    done: bool,
    sent_columns: bool,
}

impl Reader {
    /// Opens `path` (`-` for standard input; gzip recognized by its magic bytes) for reading
    /// with `opts`; an unreadable file or invalid options are a [`ReadError`].
    pub fn open(path: &str, opts: Options) -> Result<Self, ReadError> {
        let fail = |message: String| ReadError {
            path: path.to_string(),
            line: None,
            message,
        };
        if opts.chunk_rows == 0 || opts.chunk_bytes == 0 || opts.max_line_bytes == 0 {
            return Err(fail("chunk_rows, chunk_bytes and max_line_bytes must be >= 1".into()));
        }
        if opts.n_features == 0 || opts.n_features > MAX_COLUMNS {
            return Err(fail(format!(
                "{} feature columns: the engine takes 1 to {MAX_COLUMNS}",
                opts.n_features
            )));
        }
        let inner = source::open(path).map_err(|e| fail(io_message(&e)))?;
        let parser: Box<dyn LineParser> = match opts.format {
            Format::Svmlight => Box::new(svmlight::Parser::new(&opts)),
            Format::Vw => Box::new(vw::Parser::new(&opts)),
            Format::Csv => Box::new(csv::Parser::new(&opts)),
        };
        let require_labels = opts.require_labels;
        Ok(Self {
            path: path.to_string(),
            lines: Lines::new(inner, opts.max_line_bytes),
            opts,
            checks: RowChecks {
                require_labels,
                ..RowChecks::default()
            },
            parser,
            done: false,
            sent_columns: false,
        })
    }

    fn error(&self, line: Option<u64>, message: String) -> ReadError {
        ReadError {
            path: self.path.clone(),
            line,
            message,
        }
    }

    /// The next chunk, `None` at the end of the file.
    pub fn next_chunk(&mut self) -> Result<Option<Chunk>, ReadError> {
        self.next_chunk_in(Chunk::default())
    }

    /// [`Reader::next_chunk`] written into the buffers of `spare`, a chunk done with (so a
    /// stream of chunks allocates once, not per chunk).
    pub fn next_chunk_in(&mut self, spare: Chunk) -> Result<Option<Chunk>, ReadError> {
        if self.done {
            return Ok(None);
        }
        let mut b = Builder::reusing(spare);
        let start_bytes = self.lines.bytes;
        while b.chunk.n_rows() < self.opts.chunk_rows && self.lines.bytes - start_bytes < self.opts.chunk_bytes as u64 {
            let lineno = self.lines.lineno + 1; // the number of the line about to be read
            let outcome = match self.lines.next_line() {
                Ok(None) => {
                    self.done = true;
                    break;
                }
                Ok(Some(line)) => match self.parser.parse(line, &mut b) {
                    Ok(None) => Ok(()),
                    Ok(Some(row)) => self.checks.accept(&mut b, row.label, row.task.as_deref(), lineno),
                    Err(m) => Err(m),
                },
                Err(LineError::TooLong(n)) => Err(format!(
                    "line of {n} bytes, longer than the cap of {} bytes (--max-line-bytes)",
                    self.opts.max_line_bytes
                )),
                Err(LineError::Io(e)) => {
                    return Err(self.error(Some(self.lines.lineno + 1), io_message(&e)));
                }
            };
            if let Err(message) = outcome {
                b.discard_row();
                let lineno = self.lines.lineno;
                if !self.opts.skip_bad_lines || self.parser.fatal() {
                    return Err(self.error(Some(lineno), message));
                }
                b.chunk.n_skipped += 1;
                if b.chunk.first_skipped.is_none() {
                    b.chunk.first_skipped = Some(self.error(Some(lineno), message).to_string());
                }
            }
        }
        if !self.sent_columns {
            b.chunk.feature_columns = self.parser.feature_columns();
            self.sent_columns = !b.chunk.feature_columns.is_empty() || self.done;
        }
        b.chunk.bytes_read = self.lines.bytes;
        if b.chunk.n_rows() == 0 && b.chunk.n_skipped == 0 && self.done && b.chunk.feature_columns.is_empty() {
            return Ok(None);
        }
        Ok(Some(b.chunk))
    }
}

/// What holds across the rows of a file: the label form, whether rows name a task, the tasks.
#[derive(Default)]
struct RowChecks {
    require_labels: bool,
    tasks: HashMap<Box<[u8]>, u32>,
    /// Whether the examples carry a task (decided by the first one), and that line.
    with_task: Option<(bool, u64)>,
    /// Whether the labels are 0/1 (else -1/+1; decided by the first 0 or -1), and that line.
    zero_one: Option<(bool, u64)>,
    /// The last row's task (files often hold runs of one task): no lookup for a repeat.
    last: Option<(Vec<u8>, u32)>,
}

/// Records `value` and `line` on the first call; afterwards, `Err(first line)` when `value`
/// differs from the recorded one (a choice the first row makes for the whole file).
fn same_as_first(first: &mut Option<(bool, u64)>, value: bool, line: u64) -> Result<(), u64> {
    match *first {
        None => {
            *first = Some((value, line));
            Ok(())
        }
        Some((v, at)) if v != value => Err(at),
        Some(_) => Ok(()),
    }
}

impl RowChecks {
    /// Checks the label form and the task of a parsed row and adds it to the chunk.
    fn accept(&mut self, b: &mut Builder, label: Option<f64>, task: Option<&[u8]>, line: u64) -> Result<(), String> {
        let label = match label {
            Some(l) => {
                if l != 1.0 {
                    let zero_one = l == 0.0;
                    if let Err(first) = same_as_first(&mut self.zero_one, zero_one, line) {
                        return Err(format!(
                            "label {l} mixes -1/+1 with 0/1 labels (line {first} has {})",
                            if zero_one { "-1" } else { "0" }
                        ));
                    }
                }
                l
            }
            None if self.require_labels => return Err("no label".into()),
            None => f64::NAN,
        };
        let has_task = task.is_some();
        if let Err(first) = same_as_first(&mut self.with_task, has_task, line) {
            return Err(format!(
                "{} task, unlike line {first} (either every example names its task or none does)",
                if has_task { "a" } else { "no" }
            ));
        }
        b.push_features()?;
        let name: &[u8] = task.unwrap_or(b"0");
        let id = match &self.last {
            Some((last, id)) if last.as_slice() == name => *id,
            _ => {
                let id = match self.tasks.get(name) {
                    Some(&id) => id,
                    None => {
                        let refuse = |b: &mut Builder, message: &str| {
                            b.drop_features();
                            message.to_string()
                        };
                        let text = std::str::from_utf8(name).map_err(|_| refuse(b, "a task that is not UTF-8 text"))?;
                        let id = u32::try_from(self.tasks.len()).map_err(|_| refuse(b, "more than 2^32 tasks"))?;
                        b.chunk.new_tasks.push(text.to_string());
                        self.tasks.insert(name.into(), id);
                        id
                    }
                };
                self.last = Some((name.to_vec(), id));
                id
            }
        };
        b.finish_row(label, id, line);
        Ok(())
    }
}

impl Iterator for Reader {
    type Item = Result<Chunk, ReadError>;

    fn next(&mut self) -> Option<Self::Item> {
        match self.next_chunk() {
            Ok(Some(c)) => Some(Ok(c)),
            Ok(None) => None,
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

/// [`spawn`] with a way back: chunks sent on the returned sender are reused for the next ones
/// (their buffers keep their capacity), so a long stream does not allocate (and fault in fresh
/// pages) chunk after chunk. The reader is opened on the thread too (`open`), so a caller
/// waiting for a named pipe's writer stays interruptible; a failure to open is the first item.
pub fn spawn_recycling(
    open: impl FnOnce() -> Result<Reader, ReadError> + Send + 'static,
    depth: usize,
) -> (Receiver<Result<Chunk, ReadError>>, SyncSender<Chunk>, JoinHandle<()>) {
    let (tx, rx) = sync_channel(depth);
    let (back_tx, back_rx) = sync_channel::<Chunk>(depth + 2);
    let handle = std::thread::Builder::new()
        .name("omtl-reader".into())
        .spawn(move || {
            let mut reader = match open() {
                Ok(r) => r,
                Err(e) => {
                    let _ = tx.send(Err(e));
                    return;
                }
            };
            loop {
                let spare = back_rx.try_recv().unwrap_or_default();
                let item = match reader.next_chunk_in(spare) {
                    Ok(Some(c)) => Ok(c),
                    Ok(None) => break,
                    Err(e) => Err(e),
                };
                let failed = item.is_err();
                if tx.send(item).is_err() || failed {
                    break;
                }
            }
        })
        .expect("spawning the reader thread");
    (rx, back_tx, handle)
}

/// Runs `reader` on its own thread; the channel holds at most `depth` chunks ahead of the
/// consumer, so memory stays at `depth + 2` chunks (queued, being built, being consumed).
/// Dropping the receiver stops the thread at its next chunk.
pub fn spawn(reader: Reader, depth: usize) -> (Receiver<Result<Chunk, ReadError>>, JoinHandle<()>) {
    let (tx, rx) = sync_channel(depth);
    let handle = std::thread::Builder::new()
        .name("omtl-reader".into())
        .spawn(move || {
            for item in reader {
                if tx.send(item).is_err() {
                    break;
                }
            }
        })
        .expect("spawning the reader thread");
    (rx, handle)
}

fn io_message(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "file not found".into(),
        std::io::ErrorKind::InvalidInput | std::io::ErrorKind::InvalidData => {
            format!("cannot be read ({e}; a corrupt gzip file?)")
        }
        _ => format!("cannot be read ({e})"),
    }
}

/// What a quick pass over an svmlight file finds, so that the file's width, indexing and tasks
/// are known before learning starts.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct SvmlightScan {
    /// The largest feature index.
    pub max_index: Option<u64>,
    /// Whether an index 0 appears.
    pub has_zero: bool,
    /// The `qid:` tasks in order of first appearance.
    pub tasks: Vec<String>,
}

/// Whether `path` is read as a stream, once: standard input, a pipe (process substitution's
/// `/dev/fd/N`), a named pipe, a device. Such a source cannot be read twice, so no pass before
/// learning may read it. A path that cannot be inspected counts as a file (opening it reports
/// what is wrong).
pub fn is_stream(path: &str) -> bool {
    path == "-" || std::fs::metadata(path).is_ok_and(|m| !m.is_file())
}

/// The message for a pass that would have to read a stream twice.
pub(crate) fn read_twice_message(what: &str) -> String {
    format!(
        "{what} needs the width of a stream (standard input or a pipe cannot be read twice to find its largest \
         index): pass --n-features N (n_features= in Python)"
    )
}

/// Scans an svmlight file (lines that do not parse are passed over: the reading pass reports
/// them). A stream ([`is_stream`]) is refused (it cannot be read again afterwards); an
/// interrupt ([`crate::interrupt`]) stops the pass.
pub fn scan_svmlight(path: &str, max_line_bytes: usize) -> Result<SvmlightScan, ReadError> {
    let fail = |line, message| ReadError {
        path: path.to_string(),
        line,
        message,
    };
    if is_stream(path) {
        return Err(fail(None, read_twice_message("reading svmlight")));
    }
    let inner = source::open(path).map_err(|e| fail(None, io_message(&e)))?;
    let mut lines = Lines::new(inner, max_line_bytes);
    let mut scan = SvmlightScan::default();
    let mut seen: std::collections::HashSet<Vec<u8>> = std::collections::HashSet::new();
    loop {
        if crate::interrupt::check().is_err() {
            return Err(ReadError::interrupted(path));
        }
        match lines.next_line() {
            Ok(None) => break,
            Ok(Some(line)) => {
                for index in svmlight::feature_indices(line) {
                    if let Some(j) = parse_index(index) {
                        scan.has_zero |= j == 0;
                        scan.max_index = Some(scan.max_index.map_or(j, |m| m.max(j)));
                    }
                }
                if let Some(task) = svmlight::task_of(line) {
                    if !seen.contains(task) {
                        if let Ok(text) = std::str::from_utf8(task) {
                            scan.tasks.push(text.to_string());
                        }
                        seen.insert(task.to_vec());
                    }
                }
            }
            Err(LineError::TooLong(_)) => {}
            Err(LineError::Io(e)) => return Err(fail(Some(lines.lineno + 1), io_message(&e))),
        }
    }
    Ok(scan)
}

// ---- number parsing -----------------------------------------------------------------------------

/// A non-negative integer of digits only, below 2^63; `None` otherwise.
#[inline]
pub(crate) fn parse_index(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 19 {
        return None;
    }
    let mut v: u64 = 0;
    for &c in s {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        v = v * 10 + u64::from(d);
    }
    (v < MAX_INDEX).then_some(v)
}

/// Why an index token did not parse: too large, or not an integer.
pub(crate) fn index_problem(s: &[u8]) -> String {
    let text = String::from_utf8_lossy(&s[..s.len().min(40)]);
    if !s.is_empty() && s.iter().all(u8::is_ascii_digit) {
        format!("feature index {text} is 2^63 or more")
    } else {
        format!("feature index {text:?} is not a non-negative integer")
    }
}

const POW10: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20,
    1e21, 1e22,
];

/// A finite decimal number, correctly rounded (as Python's `float`). Short plain decimals take a
/// fast exact path (an integer mantissa below 2^53 divided by an exact power of ten is one
/// correctly rounded IEEE division); the rest go to the standard library's parser.
#[inline]
pub(crate) fn parse_number(s: &[u8]) -> Option<f64> {
    let (neg, digits) = match s.first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if !digits.is_empty() && digits.len() <= 15 && digits != b"." {
        let (whole, frac) = match digits.iter().position(|&c| c == b'.') {
            Some(i) => (&digits[..i], &digits[i + 1..]),
            None => (digits, &[][..]),
        };
        // The mantissa is the digits read as one integer: whole * 10^len(frac) + frac (< 10^15).
        if let (Some(w), Some(f)) = (digits_value(whole), digits_value(frac)) {
            let v = (w * POW10_U64[frac.len()] + f) as f64 / POW10[frac.len()];
            return Some(if neg { -v } else { v });
        }
    }
    let text = std::str::from_utf8(s).ok()?;
    let v: f64 = text.parse().ok()?;
    v.is_finite().then_some(v)
}

const POW10_U64: [u64; 16] = [
    1,
    10,
    100,
    1_000,
    10_000,
    100_000,
    1_000_000,
    10_000_000,
    100_000_000,
    1_000_000_000,
    10_000_000_000,
    100_000_000_000,
    1_000_000_000_000,
    10_000_000_000_000,
    100_000_000_000_000,
    1_000_000_000_000_000,
];

/// The value of at most 15 ASCII digits (0 for none), `None` if a byte is not a digit: eight at
/// once when there are eight (one 64-bit word, SWAR), then one by one.
#[inline]
fn digits_value(s: &[u8]) -> Option<u64> {
    let (mut m, mut rest) = (0u64, s);
    if let Some((head, tail)) = rest.split_first_chunk::<8>() {
        m = eight_digits(u64::from_le_bytes(*head))?;
        rest = tail;
    }
    for &c in rest {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        m = m * 10 + u64::from(d);
    }
    Some(m)
}

/// Eight ASCII digits in one word (the first in its lowest byte); `None` if a byte is not one.
#[inline]
fn eight_digits(v: u64) -> Option<u64> {
    let digits = v.wrapping_sub(0x3030_3030_3030_3030);
    // A byte below '0' sets its top bit in `digits`, one above '9' in `v + 0x46..`; a borrow or
    // carry across bytes starts at such a byte, which is caught itself.
    if (digits | v.wrapping_add(0x4646_4646_4646_4646)) & 0x8080_8080_8080_8080 != 0 {
        return None;
    }
    let pairs = digits.wrapping_mul(10).wrapping_add(digits >> 8);
    let quads = (pairs & 0x0000_00FF_0000_00FF)
        .wrapping_mul(100 + (1_000_000 << 32))
        .wrapping_add(((pairs >> 16) & 0x0000_00FF_0000_00FF).wrapping_mul(1 + (10_000 << 32)));
    Some(quads >> 32)
}

/// A VW line's label and task ([`read_vw_line`]).
#[cfg(feature = "serve")]
pub(crate) type VwLabelTask = (Option<f64>, Option<String>);

/// One Vowpal Wabbit text line read as `omtl learn` reads it (the task in namespace `t`, names
/// hashed into `n_features` columns), for the server's VW protocol: the row's columns (sorted,
/// distinct) and values into `indices` and `values`, and its label and task; `None` for a line
/// that holds no example.
#[cfg(feature = "serve")]
pub(crate) fn read_vw_line(
    line: &[u8],
    n_features: u64,
    indices: &mut Vec<u32>,
    values: &mut Vec<f64>,
) -> Result<Option<VwLabelTask>, String> {
    let mut parser = vw::Parser::new(&Options::new(Format::Vw, n_features));
    let mut builder = Builder::reusing(Chunk::default());
    let Some(row) = parser.parse(line, &mut builder)? else {
        return Ok(None);
    };
    let task = row.task.map(|t| String::from_utf8_lossy(&t).into_owned());
    builder.push_features()?;
    builder.finish_row(row.label.unwrap_or(f64::NAN), 0, 0);
    *indices = std::mem::take(&mut builder.chunk.indices);
    *values = std::mem::take(&mut builder.chunk.data);
    Ok(Some((row.label, task)))
}

/// A label -1/+1 or 0/1 (also written `1.0`, `+1`, `-1.0`, `0.0`).
#[inline]
pub(crate) fn parse_label(s: &[u8]) -> Option<f64> {
    match s {
        b"1" | b"+1" | b"1.0" | b"+1.0" => Some(1.0),
        b"-1" | b"-1.0" => Some(-1.0),
        b"0" | b"0.0" | b"-0" => Some(0.0),
        _ => None,
    }
}

pub(crate) fn shown(s: &[u8]) -> String {
    format!("{:?}", String::from_utf8_lossy(&s[..s.len().min(40)]))
}

#[cfg(test)]
mod tests;
