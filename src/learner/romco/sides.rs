//! The Gram side and the row side of U's thresholding: exact Gram, composing the shrinkage on the
//! right, the row-side thresholding and Brand's low-rank update.

use super::*;

impl Romco {
    /// Exact `C = UᵀU`: `Πᵀ (WᵀW) Π` in the factored form (`O(d k²)` either way).
    pub(super) fn exact_gram(&self) -> Vec<f64> {
        let (d, k) = (self.n_features, self.n_tasks);
        let (w, p) = match &self.u {
            UForm::Dense(u) => return svt::gram(u, d, k),
            UForm::ThinSvd(f) => return svt::gram(&f.materialize(), d, k),
            UForm::RightFactored { w, pi, .. } => (w, pi),
        };
        // WᵀW from the rows of the row-major W.
        let mut g = vec![0.0; k * k];
        for row in w.chunks_exact(k) {
            for (a, &ra) in row.iter().enumerate() {
                if ra != 0.0 {
                    g[a * k..(a + 1) * k]
                        .iter_mut()
                        .zip(row)
                        .for_each(|(o, &rb)| *o += ra * rb);
                }
            }
        }
        let mut pt = vec![0.0; k * k];
        for a in 0..k {
            for b in 0..k {
                pt[b * k + a] = p[a * k + b];
            }
        }
        let (mut gp, mut c) = (vec![0.0; k * k], vec![0.0; k * k]);
        matmul(&g, p, k, k, k, &mut gp);
        matmul(&pt, &gp, k, k, k, &mut c);
        for a in 0..k {
            for b in 0..a {
                c[b * k + a] = c[a * k + b];
            }
        }
        c
    }

    /// `U ← Û Π_new` in the factored form: `Π ← Π Π_new`, `Π⁻¹ ← Π_new⁻¹ Π⁻¹` (`O(k³)`), with
    /// `Π_new` the identity on the columns that are not live. Folds (`W ← W Π Π_new`) when a
    /// singular value was thresholded to zero (`Π_new` singular) or Π became ill-conditioned.
    pub(super) fn compose_right(&mut self, s: &Shrinkage, live: &[usize]) {
        let (k, q) = (self.n_tasks, live.len());
        let theta = self.params.eta1 * self.params.lambda1;
        let mut pi_new = s.pi.clone();
        let mut is_live = vec![false; k];
        live.iter().for_each(|&c| is_live[c] = true);
        (0..k).filter(|&i| !is_live[i]).for_each(|i| pi_new[i * k + i] = 1.0);
        let factors: Vec<f64> = s
            .sigma
            .iter()
            .map(|&sg| if sg > theta { (sg - theta) / sg } else { 0.0 })
            .collect();
        let (entering, pi, pi_inv) = match &mut self.u {
            UForm::RightFactored { pi, pi_inv, .. } => {
                let mut prod = vec![0.0; k * k];
                matmul(pi, &pi_new, k, k, k, &mut prod);
                (false, prod, std::mem::take(pi_inv))
            }
            UForm::Dense(_) | UForm::ThinSvd(_) => (true, pi_new, Vec::new()),
        };
        if factors.contains(&0.0) || factors.len() != q {
            self.n_folds += u64::from(!entering);
            self.fold_or_multiply(entering, &pi);
            return;
        }
        let inv_factors: Vec<f64> = factors.iter().map(|f| 1.0 / f).collect();
        // Z (q x q) is in `svt_vectors` by now (moved out of the shrinkage).
        let z = if s.z.is_empty() { &self.svt_vectors } else { &s.z };
        let mut inv_new = svt::embed_square(&svt::weighted_outer_product(z, q, q, &inv_factors), live, k);
        (0..k).filter(|&i| !is_live[i]).for_each(|i| inv_new[i * k + i] = 1.0);
        let inv = if pi_inv.is_empty() {
            inv_new
        } else {
            let mut prod = vec![0.0; k * k];
            matmul(&inv_new, &pi_inv, k, k, k, &mut prod);
            prod
        };
        let frob = |m: &[f64]| m.iter().map(|v| v * v).sum::<f64>().sqrt();
        if frob(&pi) * frob(&inv) > FOLD_CONDITION * k as f64 || !inv.iter().all(|v| v.is_finite()) {
            self.n_folds += u64::from(!entering);
            self.fold_or_multiply(entering, &pi);
            return;
        }
        match &mut self.u {
            UForm::RightFactored { pi: old, pi_inv, .. } => {
                *old = pi;
                *pi_inv = inv;
            }
            UForm::Dense(u) => {
                let u = std::mem::take(u);
                let w = self.transposed_into_w(u);
                self.u = UForm::RightFactored { w, pi, pi_inv: inv };
            }
            UForm::ThinSvd(_) => {}
        }
    }

    /// `U ← U P` for the dense U (`entering`: U is not factored yet), else `W ← W P` with
    /// `Π = I` (the factored form restarted).
    pub(super) fn fold_or_multiply(&mut self, entering: bool, p: &[f64]) {
        match &mut self.u {
            UForm::Dense(u) if entering => svt::right_multiply_in_place(u, self.n_features, self.n_tasks, p),
            UForm::RightFactored { .. } => self.refold_with(p),
            UForm::Dense(_) | UForm::ThinSvd(_) => {}
        }
    }

    /// From now on the row side holds U's Gram (C and its factors are dropped).
    pub(super) fn enter_row_side(&mut self) {
        self.fold_u();
        if !matches!(self.gram_side, GramSide::Rows { .. }) {
            self.gram_side = GramSide::Rows {
                vectors: Vec::new(),
                mu: Vec::new(),
            };
            self.forget_svt_vectors();
        }
    }

    /// The row side's eigendecomposition of D is dropped (the next row-side SVT forms `D̂`).
    pub(super) fn forget_row_side(&mut self) {
        if let GramSide::Rows { vectors, mu } = &mut self.gram_side {
            vectors.clear();
            mu.clear();
        }
    }

    /// Route (b) on the row side: `U ← SVT_θ(Û) = Π_L Û` with `Π_L = P diag(π) Pᵀ` from the
    /// eigendecomposition `D̂ = ÛÛᵀ = P diag(σ²) Pᵀ` (`d x d`, `d < q`): `O(d² k)` for the
    /// product, `O(d³)` for `Π_L`. When one column changed (`change`: its values before the
    /// step and the step) the eigendecomposition of D is updated (two secular equations and
    /// two `d x d` basis products, [`eigen_update::ColumnUpdater::update_vector`]), otherwise
    /// `D̂` is formed exactly (`O(d² k)`) and eigendecomposed. Inaccurate eigenvalues (the same
    /// test as the column side) send the SVT to route (a).
    pub(super) fn threshold_rows(&mut self, changes: &[(Vec<f64>, Vec<f64>)]) {
        let (d, k) = (self.n_features, self.n_tasks);
        let theta = self.params.eta1 * self.params.lambda1;
        let mut eig = std::mem::take(&mut self.scratch.updated);
        let mut updated = !changes.is_empty() && self.gram_side.row_factors().1.len() == d;
        for (n, (u, a)) in changes.iter().enumerate() {
            if !updated {
                break;
            }
            let mut from = std::mem::take(&mut self.scratch.chain);
            if n > 0 {
                std::mem::swap(&mut from, &mut eig);
            }
            let (z, mu) = if n == 0 {
                self.gram_side.row_factors()
            } else {
                (&from.vectors[..], &from.values[..])
            };
            updated = self.scratch.eigen.update_vector(z, mu, a, u, 1.0, &mut eig).is_some();
            self.scratch.chain = from;
        }
        let have_eigen = updated || {
            let d_hat = svt::row_gram(&self.dense_u(), d, k);
            match svt::symmetric_eigen(&d_hat, d) {
                Some((values, vectors)) => {
                    eig.values = values;
                    eig.vectors = vectors;
                    true
                }
                None => false,
            }
        };
        let shrink = if have_eigen {
            gram_route_taking(&mut eig, theta)
        } else {
            None
        };
        let Some(mut s) = shrink else {
            // Route (a) on the column side (exact; it forms C).
            self.scratch.updated = eig;
            self.gram_side = GramSide::Columns;
            self.threshold_u(None, &[]);
            return;
        };
        if updated {
            self.svt_counts.n_eigen_updates += 1;
        }
        self.svt_counts.n_gram_svt += 1;
        self.n_row_svt += 1;
        self.rank = Some(s.rank);
        let UForm::Dense(u) = &mut self.u else {
            unreachable!("the row side holds U dense (enter_row_side folds it)")
        };
        if s.pi.iter().all(|&p| p == 0.0) {
            self.scratch.updated = eig;
            u.fill(0.0);
            self.gram.fill(0.0);
            self.gram_side = GramSide::Columns;
            self.u_live.fill(false);
            return;
        }
        let product = &mut self.scratch.product;
        product.resize(d * k, 0.0);
        svt::symmetric_left_multiply(u, d, k, &s.pi, product);
        std::mem::swap(u, product);
        // D = P diag((σ - θ)_+²) Pᵀ from now on; the old P's buffer serves the next update.
        let mu: Vec<f64> = s.sigma.iter().map(|&sg| (sg - theta).max(0.0).powi(2)).collect();
        match &mut self.gram_side {
            GramSide::Rows { vectors, mu: kept } => {
                eig.vectors = std::mem::replace(vectors, std::mem::take(&mut s.z));
                *kept = mu;
            }
            side => {
                *side = GramSide::Rows {
                    vectors: std::mem::take(&mut s.z),
                    mu,
                }
            }
        }
        self.scratch.updated = eig;
    }

    /// Exact `D = UUᵀ` compared with the maintained `P diag(μ) Pᵀ` (drift sends the next SVT
    /// to route (a)); the factors are dropped, so the next row-side SVT starts from the exact
    /// `D̂` (rounding in updated eigenvectors cannot build up).
    pub(super) fn resync_row_side(&mut self) {
        let d = self.n_features;
        let (vectors, mu) = self.gram_side.row_factors();
        if mu.len() == d {
            let exact = svt::row_gram(&self.dense_u(), d, self.n_tasks);
            let kept = svt::weighted_outer_product(vectors, d, d, mu);
            let (drift, scale) = frobenius_drift(&exact, &kept);
            if drift > DRIFT_TOL * scale {
                self.qr_pending = true;
                self.svt_counts.n_drift_resyncs += 1;
            }
        }
        self.forget_row_side();
    }

    pub(super) fn forget_svt_vectors(&mut self) {
        debug_assert!(
            !matches!(self.gram_side, GramSide::ColumnFactors),
            "C must be formed before its factors are dropped"
        );
        self.svt_vectors.clear();
        self.svt_mu.clear();
    }

    /// `out[j] = <x, u^j>` for every column of U.
    pub(super) fn columns_dot_row(&self, x: &Row, out: &mut [f64]) {
        let (d, k) = (self.n_features, self.n_tasks);
        match &self.u {
            UForm::RightFactored { w, pi, .. } => {
                // W is row-major: one pass over the non-zeros, one row of k values each.
                out.fill(0.0);
                x.for_each(|i, v| {
                    out.iter_mut()
                        .zip(&w[i * k..(i + 1) * k])
                        .for_each(|(o, &w)| *o += v * w);
                });
                // Uᵀx = Πᵀ (Wᵀx).
                let wx = out.to_vec();
                for (i, o) in out.iter_mut().enumerate() {
                    *o = (0..k).map(|j| wx[j] * pi[j * k + i]).sum();
                }
            }
            UForm::Dense(_) | UForm::ThinSvd(_) => {
                let u = self.dense_u();
                match x {
                    Row::Dense(v) => columns_dot(&u, d, k, v, out),
                    sparse => out
                        .iter_mut()
                        .enumerate()
                        .for_each(|(j, o)| *o = sparse.dot(&u[j * d..(j + 1) * d])),
                }
            }
        }
    }

    /// Route (c): `U ← SVT_θ(U + η1 Γ)` on the factored U of a singleton round.
    pub(super) fn brand_threshold(&mut self, items: &[Item], bx: Option<&[f64]>) {
        let theta = self.params.eta1 * self.params.lambda1;
        let it = &items[0];
        // Triggered singleton rounds always have positive loss (so Γ is the row), but stay safe.
        let alpha = if it.y * it.score < 1.0 {
            self.params.eta1 * it.y
        } else {
            0.0
        };
        let UForm::ThinSvd(f) = &mut self.u else { return };
        match f.update(&it.x, alpha, it.task, theta, bx) {
            Some(info) => {
                self.svt_counts.n_brand_svt += 1;
                self.rank = Some(info.rank);
                if f.r() == 0 {
                    self.u_live.fill(false);
                }
            }
            None => {
                // Non-finite values (overflow from extreme step sizes): leave Û unthresholded,
                // dense, as routes (a)/(b) do.
                self.svt_counts.n_numerical_failures += 1;
                self.leave_thin_svd();
                let d = self.n_features;
                if let UForm::Dense(u) = &mut self.u {
                    it.x.add_to(&mut u[it.task * d..(it.task + 1) * d], alpha);
                    self.gram = svt::gram(u, d, self.n_tasks);
                }
                self.gram_side = GramSide::Columns;
            }
        }
    }
}
