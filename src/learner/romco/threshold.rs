//! ROMCO's singular-value thresholding of U: the route (Gram side, row side, Brand), the Gram's
//! eigen-decomposition and its updates.

use super::*;

impl Romco {
    /// `U ← SVT_θ(Û)`: route (b) from `c_hat` when given and accurate enough, else route (a).
    /// When one column changed (`change`), route (b) updates the last eigendecomposition of C
    /// in `O(k²)` + two `k x k` products instead of recomputing it.
    pub(super) fn threshold_u(&mut self, c_hat: Option<Vec<f64>>, changes: &[ColumnChange]) {
        let (d, k) = (self.n_features, self.n_tasks);
        let theta = self.params.eta1 * self.params.lambda1;
        let live: Vec<usize> = (0..k).filter(|&i| self.u_live[i]).collect();
        if live.is_empty() {
            self.rank = Some(0);
            return;
        }
        let q = live.len();
        let mut updated = false;
        let gram_result = if self.qr_pending || self.gram_route_hopeless(q, c_hat.as_deref(), changes) {
            None
        } else if !changes.is_empty() && self.update_eigen(&live, changes) {
            updated = true;
            self.svt_counts.n_eigen_updates += 1;
            let eig = &mut self.scratch.updated;
            gram_route_taking(eig, theta)
        } else {
            let c_hat = c_hat.or_else(|| (!changes.is_empty()).then(|| self.changed_c_hat(changes)));
            c_hat.and_then(|c_hat| {
                let c_hat = &c_hat;
                let sub: Vec<f64> = live
                    .iter()
                    .flat_map(|&a| live.iter().map(move |&b| c_hat[a * k + b]))
                    .collect();
                svt::gram_route(&sub, q, theta)
            })
        };
        let shrink: Option<Shrinkage> = match gram_result {
            Some(s) => {
                self.svt_counts.n_gram_svt += 1;
                Some(s)
            }
            None => {
                self.qr_pending = false;
                self.svt_counts.n_qr_svt += 1;
                self.fold_u();
                let warm = (self.svt_vectors.len() == q * q).then_some(self.svt_vectors.as_slice());
                svt::qr_route_cols(&self.dense_u(), d, &live, theta, warm)
            }
        };
        match shrink {
            Some(mut s) => {
                // C = Z diag((σ - θ)_+²) Zᵀ from now on (and Z warm-starts route (a)); the old Z's
                // buffer serves the next eigendecomposition update.
                let old = std::mem::replace(&mut self.svt_vectors, std::mem::take(&mut s.z));
                self.scratch.updated.vectors = old;
                self.svt_mu.clear();
                self.svt_mu
                    .extend(s.sigma.iter().map(|&sg| (sg - theta).max(0.0).powi(2)));
                let mut s = svt::embed(s, &live, k);
                // The updated route computed no Gram matrix: C is Z diag(μ) Zᵀ until needed.
                let side = if updated {
                    GramSide::ColumnFactors
                } else {
                    GramSide::Columns
                };
                if s.pi.iter().all(|&p| p == 0.0) {
                    self.u = match std::mem::replace(&mut self.u, UForm::Dense(Vec::new())) {
                        // W is d x k like U: zero in either layout.
                        UForm::Dense(mut u) | UForm::RightFactored { w: mut u, .. } => {
                            u.fill(0.0);
                            UForm::Dense(u)
                        }
                        thin @ UForm::ThinSvd(_) => thin,
                    };
                    self.gram.fill(0.0);
                    self.gram_side = GramSide::Columns;
                    self.u_live.fill(false);
                    self.forget_svt_vectors();
                } else if self.prefers_right_factored() {
                    self.compose_right(&s, &live);
                    self.gram_side = side;
                    if !updated {
                        self.gram = std::mem::take(&mut s.gram);
                    }
                } else {
                    if let UForm::Dense(u) = &mut self.u {
                        svt::right_multiply_in_place(u, d, k, &s.pi);
                    }
                    self.gram_side = side;
                    if !updated {
                        self.gram = s.gram;
                    }
                }
                self.rank = Some(s.rank);
            }
            None => {
                // Non-finite values (overflow from extreme step sizes): leave Û unthresholded.
                self.svt_counts.n_numerical_failures += 1;
                self.gram = self.exact_gram();
                self.gram_side = GramSide::Columns;
                self.forget_svt_vectors();
            }
        }
    }

    /// True when route (b) would (almost surely) decline, so that neither Ĉ's eigendecomposition
    /// nor its update is worth computing. More live columns than features make Ĉ singular
    /// (rank ≤ d < q), so route (b) is accepted only if `θ ≥ 10⁻⁶ σ_max`; σ_max is estimated
    /// by that of C after the last thresholding (a step changes it little), or bounded by
    /// `trace(Ĉ)/q ≤ σ_max²`. Taking route (a) is always exact, so a wrong guess costs time only.
    pub(super) fn gram_route_hopeless(&self, q: usize, c_hat: Option<&[f64]>, changes: &[ColumnChange]) -> bool {
        let (d, k) = (self.n_features, self.n_tasks);
        if q <= d {
            return false;
        }
        let theta = self.params.eta1 * self.params.lambda1;
        let mu_max = self.svt_mu.iter().fold(0.0f64, |a, &m| a.max(m));
        if mu_max > 0.0 && theta < GRAM_MIN_THETA * mu_max.sqrt() {
            return true;
        }
        let trace = match c_hat {
            Some(c) => (0..k).map(|i| c[i * k + i]).sum::<f64>(),
            None if !changes.is_empty() => {
                let trace_c = match self.gram_side {
                    GramSide::ColumnFactors => self.svt_mu.iter().sum::<f64>(),
                    GramSide::Columns | GramSide::Rows { .. } => (0..k).map(|i| self.gram[i * k + i]).sum::<f64>(),
                };
                trace_c + changes.iter().map(|ch| 2.0 * ch.g[ch.task] + ch.alpha).sum::<f64>()
            }
            None => return false,
        };
        svt::gram_route_ruled_out(trace, q, theta)
    }

    /// True when the row side's route (b) would (almost surely) decline, so that forming and
    /// eigendecomposing `D̂` is not worth it: the last SVT ran route (a) on the column side with
    /// more live columns than features (the row side declined, or drift sent it there), and
    /// the top `d` squared singular values it found (`D`'s eigenvalues then; those thresholded
    /// to zero count as 0) fail the accuracy test. Without this check a stream whose `D̂` is
    /// ill-conditioned (Landmine with the tuned θ = 1e-14) formed and eigendecomposed `D̂` in
    /// vain every round and, dropping route (a)'s right singular vectors on entering the row
    /// side, ran route (a)'s Jacobi SVD cold each time: 0.098 s per pass against 0.065 s.
    /// The test is redone after every route-(a) SVT, so the row side comes back as soon as
    /// U's spectrum allows; a wrong guess costs time only (route (a) is exact).
    pub(super) fn row_side_hopeless(&self) -> bool {
        let d = self.n_features;
        if matches!(self.gram_side, GramSide::Rows { .. }) || self.svt_mu.len() <= d {
            return false;
        }
        let theta = self.params.eta1 * self.params.lambda1;
        let mut sigma_sq: Vec<f64> = self
            .svt_mu
            .iter()
            .map(|&m| if m > 0.0 { (m.sqrt() + theta).powi(2) } else { 0.0 })
            .collect();
        sigma_sq.sort_by(|a, b| b.total_cmp(a));
        sigma_sq.truncate(d);
        !svt::gram_route_accurate(&sigma_sq, theta)
    }

    /// `Ĉ = C + Σ (g eₜᵀ + eₜ gᵀ + α eₜeₜᵀ)` over the column changes of a round (in order).
    pub(super) fn changed_c_hat(&mut self, changes: &[ColumnChange]) -> Vec<f64> {
        let k = self.n_tasks;
        self.fresh_gram();
        let mut c = self.gram.clone();
        for change in changes {
            let t = change.task;
            for (j, &g) in change.g.iter().enumerate() {
                c[j * k + t] += g;
                c[t * k + j] += g;
            }
            c[t * k + t] += change.alpha;
        }
        c
    }

    /// True when `svt_vectors`/`svt_mu` describe C over the current live columns.
    pub(super) fn svt_matches_live(&self) -> bool {
        self.svt_covers(self.u_live.iter().filter(|&&l| l).count())
    }

    /// True when `svt_vectors`/`svt_mu` describe C over `q` columns.
    pub(super) fn svt_covers(&self, q: usize) -> bool {
        self.svt_vectors.len() == q * q && self.svt_mu.len() == q
    }

    /// Forms `C = Z diag(μ) Zᵀ` (over the live columns) if the explicit C is stale. Called
    /// before U changes (or after the SVT), while the factors describe the current U.
    pub(super) fn fresh_gram(&mut self) {
        match self.gram_side {
            GramSide::Columns => return,
            GramSide::Rows { .. } => {
                // The row side held U's Gram: C exactly, `O(d k²)` (only when the side changes).
                self.gram = self.exact_gram();
                self.gram_side = GramSide::Columns;
                return;
            }
            GramSide::ColumnFactors => self.gram_side = GramSide::Columns,
        }
        let k = self.n_tasks;
        debug_assert!(self.svt_matches_live(), "stale C without matching factors");
        if !self.svt_matches_live() {
            self.gram = self.exact_gram();
            return;
        }
        let live: Vec<usize> = (0..k).filter(|&i| self.u_live[i]).collect();
        let c = svt::weighted_outer_product(&self.svt_vectors, live.len(), live.len(), &self.svt_mu);
        self.gram = svt::embed_square(&c, &live, k);
    }

    /// The eigendecomposition of `Ĉ` over the live columns, updated from that of C after the
    /// last SVT, into `scratch.updated`; false when there is none for the same live columns
    /// (or the update fails).
    pub(super) fn update_eigen(&mut self, live: &[usize], changes: &[ColumnChange]) -> bool {
        let q = live.len();
        if !self.svt_covers(q) {
            return false; // the live set grew (it only grows), or no SVT since the last reset
        }
        for (n, change) in changes.iter().enumerate() {
            let Some(pos) = live.iter().position(|&c| c == change.task) else {
                return false;
            };
            let g: std::borrow::Cow<[f64]> = if q == self.n_tasks {
                std::borrow::Cow::Borrowed(&change.g)
            } else {
                live.iter().map(|&c| change.g[c]).collect()
            };
            let scratch = &mut self.scratch;
            // Each change starts from the previous one's result (`chain`), the first from C's.
            if n > 0 {
                std::mem::swap(&mut scratch.chain, &mut scratch.updated);
            }
            let (z, mu) = if n == 0 {
                (&self.svt_vectors, &self.svt_mu)
            } else {
                (&scratch.chain.vectors, &scratch.chain.values)
            };
            if scratch
                .eigen
                .update(z, mu, pos, &g, change.alpha, &mut scratch.updated)
                .is_none()
            {
                return false;
            }
        }
        true
    }

    /// The number of live columns once the active tasks of this round have taken their step.
    pub(super) fn live_after(&self, active: &[&Item], x_sq: &[f64]) -> usize {
        let fresh = active
            .iter()
            .zip(x_sq)
            .filter(|(it, &xx)| !self.u_live[it.task] && self.params.eta1 != 0.0 && xx > 0.0)
            .count();
        self.u_live.iter().filter(|&&l| l).count() + fresh
    }
}
