//! The incremental inverse Gram matrix of ALGORITHMS.md §4.3, shared by the budget Projectrons.
//!
//! The engine keeps, for an ordered set of `n` elements, their Gram matrix `H` and `Q ≈ H^{-1}`
//! (row-major `cap x cap` buffers; `H` is kept in full, `Q` only in its lower triangle, which
//! halves the memory traffic of every O(n²) pass, the cost that dominates for large n). Positions here are the engine's
//! own storage positions: removal swaps the removed element with the last one (exactly what
//! [`crate::kernel::RowStore::swap_remove`] does), so an owner that stores its rows in a
//! `RowStore` can use its slots as engine positions and keep insertion order separately.
//!
//! - projection of a candidate `z`: `α = Q k_z`, `δ² = max(0, κ - k_zᵀ α)`, O(n²);
//! - append by the Schur complement `s = δ²`: `Q ← [Q 0; 0 0] + u uᵀ / s`, `u = [α; -1]`, O(n²);
//! - removal of any position `r`: swap `r` with the last position, then
//!   `Q ← Q₁₁ - q qᵀ / q_nn`, O(n²);
//! - the fused budget step [`InverseGram::append_and_remove`] (append `z`, then remove `r`) as one
//!   rank-2 pass over the matrix, with the leave-one-out quantities of the enlarged set
//!   available beforehand ([`InverseGram::tentative_diag`], [`InverseGram::tentative_column`]).
//!
//! Every rank-1 change is applied as `Q_ab ← (Q_ab + ũ_a ũ_b) - q̃_a q̃_b` with pre-scaled
//! vectors, and only for `b ≤ a`: `Q` is symmetric by construction (safeguard N2: one triangle
//! stored), and [`InverseGram::q`] reads `Q_ab` and `Q_ba` from the same entry. The other safeguards (N1 insertion guard, N3
//! non-finite or non-positive diagonal, N4 round-robin residual checks, N5 periodic drift probes)
//! use the constants of §4.3; a recompute is a Cholesky factorisation of `H + εI` with
//! escalating jitter `ε`, which is then kept (added to `H` and to every later `κ`).

use serde::{Deserialize, Serialize};

use crate::alloc::Need;
use crate::error::Result;
use crate::linalg::simd::{lower_rank2_update, sym_lower_matvec};
use crate::rng::SplitMix64;

/// N1: relative insertion guard `ε_ins` (a candidate is inserted only if `δ² > ε_ins κ`).
pub const EPS_INS: f64 = 1e-10;
/// N4: a residual column check every `N_CHK` structural operations.
pub const N_CHK: u64 = 50;
/// N4: the residual `‖H Q_{:,j} - e_j‖_∞` above which `Q` is recomputed.
pub const TAU_RES: f64 = 1e-6;
/// N5: a drift probe every `N_REF` structural operations (a recompute only if it fails).
pub const N_REF: u64 = 1000;
/// N5: Gaussian probe vectors `v` per drift probe; `Q` is recomputed when some
/// `‖(H Q - I) v‖_∞ > τ_res`. A row of `H Q - I` of 2-norm above `10 τ_res` escapes one vector
/// with probability ≤ 0.08, all of them with probability ≤ 0.08^4 < 5e-5 (docs/projectron.md).
pub const N_PROBES: usize = 4;
/// The largest residual `‖H Q - I‖_∞` a restored state may have (10,000 `TAU_RES`).
const RESTORED_RESIDUAL: f64 = 1e-2;
/// Recompute jitter: first nonzero try and last regular try, relative to `mean(diag H)`.
pub const JITTER_FIRST: f64 = 1e-12;
pub const JITTER_LAST: f64 = 1e-4;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InverseGram {
    n: usize,
    /// Row stride of `h` and `q` (grows by doubling up to `max_size`).
    cap: usize,
    /// The largest size the owner will ever need (e.g. budget + 1); a hint for the growth.
    max_size: usize,
    h: Vec<f64>,
    q: Vec<f64>,
    /// Total jitter added to the diagonal of `H` by recomputes (and added to every later `κ`).
    jitter: f64,
    n_rebuilds: u64,
    /// Recomputes in which even the largest jitter did not give a Cholesky factor.
    n_failed_rebuilds: u64,
    /// Structural operations (inserts and removals) so far.
    n_ops: u64,
    /// Next column for the round-robin residual check (N4).
    check_col: usize,
    /// Drift probes run so far (N5).
    n_probes: u64,
}

impl InverseGram {
    /// An empty engine; `max_size` bounds the storage it will grow to (it may still exceed it).
    pub fn new(max_size: usize) -> Self {
        Self {
            n: 0,
            cap: 0,
            max_size: max_size.max(1),
            h: Vec::new(),
            q: Vec::new(),
            jitter: 0.0,
            n_rebuilds: 0,
            n_failed_rebuilds: 0,
            n_ops: 0,
            check_col: 0,
            n_probes: 0,
        }
    }

    /// A restored engine for `n` elements of an owner whose storage hint is `max_size`:
    /// `n <= cap <= max_size`, `cap x cap` buffers, finite leading blocks of `H` and of the lower
    /// triangle of `Q`, a finite jitter `>= 0`, consistent counters.
    pub(crate) fn check_state(&self, n: usize, max_size: usize) -> crate::Result<()> {
        use crate::state::{check_counts, check_len, checked_size, ensure};
        check_counts(
            "inverse Gram",
            &[self.n_rebuilds, self.n_failed_rebuilds, self.n_ops, self.n_probes],
        )?;
        check_len("inverse Gram size", self.n, n)?;
        check_len("inverse Gram storage hint", self.max_size, max_size.max(1))?;
        ensure(self.n <= self.cap && self.cap <= self.max_size, || {
            format!(
                "inverse Gram stride {} is not within [{}, {}]",
                self.cap, self.n, self.max_size
            )
        })?;
        let size = checked_size("inverse Gram", self.cap, self.cap)?;
        check_len("inverse Gram H", self.h.len(), size)?;
        check_len("inverse Gram Q", self.q.len(), size)?;
        let cap = self.cap;
        let finite = (0..n).all(|i| {
            self.h[i * cap..i * cap + n].iter().all(|v| v.is_finite())
                && self.q[i * cap..i * cap + i + 1].iter().all(|v| v.is_finite())
        });
        ensure(finite, || "the inverse Gram matrix holds non-finite values".into())?;
        ensure(self.jitter.is_finite() && self.jitter >= 0.0, || {
            format!("inverse Gram jitter {} is not finite and >= 0", self.jitter)
        })?;
        ensure(self.n_failed_rebuilds <= self.n_rebuilds, || {
            "more failed rebuilds than rebuilds".into()
        })?;
        // Q caches H⁻¹: a tampered entry of either passes the checks above and turns the next
        // projections into inf/NaN. The engine recomputes Q once a residual exceeds TAU_RES, so a
        // state it wrote is far within RESTORED_RESIDUAL (unless a recompute failed: then Q is
        // the best the engine had, and is kept). O(n³) for n <= budget + 1.
        if self.n_failed_rebuilds == 0 {
            let residual = self.residual();
            ensure(residual <= RESTORED_RESIDUAL, || {
                format!("the inverse Gram matrix does not invert H (‖HQ - I‖ = {residual:e})")
            })?;
        }
        Ok(())
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.n
    }

    /// The total jitter `ε` added to the diagonal of `H` by recomputes so far.
    pub fn jitter(&self) -> f64 {
        self.jitter
    }

    pub fn n_rebuilds(&self) -> u64 {
        self.n_rebuilds
    }

    /// N5 drift probes so far.
    pub fn n_probes(&self) -> u64 {
        self.n_probes
    }

    pub fn n_failed_rebuilds(&self) -> u64 {
        self.n_failed_rebuilds
    }

    /// `Q[i, j]`.
    #[inline]
    pub fn q(&self, i: usize, j: usize) -> f64 {
        // Only the lower triangle of Q is kept up to date (the matrix is symmetric).
        if j <= i {
            self.q[i * self.cap + j]
        } else {
            self.q[j * self.cap + i]
        }
    }

    /// `H[i, j]` (its diagonal includes the jitter).
    #[inline]
    #[cfg(test)]
    pub fn h(&self, i: usize, j: usize) -> f64 {
        self.h[i * self.cap + j]
    }

    /// `κ` of a candidate as the engine sees it: its self-kernel plus the kept jitter.
    #[inline]
    pub fn effective_kappa(&self, kappa: f64) -> f64 {
        kappa + self.jitter
    }

    /// N1: the smallest Schur complement an insertion may have, `max(thr², ε_ins κ)`, where
    /// `thr2` is the algorithm's own threshold in squared units.
    #[inline]
    pub fn min_schur(&self, kappa: f64, thr2: f64) -> f64 {
        thr2.max(EPS_INS * self.effective_kappa(kappa))
    }

    /// Projection of a candidate with kernel column `kz` (`K(e_j, z)` at every position) and
    /// self-kernel `kappa`: writes `α = Q k_z` into `alpha` and returns `δ²` (jitter included).
    pub fn project(&self, kz: &[f64], kappa: f64, alpha: &mut Vec<f64>) -> f64 {
        let n = self.n;
        debug_assert_eq!(kz.len(), n);
        // Q is exactly symmetric: read only its lower triangle (half the memory traffic of a
        // full matrix-vector product, which is what bounds this loop for large n).
        alpha.clear();
        alpha.resize(n, 0.0);
        sym_lower_matvec(&self.q, self.cap, n, kz, alpha);
        let d2 = self.effective_kappa(kappa) - dot(kz, alpha);
        d2.max(0.0)
    }

    /// The residual `1/sqrt(Q_jj)` of element `j` against the other elements.
    #[cfg(test)]
    pub fn loo_residual(&self, j: usize) -> f64 {
        1.0 / self.q(j, j).sqrt()
    }

    /// The coefficients `γ_l = -Q_lj / Q_jj` (`γ_j = 0`) projecting element `j` onto the others.
    #[cfg(test)]
    pub fn loo_coefficients(&self, j: usize, out: &mut Vec<f64>) {
        let qjj = self.q(j, j);
        out.clear();
        out.extend((0..self.n).map(|l| if l == j { 0.0 } else { -self.q(l, j) / qjj }));
    }

    /// `Q_jj` of the set enlarged by a candidate with projection `alpha` and Schur complement
    /// `s = δ²` (for an old position `j < n`; the candidate's own diagonal is `1/s`).
    #[inline]
    pub fn tentative_diag(&self, alpha: &[f64], s: f64, j: usize) -> f64 {
        self.q(j, j) + alpha[j] * alpha[j] / s
    }

    /// Column `r < n` of the enlarged `Q` (length `n + 1`, the candidate last).
    pub fn tentative_column(&self, alpha: &[f64], s: f64, r: usize, out: &mut Vec<f64>) {
        let ar = alpha[r] / s;
        out.clear();
        out.extend((0..self.n).map(|l| self.q(l, r) + alpha[l] * ar));
        out.push(-ar);
    }

    /// Makes room for `size` elements now, fallibly (H and Q are `cap²` floats each, `cap` up to
    /// `budget + 1`): an insertion calls this before it changes anything, so a failed allocation
    /// is an error naming the budget and the model is unchanged.
    pub fn reserve(&mut self, size: usize, budget: usize) -> Result<()> {
        if size <= self.cap {
            return Ok(());
        }
        let cap = self.next_cap(size);
        let need = Need::new(
            "budget",
            budget,
            "the projectron's Gram matrix and its inverse (2 (budget+1)² floats)",
        );
        need.count::<f64>(&[2, cap, cap])?;
        let h = need.filled(&[cap, cap], 0.0)?;
        let q = need.filled(&[cap, cap], 0.0)?;
        self.move_into(h, q, cap);
        Ok(())
    }

    fn next_cap(&self, size: usize) -> usize {
        (self.cap * 2).max(16).min(self.max_size.max(size)).max(size)
    }

    fn grow_to(&mut self, size: usize) {
        if size <= self.cap {
            return;
        }
        let cap = self.next_cap(size);
        let h = vec![0.0; cap * cap];
        let q = vec![0.0; cap * cap];
        self.move_into(h, q, cap);
    }

    /// Copies the current `n x n` blocks into fresh zeroed `cap x cap` buffers.
    fn move_into(&mut self, mut h: Vec<f64>, mut q: Vec<f64>, cap: usize) {
        let (old_cap, n) = (self.cap, self.n);
        for i in 0..n {
            h[i * cap..i * cap + n].copy_from_slice(&self.h[i * old_cap..i * old_cap + n]);
            q[i * cap..i * cap + n].copy_from_slice(&self.q[i * old_cap..i * old_cap + n]);
        }
        self.h = h;
        self.q = q;
        self.cap = cap;
    }

    /// Appends a candidate with kernel column `kz`, self-kernel `kappa`, and the `alpha` and
    /// `delta2 = s` of [`InverseGram::project`]. The caller checks `s > min_schur` (N1).
    pub fn append(&mut self, kz: &[f64], kappa: f64, alpha: &[f64], delta2: f64) {
        let n = self.n;
        self.grow_to(n + 1);
        let cap = self.cap;
        let kappa = self.effective_kappa(kappa);
        for (i, &v) in kz.iter().enumerate() {
            self.h[i * cap + n] = v;
            self.h[n * cap + i] = v;
        }
        self.h[n * cap + n] = kappa;
        // ũ = [α; -1] / sqrt(s)
        let scale = 1.0 / delta2.sqrt();
        let u: Vec<f64> = alpha.iter().map(|a| a * scale).chain(std::iter::once(-scale)).collect();
        self.q[n * cap..n * cap + n + 1].iter_mut().for_each(|v| *v = 0.0);
        self.n = n + 1;
        // A rank-2 kernel with a zero second vector: (Q_ij + ũ_i ũ_j) - 0 is exactly the rank-1 step.
        let zero = vec![0.0; n + 1];
        let acc = lower_rank2_update(&mut self.q, cap, n + 1, &u, &zero);
        self.after_structural_ops(1, acc);
    }

    /// Swaps positions `a` and `b` in `H` (rows and columns; `H` is kept in full).
    #[cfg(test)]
    fn swap_h(&mut self, a: usize, b: usize) {
        if a == b {
            return;
        }
        let (n, cap) = (self.n, self.cap);
        for i in 0..n {
            self.h.swap(i * cap + a, i * cap + b);
        }
        for j in 0..n {
            self.h.swap(a * cap + j, b * cap + j);
        }
    }

    /// Removes position `r`: the last position moves into `r` (swap-remove).
    #[cfg(test)]
    pub fn remove(&mut self, r: usize) {
        let n = self.n;
        debug_assert!(r < n);
        let last = n - 1;
        let cap = self.cap;
        // Column r of Q in the final indexing (the last element moves into r), and its pivot.
        let qrr = self.q[r * cap + r];
        let scale = 1.0 / qrr.sqrt();
        let mut v: Vec<f64> = (0..last).map(|a| self.q(a, r) * scale).collect();
        if r < last {
            v[r] = self.q(last, r) * scale;
            // Move the last element's lower-triangle entries into position r.
            for b in 0..r {
                self.q[r * cap + b] = self.q[last * cap + b];
            }
            for a in r + 1..last {
                self.q[a * cap + r] = self.q[last * cap + a];
            }
            self.q[r * cap + r] = self.q[last * cap + last];
        }
        self.swap_h(r, last);
        self.n = last;
        let mut acc = 0.0;
        for i in 0..last {
            let vi = v[i];
            let row = &mut self.q[i * cap..i * cap + i + 1];
            for (qv, &vj) in row.iter_mut().zip(&v) {
                *qv -= vi * vj;
            }
            acc += row[i];
        }
        // A non-positive pivot means Q had drifted: recompute (N3).
        if !positive(qrr) {
            acc = f64::NAN;
        }
        self.after_structural_ops(1, acc);
    }

    /// The budget step in one pass: appends the candidate (`kz`, `kappa`, `alpha`, `delta2` as in
    /// [`InverseGram::append`]) and then removes the old position `r < n`. The candidate ends at
    /// position `r`, every other position is unchanged: the same result as `append` followed
    /// by `remove(r)`, at the cost of one rank-2 update instead of two rank-1 updates.
    pub fn append_and_remove(&mut self, kz: &[f64], kappa: f64, alpha: &[f64], delta2: f64, r: usize) {
        let n = self.n;
        debug_assert!(r < n);
        let cap = self.cap;
        let s = delta2;
        // Column r of the enlarged Q, in the final indexing (the candidate at r).
        let ar = alpha[r] / s;
        let qrr = self.q[r * cap + r] + alpha[r] * ar;
        let mut qcol: Vec<f64> = (0..n).map(|l| self.q(l, r) + alpha[l] * ar).collect();
        qcol[r] = -ar;
        let mut u: Vec<f64> = alpha.to_vec();
        u[r] = -1.0;
        let us = 1.0 / s.sqrt();
        u.iter_mut().for_each(|v| *v *= us);
        let qs = 1.0 / qrr.sqrt();
        qcol.iter_mut().for_each(|v| *v *= qs);
        // The candidate's base row in [Q 0; 0 0] is zero.
        for i in r + 1..n {
            self.q[i * cap + r] = 0.0;
        }
        self.q[r * cap..r * cap + r + 1].iter_mut().for_each(|v| *v = 0.0);
        let mut acc = lower_rank2_update(&mut self.q, cap, n, &u, &qcol);
        if !positive(qrr) {
            acc = f64::NAN;
        }
        let kappa = self.effective_kappa(kappa);
        for (i, &v) in kz.iter().enumerate() {
            self.h[i * cap + r] = v;
            self.h[r * cap + i] = v;
        }
        self.h[r * cap + r] = kappa;
        self.after_structural_ops(2, acc);
    }

    /// Safeguards after `ops` structural operations; `diag_sum` is the sum of the new diagonal
    /// of `Q` (non-finite if any value went non-finite on the way).
    fn after_structural_ops(&mut self, ops: u64, diag_sum: f64) {
        let before = self.n_ops;
        self.n_ops += ops;
        let crossed = |period: u64| before / period != self.n_ops / period;
        let n = self.n;
        // N3: a non-finite value or a non-positive diagonal entry.
        let mut bad = !diag_sum.is_finite() || (0..n).any(|j| !positive(self.q(j, j)));
        if !bad && crossed(N_CHK) && n > 0 {
            // N4: residual of one column, round robin; also catches non-finite values off the
            // diagonal (they make the residual NaN).
            let j = self.check_col % n;
            self.check_col = (j + 1) % n.max(1);
            let r = self.column_residual(j);
            bad = r.is_nan() || r > TAU_RES;
        }
        if !bad && crossed(N_REF) && n > 0 {
            // N5: recompute only when the probe sees drift (it costs 2 N_PROBES n² multiply-adds,
            // the recompute n³/2).
            self.n_probes += 1;
            let r = self.drift_probe();
            bad = r.is_nan() || r > TAU_RES;
        }
        if bad {
            self.rebuild();
        }
    }

    /// `max ‖(H Q - I) v‖_∞` over `N_PROBES` standard Gaussian vectors `v`, drawn from a
    /// generator seeded by the operation count (reproducible, and a fresh draw at every probe).
    /// NaN if a value is non-finite.
    pub fn drift_probe(&self) -> f64 {
        let (n, cap) = (self.n, self.cap);
        let mut rng = SplitMix64::new(self.n_ops ^ 0xD1F7_5EED_0000_0000);
        let mut unit = || ((rng.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64; // (0, 1)
        let mut v = vec![0.0; n];
        let mut w = vec![0.0; n];
        let mut worst = 0.0f64;
        for _ in 0..N_PROBES {
            for pair in v.chunks_mut(2) {
                // Box-Muller: two independent N(0, 1) values per pair of uniforms.
                let (radius, angle) = ((-2.0 * unit().ln()).sqrt(), std::f64::consts::TAU * unit());
                pair[0] = radius * angle.cos();
                if let Some(second) = pair.get_mut(1) {
                    *second = radius * angle.sin();
                }
            }
            sym_lower_matvec(&self.q, cap, n, &v, &mut w);
            for (i, &vi) in v.iter().enumerate() {
                let r = dot(&self.h[i * cap..i * cap + n], &w) - vi;
                if r.is_nan() {
                    return f64::NAN;
                }
                worst = worst.max(r.abs());
            }
        }
        worst
    }

    /// `‖H Q_{:,j} - e_j‖_∞`.
    pub fn column_residual(&self, j: usize) -> f64 {
        let (n, cap) = (self.n, self.cap);
        let qj: Vec<f64> = (0..n).map(|i| self.q(i, j)).collect();
        let mut worst = 0.0f64;
        for i in 0..n {
            let v = dot(&self.h[i * cap..i * cap + n], &qj) - if i == j { 1.0 } else { 0.0 };
            if v.is_nan() {
                return f64::NAN;
            }
            worst = worst.max(v.abs());
        }
        worst
    }

    /// `‖H Q - I‖_∞` (entrywise maximum), O(n³): for tests and diagnostics.
    pub fn residual(&self) -> f64 {
        (0..self.n).map(|j| self.column_residual(j)).fold(0.0, f64::max)
    }

    /// Removes the positions `p` with `!keep[p]`, the others keeping their order (position `p`
    /// moves to the number of kept positions before it). `H` loses their rows and columns and
    /// `Q` becomes the inverse of what remains, the Schur complement
    /// `Q_AA - Q_AR Q_RR⁻¹ Q_RA`: O(n² k + k³) for k removed, and exactly `Q_AA` when
    /// `Q_AR = 0` (positions in other components of the task graph). A `Q_RR` that is not
    /// numerically positive definite (drift) has `Q` recomputed from `H` instead. The freed
    /// room is zeroed.
    pub fn remove_positions(&mut self, keep: &[bool]) {
        let (n, cap) = (self.n, self.cap);
        let kept: Vec<usize> = (0..n).filter(|&p| keep[p]).collect();
        let removed: Vec<usize> = (0..n).filter(|&p| !keep[p]).collect();
        let (na, k) = (kept.len(), removed.len());
        if k == 0 {
            return;
        }
        // M = Q_AR (na x k) and G = M Q_RR⁻¹, read before anything is overwritten.
        let m: Vec<f64> = kept
            .iter()
            .flat_map(|&p| removed.iter().map(move |&r| (p, r)))
            .map(|(p, r)| self.q(p, r))
            .collect();
        let coupled = m.iter().any(|&v| v != 0.0);
        let mut g = Vec::new();
        let mut inverted = true;
        if coupled {
            let q_rr: Vec<f64> = removed
                .iter()
                .flat_map(|&a| removed.iter().map(move |&b| (a, b)))
                .map(|(a, b)| self.q(a, b))
                .collect();
            match spd_inverse(&q_rr, k, k, 0.0) {
                Some(inv) => {
                    g = vec![0.0; na * k];
                    for i in 0..na {
                        for b in 0..k {
                            g[i * k + b] = (0..k).map(|a| m[i * k + a] * inv[a * k + b]).sum();
                        }
                    }
                }
                None => inverted = false,
            }
        }
        // In place: the source (kept[i], kept[j]) never precedes the destination (i, j), and
        // every earlier destination precedes it.
        for i in 0..na {
            for j in 0..na {
                self.h[i * cap + j] = self.h[kept[i] * cap + kept[j]];
            }
            for j in 0..=i {
                let mut v = self.q[kept[i] * cap + kept[j]];
                if coupled && inverted {
                    v -= (0..k).map(|a| g[i * k + a] * m[j * k + a]).sum::<f64>();
                }
                self.q[i * cap + j] = v;
            }
        }
        for i in 0..n {
            let from = if i < na { na } else { 0 };
            self.h[i * cap + from..i * cap + n].fill(0.0);
            self.q[i * cap + from..i * cap + n].fill(0.0);
        }
        self.n = na;
        self.check_col = 0;
        if !inverted {
            self.rebuild();
        }
        let diag_sum = (0..na).map(|j| self.q(j, j)).sum();
        self.after_structural_ops(k as u64, diag_sum);
    }

    /// Recomputes `Q` from `H` now (INV-Q2: this must not change later predictions).
    pub fn force_rebuild(&mut self) {
        self.rebuild();
    }

    /// Cholesky of `H + εI` with `ε = 0`, then `10^-12 h̄, 10^-11 h̄, ..., 10^-4 h̄`; a needed
    /// `ε > 0` is kept in `H` and in the jitter. Beyond `10^-4 h̄` the escalation continues (up
    /// to `h̄`) rather than give up; if even that fails (non-finite `H`), `Q` is left unchanged
    /// and the failure is counted.
    fn rebuild(&mut self) {
        let (n, cap) = (self.n, self.cap);
        self.n_rebuilds += 1;
        if n == 0 {
            return;
        }
        let hbar = (0..n).map(|i| self.h[i * cap + i]).sum::<f64>() / n as f64;
        let mut eps = 0.0;
        loop {
            if let Some(inv) = spd_inverse(&self.h, cap, n, eps) {
                let saved = std::mem::take(&mut self.q);
                self.q = saved.clone();
                for i in 0..n {
                    self.q[i * cap..i * cap + n].copy_from_slice(&inv[i * n..(i + 1) * n]);
                }
                let diag: Vec<f64> = (0..n).map(|i| self.h[i * cap + i]).collect();
                for i in 0..n {
                    self.h[i * cap + i] += eps;
                }
                // A factor of a numerically singular H can pass and still give a poor inverse:
                // accept it only if every residual column is within τ_res. One column (the round
                // robin's) was not enough: which columns pass depends on the rounding of the
                // build (an AVX2 build passed one column at 10⁻⁷ with others at 10⁻⁴). O(n³),
                // as the factorisation itself, and recomputes are rare; the round robin's column
                // first, an O(n²) test that turns most failing tries away before the full check.
                let j = self.check_col % n;
                let ok = self.column_residual(j) <= TAU_RES && self.residual() <= TAU_RES;
                if ok || eps >= JITTER_LAST * hbar {
                    self.jitter += eps;
                    return;
                }
                for (i, v) in diag.into_iter().enumerate() {
                    self.h[i * cap + i] = v;
                }
                self.q = saved;
            }
            eps = if eps == 0.0 { JITTER_FIRST * hbar } else { eps * 10.0 };
            if !(eps.is_finite() && eps > 0.0 && eps <= hbar.abs().max(f64::MIN_POSITIVE)) {
                self.n_failed_rebuilds += 1;
                return;
            }
        }
    }
}

/// `(H + εI)^{-1}` (row-major `n x n`, exactly symmetric) of the leading `n x n` block of `h`
/// (row stride `cap`) by Cholesky, or `None` if `H + εI` is not numerically positive definite.
///
/// `H = L Lᵀ` row by row; `U = L^{-ᵀ}` by forward substitution, one column of `L^{-1}` (a row
/// of `U`) at a time; `Q_ij = Σ_{k ≥ max(i,j)} U_ik U_jk`. Every inner loop is a contiguous dot
/// product; n³/2 multiply-adds in all.
pub fn spd_inverse(h: &[f64], cap: usize, n: usize, eps: f64) -> Option<Vec<f64>> {
    let mut l = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..=i {
            let s = h[i * cap + j] + if i == j { eps } else { 0.0 } - dot(&l[i * n..i * n + j], &l[j * n..j * n + j]);
            if i == j {
                if !(s > 0.0 && s.is_finite()) {
                    return None;
                }
                l[i * n + i] = s.sqrt();
            } else {
                l[i * n + j] = s / l[j * n + j];
            }
        }
    }
    let mut u = vec![0.0; n * n];
    let mut m = vec![0.0; n];
    for j in 0..n {
        m[j] = 1.0 / l[j * n + j];
        for i in j + 1..n {
            m[i] = -dot(&l[i * n + j..i * n + i], &m[j..i]) / l[i * n + i];
        }
        u[j * n + j..(j + 1) * n].copy_from_slice(&m[j..n]);
    }
    let mut q = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..=i {
            let v = dot(&u[i * n + i..(i + 1) * n], &u[j * n + i..(j + 1) * n]);
            q[i * n + j] = v;
            q[j * n + i] = v;
        }
    }
    if q.iter().all(|v| v.is_finite()) {
        Some(q)
    } else {
        None
    }
}

/// `x > 0`, false for NaN.
#[inline]
fn positive(x: f64) -> bool {
    x > 0.0
}

#[inline]
fn dot(a: &[f64], b: &[f64]) -> f64 {
    crate::simd::dot4(a, b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SplitMix64;
    use nalgebra::DMatrix;

    fn unif(rng: &mut SplitMix64) -> f64 {
        (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn rbf(a: &[f64], b: &[f64], gamma: f64) -> f64 {
        let d2: f64 = a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum();
        (-gamma * d2).exp()
    }

    /// From-scratch inverse of the engine's current H (n small).
    fn direct_inverse(g: &InverseGram) -> DMatrix<f64> {
        let n = g.len();
        DMatrix::from_fn(n, n, |i, j| g.h(i, j)).try_inverse().unwrap()
    }

    fn q_matrix(g: &InverseGram) -> DMatrix<f64> {
        DMatrix::from_fn(g.len(), g.len(), |i, j| g.q(i, j))
    }

    /// A model of the set: points in storage order, mirrored by swap-remove.
    struct Harness {
        pts: Vec<Vec<f64>>,
        gamma: f64,
        /// The algorithm's threshold in squared units (η² of a Projectron).
        thr2: f64,
        g: InverseGram,
        alpha: Vec<f64>,
        kz: Vec<f64>,
    }

    impl Harness {
        fn new(gamma: f64) -> Self {
            Self {
                pts: Vec::new(),
                gamma,
                thr2: 0.0,
                g: InverseGram::new(64),
                alpha: Vec::new(),
                kz: Vec::new(),
            }
        }

        /// Tries to insert `p`; returns whether N1 let it in.
        fn insert(&mut self, p: Vec<f64>) -> bool {
            self.kz = self.pts.iter().map(|x| rbf(x, &p, self.gamma)).collect();
            let d2 = self.g.project(&self.kz, 1.0, &mut self.alpha);
            if d2 <= self.g.min_schur(1.0, self.thr2) {
                return false;
            }
            self.g.append(&self.kz, 1.0, &self.alpha, d2);
            self.pts.push(p);
            true
        }

        /// A harness holding `n` points of `d` coordinates uniform in [0, 1) drawn from `rng`,
        /// under the RBF kernel of `gamma`.
        fn random(rng: &mut SplitMix64, d: usize, n: usize, gamma: f64) -> Self {
            let mut h = Self::new(gamma);
            for _ in 0..n {
                h.insert((0..d).map(|_| unif(rng)).collect());
            }
            h
        }

        fn remove(&mut self, r: usize) {
            self.g.remove(r);
            self.pts.swap_remove(r);
        }

        fn replace(&mut self, p: Vec<f64>, r: usize) -> bool {
            self.kz = self.pts.iter().map(|x| rbf(x, &p, self.gamma)).collect();
            let d2 = self.g.project(&self.kz, 1.0, &mut self.alpha);
            if d2 <= self.g.min_schur(1.0, self.thr2) {
                return false;
            }
            self.g.append_and_remove(&self.kz, 1.0, &self.alpha, d2, r);
            self.pts.push(p);
            self.pts.swap_remove(r);
            true
        }

        /// H matches the kernel of the stored points (plus the kept jitter on the diagonal).
        fn check_h(&self) {
            for (i, a) in self.pts.iter().enumerate() {
                for (j, b) in self.pts.iter().enumerate() {
                    let expect = rbf(a, b, self.gamma) + if i == j { self.g.jitter() } else { 0.0 };
                    assert!((self.g.h(i, j) - expect).abs() < 1e-14, "H[{i},{j}]");
                }
            }
        }

        fn check_q(&self, rel_fro: f64, res: f64) {
            let n = self.g.len();
            if n == 0 {
                return;
            }
            let inv = direct_inverse(&self.g);
            let q = q_matrix(&self.g);
            let err = (&q - &inv).norm() / inv.norm();
            assert!(err <= rel_fro, "||Q - H^-1||_F / ||H^-1||_F = {err:e} (n = {n})");
            assert!(self.g.residual() <= res, "||HQ - I|| = {:e}", self.g.residual());
            assert_eq!(q, q.transpose(), "Q must be exactly symmetric");
        }
    }

    #[test]
    fn random_inserts_and_removals_track_the_inverse() {
        // INV-Q1 on well-conditioned rbf data: 10^4 operations, sizes up to 40.
        let mut rng = SplitMix64::new(3);
        let d = 4;
        let mut h = Harness::new(6.0);
        let mut ops = 0;
        while ops < 10_000 {
            let n = h.pts.len();
            let roll = unif(&mut rng);
            if n > 0 && (n >= 40 || roll < 0.35) {
                let r = rng.below(n as u64) as usize;
                if roll < 0.15 && n >= 2 {
                    let p: Vec<f64> = (0..d).map(|_| unif(&mut rng)).collect();
                    h.replace(p, r);
                } else {
                    h.remove(r);
                }
            } else {
                let p: Vec<f64> = (0..d).map(|_| unif(&mut rng)).collect();
                h.insert(p);
            }
            ops += 1;
            if ops % 997 == 0 {
                h.check_h();
                h.check_q(1e-8, 1e-6);
            }
        }
        h.check_h();
        h.check_q(1e-8, 1e-6);
        assert!(h.g.n_probes() >= 10, "N5 must have probed: {}", h.g.n_probes());
        assert_eq!(h.g.jitter(), 0.0);
    }

    /// A harness with `n` well-separated points (a well-conditioned H).
    fn filled(n: usize, seed: u64) -> Harness {
        let mut rng = SplitMix64::new(seed);
        let mut h = Harness::new(6.0);
        while h.pts.len() < n {
            let p: Vec<f64> = (0..4).map(|_| unif(&mut rng)).collect();
            h.insert(p);
        }
        h
    }

    #[test]
    fn drift_probe_sees_drift_and_only_drift() {
        let mut h = filled(30, 8);
        assert!(h.g.drift_probe() <= 1e-10, "{:e}", h.g.drift_probe());
        // One corrupted off-diagonal pair of Q (a symmetric error of 1e-4).
        let cap = h.g.cap;
        h.g.q[17 * cap + 5] += 1e-4;
        assert!(h.g.drift_probe() > TAU_RES, "{:e}", h.g.drift_probe());
        h.g.q[17 * cap + 5] = f64::NAN;
        assert!(h.g.drift_probe().is_nan());
    }

    #[test]
    fn n5_recomputes_on_drift_only() {
        let mut rng = SplitMix64::new(9);
        let mut h = filled(30, 10);
        // Clean: crossing N_REF probes and does not recompute.
        h.g.n_ops = N_REF - 1;
        let (rebuilds, probes) = (h.g.n_rebuilds(), h.g.n_probes());
        h.insert((0..4).map(|_| unif(&mut rng)).collect());
        assert_eq!((h.g.n_rebuilds(), h.g.n_probes()), (rebuilds, probes + 1));
        // Drift in columns N4's round robin does not check at this crossing: the probe catches it.
        let n = h.g.len();
        h.g.check_col = 0;
        let cap = h.g.cap;
        h.g.q[17 * cap + 5] += 1e-4;
        assert!(h.g.column_residual(0) <= TAU_RES);
        h.g.n_ops = 2 * N_REF - 1;
        h.remove(n - 1);
        assert_eq!(h.g.n_rebuilds(), rebuilds + 1, "the probe must trigger a recompute");
        assert_eq!(h.g.n_probes(), probes + 2);
        h.check_q(1e-8, 1e-6);
    }

    #[test]
    fn near_singular_sets_stay_consistent() {
        // Duplicates and an rbf with a tiny gamma (a nearly rank-deficient Gram matrix), with the
        // Projectron's default η = 0.01 (thr² = 1e-4) and with η = 0 (only N1's relative guard):
        // N1 rejects what cannot be inserted, and Q stays an accurate inverse of the H it keeps.
        let mut rng = SplitMix64::new(9);
        for (gamma, thr2) in [(1e-3, 1e-4), (0.05, 1e-4), (0.5, 0.0), (5.0, 0.0)] {
            let mut h = Harness::new(gamma);
            h.thr2 = thr2;
            let mut rejected = 0;
            let mut pool: Vec<Vec<f64>> = Vec::new();
            for step in 0..4000 {
                let n = h.pts.len();
                if n > 0 && (n >= 25 || unif(&mut rng) < 0.4) {
                    let r = rng.below(n as u64) as usize;
                    h.remove(r);
                    continue;
                }
                let p = if !pool.is_empty() && unif(&mut rng) < 0.3 {
                    pool[rng.below(pool.len() as u64) as usize].clone() // exact duplicate
                } else {
                    (0..3).map(|_| unif(&mut rng)).collect()
                };
                pool.push(p.clone());
                if !h.insert(p) {
                    rejected += 1;
                }
                if step % 250 == 0 {
                    h.check_h();
                    let n = h.g.len();
                    if n > 0 {
                        let q = q_matrix(&h.g);
                        assert_eq!(q, q.transpose());
                        assert!(q.iter().all(|v| v.is_finite()));
                        let res = h.g.residual();
                        // Between the N4 checks the residual may drift; with η > 0 (or a
                        // well-conditioned kernel) not far. With η = 0 and a flat kernel the
                        // Gram matrix is numerically singular and only the recompute helps.
                        if thr2 > 0.0 || gamma >= 5.0 {
                            assert!(res < 1e-5, "gamma {gamma}: residual {res:e}");
                        }
                        // A recompute restores HQ = I to tau_res (with escalating jitter if needed).
                        let mut g = h.g.clone();
                        g.force_rebuild();
                        assert!(g.residual() <= TAU_RES, "after rebuild: {:e}", g.residual());
                    }
                }
            }
            assert!(rejected > 0, "duplicates must be rejected by N1");
            assert!((0..h.g.len()).all(|j| h.g.q(j, j) > 0.0));
        }
    }

    #[test]
    fn duplicate_projects_onto_its_twin() {
        // INV-P5 at the engine level: δ = 0 and α = e_j.
        let mut h = Harness::new(2.0);
        let pts = [vec![0.1, 0.2], vec![0.9, 0.4], vec![0.5, 0.5]];
        for p in &pts {
            assert!(h.insert(p.clone()));
        }
        let kz: Vec<f64> = pts.iter().map(|x| rbf(x, &pts[1], 2.0)).collect();
        let mut alpha = Vec::new();
        let d2 = h.g.project(&kz, 1.0, &mut alpha);
        assert!(d2 < 1e-12);
        for (j, a) in alpha.iter().enumerate() {
            let e = if j == 1 { 1.0 } else { 0.0 };
            assert!((a - e).abs() < 1e-10, "alpha = {alpha:?}");
        }
        assert!(!h.insert(pts[1].clone()));
    }

    #[test]
    fn leave_one_out_quantities_match_direct_solves() {
        let mut rng = SplitMix64::new(5);
        let h = Harness::random(&mut rng, 3, 12, 3.0);
        let n = h.g.len();
        let hm = DMatrix::from_fn(n, n, |i, j| h.g.h(i, j));
        let mut gamma = Vec::new();
        for j in 0..n {
            let others: Vec<usize> = (0..n).filter(|&l| l != j).collect();
            let hr = DMatrix::from_fn(n - 1, n - 1, |a, b| hm[(others[a], others[b])]);
            let hc = nalgebra::DVector::from_fn(n - 1, |a, _| hm[(others[a], j)]);
            let coef = hr.clone().cholesky().unwrap().solve(&hc);
            let resid2 = hm[(j, j)] - hc.dot(&coef);
            let rho = h.g.loo_residual(j);
            assert!(
                (rho * rho - resid2).abs() < 1e-10 * resid2.max(1e-3),
                "1/Q_jj vs direct residual"
            );
            h.g.loo_coefficients(j, &mut gamma);
            for (a, &l) in others.iter().enumerate() {
                assert!((gamma[l] - coef[a]).abs() < 1e-8 * coef[a].abs().max(1.0));
            }
            assert_eq!(gamma[j], 0.0);
        }
    }

    #[test]
    fn fused_budget_step_equals_append_then_remove() {
        let mut rng = SplitMix64::new(21);
        let mut a = Harness::random(&mut rng, 3, 15, 4.0);
        let mut b = Harness {
            pts: a.pts.clone(),
            gamma: a.gamma,
            thr2: 0.0,
            g: a.g.clone(),
            alpha: Vec::new(),
            kz: Vec::new(),
        };
        let p: Vec<f64> = (0..3).map(|_| unif(&mut rng)).collect();
        let r = 6;
        // tentative leave-one-out quantities agree with the appended matrix
        let kz: Vec<f64> = a.pts.iter().map(|x| rbf(x, &p, 4.0)).collect();
        let mut alpha = Vec::new();
        let s = a.g.project(&kz, 1.0, &mut alpha);
        let mut col = Vec::new();
        a.g.tentative_column(&alpha, s, r, &mut col);
        let diag: Vec<f64> = (0..15).map(|j| a.g.tentative_diag(&alpha, s, j)).collect();
        assert!(a.insert(p.clone()));
        for (l, &cl) in col.iter().enumerate() {
            assert!((cl - a.g.q(l, r)).abs() < 1e-12 * a.g.q(l, r).abs().max(1.0));
        }
        for (j, dj) in diag.iter().enumerate() {
            assert!((dj - a.g.q(j, j)).abs() < 1e-12 * dj.abs());
        }
        a.remove(r);
        assert!(b.replace(p, r));
        assert_eq!(a.pts, b.pts);
        for i in 0..15 {
            for j in 0..15 {
                assert_eq!(a.g.h(i, j), b.g.h(i, j));
                assert!((a.g.q(i, j) - b.g.q(i, j)).abs() < 1e-10 * a.g.q(i, j).abs().max(1.0));
            }
        }
    }

    #[test]
    fn rebuild_keeps_the_jitter_consistent() {
        // A numerically singular H (two identical rows inserted by hand) needs jitter.
        let mut g = InverseGram::new(8);
        let mut alpha = Vec::new();
        let d2 = g.project(&[], 1.0, &mut alpha);
        g.append(&[], 1.0, &alpha, d2);
        // Second element: identical kernel values, forced in with a tiny Schur complement.
        let d2 = g.project(&[1.0], 1.0, &mut alpha);
        assert_eq!(d2, 0.0);
        g.append(&[1.0], 1.0, &alpha, 1e-300);
        // Q had to be recomputed with jitter (N3 or the residual check).
        g.force_rebuild();
        assert!(g.jitter() > 0.0 && g.jitter() <= 1e-4 * 1.0 + 1e-12);
        assert!(g.residual() < 1e-6, "residual {:e}", g.residual());
        assert_eq!(g.h(0, 0), 1.0 + g.jitter());
        assert_eq!(g.effective_kappa(1.0), 1.0 + g.jitter());
    }

    #[test]
    fn force_rebuild_is_a_no_op_on_well_conditioned_sets() {
        let mut rng = SplitMix64::new(2);
        let mut h = Harness::random(&mut rng, 3, 20, 5.0);
        let before = q_matrix(&h.g);
        h.g.force_rebuild();
        let after = q_matrix(&h.g);
        assert!((&before - &after).norm() / after.norm() < 1e-10);
        assert_eq!(h.g.jitter(), 0.0);
    }

    #[test]
    fn spd_inverse_matches_nalgebra_and_rejects_indefinite() {
        let mut rng = SplitMix64::new(17);
        let n = 37;
        let a = DMatrix::from_fn(n, n, |_, _| unif(&mut rng) - 0.5);
        let h = &a * a.transpose() + DMatrix::identity(n, n) * 0.1;
        let flat: Vec<f64> = (0..n * n).map(|p| h[(p / n, p % n)]).collect();
        let q = spd_inverse(&flat, n, n, 0.0).unwrap();
        let inv = h.clone().try_inverse().unwrap();
        for i in 0..n {
            for j in 0..n {
                assert!((q[i * n + j] - inv[(i, j)]).abs() < 1e-9 * inv.amax());
                assert_eq!(q[i * n + j], q[j * n + i]);
            }
        }
        let bad = [1.0, 2.0, 2.0, 1.0];
        assert!(spd_inverse(&bad, 2, 2, 0.0).is_none());
        assert!(spd_inverse(&bad, 2, 2, 1.5).is_some());
    }
}
