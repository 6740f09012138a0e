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
use crate::kernel::kernel_sum::{dense_coef_sum, dense_kernel_row, weighted_score, SparseIndex};
use crate::kernel::{BaseKernel, Query, Scratch, TaskKernel};
use crate::learner::spec::check_at_least_one;
use crate::learner::{
    check_nonnegative, is_update_mistake, ActiveSet, Build, Checked, KernelSetting, OnlineLearner, ParamGuard,
};
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
    /// The threshold named `"norm"` or `"squared"`.
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
        /// The largest number of stored examples (>= 1). Default [`DEFAULT_BUDGET`] (1000).
        ///
        /// [`DEFAULT_BUDGET`]: crate::learner::defaults::DEFAULT_BUDGET
        pub budget: usize,
        /// The projection threshold η (>= 0): a mistake whose projection error is within η is
        /// projected onto the stored examples instead of stored. Default 0.01.
        pub eta: f64,
        /// What η is compared with (Python's `threshold_on`). Default [`Threshold::Norm`].
        #[cfg_attr(feature = "python", pyo3(item("threshold_on")))]
        pub threshold: Threshold,
    }

    fn check(&self) -> Result<()> {
        check_at_least_one("budget", self.budget as u64)?;
        check_nonnegative("eta", self.eta)
    }
}

learner_params! {
    /// MTBPRJ2's hyper-parameters: the shared ones and the A-C7 ablation switch.
    pub struct MTBPRJ2Params {
        /// As [`ProjectronParams::budget`]. Default 1000.
        pub budget: usize,
        /// As [`ProjectronParams::eta`]. Default 0.01.
        pub eta: f64,
        /// As [`ProjectronParams::threshold`]. Default [`Threshold::Norm`].
        #[cfg_attr(feature = "python", pyo3(item("threshold_on")))]
        pub threshold: Threshold,
        /// Algorithm 2's line 14 as printed (§4.5, A-C7). Default `false` (as corrected).
        pub alg2_literal_line14: bool,
    }

    fn check(&self) -> Result<()> {
        self.shared().check_ref()
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
    param(params.check()).map(|_| ())
}

mod mtbprj;
mod mtbprj2;
#[cfg(test)]
mod tests;

pub use mtbprj::MTBPRJ;
pub use mtbprj2::MTBPRJ2;

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
