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

mod solver;
#[cfg(test)]
mod tests;

use nalgebra::DMatrix;
use serde::{Deserialize, Serialize};

use crate::alloc::Need;
use crate::data::{Row, Rows};
use crate::error::Result;
use crate::kernel::Scratch;
use crate::learner::spec::check_at_least_one;
use crate::learner::{check_nonnegative, Build, Checked, LinearSetting, OnlineLearner};
use crate::linalg::svt;
use crate::state::{
    check_counts, check_finite, check_len, check_tasks_and_labels, checked_size, ensure, param, CheckState,
};

pub use solver::{penalty, prox, solve, svt, Regularizer, SolveReport, SolverOptions, MAX_LINE_SEARCH};

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

/// MTFL or TRML (by its [`Regularizer`]): every example stored, the model retrained on all of
/// them every `retrain_every` examples.
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
        /// The penalty: MTFL's ℓ2,1 or TRML's trace norm. Default [`Regularizer::L21`].
        pub regularizer: Regularizer,
        /// The penalty weight (>= 0).
        pub rho: f64,
        /// The model is retrained on all data every `retrain_every` examples.
        pub retrain_every: u64,
    }

    fn check(&self) -> Result<()> {
        check_nonnegative("rho", self.rho)?;
        check_at_least_one("retrain_every", self.retrain_every)
    }
}

impl Build for BatchMtl {
    type Params = BatchMtlParams;
    type Setting<'a> = LinearSetting;

    fn from_checked(params: &Checked<BatchMtlParams>, setting: &LinearSetting) -> Result<Self> {
        let (n_tasks, n_features, sparse) = (setting.n_tasks, setting.n_features, setting.sparse);
        let BatchMtlParams {
            regularizer: reg,
            rho,
            retrain_every,
        } = **params;
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
    /// The same learner with the solver's stopping rule `opts`.
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
            Store::Dense(data) => Rows::Dense {
                data,
                n_rows: self.labels.len(),
                n_cols: self.n_features,
            },
            Store::Sparse {
                indptr,
                indices,
                values,
            } => Rows::Csr {
                indptr,
                indices,
                data: values,
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
        let params = BatchMtlParams {
            regularizer: self.reg,
            rho: self.rho,
            retrain_every: self.retrain_every,
        };
        param(Self::build(&params, &LinearSetting::new(k, d)))?;
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
