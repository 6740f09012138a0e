//! Budget Projectrons for multitask learning (ALGORITHMS.md §4.3–§4.5; Cavallanti &
//! Cesa-Bianchi, "Memory Constraint Online Multitask Classification", Alg. 1 and Alg. 2; the
//! Projectron of Orabona, Keshet & Caputo, JMLR 2009; budget removal by projection as in Wang,
//! Crammer & Vucetic, ICML 2010).
//!
//! **MTBPRJ** ([`MTBPRJ`], Alg. 1) keeps `f_i(x) = Σ_j β_j T[i_j, i] K'(x_j, x)`. On an
//! update-mistake it projects `K([x,i], ·)` onto the span of the active set in the multitask RKHS:
//! if the residual is at most `η` the projection is added to the weights (`β += y α`) and the set
//! is unchanged, even when full (A-C5); otherwise `[x, i]` is inserted with `β = y`, and if the set
//! was full the old element with the smallest `|β_j| / sqrt(Q_jj)` (the RKHS norm of what removing
//! it loses, A-C3; the new element is not a candidate, A-C4; ties to the oldest) is folded into
//! the others by its leave-one-out projection and removed.
//!
//! **MTBPRJ-2** ([`MTBPRJ2`], Alg. 2) projects in the base-kernel space (task markers ignored) and
//! keeps one weight per (task, dictionary element): `f_i(x) = Σ_j W_ij K'(x_j, x)`. A projection
//! adds `y T[l, i] α_j` to every task `l` of the mistaken task's component; an insertion sets the
//! new column to `y T[:, i]`; budget removal scores `‖W_{:,j}‖₂ / sqrt(Q'_jj)` and folds
//! `W_{lj} += γ_j W_{lr}` (A-C7; `alg2_literal_line14` restores the printed extra factor
//! `T[l, i_j]` for ablations). Weights live in per-component blocks allocated on the
//! component's first update (A-C8).
//!
//! Both use [`InverseGram`] with the safeguards of §4.3. The inverse-Gram positions are the
//! `RowStore` slots of the active set (both swap-remove), and the active set keeps the insertion
//! order seen from outside.

use serde::{Deserialize, Serialize};

use crate::alloc::Need;
use crate::data::Row;
use crate::error::{invalid, Error, Result};
use crate::kernel::kernel_sum::{dense_coef_sum, dense_kernel_row, rows_scores, weighted_score, window_width, SparseIndex};
use crate::kernel::{BaseKernel, Query, Scratch, TaskKernel};
use crate::learner::{check_nonnegative, is_update_mistake, ActiveSet, Build, OnlineLearner, ParamGuard, Setting};
use crate::linalg::InverseGram;
use crate::state::{check_counts, check_finite, check_len, checked_size, ensure, param, CheckState};

/// A never-built sparse index: sparse Projectron sets take the row-store loop.
static NO_INDEX: SparseIndex = SparseIndex::disabled();

/// What the projection threshold `η` is compared with (A-C6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Threshold {
    /// `δ ≤ η` (the papers' text; the default).
    Norm,
    /// `δ² ≤ η` (Orabona's MATLAB Projectron++).
    Squared,
}

impl Threshold {
    pub fn parse(name: &str) -> Result<Self> {
        match name {
            "norm" => Ok(Self::Norm),
            "squared" => Ok(Self::Squared),
            other => Err(invalid(
                "threshold_on",
                format!("must be \"norm\" or \"squared\", got {other:?}"),
            )),
        }
    }

    /// The threshold in squared units.
    fn squared(self, eta: f64) -> f64 {
        match self {
            Self::Norm => eta * eta,
            Self::Squared => eta,
        }
    }

    /// The projection threshold in squared units for a candidate of squared norm `kappa`:
    /// `min(η², ρ² κ)` (`min(η, ρ² κ)` for `"squared"`). Since `δ² ≤ κ`, an absolute threshold
    /// `η² ≥ κ` would make every candidate projectable and nothing would ever be inserted (the
    /// complete graph's T_ii = 2/(k+1) < η² for k ≥ 2/η²); the cap keeps the test meaningful:
    /// a residual larger than ρ = 1/2 of the candidate's own norm (an angle over 30° to the span)
    /// always qualifies for insertion.
    /// When `ρ √κ ≥ η` (every Table 1 setting) it is the plain η test. docs/projectron.md.
    pub fn squared_for(self, eta: f64, kappa: f64) -> f64 {
        self.squared(eta).min(PROJECTION_CAP_REL * PROJECTION_CAP_REL * kappa)
    }
}

/// ρ of [`Threshold::squared_for`]: the projection threshold never exceeds ρ √κ.
pub const PROJECTION_CAP_REL: f64 = 0.5;

learner_params! {
    /// The settings both Projectrons share: MTBPRJ's hyper-parameters (part of its state).
    pub struct ProjectronParams {
        pub budget: usize,
        pub eta: f64,
        #[cfg_attr(feature = "python", pyo3(item("threshold_on")))]
        pub threshold: Threshold,
    }

    fn check(&self) -> Result<()> {
        let (budget, eta) = (self.budget, self.eta);
        if budget < 1 {
            return Err(invalid("budget", format!("must be >= 1, got {budget}")));
        }
        check_nonnegative("eta", eta)
    }
}

impl ProjectronParams {
    pub fn new(budget: usize, eta: f64, threshold: Threshold) -> Result<Self> {
        let params = Self { budget, eta, threshold };
        params.check()?;
        Ok(params)
    }
}

learner_params! {
    /// MTBPRJ2's hyper-parameters: the shared ones and the A-C7 ablation switch.
    pub struct MTBPRJ2Params {
        pub budget: usize,
        pub eta: f64,
        #[cfg_attr(feature = "python", pyo3(item("threshold_on")))]
        pub threshold: Threshold,
        /// Algorithm 2's line 14 as printed (§4.5, A-C7).
        pub alg2_literal_line14: bool,
    }

    fn check(&self) -> Result<()> {
        self.shared().check()
    }
}

impl MTBPRJ2Params {
    /// The settings shared with MTBPRJ.
    pub fn shared(&self) -> ProjectronParams {
        ProjectronParams {
            budget: self.budget,
            eta: self.eta,
            threshold: self.threshold,
        }
    }

    /// MTBPRJ's settings with the A-C7 ablation switch.
    pub fn from_shared(shared: ProjectronParams, alg2_literal_line14: bool) -> Self {
        let ProjectronParams { budget, eta, threshold } = shared;
        Self {
            budget,
            eta,
            threshold,
            alg2_literal_line14,
        }
    }
}

/// Counters both learners report.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Counters {
    n_updates: u64,
    n_seen: u64,
    n_projections: u64,
    n_insertions: u64,
    n_evictions: u64,
}

/// What an update-mistake does, decided from `δ²`.
enum Step {
    Project,
    Insert,
    Replace,
}

fn check_features(n_features: usize) -> Result<()> {
    if n_features == 0 {
        return Err(Error::InvalidParameter {
            name: "n_features",
            reason: "must be >= 1".into(),
        });
    }
    Ok(())
}

/// The insertion-order position of `slot`.
fn position_of(set: &ActiveSet, slot: usize) -> usize {
    set.slots_in_order().position(|s| s == slot).unwrap_or(0)
}

/// `argmin_j score(j)` over the slots of `set`, ties to the smallest insertion time.
fn argmin_oldest(set: &ActiveSet, mut score: impl FnMut(usize) -> f64) -> usize {
    let mut best = (f64::INFINITY, u64::MAX, 0usize);
    let mut any = false;
    for slot in 0..set.len() {
        let s = score(slot);
        let t = set.time(slot);
        if !any || s < best.0 || (s == best.0 && t < best.1) {
            best = (s, t, slot);
            any = true;
        }
    }
    best.2
}

/// Removal score `magnitude / sqrt(Q_jj)`; a non-positive `Q_jj` (which the safeguards rule out)
/// would make the element look unremovable rather than free.
#[inline]
fn removal_score(magnitude: f64, qjj: f64) -> f64 {
    if qjj > 0.0 {
        magnitude / qjj.sqrt()
    } else {
        f64::INFINITY
    }
}

impl Counters {
    /// Every insertion adds one element and every eviction removes one, so `n` elements remain.
    fn check_state(&self, n: usize, last_time: u64) -> Result<()> {
        let c = self;
        check_counts(
            "Projectron",
            &[c.n_updates, c.n_seen, c.n_projections, c.n_insertions, c.n_evictions],
        )?;
        let ok = c.n_updates <= c.n_seen
            && c.n_projections
                .checked_add(c.n_insertions)
                .is_some_and(|s| s <= c.n_updates)
            && c.n_evictions <= c.n_insertions
            && n as u64 == c.n_insertions - c.n_evictions
            && last_time <= c.n_seen;
        ensure(ok, || {
            format!(
                "Projectron counters are inconsistent: {n} stored, {} seen, {} updates, {} projections, {} insertions, {} evictions",
                c.n_seen, c.n_updates, c.n_projections, c.n_insertions, c.n_evictions
            )
        })
    }
}

/// Restored kernel, task kernel, features and parameters of a Projectron.
fn check_settings(kernel: &BaseKernel, tasks: &TaskKernel, n_features: usize, params: &ProjectronParams) -> Result<()> {
    kernel.check_state()?;
    tasks.check_state()?;
    param(check_features(n_features))?;
    param(ProjectronParams::new(params.budget, params.eta, params.threshold)).map(|_| ())
}

// ---------------------------------------------------------------------------------------------
// MTBPRJ
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MTBPRJ {
    kernel: BaseKernel,
    tasks: TaskKernel,
    n_features: usize,
    params: ProjectronParams,
    set: ActiveSet,
    gram: InverseGram,
    counters: Counters,
}

impl Build for MTBPRJ {
    type Params = ProjectronParams;

    fn from_checked(params: &ProjectronParams, setting: &Setting) -> Result<Self> {
        Ok(Self {
            kernel: setting.kernel()?,
            tasks: setting.task_kernel()?.clone(),
            n_features: setting.n_features,
            params: *params,
            set: ActiveSet::new(setting.n_features, setting.sparse),
            gram: InverseGram::new(params.budget.saturating_add(1)),
            counters: Counters::default(),
        })
    }
}

impl MTBPRJ {
    pub fn active_set(&self) -> &ActiveSet {
        &self.set
    }

    pub fn gram(&self) -> &InverseGram {
        &self.gram
    }

    /// Recomputes the inverse Gram matrix from scratch now (INV-Q2).
    pub fn force_rebuild(&mut self) {
        self.gram.force_rebuild();
    }

    pub fn n_projections(&self) -> u64 {
        self.counters.n_projections
    }

    pub fn n_evictions(&self) -> u64 {
        self.counters.n_evictions
    }

    /// `T[i_j, i_k] K'(x_j, x_k)` between two stored slots.
    pub fn gram_entry(&self, a: usize, b: usize) -> f64 {
        let t = self.tasks.get(self.set.task(a), self.set.task(b));
        if t == 0.0 {
            return 0.0;
        }
        t * self.set.rows().kernel_between(&self.kernel, a, b)
    }

    /// Coefficients β in insertion order.
    pub fn betas_in_order(&self) -> Vec<f64> {
        self.set.slots_in_order().map(|s| self.set.beta(s)).collect()
    }
}

impl MTBPRJ {
    /// Same hyper-parameters as `other`.
    pub fn same_settings(&self, other: &Self) -> bool {
        same_kernel_setting!(self, other) && self.params == other.params
    }
}

impl CheckState for MTBPRJ {
    fn check_state(&self) -> Result<()> {
        check_settings(&self.kernel, &self.tasks, self.n_features, &self.params)?;
        let last = self
            .set
            .check_state(&self.kernel, self.tasks.n_tasks(), self.n_features)?;
        let n = self.set.len();
        ensure(n <= self.params.budget, || {
            format!("{n} stored elements exceed the budget {}", self.params.budget)
        })?;
        self.gram.check_state(n, self.params.budget.saturating_add(1))?;
        self.counters.check_state(n, last)
    }
}

impl OnlineLearner for MTBPRJ {
    // Adding tasks grows only the task kernel: the dictionary's Gram entries
    // `T[i_a, i_b] K'(x_a, x_b)` keep their values under `TaskKernel::grow`.
    kernel_shape!(grows_task_kernel);

    fn score(&self, x: Row, task: usize, scratch: &mut Scratch) -> f64 {
        // The kernel sums' vectorised path (no sparse index: a Projectron's set is small and
        // changes at every insertion).
        let q = Query::new(x, &self.kernel);
        weighted_score(&self.set, &NO_INDEX, &self.kernel, &self.tasks, &q, task, scratch)
    }

    // Scores made ahead; an update (which may change every coefficient) restarts the window
    // (the default `update_ahead`: every change of the model counts in `n_updates`).
    fn lookahead(&self) -> usize {
        window_width(&self.set, &self.tasks)
    }

    fn score_ahead(&self, rows: &[Row], tasks: &[usize], out: &mut [f64], scratch: &mut Scratch) {
        rows_scores(&self.set, &NO_INDEX, &self.kernel, &self.tasks, rows, tasks, out, scratch);
    }

    /// Everything is computed and checked (finiteness, memory) before the first write.
    fn update(&mut self, x: Row, task: usize, y: f64, score: f64, scratch: &mut Scratch) -> Result<()> {
        if !is_update_mistake(y, score) {
            self.counters.n_seen += 1;
            return Ok(());
        }
        let q = Query::new(x, &self.kernel);
        let kz = self
            .set
            .multitask_kernel_row(&self.kernel, &self.tasks, &q, task, scratch);
        let kappa = self.tasks.get(task, task) * self.kernel.self_value(q.sq_norm);
        let mut alpha = Vec::with_capacity(kz.len());
        let d2 = self.gram.project(&kz, kappa, &mut alpha);
        let step = decide(&self.gram, &self.params, kappa, d2, &alpha, self.set.len())?;
        let time = self.counters.n_seen + 1;
        match step {
            Step::Project => {
                let beta = self.set.beta_mut();
                check_step_finite(beta.iter().zip(&alpha).map(|(b, a)| b + y * a), "projection")?;
                beta.iter_mut().zip(&alpha).for_each(|(b, a)| *b += y * a);
                self.counters.n_projections += 1;
            }
            Step::Insert => {
                self.gram.reserve(self.set.len() + 1, self.params.budget)?;
                self.counters.n_insertions += 1;
                self.set.push(x, task, y, time, y, &self.kernel);
                self.gram.append(&kz, kappa, &alpha, d2);
            }
            Step::Replace => {
                let n = self.set.len();
                // Leave-one-out scores of the enlarged set, old elements only (A-C3, A-C4).
                let r = argmin_oldest(&self.set, |j| {
                    removal_score(self.set.beta(j).abs(), self.gram.tentative_diag(&alpha, d2, j))
                });
                let mut col = Vec::with_capacity(n + 1);
                self.gram.tentative_column(&alpha, d2, r, &mut col);
                let beta_r = self.set.beta(r);
                let qrr = col[r];
                let folded: Vec<f64> = (0..n)
                    .map(|l| {
                        let b = self.set.beta(l);
                        if l != r {
                            b + beta_r * (-col[l] / qrr)
                        } else {
                            b
                        }
                    })
                    .collect();
                let beta_z = y + beta_r * (-col[n] / qrr);
                check_step_finite(folded.iter().copied().chain([beta_z]), "fold of the removed element")?;
                self.counters.n_insertions += 1;
                self.counters.n_evictions += 1;
                self.set.beta_mut().copy_from_slice(&folded);
                // Push first, then swap-remove r: the new element lands in slot r, as in the engine.
                self.set.push(x, task, y, time, beta_z, &self.kernel);
                let pos = position_of(&self.set, r);
                self.set.remove_at(pos);
                self.gram.append_and_remove(&kz, kappa, &alpha, d2, r);
            }
        }
        self.counters.n_seen += 1;
        self.counters.n_updates += 1;
        Ok(())
    }

    active_set_counters!(counters.n_updates, set);

    fn diagnostics(&self) -> Vec<(&'static str, f64)> {
        diagnostics(&self.counters, &self.gram)
    }
}

fn decide(gram: &InverseGram, params: &ProjectronParams, kappa: f64, d2: f64, alpha: &[f64], n: usize) -> Result<Step> {
    // A non-finite candidate (an overflowing kernel) is refused before anything changes.
    let finite = d2.is_finite() && kappa.is_finite() && alpha.iter().all(|a| a.is_finite());
    if !finite {
        return Err(Error::Numerical(format!(
            "projectron candidate is not finite (κ = {kappa:e}, δ² = {d2:e}); the kernel overflows on this row"
        )));
    }
    // N1: insert only if δ² > max(thr², ε_ins κ).
    let thr2 = params.threshold.squared_for(params.eta, kappa);
    Ok(if d2 <= gram.min_schur(kappa, thr2) {
        Step::Project
    } else if n < params.budget {
        Step::Insert
    } else {
        Step::Replace
    })
}

/// Refuses a step whose new coefficients would not be finite.
fn check_step_finite(values: impl IntoIterator<Item = f64>, what: &str) -> Result<()> {
    if values.into_iter().all(f64::is_finite) {
        Ok(())
    } else {
        Err(Error::Numerical(format!(
            "projectron {what} would not be finite (overflow)"
        )))
    }
}

fn diagnostics(c: &Counters, gram: &InverseGram) -> Vec<(&'static str, f64)> {
    vec![
        ("n_projections", c.n_projections as f64),
        ("n_insertions", c.n_insertions as f64),
        ("n_evictions", c.n_evictions as f64),
        ("n_rebuilds", gram.n_rebuilds() as f64),
        ("n_drift_probes", gram.n_probes() as f64),
        ("n_failed_rebuilds", gram.n_failed_rebuilds() as f64),
        ("jitter", gram.jitter()),
    ]
}

// ---------------------------------------------------------------------------------------------
// MTBPRJ-2
// ---------------------------------------------------------------------------------------------

/// The weights of one connected component: `|c|` task rows, row stride `cap` (one column per
/// dictionary slot).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Block {
    members: Vec<u32>,
    w: Vec<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MTBPRJ2 {
    kernel: BaseKernel,
    tasks: TaskKernel,
    n_features: usize,
    params: ProjectronParams,
    literal_line14: bool,
    /// Dictionary instances with their task and insertion time (the β column is unused).
    dict: ActiveSet,
    gram: InverseGram,
    /// One optional block per component, and each task's row within its block.
    blocks: Vec<Option<Block>>,
    /// Tasks of every component, ascending (so allocating a block costs O(|c|), not O(k)).
    members: Vec<Vec<u32>>,
    /// Components with an allocated block, in allocation order.
    allocated: Vec<u32>,
    local: Vec<u32>,
    /// Column stride of every block.
    cap: usize,
    counters: Counters,
}

impl Build for MTBPRJ2 {
    type Params = MTBPRJ2Params;

    fn from_checked(all: &MTBPRJ2Params, setting: &Setting) -> Result<Self> {
        let (params, literal_line14) = (all.shared(), all.alg2_literal_line14);
        let (tasks, kernel) = (setting.task_kernel()?.clone(), setting.kernel()?);
        let (n_features, sparse) = (setting.n_features, setting.sparse);
        // Per task: its member entry (usize), its local index (u32) and its share of the block
        // slots; checked before the tables are built.
        let k = tasks.n_tasks();
        Need::new(
            "n_tasks",
            k,
            "MTBPRJ2's per-task tables (members, local indices, block slots)",
        )
        .count::<u64>(&[k, 4])?;
        let members = tasks.component_members();
        let mut local = Need::new("n_tasks", k, "MTBPRJ2's local task indices").filled(&[k], 0u32)?;
        for m in &members {
            for (p, &i) in m.iter().enumerate() {
                local[i] = p as u32;
            }
        }
        Ok(Self {
            kernel,
            tasks,
            n_features,
            params,
            literal_line14,
            dict: ActiveSet::new(n_features, sparse),
            gram: InverseGram::new(params.budget.saturating_add(1)),
            blocks: vec![None; members.len()],
            members: members.iter().map(|m| m.iter().map(|&i| i as u32).collect()).collect(),
            allocated: Vec::new(),
            local,
            cap: 0,
            counters: Counters::default(),
        })
    }
}

impl MTBPRJ2 {
    pub fn dictionary(&self) -> &ActiveSet {
        &self.dict
    }

    pub fn gram(&self) -> &InverseGram {
        &self.gram
    }

    pub fn force_rebuild(&mut self) {
        self.gram.force_rebuild();
    }

    /// Number of weights held in allocated blocks (`Σ_c |c| ×` dictionary size).
    pub fn n_weights(&self) -> usize {
        self.allocated
            .iter()
            .filter_map(|&c| self.blocks[c as usize].as_ref())
            .map(|b| b.members.len())
            .sum::<usize>()
            * self.dict.len()
    }

    /// `W[task, slot]` (0 for an unallocated block).
    pub fn weight(&self, task: usize, slot: usize) -> f64 {
        match &self.blocks[self.tasks.component(task)] {
            Some(b) => b.w[self.local[task] as usize * self.cap + slot],
            None => 0.0,
        }
    }

    fn block_need(&self) -> Need<'static> {
        Need::new(
            "budget",
            self.params.budget,
            "MTBPRJ2's task weights (|component| x budget floats)",
        )
    }

    /// Makes room for `size` dictionary columns in every block (all blocks are allocated first,
    /// so a failure leaves the model unchanged).
    fn grow_to(&mut self, size: usize) -> Result<()> {
        if size <= self.cap {
            return Ok(());
        }
        let cap = (self.cap * 2)
            .max(16)
            .min(self.params.budget.saturating_add(1))
            .max(size);
        let (old, n) = (self.cap, self.dict.len());
        let need = self.block_need();
        let total: usize = self.blocks.iter().flatten().map(|b| b.members.len()).sum();
        need.count::<f64>(&[total, cap])?;
        let mut fresh = Vec::with_capacity(self.allocated.len());
        for b in self.blocks.iter().flatten() {
            fresh.push(need.filled(&[b.members.len(), cap], 0.0)?);
        }
        for (b, mut w) in self.blocks.iter_mut().flatten().zip(fresh) {
            // (grows once per doubling: O(k) over the options is fine here)
            let rows = b.members.len();
            for l in 0..rows {
                w[l * cap..l * cap + n].copy_from_slice(&b.w[l * old..l * old + n]);
            }
            b.w = w;
        }
        self.cap = cap;
        Ok(())
    }

    fn ensure_block(&mut self, component: usize) -> Result<()> {
        if self.blocks[component].is_none() {
            let members = self.members[component].clone();
            let w = self.block_need().filled(&[members.len(), self.cap], 0.0)?;
            self.blocks[component] = Some(Block { members, w });
            self.allocated.push(component as u32);
        }
        Ok(())
    }

    /// The element a budget step removes (`r`, slot order) and the fold coefficients
    /// `gamma_j = -Q'_jr / Q'_rr` of the enlarged set (`gamma_r = 0`; the new element last).
    fn plan_replace(&self, alpha: &[f64], d2: f64) -> (usize, Vec<f64>) {
        let (cap, n) = (self.cap, self.dict.len());
        // ‖d_j‖ = ‖W_{:,j}‖₂ / sqrt(Q'_jj) over the old elements (rows streamed).
        let mut norm2 = vec![0.0; n];
        for &c in &self.allocated {
            if let Some(b) = &self.blocks[c as usize] {
                for l in 0..b.members.len() {
                    let row = &b.w[l * cap..l * cap + n];
                    norm2.iter_mut().zip(row).for_each(|(s, w)| *s += w * w);
                }
            }
        }
        let gram = &self.gram;
        let r = argmin_oldest(&self.dict, |j| {
            removal_score(norm2[j].sqrt(), gram.tentative_diag(alpha, d2, j))
        });
        let mut col = Vec::with_capacity(n + 1);
        self.gram.tentative_column(alpha, d2, r, &mut col);
        let qrr = col[r];
        let gamma = col
            .iter()
            .enumerate()
            .map(|(j, &c)| if j == r { 0.0 } else { -c / qrr })
            .collect();
        (r, gamma)
    }

    /// Whether the weights a step writes stay finite (checked before the first write).
    fn check_step(
        &self,
        step: &Step,
        comp: usize,
        task: usize,
        y: f64,
        alpha: &[f64],
        plan: Option<&(usize, Vec<f64>)>,
    ) -> Result<()> {
        let (cap, n) = (self.cap, self.dict.len());
        match step {
            Step::Project => {
                if let Some(b) = &self.blocks[comp] {
                    for (l, &m) in b.members.iter().enumerate() {
                        let c = y * self.tasks.get(m as usize, task);
                        let row = &b.w[l * cap..l * cap + n];
                        check_step_finite(row.iter().zip(alpha).map(|(w, a)| w + c * a), "projection")?;
                    }
                }
            }
            Step::Insert => {}
            Step::Replace => {
                let Some((r, gamma)) = plan else {
                    return Ok(());
                };
                let r = *r;
                let elem_task: Vec<usize> = (0..n).map(|j| self.dict.task(j)).chain([task]).collect();
                for &c in &self.allocated {
                    let Some(b) = &self.blocks[c as usize] else { continue };
                    for (l, &m) in b.members.iter().enumerate() {
                        let row = &b.w[l * cap..l * cap + n];
                        let wr = row[r];
                        let t = |j: usize| {
                            if self.literal_line14 {
                                self.tasks.get(m as usize, elem_task[j])
                            } else {
                                1.0
                            }
                        };
                        check_step_finite(
                            row.iter().enumerate().map(|(j, w)| w + gamma[j] * wr * t(j)),
                            "fold of the removed element",
                        )?;
                        // The new column, y T[l, i] (or 0), folded the same way.
                        let wn = if c as usize == comp {
                            y * self.tasks.get(m as usize, task)
                        } else {
                            0.0
                        };
                        check_step_finite([wn + gamma[n] * wr * t(n)], "fold of the removed element")?;
                    }
                }
            }
        }
        Ok(())
    }
}

impl MTBPRJ2 {
    /// Same hyper-parameters as `other`.
    pub fn same_settings(&self, other: &Self) -> bool {
        same_kernel_setting!(self, other) && self.params == other.params && self.literal_line14 == other.literal_line14
    }
}

impl CheckState for MTBPRJ2 {
    fn check_state(&self) -> Result<()> {
        check_settings(&self.kernel, &self.tasks, self.n_features, &self.params)?;
        let k = self.tasks.n_tasks();
        let last = self.dict.check_state(&self.kernel, k, self.n_features)?;
        let n = self.dict.len();
        let budget = self.params.budget;
        ensure(n <= budget, || {
            format!("{n} dictionary elements exceed the budget {budget}")
        })?;
        self.gram.check_state(n, budget.saturating_add(1))?;
        self.counters.check_state(n, last)?;
        // The component layout is the task kernel's (lengths first: they bound k and the
        // number of components by the payload before anything is allocated from them).
        check_len("MTBPRJ-2 local task rows", self.local.len(), k)?;
        check_len("MTBPRJ-2 components", self.members.len(), self.tasks.n_components())?;
        let members: Vec<Vec<u32>> = self
            .tasks
            .component_members()
            .iter()
            .map(|m| m.iter().map(|&i| i as u32).collect())
            .collect();
        ensure(self.members == members, || {
            "MTBPRJ-2's component members differ from the task kernel's".into()
        })?;
        for m in &members {
            for (p, &i) in m.iter().enumerate() {
                ensure(self.local[i as usize] as usize == p, || {
                    format!("MTBPRJ-2 local row of task {i} is wrong")
                })?;
            }
        }
        check_len("MTBPRJ-2 blocks", self.blocks.len(), members.len())?;
        ensure(n <= self.cap && self.cap <= budget.saturating_add(1), || {
            format!("MTBPRJ-2 column stride {} is not within [{n}, budget + 1]", self.cap)
        })?;
        // `allocated` lists exactly the components with a block, each once.
        let mut listed = vec![false; members.len()];
        for &c in &self.allocated {
            let c = c as usize;
            ensure(c < members.len() && !listed[c], || {
                "MTBPRJ-2's allocated blocks are not distinct components".into()
            })?;
            listed[c] = true;
        }
        for (c, block) in self.blocks.iter().enumerate() {
            ensure(block.is_some() == listed[c], || {
                format!("MTBPRJ-2 block {c} and the allocation list disagree")
            })?;
            if let Some(b) = block {
                ensure(b.members == members[c], || {
                    format!("MTBPRJ-2 block {c} has the wrong tasks")
                })?;
                check_len(
                    "MTBPRJ-2 block weights",
                    b.w.len(),
                    checked_size("block", b.members.len(), self.cap)?,
                )?;
                check_finite("MTBPRJ-2 block weights", &b.w)?;
            }
        }
        Ok(())
    }
}

impl OnlineLearner for MTBPRJ2 {
    kernel_shape!(grows);

    fn score(&self, x: Row, task: usize, scratch: &mut Scratch) -> f64 {
        let Some(block) = &self.blocks[self.tasks.component(task)] else {
            return 0.0;
        };
        let start = self.local[task] as usize * self.cap;
        let w = &block.w[start..start + self.dict.len()];
        let q = Query::new(x, &self.kernel);
        if let Some(f) = dense_coef_sum(self.dict.rows(), &self.kernel, &q, w) {
            return f;
        }
        let mut f = 0.0;
        self.dict
            .rows()
            .for_each_kernel(&self.kernel, &q, scratch, |_| true, |slot, kv| f += w[slot] * kv);
        f
    }

    /// Everything is computed and checked (finiteness, memory) before the first write.
    fn update(&mut self, x: Row, task: usize, y: f64, score: f64, scratch: &mut Scratch) -> Result<()> {
        if !is_update_mistake(y, score) {
            self.counters.n_seen += 1;
            return Ok(());
        }
        let q = Query::new(x, &self.kernel);
        let n = self.dict.len();
        let mut kz = vec![0.0; n];
        if !dense_kernel_row(self.dict.rows(), &self.kernel, &q, &mut kz) {
            self.dict
                .rows()
                .for_each_kernel(&self.kernel, &q, scratch, |_| true, |slot, kv| kz[slot] = kv);
        }
        let kappa = self.kernel.self_value(q.sq_norm);
        let mut alpha = Vec::with_capacity(n);
        let d2 = self.gram.project(&kz, kappa, &mut alpha);
        let step = decide(&self.gram, &self.params, kappa, d2, &alpha, n)?;
        let comp = self.tasks.component(task);
        let time = self.counters.n_seen + 1;
        let mut plan = matches!(step, Step::Replace).then(|| self.plan_replace(&alpha, d2));
        self.check_step(&step, comp, task, y, &alpha, plan.as_ref())?;
        if !matches!(step, Step::Project) {
            self.gram.reserve(n + 1, self.params.budget)?;
            self.grow_to(n + 1)?;
        }
        self.ensure_block(comp)?;
        self.counters.n_seen += 1;
        self.counters.n_updates += 1;
        let cap = self.cap;
        let tasks = &self.tasks;
        match step {
            Step::Project => {
                self.counters.n_projections += 1;
                if let Some(b) = self.blocks[comp].as_mut() {
                    for (l, &m) in b.members.iter().enumerate() {
                        let c = y * tasks.get(m as usize, task);
                        b.w[l * cap..l * cap + n]
                            .iter_mut()
                            .zip(&alpha)
                            .for_each(|(w, a)| *w += c * a);
                    }
                }
            }
            Step::Insert | Step::Replace => {
                self.counters.n_insertions += 1;
                // The new column n: y T[l, i] in the block of i, 0 elsewhere.
                for &c in &self.allocated {
                    if let Some(b) = self.blocks[c as usize].as_mut() {
                        for (l, &m) in b.members.iter().enumerate() {
                            b.w[l * cap + n] = if c as usize == comp {
                                y * tasks.get(m as usize, task)
                            } else {
                                0.0
                            };
                        }
                    }
                }
                if matches!(step, Step::Insert) {
                    self.dict.push(x, task, y, time, 0.0, &self.kernel);
                    self.gram.append(&kz, kappa, &alpha, d2);
                } else {
                    self.counters.n_evictions += 1;
                    let (r, gamma) = plan.take().expect("planned for a budget step");
                    // Tasks of the dictionary elements 0..n (slot order) and of the new one.
                    let elem_task: Vec<usize> =
                        (0..n).map(|j| self.dict.task(j)).chain(std::iter::once(task)).collect();
                    let literal = self.literal_line14;
                    for &c in &self.allocated {
                        let Some(b) = self.blocks[c as usize].as_mut() else {
                            continue;
                        };
                        for (l, &m) in b.members.iter().enumerate() {
                            let row = &mut b.w[l * cap..l * cap + n + 1];
                            let wr = row[r];
                            if wr != 0.0 {
                                for (j, w) in row.iter_mut().enumerate() {
                                    if literal {
                                        *w += gamma[j] * wr * tasks.get(m as usize, elem_task[j]);
                                    } else {
                                        *w += gamma[j] * wr;
                                    }
                                }
                            }
                            // Swap-remove column r: the new element moves into r.
                            row[r] = row[n];
                        }
                    }
                    self.dict.push(x, task, y, time, 0.0, &self.kernel);
                    let pos = position_of(&self.dict, r);
                    self.dict.remove_at(pos);
                    self.gram.append_and_remove(&kz, kappa, &alpha, d2, r);
                }
            }
        }
        Ok(())
    }

    active_set_counters!(counters.n_updates, dict);

    fn diagnostics(&self) -> Vec<(&'static str, f64)> {
        let mut d = diagnostics(&self.counters, &self.gram);
        d.push(("n_weights", self.n_weights() as f64));
        d.push(("n_allocated_blocks", self.allocated.len() as f64));
        d
    }
}

impl MTBPRJ2 {
    /// Adds `n` tasks. Disconnected graph: each new task is a new component with no block yet.
    /// A connected component holds one weight row per member, and a new member's row would be
    /// the sum of all past updates weighted by its task kernel entries, which the block does not
    /// keep: a complete graph grows only while its block is unallocated (no update yet).
    /// Atomic: on `Err` the model is unchanged.
    fn grow_tasks(&mut self, n: usize) -> Result<()> {
        let mut tasks = self.tasks.clone();
        tasks.grow(n)?;
        let (k, new_k) = (self.tasks.n_tasks(), tasks.n_tasks());
        let need = Need::new("n_tasks", new_k, "MTBPRJ2's per-task tables");
        match tasks {
            TaskKernel::Disconnected { .. } => {
                need.reserve(&mut self.members, n)?;
                need.reserve(&mut self.blocks, n)?;
                need.reserve(&mut self.local, n)?;
                self.members.extend((k..new_k).map(|i| vec![i as u32]));
                self.blocks.extend((0..n).map(|_| None));
                self.local.extend((0..n).map(|_| 0));
            }
            _ => {
                if self.blocks.iter().any(Option::is_some) {
                    return Err(Error::InvalidParameter {
                        name: "n_tasks",
                        reason: "MTBPRJ2 cannot add a task to a connected task graph once it has updated \
                                 (the new task's weight row is not kept); MTBPRJ grows on any closed-form graph"
                            .into(),
                    });
                }
                // The complete graph: one component; the new members join it at the end.
                need.reserve(&mut self.local, n)?;
                need.reserve(&mut self.members[0], n)?;
                self.local.extend((k..new_k).map(|i| i as u32));
                self.members[0].extend((k..new_k).map(|i| i as u32));
            }
        }
        self.tasks = tasks;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// MTBPRJ-2 as the paper's corrected Algorithm 2 (no A-C7 ablation).
    fn mtbprj2(tasks: &TaskKernel, kernel: BaseKernel, d: usize, sparse: bool, params: ProjectronParams) -> MTBPRJ2 {
        MTBPRJ2::with_kernels(tasks, kernel, d, sparse, MTBPRJ2Params::from_shared(params, false)).unwrap()
    }
    use crate::data::Rows;
    use crate::learner::{learn, MTPerceptron};
    use crate::rng::SplitMix64;
    use nalgebra::{DMatrix, DVector};

    fn unif(rng: &mut SplitMix64) -> f64 {
        (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// A seeded stream on [0,1]^d with labels from a per-task linear rule.
    fn stream(n: usize, d: usize, k: usize, seed: u64) -> (Vec<f64>, Vec<i64>, Vec<f64>) {
        let mut rng = SplitMix64::new(seed);
        let x: Vec<f64> = (0..n * d).map(|_| unif(&mut rng)).collect();
        let tasks: Vec<i64> = (0..n).map(|_| rng.below(k as u64) as i64).collect();
        let y = (0..n)
            .map(|t| {
                let s = x[t * d] - x[t * d + 1] + 0.2 * (tasks[t] as f64 - 1.0) * x[t * d + 2];
                if s > 0.05 * (unif(&mut rng) - 0.5) {
                    1.0
                } else {
                    -1.0
                }
            })
            .collect();
        (x, tasks, y)
    }

    fn params(budget: usize, eta: f64) -> ProjectronParams {
        ProjectronParams::new(budget, eta, Threshold::Norm).unwrap()
    }

    /// Elements (x, task, time, slot) in insertion order.
    fn elements(set: &ActiveSet) -> Vec<(Vec<f64>, usize, u64, usize)> {
        set.slots_in_order()
            .map(|s| {
                let mut v = vec![0.0; set.rows().n_features()];
                set.rows().row(s).for_each(|j, x| v[j] = x);
                (v, set.task(s), set.time(s), s)
            })
            .collect()
    }

    #[test]
    fn rejects_bad_parameters() {
        assert!(ProjectronParams::new(0, 0.1, Threshold::Norm).is_err());
        assert!(ProjectronParams::new(3, -0.1, Threshold::Norm).is_err());
        assert!(ProjectronParams::new(3, f64::NAN, Threshold::Norm).is_err());
        assert!(Threshold::parse("cube").is_err());
        assert_eq!(Threshold::parse("squared").unwrap(), Threshold::Squared);
    }

    #[test]
    fn budget_holds_and_order_is_insertion_order() {
        let (n, d, k) = (500, 4, 3);
        let (x, tasks, y) = stream(n, d, k, 1);
        let kernel = BaseKernel::rbf(3.0).unwrap();
        let mut a = MTBPRJ::with_kernels(&TaskKernel::complete(k).unwrap(), kernel, d, false, params(12, 0.3)).unwrap();
        let mut b = mtbprj2(&TaskKernel::complete(k).unwrap(), kernel, d, true, params(12, 0.3));
        let mut scratch = Scratch::default();
        for t in 0..n {
            let row = Row::Dense(&x[t * d..(t + 1) * d]);
            a.learn_one(row, tasks[t] as usize, y[t], &mut scratch).unwrap();
            b.learn_one(row, tasks[t] as usize, y[t], &mut scratch).unwrap();
            for set in [&a.set, &b.dict] {
                assert!(set.len() <= 12);
                let times: Vec<u64> = elements(set).iter().map(|e| e.2).collect();
                assert!(
                    times.windows(2).all(|w| w[0] < w[1]),
                    "insertion order broken: {times:?}"
                );
            }
        }
        assert!(a.n_evictions() > 0 && a.n_projections() > 0);
        assert!(b.counters.n_evictions > 0 && b.counters.n_projections > 0);
        assert!(a.gram.residual() < 1e-8 && b.gram.residual() < 1e-8);
    }

    /// Feeds the stream row by row and calls `check(before, after, t)` after every row that
    /// evicted an element (`evictions` reads the count); returns how many rows did.
    fn each_eviction<L: OnlineLearner + Clone>(
        m: &mut L,
        (x, tasks, y): (&[f64], &[i64], &[f64]),
        d: usize,
        evictions: impl Fn(&L) -> u64,
        mut check: impl FnMut(&L, &L, usize),
    ) -> usize {
        let mut scratch = Scratch::default();
        let mut checked = 0;
        for t in 0..y.len() {
            let before = m.clone();
            let row = Row::Dense(&x[t * d..(t + 1) * d]);
            m.learn_one(row, tasks[t] as usize, y[t], &mut scratch).unwrap();
            if evictions(m) != evictions(&before) {
                check(&before, m, t);
                checked += 1;
            }
        }
        checked
    }

    /// INV-P3: the H-norm of the change made by a budget step equals score_r.
    #[test]
    fn removal_damage_equals_the_score() {
        let (n, d, k) = (400, 3, 3);
        let (x, tasks, y) = stream(n, d, k, 4);
        let kernel = BaseKernel::rbf(4.0).unwrap();
        let tk = TaskKernel::from_edges(k, &[(0, 1, 1.0)]).unwrap();
        let mut m = MTBPRJ::with_kernels(&tk, kernel, d, false, params(10, 0.05)).unwrap();
        let checked = each_eviction(&mut m, (&x, &tasks, &y), d, |m: &MTBPRJ| m.n_evictions(), |before, m, t| {
            let i = tasks[t] as usize;
        // S ∪ {z} in insertion order, with β_pre, and β_post matched by insertion time.
        let mut elems = elements(&before.set);
        let mut pre: Vec<f64> = elems.iter().map(|e| before.set.beta(e.3)).collect();
        elems.push((x[t * d..(t + 1) * d].to_vec(), i, m.counters.n_seen, usize::MAX));
        pre.push(y[t]);
        let post_map: Vec<(u64, f64)> = elements(&m.set).iter().map(|e| (e.2, m.set.beta(e.3))).collect();
        let post: Vec<f64> = elems
            .iter()
            .map(|e| post_map.iter().find(|p| p.0 == e.2).map_or(0.0, |p| p.1))
            .collect();
        let nn = elems.len();
        let h = DMatrix::from_fn(nn, nn, |a, b| {
            tk.get(elems[a].1, elems[b].1) * kernel.eval(&Row::Dense(&elems[a].0), &Row::Dense(&elems[b].0))
        });
        let diff = DVector::from_fn(nn, |a, _| pre[a] - post[a]);
        let damage = (diff.transpose() * &h * &diff)[(0, 0)].sqrt();
        let qinv = h.clone().try_inverse().unwrap();
        let scores: Vec<f64> = (0..nn - 1).map(|j| pre[j].abs() / qinv[(j, j)].sqrt()).collect();
        let r = post
            .iter()
            .take(nn - 1)
            .position(|&b| b == 0.0)
            .expect("one element removed");
        let best = scores.iter().cloned().fold(f64::INFINITY, f64::min);
        assert!(
            (scores[r] - best).abs() <= 1e-9 * best.max(1e-12),
            "removed a non-minimal element"
        );
        assert!(
            (damage - scores[r]).abs() <= 1e-6 * scores[r].max(1e-9),
            "damage {damage} vs score {}",
            scores[r]
        );
        });
        assert!(checked > 20, "too few budget steps: {checked}");
    }

    /// INV-P4: the same for MTBPRJ-2, the H'-norm summed over tasks equals ‖d_r‖.
    #[test]
    fn removal_damage_equals_the_score_mtbprj2() {
        let (n, d, k) = (400, 3, 4);
        let (x, tasks, y) = stream(n, d, k, 8);
        let kernel = BaseKernel::rbf(4.0).unwrap();
        let tk = TaskKernel::from_edges(k, &[(0, 1, 1.0), (1, 2, 0.5)]).unwrap();
        let mut m = mtbprj2(&tk, kernel, d, false, params(9, 0.05));
        let checked = each_eviction(&mut m, (&x, &tasks, &y), d, |m: &MTBPRJ2| m.counters.n_evictions, |before, m, t| {
            let i = tasks[t] as usize;
        let mut elems = elements(&before.dict);
        let mut pre: Vec<Vec<f64>> = (0..k)
            .map(|l| elems.iter().map(|e| before.weight(l, e.3)).collect())
            .collect();
        elems.push((x[t * d..(t + 1) * d].to_vec(), i, m.counters.n_seen, usize::MAX));
        for (l, p) in pre.iter_mut().enumerate() {
            p.push(y[t] * before.tasks.get(l, i));
        }
        let post_elems = elements(&m.dict);
        let nn = elems.len();
        let h = DMatrix::from_fn(nn, nn, |a, b| {
            kernel.eval(&Row::Dense(&elems[a].0), &Row::Dense(&elems[b].0))
        });
        let qinv = h.clone().try_inverse().unwrap();
        let mut damage2 = 0.0;
        for (l, pre_l) in pre.iter().enumerate() {
            let post: Vec<f64> = elems
                .iter()
                .map(|e| post_elems.iter().find(|p| p.2 == e.2).map_or(0.0, |p| m.weight(l, p.3)))
                .collect();
            let diff = DVector::from_fn(nn, |a, _| pre_l[a] - post[a]);
            damage2 += (diff.transpose() * &h * &diff)[(0, 0)];
        }
        let r = elems
            .iter()
            .position(|e| !post_elems.iter().any(|p| p.2 == e.2))
            .unwrap();
        let norm: f64 = (0..k).map(|l| pre[l][r] * pre[l][r]).sum::<f64>().sqrt();
        let dr = norm / qinv[(r, r)].sqrt();
        assert!(
            (damage2.sqrt() - dr).abs() <= 1e-6 * dr.max(1e-9),
            "{} vs {dr}",
            damage2.sqrt()
        );
        });
        assert!(checked > 20, "too few budget steps: {checked}");
    }

    /// INV-P5: a mistake on an exact duplicate is absorbed by projection with α = e_j, and the
    /// function equals the one obtained by inserting the duplicate.
    #[test]
    fn duplicates_are_absorbed_by_projection() {
        let d = 3;
        let kernel = BaseKernel::rbf(2.0).unwrap();
        let tk = TaskKernel::complete(2).unwrap();
        let pts = [[0.1, 0.5, 0.9], [0.8, 0.2, 0.4], [0.3, 0.3, 0.7]];
        let mut m = MTBPRJ::with_kernels(&tk, kernel, d, false, params(10, 0.0)).unwrap();
        let mut m2 = mtbprj2(&tk, kernel, d, false, params(10, 0.0));
        let mut scratch = Scratch::default();
        let labels = [1.0, -1.0, 1.0];
        for (p, &yl) in pts.iter().zip(&labels) {
            m.update(Row::Dense(p), 0, yl, 0.0, &mut scratch).unwrap();
            m2.update(Row::Dense(p), 0, yl, 0.0, &mut scratch).unwrap();
        }
        assert_eq!(m.n_active(), 3);
        let probes: Vec<[f64; 3]> = (0..20).map(|a| [a as f64 / 20.0, 0.5, 1.0 - a as f64 / 25.0]).collect();
        for model in [&mut m as &mut dyn OnlineLearner, &mut m2] {
            let before: Vec<(f64, f64)> = probes
                .iter()
                .map(|p| {
                    (
                        model.score(Row::Dense(p), 0, &mut scratch),
                        model.score(Row::Dense(p), 1, &mut scratch),
                    )
                })
                .collect();
            // Force an update-mistake on the duplicate of element 1 (task 0) with label -1.
            model.update(Row::Dense(&pts[1]), 0, -1.0, 0.0, &mut scratch).unwrap();
            assert_eq!(model.n_active(), 3, "a duplicate must not be inserted");
            for (p, (f0, f1)) in probes.iter().zip(before) {
                let kv = kernel.eval(&Row::Dense(p), &Row::Dense(&pts[1]));
                let tk = TaskKernel::complete(2).unwrap();
                let g0 = model.score(Row::Dense(p), 0, &mut scratch);
                let g1 = model.score(Row::Dense(p), 1, &mut scratch);
                assert!((g0 - (f0 - tk.get(0, 0) * kv)).abs() < 1e-9);
                assert!((g1 - (f1 - tk.get(0, 1) * kv)).abs() < 1e-9);
            }
        }
        assert_eq!(m.n_projections(), 1);
        assert_eq!(m2.counters.n_projections, 1);
    }

    fn run(model: &mut dyn OnlineLearner, x: &[f64], tasks: &[i64], y: &[f64], d: usize) -> Vec<f64> {
        let rows = Rows::dense(x, y.len(), d);
        let mut scratch = Scratch::default();
        (0..y.len())
            .map(|t| {
                model
                    .learn_one(rows.row(t), tasks[t] as usize, y[t], &mut scratch)
                    .unwrap()
            })
            .collect()
    }

    /// INV-B4: with one task MTBPRJ equals MTBPRJ-2.
    #[test]
    fn one_task_mtbprj_equals_mtbprj2() {
        let (n, d) = (600, 4);
        let (x, _, y) = stream(n, d, 1, 12);
        let tasks = vec![0i64; n];
        let kernel = BaseKernel::rbf(2.0).unwrap();
        for graph in [TaskKernel::complete(1).unwrap(), TaskKernel::disconnected(1).unwrap()] {
            let mut a = MTBPRJ::with_kernels(&graph, kernel, d, false, params(15, 0.1)).unwrap();
            let mut b = mtbprj2(&graph, kernel, d, false, params(15, 0.1));
            let fa = run(&mut a, &x, &tasks, &y, d);
            let fb = run(&mut b, &x, &tasks, &y, d);
            for (p, q) in fa.iter().zip(&fb) {
                assert!((p - q).abs() <= 1e-9 * q.abs().max(1.0), "{p} vs {q}");
            }
            assert!(a.n_evictions() > 10);
            assert_eq!(a.n_evictions(), b.counters.n_evictions);
        }
    }

    /// INV-B1 / INV-B5: with B >= n and η = 0 on well-conditioned rbf data, MTBPRJ equals the
    /// multitask Perceptron and MTBPRJ-2 with G = D equals the battery.
    #[test]
    fn unbounded_eta_zero_equals_the_perceptron() {
        let (n, d, k) = (300, 3, 3);
        let (x, tasks, y) = stream(n, d, k, 5);
        let kernel = BaseKernel::rbf(8.0).unwrap();
        for (graph, two) in [
            (TaskKernel::complete(k).unwrap(), false),
            (TaskKernel::from_edges(k, &[(0, 2, 1.0)]).unwrap(), false),
            (TaskKernel::disconnected(k).unwrap(), true),
        ] {
            let mut p = MTPerceptron::new(graph.clone(), kernel, d, false).unwrap();
            let fp = run(&mut p, &x, &tasks, &y, d);
            let fq = if two {
                let mut m = mtbprj2(&graph, kernel, d, false, params(n, 0.0));
                run(&mut m, &x, &tasks, &y, d)
            } else {
                let mut m = MTBPRJ::with_kernels(&graph, kernel, d, false, params(n, 0.0)).unwrap();
                run(&mut m, &x, &tasks, &y, d)
            };
            for (a, b) in fp.iter().zip(&fq) {
                assert!((a - b).abs() <= 1e-6 * a.abs().max(1.0));
            }
        }
    }

    /// INV-Q2 and persistence: a forced recompute, or a serde round trip, mid-stream changes
    /// nothing beyond rounding.
    #[test]
    fn rebuild_and_serde_round_trip_mid_stream() {
        let (n, d, k) = (500, 4, 3);
        let (x, tasks, y) = stream(n, d, k, 6);
        let kernel = BaseKernel::rbf(3.0).unwrap();
        let tk = TaskKernel::complete(k).unwrap();
        let half = 250 * d;
        let mut a = MTBPRJ::with_kernels(&tk, kernel, d, false, params(20, 0.05)).unwrap();
        let mut b = mtbprj2(&tk, kernel, d, false, params(20, 0.05));
        run(&mut a, &x[..half], &tasks[..250], &y[..250], d);
        run(&mut b, &x[..half], &tasks[..250], &y[..250], d);
        let (mut a_reb, mut b_reb) = (a.clone(), b.clone());
        a_reb.force_rebuild();
        b_reb.force_rebuild();
        let mut a_ser: MTBPRJ = bincode::deserialize(&bincode::serialize(&a).unwrap()).unwrap();
        let mut b_ser: MTBPRJ2 = bincode::deserialize(&bincode::serialize(&b).unwrap()).unwrap();
        assert_eq!(a_ser, a);
        assert_eq!(b_ser, b);
        let rest = (&x[half..], &tasks[250..], &y[250..]);
        let fa = run(&mut a, rest.0, rest.1, rest.2, d);
        let fb = run(&mut b, rest.0, rest.1, rest.2, d);
        let fa_ser = run(&mut a_ser, rest.0, rest.1, rest.2, d);
        let fb_ser = run(&mut b_ser, rest.0, rest.1, rest.2, d);
        assert_eq!(fa, fa_ser);
        assert_eq!(fb, fb_ser);
        let fa_reb = run(&mut a_reb, rest.0, rest.1, rest.2, d);
        let fb_reb = run(&mut b_reb, rest.0, rest.1, rest.2, d);
        for (p, q) in fa.iter().zip(&fa_reb).chain(fb.iter().zip(&fb_reb)) {
            assert!((p - q).abs() <= 1e-9 * p.abs().max(1.0), "{p} vs {q}");
        }
    }

    #[test]
    fn same_instance_in_several_tasks_keeps_the_engine_accurate() {
        // The multitask Gram matrix of one x in several tasks is T ⊗ K'(x,x): full rank for
        // T = (I + L)^{-1}, but with many repeats the set gets close to singular.
        let (d, k) = (3, 4);
        let kernel = BaseKernel::rbf(1.0).unwrap();
        let tk = TaskKernel::complete(k).unwrap();
        let mut m = MTBPRJ::with_kernels(&tk, kernel, d, false, params(30, 0.01)).unwrap();
        let mut rng = SplitMix64::new(31);
        let base: Vec<[f64; 3]> = (0..6)
            .map(|_| [unif(&mut rng), unif(&mut rng), unif(&mut rng)])
            .collect();
        let mut scratch = Scratch::default();
        for step in 0..2000 {
            let p = base[rng.below(6) as usize];
            let i = rng.below(k as u64) as usize;
            let y = if (step / 7) % 2 == 0 { 1.0 } else { -1.0 };
            m.update(Row::Dense(&p), i, y, 0.0, &mut scratch).unwrap();
            assert!(m.n_active() <= 30);
        }
        assert!(m.gram.residual() < 1e-6, "residual {:e}", m.gram.residual());
        assert!(m.betas_in_order().iter().all(|b| b.is_finite()));
        assert!(m.n_active() <= 24, "at most |distinct x| * k elements are independent");
    }

    #[test]
    fn mtbprj2_allocates_blocks_lazily() {
        let (n, d, k) = (300, 3, 5);
        let (x, mut tasks, y) = stream(n, d, k, 2);
        tasks.iter_mut().for_each(|t| *t %= 2); // only tasks 0 and 1 appear
        let kernel = BaseKernel::rbf(3.0).unwrap();
        let mut m = mtbprj2(&TaskKernel::disconnected(k).unwrap(), kernel, d, false, params(20, 0.1));
        run(&mut m, &x, &tasks, &y, d);
        let diag: std::collections::HashMap<_, _> = m.diagnostics().into_iter().collect();
        assert_eq!(diag["n_allocated_blocks"], 2.0);
        assert_eq!(diag["n_weights"], 2.0 * m.n_active() as f64);
        let mut c = mtbprj2(&TaskKernel::complete(k).unwrap(), kernel, d, false, params(20, 0.1));
        run(&mut c, &x, &tasks, &y, d);
        assert_eq!(c.n_weights(), k * c.n_active());
        // An untouched task of the disconnected graph scores 0 without any kernel evaluation.
        let mut scratch = Scratch::default();
        assert_eq!(m.score(Row::Dense(&x[..d]), 4, &mut scratch), 0.0);
    }

    #[test]
    fn literal_line14_differs_only_with_several_tasks() {
        let (n, d, k) = (500, 3, 3);
        let (x, tasks, y) = stream(n, d, k, 9);
        let kernel = BaseKernel::rbf(3.0).unwrap();
        let tk = TaskKernel::complete(k).unwrap();
        let mut a = mtbprj2(&tk, kernel, d, false, params(10, 0.05));
        let literal = MTBPRJ2Params::from_shared(params(10, 0.05), true);
        let mut b = MTBPRJ2::with_kernels(&tk, kernel, d, false, literal).unwrap();
        assert_ne!(run(&mut a, &x, &tasks, &y, d), run(&mut b, &x, &tasks, &y, d));
        let ones = vec![0i64; n];
        let mut a1 = mtbprj2(&TaskKernel::disconnected(1).unwrap(), kernel, d, false, params(10, 0.05));
        let mut b1 = MTBPRJ2::with_kernels(&TaskKernel::disconnected(1).unwrap(), kernel, d, false, literal).unwrap();
        // With T = [1] the extra factor is 1.
        assert_eq!(run(&mut a1, &x, &ones, &y, d), run(&mut b1, &x, &ones, &y, d));
        let _ = learn(&mut a1, &Rows::dense(&x[..d], 1, d), &[0], &[1.0]).unwrap();
    }

    #[test]
    fn overflowing_kernel_values_leave_the_model_unchanged() {
        // (1e200 <x,x'> + 1)^3 overflows: the update is refused and the model is unchanged.
        let kernel = BaseKernel::poly(3, 1e200, 1.0).unwrap();
        let tk = TaskKernel::complete(2).unwrap();
        let mut a = MTBPRJ::with_kernels(&tk, kernel, 2, false, params(4, 0.01)).unwrap();
        let mut b = mtbprj2(&tk, kernel, 2, false, params(4, 0.01));
        let mut scratch = Scratch::default();
        for model in [&mut a as &mut dyn OnlineLearner, &mut b] {
            model
                .update(Row::Dense(&[1e-100, 0.0]), 0, 1.0, 0.0, &mut scratch)
                .unwrap();
            assert_eq!(model.n_active(), 1);
            let before = (model.n_updates(), model.diagnostics());
            let err = model
                .update(Row::Dense(&[1e10, 1e10]), 1, -1.0, 0.0, &mut scratch)
                .unwrap_err();
            assert!(err.to_string().contains("not finite"), "{err}");
            assert_eq!(model.n_active(), 1);
            assert_eq!((model.n_updates(), model.diagnostics()), before);
            let f = model.score(Row::Dense(&[1e-100, 0.0]), 0, &mut scratch);
            assert!(f.is_finite());
        }
    }
}
