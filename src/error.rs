//! One error type for the whole crate. Each variant carries the offending value so that the
//! message a user sees (in Rust or, through the binding, in Python) says what was wrong.

use thiserror::Error;

/// Everything that can go wrong in the crate. A call that returns an error leaves the model as
/// it was (the one exception, [`Error::Interrupted`], says which rows were kept).
#[derive(Debug, Error, Clone, PartialEq)]
pub enum Error {
    /// A hyper-parameter or argument out of its range (`name` is the parameter as the user
    /// spells it; `reason` says what was expected).
    #[error("invalid parameter `{name}`: {reason}")]
    InvalidParameter {
        /// The parameter's name.
        name: &'static str,
        /// What was wrong with its value.
        reason: String,
    },

    /// An argument of the wrong type (a string where a number is needed, a label of a kind
    /// the model does not take): a `TypeError` in Python.
    #[error("{reason}")]
    WrongType {
        /// The argument's name.
        name: &'static str,
        /// What was expected and what came.
        reason: String,
    },

    /// A batch whose number of columns differs from the model's number of features.
    #[error("X has {got} features but the model was fitted with {expected}")]
    FeatureMismatch {
        /// The model's number of features.
        expected: usize,
        /// The batch's number of columns.
        got: usize,
    },

    /// A per-row array (tasks, labels, rounds) whose length is not the number of rows.
    #[error("length mismatch: X has {rows} rows but {what} has {len}")]
    LengthMismatch {
        /// The number of rows of the batch.
        rows: usize,
        /// Which array (`"tasks"`, `"y"`, …).
        what: &'static str,
        /// Its length.
        len: usize,
    },

    /// A task id outside `[0, n_tasks)`.
    #[error("task id {task} at row {row} is outside [0, {n_tasks})")]
    UnknownTask {
        /// The row (0-based, within the batch).
        row: usize,
        /// The task id given.
        task: i64,
        /// The model's number of tasks.
        n_tasks: usize,
    },

    /// A label other than -1 or +1.
    #[error("label {value} at row {row} is not -1 or +1")]
    InvalidLabel {
        /// The row (0-based, within the batch).
        row: usize,
        /// The label given.
        value: f64,
    },

    /// A NaN or infinite feature value.
    #[error("X contains NaN or infinity: value {value} at row {row}")]
    NonFinite {
        /// The row (0-based, within the batch).
        row: usize,
        /// The offending value.
        value: f64,
    },

    /// A finite row whose squared norm or kernel value overflows `f64`.
    #[error("row {row} overflows: {reason}")]
    RowOverflow {
        /// The row (0-based, within the batch).
        row: usize,
        /// What overflowed.
        reason: String,
    },

    /// A CSR row whose indices are unsorted, duplicated or out of range, or whose `indptr` is
    /// not monotone.
    #[error("sparse row {row} is malformed: {reason}")]
    MalformedSparse {
        /// The row (0-based, within the batch).
        row: usize,
        /// What is malformed.
        reason: String,
    },

    /// A task graph or task-relation matrix that is not valid (asymmetric, negative weights,
    /// not positive definite, wrong size).
    #[error("invalid task relation: {0}")]
    InvalidTaskRelation(String),

    /// A numerical failure (a non-finite step or result, a factorization that failed); the
    /// update was not applied.
    #[error("numerical failure: {0}")]
    Numerical(String),

    /// A buffer too large to allocate, reported before allocating: `name=value` is the
    /// hyper-parameter that sized it.
    #[error("{name}={value} needs {bytes} for {what}: {reason}")]
    Memory {
        /// The parameter that sized the buffer.
        name: &'static str,
        /// Its value.
        value: u128,
        /// The size asked for, human-readable ("240 GB").
        bytes: String,
        /// What the buffer is for.
        what: String,
        /// Why it cannot be had (over the memory available, or the allocator refused).
        reason: String,
    },

    /// An id the pending store does not hold ([`crate::model::Model::learn_label`]): never
    /// remembered, learned already, or evicted or dropped as expired. A `KeyError` in Python.
    #[error("no pending event has the id {0:?} (never remembered, learned already, or evicted or dropped as expired)")]
    UnknownId(String),

    /// A saved state that does not decode or fails its consistency checks
    /// ([`crate::state::decode`]).
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
    File {
        /// The file's path, as given.
        path: String,
        /// What the operating system said.
        reason: String,
    },

    /// A call stopped by the caller's interrupt hook ([`crate::interrupt`]). A batch call keeps
    /// the rows it completed: `scores` holds their pre-update scores (its length is the number of
    /// rows learned).
    #[error("interrupted after {} rows", scores.len())]
    Interrupted {
        /// The pre-update scores of the rows learned before the interrupt.
        scores: Vec<f64>,
    },
}

/// The crate's result type.
pub type Result<T> = std::result::Result<T, Error>;

pub(crate) fn invalid(name: &'static str, reason: impl Into<String>) -> Error {
    Error::InvalidParameter {
        name,
        reason: reason.into(),
    }
}
