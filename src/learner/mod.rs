//! Online learners and the protocol that drives them.
//!
//! Every learner implements [`OnlineLearner`]: a score for `(x, task)` and a mistake-driven
//! update that may reuse that score (ALGORITHMS.md §1.1 step 4). [`learn`], [`learn_rounds`]
//! and [`decision`] run whole batches after validating all of it, and [`learn`] and
//! [`learn_rounds`] are atomic: a call that fails leaves the model exactly as it was, also when
//! the failure comes at row r > 0 (a non-finite step). The one exception is an interrupt
//! ([`crate::interrupt`]), which keeps the rows completed before it.

/// A learner's hyper-parameter type (`XParams`): the struct, with the derives every one carries
/// (serde, `Clone`, `Copy`, `Debug`, `PartialEq`, and `FromPyObject` from a dict item per field
/// under the `python` feature), and its [`ParamGuard`] check.
macro_rules! learner_params {
    (
        $(#[$attr:meta])*
        pub struct $name:ident { $($(#[$fattr:meta])* pub $field:ident: $ty:ty,)* }
        fn check(&$self:ident) -> Result<()> $check:block
    ) => {
        $(#[$attr])*
        #[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
        #[cfg_attr(feature = "python", derive(pyo3::FromPyObject), pyo3(from_item_all))]
        pub struct $name {
            $($(#[$fattr])* pub $field: $ty,)*
        }

        impl $crate::learner::ParamGuard for $name {
            fn check_ref(&$self) -> Result<()> $check
        }
    };
}

/// `add_tasks` and `remove_added_tasks` of a learner that can grow, by its inherent
/// `grow_tasks` and `shrink_tasks` (inside an `impl OnlineLearner`; the shape macros take `grows`
/// for it).
macro_rules! grows {
    () => {
        fn add_tasks(&mut self, n: usize) -> Result<()> {
            self.grow_tasks(n)
        }

        fn remove_added_tasks(&mut self, n: usize) {
            self.shrink_tasks(n);
        }
    };
}

/// `n_tasks` and `n_features` of a learner that keeps them in fields of those names (inside an
/// `impl OnlineLearner`); `shape_fields!(grows)` adds [`grows!`].
macro_rules! shape_fields {
    (grows) => {
        grows!();
        shape_fields!();
    };
    () => {
        fn n_tasks(&self) -> usize {
            self.n_tasks
        }

        fn n_features(&self) -> usize {
            self.n_features
        }
    };
}

/// The counters of a linear learner: `n_updates`, and the active-set size it stands for (one
/// example per update).
macro_rules! linear_counters {
    () => {
        fn n_updates(&self) -> u64 {
            self.n_updates
        }

        fn n_active(&self) -> usize {
            self.n_updates as usize
        }
    };
}

/// The counters of a learner with an active set: `n_updates` (at the given field path) and the
/// set's size.
macro_rules! active_set_counters {
    ($($updates:ident).+, $set:ident) => {
        fn n_updates(&self) -> u64 {
            self.$($updates).+
        }

        fn n_active(&self) -> usize {
            self.$set.len()
        }
    };
}

/// `same_settings` of a learner whose shape and hyper-parameters are the named fields (inside an
/// inherent `impl`): the same when every one of them is equal.
macro_rules! same_settings_fields {
    ($($field:ident),+) => {
        /// Same hyper-parameters as `other`.
        pub fn same_settings(&self, other: &Self) -> bool {
            $(self.$field == other.$field)&&+
        }
    };
}

/// Whether two kernel learners share their base kernel, task kernel (up to rounding) and number
/// of features (the start of every kernel learner's `same_settings`).
macro_rules! same_kernel_setting {
    ($a:expr, $b:expr) => {
        $a.kernel == $b.kernel && $a.tasks.approx_eq(&$b.tasks) && $a.n_features == $b.n_features
    };
}

/// The shape of a kernel learner: its base kernel (`kernel`), tasks from its task kernel
/// (`tasks`), and `n_features`; `kernel_shape!(grows)` adds [`grows!`], and
/// `kernel_shape!(grows_task_kernel)` an `add_tasks` that grows the task kernel alone (atomic, as
/// [`TaskKernel::grow`]) and its inverse, for a learner whose stored state does not depend on the
/// number of tasks.
///
/// [`TaskKernel::grow`]: crate::kernel::TaskKernel::grow
macro_rules! kernel_shape {
    (grows) => {
        grows!();
        kernel_shape!();
    };
    (grows_task_kernel) => {
        fn add_tasks(&mut self, n: usize) -> Result<()> {
            self.tasks.grow(n)
        }

        fn remove_added_tasks(&mut self, n: usize) {
            self.tasks.shrink(n);
        }

        kernel_shape!();
    };
    () => {
        fn base_kernel(&self) -> Option<&BaseKernel> {
            Some(&self.kernel)
        }

        fn n_tasks(&self) -> usize {
            self.tasks.n_tasks()
        }

        fn n_features(&self) -> usize {
            self.n_features
        }
    };
}

/// `lookahead` and `score_ahead` of a kernel learner over an active set (fields `set`, `kernel`,
/// `tasks`): the next rows scored in windows ([`rows_scores`]) through the sparse index `$index`,
/// times `$factor` (MTFORG's pending scale of the stored coefficients; 1 for the others).
/// `$self` is the caller's `self`, so that the expressions can read its fields.
///
/// [`rows_scores`]: crate::kernel::kernel_sum::rows_scores
macro_rules! active_set_ahead {
    ($self:ident, $index:expr, $factor:expr) => {
        fn lookahead(&$self) -> usize {
            $crate::kernel::kernel_sum::window_width(&$self.set, &$self.tasks)
        }

        fn score_ahead(&$self, rows: &[Row], tasks: &[usize], out: &mut [f64], scratch: &mut Scratch) {
            let (set, kernel, task_kernel) = (&$self.set, &$self.kernel, &$self.tasks);
            $crate::kernel::kernel_sum::rows_scores(set, $index, kernel, task_kernel, rows, tasks, out, scratch);
            let factor: f64 = $factor;
            if factor != 1.0 {
                out.iter_mut().for_each(|f| *f *= factor);
            }
        }
    };
}

/// The one list of native learners. Each line gives a learner's kind (the string
/// `NativeLearner.build` takes and [`AnyLearner::kind`] gives), its variant in [`AnyLearner`],
/// its type and its parameter type. `learner_table!(callback)` hands the list to a macro: the
/// crate's [`AnyLearner`] (src/model.rs) makes its enum and every dispatch over it; the binding
/// (src/python/registry.rs) the builder from Python parameters. Adding a learner is one line
/// here (and its `mod` line below if the module is new).
///
/// [`AnyLearner`] is serialised (pickles, model files) in this order, the layout since
/// STATE_VERSION 3: append only.
///
/// [`AnyLearner`]: crate::model::AnyLearner
/// [`AnyLearner::kind`]: crate::model::AnyLearner::kind
macro_rules! learner_table {
    ($callback:ident) => {
        $callback! {
            "mt_perceptron" => MTPerceptron(MTPerceptron, NoParams);
            "mtbprj" => Mtbprj(MTBPRJ, ProjectronParams);
            "mtbprj2" => Mtbprj2(MTBPRJ2, MTBPRJ2Params);
            "cw_col" => CwCol(CwCol, CwColParams);
            "omtrl" => Omtrl(Omtrl, OmtrlParams);
            "omtl" => Omtl(Omtl, OmtlParams);
            "batch_mtl" => BatchMtl(BatchMtl, BatchMtlParams);
            "romco" => Romco(Romco, RomcoParams);
            "passive_aggressive" => PassiveAggressive(PassiveAggressive, PassiveAggressiveParams);
            "mt_rbp" => MTRBP(MTRBP, MTRBPParams);
            "mt_forg" => MTFORG(MTFORG, MTFORGParams);
            "mt_linear" => MTLinear(MTLinear, MTLinearParams);
        }
    };
}
pub(crate) use learner_table;

pub mod batch_mtl;
mod budget;
mod cw;
mod mt_linear;
mod omtl;
mod omtrl;
mod pa;
mod perceptron;
mod projectron;
mod romco;
pub mod shared;

#[cfg(test)]
mod atomicity_tests;
mod linear;
mod lookahead;
mod spec;
#[cfg(test)]
pub(crate) mod test_support;
mod undo;

#[cfg(feature = "python")]
pub(crate) use self::omtl::omtl_tau;
pub use self::omtl::{GlobalNorm, Omtl, OmtlParams};
pub use crate::kernel::ActiveSet;
pub use batch_mtl::{BatchMtl, BatchMtlParams, Regularizer, SolveReport, SolverOptions};
pub use budget::{MTFORGParams, MTRBPParams, ShrinkStep, MTFORG, MTRBP};
pub use cw::{CwCol, CwColParams, CwConstants};
pub(crate) use linear::LinearWeights;
pub use lookahead::{Ahead, Event};
pub use mt_linear::{Loss, MTLinear, MTLinearParams, UpdateRule, MAX_HASH_BITS};
pub use omtrl::{Omtrl, OmtrlParams, RelationUpdate};
pub use pa::{PaVariant, PassiveAggressive, PassiveAggressiveParams};
pub use perceptron::MTPerceptron;
pub use projectron::{MTBPRJ2Params, ProjectronParams, Threshold, MTBPRJ, MTBPRJ2};
pub use romco::{Romco, RomcoParams, RomcoTrigger, SvtRoute};
pub(crate) use spec::{check_c, check_nonnegative};
pub use spec::{Build, Checked, Dims, GraphSetting, KernelSetting, LinearSetting, NoParams, ParamGuard};

use crate::data::{validate_batch, validate_learn_batch, Row, Rows};
use crate::error::{Error, Result};
use crate::kernel::kernel_sum::MAX_WINDOW;
use crate::kernel::{BaseKernel, Scratch};

/// One round of protocol P2 (ALGORITHMS.md §1.2): rows of distinct tasks, their tasks and labels.
#[derive(Debug, Clone, Copy)]
pub struct Round<'a> {
    /// The instances.
    pub rows: &'a [Row<'a>],
    /// Their tasks (distinct, each `< n_tasks`).
    pub tasks: &'a [usize],
    /// Their labels, ±1.
    pub y: &'a [f64],
}

/// An online binary classifier over many tasks: every learner of the crate implements it.
///
/// The protocol (ALGORITHMS.md §1.1): for each example `(x, task)` the learner gives a real
/// score ([`OnlineLearner::score`]; its sign is the prediction, 0 predicting +1), then receives
/// the label ±1 and may update ([`OnlineLearner::update`]). Most users call the batch functions
/// instead — [`learn`], [`decision`], [`learn_rounds`] and their `_grown` forms — which validate
/// a whole batch first and are atomic; the per-row methods take the caller's [`Scratch`] and
/// trust the caller with shapes (a task `< n_tasks()`, a row of `n_features()` columns).
///
/// Besides the methods every learner defines (`score`, `update`, `n_tasks`, `n_features`,
/// `n_updates`, `n_active`), the provided ones are hooks with correct defaults: lookahead
/// scoring, joint rounds, growing the task set, an undo journal and diagnostics.
pub trait OnlineLearner {
    /// Number of tasks; task ids run over `0..n_tasks()`.
    fn n_tasks(&self) -> usize;
    /// Number of features: the width of every row.
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

    /// How many upcoming rows the batch functions should score in one call of
    /// [`OnlineLearner::score_ahead`] (at most `kernel_sum::MAX_WINDOW` are used); 1, the
    /// default, scores row by row. A learner returns more when one pass over its state serves
    /// several rows at once (a large dense active set).
    fn lookahead(&self) -> usize {
        1
    }

    /// `out[j]` = the score of `rows[j]` in task `tasks[j]` by the current model, bit for bit
    /// what [`OnlineLearner::score`] gives (the default calls it row by row).
    fn score_ahead(&self, rows: &[Row], tasks: &[usize], out: &mut [f64], scratch: &mut Scratch) {
        score_each(self, rows, tasks, out, scratch);
    }

    /// [`OnlineLearner::update`] on one [`Event`], with the scores of the next rows made ahead by the model before
    /// it. Returns whether `ahead` now holds the scores of the updated model (brought up to date
    /// by the learner, or unchanged because the model did not change); on `false` the caller
    /// scores those rows again. The default updates and answers whether `n_updates` is unchanged,
    /// which is right for any learner whose scores change only with an update; a learner that
    /// corrects the scores (in O(d) per changed element, [`Ahead::add_term`]) overrides it.
    fn update_ahead(&mut self, event: Event, _ahead: &mut Ahead, scratch: &mut Scratch) -> Result<bool> {
        let Event { x, task, y, score } = event;
        let before = self.n_updates();
        self.update(x, task, y, score, scratch)?;
        Ok(self.n_updates() == before)
    }

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
    /// below make whole calls atomic). A learner that overrides this with a joint update must
    /// also return `true` from [`OnlineLearner::joint_rounds`].
    fn learn_round(&mut self, round: Round, scores: &mut [f64], scratch: &mut Scratch) -> Result<()> {
        let Round { rows, tasks, y } = round;
        for (r, row) in rows.iter().enumerate() {
            scores[r] = self.learn_one(*row, tasks[r], y[r], scratch)?;
        }
        Ok(())
    }

    /// The scores of a round's rows, all by the current model (the first half of a joint round).
    fn score_round(&self, round: Round, scores: &mut [f64], scratch: &mut Scratch) {
        for (r, row) in round.rows.iter().enumerate() {
            scores[r] = self.score(*row, round.tasks[r], scratch);
        }
    }

    /// The base kernel of a kernel learner (`None` for linear models): the batch functions check
    /// every row's `K'(x, x)` against it.
    fn base_kernel(&self) -> Option<&BaseKernel> {
        None
    }

    /// Whether [`OnlineLearner::learn_round`] makes one joint update per round (and so must be
    /// given whole rounds); `false` for learners that flatten rounds row by row.
    fn joint_rounds(&self) -> bool {
        false
    }

    /// Number of model updates so far.
    fn n_updates(&self) -> u64;

    /// Size of the active set (for linear models: the number of updates it stands for).
    fn n_active(&self) -> usize;

    /// Learner-specific counters and values, by name.
    fn diagnostics(&self) -> Vec<(&'static str, f64)> {
        Vec::new()
    }

    /// Adds `n` tasks with no examples, numbered `n_tasks()..n_tasks() + n` (open-ended task
    /// sets, DECISIONS.md). Learners that learn a task relation or refit a weight matrix over all
    /// tasks (OMTRL, BatchMtl, ROMCO) keep the default: an error saying they cannot grow.
    /// Atomic: on `Err` the model is unchanged.
    fn add_tasks(&mut self, _n: usize) -> Result<()> {
        Err(Error::InvalidParameter {
            name: "n_tasks",
            reason: "this learner cannot add tasks to a fitted model (its task relation is sized or learned for a fixed number of tasks)".into(),
        })
    }

    /// Learner-specific arrays (fitted parameters) by name, as `(name, shape, row-major data)`:
    /// the one route to what only some learners hold (ROMCO's `U` and `V`, MTLinear's blocks).
    fn arrays(&self) -> Vec<(&'static str, Vec<usize>, Vec<f64>)> {
        Vec::new()
    }

    /// Re-derives every cache from the stored state now (a Projectron's inverse Gram matrix,
    /// INV-Q2), as a restore or a long run would; a no-op for a learner without caches. The
    /// scores do not change beyond rounding.
    fn rebuild_caches(&mut self) {}

    /// Starts an undo journal: until [`OnlineLearner::journal_commit`] or
    /// [`OnlineLearner::journal_rollback`], the learner records what its updates and
    /// [`OnlineLearner::add_tasks`] change, so that a rollback restores the model exactly, at a
    /// cost proportional to what changed. Returns `false` (the default) for a learner without a
    /// journal: the batch functions then run a multi-row call on a copy (docs/reliability.md).
    fn journal_begin(&mut self) -> bool {
        false
    }

    /// Ends the journal, keeping the changes.
    fn journal_commit(&mut self) {}

    /// Ends the journal, undoing every change since [`OnlineLearner::journal_begin`].
    fn journal_rollback(&mut self) {}

    /// Whether [`OnlineLearner::score`] of a task id `>= n_tasks()` gives the score that task
    /// would have once added with no examples ([`decision_grown`] then scores without a copy).
    fn scores_new_tasks(&self) -> bool {
        false
    }

    /// Forgets the tasks `tasks` (distinct ids below `n_tasks()`, [`check_forget`]): every
    /// stored example of theirs leaves the model, with the caches derived from it, and the state
    /// that is theirs alone returns to that of a task with no examples; their ids stay valid and
    /// learn afresh. State shared with other tasks keeps their past influence (docs/lifecycle.md
    /// states, per learner, what is removed and where the result equals the model learned without
    /// their examples). Returns the number of stored examples removed. Atomic: on `Err` the model
    /// is unchanged. The default refuses.
    fn forget_tasks(&mut self, _tasks: &[usize]) -> Result<usize> {
        Err(Error::InvalidParameter {
            name: "tasks",
            reason: "this learner cannot forget tasks".into(),
        })
    }

    /// Whether a one-row call that adds tasks runs in place, removing them again
    /// ([`OnlineLearner::remove_added_tasks`]) if its update fails (the update checks before it
    /// writes), rather than on a copy: for a learner whose copy costs the whole model per new
    /// task.
    fn undoes_added_tasks(&self) -> bool {
        false
    }

    /// Removes the last `n` tasks, added by [`OnlineLearner::add_tasks`] and holding no example
    /// (a batch interrupted before reaching them, or a one-row call whose update failed): the
    /// model is then the one that never added them (equal bytes). Every learner that grows
    /// implements it; the batch functions call it only on tasks they added.
    fn remove_added_tasks(&mut self, _n: usize) {}
}

/// Checks the tasks of [`OnlineLearner::forget_tasks`]: distinct ids below `n_tasks`.
pub fn check_forget(tasks: &[usize], n_tasks: usize) -> Result<()> {
    let mut seen = std::collections::HashSet::with_capacity(tasks.len());
    for &task in tasks {
        if task >= n_tasks {
            return Err(crate::error::invalid(
                "tasks",
                format!("cannot forget task {task}: task ids lie in [0, {n_tasks})"),
            ));
        }
        if !seen.insert(task) {
            return Err(crate::error::invalid("tasks", format!("task {task} is named twice")));
        }
    }
    Ok(())
}

/// Runs `body` on the model so that the call is atomic. `body` pushes the pre-update score of
/// every row it completes. A learner with a journal ([`OnlineLearner::journal_begin`]) runs in
/// place and rolls back on error, at the cost of what the call changed; otherwise a multi-row
/// batch runs on a clone that replaces the model on success, and a one-row batch in place, the
/// learner's own check-before-write ([`OnlineLearner::update`]) being enough there. An interrupt
/// commits the rows completed before it and returns their scores.
fn run_atomic<L: OnlineLearner + Clone>(
    model: &mut L,
    n_rows: usize,
    body: impl FnOnce(&mut L, &mut Vec<f64>) -> Result<()>,
) -> Result<Vec<f64>> {
    let mut scores = Vec::with_capacity(n_rows);
    let outcome = if model.journal_begin() {
        let outcome = body(model, &mut scores);
        if matches!(outcome, Ok(()) | Err(Error::Interrupted { .. })) {
            model.journal_commit();
        } else {
            model.journal_rollback();
        }
        outcome
    } else if n_rows <= 1 {
        body(model, &mut scores)
    } else {
        let mut work = model.clone();
        let outcome = body(&mut work, &mut scores);
        if matches!(outcome, Ok(()) | Err(Error::Interrupted { .. })) {
            *model = work;
        }
        outcome
    };
    match outcome {
        Ok(()) => Ok(scores),
        Err(Error::Interrupted { .. }) => Err(Error::Interrupted { scores }),
        Err(e) => Err(e),
    }
}

/// Predict-then-update over the rows, in order, checking for an interrupt before each row.
/// When the learner asks for it ([`OnlineLearner::lookahead`]), the next rows are scored in one
/// pass ([`OnlineLearner::score_ahead`]) and their scores kept up to date through the updates
/// ([`OnlineLearner::update_ahead`]): every row is still predicted by the model as it is when
/// the row is reached.
fn learn_rows<L: OnlineLearner + ?Sized>(
    model: &mut L,
    rows: &Rows,
    tasks: &[i64],
    y: &[f64],
    scores: &mut Vec<f64>,
) -> Result<()> {
    let mut scratch = Scratch::default();
    let (mut window, mut window_tasks) = (Vec::with_capacity(MAX_WINDOW), Vec::with_capacity(MAX_WINDOW));
    let mut ahead = [0.0; MAX_WINDOW];
    let n = rows.len();
    let mut t = 0;
    while t < n {
        let width = model.lookahead().clamp(1, MAX_WINDOW).min(n - t);
        if width == 1 {
            crate::interrupt::check()?;
            rows.prefetch_row(t + 1);
            if t + 1 < n {
                model.prefetch(rows.row(t + 1), tasks[t + 1] as usize);
            }
            scores.push(model.learn_one(rows.row(t), tasks[t] as usize, y[t], &mut scratch)?);
            t += 1;
            continue;
        }
        window.clear();
        window.extend((t..t + width).map(|r| rows.row(r)));
        window_tasks.clear();
        window_tasks.extend(tasks[t..t + width].iter().map(|&task| task as usize));
        model.score_ahead(&window, &window_tasks, &mut ahead[..width], &mut scratch);
        let mut j = 0;
        while j < width {
            crate::interrupt::check()?;
            let f = ahead[j];
            let mut pending = Ahead::new(&window[j + 1..], &window_tasks[j + 1..], &mut ahead[j + 1..width]);
            let event = Event {
                x: window[j],
                task: window_tasks[j],
                y: y[t + j],
                score: f,
            };
            let fresh = model.update_ahead(event, &mut pending, &mut scratch)?;
            scores.push(f);
            j += 1;
            if !fresh {
                break; // the next window starts at the row after this one
            }
        }
        t += j;
    }
    Ok(())
}

/// The scores of `rows` one at a time through [`OnlineLearner::score`]: the default
/// [`OnlineLearner::score_ahead`], for learners (or forms of one) with no window of their own.
pub(crate) fn score_each<L: OnlineLearner + ?Sized>(
    model: &L,
    rows: &[Row],
    tasks: &[usize],
    out: &mut [f64],
    scratch: &mut Scratch,
) {
    for ((row, &task), o) in rows.iter().zip(tasks).zip(out.iter_mut()) {
        *o = model.score(*row, task, scratch);
    }
}

/// Runs the online protocol over a batch and returns the pre-update scores.
///
/// Atomic: on `Err` the model is exactly as before the call, whichever row failed (undone by the
/// learner's journal, or the batch learned on a copy: `run_atomic`), except
/// for [`Error::Interrupted`], after which the model has learned the rows whose scores the error
/// carries.
pub fn learn<L: OnlineLearner + Clone>(model: &mut L, rows: &Rows, tasks: &[i64], y: &[f64]) -> Result<Vec<f64>> {
    validate_learn_batch(rows, tasks, y, model.n_tasks(), model.n_features(), model.base_kernel())?;
    run_atomic(model, rows.len(), |m, scores| learn_rows(m, rows, tasks, y, scores))
}

/// Checks round ids (§1.2): one per row, non-decreasing, each task at most once per round.
pub(crate) fn validate_rounds(tasks: &[i64], rounds: &[i64], n_tasks: usize) -> Result<()> {
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
///
/// Atomic as [`learn`]. An interrupt is taken between rounds for a learner with joint rounds,
/// between rows for one that flattens them (§1.3), so the rows it reports are exactly the rows
/// learned.
pub fn learn_rounds<L: OnlineLearner + Clone>(
    model: &mut L,
    rows: &Rows,
    tasks: &[i64],
    y: &[f64],
    rounds: &[i64],
) -> Result<Vec<f64>> {
    validate_learn_batch(rows, tasks, y, model.n_tasks(), model.n_features(), model.base_kernel())?;
    validate_rounds(tasks, rounds, model.n_tasks())?;
    if !model.joint_rounds() {
        // Flattening a round is learning its rows one by one (§1.3).
        return run_atomic(model, rows.len(), |m, scores| learn_rows(m, rows, tasks, y, scores));
    }
    run_atomic(model, rows.len(), |m, scores| {
        learn_joint_rounds(m, rows, tasks, y, rounds, scores)
    })
}

fn learn_joint_rounds<L: OnlineLearner + ?Sized>(
    model: &mut L,
    rows: &Rows,
    tasks: &[i64],
    y: &[f64],
    rounds: &[i64],
    scores: &mut Vec<f64>,
) -> Result<()> {
    let mut scratch = Scratch::default();
    let (mut round_rows, mut round_tasks, mut round_scores) = (Vec::new(), Vec::new(), Vec::new());
    let mut start = 0;
    while start < rows.len() {
        crate::interrupt::check()?;
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
        round_scores.clear();
        round_scores.resize(end - start, 0.0);
        let round = Round {
            rows: &round_rows,
            tasks: &round_tasks,
            y: &y[start..end],
        };
        model.learn_round(round, &mut round_scores, &mut scratch)?;
        scores.extend_from_slice(&round_scores);
        start = end;
    }
    Ok(())
}

/// `n_tasks + n`, the task count after adding `n` tasks, refused when task ids would no longer
/// fit in a `u32`.
fn grown_n_tasks(n_tasks: usize, n: usize) -> Result<usize> {
    n_tasks
        .checked_add(n)
        .filter(|&k| u32::try_from(k).is_ok())
        .ok_or_else(|| crate::error::invalid("n_tasks", format!("{n_tasks} + {n} tasks is too many")))
}

/// `model` with `n_new` more tasks, on a copy ([`OnlineLearner::add_tasks`]); `None` when no
/// task is added (then the model itself is used). For learners without a journal.
fn grown<L: OnlineLearner + Clone>(model: &L, n_new: usize) -> Result<Option<L>> {
    if n_new == 0 {
        return Ok(None);
    }
    let mut work = model.clone();
    work.add_tasks(n_new)?;
    Ok(Some(work))
}

/// Runs `body` (learning the rows of `tasks`) after adding `n_new` tasks, atomically with the
/// growth: in place under the learner's journal (the growth and the rows undone together on
/// error), in place for one row of a learner that can remove the tasks it added (the update
/// changes nothing on error), else on a copy. An interrupt keeps the rows learned and the tasks
/// they need ([`unreached_tasks`]).
fn run_grown<L: OnlineLearner + Clone>(
    model: &mut L,
    n_new: usize,
    tasks: &[i64],
    body: impl FnOnce(&mut L) -> Result<Vec<f64>>,
) -> Result<Vec<f64>> {
    let n_tasks = model.n_tasks();
    let trim = |m: &mut L, outcome: &Result<Vec<f64>>| {
        if let Err(Error::Interrupted { scores }) = outcome {
            let unreached = unreached_tasks(n_tasks, n_new, &tasks[..scores.len()]);
            if unreached > 0 {
                m.remove_added_tasks(unreached);
            }
        }
    };
    if tasks.len() <= 1 && model.undoes_added_tasks() {
        model.add_tasks(n_new)?;
        let outcome = body(model);
        match outcome {
            Ok(_) => {}
            Err(Error::Interrupted { .. }) => trim(model, &outcome),
            Err(_) => model.remove_added_tasks(n_new),
        }
        return outcome;
    }
    if model.journal_begin() {
        let outcome = model.add_tasks(n_new).and_then(|()| body(model));
        if matches!(outcome, Ok(_) | Err(Error::Interrupted { .. })) {
            model.journal_commit();
            trim(model, &outcome);
        } else {
            model.journal_rollback();
        }
        return outcome;
    }
    let mut work = grown(model, n_new)?.expect("n_new > 0");
    let outcome = body(&mut work);
    if matches!(outcome, Ok(_) | Err(Error::Interrupted { .. })) {
        trim(&mut work, &outcome);
        *model = work;
    }
    outcome
}

/// Of the `n_new` tasks added to a model of `n_tasks` tasks for a batch, how many come after
/// every task of the rows `learned` (the rows completed before an interrupt): those tasks hold
/// no example and leave again ([`OnlineLearner::remove_added_tasks`]). New labels take task
/// indices in order of first appearance, so the rows completed name exactly the first new
/// tasks, and the model keeps the tasks of the model that learned those rows alone
/// (DECISIONS.md, "Open-ended task sets").
fn unreached_tasks(n_tasks: usize, n_new: usize, learned: &[i64]) -> usize {
    let reached = learned
        .iter()
        .max()
        .map_or(0, |&t| (t as usize + 1).saturating_sub(n_tasks));
    n_new.saturating_sub(reached)
}

/// [`learn`] after adding `n_new` tasks (the batch may name them). Atomic as [`learn`], the
/// growth included: on `Err` the model has neither the new tasks nor any row; an interrupt
/// keeps the rows completed and the new tasks they name, dropping the later ones (the model is
/// the one that learned the rows completed alone). The batch is validated before anything grows.
pub fn learn_grown<L: OnlineLearner + Clone>(
    model: &mut L,
    n_new: usize,
    rows: &Rows,
    tasks: &[i64],
    y: &[f64],
) -> Result<Vec<f64>> {
    if n_new == 0 {
        return learn(model, rows, tasks, y);
    }
    let n_tasks = grown_n_tasks(model.n_tasks(), n_new)?;
    validate_learn_batch(rows, tasks, y, n_tasks, model.n_features(), model.base_kernel())?;
    run_grown(model, n_new, tasks, |m| {
        let mut scores = Vec::with_capacity(rows.len());
        match learn_rows(m, rows, tasks, y, &mut scores) {
            Ok(()) => Ok(scores),
            Err(Error::Interrupted { .. }) => Err(Error::Interrupted { scores }),
            Err(e) => Err(e),
        }
    })
}

/// [`learn_rounds`] after adding `n_new` tasks; atomic as [`learn_grown`].
pub fn learn_rounds_grown<L: OnlineLearner + Clone>(
    model: &mut L,
    n_new: usize,
    rows: &Rows,
    tasks: &[i64],
    y: &[f64],
    rounds: &[i64],
) -> Result<Vec<f64>> {
    if n_new == 0 {
        return learn_rounds(model, rows, tasks, y, rounds);
    }
    let n_tasks = grown_n_tasks(model.n_tasks(), n_new)?;
    validate_learn_batch(rows, tasks, y, n_tasks, model.n_features(), model.base_kernel())?;
    validate_rounds(tasks, rounds, n_tasks)?;
    run_grown(model, n_new, tasks, |m| {
        let mut scores = Vec::with_capacity(rows.len());
        let outcome = if m.joint_rounds() {
            learn_joint_rounds(m, rows, tasks, y, rounds, &mut scores)
        } else {
            learn_rows(m, rows, tasks, y, &mut scores)
        };
        match outcome {
            Ok(()) => Ok(scores),
            Err(Error::Interrupted { .. }) => Err(Error::Interrupted { scores }),
            Err(e) => Err(e),
        }
    })
}

/// [`decision`] as if `n_new` tasks had been added (they score as tasks with no examples);
/// the model is not changed, and not copied when it scores new tasks itself
/// ([`OnlineLearner::scores_new_tasks`]).
pub fn decision_grown<L: OnlineLearner + Clone>(
    model: &L,
    n_new: usize,
    rows: &Rows,
    tasks: &[i64],
) -> Result<Vec<f64>> {
    if n_new > 0 && model.scores_new_tasks() {
        let n_tasks = grown_n_tasks(model.n_tasks(), n_new)?;
        validate_batch(rows, tasks, None, n_tasks, model.n_features())?;
        return score_rows(model, rows, tasks);
    }
    match grown(model, n_new)? {
        Some(work) => decision(&work, rows, tasks),
        None => decision(model, rows, tasks),
    }
}

/// Scores a batch without changing the model. An interrupt ([`crate::interrupt`]) abandons it.
pub fn decision<L: OnlineLearner + ?Sized>(model: &L, rows: &Rows, tasks: &[i64]) -> Result<Vec<f64>> {
    validate_batch(rows, tasks, None, model.n_tasks(), model.n_features())?;
    score_rows(model, rows, tasks)
}

/// The scores of validated rows.
fn score_rows<L: OnlineLearner + ?Sized>(model: &L, rows: &Rows, tasks: &[i64]) -> Result<Vec<f64>> {
    let mut scratch = Scratch::default();
    let n = rows.len();
    let width = model.lookahead().clamp(1, MAX_WINDOW);
    if width > 1 {
        // The model does not change: windows of rows scored in one pass each.
        let (mut window, mut window_tasks) = (Vec::with_capacity(width), Vec::with_capacity(width));
        let mut out = vec![0.0; n];
        for (start, chunk) in (0..n).step_by(width).zip(out.chunks_mut(width)) {
            crate::interrupt::check()?;
            window.clear();
            window.extend((start..start + chunk.len()).map(|r| rows.row(r)));
            window_tasks.clear();
            window_tasks.extend(tasks[start..start + chunk.len()].iter().map(|&task| task as usize));
            model.score_ahead(&window, &window_tasks, chunk, &mut scratch);
        }
        return Ok(out);
    }
    (0..n)
        .map(|t| {
            crate::interrupt::check()?;
            rows.prefetch_row(t + 1);
            if t + 1 < n {
                model.prefetch(rows.row(t + 1), tasks[t + 1] as usize);
            }
            Ok(model.score(rows.row(t), tasks[t] as usize, &mut scratch))
        })
        .collect()
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
pub(crate) fn is_update_mistake(y: f64, score: f64) -> bool {
    y * score <= 0.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    /// A learner that counts the rows it learned and refuses (before changing anything) a row
    /// whose first value is `poison`; each update takes `delay`.
    #[derive(Debug, Clone, PartialEq)]
    struct Counter {
        learned: Vec<f64>,
        poison: f64,
        joint: bool,
        delay: Duration,
    }

    impl Counter {
        fn new(joint: bool) -> Self {
            Counter {
                learned: Vec::new(),
                poison: 99.0,
                joint,
                delay: Duration::ZERO,
            }
        }
    }

    impl OnlineLearner for Counter {
        fn n_tasks(&self) -> usize {
            2
        }
        fn n_features(&self) -> usize {
            1
        }
        fn score(&self, _x: Row, _task: usize, _scratch: &mut Scratch) -> f64 {
            self.learned.len() as f64
        }
        fn update(&mut self, x: Row, _task: usize, _y: f64, _score: f64, _scratch: &mut Scratch) -> Result<()> {
            std::thread::sleep(self.delay);
            let mut first = 0.0;
            x.for_each(|j, v| first = if j == 0 { v } else { first });
            if first == self.poison {
                return Err(Error::Numerical(format!("refused row {first}")));
            }
            self.learned.push(first);
            Ok(())
        }
        fn joint_rounds(&self) -> bool {
            self.joint
        }
        fn n_updates(&self) -> u64 {
            self.learned.len() as u64
        }
        fn n_active(&self) -> usize {
            self.learned.len()
        }
    }

    fn dense(x: &[f64]) -> Rows<'_> {
        Rows::dense(x, x.len(), 1)
    }

    #[test]
    fn a_failure_at_a_later_row_leaves_the_model_as_before() {
        for joint in [false, true] {
            let mut model = Counter::new(joint);
            learn(&mut model, &dense(&[1.0, 2.0]), &[0, 1], &[1.0, 1.0]).unwrap();
            let before = model.clone();
            let x = [3.0, 4.0, 99.0, 5.0];
            let (tasks, y) = ([0, 1, 0, 1], [1.0; 4]);
            assert!(matches!(
                learn(&mut model, &dense(&x), &tasks, &y),
                Err(Error::Numerical(_))
            ));
            assert_eq!(model, before);
            let rounds = [0, 0, 1, 1];
            assert!(learn_rounds(&mut model, &dense(&x), &tasks, &y, &rounds).is_err());
            assert_eq!(model, before);
            // A one-row call relies on the learner's own check-before-write.
            assert!(learn(&mut model, &dense(&[99.0]), &[0], &[1.0]).is_err());
            assert_eq!(model, before);
            // And a clean batch is learned whole.
            let scores = learn_rounds(&mut model, &dense(&[3.0, 4.0, 5.0]), &[0, 1, 0], &[1.0; 3], &[0, 0, 1]).unwrap();
            assert_eq!(model.learned, [1.0, 2.0, 3.0, 4.0, 5.0]);
            assert_eq!(scores.len(), 3);
        }
    }

    #[test]
    fn an_interrupt_keeps_the_rows_completed_and_reports_them() {
        for (joint, rounds) in [(false, false), (false, true), (true, true)] {
            let mut model = Counter::new(joint);
            model.delay = Duration::from_millis(10);
            let x: Vec<f64> = (0..200).map(f64::from).collect();
            let tasks: Vec<i64> = (0..200).map(|t| t % 2).collect();
            let round_ids: Vec<i64> = (0..200).map(|t| t / 2).collect();
            let y = vec![1.0; 200];
            let start = Instant::now();
            let outcome = crate::interrupt::with_hook(Box::new(|| true), || {
                if rounds {
                    learn_rounds(&mut model, &dense(&x), &tasks, &y, &round_ids)
                } else {
                    learn(&mut model, &dense(&x), &tasks, &y)
                }
            });
            let Err(Error::Interrupted { scores }) = outcome else {
                panic!("not interrupted: {outcome:?}");
            };
            assert!(start.elapsed() < Duration::from_secs(2), "took {:?}", start.elapsed());
            assert!(!scores.is_empty() && scores.len() < 200);
            // The model holds exactly the rows reported, in order (whole rounds for joint ones).
            assert_eq!(model.learned, x[..scores.len()]);
            assert!(!joint || scores.len() % 2 == 0);
            assert_eq!(scores, (0..scores.len()).map(|r| r as f64).collect::<Vec<_>>());
        }
    }
}
pub mod defaults;
