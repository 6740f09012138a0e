//! CW-COL: collaborative confidence-weighted learning (Li, Chang, Hoi, Liu & Jain, CIKM 2011),
//! as reconstructed in ALGORITHMS.md §6.4 (the collaborative layer is our specification, §8.3
//! A-B3, not verified against the paper).
//!
//! Base learner: diagonal confidence-weighted learning (Dredze, Crammer & Pereira, ICML 2008;
//! closed form of Crammer, Dredze & Pereira, NIPS 2008): a Gaussian `N(mu, diag(sigma))` over
//! weight vectors; when the probabilistic margin constraint `y mu.x >= phi sqrt(x' Sigma x)` is
//! violated, the mean moves along `y Sigma x` by `alpha` and the variances of the coordinates in
//! `x` shrink by `beta sigma_j^2 x_j^2`.
//!
//! Collaborative layer: one global CW model trained on every example, one individual model per
//! task; task `i` predicts with the weighted geometric mean of the two Gaussians (precisions
//! `pi_p = (1-omega) pi_i + omega pi_g`, precision-weighted mean), formed per coordinate on the
//! support of `x` only. The CW posterior computed from that prior is written into the task's
//! individual model on the support of `x` (only when the constraint was violated: otherwise the
//! posterior is the prior and the task model is left as it is); then the global model takes a
//! plain CW step. Every step costs O(nnz(x)).

use serde::{Deserialize, Serialize};

use crate::alloc::Need;
use crate::data::Row;
use crate::error::Result;
use crate::kernel::Scratch;
use crate::learner::shared::{
    check_maps, dense_applied, dense_changes, not_in_step, not_tracking, Mix, Replica, SharedChanges, SharedLayout,
    SharedUpdate,
};
use crate::learner::spec::{check_positive, check_within};
use crate::learner::undo::{SlotJournal, TryCopy};
use crate::learner::{Build, Checked, LinearSetting, OnlineLearner};
use crate::state::{check_counts, check_finite, check_len, ensure, param, CheckState};

/// The constants of a confidence level: `phi = Phi^{-1}(eta)`, `psi = 1 + phi^2/2`, `zeta = 1 + phi^2`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CwConstants {
    /// `Phi^{-1}(eta)`, the standard normal quantile of the confidence.
    pub phi: f64,
    /// `1 + phi^2/2`.
    pub psi: f64,
    /// `1 + phi^2`.
    pub zeta: f64,
}

impl CwConstants {
    /// The constants of `confidence` in (0.5, 1).
    pub fn new(confidence: f64) -> Result<Self> {
        check_within("confidence", confidence, 0.5, 1.0, true)?;
        let phi = normal_quantile(confidence);
        Ok(Self {
            phi,
            psi: 1.0 + phi * phi / 2.0,
            zeta: 1.0 + phi * phi,
        })
    }

    /// `(alpha, beta)` of the closed-form CW step for variance `v = x' Sigma x` and signed margin
    /// `m = y mu.x`; `None` when the constraint already holds (or `v = 0`).
    pub fn step(&self, v: f64, m: f64) -> Option<(f64, f64)> {
        let Self { phi, psi, zeta } = *self;
        if !(v > 0.0 && phi * v.sqrt() - m > 0.0) {
            return None;
        }
        let alpha = ((-m * psi + (m * m * phi.powi(4) / 4.0 + v * phi * phi * zeta).sqrt()) / (v * zeta)).max(0.0);
        if alpha <= 0.0 {
            return None;
        }
        let root = -alpha * v * phi + (alpha * alpha * v * v * phi * phi + 4.0 * v).sqrt();
        let u = 0.25 * root * root;
        let beta = alpha * phi / (u.sqrt() + v * alpha * phi);
        Some((alpha, beta))
    }
}

/// The standard normal quantile function: Acklam's rational approximation refined by one Halley
/// step on `erfc` (relative error about 1e-15 on (0, 1)).
#[allow(clippy::excessive_precision)] // Acklam's published coefficients, kept verbatim.
pub fn normal_quantile(p: f64) -> f64 {
    const A: [f64; 6] = [
        -3.969683028665376e1,
        2.209460984245205e2,
        -2.759285104469687e2,
        1.383577518672690e2,
        -3.066479806614716e1,
        2.506628277459239,
    ];
    const B: [f64; 5] = [
        -5.447609879822406e1,
        1.615858368580409e2,
        -1.556989798598866e2,
        6.680131188771972e1,
        -1.328068155288572e1,
    ];
    const C: [f64; 6] = [
        -7.784894002430293e-3,
        -3.223964580411365e-1,
        -2.400758277161838,
        -2.549732539343734,
        4.374664141464968,
        2.938163982698783,
    ];
    const D: [f64; 4] = [
        7.784695709041462e-3,
        3.224671290700398e-1,
        2.445134137142996,
        3.754408661907416,
    ];
    let low = 0.02425;
    let x = if p < low {
        let q = (-2.0 * p.ln()).sqrt();
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    } else if p <= 1.0 - low {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    } else {
        let q = (-2.0 * (1.0 - p).ln()).sqrt();
        -(((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    };
    // One Halley step: e = Phi(x) - p.
    let e = 0.5 * erfc(-x / std::f64::consts::SQRT_2) - p;
    let u = e * (2.0 * std::f64::consts::PI).sqrt() * (x * x / 2.0).exp();
    x - u / (1.0 + x * u / 2.0)
}

/// Complementary error function: Maclaurin series of erf for |x| < 0.5, a continued fraction beyond.
fn erfc(x: f64) -> f64 {
    if x.abs() < 0.5 {
        1.0 - erf_series(x)
    } else if x > 0.0 {
        erfc_cf(x)
    } else {
        2.0 - erfc_cf(-x)
    }
}

/// Maclaurin series of erf (converges fast for |x| < 0.5).
fn erf_series(x: f64) -> f64 {
    let mut term = x;
    let mut sum = x;
    let x2 = x * x;
    for n in 1..60 {
        term *= -x2 / n as f64;
        let add = term / (2 * n + 1) as f64;
        sum += add;
        if add.abs() < 1e-17 * sum.abs() {
            break;
        }
    }
    sum * 2.0 / std::f64::consts::PI.sqrt()
}

/// Continued fraction (modified Lentz) of erfc for x >= 0.5.
fn erfc_cf(x: f64) -> f64 {
    // erfc(x) = exp(-x^2)/sqrt(pi) * 1/(x + (1/2)/(x + 1/(x + (3/2)/(x + 2/(x + ...)))))
    let tiny = 1e-300;
    let mut f = x;
    let mut c = x;
    let mut d = 0.0;
    for n in 1..500 {
        let a = n as f64 / 2.0;
        d = x + a * d;
        d = if d.abs() < tiny { tiny } else { d };
        c = x + a / c;
        c = if c.abs() < tiny { tiny } else { c };
        d = 1.0 / d;
        let delta = c * d;
        f *= delta;
        if (delta - 1.0).abs() < 1e-16 {
            break;
        }
    }
    (-x * x).exp() / std::f64::consts::PI.sqrt() / f
}

/// A diagonal Gaussian over weight vectors: means and variances, dense of the full dimension.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CwModel {
    pub mu: Vec<f64>,
    pub sigma: Vec<f64>,
}

/// Variances never fall below `VARIANCE_FLOOR * a` (`a` the initial variance). In exact
/// arithmetic a CW step keeps every variance positive (`1 - beta sigma_j x_j^2 >= 1 - beta v > 0`),
/// but on a long stream `1 - beta v` cancels to 0 or below in floating point, and on noisy data
/// the precision grows geometrically (each mistake with a large margin multiplies it), so without
/// a floor the variances reach 0 and then negative values and infinite precisions (NaN scores
/// after ~30k noisy rows at d = 20). See docs/baselines.md.
pub const VARIANCE_FLOOR: f64 = 1e-12;

/// One coordinate's new mean and variance, computed before anything is written.
type Change = (usize, f64, f64);

impl CwModel {
    #[cfg(test)]
    pub fn new(n_features: usize, a: f64) -> Self {
        Self {
            mu: vec![0.0; n_features],
            sigma: vec![a; n_features],
        }
    }

    /// [`CwModel::new`] with its allocation checked.
    pub fn try_new(n_features: usize, a: f64) -> Result<Self> {
        let need = Need::new("n_features", n_features, "a CW model (2 x n_features floats)");
        need.count::<f64>(&[2, n_features])?;
        Ok(Self {
            mu: need.filled(&[n_features], 0.0)?,
            sigma: need.filled(&[n_features], a)?,
        })
    }

    #[cfg(test)]
    pub fn score(&self, x: &Row) -> f64 {
        x.dot(&self.mu)
    }

    /// The coordinates one plain CW step would change (empty when the constraint holds).
    fn step_changes(&self, c: &CwConstants, x: &Row, y: f64, floor: f64, out: &mut Vec<Change>) -> Result<()> {
        out.clear();
        let (mut v, mut s) = (0.0, 0.0);
        x.for_each(|j, xj| {
            if xj != 0.0 {
                v += self.sigma[j] * xj * xj;
                s += self.mu[j] * xj;
            }
        });
        let Some((alpha, beta)) = c.step(v, y * s) else {
            return Ok(());
        };
        x.for_each(|j, xj| {
            if xj != 0.0 {
                let sj = self.sigma[j];
                out.push((j, self.mu[j] + alpha * y * sj * xj, sj - beta * sj * sj * xj * xj));
            }
        });
        finish_changes(out, floor, "global", alpha, beta, v)
    }

    fn apply(&mut self, changes: &[Change]) {
        for &(j, mu, sigma) in changes {
            self.mu[j] = mu;
            self.sigma[j] = sigma;
        }
    }

    /// One plain CW step with variances floored at `floor`; returns whether the model changed.
    /// On `Err` (a non-finite step) the model is unchanged.
    #[cfg(test)]
    pub fn update(&mut self, c: &CwConstants, x: &Row, y: f64, floor: f64) -> Result<bool> {
        let mut changes = Vec::new();
        self.step_changes(c, x, y, floor, &mut changes)?;
        self.apply(&changes);
        Ok(!changes.is_empty())
    }
}

/// Checks the new values are finite, then floors the variances.
fn finish_changes(changes: &mut [Change], floor: f64, which: &str, alpha: f64, beta: f64, v: f64) -> Result<()> {
    if let Some(&(j, mu, sigma)) = changes.iter().find(|(_, m, s)| !(m.is_finite() && s.is_finite())) {
        return Err(crate::Error::Numerical(format!(
            "CW-COL {which} step is not finite at feature {j} (mean {mu}, variance {sigma}; alpha {alpha:e}, beta {beta:e}, x'Σx {v:e})"
        )));
    }
    changes.iter_mut().for_each(|c| c.2 = c.2.max(floor));
    Ok(())
}

/// CW-COL (Li et al., CIKM 2011; reconstructed in §6.4): confidence-weighted learning with a
/// global model and one model per task, each task's prior mixing the two by `omega`. A linear
/// learner: no kernels. Built with [`Build::build`] from [`CwColParams`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CwCol {
    n_features: usize,
    n_tasks: usize,
    constants: CwConstants,
    confidence: f64,
    a: f64,
    omega: f64,
    global: CwModel,
    /// Individual models, allocated on a task's first update (until then: mu = 0, sigma = a).
    individual: Vec<Option<CwModel>>,
    n_updates: u64,
    n_global_updates: u64,
    #[serde(skip)]
    journal: SlotJournal<Option<CwModel>>,
    /// As a replica: the global model's means and variances at the last sync
    /// ([`crate::learner::shared`]).
    #[serde(skip)]
    shared_base: Option<Vec<Vec<f64>>>,
}

learner_params! {
    /// CW-COL's hyper-parameters (§6.4); `Default` gives Python's `CWCOL()`.
    pub struct CwColParams {
        /// The confidence η of the CW update, in (0.5, 1). Default 0.85.
        pub confidence: f64,
        /// The initial variance (> 0). Default 1.
        pub a: f64,
        /// The weight of the global model in the prior, in [0, 1]. Default 0.5.
        pub omega: f64,
    }

    fn check(&self) -> Result<()> {
        CwConstants::new(self.confidence)?;
        check_positive("a", self.a)?;
        check_within("omega", self.omega, 0.0, 1.0, false)
    }
}

impl Build for CwCol {
    type Params = CwColParams;
    type Setting<'a> = LinearSetting;

    fn from_checked(params: &Checked<CwColParams>, setting: &LinearSetting) -> Result<Self> {
        let (n_tasks, n_features) = (setting.n_tasks, setting.n_features);
        let CwColParams { confidence, a, omega } = **params;
        let constants = CwConstants::new(confidence)?;
        Ok(Self {
            n_features,
            n_tasks,
            constants,
            confidence,
            a,
            omega,
            global: CwModel::try_new(n_features, a)?,
            individual: {
                check_models(n_tasks, n_features)?;
                Need::new("n_tasks", n_tasks, "the per-task model slots").filled(&[n_tasks], None)?
            },
            n_updates: 0,
            n_global_updates: 0,
            journal: SlotJournal::default(),
            shared_base: None,
        })
    }
}

/// Refuses a model whose per-task models (a mean and a variance of `n_features` each, allocated
/// on each task's first update) could not all fit in memory.
fn check_models(n_tasks: usize, n_features: usize) -> Result<()> {
    Need::new(
        "n_tasks",
        n_tasks,
        "CW-COL's per-task models (n_tasks x n_features x 2 doubles once every task has updated)",
    )
    .count::<f64>(&[n_tasks, n_features, 2])
    .map(drop)
}

impl TryCopy for CwModel {
    fn try_copy(&self) -> Result<Self> {
        Ok(Self {
            mu: self.mu.try_copy()?,
            sigma: self.sigma.try_copy()?,
        })
    }
}

impl CwCol {
    /// The constants of the model's confidence.
    pub fn constants(&self) -> CwConstants {
        self.constants
    }

    /// The prior `(mu_p, sigma_p)` of coordinate `j` for a task whose individual model is `own`
    /// (`None`: not yet allocated, i.e. mu = 0, sigma = a).
    #[inline]
    fn prior(&self, own: Option<&CwModel>, j: usize) -> (f64, f64) {
        let (mu_i, s_i) = own.map_or((0.0, self.a), |m| (m.mu[j], m.sigma[j]));
        let w = self.omega;
        if w == 0.0 {
            return (mu_i, s_i);
        }
        let (mu_g, s_g) = (self.global.mu[j], self.global.sigma[j]);
        if w == 1.0 {
            return (mu_g, s_g);
        }
        let (pi_i, pi_g) = ((1.0 - w) / s_i, w / s_g);
        let pi_p = pi_i + pi_g;
        ((pi_i * mu_i + pi_g * mu_g) / pi_p, 1.0 / pi_p)
    }

    /// The coordinates the collaborative step of `task` would write into its individual model.
    fn collaborative_changes(&self, x: &Row, task: usize, y: f64, out: &mut Vec<Change>) -> Result<()> {
        out.clear();
        let (mut v, mut s) = (0.0, 0.0);
        let own = self.individual[task].as_ref();
        x.for_each(|j, xj| {
            if xj != 0.0 {
                let (mu, sig) = self.prior(own, j);
                v += sig * xj * xj;
                s += mu * xj;
            }
        });
        let Some((alpha, beta)) = self.constants.step(v, y * s) else {
            return Ok(());
        };
        x.for_each(|j, xj| {
            if xj != 0.0 {
                let (mu, sig) = self.prior(own, j);
                out.push((j, mu + alpha * y * sig * xj, sig - beta * sig * sig * xj * xj));
            }
        });
        finish_changes(out, self.floor(), "task", alpha, beta, v)
    }

    fn floor(&self) -> f64 {
        VARIANCE_FLOOR * self.a
    }

    /// Smallest variance over the global and the allocated individual models.
    pub fn min_variance(&self) -> f64 {
        let mut m = self.global.sigma.iter().copied().fold(f64::INFINITY, f64::min);
        for model in self.individual.iter().flatten() {
            m = model.sigma.iter().copied().fold(m, f64::min);
        }
        m
    }
}

impl CwModel {
    /// A restored model of `n_features` coordinates: finite means, and variances between the
    /// floor `VARIANCE_FLOOR * a` (where every step leaves them) and the initial variance `a`
    /// (a CW step only shrinks a variance; the collaborative prior blends two of them).
    fn check_state(&self, n_features: usize, a: f64) -> Result<()> {
        check_len("CW means", self.mu.len(), n_features)?;
        check_len("CW variances", self.sigma.len(), n_features)?;
        check_finite("CW means", &self.mu)?;
        check_finite("CW variances", &self.sigma)?;
        let (floor, top) = (VARIANCE_FLOOR * a, a * (1.0 + 1e-9));
        ensure(self.sigma.iter().all(|&s| s >= floor && s <= top), || {
            format!("a CW variance is outside [{floor:e}, {a:e}] (the variance floor and the initial variance)")
        })
    }
}

impl CwCol {
    same_settings_fields!(n_tasks, n_features, confidence, a, omega);
}

impl CheckState for CwCol {
    fn check_state(&self) -> Result<()> {
        // Lengths first: they bound the sizes by the payload before `new` allocates.
        check_counts("CW-COL", &[self.n_updates, self.n_global_updates])?;
        ensure(self.a.is_finite() && self.a > 0.0, || {
            format!("CW-COL: a = {} must be finite and > 0", self.a)
        })?;
        self.global.check_state(self.n_features, self.a)?;
        check_len("CW individual models", self.individual.len(), self.n_tasks)?;
        // The settings must be ones `new` accepts, and the constants those of the confidence.
        let params = CwColParams {
            confidence: self.confidence,
            a: self.a,
            omega: self.omega,
        };
        let fresh = param(Self::build(&params, &LinearSetting::new(self.n_tasks, self.n_features)))?;
        ensure(fresh.constants == self.constants, || {
            "the CW constants do not match the confidence".into()
        })?;
        for m in self.individual.iter().flatten() {
            m.check_state(self.n_features, self.a)?;
        }
        Ok(())
    }
}

impl OnlineLearner for CwCol {
    shape_fields!(grows);

    fn score(&self, x: Row, task: usize, _scratch: &mut Scratch) -> f64 {
        let mut s = 0.0;
        let own = self.individual[task].as_ref();
        x.for_each(|j, xj| {
            if xj != 0.0 {
                s += self.prior(own, j).0 * xj;
            }
        });
        s
    }

    /// Both steps (task and global, each from the model before this example) are computed and
    /// checked first, then written: on `Err` nothing has changed.
    fn update(&mut self, x: Row, task: usize, y: f64, _score: f64, _scratch: &mut Scratch) -> Result<()> {
        let (mut own, mut global) = (Vec::new(), Vec::new());
        self.collaborative_changes(&x, task, y, &mut own)?;
        self.global
            .step_changes(&self.constants, &x, y, self.floor(), &mut global)?;
        self.journal.touch(&self.individual, task)?;
        if !global.is_empty() {
            // The global model, saved once per journaled call.
            let model = &self.global;
            self.journal.touch_shared(|| Ok(Some(model.try_copy()?)))?;
        }
        if !own.is_empty() {
            if self.individual[task].is_none() {
                self.individual[task] = Some(CwModel::try_new(self.n_features, self.a)?);
            }
            self.individual[task].as_mut().expect("allocated above").apply(&own);
            self.n_updates += 1;
        }
        if !global.is_empty() {
            self.global.apply(&global);
            self.n_global_updates += 1;
        }
        Ok(())
    }

    linear_counters!();

    fn diagnostics(&self) -> Vec<(&'static str, f64)> {
        vec![
            ("n_global_updates", self.n_global_updates as f64),
            ("min_variance", self.min_variance()),
            ("phi", self.constants.phi),
            ("confidence", self.confidence),
        ]
    }

    fn journal_begin(&mut self) -> bool {
        self.begin_journal()
    }

    fn journal_commit(&mut self) {
        self.journal.commit();
    }

    fn journal_rollback(&mut self) {
        self.rollback_journal();
    }

    /// Drops the tasks' individual models (back to the prior); the global model, learned from
    /// every task's examples, keeps their influence. No example is stored.
    fn forget_tasks(&mut self, tasks: &[usize]) -> Result<usize> {
        super::check_forget(tasks, self.n_tasks)?;
        tasks.iter().for_each(|&t| self.individual[t] = None);
        Ok(0)
    }

    fn arrays(&self) -> Vec<(&'static str, Vec<usize>, Vec<f64>)> {
        let (k, d) = (self.n_tasks, self.n_features);
        let global = vec![
            ("global_mean", vec![d], self.global.mu.clone()),
            ("global_variance", vec![d], self.global.sigma.clone()),
        ];
        // The per-task picture only where it is small (2^24 values each, 128 MB).
        if k.checked_mul(d).is_none_or(|n| n > 1 << 24) {
            return global;
        }
        let mut mu = Vec::with_capacity(k * d);
        let mut sigma = Vec::with_capacity(k * d);
        for m in &self.individual {
            match m {
                Some(m) => {
                    mu.extend_from_slice(&m.mu);
                    sigma.extend_from_slice(&m.sigma);
                }
                None => {
                    mu.extend(std::iter::repeat_n(0.0, d));
                    sigma.extend(std::iter::repeat_n(self.a, d));
                }
            }
        }
        let mut out = vec![("task_mean", vec![k, d], mu), ("task_variance", vec![k, d], sigma)];
        out.extend(global);
        out
    }
}

impl CwCol {
    fn begin_journal(&mut self) -> bool {
        self.journal.begin(self.individual.len());
        self.journal.counts = [self.n_updates, self.n_global_updates, self.n_tasks as u64, 0];
        true
    }

    fn rollback_journal(&mut self) {
        if !self.journal.is_active() {
            return;
        }
        let [n_updates, n_global_updates, n_tasks, _] = self.journal.counts;
        (self.n_updates, self.n_global_updates, self.n_tasks) = (n_updates, n_global_updates, n_tasks as usize);
        if let Some(Some(global)) = self.journal.rollback(&mut self.individual) {
            self.global = global;
        }
    }

    /// Adds `n` tasks (open-ended task sets): each starts from the untouched prior (mu = 0,
    /// sigma = a, allocated on its first update) combined with the global model, as a task that
    /// has not been updated yet; nothing learned changes. Atomic.
    fn grow_tasks(&mut self, n: usize) -> Result<()> {
        let new_k = super::grown_n_tasks(self.n_tasks, n)?;
        check_models(new_k, self.n_features)?;
        Need::new("n_tasks", new_k, "the per-task model slots").append_empty(&mut self.individual, n)?;
        self.n_tasks = new_k;
        Ok(())
    }

    /// Undoes [`CwCol::grow_tasks`] of the last `n` tasks, which were not updated.
    fn shrink_tasks(&mut self, n: usize) {
        self.n_tasks -= n;
        debug_assert!(self.individual[self.n_tasks..].iter().all(Option::is_none));
        self.individual.truncate(self.n_tasks);
    }
}

/// CW-COL as a replica of a coupled model: the global model is the shared state, its means
/// combined as weights, its variances through their precisions (the inverse variances' gains
/// added, as one model's precision accumulates over its updates); the task models are the
/// replica's own.
impl Replica for CwCol {
    fn shared_layout(&self) -> Result<SharedLayout> {
        Ok(SharedLayout {
            kind: "cw_col".into(),
            settings: format!(
                "confidence={} a={} omega={} n_features={}",
                self.confidence, self.a, self.omega, self.n_features
            ),
            space: self.n_features as u64,
            columns: vec![Mix::Weight, Mix::Precision],
            single: false,
            scalars: Vec::new(),
        })
    }

    fn track_shared(&mut self) -> Result<()> {
        self.shared_base = Some(vec![self.global.mu.clone(), self.global.sigma.clone()]);
        Ok(())
    }

    fn shared_changes(&self) -> Result<SharedChanges> {
        let base = self.shared_base.as_ref().ok_or_else(not_tracking)?;
        Ok(dense_changes(
            self.shared_layout()?,
            base,
            &[&self.global.mu, &self.global.sigma],
        ))
    }

    fn apply_shared(&mut self, update: &SharedUpdate) -> Result<()> {
        if update.layout != self.shared_layout()? {
            return Err(crate::error::invalid(
                "update",
                "a shared-state update of another model",
            ));
        }
        let base = self.shared_base.as_ref().ok_or_else(not_tracking)?;
        let changes = dense_applied(update, base, &[&self.global.mu, &self.global.sigma]);
        let (floor, top) = (self.floor(), self.a);
        if changes.iter().any(|(_, v)| !(v[0].is_finite() && v[1].is_finite())) {
            return Err(crate::Error::Numerical(
                "CW-COL: the combined global model is not finite".into(),
            ));
        }
        for (j, v) in changes {
            self.global.mu[j] = v[0];
            self.global.sigma[j] = v[1].clamp(floor, top);
        }
        self.shared_base = Some(vec![self.global.mu.clone(), self.global.sigma.clone()]);
        Ok(())
    }

    fn merge_replicas(parts: &[&Self], maps: &[Vec<Option<usize>>], n_tasks: usize) -> Result<Self> {
        check_maps(parts.len(), maps, n_tasks)?;
        let first = parts[0];
        for p in parts {
            if p.shared_layout()? != first.shared_layout()? {
                return Err(crate::error::invalid("parts", "replicas of different models"));
            }
            if p.global != first.global {
                return Err(not_in_step("global models"));
            }
        }
        let params = CwColParams {
            confidence: first.confidence,
            a: first.a,
            omega: first.omega,
        };
        let mut merged = Self::build(&params, &LinearSetting::new(n_tasks, first.n_features))?;
        merged.global = first.global.try_copy()?;
        for (p, map) in parts.iter().zip(maps) {
            for (j, model) in p.individual.iter().enumerate() {
                let Some(model) = model else { continue };
                let Some(t) = map.get(j).copied().flatten() else {
                    return Err(crate::error::invalid(
                        "maps",
                        format!("task {j} of a replica has a model but no merged task"),
                    ));
                };
                if merged.individual[t].is_some() {
                    return Err(crate::error::invalid(
                        "maps",
                        format!("two replicas hold a model of merged task {t}"),
                    ));
                }
                merged.individual[t] = Some(model.try_copy()?);
            }
        }
        merged.n_updates = parts.iter().map(|p| p.n_updates).sum();
        merged.n_global_updates = parts.iter().map(|p| p.n_global_updates).sum();
        Ok(merged)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::Rows;
    use crate::learner::{learn, test_support};

    #[test]
    fn quantile_is_accurate() {
        assert!((normal_quantile(0.85) - 1.036_433_389_493_789_6).abs() < 1e-14);
        assert!((normal_quantile(0.975) - 1.959_963_984_540_054).abs() < 1e-14);
        assert!((normal_quantile(0.5)).abs() < 1e-15);
        assert!((normal_quantile(0.999) - 3.090_232_306_167_813_5).abs() < 1e-13);
    }

    #[test]
    fn constraint_holds_with_equality_on_one_coordinate() {
        let c = CwConstants::new(0.9).unwrap();
        let mut m = CwModel::new(3, 1.0);
        let x = [0.0, 2.0, 0.0];
        assert!(m.update(&c, &Row::Dense(&x), 1.0, 0.0).unwrap());
        let margin = m.score(&Row::Dense(&x));
        let v = m.sigma[1] * 4.0;
        assert!(
            (margin - c.phi * v.sqrt()).abs() < 1e-12,
            "{margin} vs {}",
            c.phi * v.sqrt()
        );
        assert!(!m.update(&c, &Row::Dense(&x), 1.0, 0.0).unwrap());
    }

    #[test]
    fn omega_zero_is_independent_cw_and_variances_stay_positive() {
        let (n, d, k) = (500, 5, 3);
        let (x, tasks, y) = test_support::stream(n, d, k, 3, |x, _, _| x[0] - x[1] > 0.0);
        let rows = Rows::dense(&x, n, d);
        let mut col = CwCol::build(
            &CwColParams {
                confidence: 0.85,
                a: 1.0,
                omega: 0.0,
            },
            &LinearSetting::new(k, d),
        )
        .unwrap();
        let a = learn(&mut col, &rows, &tasks, &y).unwrap();
        let c = CwConstants::new(0.85).unwrap();
        let mut single: Vec<CwModel> = (0..k).map(|_| CwModel::new(d, 1.0)).collect();
        for t in 0..n {
            let m = &mut single[tasks[t] as usize];
            assert!((m.score(&rows.row(t)) - a[t]).abs() <= 1e-12 * a[t].abs().max(1.0));
            m.update(&c, &rows.row(t), y[t], 0.0).unwrap();
        }
        assert!(col.min_variance() > 0.0);
        assert!(CwCol::build(
            &CwColParams {
                confidence: 0.4,
                a: 1.0,
                omega: 0.0
            },
            &LinearSetting::new(k, d)
        )
        .is_err());
        assert!(CwCol::build(
            &CwColParams {
                confidence: 0.8,
                a: 1.0,
                omega: 1.5
            },
            &LinearSetting::new(k, d)
        )
        .is_err());
    }
}
