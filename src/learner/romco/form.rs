//! U's representation: dense or factored (`W P`), folding and resynchronising the caches.

use super::*;

impl Romco {
    /// True when U is held as `W Π` (tall U, `d >= FACTORED_MIN_RATIO k²`, with a trace-norm
    /// term; route (c) keeps its own factored form).
    pub(super) fn factored(&self) -> bool {
        let k = self.n_tasks;
        self.lambda1 > 0.0
            && self.route != SvtRoute::Brand
            && self.n_features >= FACTORED_MIN_RATIO.saturating_mul(k).saturating_mul(k)
    }

    /// U in the dense column-major form (a copy: `W Π` in the factored form).
    pub(super) fn dense_u(&self) -> Vec<f64> {
        if self.u_right.is_empty() {
            return self.u.clone();
        }
        let (d, k) = (self.n_features, self.n_tasks);
        let mut u = vec![0.0; d * k];
        unfactor(&self.u, d, k, &self.u_right, &mut u);
        u
    }

    /// `U = W Π` back in the dense column-major form, `Π ← I` (`O(d k²)`).
    pub(super) fn fold_u(&mut self) {
        if !self.u_right.is_empty() {
            let pi = std::mem::take(&mut self.u_right);
            self.fold_with(&pi);
        }
    }

    /// W = U, stored row-major from now on (one row of k values per feature), through the
    /// scratch buffer.
    pub(super) fn u_to_row_major(&mut self) {
        let (d, k) = (self.n_features, self.n_tasks);
        let product = &mut self.scratch.product;
        product.resize(d * k, 0.0);
        column_to_row_major(&self.u, d, k, product);
        std::mem::swap(&mut self.u, product);
    }

    /// The factored form for a tall U: W row-major, `Π = Π⁻¹ = I`. Free while U is zero (at the
    /// start, or after a thresholding removed everything); a transposition (`O(d k)`) after
    /// route (a) handed U back dense.
    pub(super) fn enter_factored_form(&mut self) {
        if !self.u_right.is_empty() || !self.factored() {
            return;
        }
        let k = self.n_tasks;
        if self.u_live.iter().any(|&l| l) {
            self.u_to_row_major();
        }
        let identity = SymMatrix::identity(k).data;
        self.u_right_inv = identity.clone();
        self.u_right = identity;
    }

    /// `W ← W P` in place, row by row (W row-major), and `Π = Π⁻¹ = I`: the factored form
    /// restarted from the current U (`O(d k²)`, no second `d x k` buffer).
    pub(super) fn refold_with(&mut self, p: &[f64]) {
        let k = self.n_tasks;
        let mut row_in = vec![0.0; k];
        for row in self.u.chunks_exact_mut(k) {
            if row.iter().all(|&v| v == 0.0) {
                continue;
            }
            row_in.copy_from_slice(row);
            for (j, out) in row.iter_mut().enumerate() {
                *out = row_in.iter().enumerate().map(|(i, &v)| v * p[i * k + j]).sum();
            }
        }
        let mut identity = vec![0.0; k * k];
        (0..k).for_each(|i| identity[i * k + i] = 1.0);
        self.u_right_inv = identity.clone();
        self.u_right = identity;
    }

    /// `U = W P` (W row-major) into the dense column-major `u`; the factors are dropped.
    pub(super) fn fold_with(&mut self, p: &[f64]) {
        let (d, k) = (self.n_features, self.n_tasks);
        let product = &mut self.scratch.product;
        product.resize(d * k, 0.0);
        unfactor(&self.u, d, k, p, product);
        std::mem::swap(&mut self.u, product);
        self.u_right.clear();
        self.u_right_inv.clear();
    }

    /// The gradient step `u^t += alpha x`; in the factored form `W += alpha x (Π⁻ᵀ e_t)ᵀ`
    /// (`Û = (W + alpha x e_tᵀ Π⁻¹) Π`): W is row-major there, so each non-zero of x updates
    /// one row of k contiguous values, `O(nnz k)`.
    pub(super) fn u_step(&mut self, x: &Row, alpha: f64, t: usize) {
        let (d, k) = (self.n_features, self.n_tasks);
        if self.u_right.is_empty() {
            x.add_to(&mut self.u[t * d..(t + 1) * d], alpha);
            return;
        }
        let r = &self.u_right_inv[t * k..(t + 1) * k];
        x.for_each(|i, v| {
            let a = alpha * v;
            self.u[i * k..(i + 1) * k]
                .iter_mut()
                .zip(r)
                .for_each(|(w, &f)| *w += a * f);
        });
    }

    /// `<x, u^task>`: in the factored form `Σ_j <x, w^j> Π[j][task]`, `O(nnz k)`.
    pub(super) fn u_dot(&self, x: &Row, task: usize) -> f64 {
        if self.u_right.is_empty() {
            return x.dot(self.u_col(task));
        }
        let mut ux = vec![0.0; self.n_tasks];
        self.columns_dot_row(x, &mut ux);
        ux[task]
    }
}

impl Romco {
    /// `v^i = s ṽ^i` → `ṽ^i ← s ṽ^i`, `s ← 1`.
    pub(super) fn fold_scale(&mut self, i: usize) {
        let d = self.n_features;
        let s = self.v_scale[i];
        self.v[i * d..(i + 1) * d].iter_mut().for_each(|v| *v *= s);
        self.v_scale[i] = 1.0;
    }

    /// Exact `C = UᵀU` (§5.5 b, step 4) and, more rarely, `||v^i||²`.
    pub(super) fn resync(&mut self) {
        let (d, k) = (self.n_features, self.n_tasks);
        // The warm start of the Jacobi SVD accumulates rotations, and the updated
        // eigendecomposition rounding: restart both from the exact C now and then.
        if self.gram_unknown {
            self.resync_row_side();
        } else if self.resync_work >= (d as u64).saturating_mul((k * k) as u64) {
            self.resync_work = 0;
            // The factored form's rounding (W's, and Π's accumulated products) grows by about
            // ε cond(Π) per update: restarting it here, at the same O(d k²) cost, bounds it.
            if !self.u_right.is_empty() {
                let pi = std::mem::take(&mut self.u_right);
                self.refold_with(&pi);
            }
            self.resync_gram();
        } else {
            // Not yet worth an exact C: the eigendecomposition restarts from the maintained one.
            self.fresh_gram();
            self.forget_svt_vectors();
        }
        if !self.n_updates.is_multiple_of(V_RESYNC_EVERY) {
            return;
        }
        for i in 0..k {
            let s = self.v_scale[i];
            if s != 0.0 {
                let col = &self.v[i * d..(i + 1) * d];
                self.v_sq_norm[i] = s * s * dense_dot(col, col);
            }
        }
    }

    /// Exact `C = UᵀU`; drift of the maintained C sends the next SVT to route (a).
    pub(super) fn resync_gram(&mut self) {
        self.fresh_gram();
        self.forget_svt_vectors();
        if self.lambda1 > 0.0 && self.brand.is_none() {
            let exact = self.exact_gram();
            let (drift, scale) = frobenius_drift(&exact, &self.gram);
            if drift > DRIFT_TOL * scale {
                self.qr_pending = true;
                self.n_drift_resyncs += 1;
            }
            self.gram = exact;
        }
    }
}

/// `out = W P` in the dense column-major layout, for the row-major `d x k` W of the factored
/// form and a row-major `k x k` P (`O(d k²)`).
pub(super) fn unfactor(w: &[f64], d: usize, k: usize, p: &[f64], out: &mut [f64]) {
    for (r, row) in w.chunks_exact(k).take(d).enumerate() {
        for j in 0..k {
            out[j * d + r] = row.iter().enumerate().map(|(i, &v)| v * p[i * k + j]).sum();
        }
    }
}
