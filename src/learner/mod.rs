//! Online learners and the protocol that drives them.
//!
//! Every learner implements [`OnlineLearner`]: a score for `(x, task)` and a mistake-driven
//! update that may reuse that score (ALGORITHMS.md §1.1 step 4). [`learn`] and [`decision`] run
//! whole batches after validating all of it, so a bad batch never leaves a model half-updated.

mod active_set;
pub mod batch_mtl;
mod budget;
mod cw;
mod kernel_sum;
mod linear;
mod mt_linear;
mod omtl;
mod omtrl;
mod pa;
mod perceptron;
mod projectron;
mod romco;

pub use active_set::ActiveSet;
pub use batch_mtl::{BatchMtl, Regularizer, SolveReport, SolverOptions};
pub use budget::{ShrinkStep, MTFORG, MTRBP};
pub use cw::{normal_quantile, CwCol, CwConstants, CwModel};
pub use linear::LinearWeights;
pub use mt_linear::{logistic_margin_gain, sigmoid, Loss, MTLinear, MTLinearParams, UpdateRule, MAX_HASH_BITS};
pub use omtl::{omtl_tau, GlobalNorm, Omtl};
pub use omtrl::{Omtrl, RelationUpdate};
pub use pa::{PaVariant, PassiveAggressive};
pub use perceptron::MTPerceptron;
pub use projectron::{ProjectronParams, Threshold, MTBPRJ, MTBPRJ2};
pub use romco::{Romco, RomcoTrigger, SvtRoute};

use crate::data::{validate_batch, validate_row_scale, Row, Rows};
use crate::error::{Error, Result};
use crate::kernel::{BaseKernel, Scratch};

pub trait OnlineLearner {
    fn n_tasks(&self) -> usize;
    fn n_features(&self) -> usize;

    /// The real-valued score `f_task(x)` of the current model.
    fn score(&self, x: Row, task: usize, scratch: &mut Scratch) -> f64;

    /// Receives the label `y` (±1) of `(x, task)`, whose pre-update score was `score`.
    ///
    /// An error (a non-finite step or result) is returned before anything changes: on `Err`
    /// the model is exactly as it was before the call.
    fn update(&mut self, x: Row, task: usize, y: f64, score: f64, scratch: &mut Scratch) -> Result<()>;

    /// A hint that `(x, task)` comes next: a learner whose state for a row is scattered over a
    /// large table (MTLinear) starts loading it into cache while the current row runs. No effect
    /// on any result.
    fn prefetch(&self, _x: Row, _task: usize) {}

    /// One step of the online protocol: predict, then update. Returns the pre-update score.
    /// On `Err` the model is unchanged, as for [`OnlineLearner::update`].
    fn learn_one(&mut self, x: Row, task: usize, y: f64, scratch: &mut Scratch) -> Result<f64> {
        let f = self.score(x, task, scratch);
        self.update(x, task, y, f, scratch)?;
        Ok(f)
    }

    /// One round of protocol P2 (ALGORITHMS.md §1.2): the rows (of distinct tasks) are all
    /// scored with the same model, then the model makes one joint update; the pre-update scores
    /// go to `scores`. The default flattens the round (§1.3): predict-then-update row by row, in
    /// the given order, which is what every protocol-P1 learner does with a round.
    ///
    /// On `Err` the rows before the failing one may have been learned (the batch functions
    /// below make whole calls atomic).
    fn learn_round(
        &mut self,
        rows: &[Row],
        tasks: &[usize],
        y: &[f64],
        scores: &mut [f64],
        scratch: &mut Scratch,
    ) -> Result<()> {
        for (r, row) in rows.iter().enumerate() {
            scores[r] = self.learn_one(*row, tasks[r], y[r], scratch)?;
        }
        Ok(())
    }

    /// The base kernel of a kernel learner (`None` for linear models): the batch functions check
    /// every row's `K'(x, x)` against it ([`validate_row_scale`]).
    fn base_kernel(&self) -> Option<&BaseKernel> {
        None
    }

    /// Number of model updates so far.
    fn n_updates(&self) -> u64;

    /// Size of the active set (for linear models: the number of updates it stands for).
    fn n_active(&self) -> usize;

    /// Learner-specific counters and values, by name.
    fn diagnostics(&self) -> Vec<(&'static str, f64)> {
        Vec::new()
    }

    /// Learner-specific arrays (fitted parameters) by name, as `(name, shape, row-major data)`.
    fn arrays(&self) -> Vec<(&'static str, Vec<usize>, Vec<f64>)> {
        Vec::new()
    }
}

/// Runs the online protocol over a batch and returns the pre-update scores.
pub fn learn<L: OnlineLearner + ?Sized>(model: &mut L, rows: &Rows, tasks: &[i64], y: &[f64]) -> Result<Vec<f64>> {
    validate_batch(rows, tasks, Some(y), model.n_tasks(), model.n_features())?;
    validate_row_scale(rows, model.base_kernel())?;
    let mut scratch = Scratch::default();
    (0..rows.len())
        .map(|t| {
            rows.prefetch_row(t + 1);
            if t + 1 < rows.len() {
                model.prefetch(rows.row(t + 1), tasks[t + 1] as usize);
            }
            model.learn_one(rows.row(t), tasks[t] as usize, y[t], &mut scratch)
        })
        .collect()
}

/// Checks round ids (§1.2): one per row, non-decreasing, each task at most once per round.
pub fn validate_rounds(tasks: &[i64], rounds: &[i64], n_tasks: usize) -> Result<()> {
    let bad = |reason: String| Err(Error::InvalidParameter { name: "rounds", reason });
    if rounds.len() != tasks.len() {
        return Err(Error::LengthMismatch {
            rows: tasks.len(),
            what: "rounds",
            len: rounds.len(),
        });
    }
    // last_round[task] = the last round in which the task appeared (validate_batch checked the ids).
    let mut last_round: Vec<Option<i64>> = vec![None; n_tasks];
    for (row, (&task, &round)) in tasks.iter().zip(rounds).enumerate() {
        if row > 0 && round < rounds[row - 1] {
            return bad(format!(
                "round ids must be non-decreasing, but row {row} has round {round} after round {}",
                rounds[row - 1]
            ));
        }
        let Some(slot) = usize::try_from(task).ok().and_then(|t| last_round.get_mut(t)) else {
            return Err(Error::UnknownTask { row, task, n_tasks });
        };
        if *slot == Some(round) {
            return bad(format!(
                "task {task} appears twice in round {round} (row {row}); a round holds at most one example per task"
            ));
        }
        *slot = Some(round);
    }
    Ok(())
}

/// Runs protocol P2 over a batch: consecutive rows with the same round id form one round
/// ([`OnlineLearner::learn_round`]). Returns the pre-update scores. Validates everything first.
pub fn learn_rounds<L: OnlineLearner + ?Sized>(
    model: &mut L,
    rows: &Rows,
    tasks: &[i64],
    y: &[f64],
    rounds: &[i64],
) -> Result<Vec<f64>> {
    validate_batch(rows, tasks, Some(y), model.n_tasks(), model.n_features())?;
    validate_row_scale(rows, model.base_kernel())?;
    validate_rounds(tasks, rounds, model.n_tasks())?;
    let mut scratch = Scratch::default();
    let mut scores = vec![0.0; rows.len()];
    let (mut round_rows, mut round_tasks) = (Vec::new(), Vec::new());
    let mut start = 0;
    while start < rows.len() {
        let mut end = start + 1;
        while end < rows.len() && rounds[end] == rounds[start] {
            end += 1;
        }
        round_rows.clear();
        round_tasks.clear();
        // The next round's rows start loading while this round runs.
        let next_len = rounds
            .get(end)
            .map_or(0, |&r| rounds[end..].iter().take_while(|&&x| x == r).count());
        (end..end + next_len).for_each(|t| rows.prefetch_row(t));
        round_rows.extend((start..end).map(|t| rows.row(t)));
        round_tasks.extend(tasks[start..end].iter().map(|&t| t as usize));
        model.learn_round(
            &round_rows,
            &round_tasks,
            &y[start..end],
            &mut scores[start..end],
            &mut scratch,
        )?;
        start = end;
    }
    Ok(scores)
}

/// Scores a batch without changing the model.
pub fn decision<L: OnlineLearner + ?Sized>(model: &L, rows: &Rows, tasks: &[i64]) -> Result<Vec<f64>> {
    validate_batch(rows, tasks, None, model.n_tasks(), model.n_features())?;
    let mut scratch = Scratch::default();
    Ok((0..rows.len())
        .map(|t| {
            rows.prefetch_row(t + 1);
            if t + 1 < rows.len() {
                model.prefetch(rows.row(t + 1), tasks[t + 1] as usize);
            }
            model.score(rows.row(t), tasks[t] as usize, &mut scratch)
        })
        .collect())
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
