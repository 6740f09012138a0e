//! # omtl — online multitask binary classification under a memory budget
//!
//! A pure-Rust engine (no Python needed; the `python` feature adds the PyO3 binding) for
//! learning many related binary classifiers at once on a stream:
//!
//! - [`kernel`]: base kernels K' (linear, polynomial, Gaussian), task kernels T built from a
//!   task graph (T = (I + L)^{-1}), and the multitask kernel T_ij K'(x, x');
//! - [`learner`]: the online learners, all behind the [`learner::OnlineLearner`] trait, and the
//!   batch protocol ([`learner::learn`], [`learner::decision`]);
//! - [`linalg`]: small dense linear algebra; [`rng`]: the pinned SplitMix64 generator;
//! - [`hashing`]: named features hashed into columns (scikit-learn's `FeatureHasher` mapping);
//! - [`io`]: streaming readers for svmlight, Vowpal Wabbit's text format and CSV (gzip, stdin);
//! - [`state`]: saving and restoring a model's state, checked (a state file is untrusted input).
//!
//! The specification every formula follows is `ALGORITHMS.md` (its section numbers are cited
//! in the module headers).
//!
//! ```
//! use omtl::data::Rows;
//! use omtl::kernel::{BaseKernel, TaskKernel};
//! use omtl::learner::{learn, MTPerceptron, OnlineLearner};
//!
//! let x = [1.0, 0.0, 0.0, 1.0, -1.0, 0.5];
//! let rows = Rows::Dense { data: &x, n_rows: 3, n_cols: 2 };
//! let mut model = MTPerceptron::new(TaskKernel::complete(2)?, BaseKernel::rbf(0.5)?, 2, false)?;
//! let scores = learn(&mut model, &rows, &[0, 1, 0], &[1.0, -1.0, -1.0])?;
//! assert_eq!(scores[0], 0.0); // the first prediction is made by the empty model
//! assert_eq!(model.n_active(), 2); // the third example was already classified correctly
//! # Ok::<(), omtl::Error>(())
//! ```

#![warn(missing_docs)]

pub(crate) mod alloc;
pub mod data;
pub mod error;
#[cfg(any(test, feature = "python"))] // the binding's memory-floor measurement
pub(crate) mod floors;
pub mod hashing;
pub mod interrupt;
pub mod io;
pub mod kernel;
pub mod learner;
pub(crate) mod linalg;
pub mod rng;
pub(crate) mod simd;
pub mod state;

/// The internals the criterion benches time on their own (feature `bench`; not a stable API).
#[cfg(feature = "bench")]
pub mod bench {
    pub use crate::linalg::{eigen_update, svt};
}

#[cfg(feature = "python")]
mod python;

pub use error::{Error, Result};
