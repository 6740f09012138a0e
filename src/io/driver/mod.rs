//! The streaming driver behind `omtl learn` and `omtl predict`: a file read on its own thread,
//! chunk by chunk, learned (or scored) by a [`Model`] on the calling thread, with a report and
//! the per-example outputs written as it goes. Any learner of the class table runs here; the
//! model's book (task labels, counts, label form, counters) is the one record of what it
//! learned. Nothing here needs Python; the binding adds only its hooks (Ctrl-C, where the
//! report and standard output go).
//!
//! - Tasks are the strings the file holds, given to the model as task labels: it numbers them
//!   in order of first appearance and grows as a chunk brings new ones, so a file's task set
//!   need not be known before reading. A model saved with integer labels reads a file's `17` as
//!   its task 17.
//! - The model is built on the first chunk with rows, exactly as learning the chunks one by one
//!   through the batch API builds it, so both give the same model and the same predictions.
//! - A chunk is learned atomically ([`Model::learn`]); a chunk the learner refuses for one of its
//!   rows (a value its single-precision state cannot hold, say) is learned again row by row to
//!   name that row's file and line, and, with `skip_bad_lines`, to skip it. An interrupt
//!   ([`crate::interrupt`]) stops within a chunk and keeps the rows learned before it.
//! - A stream's width need not be known ([`Width::Open`]): a learner that widens
//!   ([`Model::grows_features`]) widens as larger indices arrive.
//! - [`Progress`] prints Vowpal Wabbit's progressive report (examples 1, 2, 4, ...).

mod command;
mod layout;
mod outputs;
mod report;

pub use command::{
    learn_command, predict_command, Learn, Predict, Reading, Summary, TableColumns, TableReader, METADATA_KEY,
};
pub use layout::{resolve_layout, Width, DEFAULT_HASHED_FEATURES};
pub use outputs::{link_target, Output, Outputs};
pub use report::{finished, push_label, Finished, Progress};

use std::sync::mpsc::RecvTimeoutError;
use std::time::Duration;

use super::{spawn_recycling, Chunk, Format, Options, ReadError, Reader};
use crate::data::Rows;
use crate::error::Error;
use crate::model::{LabelForm, Labels, Model, TaskId, TaskRef, Tasks};

/// How often the driver checks for an interrupt while it waits for the reader.
const WAIT: Duration = Duration::from_millis(20);

/// Why a run stopped.
#[derive(Debug)]
pub enum StreamError {
    /// The file (a line, or the stream itself), or a row the learner refused (its line named).
    Read(ReadError),
    /// The learner refused a chunk, or the model could not be built; the model is as it was
    /// after the previous chunk.
    Learn(Error),
    /// An output (the report, the predictions, the model file) could not be written.
    Write(std::io::Error),
    /// What the command was given cannot be used (an option, a model file, a task the model
    /// never saw), with the message to show.
    Refused(String),
}

impl StreamError {
    /// Whether the run was stopped by the interrupt hook.
    pub fn is_interrupt(&self) -> bool {
        match self {
            StreamError::Learn(Error::Interrupted { .. }) => true,
            StreamError::Read(e) => e.is_interrupt(),
            _ => false,
        }
    }
}

impl std::fmt::Display for StreamError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StreamError::Read(e) => e.fmt(f),
            StreamError::Learn(e) => e.fmt(f),
            StreamError::Write(e) => write!(f, "cannot write the output ({e})"),
            StreamError::Refused(m) => f.write_str(m),
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

impl From<Error> for StreamError {
    fn from(e: Error) -> Self {
        StreamError::Learn(e)
    }
}

/// Where each learned (or scored) chunk goes: its rows, their pre-update scores, and the label
/// form the model writes predictions in.
pub trait ChunkSink {
    /// Called once per chunk with rows, after it was learned (or scored).
    fn chunk(&mut self, chunk: &Chunk, scores: &[f64], form: &LabelForm) -> std::io::Result<()>;
}

/// Where chunks come from.
pub enum Source {
    /// A data file (`-`: standard input), read on a thread of its own.
    File(String),
    /// Chunks already in memory (a Parquet table), named as a file is in messages.
    Chunks {
        /// The file they came from.
        name: String,
        /// The chunks, their task ids numbered across all of them.
        chunks: Vec<Chunk>,
    },
}

impl Source {
    /// The name messages give the source.
    pub fn name(&self) -> &str {
        match self {
            Source::File(path) => path,
            Source::Chunks { name, .. } => name,
        }
    }
}

/// The chunks of a source: a reader on a thread of its own (at most two chunks ahead), each
/// waited for with interrupt checks so that a stalled pipe stays interruptible, a chunk done
/// with going back to the thread to be refilled; or chunks in memory.
enum Feed {
    Thread {
        rx: std::sync::mpsc::Receiver<Result<Chunk, ReadError>>,
        back: std::sync::mpsc::SyncSender<Chunk>,
    },
    Memory(std::vec::IntoIter<Chunk>),
}

impl Feed {
    fn new(source: Source, opts: &Options) -> Self {
        match source {
            Source::File(path) => {
                let opts = opts.clone();
                let (rx, back, _thread) = spawn_recycling(move || Reader::open(&path, opts), 2);
                Feed::Thread { rx, back }
            }
            Source::Chunks { chunks, .. } => Feed::Memory(chunks.into_iter()),
        }
    }

    fn next(&mut self) -> Option<Result<Chunk, StreamError>> {
        let rx = match self {
            Feed::Thread { rx, .. } => rx,
            Feed::Memory(chunks) => {
                if let Err(e) = crate::interrupt::check_now() {
                    return Some(Err(e.into()));
                }
                return chunks.next().map(Ok);
            }
        };
        loop {
            match rx.recv_timeout(WAIT) {
                Ok(item) => return Some(item.map_err(StreamError::from)),
                Err(RecvTimeoutError::Timeout) => {
                    if let Err(e) = crate::interrupt::check_now() {
                        return Some(Err(e.into()));
                    }
                }
                Err(RecvTimeoutError::Disconnected) => return None,
            }
        }
    }

    /// Hands a chunk back for reuse (dropped if the thread has enough).
    fn give_back(&self, chunk: Chunk) {
        if let Feed::Thread { back, .. } = self {
            let _ = back.try_send(chunk);
        }
    }
}

/// The model's task for a file's task `name`: the label `name`, or, for a model that knows the
/// integer label, that integer (a model saved from Python with integer task ids).
fn file_task(model: &Model, name: &str) -> TaskId {
    if model.task_index(TaskRef::Str(name)).is_none() {
        if let Ok(i) = name.parse::<i64>() {
            if model.task_index(TaskRef::Int(i)).is_some() {
                return TaskId::Int(i);
            }
        }
    }
    TaskId::from(name)
}

/// A chunk's rows as the engine takes them (`n_cols` columns).
struct Batch {
    indptr: Vec<i64>,
    labels: Vec<i64>,
}

impl Batch {
    fn of(chunk: &Chunk) -> Self {
        Batch {
            indptr: chunk.indptr.iter().map(|&p| p as i64).collect(),
            labels: chunk.labels.iter().map(|&l| l as i64).collect(),
        }
    }
}

fn rows_of<'a>(chunk: &'a Chunk, indptr: &'a [i64], n_cols: usize) -> Rows<'a> {
    Rows::Csr {
        indptr,
        indices: &chunk.indices,
        data: &chunk.data,
        n_cols,
    }
}

/// Whether a learner's error is about one row (found, named and skippable by learning the
/// chunk again row by row), not about the model or the call.
fn is_row_error(e: &Error) -> bool {
    matches!(
        e,
        Error::Numerical(_) | Error::NonFinite { .. } | Error::RowOverflow { .. } | Error::MalformedSparse { .. }
    )
}

/// Keeps the rows of `chunk` marked in `keep`, in order.
fn keep_rows(chunk: &mut Chunk, keep: &[bool]) {
    let (mut at, mut out) = (0usize, 0usize);
    let mut indptr = vec![0u64];
    for (r, &kept) in keep.iter().enumerate().take(chunk.n_rows()) {
        let (start, end) = (chunk.indptr[r] as usize, chunk.indptr[r + 1] as usize);
        if kept {
            chunk.indices.copy_within(start..end, at);
            chunk.data.copy_within(start..end, at);
            at += end - start;
            indptr.push(at as u64);
            chunk.labels[out] = chunk.labels[r];
            chunk.task_ids[out] = chunk.task_ids[r];
            chunk.lines[out] = chunk.lines[r];
            out += 1;
        }
    }
    chunk.indices.truncate(at);
    chunk.data.truncate(at);
    chunk.indptr = indptr;
    chunk.labels.truncate(out);
    chunk.task_ids.truncate(out);
    chunk.lines.truncate(out);
}

/// A model fed by a stream, and what the run has seen besides the model's book.
pub struct StreamLearner {
    /// The model (built on the first chunk with rows when unfitted).
    pub model: Model,
    /// The run's report counters.
    pub progress: Progress,
    /// Lines skipped (`skip_bad_lines`) in the run.
    pub skipped: u64,
    /// The first skipped line's message.
    pub first_skipped: Option<String>,
    /// CSV: the header's feature columns in model order.
    pub feature_columns: Vec<String>,
}

impl StreamLearner {
    /// A learner continuing `model` (unfitted: built on the first chunk).
    pub fn new(model: Model) -> Self {
        StreamLearner {
            model,
            progress: Progress::default(),
            skipped: 0,
            first_skipped: None,
            feature_columns: Vec::new(),
        }
    }

    fn skip(&mut self, n: u64, first: Option<&String>) {
        self.skipped += n;
        if self.first_skipped.is_none() {
            self.first_skipped = first.cloned();
        }
    }

    /// One pass over `source` read with `opts` and `width`: every chunk learned in order
    /// (predict, then update), the report lines handed to `report` (none when `quiet`), each
    /// chunk to `sink`. CSV: the header's columns are kept in [`StreamLearner::feature_columns`]
    /// and `opts` is set to read them so in a later pass.
    pub fn learn(
        &mut self,
        source: Source,
        opts: &mut Options,
        width: Width,
        quiet: bool,
        report: &mut dyn FnMut(&str) -> std::io::Result<()>,
        sink: &mut dyn ChunkSink,
    ) -> Result<(), StreamError> {
        let path = source.name().to_string();
        let mut feed = Feed::new(source, opts);
        let mut tasks: Vec<TaskId> = Vec::new();
        let mut text = String::new();
        while let Some(item) = feed.next() {
            let mut chunk = item?;
            if !chunk.feature_columns.is_empty() {
                self.feature_columns.clone_from(&chunk.feature_columns);
                opts.csv_feature_columns = Some(chunk.feature_columns.clone());
            }
            self.skip(chunk.n_skipped, chunk.first_skipped.as_ref());
            tasks.extend(chunk.new_tasks.iter().map(|name| file_task(&self.model, name)));
            if chunk.n_rows() == 0 {
                feed.give_back(chunk);
                continue;
            }
            let n_cols = self.widen(&chunk, opts, width, &path)?;
            let (scores, interrupted, warning) =
                self.learn_chunk(&mut chunk, &tasks, n_cols, &path, opts.skip_bad_lines)?;
            if let Some(w) = warning {
                report(&format!("warning: {w}"))?;
            }
            let form = self.model.label_form().clone();
            text.clear();
            self.progress.add(&chunk, &scores, &form, quiet, &mut text);
            if interrupted {
                return Err(Error::Interrupted { scores: Vec::new() }.into());
            }
            if !text.is_empty() {
                report(text.trim_end_matches('\n'))?;
            }
            sink.chunk(&chunk, &scores, &form)?;
            feed.give_back(chunk);
        }
        Ok(())
    }

    /// The width to read `chunk` at, the model widened to it where it widens. A learner that
    /// keeps its width refuses the first row with a column beyond it.
    fn widen(&mut self, chunk: &Chunk, opts: &Options, width: Width, path: &str) -> Result<usize, StreamError> {
        let needed = match (opts.format, width) {
            (Format::Csv, _) => self.feature_columns.len(),
            (_, Width::Fixed(n)) => n as usize,
            (_, Width::Open) => chunk.indices.iter().max().map_or(1, |&j| j as usize + 1),
        };
        let Some(have) = self.model.book().map(|b| b.n_features_in()) else {
            return Ok(needed);
        };
        if opts.format == Format::Csv && needed != have {
            return Err(StreamError::Refused(format!(
                "{path}: {needed} feature columns, the model was trained on {have}"
            )));
        }
        if needed <= have {
            return Ok(have);
        }
        if self.model.grows_features() {
            self.model.grow_features(needed)?;
            return Ok(needed);
        }
        match chunk.indptr.windows(2).position(|w| {
            chunk.indices[w[0] as usize..w[1] as usize]
                .iter()
                .any(|&j| j as usize >= have)
        }) {
            None => Ok(have),
            Some(r) => {
                let column = chunk.indices[chunk.indptr[r] as usize..chunk.indptr[r + 1] as usize]
                    .iter()
                    .find(|&&j| j as usize >= have)
                    .copied()
                    .unwrap_or(0);
                let index = u64::from(column) + u64::from(!opts.zero_based);
                Err(ReadError {
                    path: path.to_string(),
                    line: Some(chunk.lines[r]),
                    message: format!(
                        "feature index {index} beyond the model's {have} feature columns ({} keeps the width it was \
                         built with; only MTLinear widens)",
                        self.model.estimator().class().name
                    ),
                }
                .into())
            }
        }
    }

    /// Learns a chunk: its pre-update scores, whether an interrupt stopped it (the scores then
    /// cover the rows learned), and the model's warning about its rows (MTFORG's radius, given
    /// once). A row the learner refuses is named by its line, or, with `skip`, taken out of the
    /// chunk.
    fn learn_chunk(
        &mut self,
        chunk: &mut Chunk,
        tasks: &[TaskId],
        n_cols: usize,
        path: &str,
        skip: bool,
    ) -> Result<(Vec<f64>, bool, Option<String>), StreamError> {
        let batch = Batch::of(chunk);
        let ids: Vec<TaskRef> = chunk.task_ids.iter().map(|&t| tasks[t as usize].as_ref()).collect();
        let rows = rows_of(chunk, &batch.indptr, n_cols);
        let warning = self.model.warning(&rows)?;
        match self.model.learn(&rows, Tasks::Ids(&ids), Labels::Ints(&batch.labels)) {
            Ok(scores) => return Ok((scores, false, warning)),
            Err(Error::Interrupted { scores }) => return Ok((scores, true, warning)),
            Err(e) if is_row_error(&e) => {} // the model is unchanged: learn row by row to find the row
            Err(e) => return Err(e.into()),
        }
        let (mut scores, mut keep) = (Vec::with_capacity(chunk.n_rows()), vec![true; chunk.n_rows()]);
        let mut interrupted = false;
        for r in 0..chunk.n_rows() {
            let (start, end) = (batch.indptr[r] as usize, batch.indptr[r + 1] as usize);
            let one = Rows::Csr {
                indptr: &[0, (end - start) as i64],
                indices: &chunk.indices[start..end],
                data: &chunk.data[start..end],
                n_cols,
            };
            let outcome = self
                .model
                .learn(&one, Tasks::Ids(&ids[r..=r]), Labels::Ints(&batch.labels[r..=r]));
            match outcome {
                Ok(s) => scores.extend(s),
                Err(Error::Interrupted { .. }) => {
                    keep[r..].fill(false);
                    interrupted = true;
                    break;
                }
                Err(e) if is_row_error(&e) => {
                    let refused = ReadError {
                        path: path.to_string(),
                        line: Some(chunk.lines[r]),
                        message: e.to_string(),
                    };
                    if !skip {
                        return Err(refused.into());
                    }
                    keep[r] = false;
                    self.skip(1, Some(&refused.to_string()));
                }
                Err(e) => return Err(e.into()),
            }
        }
        keep_rows(chunk, &keep);
        Ok((scores, interrupted, warning))
    }
}

/// What [`predict`] counted.
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

/// Predicts every example of `source` read with `opts` by `model` (no update); each chunk goes
/// to `sink`. A task the model never saw is refused (naming the file, line and the model's
/// tasks).
pub fn predict(
    model: &Model,
    source: Source,
    opts: &Options,
    sink: &mut dyn ChunkSink,
) -> Result<PredictSummary, StreamError> {
    let Some(book) = model.book() else {
        return Err(StreamError::Refused("the model was never trained".into()));
    };
    let path = source.name().to_string();
    let mut feed = Feed::new(source, opts);
    let mut tasks: Vec<Option<TaskId>> = Vec::new();
    let mut names: Vec<String> = Vec::new();
    let mut columns: Vec<String> = Vec::new();
    let mut summary = PredictSummary::default();
    let form = model.label_form();
    while let Some(item) = feed.next() {
        let chunk = item?;
        if !chunk.feature_columns.is_empty() {
            columns.clone_from(&chunk.feature_columns);
        }
        summary.n_skipped += chunk.n_skipped;
        if summary.first_skipped.is_none() {
            summary.first_skipped.clone_from(&chunk.first_skipped);
        }
        for name in &chunk.new_tasks {
            let id = file_task(model, name);
            tasks.push(model.task_index(id.as_ref()).is_some().then_some(id));
            names.push(name.clone());
        }
        if chunk.n_rows() == 0 {
            feed.give_back(chunk);
            continue;
        }
        let width = if opts.format == Format::Csv {
            columns.len()
        } else {
            book.n_features_in()
        };
        if width != book.n_features_in() {
            return Err(StreamError::Refused(format!(
                "{path}: {width} feature columns, the model was trained on {}",
                book.n_features_in()
            )));
        }
        let mut ids = Vec::with_capacity(chunk.n_rows());
        for (r, &t) in chunk.task_ids.iter().enumerate() {
            match &tasks[t as usize] {
                Some(id) => ids.push(id.as_ref()),
                None => {
                    return Err(StreamError::Refused(unknown_task_message(
                        &path,
                        chunk.lines[r],
                        &names[t as usize],
                        model,
                    )))
                }
            }
        }
        let batch = Batch::of(&chunk);
        let rows = rows_of(&chunk, &batch.indptr, width);
        let scores = model.decision(&rows, Tasks::Ids(&ids))?;
        summary.n += scores.len() as u64;
        for (&label, &score) in chunk.labels.iter().zip(&scores) {
            if !label.is_nan() {
                summary.labelled += 1;
                summary.mistakes += u64::from((label > 0.0) != (score >= 0.0));
            }
        }
        sink.chunk(&chunk, &scores, form)?;
        feed.give_back(chunk);
    }
    Ok(summary)
}

/// The message for a task the model never saw, as `omtl predict` words it.
pub fn unknown_task_message(path: &str, line: u64, name: &str, model: &Model) -> String {
    let ids = model.book().map(|b| b.task_ids()).unwrap_or_default();
    let mut shown: Vec<String> = ids
        .iter()
        .take(10)
        .map(|id| match id {
            TaskId::Int(i) => i.to_string(),
            TaskId::Str(s) => s.to_string(),
        })
        .collect();
    if ids.len() > 10 {
        shown.push("...".into());
    }
    format!(
        "{path}, line {line}: task {}, which the model never saw (its {} tasks: {})",
        python_repr(name),
        ids.len(),
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
