//! Budget kernel Perceptrons on the multitask kernel (ALGORITHMS.md §4 intro, §4.1, §4.2).
//!
//! Both learners are from Cavallanti & Cesa-Bianchi, "Memory constraint online multitask
//! classification" (the budgeted multitask kernel Perceptrons). They score like the multitask
//! kernel Perceptron, `f_i(x) = sum_j beta_j T[i_j, i] K'(x_j, x)`, change state only on an
//! update-mistake `y f <= 0`, and never keep more than `budget` elements:
//!
//! - [`MTRBP`] (Alg. 3, after the Randomized Budget Perceptron of Cavallanti, Cesa-Bianchi &
//!   Gentile, MLJ 2007): on a mistake with a full active set, remove an element drawn uniformly
//!   from the B stored ones (one `below(B)` draw of the model's SplitMix64, over the active set in
//!   insertion order; the new example is not a candidate), then append `([x, i], y)`.
//! - [`MTFORG`] (eq. 3, the self-tuned Forgetron of Dekel, Shalev-Shwartz & Singer, SIAM J.
//!   Comput. 2008): on a mistake with a full set, tentatively append `([x, i], y)`, evaluate the
//!   updated function at the oldest element r (`phi_r`, all B+1 terms), shrink every coefficient
//!   by the largest `chi in (0, 1]` that keeps the accumulated damage `Q` below
//!   `15/32 c_G^2 M` (closed form of §4.2 step 5), add the damage to `Q`, and remove r.
//!   Coefficients are kept as `beta_j = s * b_j` with one global scale `s`, so a shrink is O(1);
//!   `s` is folded into the `b_j` when it drops below 1e-150.
//!
//! Cost per example: one pass over the stored rows for the score (the hot loop of
//! [`crate::kernel::RowStore::for_each_kernel`]); an eviction adds O(|S|) index moves (no kernel
//! evaluations) for MTRBP, and one more pass over the stored rows (`phi_r`) for MTFORG (A-C21).

use serde::{Deserialize, Serialize};

use crate::data::Row;
use crate::error::{invalid, Error, Result};
use crate::kernel::kernel_sum::{weighted_score, SparseIndex};
use crate::kernel::{BaseKernel, KernelKind, Query, Scratch, TaskKernel};
use crate::learner::spec::{check_at_least_one, check_positive};
use crate::learner::{is_update_mistake, ActiveSet, Ahead, Build, Checked, Event, KernelSetting, OnlineLearner};
use crate::rng::SplitMix64;
use crate::state::{check_counts, check_finite, ensure, param, CheckState};

/// When the global scale of MTFORG drops below this, it is folded into the coefficients (§4.2).
const FOLD_BELOW: f64 = 1e-150;

fn check_budget(budget: usize) -> Result<()> {
    check_at_least_one("budget", budget as u64)
}

/// What a restored state's settings must satisfy (the build checks, on the stored values).
fn check_common(n_features: usize, budget: usize) -> Result<()> {
    if n_features == 0 {
        return Err(invalid("n_features", "must be >= 1"));
    }
    check_budget(budget)
}

/// MTRBP, the multitask Randomized Budget Perceptron (Alg. 3, §4.1): a kernel Perceptron over
/// the multitask kernel that, once `budget` examples are stored, evicts one at random (seeded)
/// to store the next. Built with [`Build::build`] from [`MTRBPParams`], a task kernel and a
/// base kernel.
#[allow(clippy::upper_case_acronyms)] // the paper's name
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MTRBP {
    kernel: BaseKernel,
    tasks: TaskKernel,
    n_features: usize,
    budget: usize,
    set: ActiveSet,
    index: SparseIndex,
    rng: SplitMix64,
    n_updates: u64,
    n_seen: u64,
    n_evictions: u64,
    /// Insertion time (1-based example count) of the last evicted element; 0 before any.
    last_evicted_time: u64,
}

learner_params! {
    /// MTRBP's hyper-parameters; `Default` gives Python's `MTRBP()`.
    pub struct MTRBPParams {
        /// The largest number of stored examples (>= 1). Default 1000.
        pub budget: usize,
        /// The seed of the eviction generator (SplitMix64). Default 0.
        pub seed: u64,
    }

    fn check(&self) -> Result<()> {
        check_budget(self.budget)
    }
}

impl Build for MTRBP {
    type Params = MTRBPParams;
    type Setting<'a> = KernelSetting<'a>;

    fn from_checked(params: &Checked<MTRBPParams>, setting: &KernelSetting) -> Result<Self> {
        let n_features = setting.n_features;
        Ok(Self {
            kernel: setting.kernel,
            tasks: setting.task_kernel.clone(),
            n_features,
            budget: params.budget,
            set: ActiveSet::new(n_features, setting.sparse),
            index: SparseIndex::new(setting.sparse),
            rng: SplitMix64::new(params.seed),
            n_updates: 0,
            n_seen: 0,
            n_evictions: 0,
            last_evicted_time: 0,
        })
    }
}

impl MTRBP {
    /// The update; the victim's term leaves and the new element's enters the pending scores.
    fn update_with(&mut self, x: Row, task: usize, y: f64, score: f64, ahead: &mut Ahead) {
        self.n_seen += 1;
        if !is_update_mistake(y, score) {
            return;
        }
        self.n_updates += 1;
        self.index.ensure(&self.set);
        if self.set.len() >= self.budget {
            // Exactly one draw per eviction, over the B stored elements in insertion order.
            let position = self.rng.below(self.set.len() as u64) as usize;
            let slot = self.set.slot_at(position);
            self.last_evicted_time = self.set.time(slot);
            let (row, owner, beta) = (self.set.rows().row(slot), self.set.task(slot), self.set.beta(slot));
            ahead.add_term(&self.kernel, &self.tasks, row, owner, -beta);
            self.index.remove(&self.set, slot);
            self.set.remove_at(position);
            self.n_evictions += 1;
        }
        let slot = self.set.push(x, task, y, self.n_seen, y, &self.kernel);
        self.index.add(&self.set, slot);
        ahead.add_term(&self.kernel, &self.tasks, x, task, y);
    }

    /// The largest number of stored examples.
    pub fn budget(&self) -> usize {
        self.budget
    }

    /// The task kernel T.
    pub fn task_kernel(&self) -> &TaskKernel {
        &self.tasks
    }

    /// Number of stored examples evicted to keep within the budget.
    pub fn n_evictions(&self) -> u64 {
        self.n_evictions
    }

    /// The stored examples.
    pub fn active_set(&self) -> &ActiveSet {
        &self.set
    }
}

impl MTRBP {
    /// Same hyper-parameters as `other` (the seed is not kept: the generator's state moves on).
    pub fn same_settings(&self, other: &Self) -> bool {
        same_kernel_setting!(self, other) && self.budget == other.budget
    }
}

impl CheckState for MTRBP {
    fn check_state(&self) -> Result<()> {
        param(check_common(self.n_features, self.budget))?;
        self.kernel.check_state()?;
        self.tasks.check_state()?;
        let last = self
            .set
            .check_state(&self.kernel, self.tasks.n_tasks(), self.n_features)?;
        self.index.check_state(&self.set)?;
        check_counts("MTRBP", &[self.n_updates, self.n_seen, self.n_evictions])?;
        let n = self.set.len() as u64;
        // Every update-mistake appends one element; every eviction removes one.
        let consistent = n <= self.budget as u64
            && self.n_updates <= self.n_seen
            && self.n_evictions <= self.n_updates
            && n == self.n_updates - self.n_evictions
            && last <= self.n_seen
            && self.last_evicted_time <= self.n_seen;
        ensure(consistent, || {
            format!(
                "MTRBP counters are inconsistent: {n} stored (budget {}), {} updates, {} evictions, {} seen",
                self.budget, self.n_updates, self.n_evictions, self.n_seen
            )
        })
    }
}

impl OnlineLearner for MTRBP {
    // Adding tasks grows only the task kernel: the active set and the eviction draws do not
    // depend on the number of tasks.
    kernel_shape!(grows_task_kernel);

    fn score(&self, x: Row, task: usize, scratch: &mut Scratch) -> f64 {
        weighted_score(
            &self.set,
            &self.index,
            &self.kernel,
            &self.tasks,
            &Query::new(x, &self.kernel),
            task,
            scratch,
        )
    }

    fn update(&mut self, x: Row, task: usize, y: f64, score: f64, _scratch: &mut Scratch) -> Result<()> {
        self.update_with(x, task, y, score, &mut Ahead::none());
        Ok(())
    }

    active_set_ahead!(self, &self.index, 1.0);

    fn update_ahead(&mut self, event: Event, ahead: &mut Ahead, _scratch: &mut Scratch) -> Result<bool> {
        let Event { x, task, y, score } = event;
        self.update_with(x, task, y, score, ahead);
        Ok(true)
    }

    active_set_counters!(n_updates, set);

    fn diagnostics(&self) -> Vec<(&'static str, f64)> {
        vec![
            ("n_evictions", self.n_evictions as f64),
            ("last_evicted_time", self.last_evicted_time as f64),
            ("budget", self.budget as f64),
        ]
    }

    /// Removes the tasks' stored examples (their updates no longer count in `n_updates`). Before
    /// the budget first fills, on the disconnected graph, the other tasks' scores are those of
    /// the model learned without them, bit for bit; after it, the evictions their updates
    /// caused (random draws) are kept.
    fn forget_tasks(&mut self, tasks: &[usize]) -> Result<usize> {
        crate::learner::check_forget(tasks, self.tasks.n_tasks())?;
        let removed = self.set.remove_tasks(tasks);
        if removed > 0 {
            self.index.reset();
            self.n_updates -= removed as u64;
        }
        Ok(removed)
    }
}

/// The quantities of one MTFORG shrink step (§4.2 step 3), kept for diagnostics and tests.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ShrinkStep {
    /// Coefficients of `p(chi) = a chi^2 + b chi + c`.
    pub a: f64,
    /// See `a`.
    pub b: f64,
    /// See `a`.
    pub c: f64,
    /// `phi_r = f'_{i_r}(x_r)`, the score the evicted example gets from the shrunk model.
    pub phi: f64,
    /// `sigma = |beta_r|`, the evicted example's coefficient magnitude.
    pub sigma: f64,
    /// The shrinking coefficient chi*.
    pub chi: f64,
}

impl ShrinkStep {
    /// Step 4 and 5 of §4.2: the quadratic and its largest admissible root in (0, 1].
    pub fn solve(c_g: f64, sigma: f64, y_r: f64, phi: f64, q: f64, m: u64) -> Self {
        let a = c_g * c_g * sigma * sigma - 2.0 * sigma * y_r * phi;
        let b = 2.0 * c_g * sigma;
        let c = q - 15.0 / 32.0 * c_g * c_g * m as f64;
        let chi = if a + b + c <= 0.0 {
            1.0
        } else {
            // The numerically stable form of (-b + sqrt(b^2 - 4ac)) / 2a; valid for a = 0 and
            // a < 0 too. The discriminant is >= 0 in exact arithmetic (p(0) < 0 < p(1)).
            let disc = (b * b - 4.0 * a * c).max(0.0);
            (-2.0 * c) / (b + disc.sqrt())
        };
        Self {
            a,
            b,
            c,
            phi,
            sigma,
            chi,
        }
    }

    /// `p(chi*) = a chi*^2 + b chi* + c`.
    pub fn residual(&self) -> f64 {
        (self.a * self.chi + self.b) * self.chi + self.c
    }
}

/// MTFORG, the multitask self-tuned Forgetron (eq. 3, §4.2): a budget kernel Perceptron that
/// shrinks every coefficient before evicting the oldest example, keeping the removal damage
/// within its bound. Built with [`Build::build`] from [`MTFORGParams`], a task kernel and a
/// base kernel.
#[allow(clippy::upper_case_acronyms)] // the paper's name
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MTFORG {
    kernel: BaseKernel,
    tasks: TaskKernel,
    n_features: usize,
    budget: usize,
    /// The radius R in use: 1 for rbf and normalised kernels, else the user's (§2.5).
    radius: f64,
    c_g: f64,
    /// Stores `b_j`; the coefficient is `beta_j = scale * b_j`.
    set: ActiveSet,
    index: SparseIndex,
    scale: f64,
    /// Accumulated removal damage Q and update-mistake counter M.
    q: f64,
    m: u64,
    n_updates: u64,
    n_seen: u64,
    n_evictions: u64,
    n_folds: u64,
    /// Examples with `K'(x, x) > R^2` (the bound behind c_G does not hold for them).
    n_radius_exceeded: u64,
    last: Option<ShrinkStep>,
    /// Stored examples removed by [`OnlineLearner::forget_tasks`].
    n_forgotten: u64,
}

/// The largest c_G accepted: 15/32 c_G² M then stays far below `f64::MAX` for every M < 2⁶⁴.
pub const MAX_C_G: f64 = 1e100;

learner_params! {
    /// MTFORG's hyper-parameters; `Default` gives Python's `MTFORG()`.
    pub struct MTFORGParams {
        /// The largest number of stored examples (>= 1). Default 1000.
        pub budget: usize,
        /// R with `K'(x, x) <= R²` (> 0; Gaussian and normalised kernels use 1 whatever is
        /// given). Default 1.
        pub radius: f64,
    }

    fn check(&self) -> Result<()> {
        check_budget(self.budget)?;
        check_positive("radius", self.radius)
    }
}

impl Build for MTFORG {
    type Params = MTFORGParams;
    type Setting<'a> = KernelSetting<'a>;

    fn from_checked(params: &Checked<MTFORGParams>, setting: &KernelSetting) -> Result<Self> {
        let (kernel, tasks) = (setting.kernel, setting.task_kernel.clone());
        let (n_features, sparse, budget) = (setting.n_features, setting.sparse, params.budget);
        let radius = params.radius;
        let radius = if Self::bounded_by_one(&kernel) { 1.0 } else { radius };
        let c_g = tasks.c_g(radius);
        // The damage bound 15/32 c_G² M must stay finite for any mistake count M < 2⁶⁴.
        if c_g > MAX_C_G {
            return Err(invalid(
                "radius",
                format!("gives c_G = R sqrt(max_i T_ii) = {c_g:e}; it must be at most {MAX_C_G:e} (rescale the data)"),
            ));
        }
        if !(c_g > 0.0 && c_g.is_finite()) {
            return Err(Error::InvalidTaskRelation(format!(
                "MTFORG needs c_G = R sqrt(max_i T_ii) > 0, got {c_g} (max_i T_ii = {})",
                tasks.max_diag()
            )));
        }
        Ok(Self {
            kernel,
            tasks,
            n_features,
            budget,
            radius,
            c_g,
            set: ActiveSet::new(n_features, sparse),
            index: SparseIndex::new(sparse),
            scale: 1.0,
            q: 0.0,
            m: 0,
            n_updates: 0,
            n_seen: 0,
            n_evictions: 0,
            n_folds: 0,
            n_radius_exceeded: 0,
            last: None,
            n_forgotten: 0,
        })
    }
}

impl MTFORG {
    /// Kernels with `K'(x, x) <= 1` for every x, for which R = 1 (§2.5).
    fn bounded_by_one(kernel: &BaseKernel) -> bool {
        matches!(kernel.kind, KernelKind::Rbf { .. }) || kernel.normalize
    }

    /// `c_G = R sqrt(max_i T_ii)` (§2.5), the constant of the damage bound.
    pub fn c_g(&self) -> f64 {
        self.c_g
    }

    /// The radius R in use: 1 for Gaussian and normalised kernels, else the parameter's.
    pub fn radius(&self) -> f64 {
        self.radius
    }

    /// The largest number of stored examples.
    pub fn budget(&self) -> usize {
        self.budget
    }

    /// The task kernel T.
    pub fn task_kernel(&self) -> &TaskKernel {
        &self.tasks
    }

    /// Whether `K'(x, x) > R²` (beyond rounding): the instance breaks the damage bound's
    /// assumption (counted in `n_radius_exceeded`; the Python front end warns before learning it).
    pub fn exceeds_radius(&self, x: &Row) -> bool {
        self.kernel.self_value(x.sq_norm()) > self.radius * self.radius * (1.0 + 1e-12)
    }

    /// The accumulated damage Q and the update-mistake counter M.
    pub fn damage(&self) -> (f64, u64) {
        (self.q, self.m)
    }

    /// The last shrink step (None before the first eviction).
    pub fn last_shrink(&self) -> Option<ShrinkStep> {
        self.last
    }

    /// Number of stored examples evicted to keep within the budget.
    pub fn n_evictions(&self) -> u64 {
        self.n_evictions
    }

    /// The true coefficients `beta_j` in insertion order.
    pub fn coefficients(&self) -> Vec<f64> {
        self.set
            .slots_in_order()
            .map(|s| self.scale * self.set.beta(s))
            .collect()
    }

    fn raw_score(&self, q: &Query, task: usize, scratch: &mut Scratch) -> f64 {
        self.scale * weighted_score(&self.set, &self.index, &self.kernel, &self.tasks, q, task, scratch)
    }

    /// §4.2 step 3 with the new element already appended (|S'| = B + 1); the shrink and the
    /// removal are carried into the pending scores.
    /// On `Err` (a non-finite shrink step) nothing has been changed by this function.
    fn shrink_and_forget(&mut self, ahead: &mut Ahead, scratch: &mut Scratch) -> Result<()> {
        let slot_r = self.set.slot_at(0); // the oldest element: insertion order
        let task_r = self.set.task(slot_r);
        let y_r = self.set.label(slot_r);
        let sigma = (self.scale * self.set.beta(slot_r)).abs();
        let phi = {
            let row = self.set.rows().row(slot_r);
            let q = Query::new(row, &self.kernel);
            self.raw_score(&q, task_r, scratch)
        };
        let step = ShrinkStep::solve(self.c_g, sigma, y_r, phi, self.q, self.m);
        let (scale, q) = (self.scale * step.chi, self.q + (step.a * step.chi + step.b) * step.chi);
        if !(scale.is_finite() && q.is_finite() && step.chi.is_finite()) {
            return Err(Error::Numerical(format!(
                "MTFORG shrink step is not finite (chi {}, damage Q {q}, score of the oldest element {phi})",
                step.chi
            )));
        }
        self.scale = scale;
        self.q = q;
        ahead.scale(step.chi);
        let row_r = self.set.rows().row(slot_r);
        ahead.add_term(
            &self.kernel,
            &self.tasks,
            row_r,
            task_r,
            -self.scale * self.set.beta(slot_r),
        );
        self.index.remove(&self.set, slot_r);
        self.set.remove_at(0);
        self.n_evictions += 1;
        self.last = Some(step);
        if self.scale < FOLD_BELOW {
            let s = self.scale;
            self.set.scale_betas(s);
            self.scale = 1.0;
            self.n_folds += 1;
        }
        Ok(())
    }
}

impl MTFORG {
    /// The update; the new element's term, the shrink and the removal are carried into the
    /// pending scores.
    fn update_with(
        &mut self,
        x: Row,
        task: usize,
        y: f64,
        score: f64,
        ahead: &mut Ahead,
        scratch: &mut Scratch,
    ) -> Result<()> {
        let exceeded = self.exceeds_radius(&x);
        if is_update_mistake(y, score) {
            // beta_t = y, stored as b_t = y / s.
            self.index.ensure(&self.set);
            let slot = self.set.push(x, task, y, self.n_seen + 1, y / self.scale, &self.kernel);
            self.index.add(&self.set, slot);
            ahead.add_term(&self.kernel, &self.tasks, x, task, y);
            self.m += 1;
            if self.set.len() > self.budget {
                if let Err(e) = self.shrink_and_forget(ahead, scratch) {
                    self.m -= 1;
                    let newest = self.set.slot_at(self.set.len() - 1);
                    self.index.remove(&self.set, newest);
                    self.set.remove_at(self.set.len() - 1);
                    return Err(e);
                }
            }
            self.n_updates += 1;
        }
        self.n_seen += 1;
        if exceeded {
            self.n_radius_exceeded += 1;
        }
        Ok(())
    }

    /// Same hyper-parameters as `other`.
    pub fn same_settings(&self, other: &Self) -> bool {
        same_kernel_setting!(self, other) && self.budget == other.budget && self.radius == other.radius
    }
}

impl CheckState for MTFORG {
    fn check_state(&self) -> Result<()> {
        param(check_common(self.n_features, self.budget))?;
        self.kernel.check_state()?;
        self.tasks.check_state()?;
        let radius_ok =
            self.radius.is_finite() && self.radius > 0.0 && (!Self::bounded_by_one(&self.kernel) || self.radius == 1.0);
        ensure(radius_ok, || format!("MTFORG radius {} is invalid", self.radius))?;
        let c_g = self.tasks.c_g(self.radius);
        let c_g_ok = c_g > 0.0 && c_g.is_finite() && (self.c_g - c_g).abs() <= 1e-12 * c_g;
        ensure(c_g_ok, || {
            format!("MTFORG c_G {} differs from the task kernel's {c_g}", self.c_g)
        })?;
        let last = self
            .set
            .check_state(&self.kernel, self.tasks.n_tasks(), self.n_features)?;
        self.index.check_state(&self.set)?;
        ensure(
            self.scale.is_finite() && (FOLD_BELOW..=1.0).contains(&self.scale),
            || format!("MTFORG scale {} is outside [{FOLD_BELOW:e}, 1]", self.scale),
        )?;
        // Q <= 15/32 c_G^2 M (the Forgetron's invariant), with room for rounding.
        let bound = 15.0 / 32.0 * self.c_g * self.c_g * self.m as f64;
        ensure(self.q.is_finite() && self.q <= bound * (1.0 + 1e-9) + 1e-12, || {
            format!("MTFORG damage Q = {} exceeds 15/32 c_G^2 M = {bound}", self.q)
        })?;
        check_counts(
            "MTFORG",
            &[
                self.m,
                self.n_updates,
                self.n_seen,
                self.n_evictions,
                self.n_folds,
                self.n_radius_exceeded,
            ],
        )?;
        let n = self.set.len() as u64;
        // Every update-mistake appends; beyond the budget each also removes the oldest.
        // Forgotten examples leave room that later updates fill before evictions resume.
        let filled = if self.n_forgotten == 0 {
            n == self.n_updates.min(self.budget as u64)
        } else {
            n <= self.budget as u64
        };
        let consistent = self.m == self.n_updates
            && self.n_updates <= self.n_seen
            && filled
            && self.n_forgotten <= self.n_updates - n
            && self.n_evictions == self.n_updates - n - self.n_forgotten
            && self.n_folds <= self.n_evictions
            && self.n_radius_exceeded <= self.n_seen
            && last <= self.n_seen
            && self.last.is_some() == (self.n_evictions > 0);
        ensure(consistent, || {
            format!(
                "MTFORG counters are inconsistent: {n} stored (budget {}), {} updates, M = {}, {} evictions, {} seen",
                self.budget, self.n_updates, self.m, self.n_evictions, self.n_seen
            )
        })?;
        if let Some(step) = &self.last {
            check_finite(
                "MTFORG's last shrink step",
                &[step.a, step.b, step.c, step.phi, step.sigma],
            )?;
            ensure((0.0..=1.0).contains(&step.chi), || {
                format!("MTFORG's last shrink coefficient {} is outside [0, 1]", step.chi)
            })?;
        }
        Ok(())
    }
}

impl OnlineLearner for MTFORG {
    kernel_shape!(grows);

    fn score(&self, x: Row, task: usize, scratch: &mut Scratch) -> f64 {
        self.raw_score(&Query::new(x, &self.kernel), task, scratch)
    }

    /// The shrink step is computed after the new element is appended; if it is not finite the
    /// append is undone (the newest element is removed exactly) and nothing else has changed.
    fn update(&mut self, x: Row, task: usize, y: f64, score: f64, scratch: &mut Scratch) -> Result<()> {
        self.update_with(x, task, y, score, &mut Ahead::none(), scratch)
    }

    active_set_ahead!(self, &self.index, self.scale);

    /// On `Err` the pending scores are left half-corrected: the batch functions abandon them.
    fn update_ahead(&mut self, event: Event, ahead: &mut Ahead, scratch: &mut Scratch) -> Result<bool> {
        let Event { x, task, y, score } = event;
        self.update_with(x, task, y, score, ahead, scratch)?;
        Ok(true)
    }

    active_set_counters!(n_updates, set);

    fn diagnostics(&self) -> Vec<(&'static str, f64)> {
        let last = self.last;
        let get = |f: fn(&ShrinkStep) -> f64, default: f64| last.as_ref().map_or(default, f);
        vec![
            ("n_evictions", self.n_evictions as f64),
            ("budget", self.budget as f64),
            ("forgetron_q", self.q),
            ("forgetron_m", self.m as f64),
            ("c_g", self.c_g),
            ("radius", self.radius),
            ("scale", self.scale),
            ("n_folds", self.n_folds as f64),
            ("n_radius_exceeded", self.n_radius_exceeded as f64),
            ("last_shrink", get(|s| s.chi, 1.0)),
            ("last_a", get(|s| s.a, 0.0)),
            ("last_b", get(|s| s.b, 0.0)),
            ("last_c", get(|s| s.c, 0.0)),
            ("last_phi", get(|s| s.phi, 0.0)),
            ("last_sigma", get(|s| s.sigma, 0.0)),
            ("n_forgotten", self.n_forgotten as f64),
        ]
    }

    /// Removes the tasks' stored examples. The shrinks of the coefficients that their updates
    /// caused stay (every stored coefficient was scaled).
    fn forget_tasks(&mut self, tasks: &[usize]) -> Result<usize> {
        self.forget_stored(tasks)
    }
}

impl MTFORG {
    /// Removes the tasks' stored examples ([`OnlineLearner::forget_tasks`]); the common scale,
    /// the damage Q and M keep counting every update.
    fn forget_stored(&mut self, tasks: &[usize]) -> Result<usize> {
        crate::learner::check_forget(tasks, self.tasks.n_tasks())?;
        let removed = self.set.remove_tasks(tasks);
        if removed > 0 {
            self.index.reset();
            self.n_forgotten += removed as u64;
        }
        Ok(removed)
    }

    /// Adds `n` tasks: only the task kernel grows. `max_i T_ii`, hence c_G and the damage
    /// bound, are unchanged by [`TaskKernel::grow`], so the shrink steps continue as before.
    /// Atomic.
    fn grow_tasks(&mut self, n: usize) -> Result<()> {
        let mut tasks = self.tasks.clone();
        tasks.grow(n)?;
        debug_assert_eq!(tasks.c_g(self.radius), self.c_g);
        self.tasks = tasks;
        Ok(())
    }

    /// Undoes [`MTFORG::grow_tasks`] of the last `n` tasks, which hold no example.
    fn shrink_tasks(&mut self, n: usize) {
        self.tasks.shrink(n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::Rows;
    use crate::learner::test_support::stream;
    use crate::learner::NoParams;
    use crate::learner::{learn, MTPerceptron};

    fn random_stream(n: usize, d: usize, k: usize, seed: u64) -> (Vec<f64>, Vec<i64>, Vec<f64>) {
        stream(n, d, k, seed, |x, _, noise| x[0] + 0.3 * x[1] + 0.5 * noise > 0.0)
    }

    /// A shrink step that is not finite (here c_G forced past its cap) is refused after the
    /// append, which is then undone exactly: the model equals its state before the call.
    #[test]
    fn a_non_finite_shrink_undoes_the_append() {
        let (x, tasks, y) = random_stream(40, 3, 2, 11);
        let kernel = BaseKernel::linear();
        let mut m = MTFORG::build(
            &MTFORGParams { budget: 2, radius: 1.0 },
            &KernelSetting::new(&TaskKernel::complete(2).unwrap(), kernel, 3),
        )
        .unwrap();
        let mut scratch = Scratch::default();
        let mut t = 0;
        while m.set.len() < 2 {
            let row = Row::Dense(&x[t * 3..(t + 1) * 3]);
            m.learn_one(row, tasks[t] as usize, y[t], &mut scratch).unwrap();
            t += 1;
        }
        m.c_g = 1e300;
        let before = m.clone();
        let row = Row::Dense(&x[t * 3..(t + 1) * 3]);
        let err = m.update(row, tasks[t] as usize, -y[t], 0.0, &mut scratch).unwrap_err();
        assert!(err.to_string().contains("MTFORG shrink step is not finite"), "{err}");
        assert_eq!(m, before);
        assert!(MTFORG::build(
            &MTFORGParams {
                budget: 2,
                radius: 1e101
            },
            &KernelSetting::new(&TaskKernel::complete(2).unwrap(), kernel, 3)
        )
        .is_err());
    }

    fn rows(x: &[f64], d: usize) -> Rows<'_> {
        Rows::dense(x, x.len() / d, d)
    }

    #[test]
    fn large_budgets_equal_the_multitask_perceptron() {
        let (n, d, k) = (300, 5, 3);
        let (x, tasks, y) = random_stream(n, d, k, 1);
        let r = rows(&x, d);
        let kernel = BaseKernel::rbf(0.8).unwrap();
        let tk = TaskKernel::complete(k).unwrap();
        let mut p = MTPerceptron::build(&NoParams, &KernelSetting::new(&tk.clone(), kernel, d)).unwrap();
        let mut a = MTRBP::build(&MTRBPParams { budget: n, seed: 3 }, &KernelSetting::new(&tk, kernel, d)).unwrap();
        let mut b = MTFORG::build(
            &MTFORGParams { budget: n, radius: 1.0 },
            &KernelSetting::new(&tk, kernel, d),
        )
        .unwrap();
        let sp = learn(&mut p, &r, &tasks, &y).unwrap();
        let sa = learn(&mut a, &r, &tasks, &y).unwrap();
        let sb = learn(&mut b, &r, &tasks, &y).unwrap();
        for ((p, a), b) in sp.iter().zip(&sa).zip(&sb) {
            assert!((p - a).abs() <= 1e-12 * p.abs().max(1.0), "{p} {a}");
            assert!((p - b).abs() <= 1e-12 * p.abs().max(1.0), "{p} {b}");
        }
        assert_eq!(p.n_active(), a.n_active());
        assert_eq!(p.n_active(), b.n_active());
        assert_eq!(a.n_evictions() + b.n_evictions(), 0);
    }

    #[test]
    fn budget_is_never_exceeded_and_seeds_matter() {
        let (n, d, k) = (400, 4, 2);
        let (x, tasks, y) = random_stream(n, d, k, 2);
        let kernel = BaseKernel::rbf(2.0).unwrap();
        let tk = TaskKernel::complete(k).unwrap();
        let run = |seed| {
            let mut m = MTRBP::build(&MTRBPParams { budget: 10, seed }, &KernelSetting::new(&tk, kernel, d)).unwrap();
            let mut scratch = Scratch::default();
            let mut evicted = Vec::new();
            for t in 0..n {
                let row = Row::Dense(&x[t * d..(t + 1) * d]);
                m.learn_one(row, tasks[t] as usize, y[t], &mut scratch).unwrap();
                assert!(m.n_active() <= 10);
                evicted.push(m.last_evicted_time);
            }
            (evicted, m)
        };
        let (e1, m1) = run(5);
        let (e2, m2) = run(5);
        let (e3, _) = run(6);
        assert_eq!(e1, e2);
        assert_eq!(m1, m2);
        assert_ne!(e1, e3);
        assert!(m1.n_evictions() > 10);
    }

    #[test]
    fn forgetron_keeps_its_invariant_and_folds() {
        let (n, d, k) = (2000, 3, 3);
        let (x, tasks, y) = random_stream(n, d, k, 9);
        let kernel = BaseKernel::rbf(3.0).unwrap();
        let tk = TaskKernel::from_edges(k, &[(0, 1, 1.0)]).unwrap();
        let mut m = MTFORG::build(
            &MTFORGParams { budget: 4, radius: 7.0 },
            &KernelSetting::new(&tk, kernel, d),
        )
        .unwrap();
        assert_eq!(m.radius(), 1.0, "rbf forces R = 1");
        let mut scratch = Scratch::default();
        for t in 0..n {
            let row = Row::Dense(&x[t * d..(t + 1) * d]);
            m.learn_one(row, tasks[t] as usize, y[t], &mut scratch).unwrap();
            assert!(m.n_active() <= 4);
            let (q, mm) = m.damage();
            assert!(q <= 15.0 / 32.0 * m.c_g() * m.c_g() * mm as f64 * (1.0 + 1e-12));
            if let Some(s) = m.last_shrink() {
                assert!(s.chi > 0.0 && s.chi <= 1.0);
                assert!(s.residual() <= 1e-12 * s.c.abs().max(1.0));
            }
        }
        assert!(m.n_evictions() > 100);
    }

    #[test]
    fn forgetron_rejects_a_zero_task_kernel() {
        // L^+ of a graph without edges is the zero matrix: c_G = 0.
        let tk = TaskKernel::laplacian_pinv(3, &[]).unwrap();
        let err = MTFORG::build(
            &MTFORGParams { budget: 5, radius: 1.0 },
            &KernelSetting::new(&tk, BaseKernel::linear(), 2),
        )
        .unwrap_err();
        assert!(matches!(err, Error::InvalidTaskRelation(_)));
        assert!(MTRBP::build(
            &MTRBPParams { budget: 0, seed: 0 },
            &KernelSetting::new(&TaskKernel::complete(2).unwrap(), BaseKernel::linear(), 2)
        )
        .is_err());
    }

    #[test]
    fn shrink_formula_matches_brute_force() {
        let mut rng = SplitMix64::new(4);
        let mut unif = || (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        for _ in 0..2000 {
            let c_g = 0.2 + unif();
            let sigma = 3.0 * unif();
            let y_r = if unif() < 0.5 { -1.0 } else { 1.0 };
            let phi = 6.0 * unif() - 3.0;
            let m = 1 + (unif() * 20.0) as u64;
            let q = 15.0 / 32.0 * c_g * c_g * (m - 1) as f64 * unif();
            let s = ShrinkStep::solve(c_g, sigma, y_r, phi, q, m);
            assert!(s.chi > 0.0 && s.chi <= 1.0);
            assert!(s.residual() <= 1e-12 * s.c.abs().max(1.0));
            // No admissible chi above chi*: p > 0 on a grid of (chi*, 1].
            if s.chi < 1.0 {
                for g in 1..=100 {
                    let chi = s.chi + (1.0 - s.chi) * g as f64 / 100.0;
                    assert!((s.a * chi + s.b) * chi + s.c > -1e-12);
                }
            }
        }
    }
}
