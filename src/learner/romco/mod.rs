//! ROMCO — Robust Online Multitask Classification with correlative and personalized structure
//! (Yang, Li, Zhao, Li & Das Gollapalli, SDM 2016; ALGORITHMS.md §5, choices A-R1..A-R6 in §8.2).
//!
//! The weights of task i are `u^i + v^i`: U (d x k) is the correlative part, kept low-rank by a
//! trace-norm prox (singular value thresholding), and V (d x k) the personalized part, kept
//! column-sparse by a column group-lasso prox. A round (protocol P2, §1.2; a single example in
//! protocol P1) is scored with the same model; if the trigger fires (`Loss`: some hinge loss
//! is positive, Alg. 1; `Mistake`: some `y p <= 0`, §4.4 of the paper), every present task with
//! positive loss takes a gradient step `u^i += η1 y x`, `v^i += η2 y x`, then
//! `U ← SVT_{η1 λ1}(U)` and every column `v^i ← (1 - η2 λ2 / ||v^i||)_+ v^i`.
//!
//! Cost (§5.5): U and V are dense column-major `d x k` (2 d k floats, nothing else of size d).
//! The SVT uses the Gram route (b): `C = UᵀU` is maintained through the sparse gradient step in
//! `O(|P| k nnz)`, `Ĉ` is eigendecomposed, and `U ← Û Π` in place (`O(d k²)`). When a single
//! column changed (every update of protocol P1) the eigendecomposition of `Ĉ` is updated from
//! the one of C the last SVT produced, a rank-two change solved by two secular equations
//! (`linalg::eigen_update`, `O(k²)` plus two `k x k` products); otherwise it is recomputed
//! (`O(k³)`). It falls back to route (a) (blocked QR + SVD of R) when the eigenvalues are not
//! accurate enough (`θ < 10⁻⁶ σ_max` and an eigenvalue below `10³ (θ/σ_max) λ_max`,
//! docs/DECISIONS.md) or when the exact resync of C every 100 updates finds drift. With
//! `λ1 = 0`, `Π = I` and the update is `O(nnz)`. Route (c) (`linalg::brand`, U held as a factored
//! thin SVD under Brand's rank-one modifications) can be selected for singleton rounds.
//! V is stored as `v^i = s_i ṽ^i` with `||v^i||²` maintained, so the group shrinkage of all k
//! columns is `O(k)` and the gradient step `O(nnz)` per changed column.
//!
//! The shape picks the side and the form of U (docs/romco.md items 11-14; `form::GramSide` and
//! `form::UForm` name them, and every branch on them is a `match`):
//! - wide U (more live columns than features): route (b) on the `d x d` Gram of the rows,
//!   `D = UUᵀ`, and `U ← Π_L Û` (`O(d² k + d³)` per update instead of `O(d k² + k³)`);
//! - tall U with `d >= 8 k²`: `U = W Π`, the `k x k` Π and Π⁻¹ accumulated lazily, so an update
//!   writes only the non-zero rows of x into W (`O(nnz k + k³)`, independent of d), folded
//!   back into W when Π turns singular or ill-conditioned;
//! - rounds of at most [`MAX_UPDATED_TASKS`] active tasks update the eigendecomposition column
//!   by column instead of recomputing it.

use serde::{Deserialize, Serialize};

use form::{GramSide, UForm};

use crate::alloc::Need;
use crate::data::Row;
use crate::error::{invalid, Error, Result};
use crate::kernel::Scratch;
use crate::learner::spec::check_nonnegative;
use crate::learner::{Build, Checked, LinearSetting, OnlineLearner, Round};
use crate::linalg::brand::ThinSvd;
use crate::linalg::eigen_update;
use crate::linalg::simd::{columns_dot, dense_dot, matmul};
use crate::linalg::svt::{self, Shrinkage, GRAM_MIN_THETA};
use crate::linalg::{column_to_row_major, SymMatrix};
use crate::state::{check_counts, check_finite, check_len, checked_size, ensure, param, CheckState};

/// A round changing at most this many columns of U updates the eigendecomposition of U's Gram
/// matrix column by column (a rank-two change each: two secular equations and two basis
/// products, `O(n³)` with n = q or d) instead of recomputing it (`O(n³)` with a larger
/// constant, plus forming the Gram matrix: `O(d k²)` on the row side).
pub const MAX_UPDATED_TASKS: usize = 4;

/// Exact recomputation of `C = UᵀU` every this many updates (§5.5 b, step 4).
pub const RESYNC_EVERY: u64 = 100;

/// Exact recomputation of the column norms of V, every this many updates (an `O(dk)` pass, kept
/// rare so that the `λ1 = 0` path stays `O(nnz)` per update; the maintained norms drift by
/// about `ε` per update).
pub const V_RESYNC_EVERY: u64 = 10_000;

/// After a resync, a drift `||C - UᵀU||_F > DRIFT_TOL ||C||_F` sends the next SVT to route (a).
pub const DRIFT_TOL: f64 = 1e-8;

/// A restored state's maintained `C` and column norms of V may differ from what they cache by at
/// most this (relative; `Romco::check_caches`).
const CACHE_TOL: f64 = 1e-6;

/// U is held factored, `U = W Π` (`Π` k x k, accumulated and applied lazily), when
/// `d >= FACTORED_MIN_RATIO k²`: then an update costs `O(nnz k + k³)` instead of the `O(d k²)`
/// of `U ← Û Π`, and a score `O(nnz k)` instead of `O(nnz)` (measured: at d = 400, k = 12 the
/// dense form is faster; at d = 473,856, k = 4 the factored one is ~50x faster).
pub const FACTORED_MIN_RATIO: usize = 8;

/// The factored form is folded back (`W ← W Π`, `O(d k²)`) once `||Π||_F ||Π⁻¹||_F / k` (1 for
/// `Π = I`, at least the condition number over k) exceeds this, at every exact resync of C
/// (same cost), or when a thresholding zeroes
/// a singular value (Π singular): the gradient step goes through `Π⁻¹`, so W's rounding, seen
/// through Π, grows with Π's condition number. With the defaults Π stays within 1.01 of
/// orthogonal-times-scalar over a whole pass and never folds; a strong threshold folds now and then.
pub const FOLD_CONDITION: f64 = 10.0;

/// A column scale below this is folded into the stored column (keeps `1/s` finite).
const MIN_SCALE: f64 = 1e-150;

/// When ROMCO updates (A-R2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum RomcoTrigger {
    /// Alg. 1 line 9: some present task has hinge loss `> 0` (the default).
    Loss,
    /// The text of §4.4: some present task has `y p <= 0`.
    Mistake,
}

impl RomcoTrigger {
    /// The trigger named `"loss"` or `"mistake"`.
    pub fn parse(name: &str) -> Result<Self> {
        match name {
            "loss" => Ok(Self::Loss),
            "mistake" => Ok(Self::Mistake),
            other => Err(invalid(
                "update",
                format!("expected 'loss' or 'mistake', got {other:?}"),
            )),
        }
    }
}

/// Which SVT implementation runs (§5.5). `Auto` is the default; the others exist for tests and
/// benchmarks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum SvtRoute {
    /// The default: route (b) (eigendecomposition updated when one column changed) with the
    /// fallback to (a); `λ1 = 0`: no SVT (`Π = I`). Today the same as `Gram`.
    Auto,
    /// Route (b) with the fallback to (a).
    Gram,
    /// Always route (a) when `λ1 > 0`.
    Qr,
    /// Route (c) for every singleton round, also with `λ1 = 0` (then `θ = 0`).
    Brand,
}

impl SvtRoute {
    /// The route named `"auto"`, `"gram"`, `"qr"` or `"brand"`.
    pub fn parse(name: &str) -> Result<Self> {
        match name {
            "auto" => Ok(Self::Auto),
            "gram" => Ok(Self::Gram),
            "qr" => Ok(Self::Qr),
            "brand" => Ok(Self::Brand),
            other => Err(invalid(
                "svt_route",
                format!("expected 'auto', 'gram', 'qr' or 'brand', got {other:?}"),
            )),
        }
    }
}

/// The ROMCO learner: U (correlative, low-rank) and V (personalized, column-sparse), with the
/// caches its updates maintain. The saved state is the flat field layout of `layout.rs`, into
/// which U's form and the Gram side are written.
#[derive(Debug, Clone, PartialEq)]
pub struct Romco {
    n_tasks: usize,
    n_features: usize,
    /// The hyper-parameters.
    params: RomcoParams,
    /// U, in one of its forms.
    u: UForm,
    /// Work (multiply-adds) of the updates since the last exact resync of C: the exact `C = UᵀU`
    /// costs `O(d k²)`, and runs only once the updates since the last one did as much work,
    /// so that it adds at most as much again whatever d is (every 100 updates for a dense U).
    resync_work: u64,
    /// ṽ, column-major; `v^i = v_scale[i] * ṽ^i`. A column with scale 0 is zero (ṽ is stale).
    v: Vec<f64>,
    v_scale: Vec<f64>,
    /// `||v^i||²`, maintained.
    v_sq_norm: Vec<f64>,
    /// `C = UᵀU`, row-major `k x k` (maintained only when `λ1 > 0`); what it holds is said by
    /// `gram_side`.
    gram: Vec<f64>,
    /// Where U's Gram matrix is held: C (explicit or as the SVT's factors) or `D = UUᵀ`.
    gram_side: GramSide,
    /// Columns of U that may be non-zero (a column never updated is exactly 0 and the SVT runs
    /// on the others only, so rounding never leaks into it).
    u_live: Vec<bool>,
    /// The next SVT uses route (a) (set by a resync that found drift).
    qr_pending: bool,
    /// Right singular vectors of the last SVT over the live columns (row-major `q x q`): the
    /// warm start of route (a)'s Jacobi SVD and, with `svt_mu`, the eigendecomposition
    /// `C = Z diag(μ) Zᵀ` that route (b) updates on rounds where one column changes.
    svt_vectors: Vec<f64>,
    /// `μ_r = (σ_r - θ)_+²`: the eigenvalues of `C` after the last SVT, one per `svt_vectors` column.
    svt_mu: Vec<f64>,
    /// Rank of U after the last thresholding (`None` with `λ1 = 0`: computed on demand).
    rank: Option<usize>,
    n_updates: u64,
    n_seen: u64,
    /// What the thresholdings did.
    svt_counts: SvtCounts,
    /// Route-(b) SVTs that ran on the row side (counted in `n_gram_svt` too).
    n_row_svt: u64,
    /// Folds of the factored form `U = W Π` back into W by a thresholding (Π singular or
    /// ill-conditioned).
    n_folds: u64,
    /// Buffers reused from one update to the next.
    scratch: Box<UpdateScratch>,
}

/// Counts of what ROMCO's thresholdings did (diagnostics; saved with the model).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
struct SvtCounts {
    /// Route-(b) SVTs (column or row side).
    n_gram_svt: u64,
    /// Route-(a) SVTs.
    n_qr_svt: u64,
    /// Exact resyncs that found the maintained Gram drifted.
    n_drift_resyncs: u64,
    /// Thresholdings skipped on non-finite values.
    n_numerical_failures: u64,
    /// Route-(c) SVTs.
    n_brand_svt: u64,
    /// Route-(b) SVTs whose eigendecomposition was updated rather than recomputed.
    n_eigen_updates: u64,
}

/// Buffers reused from one update to the next (not part of the model: not serialized, and
/// ignored by `==`).
#[derive(Debug, Clone, Default)]
struct UpdateScratch {
    eigen: eigen_update::ColumnUpdater,
    updated: eigen_update::Eigen,
    /// `d x k` buffer of the row side's product `Π_L Û`.
    product: Vec<f64>,
    /// The intermediate eigendecomposition of a chain of column updates (a round of several tasks).
    chain: eigen_update::Eigen,
}

impl PartialEq for UpdateScratch {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

/// The change of one column of U in a round, `u^task += a`, as the Gram route sees it:
/// `g = Uᵀa` (before the change) and `α = ||a||²`.
struct ColumnChange {
    task: usize,
    g: Vec<f64>,
    alpha: f64,
}

/// One present task of a round: its row, task, label and pre-update score.
struct Item<'a> {
    x: Row<'a>,
    task: usize,
    y: f64,
    score: f64,
    /// `<v^task, x>` before the update, when the score already computed it.
    vx: Option<f64>,
    /// `Uᵀx` before the update, when the score already computed it (the factored form).
    ux: Option<Vec<f64>>,
}

learner_params! {
    /// ROMCO's hyper-parameters (§5).
    pub struct RomcoParams {
        /// Step size of U, `η1` (>= 0; `η1 + η2 > 0`).
        pub eta1: f64,
        /// Step size of V, `η2` (>= 0).
        pub eta2: f64,
        /// Trace-norm weight on U, `λ1` (>= 0).
        pub lambda1: f64,
        /// Group-lasso weight on V's columns, `λ2` (>= 0).
        pub lambda2: f64,
        /// When the model updates: on a positive loss or on a mistake.
        pub update: RomcoTrigger,
        /// The SVT implementation of §5.5 (`Auto` unless a test or benchmark says otherwise).
        pub svt_route: SvtRoute,
    }

    fn check(&self) -> Result<()> {
        let (eta1, eta2) = (self.eta1, self.eta2);
        for (name, value) in [
            ("eta1", eta1),
            ("eta2", eta2),
            ("lambda1", self.lambda1),
            ("lambda2", self.lambda2),
        ] {
            check_nonnegative(name, value)?;
        }
        if eta1 + eta2 <= 0.0 {
            return Err(invalid(
                "eta1",
                "eta1 + eta2 must be > 0 (otherwise the model never changes)",
            ));
        }
        Ok(())
    }
}

impl Build for Romco {
    type Params = RomcoParams;
    type Setting<'a> = LinearSetting;

    fn from_checked(params: &Checked<RomcoParams>, setting: &LinearSetting) -> Result<Self> {
        let (n_tasks, n_features) = (setting.n_tasks, setting.n_features);
        let factors = Need::new("n_tasks", n_tasks, "U and V (2 x n_features x n_tasks floats)");
        let size = factors.count::<f64>(&[2, n_features, n_tasks])? / 2;
        let per_task = Need::new("n_tasks", n_tasks, "the per-task state of V");
        // The k x k Gram matrix of U (route (b) of §5.5): k² floats whatever d is, plus the
        // thresholding's transient k x k buffers (R or Ĉ, its singular/eigen vectors, Π, the
        // new Gram): about 5 k² floats at peak, checked here so that a size beyond the machine
        // fails now rather than at the first thresholding.
        let square = Need::new(
            "n_tasks",
            n_tasks,
            "ROMCO's k x k matrices (the Gram of U and the thresholding's buffers, ~5 n_tasks² floats)",
        );
        square.count::<f64>(&[5, n_tasks, n_tasks])?;
        let gram = square.filled(&[n_tasks, n_tasks], 0.0)?;
        Ok(Self {
            n_tasks,
            n_features,
            params: **params,
            u: UForm::Dense(factors.filled(&[size], 0.0)?),
            resync_work: 0,
            v: factors.filled(&[size], 0.0)?,
            v_scale: per_task.filled(&[n_tasks], 0.0)?,
            v_sq_norm: per_task.filled(&[n_tasks], 0.0)?,
            gram,
            gram_side: GramSide::Columns,
            u_live: per_task.filled(&[n_tasks], false)?,
            svt_vectors: Vec::new(),
            svt_mu: Vec::new(),
            qr_pending: false,
            rank: Some(0),
            n_updates: 0,
            n_seen: 0,
            svt_counts: SvtCounts::default(),
            n_row_svt: 0,
            n_folds: 0,
            scratch: Box::default(),
        })
    }
}

impl Romco {
    /// Selects the SVT implementation (§5.5); `Auto` unless a test or benchmark says otherwise.
    pub fn with_route(mut self, route: SvtRoute) -> Self {
        self.params.svt_route = route;
        self
    }

    /// True when a singleton round uses route (c): only when selected. Measured on the issue's
    /// 18,000 x 400, 12-task stream it costs ~28 µs per update against ~10 µs for route (b)
    /// with the updated eigendecomposition, which is accurate whenever U is well conditioned.
    fn brand_applies(&self) -> bool {
        self.params.svt_route == SvtRoute::Brand
    }

    fn v_dot(&self, i: usize, x: &Row) -> f64 {
        let s = self.v_scale[i];
        if s == 0.0 {
            0.0
        } else {
            s * x.dot(&self.v[i * self.n_features..(i + 1) * self.n_features])
        }
    }

    /// U as a row-major `d x k` matrix.
    pub fn u_matrix(&self) -> Vec<f64> {
        let (u, d) = (self.dense_u(), self.n_features);
        self.to_row_major(|i| (&u[i * d..(i + 1) * d], 1.0))
    }

    /// V as a row-major `d x k` matrix.
    pub fn v_matrix(&self) -> Vec<f64> {
        let d = self.n_features;
        self.to_row_major(|i| (&self.v[i * d..(i + 1) * d], self.v_scale[i]))
    }

    fn to_row_major<'a>(&self, col: impl Fn(usize) -> (&'a [f64], f64)) -> Vec<f64> {
        let (d, k) = (self.n_features, self.n_tasks);
        let mut out = vec![0.0; d * k];
        for i in 0..k {
            let (c, s) = col(i);
            if s != 0.0 {
                for (r, &val) in c.iter().enumerate() {
                    out[r * k + i] = s * val;
                }
            }
        }
        out
    }

    /// Rank of U: after the last thresholding, or (with `λ1 = 0`) the numerical rank of U.
    pub fn rank(&self) -> usize {
        match self.rank {
            Some(r) => r,
            None => {
                let live: Vec<usize> = (0..self.n_tasks).filter(|&i| self.u_live[i]).collect();
                let u = self.dense_u();
                svt::qr_route_cols(&u, self.n_features, &live, 0.0, None).map_or(0, |s| s.rank)
            }
        }
    }

    /// Number of columns of V with `||v^i|| > 0`.
    pub fn n_personalized(&self) -> usize {
        (0..self.n_tasks)
            .filter(|&i| self.v_scale[i] != 0.0 && self.v_sq_norm[i] > 0.0)
            .count()
    }
}

impl Romco {
    /// Same hyper-parameters as `other`.
    pub fn same_settings(&self, other: &Self) -> bool {
        (self.n_tasks, self.n_features, self.params) == (other.n_tasks, other.n_features, other.params)
    }
}

impl OnlineLearner for Romco {
    shape_fields!();

    fn score(&self, x: Row, task: usize, _scratch: &mut Scratch) -> f64 {
        self.u_dot(&x, task) + self.v_dot(task, &x)
    }

    /// Protocol P1: the example is a singleton round (§1.3, §5.6).
    fn update(&mut self, x: Row, task: usize, y: f64, score: f64, _scratch: &mut Scratch) -> Result<()> {
        let item = Item {
            x,
            task,
            y,
            score,
            vx: None,
            ux: None,
        };
        self.joint_update(&[item], None)
    }

    /// Under route (c), `Bᵀx` serves both the score and the update.
    fn learn_one(&mut self, x: Row, task: usize, y: f64, _scratch: &mut Scratch) -> Result<f64> {
        // Under route (c) the score is read from `Bᵀx`, and in the factored form it is a
        // coordinate of `Uᵀx`: both serve the update too.
        let (mut bx, mut ux) = (None, None);
        let u = match &self.u {
            UForm::Dense(_) => self.u_dot(&x, task),
            UForm::RightFactored { .. } => {
                let mut all = vec![0.0; self.n_tasks];
                self.columns_dot_row(&x, &mut all);
                ux.insert(all)[task]
            }
            UForm::ThinSvd(f) => f.score_projected(bx.insert(f.project(&x)), task),
        };
        let vx = self.v_dot(task, &x);
        let score = u + vx;
        let item = Item {
            x,
            task,
            y,
            score,
            vx: Some(vx),
            ux,
        };
        self.joint_update(&[item], bx.as_deref())?;
        Ok(score)
    }

    fn arrays(&self) -> Vec<(&'static str, Vec<usize>, Vec<f64>)> {
        let shape = vec![self.n_features, self.n_tasks];
        vec![("U", shape.clone(), self.u_matrix()), ("V", shape, self.v_matrix())]
    }

    fn joint_rounds(&self) -> bool {
        true
    }

    fn learn_round(&mut self, round: Round, scores: &mut [f64], scratch: &mut Scratch) -> Result<()> {
        let Round { rows, tasks, y } = round;
        self.score_round(round, scores, scratch);
        let items: Vec<Item> = (0..rows.len())
            .map(|r| Item {
                x: rows[r],
                task: tasks[r],
                y: y[r],
                score: scores[r],
                vx: None,
                ux: None,
            })
            .collect();
        self.joint_update(&items, None)
    }

    linear_counters!();

    fn diagnostics(&self) -> Vec<(&'static str, f64)> {
        vec![
            ("rank", self.rank() as f64),
            ("n_personalized", self.n_personalized() as f64),
            ("n_gram_svt", self.svt_counts.n_gram_svt as f64),
            ("n_qr_svt", self.svt_counts.n_qr_svt as f64),
            ("n_drift_resyncs", self.svt_counts.n_drift_resyncs as f64),
            ("n_numerical_failures", self.svt_counts.n_numerical_failures as f64),
            ("n_brand_svt", self.svt_counts.n_brand_svt as f64),
            ("n_eigen_updates", self.svt_counts.n_eigen_updates as f64),
            ("n_row_svt", self.n_row_svt as f64),
            (
                "u_factored",
                f64::from(u8::from(matches!(self.u, UForm::RightFactored { .. }))),
            ),
            ("n_folds", self.n_folds as f64),
        ]
    }

    /// Zeroes the tasks' columns of U and V (`Romco::forget_columns`). No example is stored.
    fn forget_tasks(&mut self, tasks: &[usize]) -> Result<usize> {
        crate::learner::check_forget(tasks, self.n_tasks)?;
        self.forget_columns(tasks);
        Ok(0)
    }
}

/// `(‖exact − kept‖_F, ‖exact‖_F)`: how far a maintained matrix drifted from its exact value, and
/// the scale the drift is judged against.
fn frobenius_drift(exact: &[f64], kept: &[f64]) -> (f64, f64) {
    let drift = exact
        .iter()
        .zip(kept)
        .map(|(a, b)| (a - b) * (a - b))
        .sum::<f64>()
        .sqrt();
    let scale = exact.iter().map(|a| a * a).sum::<f64>().sqrt();
    (drift, scale)
}

/// The Gram route of the thresholding from an eigen-decomposition of the Gram, moving its values and
/// vectors out (the scratch keeps its allocation for the next call).
fn gram_route_taking(eig: &mut eigen_update::Eigen, theta: f64) -> Option<Shrinkage> {
    svt::gram_route_from_eigen(
        std::mem::take(&mut eig.values),
        std::mem::take(&mut eig.vectors),
        theta,
        false,
    )
}

mod check;
mod forget;
mod form;
mod layout;
mod sides;
#[cfg(test)]
mod tests;
mod threshold;
mod update;
