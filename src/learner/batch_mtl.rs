//! MTFL and TRML: batch multitask logistic learners retrained periodically (ALGORITHMS.md §6.5;
//! ROMCO's baselines, §8.2 A-R10, A-R11).
//!
//! Objective (MALSAR style): `sum_{i: n_i > 0} (1/n_i) sum_{(x,y) in D_i} log(1 + exp(-y (w_i.x + c_i)))
//! + rho Omega(W)` with a per-task bias `c_i` (never regularised) and
//! - MTFL: `Omega(W) = sum_r |W_{r,:}|_2` (row / feature groups; Liu, Ji & Ye, UAI 2009),
//! - TRML: `Omega(W) = |W|_*` (trace norm; Ji & Ye, ICML 2009).
//!
//! Solver: accelerated proximal gradient (FISTA, Beck & Teboulle 2009) with MALSAR's line search
//! (`L` starts at 1 and doubles until the quadratic upper bound holds, never decreases), stopped
//! when the objective changes by at most `tol` relative, after `max_iter` iterations, or when
//! the step `|Z+ - S|^2 <= 1e-20`. Proximal maps: row-wise group shrinkage; singular value
//! thresholding by Householder QR of the `d x k` matrix and an SVD of the small `R` (§5.5 a,
//! shared with ROMCO: `linalg::svt`).
//!
//! Online schedule (protocol P1): every example is stored; after every `retrain_every` examples
//! the model is retrained on all examples seen so far, warm-started from the previous solution,
//! and the examples in between are predicted with the last model (0 before the first retrain,
//! so every early prediction is +1 by S0). Memory: the stored examples in single precision,
//! dense `4 n d` bytes or sparse `8 nnz + 8 n` bytes, plus 12 bytes per example for its task id
//! and label. (The solver computes in double precision on the rounded copy.)

use nalgebra::DMatrix;
use serde::{Deserialize, Serialize};

use crate::alloc::Need;
use crate::data::{Row, Rows};
use crate::error::{invalid, Error, Result};
use crate::kernel::Scratch;
use crate::learner::{check_nonnegative, Build, OnlineLearner, Setting};
use crate::linalg::svt;
use crate::state::{
    check_counts, check_finite, check_len, check_tasks_and_labels, checked_size, ensure, param, CheckState,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Regularizer {
    /// Row-wise l2,1 norm (MTFL).
    L21,
    /// Trace (nuclear) norm (TRML).
    Trace,
}

impl Regularizer {
    pub fn parse(name: &str) -> Result<Self> {
        match name {
            "l21" => Ok(Self::L21),
            "trace" => Ok(Self::Trace),
            other => Err(invalid(
                "regularizer",
                format!("expected 'l21' or 'trace', got {other:?}"),
            )),
        }
    }
}

/// Stopping rule of the solver (§6.5 defaults: `tol = 1e-4`, `max_iter = 1000`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SolverOptions {
    pub tol: f64,
    pub max_iter: usize,
}

impl Default for SolverOptions {
    fn default() -> Self {
        Self {
            tol: 1e-4,
            max_iter: 1000,
        }
    }
}

/// What one solve did.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct SolveReport {
    /// `F(W) + rho Omega(W)` at the returned point.
    pub objective: f64,
    pub n_iter: usize,
    /// The final line-search constant `L`.
    pub lipschitz: f64,
}

/// `log(1 + e^z)`, computed stably.
#[inline]
fn softplus(z: f64) -> f64 {
    z.max(0.0) + (-z.abs()).exp().ln_1p()
}

/// `1 / (1 + e^z)`, computed stably.
#[inline]
fn sigmoid_neg(z: f64) -> f64 {
    if z > 0.0 {
        let e = (-z).exp();
        e / (1.0 + e)
    } else {
        1.0 / (1.0 + z.exp())
    }
}

/// Rows the solver reads: `x_r . w` and `w += a x_r`.
pub trait RowSource {
    fn n_cols(&self) -> usize;
    fn dot(&self, r: usize, w: &[f64]) -> f64;
    fn axpy(&self, r: usize, a: f64, w: &mut [f64]);
}

impl RowSource for Rows<'_> {
    fn n_cols(&self) -> usize {
        Rows::n_cols(self)
    }

    #[inline]
    fn dot(&self, r: usize, w: &[f64]) -> f64 {
        self.row(r).dot(w)
    }

    #[inline]
    fn axpy(&self, r: usize, a: f64, w: &mut [f64]) {
        self.row(r).add_to(w, a)
    }
}

/// Stored examples in single precision (the learner's store), read in double precision.
pub enum F32Rows<'a> {
    Dense {
        data: &'a [f32],
        n_cols: usize,
    },
    Csr {
        indptr: &'a [i64],
        indices: &'a [u32],
        values: &'a [f32],
        n_cols: usize,
    },
}

#[inline]
fn dot_f32(x: &[f32], w: &[f64]) -> f64 {
    let n = x.len().min(w.len());
    let (x, w) = (&x[..n], &w[..n]);
    let mut acc = [0.0f64; 4];
    let chunks = n / 4;
    for c in 0..chunks {
        let i = 4 * c;
        acc[0] += f64::from(x[i]) * w[i];
        acc[1] += f64::from(x[i + 1]) * w[i + 1];
        acc[2] += f64::from(x[i + 2]) * w[i + 2];
        acc[3] += f64::from(x[i + 3]) * w[i + 3];
    }
    let mut tail = 0.0;
    for i in 4 * chunks..n {
        tail += f64::from(x[i]) * w[i];
    }
    (acc[0] + acc[1]) + (acc[2] + acc[3]) + tail
}

impl RowSource for F32Rows<'_> {
    fn n_cols(&self) -> usize {
        match *self {
            F32Rows::Dense { n_cols, .. } | F32Rows::Csr { n_cols, .. } => n_cols,
        }
    }

    #[inline]
    fn dot(&self, r: usize, w: &[f64]) -> f64 {
        match *self {
            F32Rows::Dense { data, n_cols } => dot_f32(&data[r * n_cols..(r + 1) * n_cols], w),
            F32Rows::Csr {
                indptr,
                indices,
                values,
                ..
            } => {
                let (a, b) = (indptr[r] as usize, indptr[r + 1] as usize);
                indices[a..b]
                    .iter()
                    .zip(&values[a..b])
                    .map(|(&j, &v)| f64::from(v) * w[j as usize])
                    .sum()
            }
        }
    }

    #[inline]
    fn axpy(&self, r: usize, a: f64, w: &mut [f64]) {
        match *self {
            F32Rows::Dense { data, n_cols } => w
                .iter_mut()
                .zip(&data[r * n_cols..(r + 1) * n_cols])
                .for_each(|(wi, &x)| *wi += a * f64::from(x)),
            F32Rows::Csr {
                indptr,
                indices,
                values,
                ..
            } => {
                let (lo, hi) = (indptr[r] as usize, indptr[r + 1] as usize);
                for (&j, &v) in indices[lo..hi].iter().zip(&values[lo..hi]) {
                    w[j as usize] += a * f64::from(v);
                }
            }
        }
    }
}

/// The training set of one solve: rows, task ids, ±1 labels and the per-task weights `1/n_i`.
struct Problem<'a, R: RowSource> {
    rows: &'a R,
    tasks: &'a [u32],
    y: &'a [f64],
    inv_counts: Vec<f64>,
    d: usize,
}

impl<'a, R: RowSource> Problem<'a, R> {
    fn new(rows: &'a R, tasks: &'a [u32], y: &'a [f64], k: usize) -> Self {
        let mut counts = vec![0usize; k];
        tasks.iter().for_each(|&t| counts[t as usize] += 1);
        let inv_counts = counts
            .iter()
            .map(|&n| if n > 0 { 1.0 / n as f64 } else { 0.0 })
            .collect();
        Self {
            rows,
            tasks,
            y,
            inv_counts,
            d: rows.n_cols(),
        }
    }

    /// `out[r] = w_{task(r)}.x_r + c_{task(r)}`: one pass over the data.
    fn margins(&self, w: &[f64], c: &[f64], out: &mut [f64]) {
        let d = self.d;
        for (r, m) in out.iter_mut().enumerate() {
            let t = self.tasks[r] as usize;
            *m = self.rows.dot(r, &w[t * d..(t + 1) * d]) + c[t];
        }
    }

    /// The loss from the margins (no pass over the data).
    fn loss_at(&self, margins: &[f64]) -> f64 {
        let mut per_task = vec![0.0; self.inv_counts.len()];
        for (r, &m) in margins.iter().enumerate() {
            per_task[self.tasks[r] as usize] += softplus(-self.y[r] * m);
        }
        per_task.iter().zip(&self.inv_counts).map(|(l, s)| l * s).sum()
    }

    #[cfg(test)]
    fn loss(&self, w: &[f64], c: &[f64]) -> f64 {
        let mut m = vec![0.0; self.y.len()];
        self.margins(w, c, &mut m);
        self.loss_at(&m)
    }

    /// One pass: the margins `mp` of `(wp, cp)`, the margins `ms_next = mp + alpha (mp - mz)` of
    /// the next search point and the gradient there (into `gw`/`gc`).
    #[allow(clippy::too_many_arguments)]
    fn fused_pass(
        &self,
        wp: &[f64],
        cp: &[f64],
        mz: &[f64],
        alpha: f64,
        mp: &mut [f64],
        ms_next: &mut [f64],
        gw: &mut [f64],
        gc: &mut [f64],
    ) {
        gw.iter_mut().for_each(|g| *g = 0.0);
        gc.iter_mut().for_each(|g| *g = 0.0);
        let d = self.d;
        for r in 0..mp.len() {
            let t = self.tasks[r] as usize;
            let m = self.rows.dot(r, &wp[t * d..(t + 1) * d]) + cp[t];
            mp[r] = m;
            let s = m + alpha * (m - mz[r]);
            ms_next[r] = s;
            let g = -self.y[r] * sigmoid_neg(self.y[r] * s) * self.inv_counts[t];
            self.rows.axpy(r, g, &mut gw[t * d..(t + 1) * d]);
            gc[t] += g;
        }
    }

    /// The gradient at the point whose margins are given, into `gw`/`gc`: one pass.
    fn grad_at(&self, margins: &[f64], gw: &mut [f64], gc: &mut [f64]) {
        gw.iter_mut().for_each(|g| *g = 0.0);
        gc.iter_mut().for_each(|g| *g = 0.0);
        let d = self.d;
        for (r, &m) in margins.iter().enumerate() {
            let t = self.tasks[r] as usize;
            let g = -self.y[r] * sigmoid_neg(self.y[r] * m) * self.inv_counts[t];
            self.rows.axpy(r, g, &mut gw[t * d..(t + 1) * d]);
            gc[t] += g;
        }
    }
}

/// `Omega(W)` of a task-major `W` (`w_i = w[i*d..(i+1)*d]`, i.e. a column-major `d x k` matrix).
pub fn penalty(reg: Regularizer, w: &[f64], d: usize, k: usize) -> f64 {
    match reg {
        Regularizer::L21 => (0..d)
            .map(|r| (0..k).map(|i| w[i * d + r].powi(2)).sum::<f64>().sqrt())
            .sum(),
        Regularizer::Trace => {
            if d == 0 || k == 0 {
                return 0.0;
            }
            if !w.iter().all(|v| v.is_finite()) {
                return f64::NAN;
            }
            // Capped iterations (no cap by default): a non-convergence reads as NaN.
            nalgebra::SVD::try_new(
                DMatrix::from_column_slice(d, k, w),
                false,
                false,
                f64::EPSILON,
                svt::MAX_ITER,
            )
            .map_or(f64::NAN, |svd| svd.singular_values.iter().sum())
        }
    }
}

/// `prox_{theta Omega}` in place on a task-major `W`; returns `Omega` of the result (the shrunk
/// row norms or singular values, so no second decomposition is needed).
pub fn prox(reg: Regularizer, w: &mut [f64], d: usize, k: usize, theta: f64) -> f64 {
    match reg {
        Regularizer::L21 => {
            let mut total = 0.0;
            for r in 0..d {
                let norm = (0..k).map(|i| w[i * d + r].powi(2)).sum::<f64>().sqrt();
                let scale = if norm > 0.0 { (1.0 - theta / norm).max(0.0) } else { 0.0 };
                (0..k).for_each(|i| w[i * d + r] *= scale);
                total += scale * norm;
            }
            total
        }
        // With no threshold the prox is the identity; skipping it keeps empty columns exactly 0.
        Regularizer::Trace if theta == 0.0 => penalty(reg, w, d, k),
        Regularizer::Trace => svt(w, d, k, theta),
    }
}

/// Singular value thresholding of the column-major `d x k` matrix `w` (§5.5 a), through ROMCO's
/// route (a): the `R` of a blocked Householder QR (no `d x k` Q is formed), the SVD of `R`, and
/// `W ← W Π` in place (`svt::qr_route`, `svt::right_multiply_in_place`). Returns the trace norm
/// of the result, `sum (s - theta)_+`.
pub fn svt(w: &mut [f64], d: usize, k: usize, theta: f64) -> f64 {
    // Non-finite input (only reachable from overflowing data) is left alone.
    if !w.iter().all(|v| v.is_finite()) {
        return f64::NAN;
    }
    let Some(shrink) = svt::qr_route(w, d, k, theta) else {
        return penalty(Regularizer::Trace, w, d, k);
    };
    svt::right_multiply_in_place(w, d, k, &shrink.pi);
    shrink.sigma.iter().map(|s| (s - theta).max(0.0)).sum()
}

/// Cap on the doublings of `L` in one line search: from `L = 1`, 2000 doublings pass `f64::MAX`
/// (after which the step `g / L` is 0 and the search stalls), so the cap is only reached when the
/// test itself is not finite, which the search also checks directly.
pub const MAX_LINE_SEARCH: usize = 2000;

/// Accelerated proximal gradient on all of `rows` (validated by the caller), warm-started from
/// `(w, c)` and overwriting them with the solution.
///
/// Errors, with `(w, c)` untouched: a numerical failure (a non-finite loss, gradient or step, e.g.
/// from NaN in the stored examples, or more than [`MAX_LINE_SEARCH`] doublings in one line
/// search), or an interrupt ([`crate::interrupt`], checked at every iteration and line-search
/// trial, which returns [`crate::Error::Interrupted`]).
#[allow(clippy::too_many_arguments)]
pub fn solve<R: RowSource>(
    rows: &R,
    tasks: &[u32],
    y: &[f64],
    k: usize,
    reg: Regularizer,
    rho: f64,
    w: &mut [f64],
    c: &mut [f64],
    opts: SolverOptions,
) -> Result<SolveReport> {
    let problem = Problem::new(rows, tasks, y, k);
    let d = problem.d;
    let n = y.len();
    let (mut wz, mut wz_old) = (w.to_vec(), w.to_vec());
    let (mut cz, mut cz_old) = (c.to_vec(), c.to_vec());
    let (mut wp, mut cp) = (vec![0.0; d * k], vec![0.0; k]);
    let mut t = 1.0f64;
    let mut lip = 1.0f64;
    let mut prev: Option<f64> = None;
    // Margins are linear in (W, c), so those of a search point S are combined from the margins
    // of the last two iterates, and the pass that computes the margins at a trial point Z+ also
    // accumulates the gradient at the next search point (assuming Z+ is accepted, which it
    // nearly always is; a rejected trial simply recomputes it). One pass over the data per
    // iteration.
    let mut mz = vec![0.0; n];
    problem.margins(w, c, &mut mz);
    let (mut ms, mut mp, mut ms_next) = (mz.clone(), vec![0.0; n], vec![0.0; n]);
    let (mut ws, mut cs) = (wz.clone(), cz.clone());
    let (mut gw, mut gc) = (vec![0.0; d * k], vec![0.0; k]);
    let (mut gw_next, mut gc_next) = (vec![0.0; d * k], vec![0.0; k]);
    problem.grad_at(&ms, &mut gw, &mut gc);
    let mut objective = problem.loss_at(&mz) + rho * penalty(reg, w, d, k);
    let mut n_iter = 0;
    while n_iter < opts.max_iter {
        crate::interrupt::check_now()?;
        n_iter += 1;
        let fs = problem.loss_at(&ms);
        let t_next = (1.0 + (1.0 + 4.0 * t * t).sqrt()) / 2.0;
        let alpha_next = (t - 1.0) / t_next;
        let mut stalled = false;
        let mut fp;
        let mut omega;
        let mut doublings = 0usize;
        loop {
            // Each trial is a pass over the data; NaN in the data can keep the search going.
            crate::interrupt::check_now()?;
            wp.iter_mut()
                .zip(ws.iter().zip(&gw))
                .for_each(|(p, (s, g))| *p = s - g / lip);
            omega = prox(reg, &mut wp, d, k, rho / lip);
            cp.iter_mut()
                .zip(cs.iter().zip(&gc))
                .for_each(|(p, (s, g))| *p = s - g / lip);
            problem.fused_pass(
                &wp,
                &cp,
                &mz,
                alpha_next,
                &mut mp,
                &mut ms_next,
                &mut gw_next,
                &mut gc_next,
            );
            fp = problem.loss_at(&mp);
            let (mut r_sum, mut lin) = (0.0, 0.0);
            for ((p, s), g) in wp.iter().zip(&ws).zip(&gw).chain(cp.iter().zip(&cs).zip(&gc)) {
                let delta = p - s;
                r_sum += delta * delta;
                lin += delta * g;
            }
            // A NaN makes every comparison below false: without this exit the search never ends.
            if !(fp.is_finite() && fs.is_finite() && lin.is_finite() && r_sum.is_finite() && omega.is_finite()) {
                return Err(Error::Numerical(format!(
                    "the retraining line search met a non-finite value (loss {fp}, step norm² {r_sum}, L = {lip:e}); \
                     the stored examples or the model hold NaN or infinity"
                )));
            }
            if r_sum <= 1e-20 {
                stalled = true;
                break;
            }
            if fp <= fs + lin + lip / 2.0 * r_sum {
                break;
            }
            doublings += 1;
            if doublings > MAX_LINE_SEARCH {
                return Err(Error::Numerical(format!(
                    "the retraining line search did not converge in {MAX_LINE_SEARCH} doublings of L"
                )));
            }
            lip *= 2.0;
        }
        std::mem::swap(&mut wz_old, &mut wz);
        wz.copy_from_slice(&wp);
        std::mem::swap(&mut cz_old, &mut cz);
        cz.copy_from_slice(&cp);
        std::mem::swap(&mut mz, &mut mp);
        objective = fp + rho * omega;
        if stalled {
            break;
        }
        if let Some(p) = prev {
            if (objective - p).abs() <= opts.tol * p {
                break;
            }
        }
        prev = Some(objective);
        t = t_next;
        // The next search point S = Z_k + alpha (Z_k - Z_{k-1}); its margins and gradient came
        // with the last pass.
        let alpha = alpha_next;
        ws.iter_mut()
            .zip(wz.iter().zip(&wz_old))
            .for_each(|(s, (z, zo))| *s = z + alpha * (z - zo));
        cs.iter_mut()
            .zip(cz.iter().zip(&cz_old))
            .for_each(|(s, (z, zo))| *s = z + alpha * (z - zo));
        std::mem::swap(&mut ms, &mut ms_next);
        std::mem::swap(&mut gw, &mut gw_next);
        std::mem::swap(&mut gc, &mut gc_next);
    }
    w.copy_from_slice(&wz);
    c.copy_from_slice(&cz);
    Ok(SolveReport {
        objective,
        n_iter,
        lipschitz: lip,
    })
}

/// Examples kept for retraining, in single precision: dense row-major or CSR, as the first batch
/// was. (The solver computes in double precision; rounding the stored copy to f32 halves the
/// memory and the data each FISTA iteration streams through, which dominates its cost.)
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
enum Store {
    Dense(Vec<f32>),
    Sparse {
        indptr: Vec<i64>,
        indices: Vec<u32>,
        values: Vec<f32>,
    },
}

/// `v` rounded to single precision, saturating at the largest finite f32.
#[inline]
fn to_f32(v: f64) -> f32 {
    v.clamp(-f64::from(f32::MAX), f64::from(f32::MAX)) as f32
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BatchMtl {
    n_features: usize,
    n_tasks: usize,
    reg: Regularizer,
    rho: f64,
    retrain_every: u64,
    opts: SolverOptions,
    /// Task-major `W` (column-major `d x k`) and the biases.
    weights: Vec<f64>,
    bias: Vec<f64>,
    store: Store,
    tasks: Vec<u32>,
    labels: Vec<f64>,
    n_retrains: u64,
    last: SolveReport,
    total_iter: u64,
}

learner_params! {
    /// MTFL's and TRML's hyper-parameters (§6.5).
    pub struct BatchMtlParams {
        pub regularizer: Regularizer,
        /// The penalty weight (>= 0).
        pub rho: f64,
        /// The model is retrained on all data every `retrain_every` examples.
        pub retrain_every: u64,
    }

    fn check(&self) -> Result<()> {
        check_nonnegative("rho", self.rho)?;
        if self.retrain_every == 0 {
            return Err(invalid("retrain_every", "must be >= 1"));
        }
        Ok(())
    }
}

impl Build for BatchMtl {
    type Params = BatchMtlParams;

    fn from_checked(params: &BatchMtlParams, setting: &Setting) -> Result<Self> {
        let (n_tasks, n_features, sparse) = (setting.n_tasks, setting.n_features, setting.sparse);
        let BatchMtlParams {
            regularizer: reg,
            rho,
            retrain_every,
        } = *params;
        if reg == Regularizer::Trace {
            // The trace-norm prox (route (a) of §5.5) works on k x k matrices (R, its singular
            // vectors, Π): about 4 k² floats at peak, whatever d is.
            Need::new(
                "n_tasks",
                n_tasks,
                "TRML's singular value thresholding (~4 n_tasks² floats)",
            )
            .count::<f64>(&[4, n_tasks, n_tasks])?;
        }
        let store = if sparse {
            Store::Sparse {
                indptr: vec![0],
                indices: Vec::new(),
                values: Vec::new(),
            }
        } else {
            Store::Dense(Vec::new())
        };
        Ok(Self {
            n_features,
            n_tasks,
            reg,
            rho,
            retrain_every,
            opts: SolverOptions::default(),
            weights: Need::new("n_tasks", n_tasks, "the weight matrix W (n_tasks x n_features floats)")
                .filled(&[n_tasks, n_features], 0.0)?,
            bias: Need::new("n_tasks", n_tasks, "the task biases").filled(&[n_tasks], 0.0)?,
            store,
            tasks: Vec::new(),
            labels: Vec::new(),
            n_retrains: 0,
            last: SolveReport::default(),
            total_iter: 0,
        })
    }
}

impl BatchMtl {
    pub fn new(
        n_tasks: usize,
        n_features: usize,
        reg: Regularizer,
        rho: f64,
        retrain_every: u64,
        sparse: bool,
    ) -> Result<Self> {
        let params = BatchMtlParams {
            regularizer: reg,
            rho,
            retrain_every,
        };
        Self::build(&params, &Setting::new(n_tasks, n_features, sparse))
    }

    pub fn with_options(mut self, opts: SolverOptions) -> Self {
        self.opts = opts;
        self
    }

    /// Stores one example (fallibly: the store's growth is checked before anything is written).
    fn push(&mut self, x: &Row, task: usize, y: f64) -> Result<()> {
        let need = Need::new("n_features", self.n_features, "the stored examples");
        match &mut self.store {
            Store::Dense(data) => {
                need.reserve(data, self.n_features)?;
                need.reserve(&mut self.tasks, 1)?;
                need.reserve(&mut self.labels, 1)?;
                let start = data.len();
                data.resize(start + self.n_features, 0.0);
                let row = &mut data[start..];
                x.for_each(|j, v| row[j] = to_f32(v));
            }
            Store::Sparse {
                indptr,
                indices,
                values,
            } => {
                need.reserve(indices, x.nnz())?;
                need.reserve(values, x.nnz())?;
                need.reserve(indptr, 1)?;
                need.reserve(&mut self.tasks, 1)?;
                need.reserve(&mut self.labels, 1)?;
                x.for_each(|j, v| {
                    let v = to_f32(v);
                    if v != 0.0 {
                        indices.push(j as u32);
                        values.push(v);
                    }
                });
                indptr.push(indices.len() as i64);
            }
        }
        self.tasks.push(task as u32);
        self.labels.push(y);
        Ok(())
    }

    /// Undoes the last [`BatchMtl::push`].
    fn pop(&mut self) {
        let n = self.labels.len().saturating_sub(1);
        self.labels.truncate(n);
        self.tasks.truncate(n);
        match &mut self.store {
            Store::Dense(data) => data.truncate(n * self.n_features),
            Store::Sparse {
                indptr,
                indices,
                values,
            } => {
                indptr.truncate(n + 1);
                let nnz = indptr.last().map_or(0, |&e| e as usize);
                indices.truncate(nnz);
                values.truncate(nnz);
            }
        }
    }

    /// Retrains on every stored example, warm-started from the current model. On `Err` (a
    /// non-finite line search, or an interrupt) the model is unchanged.
    pub fn retrain(&mut self) -> Result<()> {
        let rows = match &self.store {
            Store::Dense(data) => F32Rows::Dense {
                data,
                n_cols: self.n_features,
            },
            Store::Sparse {
                indptr,
                indices,
                values,
            } => F32Rows::Csr {
                indptr,
                indices,
                values,
                n_cols: self.n_features,
            },
        };
        let report = solve(
            &rows,
            &self.tasks,
            &self.labels,
            self.n_tasks,
            self.reg,
            self.rho,
            &mut self.weights,
            &mut self.bias,
            self.opts,
        )?;
        self.last = report;
        self.total_iter += report.n_iter as u64;
        self.n_retrains += 1;
        Ok(())
    }

    /// Bytes held by the stored examples.
    pub fn stored_bytes(&self) -> usize {
        let rows = match &self.store {
            Store::Dense(data) => 4 * data.len(),
            Store::Sparse {
                indptr,
                indices,
                values,
            } => 8 * indptr.len() + 4 * indices.len() + 4 * values.len(),
        };
        rows + 4 * self.tasks.len() + 8 * self.labels.len()
    }

    fn rank(&self) -> f64 {
        let (d, k) = (self.n_features, self.n_tasks);
        if !self.weights.iter().all(|v| v.is_finite()) {
            return f64::NAN;
        }
        let Some(svd) = nalgebra::SVD::try_new(
            DMatrix::from_column_slice(d, k, &self.weights),
            false,
            false,
            f64::EPSILON,
            svt::MAX_ITER,
        ) else {
            return f64::NAN;
        };
        let s = svd.singular_values;
        let max = s.iter().copied().fold(0.0f64, f64::max);
        s.iter().filter(|&&v| v > 1e-12 * max && max > 0.0).count() as f64
    }
}

/// The largest solver iteration cap a restored model may carry (the default is 1000): a loop
/// bound read from a file must stay a bound.
pub const MAX_RESTORED_ITER: usize = 1_000_000;

impl BatchMtl {
    same_settings_fields!(n_tasks, n_features, reg, rho, retrain_every, opts);
}

impl CheckState for BatchMtl {
    fn check_state(&self) -> Result<()> {
        let (k, d) = (self.n_tasks, self.n_features);
        // Lengths first: they bound the sizes by the payload before `new` allocates.
        check_len("MTL weights", self.weights.len(), checked_size("MTL weights", k, d)?)?;
        check_len("MTL biases", self.bias.len(), k)?;
        param(Self::new(k, d, self.reg, self.rho, self.retrain_every, false))?;
        let opts_ok =
            self.opts.tol.is_finite() && self.opts.tol >= 0.0 && (1..=MAX_RESTORED_ITER).contains(&self.opts.max_iter);
        ensure(opts_ok, || format!("invalid solver options {:?}", self.opts))?;
        check_finite("MTL weights", &self.weights)?;
        check_finite("MTL biases", &self.bias)?;
        let n = self.labels.len();
        check_len("stored tasks", self.tasks.len(), n)?;
        check_tasks_and_labels(&self.tasks, &self.labels, k, "a stored example", "a stored label")?;
        let finite32 = |v: &[f32]| v.iter().all(|x| x.is_finite());
        match &self.store {
            Store::Dense(data) => {
                check_len("stored dense rows", data.len(), checked_size("stored rows", n, d)?)?;
                ensure(finite32(data), || "a stored row is not finite".into())?;
            }
            Store::Sparse {
                indptr,
                indices,
                values,
            } => {
                check_len("stored row pointers", indptr.len(), n + 1)?;
                check_len("stored values", values.len(), indices.len())?;
                let bounds_ok =
                    indptr[0] == 0 && indptr.windows(2).all(|w| w[0] <= w[1]) && indptr[n] == indices.len() as i64;
                ensure(bounds_ok, || "stored row pointers are malformed".into())?;
                for r in 0..n {
                    let idx = &indices[indptr[r] as usize..indptr[r + 1] as usize];
                    let sorted = idx.windows(2).all(|w| w[0] < w[1]) && idx.last().is_none_or(|&j| (j as usize) < d);
                    ensure(sorted, || format!("stored sparse row {r} has bad indices"))?;
                }
                ensure(finite32(values), || "a stored value is not finite".into())?;
            }
        }
        check_counts("MTL", &[self.n_retrains, self.total_iter])?;
        // A retrain runs whenever the number of stored examples reaches a multiple of the period.
        let retrains = n as u64 / self.retrain_every;
        let max_iter = self.opts.max_iter as u64;
        let counters_ok = self.n_retrains == retrains
            && self.last.n_iter <= self.opts.max_iter
            && self.total_iter <= retrains.saturating_mul(max_iter)
            && (self.last.objective.is_finite() || retrains == 0)
            && self.last.lipschitz.is_finite();
        ensure(counters_ok, || {
            format!(
                "MTL counters are inconsistent: {n} stored, {} retrains (period {}), last report {:?}",
                self.n_retrains, self.retrain_every, self.last
            )
        })
    }
}

impl OnlineLearner for BatchMtl {
    shape_fields!();

    fn score(&self, x: Row, task: usize, _scratch: &mut Scratch) -> f64 {
        let d = self.n_features;
        x.dot(&self.weights[task * d..(task + 1) * d]) + self.bias[task]
    }

    fn update(&mut self, x: Row, task: usize, y: f64, _score: f64, _scratch: &mut Scratch) -> Result<()> {
        self.push(&x, task, y)?;
        if (self.labels.len() as u64).is_multiple_of(self.retrain_every) {
            if let Err(e) = self.retrain() {
                // An abandoned retrain takes its example with it: the model is as before the call.
                self.pop();
                return Err(e);
            }
        }
        Ok(())
    }

    /// The number of retrains.
    fn n_updates(&self) -> u64 {
        self.n_retrains
    }

    /// The number of stored examples (the memory the learner holds).
    fn n_active(&self) -> usize {
        self.labels.len()
    }

    fn diagnostics(&self) -> Vec<(&'static str, f64)> {
        let d = self.n_features;
        let zero_rows = (0..d)
            .filter(|&r| (0..self.n_tasks).all(|i| self.weights[i * d + r] == 0.0))
            .count();
        vec![
            ("n_retrains", self.n_retrains as f64),
            ("last_n_iter", self.last.n_iter as f64),
            ("total_n_iter", self.total_iter as f64),
            ("last_objective", self.last.objective),
            ("last_lipschitz", self.last.lipschitz),
            ("stored_bytes", self.stored_bytes() as f64),
            ("n_zero_rows", zero_rows as f64),
            ("rank", self.rank()),
        ]
    }

    fn arrays(&self) -> Vec<(&'static str, Vec<usize>, Vec<f64>)> {
        vec![
            ("coef", vec![self.n_tasks, self.n_features], self.weights.clone()),
            ("intercept", vec![self.n_tasks], self.bias.clone()),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::learner::test_support::stream;

    fn problem(n: usize, d: usize, k: usize, seed: u64) -> (Vec<f64>, Vec<u32>, Vec<f64>) {
        let (x, tasks, y) = stream(n, d, k, seed, |x, _, noise| x[0] + 0.4 * x[1] + 0.5 * noise > 0.0);
        (x, tasks.into_iter().map(|t| t as u32).collect(), y)
    }

    /// Issue 11: NaN in the stored examples (a tampered state, or X written by another thread)
    /// made the line search `loop { .. L *= 2 }` spin forever. Now the retrain that meets it
    /// fails, the example that triggered it is not kept, and the model is unchanged.
    #[test]
    fn nan_in_stored_examples_ends_the_line_search_with_an_error() {
        let (d, k) = (3, 2);
        let (x, tasks, y) = problem(20, d, k, 7);
        for reg in [Regularizer::L21, Regularizer::Trace] {
            let mut m = BatchMtl::new(k, d, reg, 0.01, 10, false).unwrap();
            let mut scratch = Scratch::default();
            for t in 0..9 {
                m.update(
                    Row::Dense(&x[t * d..(t + 1) * d]),
                    tasks[t] as usize,
                    y[t],
                    0.0,
                    &mut scratch,
                )
                .unwrap();
            }
            if let Store::Dense(data) = &mut m.store {
                data[4] = f32::NAN;
            }
            let before = m.clone();
            let err = m
                .update(
                    Row::Dense(&x[9 * d..10 * d]),
                    tasks[9] as usize,
                    y[9],
                    0.0,
                    &mut scratch,
                )
                .unwrap_err();
            assert!(err.to_string().contains("line search"), "{err}");
            // (the stored NaN makes `==` false; the debug forms compare every bit that matters)
            assert_eq!(format!("{m:?}"), format!("{before:?}"));
        }
        // The public solver reports the failure and leaves (w, c) as they were.
        let (mut w, mut c) = (vec![0.5; d * k], vec![0.25; k]);
        let mut bad = x.clone();
        bad[0] = f64::NAN;
        let rows = Rows::dense(&bad, 20, d);
        let report = solve(
            &rows,
            &tasks,
            &y,
            k,
            Regularizer::L21,
            0.01,
            &mut w,
            &mut c,
            SolverOptions::default(),
        );
        assert!(report.is_err());
        assert_eq!((w, c), (vec![0.5; d * k], vec![0.25; k]));
    }

    #[test]
    fn svt_shrinks_singular_values() {
        let (d, k) = (7, 3);
        let (x, _, _) = problem(d, k, 1, 3);
        let mut w = x.clone();
        let before = DMatrix::from_column_slice(d, k, &x).singular_values();
        svt(&mut w, d, k, 0.3);
        let after = DMatrix::from_column_slice(d, k, &w).singular_values();
        let mut b: Vec<f64> = before.iter().map(|s| (s - 0.3).max(0.0)).collect();
        let mut a: Vec<f64> = after.iter().copied().collect();
        b.sort_by(f64::total_cmp);
        a.sort_by(f64::total_cmp);
        a.iter()
            .zip(&b)
            .for_each(|(p, q)| assert!((p - q).abs() < 1e-12, "{a:?} {b:?}"));
    }

    #[test]
    fn solver_decreases_the_objective_and_prox_zeroes_rows() {
        let (n, d, k) = (300, 6, 3);
        let (x, tasks, y) = problem(n, d, k, 9);
        let rows = Rows::dense(&x, n, d);
        for reg in [Regularizer::L21, Regularizer::Trace] {
            let (mut w, mut c) = (vec![0.0; d * k], vec![0.0; k]);
            let start = Problem::new(&rows, &tasks, &y, k).loss(&w, &c);
            let mut run = || {
                solve(
                    &rows,
                    &tasks,
                    &y,
                    k,
                    reg,
                    0.05,
                    &mut w,
                    &mut c,
                    SolverOptions::default(),
                )
                .unwrap()
            };
            let rep = run();
            assert!(rep.objective < start && rep.n_iter >= 2);
            // Warm start from the solution: stops within a few iterations.
            let again = run();
            assert!(again.n_iter <= rep.n_iter && (again.objective - rep.objective).abs() <= 1e-3 * rep.objective);
        }
        let mut w = vec![1.0, 0.1, 2.0, 0.1];
        prox(Regularizer::L21, &mut w, 2, 2, 0.5);
        assert_eq!(w[1], 0.0);
        assert_eq!(w[3], 0.0);
        assert!(w[0] > 0.0 && w[2] > 0.0);
    }

    #[test]
    fn an_interrupted_retrain_is_abandoned_with_its_example() {
        use crate::learner::OnlineLearner;
        let (n, d, k) = (400, 5, 2);
        let (x, tasks, y) = problem(n, d, k, 3);
        // No tolerance: the solver would run many iterations.
        let opts = SolverOptions {
            tol: 0.0,
            max_iter: 1_000_000,
        };
        for sparse in [false, true] {
            let mut model = BatchMtl::new(k, d, Regularizer::Trace, 0.01, n as u64, sparse)
                .unwrap()
                .with_options(opts);
            let mut scratch = Scratch::default();
            for t in 0..n - 1 {
                let row = Row::Dense(&x[t * d..(t + 1) * d]);
                model.learn_one(row, tasks[t] as usize, y[t], &mut scratch).unwrap();
            }
            let before = model.clone();
            let last = Row::Dense(&x[(n - 1) * d..]);
            let start = std::time::Instant::now();
            let zero = std::time::Duration::ZERO; // poll at the first check: no race with the solver
            let outcome = crate::interrupt::with_hook_every(zero, Box::new(|| true), || {
                model.learn_one(last, tasks[n - 1] as usize, y[n - 1], &mut scratch)
            });
            assert!(matches!(outcome, Err(crate::Error::Interrupted { .. })), "{outcome:?}");
            assert!(start.elapsed() < std::time::Duration::from_secs(2));
            assert_eq!(model, before, "the abandoned retrain left a trace");
        }
    }
}
