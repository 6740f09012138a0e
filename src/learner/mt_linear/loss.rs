//! The losses (their flows and proximal steps) and the update rules of MTLinear.

use serde::{Deserialize, Serialize};

use crate::error::{invalid, Result};

/// MTLinear's loss `ℓ(y, p)` of a label y = ±1 and a score p.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Loss {
    /// `log(1 + exp(-y p))`.
    Logistic,
    /// `max(0, 1 - y p)`.
    Hinge,
    /// `(y - p)² / 2`.
    Squared,
}

impl Loss {
    /// The loss named `"logistic"`, `"hinge"` or `"squared"`.
    pub fn parse(name: &str) -> Result<Self> {
        match name {
            "logistic" => Ok(Self::Logistic),
            "hinge" => Ok(Self::Hinge),
            "squared" => Ok(Self::Squared),
            other => Err(invalid(
                "loss",
                format!("expected 'logistic', 'hinge' or 'squared', got {other:?}"),
            )),
        }
    }

    /// `ℓ(y, p)`.
    pub fn value(self, y: f64, p: f64) -> f64 {
        let m = y * p;
        match self {
            // log(1 + e^{-m}) without overflow for very negative margins.
            Self::Logistic => (-m).max(0.0) + (-m.abs()).exp().ln_1p(),
            Self::Hinge => (1.0 - m).max(0.0),
            Self::Squared => 0.5 * (y - p) * (y - p),
        }
    }

    /// `∂ℓ/∂p`.
    pub fn derivative(self, y: f64, p: f64) -> f64 {
        let m = y * p;
        match self {
            Self::Logistic => -y * sigmoid(-m),
            Self::Hinge => {
                if m < 1.0 {
                    -y
                } else {
                    0.0
                }
            }
            Self::Squared => p - y,
        }
    }

    /// The importance-invariant step `s` (Karampatziakis & Langford 2011): the prediction moves to
    /// `p + h s`, where `p(τ)` follows `dp/dτ = -h ℓ'(p)` from `p(0) = p` up to `τ = eta`.
    pub fn invariant_step(self, y: f64, p: f64, eta: f64, h: f64) -> f64 {
        match self {
            Self::Logistic => y * logistic_margin_gain(y * p, eta * h) / h,
            // The flow stops at the hinge (margin 1).
            Self::Hinge => y * eta.min((1.0 - y * p) / h),
            // Exponential approach to the label.
            Self::Squared => (y - p) * -(-eta * h).exp_m1() / h,
        }
    }

    /// AROW's step (`update="arow"`, docs/mt_linear.md M.2b): the margin gain `δ` that minimises
    /// `δ²/(2v) + η ℓ̃(m + δ)` (a proximal step in the metric `Σ⁻¹` along `Σ u`, `v = Σ_c Σ_c u_c²`,
    /// `η = 1/r`), with `ℓ̃` the squared hinge `½ max(0, 1 - m)²` for `Hinge` (AROW's own step,
    /// `δ = v (1 - m)/(v + r)`), `½ (1 - m)²` for `Squared` and the logistic loss itself. Returns
    /// `s` with `w_c += s Σ_c u_c`, so that the prediction moves by `v s`.
    pub fn proximal_step(self, y: f64, p: f64, eta: f64, v: f64) -> f64 {
        match self {
            Self::Logistic => y * logistic_proximal_gain(y * p, eta * v) / v,
            Self::Hinge => y * (1.0 - y * p).max(0.0) * eta / (1.0 + eta * v),
            Self::Squared => (y - p) * eta / (1.0 + eta * v),
        }
    }
}

/// The logistic proximal margin gain: `δ ≥ 0` with `δ (1 + e^{m0 + δ}) = a`. `f(δ) = δ (1 + e^{m0+δ}) - a`
/// is convex and increasing, so Newton's method from an upper bound of the root descends to it
/// monotonically. Bounds: `a/(1 + e^{m0})` (as `e^{m0+δ} ≥ e^{m0}`) and `max(1, ln a - m0)` (a root
/// `δ ≥ 1` has `e^{m0+δ} ≤ a`), which keeps the number of steps logarithmic for huge `a`.
pub fn logistic_proximal_gain(m0: f64, a: f64) -> f64 {
    if a <= 0.0 {
        return 0.0;
    }
    let mut delta = (a / (1.0 + m0.exp())).min((a.ln() - m0).max(1.0));
    if delta <= 0.0 || !delta.is_finite() {
        return delta.max(0.0);
    }
    // Quadratic convergence once near the root; from the log-scale bound a few steps get there.
    for _ in 0..100 {
        let e = (m0 + delta).exp();
        let f = delta * (1.0 + e) - a;
        let f1 = 1.0 + e * (1.0 + delta);
        let next = delta - f / f1;
        if !(next.is_finite() && next > 0.0 && next < delta) {
            break;
        }
        let moved = delta - next;
        delta = next;
        if moved <= 1e-15 * delta {
            break;
        }
    }
    delta
}

/// `1 / (1 + e^{-z})` without overflow.
pub fn sigmoid(z: f64) -> f64 {
    if z >= 0.0 {
        1.0 / (1.0 + (-z).exp())
    } else {
        let e = z.exp();
        e / (1.0 + e)
    }
}

/// The margin gain `δ > 0` of the logistic flow: `m + e^m` grows by `a` along
/// `dm/dτ = 1/(1 + e^m)`, so `f(δ) = δ + e^{m0} (e^δ - 1) - a = 0`. Halley's method (cubic
/// convergence, one `expm1` per step) from an upper bound of the root: `a/(1+e^{m0})` (the plain
/// gradient step; `f` is convex) or `ln(1 + a e^{-m0})`, whichever is smaller.
pub fn logistic_margin_gain(m0: f64, a: f64) -> f64 {
    if a <= 0.0 {
        return 0.0;
    }
    let q = m0.exp();
    let mut delta = a / (1.0 + q);
    if delta > 1.0 {
        delta = delta.min((a / q).ln_1p());
    }
    if delta <= 0.0 || !delta.is_finite() {
        return delta.max(0.0);
    }
    // Each step cubes the relative error: once a step moves less than 1e-6 δ, the error left is
    // far below rounding. 30 steps is far beyond what any input needs.
    for _ in 0..30 {
        let em1 = delta.exp_m1();
        let f = delta + q * em1 - a;
        let f1 = 1.0 + q * (1.0 + em1);
        let f2 = q * (1.0 + em1);
        let next = delta - 2.0 * f * f1 / (2.0 * f1 * f1 - f * f2);
        if !next.is_finite() || next <= 0.0 {
            break;
        }
        let moved = (delta - next).abs();
        delta = next;
        if moved <= 1e-6 * delta {
            break;
        }
    }
    delta
}

/// MTLinear's per-coordinate update rule (Python's `update`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum UpdateRule {
    /// AdaGrad per coordinate, normalised by each coordinate's largest seen |value| (VW's default).
    Normalized,
    /// Plain AdaGrad per coordinate.
    Adagrad,
    /// One rate `η/√t` (t = examples of the component so far).
    Sgd,
    /// AROW, diagonal (Crammer, Kulesza & Dredze 2009): per-coordinate variance
    /// `Σ_c = 1/(1 + η D_c)`, `D_c = Σ u_c²` over updates, `r = 1/η`; the step is the loss's
    /// proximal step in the metric `Σ⁻¹` ([`Loss::proximal_step`]). Appended last: the serialised
    /// variant indices of the other rules are unchanged.
    Arow,
}

impl UpdateRule {
    /// The rule named `"normalized"`, `"adagrad"`, `"sgd"` or `"arow"`.
    pub fn parse(name: &str) -> Result<Self> {
        match name {
            "normalized" => Ok(Self::Normalized),
            "adagrad" => Ok(Self::Adagrad),
            "sgd" => Ok(Self::Sgd),
            "arow" => Ok(Self::Arow),
            other => Err(invalid(
                "update",
                format!("expected 'normalized', 'adagrad', 'sgd' or 'arow', got {other:?}"),
            )),
        }
    }
}

impl UpdateRule {
    /// Floats per slot: the weight, then Σ g² u² (normalized, adagrad) or Σ u² (arow), then
    /// max |u| (normalized).
    pub(super) fn stride(self) -> usize {
        match self {
            Self::Normalized => 3,
            Self::Adagrad | Self::Arow => 2,
            Self::Sgd => 1,
        }
    }
}
