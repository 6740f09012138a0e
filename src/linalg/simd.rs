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
    ($(#[$doc:meta])* pub fn $name:ident($($arg:ident: $ty:ty),*) $(-> $ret:ty)? => $kernel:ident, $avx:ident) => {
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx2")]
        unsafe fn $avx($($arg: $ty),*) $(-> $ret)? {
            $kernel($($arg),*)
        }

        $(#[$doc])*
        pub fn $name($($arg: $ty),*) $(-> $ret)? {
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
    /// `y += alpha x` for dense slices (AVX2 when available).
    pub fn dense_axpy(alpha: f64, x: &[f64], y: &mut [f64]) => axpy_kernel, dense_axpy_avx2
}

#[inline(always)]
fn axpy_kernel(alpha: f64, x: &[f64], y: &mut [f64]) {
    y.iter_mut().zip(x).for_each(|(yi, &xi)| *yi += alpha * xi);
}
