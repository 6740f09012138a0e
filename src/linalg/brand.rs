//! Route (c) of ALGORITHMS.md §5.5: a thin SVD of a tall `d x k` matrix kept in factored form
//! and modified by rank-one updates `U + a e_iᵀ` (M. Brand, "Fast low-rank modifications of the
//! thin singular value decomposition", Linear Algebra Appl. 415, 2006), each followed by
//! singular value thresholding `σ ← (σ - θ)_+`.
//!
//! `U = B P diag(s) Qᵀ` where
//! - `B` (`d x m`, column-major) has orthonormal columns and stays fixed between compactions:
//!   an update appends at most one column (the normalised part of `a` outside `span(B)`);
//! - `P` (`m x r`) and `Q` (`k x r`) have orthonormal columns, `s` holds the `r` singular values.
//!
//! An update builds the small core `K = [diag(s) 0; 0 0] + [Pᵀc; ν][Q_iᵀ; τ]ᵀ` (at most
//! `(r+1) x (r+1)`), takes its SVD (one-sided Jacobi, nalgebra as fallback), thresholds it and
//! rotates `P` and `Q`: `O(nnz m)` for `c = Bᵀa`, `O(d m)` for the residual of `a`,
//! `O(r³ + (m + k) r²)` for the rest. When `B` reaches `max_cols` columns (or every
//! [`REORTH_EVERY`] updates) it is compacted to `B P` (`O(d m r)`), and every `REORTH_EVERY`
//! updates the factors are re-orthogonalised (Gram-Schmidt twice, then the SVD of the small
//! core). Scores come from the factors: `u^iᵀx = ((Bᵀx)ᵀ P) diag(s) Q_iᵀ`, `O(nnz m + m r)`.

use nalgebra::{DMatrix, SVD};
use serde::{Deserialize, Serialize};

use crate::data::Row;
use crate::linalg::jacobi::jacobi_svd;
use crate::linalg::simd::{columns_dot, columns_times, columns_times_in_place, dense_axpy, dense_dot, sub_columns};
#[cfg(test)]
use crate::linalg::svt;
use crate::linalg::svt::RANK_TOL;

/// Re-orthogonalise the factors at least this often (§5.5 c).
pub const REORTH_EVERY: u64 = 1000;

/// A residual (left or right) below this fraction of its vector's norm is treated as zero.
const EXT_TOL: f64 = 1e-13;

/// Thresholded singular values below this fraction of `σ_max` are dropped from the factors (an
/// error far below the 1e-9 agreement of INV-R4; keeps rounding noise from inflating `r`).
const DROP_TOL: f64 = 1e-14;

/// Upper bound on the iterations of nalgebra's SVD (run with its default tolerance, 5ε: with
/// ε it was seen to return a wrong singular value on a rank-deficient matrix).
const MAX_ITER: usize = 100_000;

/// What one thresholded update produced.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UpdateInfo {
    /// `σ_max` of the matrix before thresholding.
    pub sigma_max: f64,
    /// Singular values of the result above `RANK_TOL σ_max` (§5.5 Diagnostics).
    pub rank: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThinSvd {
    d: usize,
    k: usize,
    max_cols: usize,
    /// `B`, column-major `d x m`.
    b: Vec<f64>,
    m: usize,
    /// `P`, row-major `m x r`.
    p: Vec<f64>,
    s: Vec<f64>,
    /// `Q`, row-major `k x r`.
    q: Vec<f64>,
    since_orth: u64,
}

fn norm(v: &[f64]) -> f64 {
    v.iter().map(|x| x * x).sum::<f64>().sqrt()
}

/// The Jacobi SVD from `Z = I` as singular values and row-major left (`W diag(1/σ)`, zero for
/// `σ = 0`) and right vectors. `None` if it does not converge.
fn jacobi(a: &[f64], rows: usize, cols: usize) -> Option<(Vec<f64>, Vec<f64>, Vec<f64>)> {
    const MAX_SWEEPS: usize = 30;
    let svd = jacobi_svd(a, rows, cols, None, MAX_SWEEPS)?;
    let mut left = vec![0.0; rows * cols];
    let mut right = vec![0.0; cols * cols];
    for (c, &sg) in svd.sigma.iter().enumerate() {
        if sg > 0.0 {
            for i in 0..rows {
                left[i * cols + c] = svd.w(i, c) / sg;
            }
        }
        for i in 0..cols {
            right[i * cols + c] = svd.z(i, c);
        }
    }
    Some((svd.sigma, left, right))
}

/// SVD of the row-major `rows x cols` `a`: singular values and row-major left (`rows x n`) and
/// right (`cols x n`) vectors, `n = cols` (Jacobi) or `min(rows, cols)` (nalgebra's SVD, the
/// fallback should Jacobi not converge).
fn small_svd(a: &[f64], rows: usize, cols: usize) -> Option<(Vec<f64>, Vec<f64>, Vec<f64>)> {
    if a.iter().any(|v| !v.is_finite()) {
        return None;
    }
    if let Some(out) = jacobi(a, rows, cols) {
        return Some(out);
    }
    let svd = SVD::try_new(
        DMatrix::from_row_slice(rows, cols, a),
        true,
        true,
        5.0 * f64::EPSILON, // nalgebra's default; ε alone can stop early on rank-deficient input
        MAX_ITER,
    )?;
    let (u, vt) = (svd.u?, svd.v_t?);
    let n = svd.singular_values.len();
    let left = (0..rows)
        .flat_map(|i| (0..n).map(move |c| (i, c)))
        .map(|(i, c)| u[(i, c)])
        .collect();
    let right = (0..cols)
        .flat_map(|i| (0..n).map(move |c| (i, c)))
        .map(|(i, c)| vt[(c, i)])
        .collect();
    Some((svd.singular_values.iter().copied().collect(), left, right))
}

/// Orthonormalises the `q` columns of the column-major `d x q` `cols` (modified Gram-Schmidt,
/// twice). A column that is (numerically) in the span of the previous ones is dropped, so the
/// result has `w <= q` orthonormal columns (`cols` is truncated to `d x w`); returns `R`
/// (row-major `w x q`, `A = Q R`) and `w`.
fn orthonormalize(cols: &mut Vec<f64>, d: usize, q: usize) -> (Vec<f64>, usize) {
    let mut r = vec![0.0; q * q];
    let mut w = 0;
    for j in 0..q {
        if j != w {
            cols.copy_within(j * d..(j + 1) * d, w * d);
        }
        let (done, rest) = cols.split_at_mut(w * d);
        let v = &mut rest[..d];
        let before = dense_dot(v, v).sqrt();
        for _ in 0..2 {
            for i in 0..w {
                let bi = &done[i * d..(i + 1) * d];
                let h = dense_dot(bi, v);
                r[i * q + j] += h;
                dense_axpy(-h, bi, v);
            }
        }
        let after = dense_dot(v, v).sqrt();
        if after > EXT_TOL * before && after > 0.0 {
            v.iter_mut().for_each(|x| *x /= after);
            r[w * q + j] = after;
            w += 1;
        }
    }
    cols.truncate(w * d);
    r.truncate(w * q);
    (r, w)
}

impl ThinSvd {
    /// The zero `d x k` matrix; `B` holds at most `max_cols` (≥ k + 1) columns.
    pub fn zero(d: usize, k: usize) -> Self {
        Self {
            d,
            k,
            max_cols: (2 * k).max(k + 1),
            b: Vec::new(),
            m: 0,
            p: Vec::new(),
            s: Vec::new(),
            q: Vec::new(),
            since_orth: 0,
        }
    }

    /// The thin SVD of the column-major `d x k` `u`, of which only the columns `live` may be
    /// non-zero. `None` if `u` holds non-finite values.
    pub fn from_matrix(u: &[f64], d: usize, k: usize, live: &[usize]) -> Option<Self> {
        let mut out = Self::zero(d, k);
        let q = live.len();
        if q == 0 {
            return Some(out);
        }
        let mut b = vec![0.0; d * q];
        for (a, &c) in live.iter().enumerate() {
            b[a * d..(a + 1) * d].copy_from_slice(&u[c * d..(c + 1) * d]);
        }
        if b.iter().any(|v| !v.is_finite()) {
            return None;
        }
        let (r, w) = orthonormalize(&mut b, d, q);
        if w == 0 {
            return Some(out);
        }
        let (sigma, left, right) = small_svd(&r, w, q)?;
        let n = sigma.len();
        let smax = sigma.iter().fold(0.0f64, |a, &v| a.max(v));
        let keep: Vec<usize> = (0..n).filter(|&c| sigma[c] > DROP_TOL * smax).collect();
        out.b = b;
        out.m = w;
        out.s = keep.iter().map(|&c| sigma[c]).collect();
        out.p = (0..w)
            .flat_map(|i| keep.iter().map(move |&c| (i, c)))
            .map(|(i, c)| left[i * n + c])
            .collect();
        let rk = keep.len();
        out.q = vec![0.0; k * rk];
        for (a, &task) in live.iter().enumerate() {
            for (l, &c) in keep.iter().enumerate() {
                out.q[task * rk + l] = right[a * n + c];
            }
        }
        if rk == 0 {
            out.reset();
        }
        Some(out)
    }

    /// A restored factorisation of a `d x k` matrix: `B` `d x m` with `m <= max_cols`
    /// (`max_cols` as [`ThinSvd::zero`] sets it), `P` `m x r`, `Q` `k x r`, all finite, `s >= 0`.
    pub(crate) fn check_state(&self, d: usize, k: usize) -> crate::Result<()> {
        use crate::state::{check_counts, check_finite, check_len, checked_size, ensure};
        check_counts("factored U", &[self.since_orth])?;
        check_len("factored U's rows", self.d, d)?;
        check_len("factored U's columns", self.k, k)?;
        check_len("factored U's basis limit", self.max_cols, (2 * k).max(k + 1))?;
        let (m, r) = (self.m, self.s.len());
        ensure(m <= self.max_cols, || {
            format!("factored U has {m} basis columns, more than {}", self.max_cols)
        })?;
        check_len("factored U's basis", self.b.len(), checked_size("basis", d, m)?)?;
        check_len("factored U's P", self.p.len(), checked_size("P", m, r)?)?;
        check_len("factored U's Q", self.q.len(), checked_size("Q", k, r)?)?;
        for (what, v) in [("B", &self.b), ("P", &self.p), ("s", &self.s), ("Q", &self.q)] {
            check_finite(what, v)?;
        }
        ensure(self.s.iter().all(|&v| v >= 0.0), || {
            "a singular value is negative".into()
        })
    }

    /// Rank of the factorisation (the number of stored singular values).
    pub fn r(&self) -> usize {
        self.s.len()
    }

    /// Columns of the d-side basis `B`.
    #[cfg(test)]
    pub fn basis_cols(&self) -> usize {
        self.m
    }

    fn reset(&mut self) {
        self.b.clear();
        self.m = 0;
        self.p.clear();
        self.s.clear();
        self.q.clear();
    }

    /// `Bᵀx` (length `m`).
    pub fn project(&self, x: &Row) -> Vec<f64> {
        let (d, m) = (self.d, self.m);
        match x {
            Row::Dense(v) => {
                let mut out = vec![0.0; m];
                columns_dot(&self.b, d, m, v, &mut out);
                out
            }
            sparse => (0..m).map(|j| sparse.dot(&self.b[j * d..(j + 1) * d])).collect(),
        }
    }

    /// `u^iᵀx` from `bx = Bᵀx`.
    pub fn score_projected(&self, bx: &[f64], task: usize) -> f64 {
        let m = self.m;
        if m == 0 {
            return 0.0;
        }
        let r = self.s.len();
        let qi = &self.q[task * r..(task + 1) * r];
        if qi.iter().all(|&v| v == 0.0) {
            return 0.0; // a column that is zero stays exactly zero
        }
        // (bxᵀ P) diag(s) q_i
        let mut t = vec![0.0; r];
        for (j, &v) in bx.iter().enumerate() {
            t.iter_mut()
                .zip(&self.p[j * r..(j + 1) * r])
                .for_each(|(x, &pv)| *x += v * pv);
        }
        (0..r).map(|l| t[l] * self.s[l] * qi[l]).sum()
    }

    /// The matrix, column-major `d x k`.
    pub fn materialize(&self) -> Vec<f64> {
        let (d, k, m) = (self.d, self.k, self.m);
        // P diag(s) Qᵀ, row-major m x k.
        let r = self.s.len();
        let mut ct = vec![0.0; m * k];
        for j in 0..m {
            for i in 0..k {
                ct[j * k + i] = (0..r).map(|l| self.p[j * r + l] * self.s[l] * self.q[i * r + l]).sum();
            }
        }
        let mut u = vec![0.0; d * k];
        columns_times(&self.b, d, m, &ct, k, &mut u);
        u
    }

    /// `U ← SVT_θ(U + alpha x e_taskᵀ)`. `bx` is `Bᵀx` if the caller has it. `None` (and no
    /// change) on non-finite values.
    pub fn update(&mut self, x: &Row, alpha: f64, task: usize, theta: f64, bx: Option<&[f64]>) -> Option<UpdateInfo> {
        let (d, k, m, r) = (self.d, self.k, self.m, self.s.len());
        let a_norm = alpha.abs() * x.sq_norm().sqrt();
        if !a_norm.is_finite() {
            return None; // overflow: the caller keeps Û unthresholded, as routes (a)/(b) do
        }
        // Left: a = B c + p (p ⟂ B), then c = P mv + c⊥ (c⊥ ⟂ P).
        let mut c = vec![0.0; m];
        let mut resid: Option<Vec<f64>> = None;
        let mut rho = 0.0;
        let has_a = a_norm > 0.0;
        if has_a {
            match bx {
                Some(bx) => c.iter_mut().zip(bx).for_each(|(ci, &v)| *ci = alpha * v),
                None => c.iter_mut().zip(self.project(x)).for_each(|(ci, v)| *ci = alpha * v),
            }
            let mut p = vec![0.0; d];
            x.add_to(&mut p, alpha);
            sub_columns(&self.b, d, m, &c, &mut p);
            rho = dense_dot(&p, &p).sqrt();
            if rho < std::f64::consts::FRAC_1_SQRT_2 * a_norm {
                // Cancellation: a second Gram-Schmidt pass ("twice is enough").
                let mut h = vec![0.0; m];
                columns_dot(&self.b, d, m, &p, &mut h);
                sub_columns(&self.b, d, m, &h, &mut p);
                c.iter_mut().zip(&h).for_each(|(ci, hi)| *ci += hi);
                rho = dense_dot(&p, &p).sqrt();
            }
            if rho > EXT_TOL * a_norm && m < d {
                p.iter_mut().for_each(|v| *v /= rho);
                resid = Some(p);
            } else {
                rho = 0.0;
            }
        }
        let appended = resid.is_some();
        let m2 = m + usize::from(appended);
        let mut mv = vec![0.0; r];
        let mut cperp = c.clone();
        for _ in 0..2 {
            for (l, mvl) in mv.iter_mut().enumerate() {
                let h: f64 = (0..m).map(|j| self.p[j * r + l] * cperp[j]).sum();
                *mvl += h;
                (0..m).for_each(|j| cperp[j] -= h * self.p[j * r + l]);
            }
        }
        // The new left direction, in the coordinates of [B, p/ρ].
        let mut ndir = cperp;
        if appended {
            ndir.push(rho);
        }
        let nu = norm(&ndir);
        let ext_left = has_a && nu > EXT_TOL * a_norm;
        // Right: e_i = Q qv + q⊥.
        let mut qv = vec![0.0; r];
        let mut qperp = vec![0.0; k];
        let mut tau = 0.0;
        if has_a {
            qperp[task] = 1.0;
            for _ in 0..2 {
                for (l, qvl) in qv.iter_mut().enumerate() {
                    let h: f64 = (0..k).map(|j| self.q[j * r + l] * qperp[j]).sum();
                    *qvl += h;
                    (0..k).for_each(|j| qperp[j] -= h * self.q[j * r + l]);
                }
            }
            tau = norm(&qperp);
        }
        let ext_right = has_a && tau > EXT_TOL;
        // Core K = [diag(s) 0; 0 0] + [mv; ν][qv; τ]ᵀ.
        let rows = r + usize::from(ext_left);
        let cols = r + usize::from(ext_right);
        if rows == 0 || cols == 0 {
            // U + a e_iᵀ = 0 (numerically): nothing to keep.
            self.reset();
            self.since_orth += 1;
            return Some(UpdateInfo {
                sigma_max: 0.0,
                rank: 0,
            });
        }
        let mut kk = vec![0.0; rows * cols];
        for l in 0..r {
            kk[l * cols + l] = self.s[l];
        }
        if has_a {
            let lv: Vec<f64> = mv.iter().copied().chain(ext_left.then_some(nu)).collect();
            let rv: Vec<f64> = qv.iter().copied().chain(ext_right.then_some(tau)).collect();
            for (i, &li) in lv.iter().enumerate() {
                for (j, &rj) in rv.iter().enumerate() {
                    kk[i * cols + j] += li * rj;
                }
            }
        }
        let (sigma, left, right) = small_svd(&kk, rows, cols)?;
        let n = sigma.len();
        let sigma_max = sigma.iter().fold(0.0f64, |a, &v| a.max(v));
        let mut keep: Vec<(f64, usize)> = (0..n)
            .map(|c| (sigma[c] - theta, c))
            .filter(|&(kept, _)| kept > 0.0 && kept > DROP_TOL * sigma_max)
            .collect();
        keep.sort_by(|a, b| b.0.total_cmp(&a.0));
        let rank = keep.iter().filter(|&&(kept, _)| kept > RANK_TOL * sigma_max).count();
        let rn = keep.len();
        if rn == 0 {
            self.reset();
            self.since_orth += 1;
            return Some(UpdateInfo { sigma_max, rank: 0 });
        }
        // P' (m2 x rows): [P 0; 0 0] with the last column ndir/ν when extended.
        // The kept singular vectors of K, row-major rows x rn and cols x rn.
        let (left, right) = (&left, &right);
        let lk: Vec<f64> = (0..rows)
            .flat_map(|l| keep.iter().map(move |&(_, c)| left[l * n + c]))
            .collect();
        let rk: Vec<f64> = (0..cols)
            .flat_map(|l| keep.iter().map(move |&(_, c)| right[l * n + c]))
            .collect();
        let mut pnew = vec![0.0; m2 * rn];
        for j in 0..m2 {
            let out = &mut pnew[j * rn..(j + 1) * rn];
            if j < m {
                for l in 0..r {
                    let w = self.p[j * r + l];
                    out.iter_mut()
                        .zip(&lk[l * rn..(l + 1) * rn])
                        .for_each(|(o, &v)| *o += w * v);
                }
            }
            if ext_left {
                let w = ndir[j] / nu;
                out.iter_mut()
                    .zip(&lk[r * rn..(r + 1) * rn])
                    .for_each(|(o, &v)| *o += w * v);
            }
        }
        let mut qnew = vec![0.0; k * rn];
        for j in 0..k {
            let qj = &self.q[j * r..(j + 1) * r];
            let extra = if ext_right { qperp[j] / tau } else { 0.0 };
            if extra == 0.0 && qj.iter().all(|&v| v == 0.0) {
                continue; // a column that is zero stays exactly zero
            }
            let out = &mut qnew[j * rn..(j + 1) * rn];
            for (l, &w) in qj.iter().enumerate() {
                out.iter_mut()
                    .zip(&rk[l * rn..(l + 1) * rn])
                    .for_each(|(o, &v)| *o += w * v);
            }
            if ext_right {
                out.iter_mut()
                    .zip(&rk[r * rn..(r + 1) * rn])
                    .for_each(|(o, &v)| *o += extra * v);
            }
        }
        if let Some(p) = resid {
            if self.b.capacity() < d * self.max_cols {
                self.b.reserve_exact(d * self.max_cols - self.b.len());
            }
            self.b.extend_from_slice(&p);
        }
        self.m = m2;
        self.p = pnew;
        self.q = qnew;
        self.s = keep.iter().map(|&(kept, _)| kept).collect();
        self.since_orth += 1;
        if self.m >= self.max_cols || self.since_orth >= REORTH_EVERY {
            self.compact();
        }
        Some(UpdateInfo { sigma_max, rank })
    }

    /// `B ← B P` (then `P = I`), and every `REORTH_EVERY` updates a re-orthogonalisation of the
    /// factors followed by the SVD of the small core.
    fn compact(&mut self) {
        let (d, k, m, r) = (self.d, self.k, self.m, self.s.len());
        columns_times_in_place(&mut self.b, d, m, &self.p, r);
        self.b.truncate(d * r);
        self.m = r;
        self.p = (0..r * r).map(|i| if i / r == i % r { 1.0 } else { 0.0 }).collect();
        if self.since_orth >= REORTH_EVERY {
            self.since_orth = 0;
            let mut nb = self.b.clone();
            let (rb, wb) = orthonormalize(&mut nb, d, r);
            // Q (k x r, row-major) orthonormalised as columns.
            let mut qc: Vec<f64> = (0..r)
                .flat_map(|l| (0..k).map(move |j| (j, l)))
                .map(|(j, l)| self.q[j * r + l])
                .collect();
            let (rq, wq) = orthonormalize(&mut qc, k, r);
            // Core R_B diag(s) R_Qᵀ (wb x wq).
            let mut core = vec![0.0; wb * wq];
            for i in 0..wb {
                for j in 0..wq {
                    core[i * wq + j] = (0..r).map(|l| rb[i * r + l] * self.s[l] * rq[j * r + l]).sum();
                }
            }
            let svd = if wb > 0 && wq > 0 {
                small_svd(&core, wb, wq)
            } else {
                None
            };
            if let Some((sigma, left, right)) = svd {
                let n = sigma.len();
                let smax = sigma.iter().fold(0.0f64, |a, &v| a.max(v));
                let mut keep: Vec<usize> = (0..n).filter(|&c| sigma[c] > DROP_TOL * smax).collect();
                keep.sort_by(|&a, &b| sigma[b].total_cmp(&sigma[a]));
                let rn = keep.len();
                self.b = nb;
                self.m = wb;
                self.p = (0..wb)
                    .flat_map(|i| keep.iter().map(move |&c| (i, c)))
                    .map(|(i, c)| left[i * n + c])
                    .collect();
                let mut qn = vec![0.0; k * rn];
                for j in 0..k {
                    for (t, &c) in keep.iter().enumerate() {
                        qn[j * rn + t] = (0..wq).map(|l| qc[l * k + j] * right[l * n + c]).sum();
                    }
                }
                self.q = qn;
                self.s = keep.iter().map(|&c| sigma[c]).collect();
                if rn == 0 {
                    self.reset();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SplitMix64;

    fn rel_diff(a: &[f64], b: &[f64]) -> f64 {
        let num: f64 = a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum::<f64>().sqrt();
        let den: f64 = b.iter().map(|x| x * x).sum::<f64>().sqrt();
        num / den.max(1e-300)
    }

    /// Route (c) follows route (a) (dense `U`, QR + SVD at every step) on a long random stream,
    /// through compactions, re-orthogonalisations and rank changes.
    #[test]
    fn brand_updates_follow_the_qr_route() {
        for &(d, k, theta, steps) in &[
            (40, 5, 0.05, 2500),
            (3, 6, 0.01, 800),
            (30, 4, 0.0, 1200),
            (25, 4, 2.0, 600),
        ] {
            let mut rng = SplitMix64::new(d as u64 * 31 + k as u64);
            let mut unif = || (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0;
            let mut f = ThinSvd::zero(d, k);
            let mut u = vec![0.0; d * k];
            let mut saw_zero = false;
            for step in 0..steps {
                let x: Vec<f64> = (0..d).map(|_| unif()).collect();
                let task = step % k;
                let alpha = 0.3 * unif();
                let info = f.update(&Row::Dense(&x), alpha, task, theta, None).unwrap();
                for (j, &v) in x.iter().enumerate() {
                    u[task * d + j] += alpha * v;
                }
                let live: Vec<usize> = (0..k).collect();
                let s = svt::qr_route_cols(&u, d, &live, theta, None).unwrap();
                svt::right_multiply_in_place(&mut u, d, k, &s.pi);
                let got = f.materialize();
                assert!(
                    rel_diff(&got, &u) < 1e-9 || u.iter().all(|&v| v.abs() < 1e-300),
                    "{d} {k} {step}"
                );
                assert_eq!(info.rank, s.rank, "{d} {k} {step}");
                assert!(f.basis_cols() <= 2 * k && f.r() <= k.min(d));
                saw_zero |= info.rank == 0;
            }
            if theta >= 2.0 {
                assert!(saw_zero);
            }
        }
    }

    /// Entering from a dense, rank-deficient matrix (dependent columns leave the basis, so a
    /// full basis still means `span(B) = R^d`), then updates until `B` spans everything.
    #[test]
    fn entering_from_a_rank_deficient_matrix() {
        let (d, k, theta) = (7, 4, 0.1);
        let mut rng = SplitMix64::new(3);
        let mut unif = || (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0;
        let a: Vec<f64> = (0..d * 2).map(|_| unif()).collect();
        let mut u = vec![0.0; d * k];
        for c in 0..k {
            for i in 0..d {
                u[c * d + i] = a[i] * (c as f64 + 1.0) + a[d + i] * (c as f64 * c as f64 - 2.0);
            }
        }
        let live: Vec<usize> = (0..k).collect();
        let mut f = ThinSvd::from_matrix(&u, d, k, &live).unwrap();
        assert!(rel_diff(&f.materialize(), &u) < 1e-13);
        assert_eq!((f.r(), f.basis_cols()), (2, 2));
        for step in 0..40 {
            let x: Vec<f64> = (0..d).map(|_| unif()).collect();
            let task = (step * 3) % k;
            f.update(&Row::Dense(&x), 0.3, task, theta, None).unwrap();
            for (j, &v) in x.iter().enumerate() {
                u[task * d + j] += 0.3 * v;
            }
            let s = svt::qr_route_cols(&u, d, &live, theta, None).unwrap();
            svt::right_multiply_in_place(&mut u, d, k, &s.pi);
            assert!(rel_diff(&f.materialize(), &u) < 1e-9, "step {step}");
        }
    }
}
