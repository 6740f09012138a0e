//! Forgetting tasks: their columns of U and V set to zero and the caches derived again.

use super::*;

impl Romco {
    /// Sets the columns of `tasks` in U and V to zero (a task never updated), U held dense for
    /// it, then derives the caches from the result as a resync does: the exact `C = UᵀU`, no
    /// SVT factors (the next thresholding takes route (a)), the rank of U, U back in the form
    /// the shape prefers. `O(d k²)`, the cost of one exact resync, whatever the number of
    /// tasks. The other columns keep what the joint thresholdings of U learned from the
    /// forgotten tasks.
    pub(super) fn forget_columns(&mut self, tasks: &[usize]) {
        if tasks.is_empty() {
            return;
        }
        let (d, k) = (self.n_features, self.n_tasks);
        self.leave_thin_svd();
        self.fresh_gram();
        self.fold_u();
        if let UForm::Dense(u) = &mut self.u {
            for &t in tasks {
                u[t * d..(t + 1) * d].fill(0.0);
            }
        }
        for &t in tasks {
            self.v[t * d..(t + 1) * d].fill(0.0);
            self.v_scale[t] = 1.0;
            self.v_sq_norm[t] = 0.0;
            self.u_live[t] = false;
        }
        if matches!(self.gram_side, GramSide::Rows { .. }) {
            self.forget_row_side();
        }
        self.forget_svt_vectors();
        if self.params.lambda1 > 0.0 {
            let live: Vec<usize> = (0..k).filter(|&i| self.u_live[i]).collect();
            let u = self.dense_u();
            let (gram, rank) = (svt::gram(&u, d, k), svt::qr_route_cols(&u, d, &live, 0.0, None));
            self.gram = gram;
            self.rank = Some(rank.map_or(0, |s| s.rank));
            self.qr_pending = true;
        }
        self.resync_work = 0;
        self.enter_right_factored();
    }
}
