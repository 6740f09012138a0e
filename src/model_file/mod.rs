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
//! | pending length   | 8     | version 2 only: little-endian, then the pending events ([`pending`]) |
//! | checksum         | 32    | SHA-256 of everything before it                          |
//!
//! A model with no pending events ([`crate::model::Model::remember`]) is written as version 1,
//! which has no pending section (and which readers of version 1 read); one with pending events
//! as version 2. This crate reads both.
//!
//! The header names the estimator class (one of [`crate::model::estimator::classes`]), holds its hyper-parameters as
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
//! use omtl::learner::{Build, KernelSetting, MTRBPParams, MTRBP};
//! use omtl::model::{Labels, Model, Tasks};
//!
//! let task_kernel = TaskKernel::complete(2)?;
//! let setting = KernelSetting::new(&task_kernel, BaseKernel::rbf(0.5)?, 2);
//! let mut model = Model::from_learner(MTRBP::build(&MTRBPParams::default(), &setting)?.into(), false)?;
//! let x = [1.0, 0.0, 0.0, 1.0, 1.0, 0.2];
//! let rows = Rows::Dense { data: &x, n_rows: 3, n_cols: 2 };
//! model.learn(&rows, Tasks::Ints(&[0, 1, 0]), Labels::Ints(&[1, -1, 1]))?;
//! let restored = Model::from_bytes(&model.to_bytes()?)?;
//! assert_eq!(restored.decision(&rows, Tasks::Ints(&[0, 1, 0]))?, model.decision(&rows, Tasks::Ints(&[0, 1, 0]))?);
//! # Ok::<(), omtl::Error>(())
//! ```

mod file;
mod header;
pub mod pending;

use std::io::Read;

use sha2::{Digest, Sha256};

pub use crate::model::estimator::{GRAPH_KEY, GRAPH_KINDS};
pub use crate::model::{ClassLabel, LabelForm, TaskId};
pub(crate) use file::create_temporary;
pub use file::{load, read_file, save};
pub use header::{Fitted, Header};

use crate::error::{Error, Result};
use crate::model::{AnyLearner, Estimator, Model, PendingStore, STATE_VERSION};
use crate::state::CheckState;

/// The first bytes of every model file (PNG-style: a non-ASCII byte, the name, line endings and
/// an end-of-file byte, so that text-mode transfers and truncation are caught).
pub const MAGIC: &[u8; 9] = b"\x89OMTL\r\n\x1a\n";
/// The version of the framing and header this crate writes for a model without pending events
/// (and reads).
pub const FORMAT_VERSION: u32 = 1;
/// The version with a pending section, written for a model with pending events (and read).
pub const FORMAT_VERSION_PENDING: u32 = 2;
/// The length of the SHA-256 checksum that ends a file.
pub const CHECKSUM_LEN: usize = 32;
/// Magic, format version and header length: the bytes before the header.
const FIXED: usize = MAGIC.len() + 4 + 8;

/// A label form from its JSON text in a header (`"pm1"`, `"01"`, `"bool"` or a pair of labels).
pub fn parse_label_form(text: &str) -> Result<LabelForm> {
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|e| Error::ModelFile(format!("a label form is not JSON ({e})")))?;
    header::label_form(&value)
}

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
            max_dense_graph: crate::model::estimator::MAX_DENSE_GRAPH_BYTES,
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

/// The sections of a model file.
#[derive(Debug, Clone, Copy)]
pub struct Sections<'a> {
    /// The header's JSON text.
    pub header: &'a [u8],
    /// The native state's bytes (empty for an unfitted model).
    pub state: &'a [u8],
    /// The pending section's bytes (version 2 files).
    pub pending: Option<&'a [u8]>,
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
    if version != FORMAT_VERSION && version != FORMAT_VERSION_PENDING {
        return Err(fail(format!(
            "format version {version}, this omtl reads versions {FORMAT_VERSION} and {FORMAT_VERSION_PENDING}"
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
    let state_end = (state_at + 8)
        .checked_add(state_len)
        .ok_or_else(|| fail(format!("state length {state_len} bytes is more than a file holds")))?;
    let mut end = state_end;
    if version == FORMAT_VERSION_PENDING {
        // the pending section's length follows the state
        at_most(state_end.saturating_add(8 + CHECKSUM_LEN as u64))?;
        if (prefix.len() as u64) < state_end + 8 {
            return Ok(FrameLength::AtLeast(state_end + 8));
        }
        let pending_len = read_u64(prefix, state_end as usize);
        end = (state_end + 8)
            .checked_add(pending_len)
            .ok_or_else(|| fail(format!("pending length {pending_len} bytes is more than a file holds")))?;
    }
    let total = end
        .checked_add(CHECKSUM_LEN as u64)
        .ok_or_else(|| fail("the lengths are more than a file holds"))?;
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
/// bytes are not otherwise checked: [`Model::decode`] does that.
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
    let sections = split_sections(data, limits)?;
    Ok((sections.header, sections.state))
}

/// Checks a file's framing and checksum; its sections.
pub fn split_sections<'a>(data: &'a [u8], limits: &Limits) -> Result<Sections<'a>> {
    if data.len() < FIXED + 8 + CHECKSUM_LEN || &data[..MAGIC.len()] != MAGIC {
        return Err(fail("wrong magic number or too short"));
    }
    let version = u32::from_le_bytes(data[MAGIC.len()..MAGIC.len() + 4].try_into().expect("4 bytes"));
    if version != FORMAT_VERSION && version != FORMAT_VERSION_PENDING {
        return Err(fail(format!(
            "format version {version}, this omtl reads versions {FORMAT_VERSION} and {FORMAT_VERSION_PENDING}"
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
    let left = (body.len() - state_at - 8) as u64;
    let header = &body[FIXED..state_at];
    if version == FORMAT_VERSION {
        if state_len != left {
            return Err(fail(format!("state length {state_len} does not match the file")));
        }
        let state = &body[state_at + 8..];
        return Ok(Sections {
            header,
            state,
            pending: None,
        });
    }
    if left < 8 || state_len > left - 8 {
        return Err(fail(format!("state length {state_len} does not fit the file")));
    }
    let pending_at = state_at + 8 + state_len as usize;
    let pending_len = read_u64(body, pending_at);
    if pending_len != (body.len() - pending_at - 8) as u64 {
        return Err(fail(format!("pending length {pending_len} does not match the file")));
    }
    Ok(Sections {
        header,
        state: &body[state_at + 8..pending_at],
        pending: Some(&body[pending_at + 8..]),
    })
}

/// The header of a file, framing and checksum checked; the model itself is not decoded.
pub fn read_header(data: &[u8], limits: &Limits) -> Result<Header> {
    let (head, state) = split(data, limits)?;
    Header::parse(head, state.len(), limits)
}

/// A file's bytes from its header's JSON text and its native state (`None` for an unfitted
/// model), checked as a reader checks them: a file this writes is one [`Model::decode`]
/// accepts.
pub fn encode(header_text: &str, learner: Option<&AnyLearner>, limits: &Limits) -> Result<Vec<u8>> {
    encode_with_pending(header_text, learner, &PendingStore::default(), limits)
}

/// [`encode`] with pending events (a version 2 file if there are any).
pub fn encode_with_pending(
    header_text: &str,
    learner: Option<&AnyLearner>,
    pending: &PendingStore,
    limits: &Limits,
) -> Result<Vec<u8>> {
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
    let pending = (!pending.is_empty()).then(|| pending::encode(pending));
    let pending_len = pending.as_ref().map_or(0, |p| 8 + p.len());
    let mut data = Vec::with_capacity(FIXED + header_text.len() + 8 + state.len() + pending_len + CHECKSUM_LEN);
    data.extend_from_slice(MAGIC);
    let version = if pending.is_some() {
        FORMAT_VERSION_PENDING
    } else {
        FORMAT_VERSION
    };
    data.extend_from_slice(&version.to_le_bytes());
    data.extend_from_slice(&(header_text.len() as u64).to_le_bytes());
    data.extend_from_slice(header_text.as_bytes());
    data.extend_from_slice(&(state.len() as u64).to_le_bytes());
    data.extend_from_slice(&state);
    if let Some(p) = &pending {
        data.extend_from_slice(&(p.len() as u64).to_le_bytes());
        data.extend_from_slice(p);
    }
    let checksum = Sha256::digest(&data);
    data.extend_from_slice(&checksum);
    Ok(data)
}

impl Model {
    /// The model from a file's bytes, checked as the module documentation says, with `limits`:
    /// the estimator's parameters too (a class that refuses them refuses the file).
    pub fn decode(data: &[u8], limits: &Limits) -> Result<Self> {
        let Sections { header, state, pending } = split_sections(data, limits)?;
        let header = Header::parse(header, state.len(), limits)?;
        let pending = pending.map(pending::decode).transpose()?;
        let as_file_error = |e: Error| match e {
            Error::ModelFile(m) => Error::ModelFile(m),
            other => fail(other.to_string()),
        };
        let estimator = Estimator::new(&header.class, header.params.clone()).map_err(|e| match e {
            Error::InvalidParameter { name: "params", .. } => {
                fail(format!("the parameters do not match those of {} ({e})", header.class))
            }
            e => fail(format!("invalid parameters for {} ({e})", header.class)),
        })?;
        let mut model = match (header.fitted, state.is_empty()) {
            (None, true) => Model::new(estimator),
            (None, false) => return Err(fail("an unfitted model with a native state")),
            (Some(fitted), _) => {
                let learner = AnyLearner::from_bytes(state).map_err(|e| fail(e.to_string()))?;
                let book = fitted.into_book()?;
                Model::from_parts(estimator, learner, book).map_err(as_file_error)?
            }
        };
        *model.metadata_mut() = header.metadata;
        if let Some(store) = pending {
            model.set_pending_store(store);
        }
        Ok(model)
    }

    /// [`Model::decode`] with the default [`Limits`].
    pub fn from_bytes(data: &[u8]) -> Result<Self> {
        Self::decode(data, &Limits::default())
    }

    /// The model's header: its class, parameters, book and metadata.
    pub fn header(&self) -> Header {
        Header {
            class: self.estimator().class().name.to_owned(),
            state_version: STATE_VERSION,
            params: self.estimator().params().clone(),
            fitted: self.book().map(Fitted::from_book),
            metadata: self.metadata().cloned(),
        }
    }

    /// The file's bytes within `limits`; what a reader would refuse is an [`Error::CannotSave`].
    pub fn encode(&self, limits: &Limits) -> Result<Vec<u8>> {
        encode_with_pending(&self.header().to_json()?, self.learner(), self.pending_store(), limits)
    }

    /// The file's bytes (the default [`Limits`] apply).
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        self.encode(&Limits::default())
    }
}
