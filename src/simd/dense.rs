//! Plain-Rust kernels over dense slices, each compiled for every level by [`fma_builds!`] from
//! one body: the arithmetic is the same in every build (no fused multiply-add), only the vector
//! width differs, so their results are the same bits whatever `OMTL_SIMD` says.

use super::fma_builds;

fma_builds! {
    /// `<a, b>` for dense slices.
    pub fn dense_dot(a: &[f64], b: &[f64]) -> f64 {
        avx2: dot4(a, b),
        portable: dot4(a, b),
    }
}

/// `<a, b>` with four independent accumulators (the same order of operations as
/// the dispatching [`dense_dot`]), always inlined so that it takes the vector width of its caller.
/// `a` may be stored in single precision (BatchMtl's examples): each value is widened to f64
/// before its product, so the sum is the f64 one of the widened values.
#[inline(always)]
pub(crate) fn dot4<T: Copy + Into<f64>>(a: &[T], b: &[f64]) -> f64 {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut acc = [0.0f64; 4];
    let chunks = n / 4;
    for c in 0..chunks {
        let i = 4 * c;
        acc[0] += a[i].into() * b[i];
        acc[1] += a[i + 1].into() * b[i + 1];
        acc[2] += a[i + 2].into() * b[i + 2];
        acc[3] += a[i + 3].into() * b[i + 3];
    }
    let mut tail = 0.0;
    for i in 4 * chunks..n {
        tail += a[i].into() * b[i];
    }
    (acc[0] + acc[1]) + (acc[2] + acc[3]) + tail
}

fma_builds! {
    /// Index of the first NaN or ±inf in `values`.
    pub fn first_non_finite(values: &[f64]) -> Option<usize> {
        avx2: first_non_finite_kernel(values),
        portable: first_non_finite_kernel(values),
    }
}

/// Scans in chunks with a branch-free count, so the compiler vectorises the scan (an early-exit
/// `position` runs one value per iteration), and looks for the exact position only inside a
/// chunk that has a non-finite value. A value is NaN or ±inf iff its exponent bits are all ones;
/// an integer test, because a float reduction (a sum of `v - v`) is a serial chain the compiler
/// may not reorder.
#[inline(always)]
pub(crate) fn first_non_finite_kernel(values: &[f64]) -> Option<usize> {
    const EXPONENT: u64 = 0x7ff0_0000_0000_0000;
    const CHUNK: usize = 4096; // 32 KiB: the scan for the position re-reads it from L1/L2
    for (c, chunk) in values.chunks(CHUNK).enumerate() {
        let n_bad: u64 = chunk
            .iter()
            .map(|v| u64::from(v.to_bits() & EXPONENT == EXPONENT))
            .sum();
        if n_bad > 0 {
            return chunk.iter().position(|v| !v.is_finite()).map(|p| c * CHUNK + p);
        }
    }
    None
}

fma_builds! {
    /// `y += alpha x` for dense slices.
    pub fn dense_axpy(alpha: f64, x: &[f64], y: &mut [f64]) {
        avx2: axpy_kernel(alpha, x, y),
        portable: axpy_kernel(alpha, x, y),
    }
}

#[inline(always)]
fn axpy_kernel(alpha: f64, x: &[f64], y: &mut [f64]) {
    y.iter_mut().zip(x).for_each(|(yi, &xi)| *yi += alpha * xi);
}

fma_builds! {
    /// `p -= Σ_j c_j b_j` for the `m` columns of a column-major `d x m` matrix `b` (four columns
    /// per pass: one load and one store of `p` per four multiply-adds).
    pub fn sub_columns(b: &[f64], d: usize, m: usize, c: &[f64], p: &mut [f64]) {
        avx2: sub_columns_kernel(b, d, m, c, p),
        portable: sub_columns_kernel(b, d, m, c, p),
    }
}

#[inline(always)]
fn sub_columns_kernel(b: &[f64], d: usize, m: usize, c: &[f64], p: &mut [f64]) {
    let p = &mut p[..d];
    let mut j = 0;
    while j + 4 <= m {
        let (w0, w1, w2, w3) = (c[j], c[j + 1], c[j + 2], c[j + 3]);
        let b0 = &b[j * d..(j + 1) * d];
        let b1 = &b[(j + 1) * d..(j + 2) * d];
        let b2 = &b[(j + 2) * d..(j + 3) * d];
        let b3 = &b[(j + 3) * d..(j + 4) * d];
        for ((((o, &v0), &v1), &v2), &v3) in p.iter_mut().zip(b0).zip(b1).zip(b2).zip(b3) {
            *o -= ((v0 * w0 + v1 * w1) + v2 * w2) + v3 * w3;
        }
        j += 4;
    }
    while j < m {
        let w = c[j];
        p.iter_mut().zip(&b[j * d..(j + 1) * d]).for_each(|(o, &v)| *o -= w * v);
        j += 1;
    }
}

fma_builds! {
    /// `out = B P` for a column-major `d x m` `B` and a row-major `m x r` `P` (`out` column-major
    /// `d x r`), in blocks of rows, four input columns per pass.
    pub fn columns_times(b: &[f64], d: usize, m: usize, p: &[f64], r: usize, out: &mut [f64]) {
        avx2: columns_times_kernel(b, d, m, p, r, out),
        portable: columns_times_kernel(b, d, m, p, r, out),
    }
}

#[inline(always)]
fn columns_times_kernel(b: &[f64], d: usize, m: usize, p: &[f64], r: usize, out: &mut [f64]) {
    const BLOCK: usize = 512;
    let mut r0 = 0;
    while r0 < d {
        let len = BLOCK.min(d - r0);
        for l in 0..r {
            let o = &mut out[l * d + r0..l * d + r0 + len];
            o.fill(0.0);
            let mut j = 0;
            while j + 4 <= m {
                let (w0, w1, w2, w3) = (p[j * r + l], p[(j + 1) * r + l], p[(j + 2) * r + l], p[(j + 3) * r + l]);
                let b0 = &b[j * d + r0..j * d + r0 + len];
                let b1 = &b[(j + 1) * d + r0..(j + 1) * d + r0 + len];
                let b2 = &b[(j + 2) * d + r0..(j + 2) * d + r0 + len];
                let b3 = &b[(j + 3) * d + r0..(j + 3) * d + r0 + len];
                for ((((x, &v0), &v1), &v2), &v3) in o.iter_mut().zip(b0).zip(b1).zip(b2).zip(b3) {
                    *x += ((v0 * w0 + v1 * w1) + v2 * w2) + v3 * w3;
                }
                j += 4;
            }
            while j < m {
                let w = p[j * r + l];
                o.iter_mut()
                    .zip(&b[j * d + r0..j * d + r0 + len])
                    .for_each(|(x, &v)| *x += w * v);
                j += 1;
            }
        }
        r0 += len;
    }
}

fma_builds! {
    /// `B ← B P` in place for a column-major `d x m` `B` and a row-major `m x r` `P` with
    /// `r <= m`: the result occupies the first `r` columns (one block of rows at a time through
    /// a scratch copy of `O(BLOCK m)`).
    pub fn columns_times_in_place(b: &mut [f64], d: usize, m: usize, p: &[f64], r: usize) {
        avx2: columns_times_in_place_kernel(b, d, m, p, r),
        portable: columns_times_in_place_kernel(b, d, m, p, r),
    }
}

#[inline(always)]
fn columns_times_in_place_kernel(b: &mut [f64], d: usize, m: usize, p: &[f64], r: usize) {
    const BLOCK: usize = 512;
    let mut buf = vec![0.0; BLOCK.min(d) * m];
    let mut out = vec![0.0; BLOCK.min(d) * r];
    let mut r0 = 0;
    while r0 < d {
        let len = BLOCK.min(d - r0);
        for c in 0..m {
            buf[c * len..(c + 1) * len].copy_from_slice(&b[c * d + r0..c * d + r0 + len]);
        }
        columns_times_kernel(&buf[..len * m], len, m, p, r, &mut out[..len * r]);
        for c in 0..r {
            b[c * d + r0..c * d + r0 + len].copy_from_slice(&out[c * len..(c + 1) * len]);
        }
        r0 += len;
    }
}
