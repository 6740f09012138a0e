//! # omtl — online multitask binary classification under a memory budget
//!
//! A pure-Rust engine (no Python needed; the `python` feature adds the PyO3 binding) for
//! learning many related binary classifiers ("tasks") at once on a stream: each example is a
//! row `x`, a task id and a label ±1; a learner scores the row for its task, then learns from
//! the label. Related tasks share what they learn through a *task kernel* T built from a task
//! graph (T = (I + L)⁻¹); the kernel learners combine it with a *base kernel* K' into the
//! multitask kernel T_ij K'(x, x'), and the budget learners keep at most `budget` examples.
//! The specification every formula follows is `docs/ALGORITHMS.md`; its section numbers (§)
//! are cited below and in the module headers.
//!
//! ## The learners
//!
//! All in [`learner`], all implementing [`OnlineLearner`](learner::OnlineLearner) and
//! [`Build`](learner::Build). Every params type implements `Default` with the Python class's
//! defaults.
//!
//! | Learner | Params | Source (§) | What it is |
//! |---|---|---|---|
//! | [`MTPerceptron`] | none ([`NoParams`]) | Cavallanti, Cesa-Bianchi & Gentile 2010 (§3.3) | kernel Perceptron, no budget |
//! | [`MTRBP`] | [`MTRBPParams`] | Cavallanti & Cesa-Bianchi, Alg. 3 (§4.1) | budget Perceptron, random eviction |
//! | [`MTFORG`] | [`MTFORGParams`] | same paper, eq. 3 (§4.2) | self-tuned Forgetron: shrink, then evict the oldest |
//! | [`MTBPRJ`] | [`ProjectronParams`] | same paper, Alg. 1 (§4.4) | Projectron in the multitask space |
//! | [`MTBPRJ2`] | [`MTBPRJ2Params`] | same paper, Alg. 2 (§4.5) | Projectron in the base-kernel space |
//! | [`MTLinear`] | [`MTLinearParams`] | docs/mt_linear.md | fast linear learner, adaptive steps, hashing |
//! | [`Romco`] | [`RomcoParams`] | Yang et al., SDM 2016 (§5) | low-rank + group-sparse, joint rounds |
//! | [`PassiveAggressive`] | [`PassiveAggressiveParams`] | Crammer et al. 2006 (§6.1) | PA-Unique / PA-Global |
//! | [`Omtl`] | [`OmtlParams`] | Dekel, Long & Singer 2006 (§6.2) | shared-loss update per round |
//! | [`Omtrl`] | [`OmtrlParams`] | Saha et al. 2011 (§6.3) | Perceptron with a learned task coupling |
//! | [`CwCol`] | [`CwColParams`] | Li et al. 2011 (§6.4) | confidence-weighted, global plus per-task models |
//! | [`BatchMtl`] | [`BatchMtlParams`] | MTFL, TRML (§6.5) | batch learner retrained periodically |
//!
//! [`MTPerceptron`]: learner::MTPerceptron
//! [`NoParams`]: learner::NoParams
//! [`MTRBP`]: learner::MTRBP
//! [`MTRBPParams`]: learner::MTRBPParams
//! [`MTFORG`]: learner::MTFORG
//! [`MTFORGParams`]: learner::MTFORGParams
//! [`MTBPRJ`]: learner::MTBPRJ
//! [`ProjectronParams`]: learner::ProjectronParams
//! [`MTBPRJ2`]: learner::MTBPRJ2
//! [`MTBPRJ2Params`]: learner::MTBPRJ2Params
//! [`MTLinear`]: learner::MTLinear
//! [`MTLinearParams`]: learner::MTLinearParams
//! [`Romco`]: learner::Romco
//! [`RomcoParams`]: learner::RomcoParams
//! [`PassiveAggressive`]: learner::PassiveAggressive
//! [`PassiveAggressiveParams`]: learner::PassiveAggressiveParams
//! [`Omtl`]: learner::Omtl
//! [`OmtlParams`]: learner::OmtlParams
//! [`Omtrl`]: learner::Omtrl
//! [`OmtrlParams`]: learner::OmtrlParams
//! [`CwCol`]: learner::CwCol
//! [`CwColParams`]: learner::CwColParams
//! [`BatchMtl`]: learner::BatchMtl
//! [`BatchMtlParams`]: learner::BatchMtlParams
//!
//! ## Building one
//!
//! A learner is built from its params and the setting of its family:
//! `L::build(&params, &setting)` ([`Build::build`](learner::Build::build)) checks both (the
//! parameters become [`Checked`](learner::Checked), as linfa's `ParamGuard` has it) and returns
//! an empty model. A linear learner's [`LinearSetting`](learner::LinearSetting) gives the number
//! of tasks and features; MTLinear's [`GraphSetting`](learner::GraphSetting) a task kernel
//! ([`kernel::TaskKernel`]: `complete`, `disconnected`, `from_edges` for a weighted graph, …)
//! and the features; a kernel learner's [`KernelSetting`](learner::KernelSetting) the task
//! kernel, the base kernel ([`kernel::BaseKernel`]: `linear`, `poly`, `rbf`, and `rbf_scaled`:
//! Python's `gamma="scale"`, [`kernel::scale_gamma`] of the first batch) and the features.
//!
//! ## Learning and scoring
//!
//! Rows are a borrowed [`data::Rows`] batch (dense row-major or CSR), task ids `i64` in
//! `0..n_tasks`, labels `f64` ±1. [`learner::learn`] runs the online protocol over the batch
//! and returns the score each row got *before* its label was used (prequential);
//! [`learner::decision`] scores without learning; [`learner::predict_sign`] turns a score into
//! a label (0 predicts +1). The batch functions validate everything first and are atomic: on
//! `Err` ([`Error`]) the model is unchanged. [`learner::learn_rounds`] takes rounds of several
//! tasks (the protocol of ROMCO and OMTL, §1.2); the `_grown` forms add new tasks first.
//!
//! ```
//! use omtl::data::Rows;
//! use omtl::kernel::{BaseKernel, TaskKernel};
//! use omtl::learner::{decision, learn, predict_sign, Build, GraphSetting, KernelSetting, MTLinear, MTLinearParams};
//! use omtl::learner::{MTRBPParams, OnlineLearner, MTRBP};
//!
//! // Four rows of two features (row-major), for tasks 0 and 1, with their labels.
//! let x = [1.0, 0.0, 0.0, 1.0, -1.0, 0.5, 0.5, -1.0];
//! let rows = Rows::dense(&x, 4, 2);
//! let (tasks, y) = ([0, 1, 0, 1], [1.0, -1.0, -1.0, 1.0]);
//! let graph = TaskKernel::complete(2)?; // every pair of tasks equally related
//!
//! // A linear learner with Python's defaults, and a kernel learner keeping at most 100 rows.
//! let mut linear = MTLinear::build(&MTLinearParams::default(), &GraphSetting::new(&graph, 2))?;
//! let params = MTRBPParams { budget: 100, ..MTRBPParams::default() };
//! let mut budget = MTRBP::build(&params, &KernelSetting::new(&graph, BaseKernel::rbf(0.5)?, 2))?;
//!
//! let scores = learn(&mut budget, &rows, &tasks, &y)?; // pre-update scores
//! assert_eq!(scores[0], 0.0); // the first row is scored by the empty model
//! assert_eq!(budget.n_active() as u64, budget.n_updates()); // one stored row per mistake
//! learn(&mut linear, &rows, &tasks, &y)?;
//! let labels: Vec<f64> = decision(&linear, &rows, &tasks)?.into_iter().map(predict_sign).collect();
//! assert_eq!(labels.len(), 4);
//!
//! // Saving and restoring: the state as bytes, checked when read back.
//! let bytes = omtl::state::encode(&budget)?;
//! let restored: MTRBP = omtl::state::decode(&bytes)?;
//! assert_eq!(decision(&restored, &rows, &tasks)?, decision(&budget, &rows, &tasks)?);
//! # Ok::<(), omtl::Error>(())
//! ```
//!
//! ## Reading a file
//!
//! [`io::Reader`] streams svmlight (task in `qid:`), Vowpal Wabbit text and CSV files, plain or
//! gzip, in bounded chunks of CSR rows with labels and task ids (tasks numbered in order of
//! first appearance). `examples/stream_from_file.rs` grows the task set as new tasks appear.
//!
//! ```no_run
//! use omtl::data::Rows;
//! use omtl::io::{Format, Options, Reader};
//! use omtl::kernel::TaskKernel;
//! use omtl::learner::{learn, Build, GraphSetting, MTLinear, MTLinearParams};
//!
//! let n_features = 1000;
//! let mut reader = Reader::open("train.svm", Options::new(Format::Svmlight, n_features as u64))?;
//! let mut model = MTLinear::build(&MTLinearParams::default(), &GraphSetting::new(&TaskKernel::complete(3)?, n_features))?;
//! while let Some(chunk) = reader.next_chunk()? {
//!     let indptr: Vec<i64> = chunk.indptr.iter().map(|&p| p as i64).collect();
//!     let (indices, data) = (&chunk.indices, &chunk.data);
//!     let rows = Rows::Csr { indptr: &indptr, indices, data, n_cols: n_features };
//!     let tasks: Vec<i64> = chunk.task_ids.iter().map(|&t| t.into()).collect();
//!     let y: Vec<f64> = chunk.labels.iter().map(|&l| if l > 0.0 { 1.0 } else { -1.0 }).collect();
//!     learn(&mut model, &rows, &tasks, &y)?;
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## A whole model
//!
//! [`model::Model`] is what the Python estimators, the command line and the server drive: an
//! [`model::Estimator`] (a class and its checked hyper-parameters, from the one class table the
//! Python constructors share) and, once fitted, the learner and its book: task labels (integers
//! and strings, interned), per-task counts, the label form, the counters. It learns and scores
//! batches and single events ([`model::Model::learn_one`], named features hashed by
//! [`hashing::RowBuilder`]), grows its tasks, and is what a `.omtl` file stores
//! ([`model_file`]: the format Python's `omtl.save` and the command line write, so a model trained
//! in Python loads in Rust and the reverse, with the same scores; every part checked before use;
//! `examples/model_file.rs`).
//!
//! ## Saving a learner
//!
//! [`state::encode`] writes one learner's state as bytes and [`state::decode`] reads it back
//! as the learner type, as untrusted input: its size bounded by the payload and every
//! invariant checked ([`state::CheckState`]), so a corrupt or forged state is an
//! [`Error::State`], never a model that misbehaves (`examples/budget_save_restore.rs`).
//!
//! ## The modules
//!
//! - [`learner`]: the learners, their params, the [`OnlineLearner`](learner::OnlineLearner)
//!   trait and the batch functions;
//! - [`kernel`]: base kernels, task kernels and the stored examples of kernel learners;
//! - [`data`]: the row views; [`error`]: the one error type;
//! - [`io`]: the file readers; [`hashing`]: named features hashed into columns (scikit-learn's
//!   `FeatureHasher` mapping);
//! - [`model`]: a whole model ([`model::Model`]: estimator, learner, book), any learner as one
//!   value ([`model::AnyLearner`]) and its versioned state bytes; [`model_file`]: the `.omtl`
//!   model file, a [`model::Model`]'s serialisation;
//! - [`state`]: checked saving and restoring; [`rng`]: the pinned SplitMix64 generator;
//! - [`interrupt`]: stopping a long call from a hook (a deadline, a signal).
//!
//! `examples/` holds a quickstart, a budget learner saved and restored, a stream read from a
//! file, and a model file written and read.

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
pub mod model;
pub mod model_file;
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
