//! Run-time selection of wider builds for the few hot loops (the default x86-64 target only
//! assumes SSE2). Every choice goes through one [`level`]: the widest build the CPU runs, capped
//! by the environment variable `OMTL_SIMD` (`portable`, `avx2` or `avx512`; never above what the
//! CPU has), read once. Two mechanisms use it:
//! - `dispatch!`: the same plain-Rust kernel compiled with and without AVX2; the arithmetic is
//!   identical in both builds, only the vector width differs;
//! - `Lanes`: kernels written over SIMD registers with fused multiply-adds (AVX-512 or
//!   AVX2 + FMA, and a portable array build): `columns_dot`, `matmul`, the dense kernel sums,
//!   ROMCO's right multiplication (`svt::right_multiply_in_place`) and the inverse Gram
//!   matrix's projection and rank-2 step (`sym_lower_matvec`, `lower_rank2_update`). Their last
//!   bits depend on the build, so `OMTL_SIMD` lets a test run show every build's results on one
//!   machine.

use std::sync::OnceLock;

/// A SIMD build, ordered from narrowest to widest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum SimdLevel {
    /// Plain Rust, no fused multiply-add: what any x86-64 (or other) CPU runs.
    Portable,
    /// AVX2 with FMA.
    Avx2,
    /// AVX-512F with FMA.
    Avx512,
}

impl SimdLevel {
    /// The name `OMTL_SIMD` takes.
    pub fn name(self) -> &'static str {
        match self {
            SimdLevel::Portable => "portable",
            SimdLevel::Avx2 => "avx2",
            SimdLevel::Avx512 => "avx512",
        }
    }

    /// Parses an `OMTL_SIMD` value (case-insensitive, surrounding blanks ignored).
    pub fn parse(name: &str) -> Option<SimdLevel> {
        match name.trim().to_ascii_lowercase().as_str() {
            "portable" => Some(SimdLevel::Portable),
            "avx2" => Some(SimdLevel::Avx2),
            "avx512" => Some(SimdLevel::Avx512),
            _ => None,
        }
    }
}

/// Every build this CPU runs, narrowest first (what the tests run each kernel under).
pub fn runnable_levels() -> Vec<SimdLevel> {
    let top = detected_level();
    [SimdLevel::Portable, SimdLevel::Avx2, SimdLevel::Avx512]
        .into_iter()
        .filter(|&l| l <= top)
        .collect()
}

/// The widest build this CPU runs: the one place that asks the CPU.
pub fn detected_level() -> SimdLevel {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::is_x86_feature_detected as has;
        if has!("avx512f") && has!("avx2") && has!("fma") {
            return SimdLevel::Avx512;
        }
        if has!("avx2") && has!("fma") {
            return SimdLevel::Avx2;
        }
    }
    SimdLevel::Portable
}

/// The build every dispatching kernel uses: [`detected_level`] capped by `OMTL_SIMD`. Read once
/// per process; an unknown value is ignored (the Python package warns about it at import).
pub fn level() -> SimdLevel {
    static LEVEL: OnceLock<SimdLevel> = OnceLock::new();
    *LEVEL.get_or_init(|| {
        let cap = std::env::var("OMTL_SIMD").ok().and_then(|v| SimdLevel::parse(&v));
        let detected = detected_level();
        cap.map_or(detected, |c| c.min(detected))
    })
}

/// True when the kernels below run their AVX2 builds. The arithmetic is the same in both
/// builds (Rust never fuses a multiply and an add on its own), only wider.
#[cfg(target_arch = "x86_64")]
#[inline]
pub(crate) fn has_avx2() -> bool {
    level() >= SimdLevel::Avx2
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
            if $crate::simd::has_avx2() {
                // SAFETY: the CPU supports AVX2 (checked at run time), the only requirement.
                return unsafe { $avx($($arg),*) };
            }
            $kernel($($arg),*)
        }
    };
}

pub(crate) use dispatch;

/// Defines `$name`, dispatching on [`level`] to builds of a body that may fuse multiply-adds (it
/// chooses with a `const FAST` flag): `avx512` compiled for AVX-512F + AVX2 + FMA (when given),
/// `avx2` for AVX2 + FMA (also run at the AVX-512 level without an `avx512` body), `portable`
/// otherwise. The fused builds change last bits, which is why `make test-simd-levels` exists.
macro_rules! fma_builds {
    ($(#[$doc:meta])* $vis:vis fn $name:ident($($arg:ident: $ty:ty),*) $(-> $ret:ty)? {
        avx512: $avx512:expr, avx2: $avx2:expr, portable: $portable:expr $(,)?
    }) => {
        $(#[$doc])*
        $vis fn $name($($arg: $ty),*) $(-> $ret)? {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f,avx2,fma")]
                unsafe fn avx512($($arg: $ty),*) $(-> $ret)? {
                    $avx512
                }
                if $crate::simd::level() == $crate::simd::SimdLevel::Avx512 {
                    // SAFETY: the CPU runs AVX-512F, AVX2 and FMA (a level never exceeds the CPU's).
                    return unsafe { avx512($($arg),*) };
                }
            }
            $crate::simd::fma_builds!(@avx2 ($($arg: $ty),*) $(-> $ret)?, $avx2);
            $portable
        }
    };
    ($(#[$doc:meta])* $vis:vis fn $name:ident($($arg:ident: $ty:ty),*) $(-> $ret:ty)? {
        avx2: $avx2:expr, portable: $portable:expr $(,)?
    }) => {
        $(#[$doc])*
        $vis fn $name($($arg: $ty),*) $(-> $ret)? {
            $crate::simd::fma_builds!(@avx2 ($($arg: $ty),*) $(-> $ret)?, $avx2);
            $portable
        }
    };
    (@avx2 ($($arg:ident: $ty:ty),*) $(-> $ret:ty)?, $avx2:expr) => {
        #[cfg(target_arch = "x86_64")]
        {
            #[target_feature(enable = "avx2,fma")]
            unsafe fn avx2($($arg: $ty),*) $(-> $ret)? {
                $avx2
            }
            if $crate::simd::level() >= $crate::simd::SimdLevel::Avx2 {
                // SAFETY: the CPU runs AVX2 and FMA (a level never exceeds the CPU's).
                return unsafe { avx2($($arg),*) };
            }
        }
    };
}

pub(crate) use fma_builds;

dispatch! {
    /// `<a, b>` for dense slices (AVX2 when available).
    pub fn dense_dot(a: &[f64], b: &[f64]) -> f64 => dot4, dense_dot_avx2
}

/// `<a, b>` with four independent accumulators (the same order of operations as
/// the dispatching [`dense_dot`]), always inlined so that it takes the vector width of its caller.
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

/// `out[j] = <b_j, x>` for the `m` columns `b_j = b[j*d..(j+1)*d]` of a column-major `d x m`
/// matrix and a dense `x` (four columns per pass, so `x` is loaded once per four products).
/// With AVX-512 or AVX2 + FMA the multiply-adds are fused (the last bits can differ from the
/// portable build).
pub fn columns_dot(b: &[f64], d: usize, m: usize, x: &[f64], out: &mut [f64]) {
    assert!(
        b.len() >= d * m && x.len() >= d && out.len() >= m,
        "columns_dot: slices too short"
    );
    #[cfg(target_arch = "x86_64")]
    {
        if level() == SimdLevel::Avx512 {
            // SAFETY: the CPU supports AVX-512F and FMA (a level never exceeds the CPU's).
            return unsafe { columns_dot_avx512(b, d, m, x, out) };
        }
        if level() == SimdLevel::Avx2 {
            // SAFETY: the CPU supports AVX2 and FMA (a level never exceeds the CPU's).
            return unsafe { columns_dot_avx2(b, d, m, x, out) };
        }
    }
    // SAFETY: plain arrays need no CPU feature.
    unsafe { columns_dot_lanes::<[f64; 4]>(b, d, m, x, out) }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,fma")]
unsafe fn columns_dot_avx512(b: &[f64], d: usize, m: usize, x: &[f64], out: &mut [f64]) {
    columns_dot_lanes::<std::arch::x86_64::__m512d>(b, d, m, x, out)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn columns_dot_avx2(b: &[f64], d: usize, m: usize, x: &[f64], out: &mut [f64]) {
    columns_dot_lanes::<std::arch::x86_64::__m256d>(b, d, m, x, out)
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

/// `out = A B` for small row-major matrices (`A` is `rows x inner`, `B` is `inner x cols`),
/// with a row's outputs accumulated in registers over the inner index (no output stored and
/// re-read per term). Fused multiply-adds with AVX-512 or AVX2 + FMA.
pub(crate) fn matmul(a: &[f64], b: &[f64], rows: usize, inner: usize, cols: usize, out: &mut [f64]) {
    assert!(
        a.len() >= rows * inner && b.len() >= inner * cols && out.len() >= rows * cols,
        "matmul: slices too short"
    );
    #[cfg(target_arch = "x86_64")]
    {
        if level() == SimdLevel::Avx512 {
            // SAFETY: the CPU supports AVX-512F and FMA (a level never exceeds the CPU's).
            return unsafe { matmul_avx512(a, b, rows, inner, cols, out) };
        }
        if level() == SimdLevel::Avx2 {
            // SAFETY: the CPU supports AVX2 and FMA (a level never exceeds the CPU's).
            return unsafe { matmul_avx2(a, b, rows, inner, cols, out) };
        }
    }
    // SAFETY: plain arrays need no CPU feature.
    unsafe { matmul_lanes::<[f64; 4], [f64; 2]>(a, b, rows, inner, cols, out) }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,fma")]
unsafe fn matmul_avx512(a: &[f64], b: &[f64], rows: usize, inner: usize, cols: usize, out: &mut [f64]) {
    use std::arch::x86_64::{__m256d, __m512d};
    matmul_lanes::<__m512d, __m256d>(a, b, rows, inner, cols, out)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn matmul_avx2(a: &[f64], b: &[f64], rows: usize, inner: usize, cols: usize, out: &mut [f64]) {
    matmul_lanes::<std::arch::x86_64::__m256d, [f64; 2]>(a, b, rows, inner, cols, out)
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
    #[cfg(target_arch = "x86_64")]
    {
        if level() == SimdLevel::Avx512 {
            // SAFETY: the CPU supports AVX-512F and FMA (a level never exceeds the CPU's).
            return unsafe { sym_lower_matvec_avx512(q, cap, n, x, y) };
        }
        if level() == SimdLevel::Avx2 {
            // SAFETY: the CPU supports AVX2 and FMA (a level never exceeds the CPU's).
            return unsafe { sym_lower_matvec_avx2(q, cap, n, x, y) };
        }
    }
    // SAFETY: plain arrays need no CPU feature.
    unsafe { sym_lower_matvec_lanes::<[f64; 4]>(q, cap, n, x, y) }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,fma")]
unsafe fn sym_lower_matvec_avx512(q: &[f64], cap: usize, n: usize, x: &[f64], y: &mut [f64]) {
    sym_lower_matvec_lanes::<std::arch::x86_64::__m512d>(q, cap, n, x, y)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn sym_lower_matvec_avx2(q: &[f64], cap: usize, n: usize, x: &[f64], y: &mut [f64]) {
    sym_lower_matvec_lanes::<std::arch::x86_64::__m256d>(q, cap, n, x, y)
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
    #[cfg(target_arch = "x86_64")]
    {
        if level() == SimdLevel::Avx512 {
            // SAFETY: the CPU supports AVX-512F and FMA (a level never exceeds the CPU's).
            return unsafe { lower_rank2_update_avx512(q, cap, n, u, v) };
        }
        if level() == SimdLevel::Avx2 {
            // SAFETY: the CPU supports AVX2 and FMA (a level never exceeds the CPU's).
            return unsafe { lower_rank2_update_avx2(q, cap, n, u, v) };
        }
    }
    // SAFETY: plain arrays need no CPU feature.
    unsafe { lower_rank2_update_lanes::<[f64; 4]>(q, cap, n, u, v) }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,fma")]
unsafe fn lower_rank2_update_avx512(q: &mut [f64], cap: usize, n: usize, u: &[f64], v: &[f64]) -> f64 {
    lower_rank2_update_lanes::<std::arch::x86_64::__m512d>(q, cap, n, u, v)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn lower_rank2_update_avx2(q: &mut [f64], cap: usize, n: usize, u: &[f64], v: &[f64]) -> f64 {
    lower_rank2_update_lanes::<std::arch::x86_64::__m256d>(q, cap, n, u, v)
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

/// One SIMD register of `N` f64 lanes (or a plain array of them, for the portable build).
///
/// # Safety
/// The x86 implementations use AVX2 and FMA (`__m256d`) or AVX-512F (`__m512d`) instructions:
/// call their methods only inside functions compiled for those features, after detection.
pub(crate) trait Lanes: Copy {
    const N: usize;
    unsafe fn zero() -> Self;
    unsafe fn splat(x: f64) -> Self;
    /// The first `N` values of `s`.
    unsafe fn load(s: &[f64]) -> Self;
    /// Into the first `N` values of `s`.
    unsafe fn store(self, s: &mut [f64]);
    /// `self * w + acc` (fused in the x86 implementations).
    unsafe fn mul_add(self, w: Self, acc: Self) -> Self;
    /// The sum of the lanes.
    unsafe fn sum(self) -> f64;
    /// The sums of the lanes of four registers (each as `sum` adds them).
    #[inline(always)]
    unsafe fn sum4(v: [Self; 4]) -> [f64; 4] {
        [v[0].sum(), v[1].sum(), v[2].sum(), v[3].sum()]
    }
}

impl<const N: usize> Lanes for [f64; N] {
    const N: usize = N;
    #[inline(always)]
    unsafe fn zero() -> Self {
        [0.0; N]
    }
    #[inline(always)]
    unsafe fn splat(x: f64) -> Self {
        [x; N]
    }
    #[inline(always)]
    unsafe fn load(s: &[f64]) -> Self {
        s[..N].try_into().unwrap()
    }
    #[inline(always)]
    unsafe fn store(self, s: &mut [f64]) {
        s[..N].copy_from_slice(&self);
    }
    #[inline(always)]
    unsafe fn mul_add(self, w: Self, mut acc: Self) -> Self {
        for ((a, &x), &wi) in acc.iter_mut().zip(&self).zip(&w) {
            *a += x * wi;
        }
        acc
    }
    #[inline(always)]
    unsafe fn sum(self) -> f64 {
        self.iter().sum()
    }
}

#[cfg(target_arch = "x86_64")]
impl Lanes for std::arch::x86_64::__m256d {
    const N: usize = 4;
    #[inline(always)]
    unsafe fn zero() -> Self {
        std::arch::x86_64::_mm256_setzero_pd()
    }
    #[inline(always)]
    unsafe fn splat(x: f64) -> Self {
        std::arch::x86_64::_mm256_set1_pd(x)
    }
    #[inline(always)]
    unsafe fn load(s: &[f64]) -> Self {
        std::arch::x86_64::_mm256_loadu_pd(s[..4].as_ptr())
    }
    #[inline(always)]
    unsafe fn store(self, s: &mut [f64]) {
        std::arch::x86_64::_mm256_storeu_pd(s[..4].as_mut_ptr(), self)
    }
    #[inline(always)]
    unsafe fn mul_add(self, w: Self, acc: Self) -> Self {
        std::arch::x86_64::_mm256_fmadd_pd(self, w, acc)
    }
    #[inline(always)]
    unsafe fn sum(self) -> f64 {
        use std::arch::x86_64::*;
        // (a0 + a1) + (a2 + a3) in registers: hadd pairs within each 128-bit half.
        let pairs = _mm256_hadd_pd(self, self);
        _mm_cvtsd_f64(_mm_add_sd(
            _mm256_castpd256_pd128(pairs),
            _mm256_extractf128_pd::<1>(pairs),
        ))
    }
    #[inline(always)]
    unsafe fn sum4(v: [Self; 4]) -> [f64; 4] {
        use std::arch::x86_64::*;
        // A transposing reduction: [a0+a1, b0+b1, a2+a3, b2+b3] and the same for c, d, then
        // the 128-bit halves regrouped and added: (x0 + x1) + (x2 + x3) for each register, as
        // `sum` adds, in 5 instructions for the four instead of 3 each.
        let ab = _mm256_hadd_pd(v[0], v[1]);
        let cd = _mm256_hadd_pd(v[2], v[3]);
        let low = _mm256_permute2f128_pd::<0x20>(ab, cd);
        let high = _mm256_permute2f128_pd::<0x31>(ab, cd);
        let mut out = [0.0; 4];
        _mm256_storeu_pd(out.as_mut_ptr(), _mm256_add_pd(low, high));
        out
    }
}

#[cfg(target_arch = "x86_64")]
impl Lanes for std::arch::x86_64::__m512d {
    const N: usize = 8;
    #[inline(always)]
    unsafe fn zero() -> Self {
        std::arch::x86_64::_mm512_setzero_pd()
    }
    #[inline(always)]
    unsafe fn splat(x: f64) -> Self {
        std::arch::x86_64::_mm512_set1_pd(x)
    }
    #[inline(always)]
    unsafe fn load(s: &[f64]) -> Self {
        std::arch::x86_64::_mm512_loadu_pd(s[..8].as_ptr())
    }
    #[inline(always)]
    unsafe fn store(self, s: &mut [f64]) {
        std::arch::x86_64::_mm512_storeu_pd(s[..8].as_mut_ptr(), self)
    }
    #[inline(always)]
    unsafe fn mul_add(self, w: Self, acc: Self) -> Self {
        std::arch::x86_64::_mm512_fmadd_pd(self, w, acc)
    }
    #[inline(always)]
    unsafe fn sum(self) -> f64 {
        use std::arch::x86_64::*;
        // ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7)) in registers.
        let lo = _mm512_castpd512_pd256(self).sum();
        let hi = _mm512_extractf64x4_pd::<1>(self).sum();
        lo + hi
    }
}

/// Lane-by-lane arithmetic without fused multiply-adds, each operation correctly rounded as its
/// scalar f64 counterpart: a kernel written over it gives the same bits in every build (MTLinear's
/// rates and write-back, which therefore run four lanes in every build).
///
/// # Safety
/// As for [`Lanes`].
pub(crate) trait LaneMath: Lanes {
    unsafe fn add(self, o: Self) -> Self;
    unsafe fn mul(self, o: Self) -> Self;
    unsafe fn div(self, o: Self) -> Self;
    unsafe fn sqrt(self) -> Self;
    unsafe fn abs(self) -> Self;
    /// `if self > o { self } else { o }` per lane (x86's `max`: `o` when either is NaN).
    unsafe fn max(self, o: Self) -> Self;
    /// `if a > b { x } else { y }` per lane.
    unsafe fn select_gt(a: Self, b: Self, x: Self, y: Self) -> Self;
    /// The lanes rounded to f32 (as `as f32` rounds) into the first `N` values of `s`.
    unsafe fn store_f32(self, s: &mut [f32]);
}

impl<const N: usize> LaneMath for [f64; N] {
    #[inline(always)]
    unsafe fn add(mut self, o: Self) -> Self {
        self.iter_mut().zip(o).for_each(|(a, b)| *a += b);
        self
    }
    #[inline(always)]
    unsafe fn mul(mut self, o: Self) -> Self {
        self.iter_mut().zip(o).for_each(|(a, b)| *a *= b);
        self
    }
    #[inline(always)]
    unsafe fn div(mut self, o: Self) -> Self {
        self.iter_mut().zip(o).for_each(|(a, b)| *a /= b);
        self
    }
    #[inline(always)]
    unsafe fn sqrt(mut self) -> Self {
        self.iter_mut().for_each(|a| *a = a.sqrt());
        self
    }
    #[inline(always)]
    unsafe fn abs(mut self) -> Self {
        self.iter_mut().for_each(|a| *a = a.abs());
        self
    }
    #[inline(always)]
    unsafe fn max(mut self, o: Self) -> Self {
        self.iter_mut()
            .zip(o)
            .for_each(|(a, b)| *a = if *a > b { *a } else { b });
        self
    }
    #[inline(always)]
    unsafe fn select_gt(a: Self, b: Self, mut x: Self, y: Self) -> Self {
        for i in 0..N {
            // `y` also where a comparison is unordered (NaN), as the x86 blend does.
            if a[i].partial_cmp(&b[i]) != Some(std::cmp::Ordering::Greater) {
                x[i] = y[i];
            }
        }
        x
    }
    #[inline(always)]
    unsafe fn store_f32(self, s: &mut [f32]) {
        s[..N].iter_mut().zip(self).for_each(|(o, v)| *o = v as f32);
    }
}

#[cfg(target_arch = "x86_64")]
impl LaneMath for std::arch::x86_64::__m256d {
    #[inline(always)]
    unsafe fn add(self, o: Self) -> Self {
        std::arch::x86_64::_mm256_add_pd(self, o)
    }
    #[inline(always)]
    unsafe fn mul(self, o: Self) -> Self {
        std::arch::x86_64::_mm256_mul_pd(self, o)
    }
    #[inline(always)]
    unsafe fn div(self, o: Self) -> Self {
        std::arch::x86_64::_mm256_div_pd(self, o)
    }
    #[inline(always)]
    unsafe fn sqrt(self) -> Self {
        std::arch::x86_64::_mm256_sqrt_pd(self)
    }
    #[inline(always)]
    unsafe fn abs(self) -> Self {
        use std::arch::x86_64::*;
        _mm256_andnot_pd(_mm256_set1_pd(-0.0), self)
    }
    #[inline(always)]
    unsafe fn max(self, o: Self) -> Self {
        std::arch::x86_64::_mm256_max_pd(self, o)
    }
    #[inline(always)]
    unsafe fn select_gt(a: Self, b: Self, x: Self, y: Self) -> Self {
        use std::arch::x86_64::*;
        _mm256_blendv_pd(y, x, _mm256_cmp_pd::<_CMP_GT_OQ>(a, b))
    }
    #[inline(always)]
    unsafe fn store_f32(self, s: &mut [f32]) {
        use std::arch::x86_64::*;
        _mm_storeu_ps(s[..4].as_mut_ptr(), _mm256_cvtpd_ps(self))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SplitMix64;

    #[test]
    fn levels_parse_order_and_never_exceed_the_cpu() {
        for level in [SimdLevel::Portable, SimdLevel::Avx2, SimdLevel::Avx512] {
            assert_eq!(SimdLevel::parse(level.name()), Some(level));
            assert_eq!(
                SimdLevel::parse(&format!(" {} ", level.name().to_uppercase())),
                Some(level)
            );
        }
        assert_eq!(SimdLevel::parse("sse9"), None);
        assert!(SimdLevel::Portable < SimdLevel::Avx2 && SimdLevel::Avx2 < SimdLevel::Avx512);
        assert!(level() <= detected_level());
    }

    fn random(n: usize, seed: u64) -> Vec<f64> {
        let mut rng = SplitMix64::new(seed);
        (0..n)
            .map(|_| (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0)
            .collect()
    }

    /// Every build this CPU runs: (name, columns_dot, matmul).
    #[allow(clippy::type_complexity)]
    fn builds() -> Vec<(
        &'static str,
        fn(&[f64], usize, usize, &[f64], &mut [f64]),
        fn(&[f64], &[f64], usize, usize, usize, &mut [f64]),
    )> {
        let mut out: Vec<(
            &'static str,
            fn(&[f64], usize, usize, &[f64], &mut [f64]),
            fn(&[f64], &[f64], usize, usize, usize, &mut [f64]),
        )> = vec![(
            "portable",
            |b, d, m, x, o| unsafe { columns_dot_lanes::<[f64; 4]>(b, d, m, x, o) },
            |a, b, r, i, c, o| unsafe { matmul_lanes::<[f64; 4], [f64; 2]>(a, b, r, i, c, o) },
        )];
        #[cfg(target_arch = "x86_64")]
        {
            let levels = runnable_levels();
            if levels.contains(&SimdLevel::Avx2) {
                out.push((
                    "avx2",
                    |b, d, m, x, o| unsafe { columns_dot_avx2(b, d, m, x, o) },
                    |a, b, r, i, c, o| unsafe { matmul_avx2(a, b, r, i, c, o) },
                ));
            }
            if levels.contains(&SimdLevel::Avx512) {
                out.push((
                    "avx512",
                    |b, d, m, x, o| unsafe { columns_dot_avx512(b, d, m, x, o) },
                    |a, b, r, i, c, o| unsafe { matmul_avx512(a, b, r, i, c, o) },
                ));
            }
        }
        out
    }

    #[test]
    fn columns_dot_matches_naive_dots_in_every_build() {
        for &(d, m) in &[(0, 3), (1, 1), (7, 5), (8, 4), (17, 6), (400, 12), (401, 13), (33, 1)] {
            let b = random(d * m, (d * 31 + m) as u64);
            let x = random(d, 7);
            for (name, dot, _) in builds() {
                let mut out = vec![f64::NAN; m];
                dot(&b, d, m, &x, &mut out);
                for j in 0..m {
                    let terms: Vec<f64> = (0..d).map(|i| b[j * d + i] * x[i]).collect();
                    let want: f64 = terms.iter().sum();
                    let scale: f64 = 1.0 + terms.iter().map(|t| t.abs()).sum::<f64>();
                    assert!((out[j] - want).abs() <= 1e-13 * scale, "{name} d={d} m={m} j={j}");
                }
            }
            let mut out = vec![0.0; m];
            columns_dot(&b, d, m, &x, &mut out); // the dispatching entry point
        }
    }

    #[test]
    fn symmetric_kernels_match_naive_loops_in_every_build() {
        for &(n, cap) in &[(0, 0), (1, 1), (3, 5), (8, 8), (13, 16), (40, 41)] {
            let mut q = random(cap * cap.max(1), n as u64 + 1);
            let x = random(n, 2);
            let v = random(n, 3);
            // Q as the symmetric matrix its lower triangle defines.
            let sym = |q: &[f64], i: usize, j: usize| if j <= i { q[i * cap + j] } else { q[j * cap + i] };
            let want: Vec<f64> = (0..n).map(|i| (0..n).map(|j| sym(&q, i, j) * x[j]).sum()).collect();
            let mut want_q = q.clone();
            for i in 0..n {
                for j in 0..=i {
                    want_q[i * cap + j] = (q[i * cap + j] + x[i] * x[j]) - v[i] * v[j];
                }
            }
            let mut y = vec![f64::NAN; n];
            let mut builds: Vec<(&str, SimdLevel)> = vec![("portable", SimdLevel::Portable)];
            if detected_level() >= SimdLevel::Avx2 {
                builds.push(("avx2", SimdLevel::Avx2));
            }
            if detected_level() >= SimdLevel::Avx512 {
                builds.push(("avx512", SimdLevel::Avx512));
            }
            for (name, build) in builds {
                let mut qq = q.clone();
                // SAFETY: each build runs only when the CPU supports it (checked above).
                let diag = unsafe {
                    match build {
                        SimdLevel::Portable => {
                            sym_lower_matvec_lanes::<[f64; 4]>(&q, cap, n, &x, &mut y);
                            lower_rank2_update_lanes::<[f64; 4]>(&mut qq, cap, n, &x, &v)
                        }
                        #[cfg(target_arch = "x86_64")]
                        SimdLevel::Avx2 => {
                            sym_lower_matvec_avx2(&q, cap, n, &x, &mut y);
                            lower_rank2_update_avx2(&mut qq, cap, n, &x, &v)
                        }
                        #[cfg(target_arch = "x86_64")]
                        SimdLevel::Avx512 => {
                            sym_lower_matvec_avx512(&q, cap, n, &x, &mut y);
                            lower_rank2_update_avx512(&mut qq, cap, n, &x, &v)
                        }
                        #[allow(unreachable_patterns)]
                        _ => unreachable!(),
                    }
                };
                for i in 0..n {
                    assert!(
                        (y[i] - want[i]).abs() <= 1e-13 * (1.0 + n as f64),
                        "{name} n={n} y[{i}]"
                    );
                    for j in 0..cap {
                        let (got, exp) = (qq[i * cap + j], want_q[i * cap + j]);
                        assert!((got - exp).abs() <= 1e-15 * 4.0, "{name} n={n} q[{i},{j}]");
                    }
                }
                let want_diag: f64 = (0..n).map(|i| want_q[i * cap + i]).sum();
                assert!((diag - want_diag).abs() <= 1e-13 * (1.0 + n as f64), "{name} diag");
            }
            let mut y2 = vec![0.0; n];
            sym_lower_matvec(&q, cap, n, &x, &mut y2); // the dispatching entry points
            lower_rank2_update(&mut q, cap, n, &x, &v);
        }
    }

    #[test]
    fn matmul_matches_naive_products_in_every_build() {
        for &(rows, inner, cols) in &[
            (1, 1, 1),
            (12, 12, 12),
            (5, 3, 13),
            (9, 0, 4),
            (3, 7, 2),
            (16, 16, 17),
            (11, 28, 28),
        ] {
            let a = random(rows * inner, 3);
            let b = random(inner * cols, 4);
            for (name, _, mm) in builds() {
                let mut out = vec![f64::NAN; rows * cols];
                mm(&a, &b, rows, inner, cols, &mut out);
                for i in 0..rows {
                    for c in 0..cols {
                        let want: f64 = (0..inner).map(|k| a[i * inner + k] * b[k * cols + c]).sum();
                        assert!(
                            (out[i * cols + c] - want).abs() <= 1e-13 * (1.0 + inner as f64),
                            "{name} {rows}x{inner}x{cols}"
                        );
                    }
                }
            }
        }
    }
}
