//! Blocks of dot products between R stored dense rows and Q queries, each stored row and each
//! query chunk loaded once per block (the micro-kernel of the dense kernel sums).
//!
//! Every (row, query) product is computed by the same sequence whatever R and Q are: one
//! accumulator register of `W::N` lanes, a fused (or, portable, plain) multiply-add per chunk of
//! `W::N` features, the last partial chunk loaded with its missing lanes set to zero, then the
//! lanes summed by [`Wide::sum4_block`]. So scoring one query at a time or several in one pass over the
//! stored rows gives bit-identical dot products (the lookahead of the learn loop relies on it).

use crate::simd::Lanes;

/// A [`Lanes`] register as the dense dot products use it: loads through raw pointers (the
/// stored rows and the queries are addressed by pointer) and one fixed order of the lane sums.
/// The zero, the multiply-add (fused in the x86 builds) are [`Lanes`]'.
///
/// # Safety
/// As for [`Lanes`]: the x86 implementations use AVX2 + FMA (`__m256d`) or AVX-512F (`__m512d`)
/// instructions; call their methods only inside functions compiled for those features.
pub(crate) trait Wide: Lanes {
    /// `N` values from `p`.
    unsafe fn load_ptr(p: *const f64) -> Self;
    /// `n < N` values from `p`, the other lanes zero (nothing past `p + n` is read).
    unsafe fn load_head(p: *const f64, n: usize) -> Self;
    /// The lane sums of four registers, in this kernel's order (which every build keeps, so a
    /// window's scores equal single-query scores bit for bit).
    unsafe fn sum4_block(v: [Self; 4]) -> [f64; 4];
}

impl Wide for [f64; 4] {
    #[inline(always)]
    unsafe fn load_ptr(p: *const f64) -> Self {
        [*p, *p.add(1), *p.add(2), *p.add(3)]
    }
    #[inline(always)]
    unsafe fn load_head(p: *const f64, n: usize) -> Self {
        let mut out = [0.0; 4];
        for (l, o) in out.iter_mut().enumerate().take(n) {
            *o = *p.add(l);
        }
        out
    }
    #[inline(always)]
    unsafe fn sum4_block(v: [Self; 4]) -> [f64; 4] {
        let s = |a: [f64; 4]| (a[0] + a[1]) + (a[2] + a[3]);
        [s(v[0]), s(v[1]), s(v[2]), s(v[3])]
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::Wide;
    use crate::simd::Lanes;
    use std::arch::x86_64::*;

    impl Wide for __m256d {
        #[inline(always)]
        unsafe fn load_ptr(p: *const f64) -> Self {
            _mm256_loadu_pd(p)
        }
        #[inline(always)]
        unsafe fn load_head(p: *const f64, n: usize) -> Self {
            // Lane l is loaded when its mask element is negative (l < n); masked lanes do not fault.
            let lanes = _mm256_set_epi64x(3, 2, 1, 0);
            let mask = _mm256_cmpgt_epi64(_mm256_set1_epi64x(n as i64), lanes);
            _mm256_maskload_pd(p, mask)
        }
        #[inline(always)]
        unsafe fn sum4_block(v: [Self; 4]) -> [f64; 4] {
            // (x0 + x1) + (x2 + x3) for each register: Lanes' transposing reduction.
            <Self as Lanes>::sum4(v)
        }
    }

    impl Wide for __m512d {
        #[inline(always)]
        unsafe fn load_ptr(p: *const f64) -> Self {
            _mm512_loadu_pd(p)
        }
        #[inline(always)]
        unsafe fn load_head(p: *const f64, n: usize) -> Self {
            _mm512_maskz_loadu_pd(((1u32 << n) - 1) as __mmask8, p)
        }
        #[inline(always)]
        unsafe fn sum4_block(v: [Self; 4]) -> [f64; 4] {
            // Each register's upper half added onto its lower half, then the 256-bit reduction
            // (spelled out: a closure would not be compiled with the caller's features).
            let f0 = _mm256_add_pd(_mm512_castpd512_pd256(v[0]), _mm512_extractf64x4_pd::<1>(v[0]));
            let f1 = _mm256_add_pd(_mm512_castpd512_pd256(v[1]), _mm512_extractf64x4_pd::<1>(v[1]));
            let f2 = _mm256_add_pd(_mm512_castpd512_pd256(v[2]), _mm512_extractf64x4_pd::<1>(v[2]));
            let f3 = _mm256_add_pd(_mm512_castpd512_pd256(v[3]), _mm512_extractf64x4_pd::<1>(v[3]));
            <__m256d as Lanes>::sum4([f0, f1, f2, f3])
        }
    }
}

/// `out[q][r] = <rows[r], xs[q]>` for R = 4 stored rows and `Q` queries, all `d` long: per chunk
/// of features each row chunk and each query chunk is loaded once for the 4 Q multiply-adds.
///
/// # Safety
/// As for [`Wide`]; every pointer in `rp` and `xp` is valid for `d` reads.
#[inline(always)]
pub(crate) unsafe fn dots_block<W: Wide, const Q: usize>(
    rp: [*const f64; 4],
    xp: [*const f64; Q],
    d: usize,
) -> [[f64; 4]; Q] {
    let mut acc = [[W::zero(); 4]; Q];
    let body = d - d % W::N;
    let mut i = 0;
    while i < body {
        let mut xv = [W::zero(); Q];
        for q in 0..Q {
            xv[q] = W::load_ptr(xp[q].add(i));
        }
        for r in 0..4 {
            let rv = W::load_ptr(rp[r].add(i));
            for q in 0..Q {
                acc[q][r] = rv.mul_add(xv[q], acc[q][r]);
            }
        }
        i += W::N;
    }
    if body < d {
        let n = d - body;
        for r in 0..4 {
            let rv = W::load_head(rp[r].add(body), n);
            for q in 0..Q {
                acc[q][r] = rv.mul_add(W::load_head(xp[q].add(body), n), acc[q][r]);
            }
        }
    }
    let mut out = [[0.0; 4]; Q];
    for q in 0..Q {
        out[q] = W::sum4_block(acc[q]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SplitMix64;

    fn random(n: usize, seed: u64) -> Vec<f64> {
        let mut rng = SplitMix64::new(seed);
        (0..n)
            .map(|_| (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0)
            .collect()
    }

    /// The products of one query alone equal its products inside a block of several, bit for bit,
    /// and are the dot products up to rounding.
    fn check<W: Wide>() {
        for d in [1, 3, 4, 5, 8, 13, 28, 33] {
            let data = random(4 * d, d as u64);
            let xq = random(3 * d, 100 + d as u64);
            let rows: [*const f64; 4] = std::array::from_fn(|r| data[r * d..].as_ptr());
            let xs: [*const f64; 3] = std::array::from_fn(|q| xq[q * d..].as_ptr());
            // SAFETY: the caller runs this only for builds the CPU supports.
            let (three, ones) = unsafe {
                (
                    dots_block::<W, 3>(rows, xs, d),
                    [
                        dots_block::<W, 1>(rows, [xs[0]], d)[0],
                        dots_block::<W, 1>(rows, [xs[1]], d)[0],
                        dots_block::<W, 1>(rows, [xs[2]], d)[0],
                    ],
                )
            };
            for q in 0..3 {
                for r in 0..4 {
                    assert_eq!(three[q][r].to_bits(), ones[q][r].to_bits(), "d={d}");
                    let want: f64 = (0..d).map(|i| data[r * d + i] * xq[q * d + i]).sum();
                    assert!((three[q][r] - want).abs() <= 1e-14 * d as f64, "d={d}");
                }
            }
        }
    }

    #[test]
    fn blocks_equal_single_queries_in_every_build() {
        check::<[f64; 4]>();
        #[cfg(target_arch = "x86_64")]
        {
            use crate::simd::{detected_level, SimdLevel};
            #[target_feature(enable = "avx2,fma")]
            unsafe fn avx2() {
                check::<std::arch::x86_64::__m256d>();
            }
            #[target_feature(enable = "avx512f,avx2,fma")]
            unsafe fn avx512() {
                check::<std::arch::x86_64::__m512d>();
            }
            if detected_level() >= SimdLevel::Avx2 {
                // SAFETY: the CPU runs AVX2 and FMA.
                unsafe { avx2() };
            }
            if detected_level() >= SimdLevel::Avx512 {
                // SAFETY: the CPU runs AVX-512F, AVX2 and FMA.
                unsafe { avx512() };
            }
        }
    }
}
