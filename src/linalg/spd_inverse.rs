//! The inverse of a symmetric positive definite matrix at the speed of its multiply-adds: blocked
//! Cholesky `A = L Lᵀ` (LAPACK's potrf), `W = L⁻¹` (trtri), `A⁻¹ = Wᵀ W` (lauum), about `n³/2`
//! multiply-adds in all.
//!
//! Every O(n³) step is a product of panels through one register-tiled micro-kernel: an
//! `MR x NR` block of the result kept in registers while packed slices of the two operands
//! stream through it (Goto's scheme, as an optimised BLAS does), built per SIMD level
//! ([`fma_builds!`]). The unblocked pieces (the diagonal blocks and the triangular solves of the
//! panels, O(n² NB)) are dot products and axpys. The interrupt hook is polled between block
//! steps, each at most `n² KC` multiply-adds.
//!
//! The products take their operands "p-major": `X[p][i] = x[p * ldx + i]`, the inner index `p`
//! running over rows, so that a packed slice of either operand is a run of contiguous row
//! segments. The row-major panels of the factorisation are transposed into that form first
//! (O(n NB) per step).

use crate::error::Result;
use crate::interrupt;
use crate::simd::{dense_axpy, dense_dot, fma_builds, prefetch, Lanes};

/// Block size of the factorisation and of the inverse's block rows.
const NB: usize = 128;
/// Inner-dimension block of a product (the packed slices are `KC` long).
const KC: usize = 256;
/// Rows of X packed at a time (`KC x MC` doubles, kept in L2).
const MC: usize = 144;
/// Columns of Y packed at a time (`KC x NC` doubles).
const NC: usize = 2048;
/// Rows of the micro-tile.
const MR: usize = 6;

/// `A⁻¹` of the symmetric positive definite `n x n` row-major `a` (only its lower triangle is
/// read), written over `a` (full, symmetric); `work` holds `n * n` values of scratch. `Ok(false)`
/// (with `a` overwritten) when `A` is not positive definite (a pivot is not positive or not
/// finite); `Err` when the interrupt hook asks to stop.
pub(crate) fn spd_inverse_in_place(a: &mut [f64], work: &mut [f64], n: usize) -> Result<bool> {
    assert!(
        a.len() >= n * n && work.len() >= n * n,
        "spd_inverse_in_place: buffers too short"
    );
    if !cholesky_lower(a, n)? {
        return Ok(false);
    }
    let w = &mut work[..n * n];
    lower_inverse(a, w, n)?;
    // A⁻¹ = Wᵀ W: T[i][j] = Σ_{p >= max(i, j)} W[p][i] W[p][j], block of p after block of p.
    a[..n * n].fill(0.0);
    let mut p0 = 0;
    while p0 < n {
        interrupt::check_now()?;
        let p1 = (p0 + KC).min(n);
        // Rows p0..p1 of W are zero beyond column p1 - 1: only T's leading p1 x p1 block changes.
        accumulate(
            a,
            n,
            &Product {
                x: w,
                ldx: n,
                y: w,
                ldy: n,
                p: (p0, p1),
                m: p1,
                n: p1,
                lower: true,
                y_lower: false,
                subtract: false,
            },
        );
        p0 = p1;
    }
    mirror_lower(a, n);
    Ok(true)
}

/// The lower Cholesky factor of `a` in place (its strictly upper triangle is left as scratch);
/// `Ok(false)` at a pivot that is not positive or not finite.
fn cholesky_lower(a: &mut [f64], n: usize) -> Result<bool> {
    let mut panel = Vec::new();
    let mut k0 = 0;
    while k0 < n {
        interrupt::check_now()?;
        let b = NB.min(n - k0);
        // The diagonal block, unblocked (earlier blocks' terms were subtracted by their updates).
        for j in 0..b {
            let row_j = (k0 + j) * n;
            let d = a[row_j + k0 + j] - dense_dot(&a[row_j + k0..row_j + k0 + j], &a[row_j + k0..row_j + k0 + j]);
            if !(d > 0.0 && d.is_finite()) {
                return Ok(false);
            }
            let ljj = d.sqrt();
            a[row_j + k0 + j] = ljj;
            for i in j + 1..b {
                let row_i = (k0 + i) * n;
                let s = dense_dot(&a[row_i + k0..row_i + k0 + j], &a[row_j + k0..row_j + k0 + j]);
                a[row_i + k0 + j] = (a[row_i + k0 + j] - s) / ljj;
            }
        }
        let rest = n - k0 - b;
        if rest == 0 {
            break;
        }
        // The panel below it: each row r solves x L_kkᵀ = a[r][k0..k0 + b].
        for r in k0 + b..n {
            for j in 0..b {
                let (diag, row) = split_rows(a, n, k0 + j, r);
                let s = dense_dot(&row[k0..k0 + j], &diag[k0..k0 + j]);
                row[k0 + j] = (row[k0 + j] - s) / diag[k0 + j];
            }
        }
        // The trailing update A22 -= P Pᵀ (lower), with P transposed to p-major.
        transpose_into(a, n, k0 + b, rest, k0, b, &mut panel);
        let start = (k0 + b) * n + k0 + b;
        accumulate(
            &mut a[start..],
            n,
            &Product {
                x: &panel,
                ldx: rest,
                y: &panel,
                ldy: rest,
                p: (0, b),
                m: rest,
                n: rest,
                lower: true,
                y_lower: false,
                subtract: true,
            },
        );
        k0 += b;
    }
    Ok(true)
}

/// `W = L⁻¹` (lower, row-major, into `w`) from the lower triangle of `l`, one block row at a
/// time: `L_II [W_I0 | W_II] = [-L_I0 W_00 | I]`, the product through [`accumulate`] and the
/// solve by forward substitution over whole rows.
fn lower_inverse(l: &[f64], w: &mut [f64], n: usize) -> Result<()> {
    w.fill(0.0);
    let mut lt = Vec::new();
    let mut i0 = 0;
    while i0 < n {
        interrupt::check_now()?;
        let b = NB.min(n - i0);
        if i0 > 0 {
            // W[I][0..i0] = L[I][0..i0] W[0..i0][0..i0], with L's block row transposed.
            transpose_into(l, n, i0, b, 0, i0, &mut lt);
            let (done, block) = w.split_at_mut(i0 * n);
            accumulate(
                block,
                n,
                &Product {
                    x: &lt,
                    ldx: b,
                    y: done,
                    ldy: n,
                    p: (0, i0),
                    m: b,
                    n: i0,
                    lower: false,
                    y_lower: true,
                    subtract: true,
                },
            );
        }
        // Right-hand side [-L_I0 W_00 | I] (the product already subtracted), then forward
        // substitution: row r -= L[r][q] row q (q < r), row r /= L[r][r].
        for r in 0..b {
            w[(i0 + r) * n + i0 + r] = 1.0;
        }
        for r in 0..b {
            let width = i0 + r + 1;
            for q in 0..r {
                let f = l[(i0 + r) * n + i0 + q];
                let (row_q, row_r) = split_rows(w, n, i0 + q, i0 + r);
                dense_axpy(-f, &row_q[..width], &mut row_r[..width]);
            }
            let d = l[(i0 + r) * n + i0 + r];
            w[(i0 + r) * n..(i0 + r) * n + width].iter_mut().for_each(|v| *v /= d);
        }
        // Entries that underflow towards the subnormal range are flushed to zero (they decay
        // geometrically along a path graph: W of a 3,000-task chain reaches 1e-627): subnormal
        // operands make every multiply-add ~100x slower, and such entries change no entry of
        // `Wᵀ W` above `n 1e-150` of its largest.
        let scale = (i0..i0 + b).fold(0.0f64, |m, i| m.max(1.0 / l[i * n + i]));
        flush_tiny(&mut w[i0 * n..(i0 + b) * n], FLUSH_BELOW * scale);
        i0 += b;
    }
    Ok(())
}

/// Values below this times the largest diagonal entry of `L⁻¹` are flushed to zero (their
/// products stay above the smallest normal double).
const FLUSH_BELOW: f64 = 1e-150;

/// Sets every value of magnitude below `tiny` to zero.
fn flush_tiny(values: &mut [f64], tiny: f64) {
    values.iter_mut().filter(|v| v.abs() < tiny).for_each(|v| *v = 0.0);
}

/// Copies the strictly lower triangle onto the upper one, in 32 x 32 tiles (a plain double loop
/// writes one cache line per value once n rows exceed the cache).
fn mirror_lower(a: &mut [f64], n: usize) {
    const T: usize = 32;
    for i0 in (0..n).step_by(T) {
        for j0 in (0..=i0).step_by(T) {
            for i in i0..(i0 + T).min(n) {
                for j in j0..(j0 + T).min(i) {
                    a[j * n + i] = a[i * n + j];
                }
            }
        }
    }
}

/// `out[c * rows + r] = m[(r0 + r) * ld + c0 + c]` for `r < rows`, `c < cols`: a block of a
/// row-major matrix transposed, in 32 x 32 tiles.
fn transpose_into(m: &[f64], ld: usize, r0: usize, rows: usize, c0: usize, cols: usize, out: &mut Vec<f64>) {
    const T: usize = 32;
    out.clear();
    out.resize(rows * cols, 0.0);
    for rt in (0..rows).step_by(T) {
        for ct in (0..cols).step_by(T) {
            for r in rt..(rt + T).min(rows) {
                let row = &m[(r0 + r) * ld + c0..];
                for c in ct..(ct + T).min(cols) {
                    out[c * rows + r] = row[c];
                }
            }
        }
    }
}

/// Rows `i < j` of a row-major matrix with `n` columns, the first shared, the second mutable.
fn split_rows(m: &mut [f64], n: usize, i: usize, j: usize) -> (&[f64], &mut [f64]) {
    debug_assert!(i < j);
    let (head, tail) = m.split_at_mut(j * n);
    (&head[i * n..(i + 1) * n], &mut tail[..n])
}

/// `C[i][j] ±= Σ_{p0 <= p < p1} X[p][i] Y[p][j]` for `i < m`, `j < n` (`j <= i` only, when
/// `lower`), with `X[p][i] = x[p * ldx + i]`, `Y[p][j] = y[p * ldy + j]` and
/// `C[i][j] = c[i * ldc + j]`. `y_lower` says `Y[p][j] = 0` for `j > p` (a lower triangular Y: those columns are
/// skipped block by block). With `lower`, entries of the micro-tiles crossing the diagonal above
/// it are written too (scratch for the callers).
struct Product<'a> {
    x: &'a [f64],
    ldx: usize,
    y: &'a [f64],
    ldy: usize,
    p: (usize, usize),
    m: usize,
    n: usize,
    lower: bool,
    y_lower: bool,
    subtract: bool,
}

fn accumulate(c: &mut [f64], ldc: usize, prod: &Product) {
    accumulate_build(c, ldc, prod)
}

fma_builds! {
    fn accumulate_build(c: &mut [f64], ldc: usize, prod: &Product) {
        avx512: accumulate_lanes::<std::arch::x86_64::__m512d>(c, ldc, prod),
        avx2: accumulate_lanes::<std::arch::x86_64::__m256d>(c, ldc, prod),
        // SAFETY: plain arrays need no CPU feature.
        portable: unsafe { accumulate_lanes::<[f64; 4]>(c, ldc, prod) },
    }
}

/// The Goto loops: blocks of `NC` columns of Y, `KC` values of p and `MC` rows of X packed in
/// turn, then every `MR x 2 L::N` micro-tile of the block.
///
/// # Safety
/// As for [`Lanes`].
#[inline(always)]
unsafe fn accumulate_lanes<L: Lanes>(c: &mut [f64], ldc: usize, prod: &Product) {
    let nr = 2 * L::N;
    let (p0, p1) = prod.p;
    let mut xpack = vec![0.0; KC * MC.next_multiple_of(MR)];
    let mut ypack = vec![0.0; KC * NC.next_multiple_of(nr)];
    let mut tile = [0.0f64; MR * 16];
    let mut jc = 0;
    while jc < prod.n {
        let nc = NC.min(prod.n - jc);
        let mut pc = p0;
        while pc < p1 {
            let kc = KC.min(p1 - pc);
            // Columns of Y that are zero in this block of p (lower triangular Y) are skipped.
            let n_live = if prod.y_lower {
                nc.min((pc + kc).saturating_sub(jc))
            } else {
                nc
            };
            if n_live == 0 {
                pc += kc;
                continue;
            }
            match nr {
                8 => pack::<8>(prod.y, prod.ldy, pc, kc, jc, n_live, &mut ypack),
                _ => pack::<16>(prod.y, prod.ldy, pc, kc, jc, n_live, &mut ypack),
            }
            let mut ic = 0;
            while ic < prod.m {
                let mc = MC.min(prod.m - ic);
                if prod.lower && jc >= ic + mc {
                    ic += mc;
                    continue; // the whole block lies above the diagonal
                }
                pack::<MR>(prod.x, prod.ldx, pc, kc, ic, mc, &mut xpack);
                let mut jr = 0;
                while jr < n_live {
                    let nw = nr.min(n_live - jr);
                    let yp = &ypack[jr * kc..(jr + nr) * kc];
                    let mut ir = 0;
                    while ir < mc {
                        let mw = MR.min(mc - ir);
                        let (i0, j0) = (ic + ir, jc + jr);
                        if !(prod.lower && j0 > i0 + mw - 1) {
                            // The tile's rows of C are far apart: ask for them before the
                            // multiply-adds, so that the misses overlap with them.
                            for r in 0..mw {
                                prefetch(c[(i0 + r) * ldc + j0..].as_ptr());
                                prefetch(c[(i0 + r) * ldc + j0 + nw - 1..].as_ptr());
                            }
                            let xp = &xpack[ir * kc..(ir + MR) * kc];
                            let acc = micro_tile::<L>(kc, xp, yp);
                            for (r, a) in acc.iter().enumerate() {
                                a[0].store(&mut tile[r * nr..]);
                                a[1].store(&mut tile[r * nr + L::N..]);
                            }
                            for r in 0..mw {
                                let out = &mut c[(i0 + r) * ldc + j0..(i0 + r) * ldc + j0 + nw];
                                let t = &tile[r * nr..r * nr + nw];
                                if prod.subtract {
                                    out.iter_mut().zip(t).for_each(|(o, v)| *o -= v);
                                } else {
                                    out.iter_mut().zip(t).for_each(|(o, v)| *o += v);
                                }
                            }
                        }
                        ir += MR;
                    }
                    jr += nr;
                }
                ic += mc;
            }
            pc += kc;
        }
        jc += nc;
    }
}

/// Packs `M[p][c0..c0 + width]` for `p` in `p0..p0 + kc` (`M[p][c] = m[p * ld + c]`) into
/// panels of `W` columns: the panel of columns `g..g + W` holds `kc` rows of `W` values (zero
/// past `width`) from `g * kc` on. (`W` is a constant so that each row is a few moves, not a
/// call to `memcpy`.)
#[inline(always)]
fn pack<const W: usize>(m: &[f64], ld: usize, p0: usize, kc: usize, c0: usize, width: usize, out: &mut [f64]) {
    // Row after row of M (each read once, in order), spread over the panels.
    for p in 0..kc {
        let row = &m[(p0 + p) * ld + c0..(p0 + p) * ld + c0 + width];
        let mut g = 0;
        while g < width {
            let dst = &mut out[g * kc + p * W..g * kc + (p + 1) * W];
            if g + W <= width {
                let src: &[f64; W] = row[g..g + W].try_into().expect("W values");
                dst.copy_from_slice(src);
            } else {
                let cols = width - g;
                dst[..cols].copy_from_slice(&row[g..]);
                dst[cols..].fill(0.0);
            }
            g += W;
        }
    }
}

/// `acc[r][h] = Σ_p xp[p][r] yp[p][h L::N..(h + 1) L::N]` over `kc` values of p: `MR x 2`
/// registers of sums, each step two loads of Y, `MR` broadcasts of X and `2 MR` multiply-adds.
///
/// # Safety
/// As for [`Lanes`].
#[inline(always)]
unsafe fn micro_tile<L: Lanes>(kc: usize, xp: &[f64], yp: &[f64]) -> [[L; 2]; MR] {
    let nr = 2 * L::N;
    let mut acc = [[L::zero(); 2]; MR];
    for (xs, ys) in xp[..kc * MR].chunks_exact(MR).zip(yp[..kc * nr].chunks_exact(nr)) {
        let (y0, y1) = (L::load(ys), L::load(&ys[L::N..]));
        for r in 0..MR {
            let x = L::splat(xs[r]);
            acc[r][0] = x.mul_add(y0, acc[r][0]);
            acc[r][1] = x.mul_add(y1, acc[r][1]);
        }
    }
    acc
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SplitMix64;
    use crate::simd::{runnable_levels, with_level};

    /// A random SPD matrix `B Bᵀ / n + I` (well conditioned) of order n, B's entries in
    /// [-1/2, 1/2) on a grid of n steps.
    fn random_spd(n: usize, seed: u64) -> Vec<f64> {
        let mut rng = SplitMix64::new(seed);
        let b: Vec<f64> = (0..n * n)
            .map(|_| rng.below(n as u64 + 1) as f64 / n as f64 - 0.5)
            .collect();
        let mut a = vec![0.0; n * n];
        for i in 0..n {
            for j in 0..n {
                a[i * n + j] = (0..n).map(|k| b[i * n + k] * b[j * n + k]).sum::<f64>() / n as f64;
            }
            a[i * n + i] += 1.0;
        }
        a
    }

    #[test]
    fn the_inverse_times_the_matrix_is_the_identity_at_every_level_and_size() {
        // Sizes around the block sizes (MR, NR, NB, KC, MC) and their multiples.
        for level in runnable_levels() {
            for n in [1, 2, 5, 6, 7, 17, 64, 127, 128, 129, 150, 300, 301] {
                let a = random_spd(n, n as u64);
                let mut inv = a.clone();
                let mut work = vec![0.0; n * n];
                assert!(with_level(level, || spd_inverse_in_place(&mut inv, &mut work, n)).unwrap());
                let mut worst = 0.0f64;
                for i in 0..n {
                    for j in 0..n {
                        let e: f64 = (0..n).map(|k| a[i * n + k] * inv[k * n + j]).sum();
                        worst = worst.max((e - f64::from(u8::from(i == j))).abs());
                        assert_eq!(inv[i * n + j], inv[j * n + i]);
                    }
                }
                assert!(worst < 1e-12, "{level:?}, n = {n}: |A A⁻¹ - I| = {worst:e}");
            }
        }
    }

    #[test]
    fn a_matrix_that_is_not_positive_definite_is_refused() {
        for n in [3, 200] {
            let mut a = random_spd(n, 3);
            a[(n - 1) * n + n - 1] = -1.0;
            let mut work = vec![0.0; n * n];
            assert!(!spd_inverse_in_place(&mut a, &mut work, n).unwrap());
        }
        let mut nan = vec![f64::NAN];
        assert!(!spd_inverse_in_place(&mut nan, &mut [0.0], 1).unwrap());
    }
}
