//! Kernels written over SIMD registers ([`Lanes`]) with fused multiply-adds in the x86 builds:
//! column dot products, small matrix products, and the inverse Gram matrix's symmetric
//! matrix-vector product and rank-2 step. Each is one generic body, built per level by
//! [`fma_builds!`]; the fused builds change last bits.

use super::fma_builds;
use super::lanes::Lanes;

/// `out[j] = <b_j, x>` for the `m` columns `b_j = b[j*d..(j+1)*d]` of a column-major `d x m`
/// matrix and a dense `x` (four columns per pass, so `x` is loaded once per four products).
/// With AVX-512 or AVX2 + FMA the multiply-adds are fused (the last bits can differ from the
/// portable build).
pub fn columns_dot(b: &[f64], d: usize, m: usize, x: &[f64], out: &mut [f64]) {
    assert!(
        b.len() >= d * m && x.len() >= d && out.len() >= m,
        "columns_dot: slices too short"
    );
    columns_dot_build(b, d, m, x, out)
}

fma_builds! {
    #[inline] // the checks of its caller, then the build
    fn columns_dot_build(b: &[f64], d: usize, m: usize, x: &[f64], out: &mut [f64]) {
        avx512: columns_dot_lanes::<std::arch::x86_64::__m512d>(b, d, m, x, out),
        avx2: columns_dot_lanes::<std::arch::x86_64::__m256d>(b, d, m, x, out),
        // SAFETY: plain arrays need no CPU feature.
        portable: unsafe { columns_dot_lanes::<[f64; 4]>(b, d, m, x, out) },
    }
}

/// # Safety
/// As for [`Lanes`].
#[inline(always)]
unsafe fn columns_dot_lanes<L: Lanes>(b: &[f64], d: usize, m: usize, x: &[f64], out: &mut [f64]) {
    let x = &x[..d];
    let mut j = 0;
    while j < m {
        // A short last block repeats its last column (computed, not stored).
        let width = (m - j).min(4);
        let col = |c: usize| {
            let col = j + c.min(width - 1);
            &b[col * d..(col + 1) * d]
        };
        let cols: [&[f64]; 4] = [col(0), col(1), col(2), col(3)];
        out[j..j + width].copy_from_slice(&dot4_lanes::<L>(cols, x)[..width]);
        j += width;
    }
}

/// `[<r_0, x>, <r_1, x>, <r_2, x>, <r_3, x>]`: four dot products sharing the loads of `x`, in
/// `L::N` lanes each (every `r_c` at least as long as `x`).
///
/// # Safety
/// As for [`Lanes`].
#[inline(always)]
pub(crate) unsafe fn dot4_lanes<L: Lanes>(rows: [&[f64]; 4], x: &[f64]) -> [f64; 4] {
    let d = x.len();
    let body = d - d % L::N;
    let mut acc = [L::zero(); 4];
    let mut i = 0;
    while i < body {
        let xv = L::load(&x[i..]);
        for (a, r) in acc.iter_mut().zip(&rows) {
            *a = L::load(&r[i..]).mul_add(xv, *a);
        }
        i += L::N;
    }
    // Plain loops, not `std::array::from_fn`: a closure is not compiled with the caller's
    // target features, so every intrinsic inside it would become a function call.
    let mut out = L::sum4(acc);
    if body < d {
        for c in 0..4 {
            let mut tail = 0.0;
            for i in body..d {
                tail += rows[c][i] * x[i];
            }
            out[c] += tail;
        }
    }
    out
}

/// `out = A B` for small row-major matrices (`A` is `rows x inner`, `B` is `inner x cols`),
/// with a row's outputs accumulated in registers over the inner index (no output stored and
/// re-read per term). Fused multiply-adds with AVX-512 or AVX2 + FMA.
pub(crate) fn matmul(a: &[f64], b: &[f64], rows: usize, inner: usize, cols: usize, out: &mut [f64]) {
    assert!(
        a.len() >= rows * inner && b.len() >= inner * cols && out.len() >= rows * cols,
        "matmul: slices too short"
    );
    matmul_build(a, b, rows, inner, cols, out)
}

fma_builds! {
    #[inline] // the checks of its caller, then the build
    fn matmul_build(a: &[f64], b: &[f64], rows: usize, inner: usize, cols: usize, out: &mut [f64]) {
        avx512: matmul_lanes::<std::arch::x86_64::__m512d, std::arch::x86_64::__m256d>(a, b, rows, inner, cols, out),
        avx2: matmul_lanes::<std::arch::x86_64::__m256d, [f64; 2]>(a, b, rows, inner, cols, out),
        // SAFETY: plain arrays need no CPU feature.
        portable: unsafe { matmul_lanes::<[f64; 4], [f64; 2]>(a, b, rows, inner, cols, out) },
    }
}

/// Blocks of `L::N` columns, then of `H::N`, then single columns; four rows of A at a time
/// (four independent accumulator chains share each load of B, instead of one chain waiting on
/// the latency of the previous multiply-add), then the remaining rows one by one. Each output
/// is the same chain of multiply-adds over the inner index either way, so the grouping does
/// not change a bit of the result.
///
/// # Safety
/// As for [`Lanes`], for both `L` and `H`.
#[inline(always)]
unsafe fn matmul_lanes<L: Lanes, H: Lanes>(
    a: &[f64],
    b: &[f64],
    rows: usize,
    inner: usize,
    cols: usize,
    out: &mut [f64],
) {
    let mut i = 0;
    while i + 4 <= rows {
        let a4 = &a[i * inner..(i + 4) * inner];
        let out4 = &mut out[i * cols..(i + 4) * cols];
        let mut c = 0;
        while c + 2 * L::N <= cols {
            // Two column blocks: eight independent chains, enough to hide the latency.
            let (lo, hi) = rows4_block2::<L>(a4, inner, b, cols, c);
            for (r, (v, w)) in lo.into_iter().zip(hi).enumerate() {
                v.store(&mut out4[r * cols + c..]);
                w.store(&mut out4[r * cols + c + L::N..]);
            }
            c += 2 * L::N;
        }
        while c + L::N <= cols {
            let acc = rows4_block::<L>(a4, inner, b, cols, c);
            for (r, v) in acc.into_iter().enumerate() {
                v.store(&mut out4[r * cols + c..]);
            }
            c += L::N;
        }
        while c + H::N <= cols {
            let acc = rows4_block::<H>(a4, inner, b, cols, c);
            for (r, v) in acc.into_iter().enumerate() {
                v.store(&mut out4[r * cols + c..]);
            }
            c += H::N;
        }
        for r in 0..4 {
            let a_row = &a4[r * inner..(r + 1) * inner];
            for cc in c..cols {
                out4[r * cols + cc] = a_row
                    .iter()
                    .enumerate()
                    .fold(0.0, |acc, (k, &aik)| acc + aik * b[k * cols + cc]);
            }
        }
        i += 4;
    }
    for i in i..rows {
        let a_row = &a[i * inner..(i + 1) * inner];
        let out_row = &mut out[i * cols..(i + 1) * cols];
        let mut c = 0;
        while c + L::N <= cols {
            row_block::<L>(a_row, b, cols, c).store(&mut out_row[c..]);
            c += L::N;
        }
        while c + H::N <= cols {
            row_block::<H>(a_row, b, cols, c).store(&mut out_row[c..]);
            c += H::N;
        }
        for (cc, o) in out_row.iter_mut().enumerate().skip(c) {
            *o = a_row
                .iter()
                .enumerate()
                .fold(0.0, |acc, (k, &aik)| acc + aik * b[k * cols + cc]);
        }
    }
}

/// Columns `c..c + L::N` of four consecutive rows (`a4`, row-major `4 x inner`) of `A · B`.
///
/// # Safety
/// As for [`Lanes`].
#[inline(always)]
unsafe fn rows4_block<L: Lanes>(a4: &[f64], inner: usize, b: &[f64], cols: usize, c: usize) -> [L; 4] {
    let (a0, rest) = a4.split_at(inner);
    let (a1, rest) = rest.split_at(inner);
    let (a2, a3) = rest.split_at(inner);
    let mut acc = [L::zero(); 4];
    for k in 0..inner {
        let bk = L::load(&b[k * cols + c..]);
        acc[0] = L::splat(a0[k]).mul_add(bk, acc[0]);
        acc[1] = L::splat(a1[k]).mul_add(bk, acc[1]);
        acc[2] = L::splat(a2[k]).mul_add(bk, acc[2]);
        acc[3] = L::splat(a3[k]).mul_add(bk, acc[3]);
    }
    acc
}

/// Columns `c..c + 2 L::N` of four consecutive rows of `A · B` (as two blocks).
///
/// # Safety
/// As for [`Lanes`].
#[inline(always)]
unsafe fn rows4_block2<L: Lanes>(a4: &[f64], inner: usize, b: &[f64], cols: usize, c: usize) -> ([L; 4], [L; 4]) {
    let (a0, rest) = a4.split_at(inner);
    let (a1, rest) = rest.split_at(inner);
    let (a2, a3) = rest.split_at(inner);
    let (mut lo, mut hi) = ([L::zero(); 4], [L::zero(); 4]);
    for k in 0..inner {
        let (b0, b1) = (L::load(&b[k * cols + c..]), L::load(&b[k * cols + c + L::N..]));
        let s = [L::splat(a0[k]), L::splat(a1[k]), L::splat(a2[k]), L::splat(a3[k])];
        for r in 0..4 {
            lo[r] = s[r].mul_add(b0, lo[r]);
            hi[r] = s[r].mul_add(b1, hi[r]);
        }
    }
    (lo, hi)
}

/// Columns `c..c + L::N` of `a_row · B`.
///
/// # Safety
/// As for [`Lanes`].
#[inline(always)]
unsafe fn row_block<L: Lanes>(a_row: &[f64], b: &[f64], cols: usize, c: usize) -> L {
    let mut acc = L::zero();
    for (k, &aik) in a_row.iter().enumerate() {
        acc = L::splat(aik).mul_add(L::load(&b[k * cols + c..]), acc);
    }
    acc
}

/// `y = Q x` for a symmetric `n x n` `Q` of which only the lower triangle of the row-major
/// buffer `q` (row stride `cap`) is read: one pass over the triangle, each row used twice (a dot
/// product for `y_i` and an axpy into `y_0..y_i`). Fused multiply-adds with AVX-512 or
/// AVX2 + FMA. The inverse Gram matrix's projection, O(n²) per update-mistake.
pub fn sym_lower_matvec(q: &[f64], cap: usize, n: usize, x: &[f64], y: &mut [f64]) {
    assert!(
        n == 0 || (q.len() >= (n - 1) * cap + n && x.len() >= n && y.len() >= n),
        "sym_lower_matvec: slices too short"
    );
    sym_lower_matvec_build(q, cap, n, x, y)
}

fma_builds! {
    #[inline] // the checks of its caller, then the build
    fn sym_lower_matvec_build(q: &[f64], cap: usize, n: usize, x: &[f64], y: &mut [f64]) {
        avx512: sym_lower_matvec_lanes::<std::arch::x86_64::__m512d>(q, cap, n, x, y),
        avx2: sym_lower_matvec_lanes::<std::arch::x86_64::__m256d>(q, cap, n, x, y),
        // SAFETY: plain arrays need no CPU feature.
        portable: unsafe { sym_lower_matvec_lanes::<[f64; 4]>(q, cap, n, x, y) },
    }
}

/// # Safety
/// As for [`Lanes`].
#[inline(always)]
unsafe fn sym_lower_matvec_lanes<L: Lanes>(q: &[f64], cap: usize, n: usize, x: &[f64], y: &mut [f64]) {
    let (x, y) = (&x[..n], &mut y[..n]);
    y.fill(0.0);
    for i in 0..n {
        let row = &q[i * cap..i * cap + i];
        let xi = x[i];
        let xs = L::splat(xi);
        let body = i - i % L::N;
        let mut acc = L::zero();
        let mut j = 0;
        while j < body {
            let r = L::load(&row[j..]);
            acc = r.mul_add(L::load(&x[j..]), acc);
            r.mul_add(xs, L::load(&y[j..])).store(&mut y[j..]);
            j += L::N;
        }
        let mut tail = 0.0;
        for j in body..i {
            tail += row[j] * x[j];
            y[j] += row[j] * xi;
        }
        y[i] += (acc.sum() + tail) + q[i * cap + i] * xi;
    }
}

/// `Q ← Q + u uᵀ - v vᵀ` on the lower triangle of the row-major `n x n` block of `q` (row stride
/// `cap`), entry by entry `(Q_ij + u_i u_j) - v_i v_j`; returns the sum of the new diagonal.
/// Fused multiply-adds with AVX-512 or AVX2 + FMA. The inverse Gram matrix's budget step.
pub fn lower_rank2_update(q: &mut [f64], cap: usize, n: usize, u: &[f64], v: &[f64]) -> f64 {
    assert!(
        n == 0 || (q.len() >= (n - 1) * cap + n && u.len() >= n && v.len() >= n),
        "lower_rank2_update: slices too short"
    );
    lower_rank2_update_build(q, cap, n, u, v)
}

fma_builds! {
    #[inline] // the checks of its caller, then the build
    fn lower_rank2_update_build(q: &mut [f64], cap: usize, n: usize, u: &[f64], v: &[f64]) -> f64 {
        avx512: lower_rank2_update_lanes::<std::arch::x86_64::__m512d>(q, cap, n, u, v),
        avx2: lower_rank2_update_lanes::<std::arch::x86_64::__m256d>(q, cap, n, u, v),
        // SAFETY: plain arrays need no CPU feature.
        portable: unsafe { lower_rank2_update_lanes::<[f64; 4]>(q, cap, n, u, v) },
    }
}

/// # Safety
/// As for [`Lanes`].
#[inline(always)]
unsafe fn lower_rank2_update_lanes<L: Lanes>(q: &mut [f64], cap: usize, n: usize, u: &[f64], v: &[f64]) -> f64 {
    let (u, v) = (&u[..n], &v[..n]);
    let mut diag = 0.0;
    for i in 0..n {
        let row = &mut q[i * cap..i * cap + i + 1];
        let (ui, vi) = (u[i], v[i]);
        let (us, vs) = (L::splat(ui), L::splat(-vi));
        let len = i + 1;
        let body = len - len % L::N;
        let mut j = 0;
        while j < body {
            let r = L::load(&u[j..]).mul_add(us, L::load(&row[j..]));
            L::load(&v[j..]).mul_add(vs, r).store(&mut row[j..]);
            j += L::N;
        }
        for j in body..len {
            row[j] = (row[j] + ui * u[j]) - vi * v[j];
        }
        diag += row[i];
    }
    diag
}
