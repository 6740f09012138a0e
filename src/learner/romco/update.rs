//! ROMCO's joint update of the tasks an example touches: the trigger, the steps and their checks.

use super::*;

impl Romco {
    pub(super) fn triggered(&self, items: &[Item]) -> bool {
        items.iter().any(|it| match self.params.update {
            RomcoTrigger::Loss => it.y * it.score < 1.0,
            RomcoTrigger::Mistake => it.y * it.score <= 0.0,
        })
    }

    /// The joint update of one round (§5.3), given each present task's pre-update score (and,
    /// for a singleton round under route (c), `Bᵀx` if already computed).
    ///
    /// The gradient steps are checked before anything is written: the thresholding and the
    /// group shrinkage that follow only shrink (they are proximal maps, non-expansive), so a
    /// finite Û, V̂ with finite squared norms keeps every later quantity finite.
    pub(super) fn joint_update(&mut self, items: &[Item], bx: Option<&[f64]>) -> Result<()> {
        if !self.triggered(items) {
            self.n_seen += items.len() as u64;
            return Ok(()); // INV-R5: nothing changes, not even by shrinkage
        }
        self.check_steps(items)?;
        self.n_seen += items.len() as u64;
        self.enter_right_factored();
        let (d, k) = (self.n_features, self.n_tasks);
        // Γ: the present tasks with positive hinge loss (at the kink the subgradient is 0), with
        // their ||x||² (used three times below).
        let active: Vec<&Item> = items.iter().filter(|it| it.y * it.score < 1.0).collect();
        let x_sq: Vec<f64> = active.iter().map(|it| it.x.sq_norm()).collect();
        // Route (c) for singleton rounds (§5.5 c); any other round needs U dense.
        let use_brand =
            items.len() == 1 && self.brand_applies() && (matches!(self.u, UForm::ThinSvd(_)) || self.enter_thin_svd());
        if !use_brand {
            self.leave_thin_svd();
        }
        let shrink_u = self.params.lambda1 > 0.0 && !use_brand;
        // Wide U (more live columns than features after this step): route (b) on the `d x d`
        // Gram matrix of the rows, the smaller side. Otherwise C must be known (formed exactly
        // from the pre-update U if the row side held the Gram until now).
        let row_side = shrink_u
            && !self.qr_pending
            && matches!(self.params.svt_route, SvtRoute::Auto | SvtRoute::Gram)
            && self.live_after(&active, &x_sq) > d
            && !self.row_side_hopeless();
        let mut row_changes = Vec::new();
        if row_side {
            self.enter_row_side();
            if active.len() <= MAX_UPDATED_TASKS && self.gram_side.row_factors().1.len() == d {
                // D̂ = D + Σ (u aᵀ + a uᵀ + a aᵀ) over the changed columns, u = u^t before the
                // step, a = η1 y x: one rank-two change per column (the columns differ, so
                // each u is the column as it was).
                for it in &active {
                    let mut a = vec![0.0; d];
                    it.x.add_to(&mut a, self.params.eta1 * it.y);
                    row_changes.push((self.u_col(it.task).to_vec(), a));
                }
            }
        } else if matches!(self.gram_side, GramSide::Rows { .. }) {
            self.fresh_gram();
        }

        // Ĉ = ÛᵀÛ from the maintained C (§5.5 b, step 1), with U still the pre-update U. With one
        // active task the change of C is described by `Uᵀa` and `||a||²` alone (and Ĉ is formed
        // only if its eigendecomposition cannot be updated).
        let mut c_hat = None;
        let mut column_changes = Vec::new();
        if shrink_u && !row_side && !self.qr_pending && self.params.svt_route != SvtRoute::Qr {
            let step = self.params.eta1;
            let mut ux = vec![0.0; k];
            if let ([it], [xx]) = (active.as_slice(), x_sq.as_slice()) {
                if !(self.u_live[it.task] && self.svt_matches_live()) {
                    // No eigendecomposition to update: Ĉ will be needed, from the current C.
                    self.fresh_gram();
                }
                match &it.ux {
                    Some(known) => ux.copy_from_slice(known),
                    None => self.columns_dot_row(&it.x, &mut ux),
                }
                ux.iter_mut().for_each(|v| *v *= step * it.y);
                column_changes.push(ColumnChange {
                    task: it.task,
                    g: ux,
                    alpha: step * step * xx,
                });
            } else if active.len() <= MAX_UPDATED_TASKS
                && active.iter().all(|it| self.u_live[it.task])
                && self.svt_matches_live()
            {
                // A few columns change: one column change after the other, each seeing the
                // columns changed before it (`g = U'ᵀa` picks up `e_b <a_b, a>` from each).
                for (ia, (it, &xx)) in active.iter().zip(&x_sq).enumerate() {
                    let mut g = vec![0.0; k];
                    self.columns_dot_row(&it.x, &mut g);
                    g.iter_mut().for_each(|v| *v *= step * it.y);
                    for b in &active[..ia] {
                        g[b.task] += step * step * b.y * it.y * b.x.dot_row(&it.x);
                    }
                    column_changes.push(ColumnChange {
                        task: it.task,
                        g,
                        alpha: step * step * xx,
                    });
                }
            } else {
                self.fresh_gram();
                let mut c = self.gram.clone();
                for it in &active {
                    let t = it.task;
                    self.columns_dot_row(&it.x, &mut ux);
                    for (j, &v) in ux.iter().enumerate() {
                        let a = step * it.y * v;
                        c[j * k + t] += a;
                        c[t * k + j] += a;
                    }
                }
                for (ia, a) in active.iter().enumerate() {
                    for (ib, b) in active.iter().enumerate().skip(ia) {
                        let xy = if ia == ib { x_sq[ia] } else { a.x.dot_row(&b.x) };
                        let v = step * step * a.y * b.y * xy;
                        c[a.task * k + b.task] += v;
                        if a.task != b.task {
                            c[b.task * k + a.task] += v;
                        }
                    }
                }
                c_hat = Some(c);
            }
        }

        // Gradient steps, sparse: Û = U - η1 Γ, V̂ = V - η2 Γ (with ||v̂||² kept up to date).
        for (it, &xx) in active.iter().zip(&x_sq) {
            let t = it.task;
            if !use_brand {
                self.u_step(&it.x, self.params.eta1 * it.y, t);
            }
            self.u_live[t] |= self.params.eta1 != 0.0 && xx > 0.0;
            if self.params.eta2 == 0.0 {
                continue;
            }
            let vx = if self.v_scale[t] == 0.0 {
                self.v[t * d..(t + 1) * d].fill(0.0);
                self.v_scale[t] = 1.0;
                self.v_sq_norm[t] = 0.0;
                0.0
            } else {
                it.vx.unwrap_or_else(|| self.v_dot(t, &it.x))
            };
            let s = self.v_scale[t];
            it.x.add_to(&mut self.v[t * d..(t + 1) * d], self.params.eta2 * it.y / s);
            let norm2 =
                self.v_sq_norm[t] + 2.0 * self.params.eta2 * it.y * vx + self.params.eta2 * self.params.eta2 * xx;
            self.v_sq_norm[t] = norm2.max(0.0);
        }

        // U ← SVT_{η1 λ1}(Û).
        if use_brand {
            self.brand_threshold(items, bx);
        } else if row_side {
            self.threshold_rows(&row_changes);
        } else if shrink_u {
            self.threshold_u(c_hat, &column_changes);
        } else {
            self.rank = None;
        }

        // Column group shrinkage of every column of V (A-R5).
        if self.params.lambda2 > 0.0 {
            let cut = self.params.eta2 * self.params.lambda2;
            for i in 0..k {
                if self.v_scale[i] == 0.0 {
                    continue;
                }
                let norm = self.v_sq_norm[i].sqrt();
                let factor = if norm > 0.0 { (1.0 - cut / norm).max(0.0) } else { 0.0 };
                if factor == 0.0 {
                    self.v_scale[i] = 0.0;
                    self.v_sq_norm[i] = 0.0;
                    continue;
                }
                self.v_scale[i] *= factor;
                let kept = norm - cut;
                self.v_sq_norm[i] = kept * kept;
                if self.v_scale[i] < MIN_SCALE {
                    self.fold_scale(i);
                }
            }
        }

        self.n_updates += 1;
        let work = if self.prefers_right_factored() {
            let nnz: usize = active.iter().map(|it| it.x.nnz()).sum();
            nnz * k + k * k * k
        } else {
            d * k * k
        };
        self.resync_work = self.resync_work.saturating_add(work as u64);
        if self.n_updates.is_multiple_of(RESYNC_EVERY) {
            self.resync();
        }
        Ok(())
    }

    /// Refuses a round whose gradient steps `η1 y x`, `η2 y x` (or their effect on a column of
    /// U or V, or on the squared norms the Gram route and the group shrinkage keep) overflow.
    pub(super) fn check_steps(&self, items: &[Item]) -> Result<()> {
        let d = self.n_features;
        for it in items.iter().filter(|it| it.y * it.score < 1.0) {
            let t = it.task;
            let xx = it.x.sq_norm();
            let (s1, s2) = (self.params.eta1 * it.y, self.params.eta2 * it.y);
            let sq_ok = (self.params.eta1 * self.params.eta1 * xx).is_finite()
                && (self.params.eta2 * self.params.eta2 * xx).is_finite();
            let u_ok = match &self.u {
                UForm::ThinSvd(_) => true,
                UForm::Dense(u) => it.x.axpy_stays_finite(&u[t * d..(t + 1) * d], s1),
                UForm::RightFactored { w, pi_inv, .. } => {
                    let k = self.n_tasks;
                    let r = &pi_inv[t * k..(t + 1) * k];
                    let mut ok = true;
                    it.x.for_each(|i, v| {
                        ok &= w[i * k..(i + 1) * k]
                            .iter()
                            .zip(r)
                            .all(|(&w, &f)| (w + s1 * v * f).is_finite());
                    });
                    ok
                }
            };
            let v_ok = self.v_scale[t] == 0.0
                || it
                    .x
                    .axpy_stays_finite(&self.v[t * d..(t + 1) * d], s2 / self.v_scale[t]);
            let v_norm_ok = (self.v_sq_norm[t].sqrt() + self.params.eta2 * xx.sqrt())
                .powi(2)
                .is_finite();
            if !(it.score.is_finite() && sq_ok && u_ok && v_ok && v_norm_ok) {
                return Err(Error::Numerical(format!(
                    "ROMCO gradient step overflows (eta1 = {:e}, eta2 = {:e}, squared row norm {xx:e}, score {})",
                    self.params.eta1, self.params.eta2, it.score
                )));
            }
        }
        Ok(())
    }
}
