//! Run-time selection of wider builds for the few hot loops (the default x86-64 target only
//! assumes SSE2). Every choice goes through one [`level`]: the widest build the CPU runs, capped
//! by the environment variable `OMTL_SIMD` (`portable`, `avx2` or `avx512`; never above what the
//! CPU has), read once; and one mechanism, `fma_builds!`, compiles a kernel once per level and
//! runs the build [`level`] names. Two kinds of kernel use it:
//! - plain-Rust loops (`dense`: dot products, axpys, column sums): the same code in every build,
//!   only the vector width differs; Rust never fuses a multiply and an add on its own, so their
//!   results are the same bits at every level;
//! - kernels written over SIMD registers (`Lanes`) with fused multiply-adds (AVX-512 or
//!   AVX2 + FMA, and a portable array build; `fused`): `columns_dot`, `matmul`, the dense
//!   kernel sums, ROMCO's right multiplication (`svt::right_multiply_in_place`) and the inverse
//!   Gram matrix's projection and rank-2 step (`sym_lower_matvec`, `lower_rank2_update`). Their
//!   last bits depend on the build, so `OMTL_SIMD` lets a test run show every build's results on
//!   one machine.

use std::sync::OnceLock;

mod dense;
mod fused;
pub(crate) mod lanes;
#[cfg(test)]
mod tests;

pub(crate) use dense::dot4;
#[cfg(test)] // the tests run the baseline build beside the dispatching one
pub(crate) use dense::first_non_finite_kernel;
pub use dense::{columns_times, columns_times_in_place, dense_axpy, dense_dot, first_non_finite, sub_columns};
pub use fused::{columns_dot, lower_rank2_update, sym_lower_matvec};
pub(crate) use fused::{dot4_lanes, matmul};
pub(crate) use lanes::{LaneMath, Lanes};

/// Asks for the cache line at `p` to be loaded (a hint: it never faults and changes no result).
#[inline(always)]
pub(crate) fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch never faults, whatever the address; SSE is part of x86-64.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

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
    #[cfg(any(test, feature = "python"))]
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
#[cfg(test)]
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
    #[cfg(test)]
    if let Some(forced) = FORCED_LEVEL.with(std::cell::Cell::get) {
        return forced;
    }
    *LEVEL.get_or_init(|| {
        let cap = std::env::var("OMTL_SIMD").ok().and_then(|v| SimdLevel::parse(&v));
        let detected = detected_level();
        cap.map_or(detected, |c| c.min(detected))
    })
}

/// Defines `$name`, dispatching on [`level`] to builds of its body, the one way a kernel picks
/// its build: `avx512` compiled for AVX-512F + AVX2 + FMA (when given), `avx2` for AVX2 + FMA
/// (also run at the AVX-512 level without an `avx512` body), `portable` otherwise. A body may
/// fuse multiply-adds (`f64::mul_add`, [`Lanes::mul_add`], a `const FAST` flag), which changes
/// last bits between builds (why `make test-simd-levels` exists); a plain body computes the same
/// bits in every build, only wider.
///
/// [`Lanes::mul_add`]: lanes::Lanes::mul_add
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

#[cfg(test)]
thread_local! {
    /// The level [`with_level`] imposes on this thread's kernels (tests only).
    static FORCED_LEVEL: std::cell::Cell<Option<SimdLevel>> = const { std::cell::Cell::new(None) };
}

/// Runs `f` with every kernel on this thread dispatching to `level` (one this CPU runs), so a
/// test sees each build's results through the dispatching entry points.
#[cfg(test)]
pub(crate) fn with_level<R>(level: SimdLevel, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<SimdLevel>);
    impl Drop for Restore {
        fn drop(&mut self) {
            FORCED_LEVEL.with(|forced| forced.set(self.0));
        }
    }
    assert!(level <= detected_level(), "{level:?} is above what this CPU runs");
    let _restore = Restore(FORCED_LEVEL.with(|forced| forced.replace(Some(level))));
    f()
}
