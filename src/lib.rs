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
//! - [`state`]: saving and restoring a model's state, checked (a state file is untrusted input);
//! - [`model`]: [`model::AnyLearner`], any learner as one value, and its versioned state bytes;
//! - [`model_file`]: the `.omtl` model file (framing, header, checksum, validation) that Python,
//!   the command line and Rust read and write alike.
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

pub mod alloc;
pub mod data;
pub mod error;
pub mod floors;
pub mod hashing;
pub mod interrupt;
pub mod io;
pub mod kernel;
pub mod learner;
pub mod linalg;
pub mod model;
pub mod model_file;
pub mod rng;
pub mod simd;
pub mod state;

#[cfg(feature = "python")]
mod python;

pub use error::{Error, Result};
