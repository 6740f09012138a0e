//! Base (single-task) kernels K'(x, x') of ALGORITHMS.md §2.2, as an enum for static dispatch.
//!
//! Every kernel value is a function of `<x, x'>` and the two squared norms, so callers compute
//! the dot product once (their hot loop) and finish with [`BaseKernel::from_dot`].

use serde::{Deserialize, Serialize};

use crate::data::{Row, Rows, SelfKernel};
use crate::error::{invalid, Result};

/// The largest polynomial degree accepted: `(γ<x,x'> + c0)^degree` overflows double precision
/// for any row with `γ‖x‖² + c0 > 10^(308/degree)`, so high degrees only produce overflows (the
/// row check then refuses the row). Larger values are almost certainly a mistake.
pub const MAX_DEGREE: u32 = 32;

/// The `gamma="scale"` value of a batch, as scikit-learn's SVC: `1 / (n_features · Var(X))`,
/// the variance taken over every entry (the implicit zeros of a CSR batch included);
/// `1 / n_features` when that variance is 0, the batch is empty or the result is not a finite
/// positive number. A model fixes it on its first batch (Python's `gamma="scale"` calls this).
pub fn scale_gamma(rows: &Rows) -> f64 {
    let (n, d) = (rows.len(), rows.n_cols());
    let fallback = 1.0 / d.max(1) as f64;
    if n == 0 || d == 0 {
        return fallback;
    }
    let entries = n as f64 * d as f64;
    let var = match *rows {
        // Two passes (mean, then squared deviations), as NumPy's `var`.
        Rows::Dense { data, .. } => {
            let data = &data[..n * d];
            let mean = data.iter().sum::<f64>() / entries;
            data.iter().map(|&x| (x - mean) * (x - mean)).sum::<f64>() / entries
        }
        // E[x²] − E[x]² over the n·d entries: the zeros add nothing to either sum.
        Rows::Csr { data, .. } => {
            let mean = data.iter().sum::<f64>() / entries;
            data.iter().map(|&x| x * x).sum::<f64>() / entries - mean * mean
        }
    };
    let gamma = if var > 0.0 {
        1.0 / (d as f64 * var)
    } else {
        f64::INFINITY
    };
    if gamma.is_finite() && gamma > 0.0 {
        gamma
    } else {
        fallback
    }
}

/// A base kernel's formula and parameters (§2.2).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum KernelKind {
    /// `<x,x'>`
    Linear,
    /// `(gamma <x,x'> + coef0)^degree`
    Poly {
        /// In `[1, MAX_DEGREE]` (32).
        degree: u32,
        /// `> 0`.
        gamma: f64,
        /// `>= 0` (a negative offset can make the kernel indefinite).
        coef0: f64,
    },
    /// `exp(-gamma ||x - x'||^2)`
    Rbf {
        /// `> 0`.
        gamma: f64,
    },
}

/// A base (single-task) kernel K'(x, x'): a validated [`KernelKind`], optionally normalised.
/// Build it with [`BaseKernel::linear`], [`BaseKernel::poly`], [`BaseKernel::rbf`] or
/// [`BaseKernel::new`], which check the parameters.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BaseKernel {
    /// The formula and its parameters.
    pub kind: KernelKind,
    /// Cosine normalisation `K(x,x') / sqrt(K(x,x) K(x',x'))` (a no-op for rbf).
    pub normalize: bool,
}

impl BaseKernel {
    /// The linear kernel `<x,x'>`, not normalised.
    pub fn linear() -> Self {
        Self {
            kind: KernelKind::Linear,
            normalize: false,
        }
    }

    /// The polynomial kernel `(gamma <x,x'> + coef0)^degree`, not normalised.
    pub fn poly(degree: u32, gamma: f64, coef0: f64) -> Result<Self> {
        Self::new(KernelKind::Poly { degree, gamma, coef0 }, false)
    }

    /// The Gaussian kernel `exp(-gamma ||x - x'||^2)`.
    pub fn rbf(gamma: f64) -> Result<Self> {
        Self::new(KernelKind::Rbf { gamma }, false)
    }

    /// The Gaussian kernel with `gamma = scale_gamma(first_batch)`: what `gamma="scale"` (the
    /// Python default for rbf) resolves to on a model's first batch.
    pub fn rbf_scaled(first_batch: &Rows) -> Result<Self> {
        Self::rbf(scale_gamma(first_batch))
    }

    /// A kernel of `kind`, with cosine normalisation when `normalize`; an
    /// [`Error::InvalidParameter`](crate::Error::InvalidParameter) for parameters out of range.
    pub fn new(kind: KernelKind, normalize: bool) -> Result<Self> {
        match kind {
            KernelKind::Linear => {}
            KernelKind::Poly { degree, gamma, coef0 } => {
                if !(1..=MAX_DEGREE).contains(&degree) {
                    return Err(invalid(
                        "degree",
                        format!("must be an integer in [1, {MAX_DEGREE}], got {degree}"),
                    ));
                }
                if !(gamma > 0.0 && gamma.is_finite()) {
                    return Err(invalid(
                        "gamma",
                        format!("must be a positive finite number, got {gamma}"),
                    ));
                }
                // c0 < 0 can make the polynomial kernel indefinite (§2.2).
                if !(coef0 >= 0.0 && coef0.is_finite()) {
                    return Err(invalid(
                        "coef0",
                        format!("must be >= 0 to keep the kernel PSD, got {coef0}"),
                    ));
                }
            }
            KernelKind::Rbf { gamma } => {
                if !(gamma > 0.0 && gamma.is_finite()) {
                    return Err(invalid(
                        "gamma",
                        format!("must be a positive finite number, got {gamma}"),
                    ));
                }
            }
        }
        Ok(Self { kind, normalize })
    }

    /// A restored kernel: its parameters must pass [`BaseKernel::new`].
    pub(crate) fn check_state(&self) -> Result<()> {
        crate::state::param(Self::new(self.kind, self.normalize)).map(|_| ())
    }

    /// Whether the normalised form differs from the raw one.
    #[inline]
    pub fn normalizes(&self) -> bool {
        self.normalize && !matches!(self.kind, KernelKind::Rbf { .. })
    }

    /// The raw kernel value from `<x,x'>` and the squared norms.
    #[inline]
    pub fn raw_from_dot(&self, dot: f64, sq_a: f64, sq_b: f64) -> f64 {
        match self.kind {
            KernelKind::Linear => dot,
            KernelKind::Poly { degree, gamma, coef0 } => (gamma * dot + coef0).powi(degree as i32),
            KernelKind::Rbf { gamma } => (-gamma * (sq_a + sq_b - 2.0 * dot).max(0.0)).exp(),
        }
    }

    /// `K'(x, x)` from the squared norm: what normalisation divides by.
    #[inline]
    pub fn raw_self(&self, sq: f64) -> f64 {
        self.raw_from_dot(sq, sq, sq)
    }

    /// The kernel value from `<x,x'>`, the squared norms and the raw self-kernels
    /// (the last two are only read when normalising).
    #[inline]
    pub fn from_dot(&self, dot: f64, sq_a: f64, sq_b: f64, self_a: f64, self_b: f64) -> f64 {
        let raw = self.raw_from_dot(dot, sq_a, sq_b);
        if self.normalizes() {
            let denom = self_a * self_b;
            if denom > 0.0 {
                raw / denom.sqrt()
            } else {
                0.0
            }
        } else {
            raw
        }
    }

    /// `K'(x, x)` after normalisation (1, or 0 for a zero-norm instance).
    #[inline]
    pub fn self_value(&self, sq: f64) -> f64 {
        let raw = self.raw_self(sq);
        if self.normalizes() {
            if raw > 0.0 {
                1.0
            } else {
                0.0
            }
        } else {
            raw
        }
    }

    /// `K'(a, b)` for two rows in any representation (not the hot path).
    pub fn eval(&self, a: &Row, b: &Row) -> f64 {
        let (sa, sb) = (a.sq_norm(), b.sq_norm());
        self.from_dot(a.dot_row(b), sa, sb, self.raw_self(sa), self.raw_self(sb))
    }
}

impl SelfKernel for BaseKernel {
    fn self_value(&self, sq_norm: f64) -> f64 {
        self.raw_self(sq_norm)
    }

    fn describe(&self) -> String {
        format!("{:?}", self.kind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scale_gamma_is_one_over_d_times_the_variance_of_every_entry() {
        // Entries 1, 2, 3, 4: mean 2.5, variance 1.25; d = 2, so gamma = 1 / 2.5.
        let x = [1.0, 2.0, 3.0, 4.0];
        assert!((scale_gamma(&Rows::dense(&x, 2, 2)) - 0.4).abs() < 1e-15);
        // The same variance from a CSR batch with implicit zeros: rows [0, 3], [4, 0]; entries
        // 0, 3, 4, 0: mean 1.75, E[x²] = 25 / 4, variance 3.1875.
        let (indptr, indices, data) = ([0i64, 1, 2], [1u32, 0], [3.0, 4.0]);
        let csr = Rows::Csr {
            indptr: &indptr,
            indices: &indices,
            data: &data,
            n_cols: 2,
        };
        assert!((scale_gamma(&csr) - 1.0 / (2.0 * 3.1875)).abs() < 1e-15);
        let dense = [0.0, 3.0, 4.0, 0.0];
        assert!((scale_gamma(&csr) - scale_gamma(&Rows::dense(&dense, 2, 2))).abs() < 1e-15);
        // A constant batch, an empty one: 1 / d.
        assert_eq!(scale_gamma(&Rows::dense(&[5.0; 6], 2, 3)), 1.0 / 3.0);
        assert_eq!(scale_gamma(&Rows::dense(&[], 0, 4)), 0.25);
        let k = BaseKernel::rbf_scaled(&Rows::dense(&x, 2, 2)).unwrap();
        assert!(matches!(k.kind, KernelKind::Rbf { gamma } if (gamma - 0.4).abs() < 1e-15));
    }

    #[test]
    fn closed_forms() {
        let a = [1.0, 2.0];
        let b = [0.5, -1.0];
        let (ra, rb) = (Row::Dense(&a), Row::Dense(&b));
        assert_eq!(BaseKernel::linear().eval(&ra, &rb), -1.5);
        let p = BaseKernel::poly(2, 0.5, 1.0).unwrap();
        assert!((p.eval(&ra, &rb) - 0.0625).abs() < 1e-15);
        let r = BaseKernel::rbf(0.1).unwrap();
        assert!((r.eval(&ra, &rb) - (-0.1f64 * 9.25).exp()).abs() < 1e-15);
        let n = BaseKernel::new(
            KernelKind::Poly {
                degree: 3,
                gamma: 1.0,
                coef0: 1.0,
            },
            true,
        )
        .unwrap();
        assert!((n.eval(&ra, &ra) - 1.0).abs() < 1e-15);
    }

    #[test]
    fn rejects_bad_parameters() {
        assert!(BaseKernel::poly(0, 1.0, 1.0).is_err());
        assert!(BaseKernel::poly(MAX_DEGREE + 1, 1.0, 1.0).is_err());
        assert!(BaseKernel::poly(MAX_DEGREE, 1.0, 1.0).is_ok());
        assert!(BaseKernel::poly(2, 1.0, f64::INFINITY).is_err());
        assert!(BaseKernel::poly(2, 1.0, -1.0).is_err());
        assert!(BaseKernel::rbf(0.0).is_err());
        assert!(BaseKernel::rbf(f64::NAN).is_err());
    }
}
