//! The `.omtl` model file: a versioned, checksummed format that runs no code, read and written
//! alike by Rust, Python (`omtl.save`/`omtl.load`) and the command line.
//!
//! A file is, in order:
//!
//! | field            | bytes | content                                                  |
//! |------------------|-------|----------------------------------------------------------|
//! | [`MAGIC`]        | 9     | `\x89OMTL\r\n\x1a\n`                                     |
//! | [`FORMAT_VERSION`] | 4   | little-endian                                            |
//! | header length    | 8     | little-endian, then the header: UTF-8 JSON ([`Header`])  |
//! | state length     | 8     | little-endian, then the native state ([`AnyLearner::to_bytes`]; empty for an unfitted model) |
//! | checksum         | 32    | SHA-256 of everything before it                          |
//!
//! The header names the estimator class (one of [`CLASSES`]), holds its hyper-parameters as
//! JSON (a task graph as its kind and arrays) and the bookkeeping of a fitted model ([`Fitted`]:
//! task labels, classes, counts, `n_features_in`). Reading trusts none of it: the checksum and
//! every length are checked before anything is allocated, the header is checked field by field,
//! the native state is decoded within its own size and checked invariant by invariant, and it
//! must be the learner the class builds and agree with the bookkeeping. Anything else is an
//! [`Error::ModelFile`]. (Python also builds the estimator from the hyper-parameters and checks
//! that it builds the same learner.)
//!
//! ```
//! use omtl::data::Rows;
//! use omtl::kernel::{BaseKernel, TaskKernel};
//! use omtl::learner::{Build, MTRBPParams, Setting, MTRBP};
//! use omtl::model_file::{ModelFile, TaskId};
//!
//! let task_kernel = TaskKernel::complete(2)?;
//! let setting = Setting::over(&task_kernel, Some(BaseKernel::rbf(0.5)?), 2, false);
//! let mut model = ModelFile::new(MTRBP::build(&MTRBPParams::default(), &setting)?.into())?;
//! let x = [1.0, 0.0, 0.0, 1.0, 1.0, 0.2];
//! let rows = Rows::Dense { data: &x, n_rows: 3, n_cols: 2 };
//! let tasks = [TaskId::Int(0), TaskId::Int(1), TaskId::Int(0)];
//! model.learn(&rows, &tasks, &[1.0, -1.0, 1.0])?;
//! let restored = ModelFile::from_bytes(&model.to_bytes()?)?;
//! assert_eq!(restored.decision(&rows, &tasks)?, model.decision(&rows, &tasks)?);
//! # Ok::<(), omtl::Error>(())
//! ```

mod file;
mod header;
mod params;

use std::io::Read;

use sha2::{Digest, Sha256};

pub use file::{load, read_file, save};
pub use header::{ClassLabel, Fitted, Header, LabelForm, TaskId, GRAPH_KEY, GRAPH_KINDS};
pub use params::{estimator_of, CLASSES};

use crate::data::Rows;
use crate::error::{Error, Result};
use crate::learner::{self, OnlineLearner};
use crate::model::{AnyLearner, STATE_VERSION};
use crate::state::CheckState;

/// The first bytes of every model file (PNG-style: a non-ASCII byte, the name, line endings and
/// an end-of-file byte, so that text-mode transfers and truncation are caught).
pub const MAGIC: &[u8; 9] = b"\x89OMTL\r\n\x1a\n";
/// The version of the framing and header this crate reads and writes.
pub const FORMAT_VERSION: u32 = 1;
/// The length of the SHA-256 checksum that ends a file.
pub const CHECKSUM_LEN: usize = 32;
/// Magic, format version and header length: the bytes before the header.
const FIXED: usize = MAGIC.len() + 4 + 8;

/// The sizes a reader accepts (and so a writer may produce).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The largest header, in bytes (a header holds parameters and per-task counts, never model
    /// data). Default 64 MiB.
    pub max_header: u64,
    /// The largest dense task kernel, in bytes, an unfitted model's task graph may name (a
    /// fitted model's file holds that kernel, so its own size bounds it). Default 64 MiB
    /// (k = 2,896 tasks).
    pub max_dense_graph: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_header: 1 << 26,
            max_dense_graph: 1 << 26,
        }
    }
}

/// An [`Error::ModelFile`].
pub(crate) fn fail(msg: impl Into<String>) -> Error {
    Error::ModelFile(msg.into())
}

fn read_u64(data: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(data[at..at + 8].try_into().expect("8 bytes"))
}

/// How long a model file is, as far as its first bytes (`prefix`) tell: what a reader must
/// read before it knows more, or the whole file's length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameLength {
    /// The file holds at least this many bytes; read up to here to learn more.
    AtLeast(u64),
    /// The file holds exactly this many bytes.
    Exactly(u64),
}

impl FrameLength {
    /// The bytes to read up to.
    pub fn bytes(self) -> u64 {
        match self {
            FrameLength::AtLeast(n) | FrameLength::Exactly(n) => n,
        }
    }
}

/// The length the first bytes of a model file (`prefix`, any length) give it, the magic number,
/// version and lengths checked as soon as `prefix` holds them, and against the file's `size` when
/// it is known. A reader calls this as it reads, so it never reads past what the lengths say, nor
/// anything of a file whose first bytes are not a model file's ([`read_from`]).
pub fn frame_length(prefix: &[u8], size: Option<u64>, limits: &Limits) -> Result<FrameLength> {
    let magic = prefix.len().min(MAGIC.len());
    if prefix[..magic] != MAGIC[..magic] {
        return Err(fail("wrong magic number"));
    }
    let at_most = |needed: u64| match size {
        Some(size) if needed > size => Err(fail(format!(
            "the file is truncated or its lengths are wrong: it holds {size} bytes, its lengths say at least {needed}"
        ))),
        _ => Ok(()),
    };
    if prefix.len() < FIXED {
        if size.is_some_and(|size| size < (FIXED + 8 + CHECKSUM_LEN) as u64) {
            return Err(fail("wrong magic number or too short"));
        }
        return Ok(FrameLength::AtLeast(FIXED as u64));
    }
    let version = u32::from_le_bytes(prefix[MAGIC.len()..MAGIC.len() + 4].try_into().expect("4 bytes"));
    if version != FORMAT_VERSION {
        return Err(fail(format!(
            "format version {version}, this omtl reads version {FORMAT_VERSION}"
        )));
    }
    let head_len = read_u64(prefix, MAGIC.len() + 4);
    if head_len > limits.max_header {
        return Err(fail(format!(
            "header length {head_len} is over the {} bytes a header may hold",
            limits.max_header
        )));
    }
    let state_at = FIXED as u64 + head_len;
    at_most(state_at + 8 + CHECKSUM_LEN as u64)?;
    if (prefix.len() as u64) < state_at + 8 {
        return Ok(FrameLength::AtLeast(state_at + 8));
    }
    let state_len = read_u64(prefix, state_at as usize);
    let total = (state_at + 8)
        .checked_add(state_len)
        .and_then(|n| n.checked_add(CHECKSUM_LEN as u64))
        .ok_or_else(|| fail(format!("state length {state_len} bytes is more than a file holds")))?;
    at_most(total)?;
    if let Some(size) = size.filter(|&size| size > total) {
        return Err(fail(format!(
            "the file holds {size} bytes, its lengths say {total}: bytes after the checksum"
        )));
    }
    Ok(FrameLength::Exactly(total))
}

/// Reads one model file's bytes from `reader` (`size`: the file's length, when known), checking
/// the magic number and lengths from the first bytes before reading more ([`frame_length`]), and
/// reading no further than the lengths say: a stream of zeros is refused after its first bytes, a
/// length beyond `size` before the state is read, and the buffer grows only with bytes read. The
/// bytes are not otherwise checked: [`ModelFile::decode`] does that.
pub fn read_from(mut reader: impl Read, size: Option<u64>, limits: &Limits) -> Result<Vec<u8>> {
    let io = |e: std::io::Error| Error::File {
        path: "model file".into(),
        reason: e.to_string(),
    };
    let mut data = Vec::new();
    let total = loop {
        let length = frame_length(&data, size, limits)?;
        let wanted = length.bytes() - data.len() as u64;
        if size.is_some() {
            // within the file's size: one allocation
            data.try_reserve_exact(usize::try_from(wanted).unwrap_or(usize::MAX))
                .map_err(|e| fail(format!("{wanted} bytes: {e}")))?;
        }
        let got = (&mut reader).take(wanted).read_to_end(&mut data).map_err(io)?;
        if (got as u64) < wanted {
            return Err(fail(format!(
                "the file is truncated: it ends after {} bytes, its lengths say at least {}",
                data.len(),
                length.bytes()
            )));
        }
        if let FrameLength::Exactly(total) = length {
            break total;
        }
    };
    let mut after = Vec::new();
    if reader.take(1).read_to_end(&mut after).map_err(io)? > 0 {
        return Err(fail(format!(
            "its lengths say {total} bytes, the file goes on: bytes after the checksum"
        )));
    }
    Ok(data)
}

/// Checks a file's framing and checksum; its header's JSON text and the native state's bytes.
pub fn split<'a>(data: &'a [u8], limits: &Limits) -> Result<(&'a [u8], &'a [u8])> {
    if data.len() < FIXED + 8 + CHECKSUM_LEN || &data[..MAGIC.len()] != MAGIC {
        return Err(fail("wrong magic number or too short"));
    }
    let version = u32::from_le_bytes(data[MAGIC.len()..MAGIC.len() + 4].try_into().expect("4 bytes"));
    if version != FORMAT_VERSION {
        return Err(fail(format!(
            "format version {version}, this omtl reads version {FORMAT_VERSION}"
        )));
    }
    let (body, checksum) = data.split_at(data.len() - CHECKSUM_LEN);
    if Sha256::digest(body).as_slice() != checksum {
        return Err(fail("checksum mismatch (the file is corrupted or truncated)"));
    }
    let head_len = read_u64(body, MAGIC.len() + 4);
    if head_len > limits.max_header.min((body.len() - FIXED - 8) as u64) {
        return Err(fail(format!("header length {head_len} does not fit the file")));
    }
    let state_at = FIXED + head_len as usize;
    let state_len = read_u64(body, state_at);
    if state_len != (body.len() - state_at - 8) as u64 {
        return Err(fail(format!("state length {state_len} does not match the file")));
    }
    Ok((&body[FIXED..state_at], &body[state_at + 8..]))
}

/// The header of a file, framing and checksum checked; the model itself is not decoded.
pub fn read_header(data: &[u8], limits: &Limits) -> Result<Header> {
    let (head, state) = split(data, limits)?;
    Header::parse(head, state.len(), limits)
}

/// A file's bytes from its header's JSON text and its native state (`None` for an unfitted
/// model), checked as a reader checks them: a file this writes is one [`ModelFile::decode`]
/// accepts.
pub fn encode(header_text: &str, learner: Option<&AnyLearner>, limits: &Limits) -> Result<Vec<u8>> {
    let cannot = |e: Error| match e {
        Error::ModelFile(msg) | Error::State(msg) => Error::CannotSave(msg),
        other => other,
    };
    let state = match learner {
        Some(l) => {
            l.check_state().map_err(cannot)?;
            l.to_bytes()?
        }
        None => Vec::new(),
    };
    if header_text.len() as u64 > limits.max_header {
        return Err(Error::CannotSave(format!(
            "its header (parameters, per-task counts and task labels) takes {} bytes, over the {} a model file may \
             hold; pickle the model instead",
            header_text.len(),
            limits.max_header
        )));
    }
    let header = Header::parse(header_text.as_bytes(), state.len(), limits).map_err(|e| match (e, learner) {
        (Error::ModelFile(msg), None) => Error::CannotSave(format!("{msg}; fit it first or pickle it")),
        (e, _) => cannot(e),
    })?;
    match learner {
        Some(l) => header.check_against(l).map_err(cannot)?,
        None if header.fitted.is_some() => {
            return Err(Error::CannotSave("a fitted header without its native state".into()))
        }
        None => {}
    }
    let mut data = Vec::with_capacity(FIXED + header_text.len() + 8 + state.len() + CHECKSUM_LEN);
    data.extend_from_slice(MAGIC);
    data.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    data.extend_from_slice(&(header_text.len() as u64).to_le_bytes());
    data.extend_from_slice(header_text.as_bytes());
    data.extend_from_slice(&(state.len() as u64).to_le_bytes());
    data.extend_from_slice(&state);
    let checksum = Sha256::digest(&data);
    data.extend_from_slice(&checksum);
    Ok(data)
}

/// A model read from (or to be written to) a model file: its header and, when fitted, its
/// native learner. A fitted model's header always agrees with its learner.
#[derive(Debug, Clone)]
pub struct ModelFile {
    header: Header,
    learner: Option<AnyLearner>,
}

impl ModelFile {
    /// A model for `learner`, which has learned nothing yet (learn through [`ModelFile::learn`],
    /// which keeps the counts a file holds). The class and hyper-parameters are those that build
    /// the learner ([`estimator_of`]: MTLinear, MTRBP, MTFORG). Tasks are named by their number
    /// `0..n_tasks`, or, on an open-ended task set (the open complete graph), by labels given on
    /// first use.
    pub fn new(learner: AnyLearner) -> Result<Self> {
        Self::with_labels(learner, false)
    }

    /// [`ModelFile::new`] for a model whose tasks are named by labels (strings or integers), each
    /// new label taking the next task in first-seen order (growing an open-ended task set).
    pub fn named(learner: AnyLearner) -> Result<Self> {
        Self::with_labels(learner, true)
    }

    fn with_labels(learner: AnyLearner, named: bool) -> Result<Self> {
        if learner.n_updates() > 0 {
            return Err(Error::CannotSave(
                "ModelFile::new takes a learner that has learned nothing yet (its counts are not known)".into(),
            ));
        }
        let (class, params) = estimator_of(&learner)?;
        let mut header = Header {
            class: class.into(),
            state_version: STATE_VERSION,
            params,
            fitted: None,
            metadata: None,
        };
        let labels = (named || header.open_ended()).then(Vec::new);
        header.fitted = Some(Fitted::new(&learner, labels));
        Ok(ModelFile {
            header,
            learner: Some(learner),
        })
    }

    /// A model from a file's bytes, checked as the module documentation says, with `limits`.
    pub fn decode(data: &[u8], limits: &Limits) -> Result<Self> {
        let (head, state) = split(data, limits)?;
        let header = Header::parse(head, state.len(), limits)?;
        let learner = match (&header.fitted, state.is_empty()) {
            (None, true) => None,
            (None, false) => return Err(fail("an unfitted model with a native state")),
            (Some(_), _) => {
                let learner = AnyLearner::from_bytes(state).map_err(|e| fail(e.to_string()))?;
                header.check_against(&learner)?;
                Some(learner)
            }
        };
        Ok(ModelFile { header, learner })
    }

    /// [`ModelFile::decode`] with the default [`Limits`].
    pub fn from_bytes(data: &[u8]) -> Result<Self> {
        Self::decode(data, &Limits::default())
    }

    /// The file's bytes (the default [`Limits`] apply).
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        encode(&self.header.to_json()?, self.learner.as_ref(), &Limits::default())
    }

    /// The header: class, hyper-parameters, bookkeeping, metadata.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// The JSON object stored with the model (`omtl learn --save` keeps its input format there).
    pub fn metadata_mut(&mut self) -> &mut Option<serde_json::Map<String, serde_json::Value>> {
        &mut self.header.metadata
    }

    /// The native learner; `None` for an unfitted model.
    pub fn learner(&self) -> Option<&AnyLearner> {
        self.learner.as_ref()
    }

    /// The header and the learner.
    pub fn into_parts(self) -> (Header, Option<AnyLearner>) {
        (self.header, self.learner)
    }

    /// The bookkeeping and learner of a fitted model, or an error naming `what` was asked.
    fn fitted(&self, what: &str) -> Result<(&Fitted, &AnyLearner)> {
        match (&self.header.fitted, &self.learner) {
            (Some(f), Some(l)) => Ok((f, l)),
            _ => Err(crate::error::invalid("model", format!("{what} needs a fitted model"))),
        }
    }

    /// The task number of task id `id`, if the model knows the task.
    pub fn task_index(&self, id: &TaskId) -> Option<usize> {
        let (fitted, learner) = self.fitted("task_index").ok()?;
        match (&fitted.task_labels, id) {
            (Some(labels), id) => labels.iter().position(|l| l == id),
            (None, TaskId::Int(i)) => usize::try_from(*i).ok().filter(|&i| i < learner.n_tasks()),
            (None, TaskId::Str(_)) => None,
        }
    }

    /// The classes `(negative, positive)` predictions are expressed in.
    pub fn classes(&self) -> Option<&LabelForm> {
        self.header.fitted.as_ref().map(|f| &f.label_form)
    }

    fn task_numbers(&self, tasks: &[TaskId]) -> Result<Vec<i64>> {
        tasks
            .iter()
            .enumerate()
            .map(|(row, id)| {
                self.task_index(id)
                    .map(|t| t as i64)
                    .ok_or_else(|| crate::error::invalid("tasks", format!("unknown task {id:?} at row {row}")))
            })
            .collect()
    }

    /// The scores of `rows` in the tasks named by `tasks` (the model is unchanged).
    pub fn decision(&self, rows: &Rows, tasks: &[TaskId]) -> Result<Vec<f64>> {
        let (_, learner) = self.fitted("decision")?;
        learner::decision(learner, rows, &self.task_numbers(tasks)?)
    }

    /// The predicted labels (±1: `score >= 0` is +1) of `rows` in the tasks named by `tasks`.
    pub fn predict(&self, rows: &Rows, tasks: &[TaskId]) -> Result<Vec<f64>> {
        Ok(self
            .decision(rows, tasks)?
            .into_iter()
            .map(|s| if s >= 0.0 { 1.0 } else { -1.0 })
            .collect())
    }

    /// Learns `rows` (labels `y` ±1) in the tasks named by `tasks`, online, atomically; the
    /// pre-update scores. A model named by labels takes new labels while it has tasks without
    /// one, and grows by a task per new label when its task set is open-ended.
    pub fn learn(&mut self, rows: &Rows, tasks: &[TaskId], y: &[f64]) -> Result<Vec<f64>> {
        let open_ended = self.header.open_ended();
        let (fitted, learner) = match (&mut self.header.fitted, &mut self.learner) {
            (Some(f), Some(l)) => (f, l),
            _ => {
                return Err(crate::error::invalid(
                    "model",
                    "learn needs a model built by ModelFile::new",
                ))
            }
        };
        let mut labels = fitted.task_labels.clone();
        let numbers: Vec<i64> = match &mut labels {
            Some(labels) => tasks
                .iter()
                .map(|id| {
                    labels.iter().position(|l| l == id).unwrap_or_else(|| {
                        labels.push(id.clone());
                        labels.len() - 1
                    }) as i64
                })
                .collect(),
            None => tasks
                .iter()
                .enumerate()
                .map(|(row, id)| match id {
                    TaskId::Int(i) => Ok(*i),
                    TaskId::Str(s) => Err(crate::error::invalid(
                        "tasks",
                        format!("task {s:?} at row {row}: this model names its tasks by number"),
                    )),
                })
                .collect::<Result<_>>()?,
        };
        let n_tasks = learner.n_tasks();
        let n_new = match &labels {
            Some(l) if l.len() > n_tasks && open_ended => l.len() - n_tasks,
            _ => 0,
        };
        let scores = learner::learn_grown(learner, n_new, rows, &numbers, y)?;
        fitted.seen_per_task.resize(learner.n_tasks(), 0);
        for (&t, (&s, &label)) in numbers.iter().zip(scores.iter().zip(y)) {
            fitted.seen_per_task[t as usize] += 1;
            fitted.n_mistakes += u64::from((if s >= 0.0 { 1.0 } else { -1.0 }) != label);
        }
        fitted.n_seen += numbers.len() as u64;
        fitted.task_labels = labels;
        Ok(scores)
    }
}
