//! The streaming driver behind `omtl learn FILE`: a file read on its own thread, chunk by chunk,
//! learned by any [`OnlineLearner`] on the calling thread, with a report and the predictions
//! written as it goes. Nothing here needs Python; the binding adds only its hooks (Ctrl-C, where
//! the report goes).
//!
//! - Tasks are the strings the file holds, numbered in order of first appearance across the
//!   passes ([`TaskMap`]); the model grows in place ([`OnlineLearner::add_tasks`], inside the
//!   atomic [`learn_grown`]) when a chunk brings new ones, so a file's task set need not be known
//!   before reading.
//! - The model is built on the first chunk with rows, for the tasks that chunk names (at least
//!   [`StreamLearner::min_tasks`]) and the file's width: exactly what learning the chunks one by
//!   one through the batch API does, so both give the same model and the same predictions.
//! - Each chunk is learned atomically ([`learn_grown`]): a learner error leaves the model as it
//!   was after the previous chunk. An interrupt ([`crate::interrupt`]) stops within a chunk
//!   and keeps the rows learned before it, as the batch functions do.
//! - [`Progress`] prints Vowpal Wabbit's progressive report (examples 1, 2, 4, ...).

use std::collections::HashMap;
use std::io::Write;
use std::sync::mpsc::RecvTimeoutError;
use std::time::Duration;

use super::{spawn_recycling, svmlight_width, Chunk, Format, Options, ReadError, Reader, MAX_COLUMNS};
use crate::data::Rows;
use crate::error::Error;
use crate::learner::{decision, learn_grown, predict_sign, OnlineLearner};

/// The width VW-format names are hashed into unless told otherwise (VW's `-b 18`).
pub const DEFAULT_HASHED_FEATURES: u64 = 1 << 18;

/// How often the driver checks for an interrupt while it waits for the reader.
const WAIT: Duration = Duration::from_millis(20);

/// Why a stream stopped.
#[derive(Debug)]
pub enum StreamError {
    /// The file (a line, or the stream itself).
    Read(ReadError),
    /// The learner refused a chunk, or the model could not be built; the model is as it was
    /// after the previous chunk.
    Learn(Error),
    /// The sink (the report or the predictions) failed.
    Write(std::io::Error),
    /// A task the model does not know (prediction), with the message to show.
    UnknownTask(String),
}

impl std::fmt::Display for StreamError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StreamError::Read(e) => e.fmt(f),
            StreamError::Learn(e) => e.fmt(f),
            StreamError::Write(e) => write!(f, "cannot write the output ({e})"),
            StreamError::UnknownTask(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for StreamError {}

impl From<ReadError> for StreamError {
    fn from(e: ReadError) -> Self {
        StreamError::Read(e)
    }
}

impl From<std::io::Error> for StreamError {
    fn from(e: std::io::Error) -> Self {
        StreamError::Write(e)
    }
}

/// Task names in order of first appearance, each with its model index.
#[derive(Debug, Clone, Default)]
pub struct TaskMap {
    labels: Vec<String>,
    index: HashMap<String, u32>,
}

impl TaskMap {
    /// A map that already holds `labels` (a saved model's tasks), indexed in their order.
    pub fn with_labels(labels: Vec<String>) -> Self {
        let index = labels.iter().enumerate().map(|(i, l)| (l.clone(), i as u32)).collect();
        Self { labels, index }
    }

    /// The names in index order.
    pub fn labels(&self) -> &[String] {
        &self.labels
    }

    /// The number of names.
    pub fn len(&self) -> usize {
        self.labels.len()
    }

    /// Whether the map holds no name.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }

    /// The index of `name`, if known.
    pub fn get(&self, name: &str) -> Option<u32> {
        self.index.get(name).copied()
    }

    /// Forgets the names from index `len` on (those of a chunk that was not learned).
    fn truncate(&mut self, len: usize) {
        for name in self.labels.drain(len.min(self.labels.len())..) {
            self.index.remove(&name);
        }
    }

    /// The index of `name`, adding it at the end when new.
    pub fn insert(&mut self, name: &str) -> u32 {
        if let Some(i) = self.get(name) {
            return i;
        }
        let i = self.labels.len() as u32;
        self.labels.push(name.to_string());
        self.index.insert(name.to_string(), i);
        i
    }
}

/// Fills in the width and indexing the options leave open, as `omtl.datasets.iter_file` does:
/// svmlight takes the largest index of a first quick pass (0-based when an index 0 appears),
/// VW hashes into [`DEFAULT_HASHED_FEATURES`] columns, CSV takes its header's columns (the
/// width is set to [`MAX_COLUMNS`] until the header is read). Standard input cannot be read
/// twice: svmlight there needs `n_features`.
pub fn resolve_layout(
    path: &str,
    opts: &mut Options,
    n_features: Option<u64>,
    zero_based: Option<bool>,
) -> Result<(), ReadError> {
    let fail = |message: String| ReadError {
        path: path.to_string(),
        line: None,
        message,
    };
    let width = match opts.format {
        Format::Svmlight => match (n_features, zero_based) {
            (Some(n), Some(z)) => {
                opts.zero_based = z;
                n
            }
            (None, _) if path == "-" => {
                return Err(fail(
                    "reading svmlight from standard input needs the width (--n-features N): a stream cannot be \
                     read ahead to find its largest index"
                        .into(),
                ))
            }
            (Some(n), None) if path == "-" => {
                opts.zero_based = false;
                n
            }
            _ => {
                let (max_index, has_zero) = svmlight_width(path, opts.max_line_bytes)?;
                let z = zero_based.unwrap_or(has_zero);
                opts.zero_based = z;
                n_features.unwrap_or_else(|| max_index.map_or(1, |m| (m + u64::from(z)).max(1)))
            }
        },
        Format::Vw => n_features.unwrap_or(DEFAULT_HASHED_FEATURES),
        Format::Csv => n_features.unwrap_or(MAX_COLUMNS),
    };
    if !(1..=MAX_COLUMNS).contains(&width) {
        // The words of omtl.datasets.iter_file, which names standard input "-" here.
        return Err(ReadError {
            path: String::new(),
            line: None,
            message: format!("{path}: {width} feature columns; the engine takes 1 to {MAX_COLUMNS}"),
        });
    }
    opts.n_features = width;
    Ok(())
}

/// What a stream leaves besides the model: the counts `omtl learn` reports and a saved model
/// keeps.
#[derive(Debug, Clone, Default)]
pub struct StreamSummary {
    /// Examples learned (over every pass).
    pub n_seen: u64,
    /// Examples predicted wrongly before their update.
    pub n_mistakes: u64,
    /// Examples per model task.
    pub seen_per_task: Vec<u64>,
    /// Whether the last chunk with rows wrote its labels 0/1 (else -1/+1).
    pub zero_one: bool,
    /// Lines skipped (`skip_bad_lines`).
    pub n_skipped: u64,
    /// The first skipped line's message.
    pub first_skipped: Option<String>,
    /// CSV: the feature columns in model order.
    pub feature_columns: Vec<String>,
}

/// Where each learned chunk goes: the rows, their pre-update scores and their predicted labels
/// as written in the file (0/1 or -1/+1).
pub trait ChunkSink {
    /// Called once per chunk with rows, after it was learned (or scored).
    fn chunk(&mut self, chunk: &Chunk, scores: &[f64], predicted: &[i64]) -> std::io::Result<()>;
}

/// Vowpal Wabbit's progressive report: a line at examples 1, 2, 4, 8, ... with the average
/// loss so far and since the last line, the example's label, prediction and number of features.
/// The loss is 0/1 (each prediction made before the example is learned): every learner has it,
/// while the logistic loss needs a probabilistic score (docs/DECISIONS.md, "The CLI report").
#[derive(Debug, Clone)]
pub struct Progress {
    /// Examples seen.
    pub n: u64,
    /// Mistakes made (predictions before the update).
    pub mistakes: u64,
    next_line: u64,
    last_n: u64,
    last_mistakes: u64,
}

impl Default for Progress {
    fn default() -> Self {
        Self {
            n: 0,
            mistakes: 0,
            next_line: 1,
            last_n: 0,
            last_mistakes: 0,
        }
    }
}

impl Progress {
    /// The two header lines.
    pub fn header() -> String {
        format!(
            "{:<12} {:<12} {:>12} {:>8} {:>8} {:>8}\n{:<12} {:<12} {:>12} {:>8} {:>8} {:>8}",
            "average",
            "since",
            "example",
            "current",
            "current",
            "current",
            "0/1 loss",
            "last",
            "counter",
            "label",
            "predict",
            "features"
        )
    }

    /// Counts a chunk's rows (`labels` as written, `predicted` in the same form) and appends
    /// the report lines they reach to `out` (the header before the first), unless `quiet`.
    pub fn add(&mut self, chunk: &Chunk, predicted: &[i64], quiet: bool, out: &mut String) {
        let n0 = self.n;
        let mut total = self.mistakes;
        for (r, (&label, &p)) in chunk.labels.iter().zip(predicted).enumerate() {
            total += u64::from(label as i64 != p);
            let at = n0 + r as u64 + 1;
            if !quiet && at == self.next_line {
                if at == 1 {
                    out.push_str(&Self::header());
                    out.push('\n');
                }
                let since = (total - self.last_mistakes) as f64 / (at - self.last_n) as f64;
                let nnz = chunk.indptr[r + 1] - chunk.indptr[r];
                out.push_str(&format!(
                    "{:<12.6} {:<12.6} {:>12} {:>8} {:>8} {:>8}\n",
                    total as f64 / at as f64,
                    since,
                    at,
                    label as i64,
                    p,
                    nnz
                ));
                self.last_n = at;
                self.last_mistakes = total;
                self.next_line *= 2;
            }
        }
        self.n += chunk.n_rows() as u64;
        self.mistakes = total;
    }

    /// The average 0/1 loss so far.
    pub fn loss(&self) -> f64 {
        if self.n == 0 {
            0.0
        } else {
            self.mistakes as f64 / self.n as f64
        }
    }
}

/// Writes predicted labels one per line (as `omtl learn --predictions` does).
pub fn write_labels(out: &mut impl Write, predicted: &[i64]) -> std::io::Result<()> {
    for &p in predicted {
        out.write_all(match p {
            1 => &b"1\n"[..],
            0 => &b"0\n"[..],
            _ => &b"-1\n"[..],
        })?;
    }
    Ok(())
}

/// The chunks of a reader, parsed on a thread of their own (at most two ahead), each waited for
/// with interrupt checks ([`crate::interrupt::check_now`]) so that a stalled pipe stays
/// interruptible; a chunk done with goes back to the thread to be refilled
/// ([`super::spawn_recycling`]). The thread stops when this is dropped.
struct Chunks {
    rx: std::sync::mpsc::Receiver<Result<Chunk, ReadError>>,
    back: std::sync::mpsc::SyncSender<Chunk>,
}

impl Chunks {
    fn new(reader: Reader) -> Self {
        let (rx, back, _thread) = spawn_recycling(reader, 2);
        Self { rx, back }
    }

    fn next(&self) -> Option<Result<Chunk, StreamError>> {
        loop {
            match self.rx.recv_timeout(WAIT) {
                Ok(item) => return Some(item.map_err(StreamError::from)),
                Err(RecvTimeoutError::Timeout) => {
                    if let Err(e) = crate::interrupt::check_now() {
                        return Some(Err(StreamError::Learn(e)));
                    }
                }
                Err(RecvTimeoutError::Disconnected) => return None,
            }
        }
    }

    /// Hands a chunk back for reuse (dropped if the thread has enough).
    fn give_back(&self, chunk: Chunk) {
        let _ = self.back.try_send(chunk);
    }
}

/// The engine's ±1 labels of a chunk, and whether the chunk writes its labels 0/1 (a label 0
/// in it; a chunk of 1s alone reads as -1/+1, as the batch API reads such a batch).
fn pm1_labels(chunk: &Chunk, y: &mut Vec<f64>) -> bool {
    y.clear();
    y.extend(chunk.labels.iter().map(|&l| if l == 1.0 { 1.0 } else { -1.0 }));
    chunk.labels.contains(&0.0)
}

/// The predicted labels of `scores` in a chunk's label form (a score of 0 predicts +1).
fn predicted_labels(scores: &[f64], zero_one: bool, out: &mut Vec<i64>) {
    out.clear();
    out.extend(scores.iter().map(|&f| match (predict_sign(f) > 0.0, zero_one) {
        (true, _) => 1,
        (false, true) => 0,
        (false, false) => -1,
    }));
}

/// A learner fed by a stream: the model (built on the first chunk when `None`), its tasks and
/// the counts of what it learned.
pub struct StreamLearner<L> {
    /// The model; `None` until the first chunk with rows.
    pub model: Option<L>,
    /// The file's task names, model index by name.
    pub tasks: TaskMap,
    /// The fewest tasks the model is built with (the open-ended complete graph of MTLinear
    /// keeps two: its one-task form does not split into shared and own blocks).
    pub min_tasks: usize,
    /// What was learned so far.
    pub summary: StreamSummary,
    /// The report's counters.
    pub progress: Progress,
}

impl<L: OnlineLearner + Clone> StreamLearner<L> {
    /// A learner to be built on the first chunk (`model: None`), or one continuing from a
    /// saved model and its task names.
    pub fn new(model: Option<L>, tasks: TaskMap, min_tasks: usize) -> Self {
        let seen = model.as_ref().map_or(0, |m| m.n_tasks());
        Self {
            model,
            tasks,
            min_tasks: min_tasks.max(1),
            summary: StreamSummary {
                seen_per_task: vec![0; seen],
                ..StreamSummary::default()
            },
            progress: Progress::default(),
        }
    }

    fn engine_tasks(&self) -> usize {
        self.tasks.len().max(self.min_tasks)
    }

    /// One pass over the file `path` read with `opts`: every chunk learned in file order (predict,
    /// then update), `build(n_tasks, n_features)` making the model on the first chunk when there
    /// is none, the report lines handed to `report` (none when `quiet`), each chunk to `sink`.
    /// CSV: the header's columns are kept in [`StreamSummary::feature_columns`] and `opts` is set
    /// to read them so in a later pass.
    pub fn learn_file(
        &mut self,
        path: &str,
        opts: &mut Options,
        build: &mut dyn FnMut(usize, usize) -> crate::Result<L>,
        quiet: bool,
        report: &mut dyn FnMut(&str) -> std::io::Result<()>,
        sink: &mut dyn ChunkSink,
    ) -> Result<(), StreamError> {
        let reader = Reader::open(path, opts.clone())?;
        // Reader task ids (per pass, in order of appearance) -> model task indices.
        let mut ids: Vec<u32> = Vec::new();
        let (mut indptr, mut tasks, mut y, mut predicted) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let mut text = String::new();
        let chunks = Chunks::new(reader);
        while let Some(item) = chunks.next() {
            let chunk = item?;
            if !chunk.feature_columns.is_empty() {
                self.summary.feature_columns = chunk.feature_columns.clone();
                opts.csv_feature_columns = Some(chunk.feature_columns.clone());
            }
            self.summary.n_skipped += chunk.n_skipped;
            if self.summary.first_skipped.is_none() {
                self.summary.first_skipped = chunk.first_skipped.clone();
            }
            let (known_tasks, known_ids) = (self.tasks.len(), ids.len());
            ids.extend(chunk.new_tasks.iter().map(|name| self.tasks.insert(name)));
            if chunk.n_rows() == 0 {
                chunks.give_back(chunk);
                continue;
            }
            let width = if opts.format == Format::Csv {
                self.summary.feature_columns.len()
            } else {
                opts.n_features as usize
            };
            indptr.clear();
            indptr.extend(chunk.indptr.iter().map(|&p| p as i64));
            tasks.clear();
            tasks.extend(chunk.task_ids.iter().map(|&t| i64::from(ids[t as usize])));
            let zero_one = pm1_labels(&chunk, &mut y);
            let rows = Rows::Csr {
                indptr: &indptr,
                indices: &chunk.indices,
                data: &chunk.data,
                n_cols: width,
            };
            let engine_tasks = self.engine_tasks();
            let scores = match self.model.as_mut() {
                Some(model) => {
                    let n_new = engine_tasks.saturating_sub(model.n_tasks());
                    learn_grown(model, n_new, &rows, &tasks, &y)
                }
                None => {
                    let mut model = match build(engine_tasks, width) {
                        Ok(m) => m,
                        Err(e) => {
                            self.tasks.truncate(known_tasks);
                            return Err(StreamError::Learn(e));
                        }
                    };
                    let outcome = learn_grown(&mut model, 0, &rows, &tasks, &y);
                    if matches!(outcome, Ok(_) | Err(Error::Interrupted { .. })) {
                        self.model = Some(model);
                    }
                    outcome
                }
            };
            let (scores, interrupted) = match scores {
                Ok(s) => (s, false),
                Err(Error::Interrupted { scores }) => (scores, true),
                Err(e) => {
                    // The model is as it was before the chunk: so are its task names.
                    self.tasks.truncate(known_tasks);
                    ids.truncate(known_ids);
                    return Err(StreamError::Learn(e));
                }
            };
            let learned = scores.len();
            let n_tasks = self.model.as_ref().map_or(0, |m| m.n_tasks());
            self.summary
                .seen_per_task
                .resize(n_tasks.max(self.summary.seen_per_task.len()), 0);
            for &t in &tasks[..learned] {
                self.summary.seen_per_task[t as usize] += 1;
            }
            predicted_labels(&scores, zero_one, &mut predicted);
            self.summary.n_seen += learned as u64;
            self.summary.n_mistakes += predicted
                .iter()
                .zip(&y)
                .filter(|&(&p, &truth)| (p == 1) != (truth > 0.0))
                .count() as u64;
            if learned > 0 {
                self.summary.zero_one = zero_one;
            }
            if interrupted {
                return Err(StreamError::Learn(Error::Interrupted { scores: Vec::new() }));
            }
            text.clear();
            self.progress.add(&chunk, &predicted, quiet, &mut text);
            if !text.is_empty() {
                report(text.trim_end_matches('\n'))?;
            }
            sink.chunk(&chunk, &scores, &predicted)?;
            chunks.give_back(chunk);
        }
        Ok(())
    }
}

/// What [`predict_file`] counted.
#[derive(Debug, Clone, Default)]
pub struct PredictSummary {
    /// Rows predicted.
    pub n: u64,
    /// Rows with a label.
    pub labelled: u64,
    /// Rows with a label predicted wrongly.
    pub mistakes: u64,
    /// Lines skipped (`skip_bad_lines`).
    pub n_skipped: u64,
    /// The first skipped line's message.
    pub first_skipped: Option<String>,
}

/// Predicts every example of the file `path` read with `opts` by `model` (no update), the
/// file's task names looked up in `tasks`; each chunk goes to `sink` with its ±1 predictions.
pub fn predict_file<L: OnlineLearner>(
    model: &L,
    tasks: &TaskMap,
    path: &str,
    opts: &Options,
    sink: &mut dyn ChunkSink,
) -> Result<PredictSummary, StreamError> {
    let reader = Reader::open(path, opts.clone())?;
    let mut ids: Vec<Option<u32>> = Vec::new();
    let (mut indptr, mut task_ids, mut predicted) = (Vec::new(), Vec::new(), Vec::new());
    let (mut n, mut labelled, mut mistakes, mut skipped, mut first_skipped) = (0u64, 0u64, 0u64, 0u64, None);
    let mut columns: Vec<String> = Vec::new();
    let chunks = Chunks::new(reader);
    while let Some(item) = chunks.next() {
        let chunk = item?;
        if !chunk.feature_columns.is_empty() {
            columns = chunk.feature_columns.clone();
        }
        skipped += chunk.n_skipped;
        if first_skipped.is_none() {
            first_skipped = chunk.first_skipped.clone();
        }
        let first_new = ids.len();
        ids.extend(chunk.new_tasks.iter().map(|name| tasks.get(name)));
        if chunk.n_rows() == 0 {
            chunks.give_back(chunk);
            continue;
        }
        let width = if opts.format == Format::Csv {
            columns.len()
        } else {
            opts.n_features as usize
        };
        if width != model.n_features() {
            return Err(StreamError::UnknownTask(format!(
                "{path}: {width} feature columns, the model was trained on {}",
                model.n_features()
            )));
        }
        task_ids.clear();
        for (r, &t) in chunk.task_ids.iter().enumerate() {
            match ids[t as usize] {
                Some(i) => task_ids.push(i64::from(i)),
                None => {
                    // A task is named first in the chunk that lists it, so it is this chunk's.
                    let name = chunk
                        .new_tasks
                        .get((t as usize).wrapping_sub(first_new))
                        .map_or("", String::as_str);
                    return Err(StreamError::UnknownTask(unknown_task_message(
                        path,
                        chunk.lines[r],
                        name,
                        tasks,
                    )));
                }
            }
        }
        indptr.clear();
        indptr.extend(chunk.indptr.iter().map(|&p| p as i64));
        let rows = Rows::Csr {
            indptr: &indptr,
            indices: &chunk.indices,
            data: &chunk.data,
            n_cols: width,
        };
        let scores = decision(model, &rows, &task_ids).map_err(StreamError::Learn)?;
        predicted.clear();
        predicted.extend(scores.iter().map(|&f| if predict_sign(f) > 0.0 { 1 } else { -1 }));
        n += scores.len() as u64;
        for (&label, &p) in chunk.labels.iter().zip(&predicted) {
            if !label.is_nan() {
                labelled += 1;
                mistakes += u64::from((label > 0.0) != (p > 0));
            }
        }
        sink.chunk(&chunk, &scores, &predicted)?;
        chunks.give_back(chunk);
    }
    Ok(PredictSummary {
        n,
        labelled,
        mistakes,
        n_skipped: skipped,
        first_skipped,
    })
}

/// The message for a task the model never saw, as `omtl predict` words it.
pub fn unknown_task_message(path: &str, line: u64, name: &str, tasks: &TaskMap) -> String {
    let labels = tasks.labels();
    let mut shown: Vec<&str> = labels.iter().take(10).map(String::as_str).collect();
    if labels.len() > 10 {
        shown.push("...");
    }
    format!(
        "{path}, line {line}: task {}, which the model never saw (its {} tasks: {})",
        python_repr(name),
        labels.len(),
        shown.join(", ")
    )
}

/// Python's `repr` of a str for the common cases (quotes chosen as Python chooses them).
fn python_repr(s: &str) -> String {
    if s.contains('\'') && !s.contains('"') {
        format!("\"{s}\"")
    } else {
        format!("'{}'", s.replace('\\', "\\\\").replace('\'', "\\'"))
    }
}

#[cfg(test)]
mod tests;
