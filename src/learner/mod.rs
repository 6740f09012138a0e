//! Online learners and the protocol that drives them.
//!
//! Every learner implements [`OnlineLearner`]: a score for `(x, task)` and a mistake-driven
//! update that may reuse that score (ALGORITHMS.md §1.1 step 4). [`learn`] and [`decision`] run
//! whole batches after validating all of it, so a bad batch never leaves a model half-updated.

mod active_set;
mod budget;
mod kernel_sum;
mod linear;
mod perceptron;

pub use active_set::ActiveSet;
pub use budget::{ShrinkStep, MTFORG, MTRBP};
pub use linear::LinearWeights;
pub use perceptron::MTPerceptron;

use crate::data::{validate_batch, Row, Rows};
use crate::error::Result;
use crate::kernel::Scratch;

pub trait OnlineLearner {
    fn n_tasks(&self) -> usize;
    fn n_features(&self) -> usize;

    /// The real-valued score `f_task(x)` of the current model.
    fn score(&self, x: Row, task: usize, scratch: &mut Scratch) -> f64;

    /// Receives the label `y` (±1) of `(x, task)`, whose pre-update score was `score`.
    fn update(&mut self, x: Row, task: usize, y: f64, score: f64, scratch: &mut Scratch);

    /// One step of the online protocol: predict, then update. Returns the pre-update score.
    fn learn_one(&mut self, x: Row, task: usize, y: f64, scratch: &mut Scratch) -> f64 {
        let f = self.score(x, task, scratch);
        self.update(x, task, y, f, scratch);
        f
    }

    /// Number of model updates so far.
    fn n_updates(&self) -> u64;

    /// Size of the active set (for linear models: the number of updates it stands for).
    fn n_active(&self) -> usize;

    /// Learner-specific counters and values, by name.
    fn diagnostics(&self) -> Vec<(&'static str, f64)> {
        Vec::new()
    }
}

/// Runs the online protocol over a batch and returns the pre-update scores.
pub fn learn<L: OnlineLearner + ?Sized>(model: &mut L, rows: &Rows, tasks: &[i64], y: &[f64]) -> Result<Vec<f64>> {
    validate_batch(rows, tasks, Some(y), model.n_tasks(), model.n_features())?;
    let mut scratch = Scratch::default();
    Ok((0..rows.len()).map(|t| model.learn_one(rows.row(t), tasks[t] as usize, y[t], &mut scratch)).collect())
}

/// Scores a batch without changing the model.
pub fn decision<L: OnlineLearner + ?Sized>(model: &L, rows: &Rows, tasks: &[i64]) -> Result<Vec<f64>> {
    validate_batch(rows, tasks, None, model.n_tasks(), model.n_features())?;
    let mut scratch = Scratch::default();
    Ok((0..rows.len()).map(|t| model.score(rows.row(t), tasks[t] as usize, &mut scratch)).collect())
}

/// The sign convention S0: a score of exactly 0 predicts +1.
#[inline]
pub fn predict_sign(score: f64) -> f64 {
    if score >= 0.0 {
        1.0
    } else {
        -1.0
    }
}

/// Update-mistake test used by every Perceptron-type rule: `y f <= 0`.
#[inline]
pub fn is_update_mistake(y: f64, score: f64) -> bool {
    y * score <= 0.0
}
