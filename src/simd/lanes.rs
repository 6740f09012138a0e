//! SIMD registers as the fused kernels use them: [`Lanes`] (load, store, multiply-add, sums) and
//! [`LaneMath`] (lane-by-lane arithmetic rounded as scalar f64), each for the portable arrays
//! `[f64; N]`, AVX2's `__m256d` and AVX-512's `__m512d`.

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
