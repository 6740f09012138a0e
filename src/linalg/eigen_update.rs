//! Low-rank modifications of a known symmetric eigendecomposition in `O(n²)` (plus `O(n³)`
//! basis products), used by ROMCO's Gram route (§5.5 b) on singleton rounds: the Gram matrix
//! `C = UᵀU` changes by a symmetric rank-two term when one column of U changes, and its
//! eigendecomposition from the last thresholding is known.
//!
//! [`diagonal_plus_rank_one`] is the rank-one eigenvalue problem `diag(d) + ρ v vᵀ` of Bunch,
//! Nielsen & Sorensen (Numer. Math. 31, 1978): deflation as in LAPACK's `dlaed2`, the roots of
//! the secular equation iterated together by a bracketed two-pole rational iteration (Gragg's
//! fixed-weight method, as in `dlaed4`) measured from the nearer pole, and the eigenvectors from the vector recomputed by the
//! Löwner formula (Gu & Eisenstat, SIAM J. Matrix Anal. Appl. 15, 1994), which keeps them
//! orthogonal to working precision however close the roots. [`column_update`] writes the Gram
//! change of `U + a eᵢᵀ` as two such steps.

use crate::linalg::simd::matmul;

/// Eigenvalues (unsorted) and eigenvectors: `vectors` is row-major `n x n`, its column `j` the
/// unit eigenvector of `values[j]`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Eigen {
    /// The eigenvalues, unsorted.
    pub values: Vec<f64>,
    /// Row-major `n x n`; column `j` is the unit eigenvector of `values[j]`.
    pub vectors: Vec<f64>,
}

/// Cap on the secular iterations of one root (they converge in a handful; bisection steps
/// guarantee progress).
const MAX_SECULAR_ITER: usize = 200;

/// A plane rotation of the coordinates `p < q`: `(c y_p - s y_q, s y_p + c y_q)`.
#[derive(Debug, Clone, Copy)]
struct Rotation {
    p: usize,
    q: usize,
    c: f64,
    s: f64,
}

impl Rotation {
    /// The rotation applied to every column of the row-major `n`-column `m` (rows p and q).
    fn apply_rows(&self, m: &mut [f64], n: usize) {
        let (head, tail) = m.split_at_mut(self.q * n);
        let row_p = &mut head[self.p * n..(self.p + 1) * n];
        let row_q = &mut tail[..n];
        for (yp, yq) in row_p.iter_mut().zip(row_q.iter_mut()) {
            let (a, b) = (*yp, *yq);
            *yp = self.c * a - self.s * b;
            *yq = self.s * a + self.c * b;
        }
    }
}

/// The eigendecomposition of `diag(d) + ρ v vᵀ`. `None` for non-finite input.
#[cfg(any(test, feature = "bench"))] // the learners use the solver form
pub fn diagonal_plus_rank_one(d: &[f64], rho: f64, v: &[f64]) -> Option<Eigen> {
    let n = d.len();
    let mut out = Eigen {
        values: vec![0.0; n],
        vectors: vec![0.0; n * n],
    };
    RankOneSolver::default().solve(d, rho, v, &mut out.values, &mut out.vectors)?;
    Some(out)
}

/// Reusable scratch for [`diagonal_plus_rank_one`], so that repeated solves do not allocate.
#[derive(Debug, Clone, Default)]
pub struct RankOneSolver {
    /// Sorted position `s` holds original coordinate `order[s]`.
    order: Vec<usize>,
    /// The sorted positions not deflated, by increasing `ds`.
    kept: Vec<usize>,
    deflated: Vec<bool>,
    /// Sorted (and deflation-rotated) diagonal, and the unit update vector, in sorted coordinates.
    ds: Vec<f64>,
    zs: Vec<f64>,
    /// The eigenvectors in sorted coordinates (row-major `n x n`) when deflation happened.
    y: Vec<f64>,
    /// The deflation rotations, in the order they were made.
    rotations: Vec<Rotation>,
    roots: Vec<SecularRoot>,
    scratch: Vec<f64>,
}

impl RankOneSolver {
    /// Writes the eigenvalues of `diag(d) + ρ v vᵀ` into `values` and the eigenvectors (row-major
    /// `n x n`, column `j` for `values[j]`) into `vectors`. `None` for non-finite input.
    pub fn solve(&mut self, d: &[f64], rho: f64, v: &[f64], values: &mut [f64], vectors: &mut [f64]) -> Option<()> {
        let n = d.len();
        assert!(
            v.len() == n && values.len() == n && vectors.len() == n * n,
            "inconsistent sizes"
        );
        if !rho.is_finite() || d.iter().chain(v).any(|x| !x.is_finite()) {
            return None;
        }
        let v_norm = v.iter().map(|x| x * x).sum::<f64>().sqrt();
        if rho == 0.0 || v_norm == 0.0 {
            values.copy_from_slice(d);
            vectors.fill(0.0);
            (0..n).for_each(|i| vectors[i * n + i] = 1.0);
            return Some(());
        }
        // ρ < 0: eig(D + ρvvᵀ) = -eig(-D + |ρ| vvᵀ), same vectors. Then ρ' = |ρ| ||v||², z = v/||v||.
        let sign = rho.signum();
        let r = rho.abs() * v_norm * v_norm;
        if !r.is_finite() {
            return None;
        }
        let RankOneSolver {
            order,
            kept,
            deflated,
            ds,
            zs,
            y,
            rotations,
            roots,
            scratch,
        } = self;
        order.clear();
        order.extend(0..n);
        order.sort_by(|&a, &b| (sign * d[a]).total_cmp(&(sign * d[b])));
        ds.clear();
        ds.extend(order.iter().map(|&i| sign * d[i]));
        zs.clear();
        zs.extend(order.iter().map(|&i| v[i] / v_norm));

        // Deflation (dlaed2): a negligible z component leaves its pair alone; two (nearly) equal
        // d are rotated so that one z component vanishes. Both perturb the matrix by at most `tol`.
        let d_max = ds.iter().fold(0.0f64, |a, &x| a.max(x.abs()));
        let tol = 8.0 * f64::EPSILON * d_max.max(r);
        rotations.clear();
        deflated.clear();
        deflated.resize(n, false);
        let mut previous: Option<usize> = None;
        for j in 0..n {
            if r * zs[j].abs() <= tol {
                deflated[j] = true;
                continue;
            }
            if let Some(p) = previous {
                // |t c s| <= tol with c = z_j/τ, s = -z_p/τ, τ² = z_p² + z_j² (no square root
                // unless the pair is deflated).
                let t = ds[j] - ds[p];
                let tau2 = zs[p] * zs[p] + zs[j] * zs[j];
                if (t * zs[j] * zs[p]).abs() <= tol * tau2 {
                    let tau = tau2.sqrt();
                    let (c, s) = (zs[j] / tau, -zs[p] / tau);
                    // Rotate (p, j) so z_p = 0; the off-diagonal t c s it leaves is dropped.
                    zs[j] = tau;
                    zs[p] = 0.0;
                    let (dp, dj) = (ds[p], ds[j]);
                    ds[p] = dp * c * c + dj * s * s;
                    ds[j] = dp * s * s + dj * c * c;
                    rotations.push(Rotation { p, q: j, c, s });
                    deflated[p] = true;
                }
            }
            previous = Some(j);
        }
        kept.clear();
        kept.extend((0..n).filter(|&j| !deflated[j]));
        kept.sort_by(|&a, &b| ds[a].total_cmp(&ds[b]));

        let kk = kept.len();
        // Without deflation every column goes straight to its place; otherwise the columns are
        // gathered in sorted coordinates (`sorted`, row-major n x n, row s = sorted position s),
        // rotated back row pair by row pair and moved to their rows in one pass at the end
        // ([`Columns::finish`]): the same arithmetic per entry as rotating each column alone.
        let plain = kk == n && rotations.is_empty();
        let out = Columns { order, rotations };
        if !plain {
            y.clear();
            y.resize(n * n, 0.0);
            for j in (0..n).filter(|&j| deflated[j]) {
                y[j * n + j] = 1.0;
                values[j] = sign * ds[j];
            }
        }
        if kk == 0 {
            out.finish(y, vectors);
            return Some(());
        }
        // Scratch for the kk non-deflated pairs: the poles dk (ascending), the weights r z², the
        // roots, the Löwner z, two work rows, and per root a row of 1/(dk[m] - λ_j) and of
        // shifted poles.
        // Every entry is written before it is read (rows of `base` by `shift`, of `inv_delta` by
        // each evaluation), so the buffer is only grown, not cleared.
        let size = kk * (2 * kk + 6);
        scratch.resize(scratch.len().max(size), 0.0);
        let (dk, rest) = scratch[..size].split_at_mut(kk);
        let (z2, rest) = rest.split_at_mut(kk);
        let (lambda, rest) = rest.split_at_mut(kk);
        let (z_hat, rest) = rest.split_at_mut(kk);
        let (factor, rest) = rest.split_at_mut(kk);
        let (prod, rest) = rest.split_at_mut(kk);
        let (base, inv_delta) = rest.split_at_mut(kk * kk);
        for (m, &pos) in kept.iter().enumerate() {
            dk[m] = ds[pos];
            z2[m] = r * zs[pos] * zs[pos];
        }
        secular_roots(dk, z2, base, inv_delta, lambda, roots)?;
        // Löwner: the z for which the computed λ are exact eigenvalues (Gu & Eisenstat):
        // r z_i² = (λ_i - d_i) Π_{j≠i} (λ_j - d_i)/(d_j - d_i), every factor positive by
        // interlacing; with λ_j - d_i = -1/inv_delta[j][i], r z_i² = 1/Π_j p_ij for
        // p_ii = -inv_delta[i][i] and p_ij = -inv_delta[j][i] (d_j - d_i). The products run over
        // j with all i at once (rows of inv_delta are contiguous in i: vectorisable).
        prod.fill(1.0);
        for j in 0..kk {
            factor.iter_mut().zip(dk.iter()).for_each(|(f, &d)| *f = d - dk[j]);
            factor[j] = -1.0;
            let row = &inv_delta[j * kk..(j + 1) * kk];
            for ((p, &f), &inv) in prod.iter_mut().zip(factor.iter()).zip(row) {
                *p *= inv * f;
            }
        }
        for i in 0..kk {
            let r_z2 = if prod[i].is_finite() && prod[i] > 0.0 {
                1.0 / (r * prod[i])
            } else {
                // Over- or underflow of the plain product (extreme scales): redo it rescaled.
                let mut scaled = ScaledProduct::default();
                for j in 0..kk {
                    let inv = inv_delta[j * kk + i];
                    scaled.mul(if j == i { -inv } else { -inv * (dk[j] - dk[i]) });
                }
                scaled.reciprocal_over(r)
            };
            z_hat[i] = r_z2.max(0.0).sqrt().copysign(zs[kept[i]]);
        }
        // Eigenvectors u_j ∝ z_hat / (dk - λ_j) = z_hat ⊙ inv_delta[j].
        for j in 0..kk {
            let row = &inv_delta[j * kk..(j + 1) * kk];
            let norm2: f64 = z_hat.iter().zip(row).map(|(z, v)| (z * v) * (z * v)).sum();
            let scale = 1.0 / norm2.sqrt();
            if !scale.is_finite() {
                return None;
            }
            let col = kept[j];
            values[col] = sign * lambda[j];
            if plain {
                for (m, &pos) in kept.iter().enumerate() {
                    vectors[order[pos] * n + col] = z_hat[m] * row[m] * scale;
                }
            } else {
                for (m, &pos) in kept.iter().enumerate() {
                    y[pos * n + col] = z_hat[m] * row[m] * scale;
                }
            }
        }
        if !plain {
            out.finish(y, vectors);
        }
        Some(())
    }
}

/// Writes the eigenvectors of a [`RankOneSolver::solve`] result that deflated.
struct Columns<'a> {
    order: &'a [usize],
    rotations: &'a [Rotation],
}

impl Columns<'_> {
    /// The eigenvectors from `sorted` (row-major `n x n`, row s for sorted position s, in
    /// sorted coordinates before the deflation rotations): the rotations undone on row pairs
    /// (last first), then row s written to row `order[s]` of `vectors`.
    fn finish(&self, sorted: &mut [f64], vectors: &mut [f64]) {
        let n = self.order.len();
        for rot in self.rotations.iter().rev() {
            rot.apply_rows(sorted, n);
        }
        for (row, &orig) in sorted.chunks_exact(n).zip(self.order.iter()) {
            vectors[orig * n..(orig + 1) * n].copy_from_slice(row);
        }
    }
}

/// A product of positive factors kept as `mantissa · 10^exponent`, so that long products of
/// large or small factors neither overflow nor underflow.
#[derive(Default)]
struct ScaledProduct {
    mantissa: Option<f64>,
    exponent: i32,
}

impl ScaledProduct {
    fn mul(&mut self, factor: f64) {
        let mut m = self.mantissa.unwrap_or(1.0) * factor;
        if m > 1e150 {
            m *= 1e-150;
            self.exponent += 150;
        } else if m < 1e-150 && m > 0.0 {
            m *= 1e150;
            self.exponent -= 150;
        }
        self.mantissa = Some(m);
    }

    /// `1 / (r · product)`.
    fn reciprocal_over(&self, r: f64) -> f64 {
        let m = self.mantissa.unwrap_or(1.0);
        (1.0 / (r * m)) * 10f64.powi(-self.exponent)
    }
}

/// The roots `λ_j` of the secular equation `1 + Σ_m z2[m] / (dk[m] - λ) = 0` (`dk` strictly
/// increasing, `z2 > 0`): root `j` lies in `(dk[j], dk[j+1])`, the last above `dk[last]`. Each is
/// found as `λ = dk[origin] + τ` from its nearer pole, so that `dk[m] - λ = (dk[m] - dk[origin]) - τ`
/// is accurate; row `j` of `inv` receives `1/(dk[m] - λ_j)` (row `j` of `base` is scratch).
/// The roots iterate together, one step each per sweep: their steps are independent, so the
/// processor overlaps them instead of waiting out each root's chain of divisions.
/// `None` if an iteration breaks down.
#[inline(always)]
fn secular_roots(
    dk: &[f64],
    z2: &[f64],
    base: &mut [f64],
    inv: &mut [f64],
    lambda: &mut [f64],
    roots: &mut Vec<SecularRoot>,
) -> Option<()> {
    let kk = dk.len();
    roots.clear();
    roots.extend((0..kk).map(|j| SecularRoot::start(dk, z2, j)));
    for (j, root) in roots.iter().enumerate() {
        root.shift(dk, &mut base[j * kk..(j + 1) * kk]);
    }
    let mut pending = kk;
    for _ in 0..MAX_SECULAR_ITER {
        for (j, root) in roots.iter_mut().enumerate().filter(|(_, r)| !r.done) {
            let rows = j * kk..(j + 1) * kk;
            root.step(dk, z2, &mut base[rows.clone()], &mut inv[rows])?;
            pending -= usize::from(root.done);
        }
        if pending == 0 {
            break;
        }
    }
    for (j, root) in roots.iter_mut().enumerate() {
        if !root.done {
            // The cap was hit: the root is known to the bracket's width.
            let rows = j * kk..(j + 1) * kk;
            root.finish_at(root.tau.clamp(root.lo, root.hi), &base[rows.clone()], &mut inv[rows])?;
        }
        lambda[j] = dk[root.origin] + root.tau;
    }
    Some(())
}

/// The iteration state of one secular root: `λ = dk[origin] + τ`, bracketed by `lo < τ < hi`.
#[derive(Debug, Clone)]
struct SecularRoot {
    j: usize,
    /// The pole `τ` is measured from: the nearer end of the interval to the current `τ`.
    origin: usize,
    lo: f64,
    hi: f64,
    tau: f64,
    /// No step taken yet: the first uses the initial-guess model.
    initial: bool,
    done: bool,
}

impl SecularRoot {
    /// Starts from the zero of `1 + z2_j/(d_j - λ) + z2_{j+1}/(d_{j+1} - λ)` (the two poles of
    /// the interval alone; `1 + z2_j/(d_j - λ)` for the last root, whose interval is
    /// `(dk[last], dk[last] + Σ z2)`), measured from the nearer pole.
    fn start(dk: &[f64], z2: &[f64], j: usize) -> Self {
        let last = j + 1 == dk.len();
        if last {
            let hi = z2.iter().sum::<f64>();
            let tau = z2[j].min(0.5 * hi);
            return Self {
                j,
                origin: j,
                lo: 0.0,
                hi,
                tau,
                initial: true,
                done: false,
            };
        }
        let gap = dk[j + 1] - dk[j];
        // τ² - (gap + z2_j + z2_k) τ + z2_j gap = 0, the root in (0, gap), in stable form.
        let b = gap + z2[j] + z2[j + 1];
        let disc = (b * b - 4.0 * z2[j] * gap).max(0.0);
        let tau = 2.0 * z2[j] * gap / (b + disc.sqrt());
        let mut root = Self {
            j,
            origin: j,
            lo: 0.0,
            hi: gap,
            tau: if tau > 0.0 && tau < gap { tau } else { 0.5 * gap },
            initial: true,
            done: false,
        };
        root.rebase(dk);
        root
    }

    /// Measures `τ` from the nearer pole of the interval (switching when it crosses the middle),
    /// so that the distances to both poles stay accurate. Returns true if the origin changed.
    fn rebase(&mut self, dk: &[f64]) -> bool {
        let j = self.j;
        if j + 1 == dk.len() {
            return false;
        }
        let gap = dk[j + 1] - dk[j];
        let (shift, origin) = match self.origin == j {
            true if self.tau > 0.5 * gap => (-gap, j + 1),
            false if self.tau < -0.5 * gap => (gap, j),
            _ => return false,
        };
        self.origin = origin;
        self.tau += shift;
        self.lo += shift;
        self.hi += shift;
        true
    }

    /// `base[m] = dk[m] - dk[origin]`.
    fn shift(&self, dk: &[f64], base: &mut [f64]) {
        base.iter_mut().zip(dk).for_each(|(b, &d)| *b = d - dk[self.origin]);
    }

    /// One evaluation of the secular function at `τ` and the next `τ`; sets `done` (with `inv`
    /// holding `1/(dk[m] - λ)`) on convergence.
    #[inline(always)]
    fn step(&mut self, dk: &[f64], z2: &[f64], base: &mut [f64], inv: &mut [f64]) -> Option<()> {
        let (j, kk) = (self.j, dk.len());
        let last = j + 1 == kk;
        let tau = self.tau;
        // ψ: the poles at or left of root j, φ: those right of it; values and derivatives.
        inv.iter_mut().zip(base.iter()).for_each(|(v, &b)| *v = 1.0 / (b - tau));
        let (psi, dpsi) = weighted_sums(&z2[..=j], &inv[..=j]);
        let (phi, dphi) = weighted_sums(&z2[j + 1..], &inv[j + 1..]);
        let w = 1.0 + psi + phi;
        if !w.is_finite() {
            return None;
        }
        // Rounding in w is about n ε times the magnitude of its terms.
        if w.abs() <= 4.0 * kk as f64 * f64::EPSILON * (1.0 + psi.abs() + phi.abs()) {
            self.done = true;
            return Some(());
        }
        // f is increasing in λ between poles: w < 0 means the root is to the right.
        if w < 0.0 {
            self.lo = self.lo.max(tau);
        } else {
            self.hi = self.hi.min(tau);
        }
        let (lo, hi) = (self.lo, self.hi);
        if hi - lo <= 2.0 * f64::EPSILON * lo.abs().max(hi.abs()) {
            return self.finish_at(0.5 * (lo + hi), base, inv);
        }
        // The model: the nearest pole(s) plus a constant. The first step gives the nearest poles
        // their true weights and the others' value as the constant, as LAPACK's dlaed4 does for
        // its initial guess; later steps match the derivatives of both sides instead (fixed
        // weight method), which converges quadratically.
        let delta_j = base[j] - tau;
        let step = if std::mem::take(&mut self.initial) {
            let near_j = z2[j] * inv[j];
            match last {
                true => pole_model_zero(w - near_j, z2[j], delta_j, None),
                false => {
                    let near_k = z2[j + 1] * inv[j + 1];
                    pole_model_zero(
                        w - near_j - near_k,
                        z2[j],
                        delta_j,
                        Some((z2[j + 1], base[j + 1] - tau)),
                    )
                }
            }
        } else {
            let next = (!last).then(|| {
                let delta_k = base[j + 1] - tau;
                (delta_k * delta_k * dphi, delta_k)
            });
            let slope_k = if last { 0.0 } else { dphi };
            let slope_j = if last { dpsi + dphi } else { dpsi };
            let c = w - delta_j * slope_j - next.map_or(0.0, |(_, dk)| dk * slope_k);
            pole_model_zero(c, delta_j * delta_j * slope_j, delta_j, next)
        };
        self.tau = match step.map(|eta| tau + eta) {
            Some(t) if t > lo && t < hi => t,
            _ => 0.5 * (lo + hi),
        };
        if self.rebase(dk) {
            self.shift(dk, base);
        }
        Some(())
    }

    /// Stops at `τ` (the bracket collapsed): `inv` for that point.
    fn finish_at(&mut self, tau: f64, base: &[f64], inv: &mut [f64]) -> Option<()> {
        self.tau = tau;
        self.done = true;
        inv.iter_mut().zip(base).for_each(|(v, &b)| *v = 1.0 / (b - tau));
        inv.iter().all(|v| v.is_finite()).then_some(())
    }
}

/// `(Σ w_m v_m, Σ w_m v_m²)` in four independent lanes (vectorisable).
#[inline(always)]
fn weighted_sums(w: &[f64], v: &[f64]) -> (f64, f64) {
    let (mut sum, mut slope) = ([0.0f64; 4], [0.0f64; 4]);
    let (wc, vc) = (w.chunks_exact(4), v.chunks_exact(4));
    let (wr, vr) = (wc.remainder(), vc.remainder());
    for (a, b) in wc.zip(vc) {
        for l in 0..4 {
            let t = a[l] * b[l];
            sum[l] += t;
            slope[l] += t * b[l];
        }
    }
    let (mut s, mut sl) = (
        (sum[0] + sum[1]) + (sum[2] + sum[3]),
        (slope[0] + slope[1]) + (slope[2] + slope[3]),
    );
    for (a, b) in wr.iter().zip(vr) {
        let t = a * b;
        s += t;
        sl += t * b;
    }
    (s, sl)
}

/// The zero `η` between the poles of the model `c + s_j/(Δ_j - η) + s_k/(Δ_k - η)` (one pole
/// when `next` is `None`), from the quadratic `c η² - A η + B = 0` in the stable form of
/// LAPACK's dlaed4. `None` when it has no real zero (the caller bisects).
#[inline(always)]
fn pole_model_zero(c: f64, s_j: f64, delta_j: f64, next: Option<(f64, f64)>) -> Option<f64> {
    match next {
        Some((s_k, delta_k)) => {
            let a = c * (delta_j + delta_k) + s_j + s_k;
            let b = c * delta_j * delta_k + s_j * delta_k + s_k * delta_j;
            if c == 0.0 {
                return (a != 0.0).then(|| b / a);
            }
            let disc = a * a - 4.0 * b * c;
            if disc < 0.0 {
                return None;
            }
            let root = disc.sqrt();
            Some(if a <= 0.0 {
                (a - root) / (2.0 * c)
            } else {
                2.0 * b / (a + root)
            })
        }
        // c + s/(Δ - η) = 0.
        None => (c != 0.0).then(|| delta_j + s_j / c),
    }
}

/// The eigendecomposition of `Ĉ = C + g eᵢᵀ + eᵢ gᵀ + α eᵢeᵢᵀ` given `C = Z diag(mu) Zᵀ`
/// (`z` row-major `n x n`, orthogonal): the Gram matrix of `U + a eᵢᵀ` when `C = UᵀU`,
/// `g = Uᵀa` and `α = ||a||²`. See [`ColumnUpdater::update`]. `None` for non-finite input.
#[cfg(any(test, feature = "bench"))] // the learners use ColumnUpdater
pub fn column_update(z: &[f64], mu: &[f64], i: usize, g: &[f64], alpha: f64) -> Option<Eigen> {
    let mut out = Eigen::default();
    ColumnUpdater::default().update(z, mu, i, g, alpha, &mut out)?;
    Some(out)
}

/// The direction `e` of a Gram change: a coordinate vector `eᵢ` (its image `Zᵀeᵢ` is row i
/// of Z) or any vector.
#[derive(Clone, Copy)]
enum Basis<'a> {
    Row(usize),
    Vector(&'a [f64]),
}

/// Reusable scratch for [`column_update`], so that an update per example does not allocate.
#[derive(Debug, Clone, Default)]
pub struct ColumnUpdater {
    solver: RankOneSolver,
    /// ĝ, q1, q2, v₊, v₋, W₁ᵀv₋ and ê (n each).
    vectors: Vec<f64>,
    /// The first rank-one step's result, and a product buffer.
    first: Eigen,
    product: Vec<f64>,
}

impl ColumnUpdater {
    /// Writes the eigendecomposition of `Ĉ = Z diag(mu) Zᵀ + g eᵢᵀ + eᵢ gᵀ + α eᵢeᵢᵀ` into
    /// `out`. The change is `μ₊ v₊v₊ᵀ + μ₋ v₋v₋ᵀ` (the eigenpairs of its 2 x 2 restriction to
    /// `span(Zᵀeᵢ, Zᵀg)` in the eigenbasis), applied as two rank-one steps; `O(n³)` for the two
    /// basis products, `O(n²)` otherwise. `None` for non-finite input.
    pub fn update(&mut self, z: &[f64], mu: &[f64], i: usize, g: &[f64], alpha: f64, out: &mut Eigen) -> Option<()> {
        let n = mu.len();
        assert!(z.len() == n * n && i < n);
        self.update_in_basis(z, mu, Basis::Row(i), g, alpha, out)
    }

    /// Writes the eigendecomposition of `D̂ = Z diag(mu) Zᵀ + g eᵀ + e gᵀ + α e eᵀ` into `out`
    /// for any vector `e` (not only a coordinate vector): with `D = UUᵀ`, `g = Ue_t` (column
    /// t of U) and `α = 1`, `D̂` is the Gram matrix `ÛÛᵀ` of the rows of `Û = U + e e_tᵀ`,
    /// the change ROMCO's row-side Gram route (wide U) sees. Same cost as [`Self::update`].
    pub fn update_vector(
        &mut self,
        z: &[f64],
        mu: &[f64],
        e: &[f64],
        g: &[f64],
        alpha: f64,
        out: &mut Eigen,
    ) -> Option<()> {
        let n = mu.len();
        assert!(z.len() == n * n && e.len() == n);
        self.update_in_basis(z, mu, Basis::Vector(e), g, alpha, out)
    }

    fn update_in_basis(
        &mut self,
        z: &[f64],
        mu: &[f64],
        e: Basis,
        g: &[f64],
        alpha: f64,
        out: &mut Eigen,
    ) -> Option<()> {
        let n = mu.len();
        assert!(g.len() == n);
        self.vectors.clear();
        self.vectors.resize(7 * n, 0.0);
        let (g_hat, rest) = self.vectors.split_at_mut(n);
        let (q1, rest) = rest.split_at_mut(n);
        let (q2, rest) = rest.split_at_mut(n);
        let (v_big, rest) = rest.split_at_mut(n);
        let (v_small, rest) = rest.split_at_mut(n);
        let (v2, e_rotated) = rest.split_at_mut(n);
        // In the eigenbasis: ê = Zᵀe (row i of Z for e = eᵢ), ĝ = Zᵀg.
        for (row, &gr) in z.chunks_exact(n).zip(g) {
            g_hat.iter_mut().zip(row).for_each(|(o, &zr)| *o += zr * gr);
        }
        let e_hat: &[f64] = match e {
            Basis::Row(i) => &z[i * n..(i + 1) * n],
            Basis::Vector(e) => {
                for (row, &er) in z.chunks_exact(n).zip(e) {
                    e_rotated.iter_mut().zip(row).for_each(|(o, &zr)| *o += zr * er);
                }
                e_rotated
            }
        };
        // Orthonormal q1 ∝ ê, q2 ∝ ĝ - (ĝ·q1) q1: the change is [[2be + αe², eh], [eh, 0]] there.
        let e = e_hat.iter().map(|x| x * x).sum::<f64>().sqrt();
        if !e.is_finite() {
            return None;
        }
        if e == 0.0 {
            // e = 0 (a zero row, or a coordinate vector outside the basis): nothing changes.
            resize(out, n);
            out.values.copy_from_slice(mu);
            out.vectors.copy_from_slice(z);
            return Some(());
        }
        q1.iter_mut().zip(e_hat).for_each(|(q, x)| *q = x / e);
        let b: f64 = g_hat.iter().zip(q1.iter()).map(|(x, y)| x * y).sum();
        q2.iter_mut()
            .zip(g_hat.iter().zip(q1.iter()))
            .for_each(|(q, (x, y))| *q = x - b * y);
        let h = q2.iter().map(|x| x * x).sum::<f64>().sqrt();
        let g_norm = g_hat.iter().map(|x| x * x).sum::<f64>().sqrt();
        let p = 2.0 * b * e + alpha * e * e;
        let o = if h > 8.0 * f64::EPSILON * g_norm { e * h } else { 0.0 };
        if o != 0.0 {
            q2.iter_mut().for_each(|x| *x /= h);
        }
        // Eigenpairs of [[p, o], [o, 0]]: the larger-magnitude one directly, the other from
        // μ₊μ₋ = -o² and orthogonality (no cancellation).
        let half = 0.5 * p;
        let big = if half >= 0.0 {
            half + half.hypot(o)
        } else {
            half - half.hypot(o)
        };
        let small = if big != 0.0 { -o * o / big } else { 0.0 };
        let (bc, bs) = {
            let nrm = big.hypot(o);
            if nrm > 0.0 {
                (big / nrm, o / nrm)
            } else {
                (1.0, 0.0)
            }
        };
        for r in 0..n {
            v_big[r] = bc * q1[r] + bs * q2[r];
            v_small[r] = -bs * q1[r] + bc * q2[r];
        }
        resize(&mut self.first, n);
        resize(out, n);
        self.solver
            .solve(mu, big, v_big, &mut self.first.values, &mut self.first.vectors)?;
        if small == 0.0 || o == 0.0 {
            out.values.copy_from_slice(&self.first.values);
            multiply_into(z, &self.first.vectors, n, &mut out.vectors);
            return Some(());
        }
        // v₋ in the eigenbasis of the first step: W₁ᵀ v₋; then Z W₁ W₂.
        for (row, &vr) in self.first.vectors.chunks_exact(n).zip(v_small.iter()) {
            v2.iter_mut().zip(row).for_each(|(o, &w)| *o += w * vr);
        }
        self.product.resize(n * n, 0.0);
        self.solver
            .solve(&self.first.values, small, v2, &mut out.values, &mut self.product)?;
        multiply_into(&self.first.vectors, &self.product, n, &mut out.vectors);
        multiply_into(z, &out.vectors, n, &mut self.product);
        std::mem::swap(&mut out.vectors, &mut self.product);
        Some(())
    }
}

fn resize(e: &mut Eigen, n: usize) {
    e.values.resize(n, 0.0);
    e.vectors.resize(n * n, 0.0);
}

/// `out = A B` for row-major `n x n` matrices.
fn multiply_into(a: &[f64], b: &[f64], n: usize, out: &mut [f64]) {
    matmul(a, b, n, n, n, out);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SplitMix64;
    use nalgebra::{DMatrix, SymmetricEigen};

    fn identity(n: usize) -> Vec<f64> {
        let mut m = vec![0.0; n * n];
        (0..n).for_each(|i| m[i * n + i] = 1.0);
        m
    }

    fn uniform(rng: &mut SplitMix64) -> f64 {
        (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
    }

    /// `max |V diag(λ) Vᵀ - A| / ||A||` and `max |VᵀV - I|`.
    fn residuals(a: &[f64], eig: &Eigen, n: usize) -> (f64, f64) {
        let scale = a.iter().map(|x| x * x).sum::<f64>().sqrt().max(1e-300);
        let (mut rec, mut orth) = (0.0f64, 0.0f64);
        for i in 0..n {
            for j in 0..n {
                let r: f64 = (0..n)
                    .map(|c| eig.vectors[i * n + c] * eig.values[c] * eig.vectors[j * n + c])
                    .sum();
                rec = rec.max((r - a[i * n + j]).abs() / scale);
                let o: f64 = (0..n).map(|r| eig.vectors[r * n + i] * eig.vectors[r * n + j]).sum();
                orth = orth.max((o - if i == j { 1.0 } else { 0.0 }).abs());
            }
        }
        (rec, orth)
    }

    fn sorted(mut v: Vec<f64>) -> Vec<f64> {
        v.sort_by(f64::total_cmp);
        v
    }

    fn check_rank_one(d: &[f64], rho: f64, v: &[f64]) {
        let n = d.len();
        let mut a = vec![0.0; n * n];
        for i in 0..n {
            a[i * n + i] = d[i];
            for j in 0..n {
                a[i * n + j] += rho * v[i] * v[j];
            }
        }
        let eig = diagonal_plus_rank_one(d, rho, v).expect("finite input");
        let (rec, orth) = residuals(&a, &eig, n);
        assert!(rec < 1e-13, "reconstruction {rec:e} for d={d:?} rho={rho} v={v:?}");
        assert!(orth < 1e-13, "orthogonality {orth:e}");
        let want: Vec<f64> = SymmetricEigen::new(DMatrix::from_row_slice(n, n, &a))
            .eigenvalues
            .iter()
            .copied()
            .collect();
        let scale = a.iter().fold(0.0f64, |m, x| m.max(x.abs()));
        for (g, w) in sorted(eig.values.clone()).iter().zip(sorted(want)) {
            assert!((g - w).abs() <= 1e-13 * scale.max(1.0), "{g} vs {w}");
        }
    }

    #[test]
    fn random_rank_one_updates_match_a_dense_solver() {
        let mut rng = SplitMix64::new(7);
        for n in [1, 2, 3, 5, 12, 30] {
            for _ in 0..20 {
                let d: Vec<f64> = (0..n).map(|_| 10.0 * uniform(&mut rng)).collect();
                let v: Vec<f64> = (0..n).map(|_| uniform(&mut rng)).collect();
                let rho = 5.0 * uniform(&mut rng);
                check_rank_one(&d, rho, &v);
            }
        }
    }

    #[test]
    fn deflation_cases() {
        // Equal and nearly equal d, zero and tiny components of v, widely spread scales.
        check_rank_one(&[1.0, 1.0, 1.0, 2.0], 0.7, &[0.3, -0.5, 0.2, 0.1]);
        check_rank_one(&[1.0, 1.0 + 1e-15, 3.0, 4.0], -2.0, &[0.6, 0.6, 0.3, 0.0]);
        check_rank_one(&[0.0, 1e-12, 5.0, 1e4], 3.0, &[1e-20, 0.5, 0.0, 0.5]);
        check_rank_one(&[4.0, 3.0, 2.0, 1.0], 1e-18, &[1.0, 1.0, 1.0, 1.0]);
        check_rank_one(&[2.0, -1.0, 7.0], 1e6, &[0.1, 0.2, 0.3]);
        check_rank_one(&[0.0; 5], 1.0, &[1.0, 2.0, 3.0, 4.0, 5.0]);
        check_rank_one(&[1.0, 2.0], 0.0, &[1.0, 1.0]);
        // Clustered spectrum with a large update: roots pressed against the poles.
        let d: Vec<f64> = (0..12).map(|i| 100.0 + 1e-9 * i as f64).collect();
        check_rank_one(&d, 50.0, &[0.3; 12]);
    }

    #[test]
    fn non_finite_input_is_refused() {
        assert!(diagonal_plus_rank_one(&[1.0, f64::NAN], 1.0, &[1.0, 1.0]).is_none());
        assert!(diagonal_plus_rank_one(&[1.0, 2.0], f64::INFINITY, &[1.0, 1.0]).is_none());
    }

    /// The Gram matrix of `U + a eᵢᵀ` from the eigendecomposition of `UᵀU`.
    #[test]
    fn column_update_matches_the_gram_of_the_changed_matrix() {
        let mut rng = SplitMix64::new(11);
        for &(d, k, scale_a) in &[(40, 6, 1.0), (400, 12, 0.05), (30, 12, 10.0), (5, 3, 1.0)] {
            let u: Vec<f64> = (0..d * k).map(|_| uniform(&mut rng)).collect(); // column-major
            let gram = |m: &[f64]| -> Vec<f64> {
                let mut c = vec![0.0; k * k];
                for i in 0..k {
                    for j in 0..k {
                        c[i * k + j] = (0..d).map(|r| m[i * d + r] * m[j * d + r]).sum();
                    }
                }
                c
            };
            let c = gram(&u);
            let eig = SymmetricEigen::new(DMatrix::from_row_slice(k, k, &c));
            let z: Vec<f64> = (0..k * k).map(|idx| eig.eigenvectors[(idx / k, idx % k)]).collect();
            let mu: Vec<f64> = eig.eigenvalues.iter().copied().collect();
            for i in [0, k - 1, k / 2] {
                let a: Vec<f64> = (0..d).map(|_| scale_a * uniform(&mut rng)).collect();
                let g: Vec<f64> = (0..k).map(|j| (0..d).map(|r| u[j * d + r] * a[r]).sum()).collect();
                let alpha: f64 = a.iter().map(|x| x * x).sum();
                let mut changed = u.clone();
                changed[i * d..(i + 1) * d]
                    .iter_mut()
                    .zip(&a)
                    .for_each(|(x, y)| *x += y);
                let want = gram(&changed);
                let got = column_update(&z, &mu, i, &g, alpha).expect("finite");
                let (rec, orth) = residuals(&want, &got, k);
                assert!(rec < 1e-13 && orth < 1e-13, "d={d} k={k} i={i}: {rec:e} {orth:e}");
            }
        }
    }

    /// The Gram matrix of the rows, `ÛÛᵀ` for `Û = U + a e_tᵀ`, from the eigendecomposition of
    /// `UUᵀ` (wide U, rank-deficient included, and a zero step).
    #[test]
    fn vector_update_matches_the_row_gram_of_the_changed_matrix() {
        let mut rng = SplitMix64::new(12);
        for &(d, k, rank, scale_a) in &[(6, 20, 6, 1.0), (28, 139, 23, 0.1), (5, 9, 3, 10.0), (4, 7, 4, 0.0)] {
            // U = A B with A d x rank, B rank x k (column-major U): rank-deficient when rank < d.
            let a_f: Vec<f64> = (0..d * rank).map(|_| uniform(&mut rng)).collect();
            let b_f: Vec<f64> = (0..rank * k).map(|_| uniform(&mut rng)).collect();
            let u: Vec<f64> = (0..d * k)
                .map(|idx| {
                    (0..rank)
                        .map(|c| a_f[(idx % d) * rank + c] * b_f[c * k + idx / d])
                        .sum()
                })
                .collect();
            let row_gram = |m: &[f64]| -> Vec<f64> {
                let mut g = vec![0.0; d * d];
                for r in 0..d {
                    for s in 0..d {
                        g[r * d + s] = (0..k).map(|j| m[j * d + r] * m[j * d + s]).sum();
                    }
                }
                g
            };
            let eig = SymmetricEigen::new(DMatrix::from_row_slice(d, d, &row_gram(&u)));
            let z: Vec<f64> = (0..d * d).map(|idx| eig.eigenvectors[(idx / d, idx % d)]).collect();
            let mu: Vec<f64> = eig.eigenvalues.iter().copied().collect();
            for t in [0, k - 1, k / 2] {
                // A step inside the column space of U (as ROMCO's rows are in School's span).
                let w: Vec<f64> = (0..rank).map(|_| scale_a * uniform(&mut rng)).collect();
                let a: Vec<f64> = (0..d)
                    .map(|r| (0..rank).map(|c| a_f[r * rank + c] * w[c]).sum())
                    .collect();
                let column = u[t * d..(t + 1) * d].to_vec();
                let mut changed = u.clone();
                changed[t * d..(t + 1) * d]
                    .iter_mut()
                    .zip(&a)
                    .for_each(|(x, y)| *x += y);
                let mut got = Eigen::default();
                ColumnUpdater::default()
                    .update_vector(&z, &mu, &a, &column, 1.0, &mut got)
                    .expect("finite");
                let (rec, orth) = residuals(&row_gram(&changed), &got, d);
                assert!(rec < 1e-13 && orth < 1e-13, "d={d} k={k} t={t}: {rec:e} {orth:e}");
            }
        }
    }

    /// A column that moves exactly along ê (g ∥ eᵢ in the eigenbasis) is a rank-one change.
    #[test]
    fn column_update_of_a_diagonal_gram() {
        let (z, mu) = (identity(3), vec![4.0, 1.0, 9.0]);
        let got = column_update(&z, &mu, 1, &[0.0, 2.0, 0.0], 1.0).unwrap();
        for (g, w) in sorted(got.values).iter().zip([4.0, 6.0, 9.0]) {
            assert!((g - w).abs() < 1e-14 * 9.0, "{g} vs {w}"); // 6 = 1 + 2·2 + 1
        }
    }
}
