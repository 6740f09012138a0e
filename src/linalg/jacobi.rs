//! One-sided (Hestenes) Jacobi SVD of a small dense matrix, shared by the SVT routes (§5.5 a, c).
//!
//! Columns of `W = A Z` are rotated pairwise until they are orthogonal; then `σ_c = ||W_c||`,
//! the left vectors are `W_c / σ_c` and the right vectors are the columns of `Z`.

/// The converged factors: `sigma[c]`, and column `c` of `W = A Z` and of `Z`, both column-major.
pub(crate) struct JacobiSvd {
    pub sigma: Vec<f64>,
    rp: usize,
    ld: usize,
    wz: Vec<f64>,
}

impl JacobiSvd {
    /// Entry `i` of column `c` of `W = A Z` (`σ_c` times the left vector).
    #[inline]
    pub fn w(&self, i: usize, c: usize) -> f64 {
        self.wz[c * self.ld + i]
    }

    /// Entry `i` of column `c` of `Z` (the right vector).
    #[inline]
    pub fn z(&self, i: usize, c: usize) -> f64 {
        self.wz[c * self.ld + self.rp + i]
    }
}

fn dot(x: &[f64], y: &[f64]) -> f64 {
    let mut acc = [0.0f64; 4];
    for (cx, cy) in x.chunks_exact(4).zip(y.chunks_exact(4)) {
        for l in 0..4 {
            acc[l] += cx[l] * cy[l];
        }
    }
    (acc[0] + acc[1]) + (acc[2] + acc[3])
}

/// The SVD of the row-major `rows x cols` matrix `a`, started from the orthogonal `cols x cols`
/// `warm` (row-major; its columns guess the right singular vectors) or from `Z = I`. `None` if it
/// has not converged after `max_sweeps` sweeps. With a good warm start one or two sweeps suffice.
pub(crate) fn jacobi_svd(
    a: &[f64],
    rows: usize,
    cols: usize,
    warm: Option<&[f64]>,
    max_sweeps: usize,
) -> Option<JacobiSvd> {
    // Column c of `wz` (stride `ld`) holds column c of W in its first `rp` entries and column c of
    // Z in the next `cp` (both zero-padded to multiples of 4), so one rotation pass updates both
    // and the dot products run on whole lanes.
    let (rp, cp) = (rows.div_ceil(4) * 4, cols.div_ceil(4) * 4);
    let ld = rp + cp;
    let mut wz = vec![0.0; cols * ld];
    match warm {
        Some(z0) if z0.len() == cols * cols => {
            for c in 0..cols {
                for r in 0..cols {
                    wz[c * ld + rp + r] = z0[r * cols + c];
                }
                for i in 0..rows {
                    wz[c * ld + i] = (0..cols).map(|r| a[i * cols + r] * z0[r * cols + c]).sum();
                }
            }
        }
        _ => {
            for c in 0..cols {
                for i in 0..rows {
                    wz[c * ld + i] = a[i * cols + c];
                }
                wz[c * ld + rp + c] = 1.0;
            }
        }
    }
    let tol = f64::EPSILON * rows.max(1) as f64;
    let mut norms: Vec<f64> = (0..cols)
        .map(|c| dot(&wz[c * ld..c * ld + rp], &wz[c * ld..c * ld + rp]))
        .collect();
    let mut converged = false;
    for _ in 0..max_sweeps {
        let mut rotated = false;
        // Columns below (cols ε)² of the largest squared norm are numerically zero (their σ is
        // under RANK_TOL σ_max): rotating them only stirs rounding noise, whose relative
        // non-orthogonality never settles, so Jacobi would not converge on a rank-deficient A.
        let floor = (f64::EPSILON * cols as f64).powi(2) * norms.iter().fold(0.0f64, |a, &n| a.max(n));
        for p in 0..cols {
            for q in p + 1..cols {
                let (alpha, beta) = (norms[p], norms[q]);
                if alpha <= floor || beta <= floor {
                    continue;
                }
                let (lo, hi) = wz.split_at_mut(q * ld);
                let (cp_, cq) = (&mut lo[p * ld..(p + 1) * ld], &mut hi[..ld]);
                let gamma = dot(&cp_[..rp], &cq[..rp]);
                if gamma.abs() <= tol * (alpha * beta).sqrt() {
                    continue;
                }
                rotated = true;
                let zeta = (beta - alpha) / (2.0 * gamma);
                let t = zeta.signum() / (zeta.abs() + (1.0 + zeta * zeta).sqrt());
                let c = 1.0 / (1.0 + t * t).sqrt();
                let sn = c * t;
                for (x, y) in cp_.iter_mut().zip(cq.iter_mut()) {
                    let (u, v) = (*x, *y);
                    *x = c * u - sn * v;
                    *y = sn * u + c * v;
                }
                // Exact norms, not the running update alpha - t*gamma: on a rank-deficient
                // matrix a column rotates to ~0 and the running value loses all its digits,
                // which then corrupts the convergence test.
                norms[p] = dot(&cp_[..rp], &cp_[..rp]);
                norms[q] = dot(&cq[..rp], &cq[..rp]);
            }
        }
        if !rotated {
            converged = true;
            break;
        }
    }
    if !converged {
        return None;
    }
    let sigma = (0..cols)
        .map(|c| dot(&wz[c * ld..c * ld + rp], &wz[c * ld..c * ld + rp]).sqrt())
        .collect();
    Some(JacobiSvd { sigma, rp, ld, wz })
}
