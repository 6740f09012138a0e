//! Run-time selection of AVX2 builds for the few hot loops (the default x86-64 target only
//! assumes SSE2). The arithmetic is identical in both builds: only the vector width differs.

/// True when the CPU runs the AVX2 builds of the kernels below. The arithmetic is the same in
/// both builds (Rust never fuses a multiply and an add on its own), only wider.
#[cfg(target_arch = "x86_64")]
pub(crate) fn has_avx2() -> bool {
    std::arch::is_x86_feature_detected!("avx2")
}

/// Defines `$name` (dispatching) over `$kernel`, compiled twice: with AVX2 and without.
macro_rules! dispatch {
    ($(#[$doc:meta])* $vis:vis fn $name:ident($($arg:ident: $ty:ty),*) $(-> $ret:ty)? => $kernel:ident, $avx:ident) => {
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx2")]
        unsafe fn $avx($($arg: $ty),*) $(-> $ret)? {
            $kernel($($arg),*)
        }

        $(#[$doc])*
        $vis fn $name($($arg: $ty),*) $(-> $ret)? {
            #[cfg(target_arch = "x86_64")]
            if $crate::linalg::simd::has_avx2() {
                // SAFETY: the CPU supports AVX2 (checked at run time), the only requirement.
                return unsafe { $avx($($arg),*) };
            }
            $kernel($($arg),*)
        }
    };
}

pub(crate) use dispatch;

dispatch! {
    /// `<a, b>` for dense slices (AVX2 when available).
    pub fn dense_dot(a: &[f64], b: &[f64]) -> f64 => dot4, dense_dot_avx2
}

/// `<a, b>` with four independent accumulators (the same order of operations as
/// `data::dot_dense`), always inlined so that it takes the vector width of its caller.
#[inline(always)]
pub(crate) fn dot4(a: &[f64], b: &[f64]) -> f64 {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut acc = [0.0f64; 4];
    let chunks = n / 4;
    for c in 0..chunks {
        let i = 4 * c;
        acc[0] += a[i] * b[i];
        acc[1] += a[i + 1] * b[i + 1];
        acc[2] += a[i + 2] * b[i + 2];
        acc[3] += a[i + 3] * b[i + 3];
    }
    let mut tail = 0.0;
    for i in 4 * chunks..n {
        tail += a[i] * b[i];
    }
    (acc[0] + acc[1]) + (acc[2] + acc[3]) + tail
}

dispatch! {
    /// Index of the first NaN or ±inf in `values` (AVX2 when available).
    pub fn first_non_finite(values: &[f64]) -> Option<usize> => first_non_finite_kernel, first_non_finite_avx2
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

dispatch! {
    /// `y += alpha x` for dense slices (AVX2 when available).
    pub fn dense_axpy(alpha: f64, x: &[f64], y: &mut [f64]) => axpy_kernel, dense_axpy_avx2
}

#[inline(always)]
fn axpy_kernel(alpha: f64, x: &[f64], y: &mut [f64]) {
    y.iter_mut().zip(x).for_each(|(yi, &xi)| *yi += alpha * xi);
}

dispatch! {
    /// `out[j] = <b_j, x>` for the `m` columns `b_j = b[j*d..(j+1)*d]` of a column-major `d x m`
    /// matrix and a dense `x` (four columns per pass, so `x` is loaded once per four products).
    pub fn columns_dot(b: &[f64], d: usize, m: usize, x: &[f64], out: &mut [f64]) => columns_dot_kernel, columns_dot_avx2
}

#[inline(always)]
fn columns_dot_kernel(b: &[f64], d: usize, m: usize, x: &[f64], out: &mut [f64]) {
    let x = &x[..d];
    let mut j = 0;
    while j + 4 <= m {
        let (b0, b1, b2, b3) = (
            &b[j * d..(j + 1) * d],
            &b[(j + 1) * d..(j + 2) * d],
            &b[(j + 2) * d..(j + 3) * d],
            &b[(j + 3) * d..(j + 4) * d],
        );
        let mut acc = [[0.0f64; 4]; 4];
        let chunks = d / 4;
        for c in 0..chunks {
            let i = 4 * c;
            for l in 0..4 {
                let xv = x[i + l];
                acc[0][l] += b0[i + l] * xv;
                acc[1][l] += b1[i + l] * xv;
                acc[2][l] += b2[i + l] * xv;
                acc[3][l] += b3[i + l] * xv;
            }
        }
        for (q, col) in [b0, b1, b2, b3].iter().enumerate() {
            let mut tail = 0.0;
            for i in 4 * chunks..d {
                tail += col[i] * x[i];
            }
            out[j + q] = (acc[q][0] + acc[q][1]) + (acc[q][2] + acc[q][3]) + tail;
        }
        j += 4;
    }
    while j < m {
        out[j] = dot4(&b[j * d..(j + 1) * d], x);
        j += 1;
    }
}

dispatch! {
    /// `p -= Σ_j c_j b_j` for the `m` columns of a column-major `d x m` matrix `b` (four columns
    /// per pass: one load and one store of `p` per four multiply-adds).
    pub fn sub_columns(b: &[f64], d: usize, m: usize, c: &[f64], p: &mut [f64]) => sub_columns_kernel, sub_columns_avx2
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

dispatch! {
    /// `out = B P` for a column-major `d x m` `B` and a row-major `m x r` `P` (`out` column-major
    /// `d x r`), in blocks of rows, four input columns per pass.
    pub fn columns_times(b: &[f64], d: usize, m: usize, p: &[f64], r: usize, out: &mut [f64]) => columns_times_kernel, columns_times_avx2
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

dispatch! {
    /// `B ← B P` in place for a column-major `d x m` `B` and a row-major `m x r` `P` with
    /// `r <= m`: the result occupies the first `r` columns (one block of rows at a time through
    /// a scratch copy of `O(BLOCK m)`).
    pub fn columns_times_in_place(b: &mut [f64], d: usize, m: usize, p: &[f64], r: usize) => columns_times_in_place_kernel, columns_times_in_place_avx2
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

dispatch! {
    /// `out = A B` for small row-major matrices (`A` is `rows x inner`, `B` is `inner x cols`),
    /// with eight (then four) outputs of a row accumulated in registers over the inner index, so
    /// no output is stored and re-read per term. Sums run in the inner index's order.
    pub(crate) fn matmul(a: &[f64], b: &[f64], rows: usize, inner: usize, cols: usize, out: &mut [f64]) => matmul_kernel, matmul_avx2
}

#[inline(always)]
fn matmul_kernel(a: &[f64], b: &[f64], rows: usize, inner: usize, cols: usize, out: &mut [f64]) {
    assert!(a.len() >= rows * inner && b.len() >= inner * cols && out.len() >= rows * cols);
    for i in 0..rows {
        let a_row = &a[i * inner..(i + 1) * inner];
        let out_row = &mut out[i * cols..(i + 1) * cols];
        let mut c = 0;
        while c + 8 <= cols {
            out_row[c..c + 8].copy_from_slice(&row_block::<8>(a_row, b, cols, c));
            c += 8;
        }
        if c + 4 <= cols {
            out_row[c..c + 4].copy_from_slice(&row_block::<4>(a_row, b, cols, c));
            c += 4;
        }
        for (cc, o) in out_row.iter_mut().enumerate().skip(c) {
            *o = a_row
                .iter()
                .enumerate()
                .fold(0.0, |acc, (k, &aik)| acc + aik * b[k * cols + cc]);
        }
    }
}

/// Columns `c..c+W` of `a_row · B`.
#[inline(always)]
fn row_block<const W: usize>(a_row: &[f64], b: &[f64], cols: usize, c: usize) -> [f64; W] {
    let mut acc = [0.0f64; W];
    for (k, &aik) in a_row.iter().enumerate() {
        let block = &b[k * cols + c..k * cols + c + W];
        for l in 0..W {
            acc[l] += aik * block[l];
        }
    }
    acc
}
