//! One error type for the whole crate. Each variant carries the offending value so that the
//! message a user sees (in Rust or, through the binding, in Python) says what was wrong.

use thiserror::Error;

#[derive(Debug, Error, Clone, PartialEq)]
pub enum Error {
    #[error("invalid parameter `{name}`: {reason}")]
    InvalidParameter { name: &'static str, reason: String },

    #[error("X has {got} features but the model was fitted with {expected}")]
    FeatureMismatch { expected: usize, got: usize },

    #[error("length mismatch: X has {rows} rows but {what} has {len}")]
    LengthMismatch {
        rows: usize,
        what: &'static str,
        len: usize,
    },

    #[error("task id {task} at row {row} is outside [0, {n_tasks})")]
    UnknownTask { row: usize, task: i64, n_tasks: usize },

    #[error("label {value} at row {row} is not -1 or +1")]
    InvalidLabel { row: usize, value: f64 },

    #[error("X contains NaN or infinity: value {value} at row {row}")]
    NonFinite { row: usize, value: f64 },

    #[error("row {row} overflows: {reason}")]
    RowOverflow { row: usize, reason: String },

    #[error("sparse row {row} is malformed: {reason}")]
    MalformedSparse { row: usize, reason: String },

    #[error("invalid task relation: {0}")]
    InvalidTaskRelation(String),

    #[error("numerical failure: {0}")]
    Numerical(String),

    #[error("{name}={value} needs {bytes} for {what}: {reason}")]
    Memory {
        name: &'static str,
        value: u128,
        bytes: String,
        what: String,
        reason: String,
    },

    #[error("cannot restore model state: {0}")]
    State(String),

    /// A model file ([`crate::model_file`]) that is not one: its framing, checksum, header or
    /// the agreement between the header and the native state.
    #[error("not a valid omtl model file: {0}")]
    ModelFile(String),

    /// A model that cannot be written as a model file (what the reader would refuse, or a
    /// learner the format has no estimator parameters for).
    #[error("cannot save this model: {0}")]
    CannotSave(String),

    /// Reading or writing a file failed (the path and the system's reason).
    #[error("{path}: {reason}")]
    File { path: String, reason: String },

    /// A call stopped by the caller's interrupt hook ([`crate::interrupt`]). A batch call keeps
    /// the rows it completed: `scores` holds their pre-update scores (its length is the number of
    /// rows learned).
    #[error("interrupted after {} rows", scores.len())]
    Interrupted { scores: Vec<f64> },
}

pub type Result<T> = std::result::Result<T, Error>;

pub(crate) fn invalid(name: &'static str, reason: impl Into<String>) -> Error {
    Error::InvalidParameter {
        name,
        reason: reason.into(),
    }
}
