//! The solver of MTFL and TRML: accelerated proximal gradient (FISTA) with MALSAR's line search,
//! and the proximal maps of the two penalties (row-wise group shrinkage, singular value
//! thresholding).

use nalgebra::DMatrix;
use serde::{Deserialize, Serialize};

use crate::data::{Rows, Value};
use crate::error::{invalid, Error, Result};
use crate::linalg::svt;

/// The penalty `Omega(W)`: which of MTFL and TRML the learner is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Regularizer {
    /// Row-wise l2,1 norm (MTFL).
    L21,
    /// Trace (nuclear) norm (TRML).
    Trace,
}

impl Regularizer {
    /// The penalty named `"l21"` or `"trace"`.
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
    /// Stop when the objective changes by at most this much, relative.
    pub tol: f64,
    /// Stop after this many iterations.
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
    /// Iterations run.
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
/// The training set of one solve: rows, task ids, ±1 labels and the per-task weights `1/n_i`.
pub(super) struct Problem<'a, T: Value> {
    rows: &'a Rows<'a, T>,
    tasks: &'a [u32],
    y: &'a [f64],
    inv_counts: Vec<f64>,
    d: usize,
}

impl<'a, T: Value> Problem<'a, T> {
    pub(super) fn new(rows: &'a Rows<'a, T>, tasks: &'a [u32], y: &'a [f64], k: usize) -> Self {
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
            *m = self.rows.row(r).dot(&w[t * d..(t + 1) * d]) + c[t];
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
    pub(super) fn loss(&self, w: &[f64], c: &[f64]) -> f64 {
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
            let m = self.rows.row(r).dot(&wp[t * d..(t + 1) * d]) + cp[t];
            mp[r] = m;
            let s = m + alpha * (m - mz[r]);
            ms_next[r] = s;
            let g = -self.y[r] * sigmoid_neg(self.y[r] * s) * self.inv_counts[t];
            self.rows.row(r).add_to(&mut gw[t * d..(t + 1) * d], g);
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
            self.rows.row(r).add_to(&mut gw[t * d..(t + 1) * d], g);
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
pub fn solve<T: Value>(
    rows: &Rows<T>,
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
