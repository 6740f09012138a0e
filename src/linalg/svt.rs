//! Singular value thresholding (SVT) of a tall `d x k` matrix, the proximal step of ROMCO's
//! trace-norm term (ALGORITHMS.md §5.3, §5.5; Cai, Candès & Shen, SIAM J. Optim. 2010).
//!
//! `SVT_θ(M) = P diag((σ - θ)_+) Qᵀ` for the thin SVD `M = P diag(σ) Qᵀ`. With `k << d` it is
//! applied as a right multiplication `M Π` by the `k x k` matrix `Π = Q diag(π) Qᵀ`,
//! `π_r = (1 - θ/σ_r)_+`, which needs only the right singular vectors and the singular values:
//!
//! - route (b), [`gram_route`]: eigendecomposition of the Gram matrix `Ĉ = MᵀM` (which ROMCO
//!   maintains in `O(k nnz)` per update), `σ_r = sqrt(λ_r)`; `None` when the eigenvalues are
//!   not accurate enough for the threshold ([`gram_route_accurate`]: `θ < 10⁻⁶ σ_max`, the first
//!   fallback case of §5.5, and an eigenvalue below `10³ (θ/σ_max) λ_max`, our sharpening).
//!   [`gram_route_from_eigen`] does the same from an eigendecomposition at hand (ROMCO updates
//!   it per example: `linalg::eigen_update`);
//! - route (a), [`qr_route`]: the `R` factor of a Householder QR of `M` (computed block by block,
//!   TSQR, so no second `d x k` matrix is ever held) and the SVD of the small `R = W Σ Zᵀ`. Then
//!   `Q_R W diag((σ-θ)_+) Zᵀ = M Z diag(π) Zᵀ`, so route (a) too ends in `M Π`, with σ and Z
//!   as accurate as the QR;
//! - `svt_explicit`: the literal (a) of §5.5, forming `Q_R` (used by tests only: it holds
//!   extra `d x k` matrices).
//!
//! Matrices of size `d x k` are column-major slices (column `c` is `m[c*d..(c+1)*d]`); the
//! small `k x k` matrices are row-major.

use nalgebra::{DMatrix, SymmetricEigen, SVD};

use crate::linalg::column_to_row_major;
use crate::linalg::simd::{dense_dot, dot4, fma_builds, matmul, Lanes};

/// Rows per block in the blocked QR kernel.
const BLOCK: usize = 512;

/// Relative floor under which a singular value of the result counts as zero for the rank.
pub const RANK_TOL: f64 = 1e-12;

/// Route (b) is used when `θ >= GRAM_MIN_THETA * σ_max` (§5.5, first fallback case) ...
pub const GRAM_MIN_THETA: f64 = 1e-6;

/// ... or, below that threshold, when the spectrum is well enough conditioned that no
/// eigenvalue is inaccurate: `λ_min >= GRAM_MIN_CONDITION (θ/σ_max) λ_max` (docs/DECISIONS.md).
/// A relative error `δ` of `Ĉ` moves `Û f(Ĉ)` (`f(λ) = 1 - θ/√λ`) by at most
/// `θ δ λ_max / λ_min` (first order, divided differences of `f`), i.e. by
/// `(θ/σ_max) δ (λ_max/λ_min)` relative to `σ_max`. With `δ = 10⁻⁸` (the drift a resync
/// tolerates, `learner::romco`) this constant keeps that below `10⁻¹¹`, two orders
/// under INV-R4's `10⁻⁹`.
pub const GRAM_MIN_CONDITION: f64 = 1e3;

/// Upper bound on the iterations of the small eigen/SVD solvers (they converge in far fewer).
pub const MAX_ITER: usize = 100_000;

/// Convergence tolerance of nalgebra's SVD: its default (5 ε). With ε itself it was seen to stop
/// early on rank-deficient matrices (a singular value off by 1%).
const SVD_EPS: f64 = 5.0 * f64::EPSILON;

/// What one thresholding computed: `Π` and the Gram matrix of the result.
#[derive(Debug, Clone, PartialEq)]
pub struct Shrinkage {
    /// `Π = Z diag(π) Zᵀ`, `k x k` row-major: the result is `M Π`.
    pub pi: Vec<f64>,
    /// `(MΠ)ᵀ(MΠ) = Z diag((σ-θ)_+²) Zᵀ`, `k x k` row-major (empty when not asked for).
    pub gram: Vec<f64>,
    /// The singular values of `M` (unsorted; as many as the route produced).
    pub sigma: Vec<f64>,
    /// `σ_max(M)`.
    pub sigma_max: f64,
    /// The right singular vectors (columns), row-major `k x q` (used to warm-start the next
    /// Jacobi SVD).
    pub z: Vec<f64>,
    /// The number of `(σ_r - θ)_+ > RANK_TOL σ_max`: the rank of the result.
    pub rank: usize,
}

/// `MᵀM` (`k x k` row-major) of a column-major `d x k` matrix.
pub fn gram(m: &[f64], d: usize, k: usize) -> Vec<f64> {
    let mut c = vec![0.0; k * k];
    for i in 0..k {
        let ci = &m[i * d..(i + 1) * d];
        for j in 0..=i {
            let v = dot4(ci, &m[j * d..(j + 1) * d]);
            c[i * k + j] = v;
            c[j * k + i] = v;
        }
    }
    c
}

/// `MMᵀ` (`d x d` row-major) of a column-major `d x k` matrix: the Gram matrix of its rows, the
/// smaller side when `d < k`. `O(d² k)`: the rows are gathered once (a transposed copy), then
/// each entry is one contiguous dot product.
pub fn row_gram(m: &[f64], d: usize, k: usize) -> Vec<f64> {
    let mut rows = vec![0.0; d * k];
    column_to_row_major(m, d, k, &mut rows);
    let mut out = vec![0.0; d * d];
    for a in 0..d {
        let ra = &rows[a * k..(a + 1) * k];
        for b in 0..=a {
            let v = dense_dot(ra, &rows[b * k..(b + 1) * k]);
            out[a * d + b] = v;
            out[b * d + a] = v;
        }
    }
    out
}

/// `out = P M` for a column-major `d x k` `M` and a symmetric row-major `d x d` `P` (the
/// row-side SVT `Π_L Û`, `O(d² k)`). In memory this is the row-major `k x d` product `Mᵀ P`.
pub fn symmetric_left_multiply(m: &[f64], d: usize, k: usize, p: &[f64], out: &mut [f64]) {
    matmul(m, p, k, d, d, out);
}

/// `M ← M P` in place for a column-major `d x k` matrix `M` and a row-major `k x k` `P`.
///
/// A few rows at a time (a tile): the tile's `k` inputs are copied to a small scratch (on the
/// stack for `k <= TILE_STACK_COLS`, so no allocation per call), then its outputs are computed
/// four columns at a time in registers and written straight back into `M`. With AVX-512 or
/// AVX2 + FMA the multiply-adds are fused, so the last bits can differ from the portable build.
pub fn right_multiply_in_place(m: &mut [f64], d: usize, k: usize, p: &[f64]) {
    assert!(
        m.len() >= d * k && p.len() >= k * k,
        "right_multiply_in_place: slices too short"
    );
    right_multiply_build(m, d, k, p)
}

fma_builds! {
    /// Tiles of 32 rows for AVX-512 (four registers: the 4 x 4 accumulators take 16 of the 32 zmm
    /// registers; where measured, zmm FMAs issued as fast as ymm ones, so this build takes about
    /// 2/3 the time); of 12 rows for AVX2 (three registers: the 4 x 3 accumulators take 12 of the
    /// 16 ymm registers; of 8 x 4, 8 x 5, 8 x 6, 16 x 3 and 4 x 8 rows x columns, the fastest at
    /// d = 400, k = 12); of 6 rows of plain arrays otherwise.
    #[inline] // the checks of its caller, then the build
    fn right_multiply_build(m: &mut [f64], d: usize, k: usize, p: &[f64]) {
        avx512: right_multiply_tiles::<std::arch::x86_64::__m512d, 4, 32>(m, d, k, p),
        avx2: right_multiply_tiles::<std::arch::x86_64::__m256d, 3, 12>(m, d, k, p),
        // SAFETY: plain arrays need no CPU feature.
        portable: unsafe { right_multiply_tiles::<[f64; 2], 3, 6>(m, d, k, p) },
    }
}

/// Up to this many columns the tile scratch lives on the stack (larger `k` allocate it).
const TILE_STACK_COLS: usize = 16;

/// One column of a tile, aligned so that the vector loads from it never straddle cache lines
/// (unaligned, the kernels were 5-15% slower).
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct TileColumn<const ROWS: usize>([f64; ROWS]);

/// The right multiplication over tiles of `ROWS = V * L::N` rows.
///
/// # Safety
/// As for [`Lanes`]: the CPU features of `L` must be available.
#[inline(always)]
unsafe fn right_multiply_tiles<L: Lanes, const V: usize, const ROWS: usize>(
    m: &mut [f64],
    d: usize,
    k: usize,
    p: &[f64],
) {
    const { assert!(ROWS == V * L::N) };
    let mut stack = [TileColumn([0.0; ROWS]); TILE_STACK_COLS];
    let mut heap = Vec::new();
    let tile: &mut [TileColumn<ROWS>] = if k <= TILE_STACK_COLS {
        &mut stack[..k]
    } else {
        heap.resize(k, TileColumn([0.0; ROWS]));
        &mut heap
    };
    let mut r0 = 0;
    while r0 < d {
        // The last tile may be short: its other rows keep stale values, computed but not stored.
        let len = ROWS.min(d - r0);
        for (c, col) in tile.iter_mut().enumerate() {
            let src = &m[c * d + r0..c * d + r0 + len];
            if len == ROWS {
                // A copy of known length (vector moves, no call to memcpy).
                col.0 = src.try_into().unwrap();
            } else {
                col.0[..len].copy_from_slice(src);
            }
        }
        let mut j0 = 0;
        while j0 + 4 <= k {
            tile_outputs::<L, V, ROWS, 4>(tile, p, k, j0, m, d, r0, len);
            j0 += 4;
        }
        match k - j0 {
            3 => tile_outputs::<L, V, ROWS, 3>(tile, p, k, j0, m, d, r0, len),
            2 => tile_outputs::<L, V, ROWS, 2>(tile, p, k, j0, m, d, r0, len),
            1 => tile_outputs::<L, V, ROWS, 1>(tile, p, k, j0, m, d, r0, len),
            _ => {}
        }
        r0 += len;
    }
}

/// Output columns `j0..j0 + COLS` of one tile (rows `r0..r0 + len` of `M`): `COLS x V`
/// accumulator registers while the `k` input columns of the tile stream past.
///
/// # Safety
/// As for [`Lanes`].
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn tile_outputs<L: Lanes, const V: usize, const ROWS: usize, const COLS: usize>(
    tile: &[TileColumn<ROWS>],
    p: &[f64],
    k: usize,
    j0: usize,
    m: &mut [f64],
    d: usize,
    r0: usize,
    len: usize,
) {
    let mut acc = [[L::zero(); V]; COLS];
    for (r, col) in tile.iter().enumerate() {
        let w: &[f64; COLS] = p[r * k + j0..r * k + j0 + COLS].try_into().unwrap();
        let mut x = [L::zero(); V];
        for (v, xv) in x.iter_mut().enumerate() {
            *xv = L::load(&col.0[v * L::N..]);
        }
        for (a, &wj) in acc.iter_mut().zip(w) {
            let wj = L::splat(wj);
            for (av, &xv) in a.iter_mut().zip(&x) {
                *av = xv.mul_add(wj, *av);
            }
        }
    }
    for (j, a) in acc.iter().enumerate() {
        let out = &mut m[(j0 + j) * d + r0..(j0 + j) * d + r0 + len];
        if len == ROWS {
            for (v, av) in a.iter().enumerate() {
                av.store(&mut out[v * L::N..]);
            }
        } else {
            let mut part = [0.0; ROWS];
            for (v, av) in a.iter().enumerate() {
                av.store(&mut part[v * L::N..]);
            }
            out.copy_from_slice(&part[..len]);
        }
    }
}

fma_builds! {
    /// The `R` factor of a Householder QR of the `q` columns `cols` of the column-major matrix
    /// `m` (columns of length `d`), row-major `q x q` upper triangular (`RᵀR = MᵀM`). Computed
    /// as a tall-skinny QR over blocks of rows, `R ← qr([R; block]).R`, where the reflector of
    /// column j touches row j of R and the block only (scratch `O(BLOCK q)`). With `d < q` only
    /// `d` rows can be non-zero, but not necessarily the first `d`: a zero column leaves its row
    /// empty and pushes the work to a later one, so all `q` rows are returned.
    pub fn r_factor(m: &[f64], d: usize, cols: &[usize]) -> Vec<f64> {
        avx2: r_factor_kernel(m, d, cols),
        portable: r_factor_kernel(m, d, cols),
    }
}

#[inline(always)]
fn r_factor_kernel(m: &[f64], d: usize, cols: &[usize]) -> Vec<f64> {
    let q = cols.len();
    let mut r = vec![0.0; q * q];
    let mut buf = vec![0.0; BLOCK.min(d) * q];
    let mut r0 = 0;
    while r0 < d {
        let len = BLOCK.min(d - r0);
        for (c, &col) in cols.iter().enumerate() {
            buf[c * len..(c + 1) * len].copy_from_slice(&m[col * d + r0..col * d + r0 + len]);
        }
        for j in 0..q {
            // Reflect [R[j][j]; B[:, j]] onto a multiple of e_1; R's rows below j are zero in
            // column j and are not touched.
            let (head, tail) = buf.split_at_mut((j + 1) * len);
            let x = &head[j * len..];
            let alpha = r[j * q + j];
            let xx = dot4(x, x);
            if xx == 0.0 {
                continue;
            }
            let norm = (alpha * alpha + xx).sqrt();
            let beta = if alpha > 0.0 { -norm } else { norm };
            let v0 = alpha - beta;
            let vv = v0 * v0 + xx;
            r[j * q + j] = beta;
            for c in j + 1..q {
                let col = &mut tail[(c - j - 1) * len..(c - j) * len];
                let f = 2.0 * (v0 * r[j * q + c] + dot4(x, col)) / vv;
                r[j * q + c] -= f * v0;
                col.iter_mut().zip(x).for_each(|(b, &xi)| *b -= f * xi);
            }
        }
        r0 += len;
    }
    r
}

/// Jacobi SVD (see `linalg::jacobi`) of the `rows x q` row-major `a`, warm-started
/// from `warm` (row-major `q x q`, its columns the previous update's right singular vectors):
/// singular values and right vectors (row-major `q x q`), or `None` when it has not converged
/// after 8 sweeps (warm; one or two usually suffice) or 30 (cold).
pub fn jacobi_svd(a: &[f64], rows: usize, q: usize, warm: Option<&[f64]>) -> Option<(Vec<f64>, Vec<f64>)> {
    let max_sweeps = if warm.is_some() { 8 } else { 30 };
    let svd = crate::linalg::jacobi::jacobi_svd(a, rows, q, warm, max_sweeps)?;
    let z = (0..q * q).map(|idx| svd.z(idx / q, idx % q)).collect();
    Some((svd.sigma, z))
}

/// Row-major copy of a nalgebra matrix.
fn row_major(m: &DMatrix<f64>) -> Vec<f64> {
    (0..m.nrows())
        .flat_map(|a| (0..m.ncols()).map(move |r| m[(a, r)]))
        .collect()
}

/// `Π` and the new Gram matrix from right singular vectors (`z`: row-major `k x q`, column `r`
/// the vector of `sigma[r]`) and singular values.
fn shrinkage_from(z: Vec<f64>, sigma: Vec<f64>, theta: f64, with_gram: bool) -> Shrinkage {
    let q = sigma.len();
    let k = z.len().checked_div(q).unwrap_or(0);
    let sigma_max = sigma.iter().fold(0.0f64, |a, &s| a.max(s));
    let mut rank = 0;
    // Per pair r: the factor of Π (π_r) and of the new Gram ((σ_r - θ)_+²).
    let mut factor_pi = vec![0.0; q];
    let mut factor_gram = vec![0.0; q];
    for (r, &s) in sigma.iter().enumerate() {
        let kept = (s - theta).max(0.0);
        if sigma_max > 0.0 && kept > RANK_TOL * sigma_max {
            rank += 1;
        }
        if s > 0.0 && kept > 0.0 {
            factor_pi[r] = kept / s;
            factor_gram[r] = kept * kept;
        }
    }
    let mut pi = vec![0.0; k * k];
    let mut gram = vec![0.0; if with_gram { k * k } else { 0 }];
    weighted_outer_products(&z, k, q, &factor_pi, &factor_gram, &mut pi, &mut gram);
    Shrinkage {
        pi,
        gram,
        sigma,
        sigma_max,
        rank,
        z,
    }
}

/// `pi = Z diag(f_pi) Zᵀ` and `gram = Z diag(f_gram) Zᵀ` for the row-major `k x q` `Z`, as
/// products `(Z diag(f)) Zᵀ`, then mirrored so both are exactly symmetric. An empty `gram` is
/// skipped.
fn weighted_outer_products(
    z: &[f64],
    k: usize,
    q: usize,
    f_pi: &[f64],
    f_gram: &[f64],
    pi: &mut [f64],
    gram: &mut [f64],
) {
    let mut zt = vec![0.0; q * k];
    for a in 0..k {
        for r in 0..q {
            zt[r * k + a] = z[a * q + r];
        }
    }
    let mut scaled = vec![0.0; k * q];
    for (out, f) in [(pi, f_pi), (gram, f_gram)] {
        if out.is_empty() {
            continue;
        }
        for (row_s, row_z) in scaled.chunks_exact_mut(q.max(1)).zip(z.chunks_exact(q.max(1))) {
            row_s
                .iter_mut()
                .zip(row_z)
                .zip(f)
                .for_each(|((s, &zv), &fv)| *s = zv * fv);
        }
        matmul(&scaled, &zt, k, q, k, out);
        for a in 0..k {
            for b in 0..a {
                out[b * k + a] = out[a * k + b];
            }
        }
    }
}

/// True when `trace(MᵀM)` alone proves `θ < 10⁻⁶ σ_max(M)` for a matrix with `q` columns
/// (`σ_max² = λ_max ≥ trace / q`): the first condition of route (b)'s fallback.
pub fn gram_route_ruled_out(trace: f64, q: usize, theta: f64) -> bool {
    theta * theta < GRAM_MIN_THETA * GRAM_MIN_THETA * trace / q.max(1) as f64
}

/// True when the eigenvalues `λ` of `Ĉ` (square singular values) are accurate enough for
/// route (b) at threshold `θ`: `θ >= 10⁻⁶ σ_max` (§5.5: the inaccurate values are thresholded
/// away) or `λ_min >= GRAM_MIN_CONDITION (θ/σ_max) λ_max` (there are no inaccurate values).
pub fn gram_route_accurate(eigenvalues: &[f64], theta: f64) -> bool {
    let lambda_max = eigenvalues.iter().fold(0.0f64, |a, &l| a.max(l));
    let sigma_max = lambda_max.sqrt();
    if theta >= GRAM_MIN_THETA * sigma_max {
        return true;
    }
    let lambda_min = eigenvalues.iter().fold(f64::INFINITY, |a, &l| a.min(l));
    lambda_min >= GRAM_MIN_CONDITION * (theta / sigma_max) * lambda_max
}

/// Route (b): thresholding from the Gram matrix `Ĉ = MᵀM` (`k x k` row-major). `None` when
/// route (a) must be used instead: the eigenvalues are not accurate enough
/// ([`gram_route_accurate`]), or the eigensolver failed.
pub fn gram_route(c_hat: &[f64], k: usize, theta: f64) -> Option<Shrinkage> {
    if k == 0 || c_hat.iter().any(|v| !v.is_finite()) {
        return None;
    }
    let (values, vectors) = symmetric_eigen(c_hat, k)?;
    gram_route_from_eigen(values, vectors, theta, true)
}

/// Eigenvalues and eigenvectors (row-major `n x n`, column r for value r) of the symmetric
/// row-major `n x n` `m` (nalgebra); `None` for non-finite input or no convergence.
pub fn symmetric_eigen(m: &[f64], n: usize) -> Option<(Vec<f64>, Vec<f64>)> {
    if n == 0 || m.iter().any(|v| !v.is_finite()) {
        return None;
    }
    let eig = SymmetricEigen::try_new(DMatrix::from_row_slice(n, n, m), f64::EPSILON, MAX_ITER)?;
    Some((eig.eigenvalues.iter().copied().collect(), row_major(&eig.eigenvectors)))
}

/// Route (b) from an eigendecomposition of `Ĉ` already at hand (`vectors` row-major `k x k`,
/// column `r` the vector of `values[r]`), e.g. updated from the previous one
/// ([`crate::linalg::eigen_update`]). `None` when route (a) must be used instead.
/// With `with_gram` false the new Gram matrix is not formed (`Shrinkage::gram` is empty).
pub fn gram_route_from_eigen(values: Vec<f64>, vectors: Vec<f64>, theta: f64, with_gram: bool) -> Option<Shrinkage> {
    if values.is_empty() || !gram_route_accurate(&values, theta) {
        return None;
    }
    let sigma: Vec<f64> = values.iter().map(|&l| l.max(0.0).sqrt()).collect();
    Some(shrinkage_from(vectors, sigma, theta, with_gram))
}

/// Route (a): thresholding from the SVD of the QR factor `R` of the column-major `d x k` `M`.
/// `None` only if `M` holds non-finite values or the SVD fails to converge.
pub fn qr_route(m: &[f64], d: usize, k: usize, theta: f64) -> Option<Shrinkage> {
    let cols: Vec<usize> = (0..k).collect();
    qr_route_cols(m, d, &cols, theta, None)
}

/// Route (a) on the submatrix of the columns `cols` (the result is `q x q`, `q = cols.len()`).
/// The SVD of R is a one-sided Jacobi SVD, warm-started from `warm` (a `q x q` orthogonal guess
/// of the right singular vectors, e.g. the previous update's) when given, with nalgebra's SVD as
/// the fallback should it not converge. Jacobi comes first also when cold: it is accurate on
/// the rank-deficient R this route meets (U wide or ill-conditioned), where nalgebra's SVD
/// (0.35) was seen to miss a singular value by 4e-4 relative.
pub fn qr_route_cols(m: &[f64], d: usize, cols: &[usize], theta: f64, warm: Option<&[f64]>) -> Option<Shrinkage> {
    if cols.is_empty() || d == 0 {
        return None;
    }
    let r = r_factor(m, d, cols);
    let q = cols.len();
    if r.iter().any(|v| !v.is_finite()) {
        return None; // M holds (or overflowed to) non-finite values
    }
    if let Some((sigma, z)) = jacobi_svd(&r, q, q, warm) {
        return Some(shrinkage_from(z, sigma, theta, true));
    }
    let r = DMatrix::from_row_slice(q, q, &r);
    let svd = SVD::try_new(r, false, true, SVD_EPS, MAX_ITER)?;
    let z = row_major(&svd.v_t?.transpose());
    Some(shrinkage_from(
        z,
        svd.singular_values.iter().copied().collect(),
        theta,
        true,
    ))
}

/// A shrinkage computed on the columns `cols` of a `k`-column matrix, embedded into `k x k`
/// (zero rows and columns elsewhere: the other columns are zero and stay zero).
pub fn embed(s: Shrinkage, cols: &[usize], k: usize) -> Shrinkage {
    let q = cols.len();
    if q == k && cols.iter().enumerate().all(|(a, &c)| a == c) {
        return s;
    }
    let pi = embed_square(&s.pi, cols, k);
    let gram = if s.gram.is_empty() {
        Vec::new()
    } else {
        embed_square(&s.gram, cols, k)
    };
    Shrinkage { pi, gram, ..s }
}

/// The row-major `q x q` `m` placed at rows and columns `cols` of a zero `k x k` matrix.
pub fn embed_square(m: &[f64], cols: &[usize], k: usize) -> Vec<f64> {
    let q = cols.len();
    let mut out = vec![0.0; k * k];
    for (a, &ca) in cols.iter().enumerate() {
        for (b, &cb) in cols.iter().enumerate() {
            out[ca * k + cb] = m[a * q + b];
        }
    }
    out
}

/// `Z diag(f) Zᵀ` for the row-major `k x q` `Z` (exactly symmetric): e.g. the Gram matrix
/// `Z diag((σ-θ)_+²) Zᵀ` of a thresholded matrix from its right singular vectors.
pub fn weighted_outer_product(z: &[f64], k: usize, q: usize, f: &[f64]) -> Vec<f64> {
    let mut out = vec![0.0; k * k];
    weighted_outer_products(z, k, q, f, &[], &mut out, &mut []);
    out
}

/// The literal route (a) of §5.5: `Q_R W diag((σ-θ)_+) Zᵀ` with `Q_R` formed explicitly.
/// Returns the column-major result and the singular values of `M`. For tests and checks only.
#[cfg(any(test, feature = "python"))]
pub fn svt_explicit(m: &[f64], d: usize, k: usize, theta: f64) -> Option<(Vec<f64>, Vec<f64>)> {
    if k == 0 || d == 0 || m.iter().any(|v| !v.is_finite()) {
        return None;
    }
    let qr = DMatrix::from_column_slice(d, k, m).qr();
    let (q, r) = (qr.q(), qr.r());
    let svd = SVD::try_new(r, true, true, SVD_EPS, MAX_ITER)?;
    let (w, zt) = (svd.u?, svd.v_t?);
    let shrunk = DMatrix::from_diagonal(&svd.singular_values.map(|s| (s - theta).max(0.0)));
    let out = q * w * shrunk * zt;
    Some((out.as_slice().to_vec(), svd.singular_values.iter().copied().collect()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SplitMix64;

    fn random_matrix(d: usize, k: usize, rank: usize, seed: u64) -> Vec<f64> {
        let mut rng = SplitMix64::new(seed);
        let mut unif = || (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0;
        let a: Vec<f64> = (0..d * rank).map(|_| unif()).collect();
        let b: Vec<f64> = (0..rank * k).map(|_| unif() * 2.0).collect();
        let mut m = vec![0.0; d * k];
        for c in 0..k {
            for i in 0..d {
                m[c * d + i] = (0..rank).map(|r| a[r * d + i] * b[r * k + c]).sum();
            }
        }
        m
    }

    fn apply(m: &[f64], d: usize, k: usize, s: &Shrinkage) -> Vec<f64> {
        let mut out = m.to_vec();
        right_multiply_in_place(&mut out, d, k, &s.pi);
        out
    }

    fn rel_diff(a: &[f64], b: &[f64]) -> f64 {
        let num: f64 = a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum::<f64>().sqrt();
        let den: f64 = b.iter().map(|x| x * x).sum::<f64>().sqrt();
        num / den.max(1e-300)
    }

    fn sorted_desc(mut v: Vec<f64>) -> Vec<f64> {
        v.sort_by(|a, b| b.total_cmp(a));
        v
    }

    /// INV-R4: routes (a), (b) and the explicit (a) agree, and σ(SVT(M)) = (σ(M) - θ)_+.
    #[test]
    fn routes_agree_and_shrink_singular_values() {
        for &(d, k, rank, theta) in &[
            (600, 6, 6, 0.3),
            (300, 8, 3, 0.5),
            (3, 7, 3, 0.2),
            (1000, 12, 12, 1.0),
            (40, 5, 5, 1e9),
        ] {
            let m = random_matrix(d, k, rank, (d * k) as u64);
            let c = gram(&m, d, k);
            let b = gram_route(&c, k, theta).expect("gram route");
            let a = qr_route(&m, d, k, theta).expect("qr route");
            let (explicit, sigma) = svt_explicit(&m, d, k, theta).unwrap();
            let (ua, ub) = (apply(&m, d, k, &a), apply(&m, d, k, &b));
            if theta < 1e8 {
                assert!(
                    rel_diff(&ua, &explicit) < 1e-9,
                    "(a) vs explicit: {}",
                    rel_diff(&ua, &explicit)
                );
                assert!(
                    rel_diff(&ub, &explicit) < 1e-9,
                    "(b) vs explicit: {}",
                    rel_diff(&ub, &explicit)
                );
            } else {
                assert!(ua.iter().chain(&ub).all(|&v| v == 0.0));
                assert_eq!((a.rank, b.rank), (0, 0));
            }
            // Singular values of the result, from its Gram matrix.
            let got = qr_route(&ua, d, k, 0.0).map(|s| sorted_desc(s.sigma)).unwrap();
            let expect = sorted_desc(sigma.iter().map(|s| (s - theta).max(0.0)).collect());
            let smax = sigma.iter().fold(0.0f64, |x, &s| x.max(s));
            for (g, e) in got.iter().zip(&expect) {
                assert!((g - e).abs() <= 1e-10 * smax, "{g} vs {e}");
            }
            // The maintained Gram matrix of the result is right.
            let exact = gram(&ua, d, k);
            assert!(rel_diff(&a.gram, &exact) < 1e-9 || exact.iter().all(|&v| v == 0.0));
            assert_eq!(a.rank, expect.iter().filter(|&&s| s > RANK_TOL * smax).count());
            assert_eq!(a.rank, b.rank);
        }
    }

    /// A wide matrix whose first columns are zero: the reflections those columns skip push R's
    /// rows down, so R must be taken whole (truncating it to its first `d` rows once lost 1e-6).
    #[test]
    fn route_a_on_wide_matrices_with_zero_columns() {
        for &(d, k, zero, theta) in &[(5, 8, 2, 1.0), (3, 7, 1, 0.1), (5, 6, 0, 0.01), (2, 9, 4, 0.5)] {
            let mut m = random_matrix(d, k, d.min(k), (d * 100 + k) as u64);
            m[..zero * d].fill(0.0);
            let (explicit, _) = svt_explicit(&m, d, k, theta).unwrap();
            let cols: Vec<usize> = (0..k).collect();
            let live: Vec<usize> = (zero..k).collect();
            for c in [&cols, &live] {
                let s = embed(qr_route_cols(&m, d, c, theta, None).unwrap(), c, k);
                let r = r_factor(&m, d, c);
                let q = c.len();
                let g = gram(&m, d, k);
                for (a, &ca) in c.iter().enumerate() {
                    for (b, &cb) in c.iter().enumerate() {
                        let rtr: f64 = (0..q).map(|i| r[i * q + a] * r[i * q + b]).sum();
                        assert!((rtr - g[ca * k + cb]).abs() <= 1e-12 * (1.0 + g[ca * k + ca].abs()));
                    }
                }
                assert!(
                    rel_diff(&apply(&m, d, k, &s), &explicit) < 1e-12,
                    "d={d} k={k} zero={zero}"
                );
            }
        }
    }

    /// Prox optimality (INV-R4): `P₊ᵀ (M - SVT(M)) Q₊ = θ I` on the retained singular pairs.
    #[test]
    fn prox_optimality_condition() {
        let (d, k) = (200, 6);
        let m = random_matrix(d, k, 6, 99);
        let mm = DMatrix::from_column_slice(d, k, &m);
        let svd = mm.clone().svd(true, true);
        let mut sigma: Vec<f64> = svd.singular_values.iter().copied().collect();
        sigma.sort_by(|a, b| b.total_cmp(a));
        let theta = 0.5 * (sigma[2] + sigma[3]);
        let s = qr_route(&m, d, k, theta).unwrap();
        let out = apply(&m, d, k, &s);
        let (p, qt) = (svd.u.unwrap(), svd.v_t.unwrap());
        let diff = mm - DMatrix::from_column_slice(d, k, &out);
        let keep: Vec<usize> = (0..k).filter(|&r| svd.singular_values[r] > theta).collect();
        assert!(
            !keep.is_empty() && keep.len() < k,
            "the test needs retained and removed pairs"
        );
        let p_plus = p.select_columns(&keep);
        let q_plus = qt.transpose().select_columns(&keep);
        let g = p_plus.transpose() * diff * q_plus;
        let target = DMatrix::<f64>::identity(keep.len(), keep.len()) * theta;
        assert!((g - target).norm() <= 1e-9, "prox optimality violated");
    }

    /// The warm-started Jacobi SVD of route (a) agrees with the cold solvers (nalgebra).
    #[test]
    fn warm_started_solvers_agree() {
        let (d, k, theta) = (300, 7, 0.4);
        let m = random_matrix(d, k, 7, 17);
        let c = gram(&m, d, k);
        let cold_b = gram_route(&c, k, theta).unwrap();
        let cold_a = qr_route(&m, d, k, theta).unwrap();
        // A rough orthogonal guess: the exact vectors of a perturbed matrix.
        let mut m2 = m.clone();
        m2.iter_mut()
            .enumerate()
            .for_each(|(i, v)| *v += 0.05 * ((i % 13) as f64 - 6.0) / 6.0);
        let guess = qr_route(&m2, d, k, theta).unwrap().z;
        let cols: Vec<usize> = (0..k).collect();
        let warm_a = qr_route_cols(&m, d, &cols, theta, Some(&guess)).unwrap();
        let reference = apply(&m, d, k, &cold_a);
        for s in [&cold_b, &warm_a] {
            assert!(rel_diff(&apply(&m, d, k, s), &reference) < 1e-9);
            assert_eq!(s.rank, cold_a.rank);
        }
    }

    /// Below `θ = 10⁻⁶ σ_max` route (b) is taken only when no eigenvalue of `Ĉ` is inaccurate.
    #[test]
    fn gram_route_declines_tiny_thresholds_on_ill_conditioned_matrices() {
        let (d, k) = (50, 4);
        let well = random_matrix(d, k, 4, 5);
        let c = gram(&well, d, k);
        let accepted = gram_route(&c, k, 1e-9).expect("well conditioned: accurate");
        let reference = qr_route(&well, d, k, 1e-9).unwrap();
        assert!(rel_diff(&apply(&well, d, k, &accepted), &apply(&well, d, k, &reference)) < 1e-12);
        let deficient = random_matrix(d, k, 3, 5);
        let c = gram(&deficient, d, k);
        assert!(gram_route(&c, k, 1e-9).is_none());
        assert!(gram_route(&c, k, 1e-3).is_some());
        assert!(qr_route(&deficient, d, k, 1e-9).is_some());
    }

    /// The right multiplication under the process's level and under every level this CPU runs.
    fn right_multiply_builds(m: &[f64], d: usize, k: usize, p: &[f64]) -> Vec<(&'static str, Vec<f64>)> {
        let mut runs = Vec::new();
        let mut out = m.to_vec();
        right_multiply_in_place(&mut out, d, k, p);
        runs.push(("dispatch", out));
        for level in crate::simd::runnable_levels() {
            let mut out = m.to_vec();
            crate::simd::with_level(level, || right_multiply_in_place(&mut out, d, k, p));
            runs.push((level.name(), out));
        }
        runs
    }

    #[test]
    fn right_multiply_matches_naive_product_across_blocks() {
        // Row counts below, at and around the tile heights (6, 12, 32) and across several
        // tiles; column counts not multiples of 4, k = 1, and k above the stack scratch.
        let ds = [0, 1, 5, 6, 11, 12, 13, 31, 32, 33, 100, 400, BLOCK * 2 + 17];
        let ks = [0, 1, 2, 3, 4, 5, 7, 12, 13, TILE_STACK_COLS, TILE_STACK_COLS + 1, 40];
        let mut rng = SplitMix64::new(7);
        for &d in &ds {
            for &k in &ks {
                let m = random_matrix(d, k, k.clamp(1, 3), d as u64 * 100 + k as u64);
                let p: Vec<f64> = (0..k * k)
                    .map(|_| (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0)
                    .collect();
                for (build, out) in right_multiply_builds(&m, d, k, &p) {
                    for i in 0..d {
                        for j in 0..k {
                            let terms = (0..k).map(|r| m[r * d + i] * p[r * k + j]);
                            let expect: f64 = terms.clone().sum();
                            let scale = 1.0 + terms.map(f64::abs).sum::<f64>();
                            let err = (out[j * d + i] - expect).abs();
                            assert!(err <= 1e-12 * scale, "{build} d={d} k={k} ({i},{j}): {err}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn right_multiply_keeps_rows_separate() {
        // A NaN in row 1 spoils row 1 of the result only, also in a last, partial tile that
        // still holds row 1's values from the first tile in its unused rows.
        let (d, k) = (33, 5);
        let mut m = random_matrix(d, k, 3, 9);
        m[2 * d + 1] = f64::NAN;
        let p: Vec<f64> = (0..k * k).map(|i| 0.1 * i as f64 - 1.0).collect();
        for (build, out) in right_multiply_builds(&m, d, k, &p) {
            for i in 0..d {
                for j in 0..k {
                    assert_eq!(out[j * d + i].is_nan(), i == 1, "{build} ({i},{j})");
                }
            }
        }
    }
}
