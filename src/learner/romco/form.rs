//! U's representation ([`UForm`]: dense, right-factored `W Π`, or a thin SVD) and where its Gram
//! matrix is held ([`GramSide`]); moving U between the forms, and resynchronising the caches.

use std::borrow::Cow;

use super::*;

/// How U (d x k) is held between updates.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum UForm {
    /// U itself, column-major: `u^i = u[i*d..(i+1)*d]`.
    Dense(Vec<f64>),
    /// `U = W Π` for a tall U (`d >= FACTORED_MIN_RATIO k²` with a trace-norm term): an update
    /// writes only the rows of W that the example touches and composes the thresholding into
    /// the `k x k` Π. Π is the identity on the columns that are not live, so they stay exactly
    /// zero.
    RightFactored {
        /// W, row-major `d x k` (one row of k values per feature).
        w: Vec<f64>,
        /// Π, row-major `k x k`.
        pi: Vec<f64>,
        /// Π⁻¹, row-major `k x k` (the gradient step goes through it).
        pi_inv: Vec<f64>,
    },
    /// U as a thin SVD under Brand's rank-one modifications (route (c), singleton rounds).
    ThinSvd(ThinSvd),
}

/// Where U's Gram matrix is held between updates (route (b) of the thresholding, §5.5).
#[derive(Debug, Clone, PartialEq)]
pub(super) enum GramSide {
    /// `C = UᵀU` explicitly in `Romco::gram` (row-major `k x k`, maintained through the gradient
    /// steps when `λ1 > 0`); the last SVT's factors may describe it too.
    Columns,
    /// C is `Z diag(μ) Zᵀ` over the live columns, the factors of the last SVT (`svt_vectors`,
    /// `svt_mu`), and `Romco::gram` is stale: what a route-(b) SVT with an updated
    /// eigendecomposition leaves. C is formed only when needed ([`Romco::fresh_gram`]).
    ColumnFactors,
    /// Wide U (more live columns than features): the Gram is `D = UUᵀ` (`d x d`) on the row
    /// side and C is not maintained (`Romco::gram` is meaningless, the SVT factors empty).
    Rows {
        /// P (row-major `d x d`, column r the eigenvector of `mu[r]`) of `D = P diag(μ) Pᵀ` after
        /// the last row-side SVT; empty when unknown (the next row-side SVT forms `D̂` exactly).
        vectors: Vec<f64>,
        /// `μ_r = (σ_r - θ)_+²`, one per column of `vectors` (empty when unknown).
        mu: Vec<f64>,
    },
}

impl GramSide {
    /// The row side's eigendecomposition of D (`(P, μ)`; empty slices when unknown or on the
    /// column side).
    pub(super) fn row_factors(&self) -> (&[f64], &[f64]) {
        match self {
            GramSide::Rows { vectors, mu } => (vectors, mu),
            GramSide::Columns | GramSide::ColumnFactors => (&[], &[]),
        }
    }
}

impl Romco {
    /// True when U is to be held as `W Π` (tall U, `d >= FACTORED_MIN_RATIO k²`, with a
    /// trace-norm term; route (c) keeps its own factored form). Fixed by the hyper-parameters
    /// and the shape.
    pub(super) fn prefers_right_factored(&self) -> bool {
        let k = self.n_tasks;
        self.params.lambda1 > 0.0
            && self.params.svt_route != SvtRoute::Brand
            && self.n_features >= FACTORED_MIN_RATIO.saturating_mul(k).saturating_mul(k)
    }

    /// U in the dense column-major form (borrowed when it is held so, else a copy).
    pub(super) fn dense_u(&self) -> Cow<'_, [f64]> {
        let (d, k) = (self.n_features, self.n_tasks);
        match &self.u {
            UForm::Dense(u) => Cow::Borrowed(u),
            UForm::RightFactored { w, pi, .. } => {
                let mut u = vec![0.0; d * k];
                unfactor(w, d, k, pi, &mut u);
                Cow::Owned(u)
            }
            UForm::ThinSvd(f) => Cow::Owned(f.materialize()),
        }
    }

    /// Column `i` of U held dense (empty in the other forms, which callers have left first).
    pub(super) fn u_col(&self, i: usize) -> &[f64] {
        let d = self.n_features;
        match &self.u {
            UForm::Dense(u) => &u[i * d..(i + 1) * d],
            UForm::RightFactored { .. } | UForm::ThinSvd(_) => &[],
        }
    }

    /// `U = W Π` back in the dense column-major form (`O(d k²)`); no change in the other forms.
    pub(super) fn fold_u(&mut self) {
        if let UForm::RightFactored { w, pi, .. } = &self.u {
            let (d, k) = (self.n_features, self.n_tasks);
            let mut product = std::mem::take(&mut self.scratch.product);
            product.resize(d * k, 0.0);
            unfactor(w, d, k, pi, &mut product);
            // W's buffer serves the next product.
            if let UForm::RightFactored { w, .. } = std::mem::replace(&mut self.u, UForm::Dense(product)) {
                self.scratch.product = w;
            }
        }
    }

    /// The dense column-major `u` transposed into a row-major W (through the scratch buffer,
    /// which keeps `u`'s allocation).
    pub(super) fn transposed_into_w(&mut self, u: Vec<f64>) -> Vec<f64> {
        let (d, k) = (self.n_features, self.n_tasks);
        let mut w = std::mem::take(&mut self.scratch.product);
        w.resize(d * k, 0.0);
        column_to_row_major(&u, d, k, &mut w);
        self.scratch.product = u;
        w
    }

    /// Switches a dense U to `W Π` with `Π = Π⁻¹ = I` when the shape asks for it. Free while U
    /// is zero (at the start, or after a thresholding removed everything); a transposition
    /// (`O(d k)`) after route (a) handed U back dense.
    pub(super) fn enter_right_factored(&mut self) {
        if !self.prefers_right_factored() {
            return;
        }
        let UForm::Dense(u) = &mut self.u else { return };
        let u = std::mem::take(u);
        let w = if self.u_live.iter().any(|&l| l) {
            self.transposed_into_w(u)
        } else {
            u // zero: the same in either layout
        };
        let identity = SymMatrix::identity(self.n_tasks).data;
        self.u = UForm::RightFactored {
            w,
            pi: identity.clone(),
            pi_inv: identity,
        };
    }

    /// `W ← W P` in place, row by row, and `Π = Π⁻¹ = I`: the factored form restarted from the
    /// current U (`O(d k²)`, no second `d x k` buffer). No change in the other forms.
    pub(super) fn refold_with(&mut self, p: &[f64]) {
        let k = self.n_tasks;
        let UForm::RightFactored { w, pi, pi_inv } = &mut self.u else {
            return;
        };
        let mut row_in = vec![0.0; k];
        for row in w.chunks_exact_mut(k) {
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
        *pi_inv = identity.clone();
        *pi = identity;
    }

    /// Switches U to a thin SVD (route (c); an `O(d k²)` factorisation, free when U = 0). False
    /// (and U left dense) if U holds non-finite values.
    pub(super) fn enter_thin_svd(&mut self) -> bool {
        self.fold_u();
        let (d, k) = (self.n_features, self.n_tasks);
        let live: Vec<usize> = (0..k).filter(|&i| self.u_live[i]).collect();
        let UForm::Dense(u) = &self.u else { return false };
        match ThinSvd::from_matrix(u, d, k, &live) {
            Some(f) => {
                self.u = UForm::ThinSvd(f);
                true
            }
            None => false,
        }
    }

    /// Switches a thin SVD back to the dense form (`O(d k r)`), with an exact `C = UᵀU`.
    pub(super) fn leave_thin_svd(&mut self) {
        if let UForm::ThinSvd(f) = &self.u {
            let (d, k) = (self.n_features, self.n_tasks);
            let u = f.materialize();
            self.gram = svt::gram(&u, d, k);
            self.u = UForm::Dense(u);
            self.gram_side = GramSide::Columns;
            self.forget_svt_vectors();
            self.qr_pending = false;
        }
    }

    /// The gradient step `u^t += alpha x`; in the factored form `W += alpha x (Π⁻ᵀ e_t)ᵀ`
    /// (`Û = (W + alpha x e_tᵀ Π⁻¹) Π`): W is row-major there, so each non-zero of x updates
    /// one row of k contiguous values, `O(nnz k)`. (A thin SVD takes its step in
    /// [`Romco::brand_threshold`].)
    pub(super) fn u_step(&mut self, x: &Row, alpha: f64, t: usize) {
        let (d, k) = (self.n_features, self.n_tasks);
        match &mut self.u {
            UForm::Dense(u) => x.add_to(&mut u[t * d..(t + 1) * d], alpha),
            UForm::RightFactored { w, pi_inv, .. } => {
                let r = &pi_inv[t * k..(t + 1) * k];
                x.for_each(|i, v| {
                    let a = alpha * v;
                    w[i * k..(i + 1) * k].iter_mut().zip(r).for_each(|(w, &f)| *w += a * f);
                });
            }
            UForm::ThinSvd(_) => {}
        }
    }

    /// `<x, u^task>`: in the factored form `Σ_j <x, w^j> Π[j][task]`, `O(nnz k)`.
    pub(super) fn u_dot(&self, x: &Row, task: usize) -> f64 {
        match &self.u {
            UForm::Dense(u) => x.dot(&u[task * self.n_features..(task + 1) * self.n_features]),
            UForm::RightFactored { .. } => {
                let mut ux = vec![0.0; self.n_tasks];
                self.columns_dot_row(x, &mut ux);
                ux[task]
            }
            UForm::ThinSvd(f) => f.score_projected(&f.project(x), task),
        }
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
        if matches!(self.gram_side, GramSide::Rows { .. }) {
            self.resync_row_side();
        } else if self.resync_work >= (d as u64).saturating_mul((k * k) as u64) {
            self.resync_work = 0;
            // The factored form's rounding (W's, and Π's accumulated products) grows by about
            // ε cond(Π) per update: restarting it here, at the same O(d k²) cost, bounds it.
            if let UForm::RightFactored { pi, .. } = &mut self.u {
                let pi = std::mem::take(pi);
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
        if self.params.lambda1 > 0.0 && !matches!(self.u, UForm::ThinSvd(_)) {
            let exact = self.exact_gram();
            let (drift, scale) = frobenius_drift(&exact, &self.gram);
            if drift > DRIFT_TOL * scale {
                self.qr_pending = true;
                self.svt_counts.n_drift_resyncs += 1;
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
