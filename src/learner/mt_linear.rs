//! MTLinear: online linear learning on the task-graph feature map with normalized adaptive,
//! importance-invariant updates (docs/mt_linear.md; ALGORITHMS.md-style formulas there).
//!
//! The multitask kernel with a linear base kernel is the feature map `φ(x, i) = b_i ⊗ x̃`, where
//! `BᵀB = T` (the task kernel) and `x̃ = (x, 1)` carries an intercept. So task `i` scores
//! `f_i(x) = Σ_r B[r, i] <w_r, x̃>` over weight blocks `w_r`. The factor is a closed form for the
//! disconnected graph (one block per task) and the complete graph (a shared block and one block per
//! task: VW's `-q st`), and the per-component symmetric square root `T_c^{1/2}` for a general `T`.
//! An example touches only the blocks of its task's component.
//!
//! Update rule (Ross, Mineiro & Langford, "Normalized online learning", UAI 2013; Karampatziakis &
//! Langford, "Online importance weight aware updates", UAI 2011), per coordinate `j` of `φ` with
//! value `u_j`, on an example with loss > 0 and derivative `g = ∂ℓ/∂p`:
//! `G_j += g² u_j²`, `N_j = max(N_j, |u_j|)` (rescaling `w_j` by `N_old/N_new` when it grows),
//! rate `r_j = 1/(√G_j N_j)`, multiplier `μ = √(n / Σ_t Σ_j u_j²/N_j²)` (per component),
//! sensitivity `h = μ Σ_j u_j² r_j`; the step `s` makes the prediction follow the gradient flow of
//! the loss for "time" `η` (a closed form per loss), and `w_j += s μ u_j r_j`.
//! `update="adagrad"` drops `N` and `μ`; `update="sgd"` uses `r_j = 1/√t`. `update="arow"` is
//! diagonal AROW (Crammer, Kulesza & Dredze 2009): variance `Σ_j = 1/(1 + η D_j)`, `D_j += u_j²`,
//! and the loss's proximal step along `Σ u` ([`Loss::proximal_step`]). `shared_rate = ρ` multiplies
//! the rates (AROW: the variances) of the complete graph's shared block, under every rule (M.8).
//!
//! Feature hashing (`hash_bits = b`, only when `2^b < d + 1`): feature `j` lives in two slots of
//! each block with value `x_j/√2` each, chosen by a block-seeded 64-bit mix ([`slot_of`]), so
//! colliding features share one weight and its statistics.
//!
//! The state is single precision (as VW's table), the arithmetic double (docs/mt_linear.md, M.5).

use std::f64::consts::FRAC_1_SQRT_2;

use serde::{Deserialize, Serialize};

use crate::alloc::{Need, ZeroedBuf};
use crate::data::Row;
use crate::error::{invalid, Error, Result};
use crate::kernel::{Scratch, TaskKernel};
use crate::learner::{Build, OnlineLearner, ParamGuard, Setting};
use crate::simd::{fma_builds, LaneMath};
use crate::linalg::{sym_sqrt, SymMatrix};
use crate::state::{check_counts, check_finite, check_len, checked_size, ensure, param, CheckState, MAX_MAGNITUDE};

/// The largest `hash_bits`: 2^31 slots per block is already 16 GiB of weights.
pub const MAX_HASH_BITS: u32 = 31;

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

/// One weight block `w_r` with its per-coordinate statistics, interleaved per slot as
/// `[w, G, N]` (the fields the rule uses), so that an update touches one cache line per coordinate.
/// Stored in single precision, as VW does: the state of a large sparse vocabulary is then half as
/// much memory to zero, fetch and cache; every computation reads it into f64 and rounds once on
/// writing (docs/mt_linear.md, M.5).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Block {
    data: ZeroedBuf<f32>,
}

impl UpdateRule {
    /// Floats per slot: the weight, then Σ g² u² (normalized, adagrad) or Σ u² (arow), then
    /// max |u| (normalized).
    fn stride(self) -> usize {
        match self {
            Self::Normalized => 3,
            Self::Adagrad | Self::Arow => 2,
            Self::Sgd => 1,
        }
    }
}

impl Block {
    /// A zero block, allocated fallibly (its size comes from `n_features` or `hash_bits`).
    fn try_new(width: usize, rule: UpdateRule) -> Result<Self> {
        let data = Need::new("n_features", width, "an MTLinear weight block").zeroed(&[width, rule.stride()])?;
        Ok(Self { data })
    }

    fn n_values(&self) -> usize {
        self.data.len()
    }
}

/// Counters of one connected component of the task graph (the normalizer and SGD clock are kept
/// per component, so that tasks in different components never interact).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
struct ComponentStats {
    /// Examples seen (the SGD clock `t`).
    n_examples: f64,
    /// Examples that updated (`n` in the multiplier `μ`).
    n_updates: f64,
    /// Σ over updating examples of Σ_j u_j²/N_j².
    sum_norm_x: f64,
}

learner_params! {
    /// Hyper-parameters of [`MTLinear`], validated by [`MTLinearParams::check`].
    pub struct MTLinearParams {
        pub loss: Loss,
        #[cfg_attr(feature = "python", pyo3(item("update")))]
        pub rule: UpdateRule,
        pub learning_rate: f64,
        pub fit_intercept: bool,
        pub hash_bits: Option<u32>,
        /// `ρ`: the factor on the rates of the complete graph's shared block (docs/mt_linear.md,
        /// M.8); graphs without a shared block ignore it.
        pub shared_rate: f64,
    }

    fn check(&self) -> Result<()> {
        let (learning_rate, hash_bits, shared_rate) = (self.learning_rate, self.hash_bits, self.shared_rate);
        if !(learning_rate.is_finite() && learning_rate > 0.0) {
            return Err(invalid(
                "learning_rate",
                format!("must be a finite number > 0, got {learning_rate}"),
            ));
        }
        if !(shared_rate.is_finite() && shared_rate > 0.0) {
            return Err(invalid(
                "shared_rate",
                format!("must be a finite number > 0, got {shared_rate}"),
            ));
        }
        if let Some(b) = hash_bits {
            if !(1..=MAX_HASH_BITS).contains(&b) {
                return Err(invalid(
                    "hash_bits",
                    format!("must be in [1, {MAX_HASH_BITS}], got {b}"),
                ));
            }
        }
        Ok(())
    }
}

impl MTLinearParams {
    /// Checked parameters with `shared_rate = 1` (the shared block's rates as the others'; see
    /// [`Self::with_shared_rate`]).
    pub fn new(
        loss: Loss,
        rule: UpdateRule,
        learning_rate: f64,
        fit_intercept: bool,
        hash_bits: Option<u32>,
    ) -> Result<Self> {
        let params = Self {
            loss,
            rule,
            learning_rate,
            fit_intercept,
            hash_bits,
            shared_rate: 1.0,
        };
        params.check()?;
        Ok(params)
    }

    /// The same parameters with the shared block's rate factor `ρ = shared_rate` (checked).
    pub fn with_shared_rate(self, shared_rate: f64) -> Result<Self> {
        let params = Self { shared_rate, ..self };
        params.check()?;
        Ok(params)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MTLinear {
    n_tasks: usize,
    n_features: usize,
    params: MTLinearParams,
    /// The task kernel the factor was computed from (for `same_settings`).
    tasks: TaskKernel,
    /// Slots per block: `n_features (+1)`, or at most `2^hash_bits`.
    width: usize,
    /// Hashing: the number of slots features are hashed into (see [`slot_of`]); 0 when every
    /// feature has its own slot (no hashing, or `2^hash_bits` covers all features).
    n_hashed: usize,
    /// Per task, the blocks it reads and writes with their factor entries `(r, B[r, i])`, B[r, i] ≠ 0.
    terms: Vec<Vec<(u32, f64)>>,
    component: Vec<u32>,
    stats: Vec<ComponentStats>,
    /// Allocated on their first update.
    blocks: Vec<Option<Block>>,
    n_updates: u64,
    /// Per-coordinate rates of the update in progress (phase one to phase two).
    #[serde(skip)]
    rates: Vec<f64>,
    /// The nonzero entries of the example being learnt.
    #[serde(skip)]
    entries: Vec<(usize, f64)>,
    /// Per coordinate of the update in progress: u and the slot's G and N before it.
    #[serde(skip)]
    pad: Scratchpad,
}

/// Per coordinate of the example in progress, in gather order (block by block of the task's
/// terms, then the example's entries): the offset of its slot in the block's data, its value u,
/// and the slot's w, G and N before the update.
#[derive(Debug, Clone, Default)]
struct Scratchpad {
    /// Coordinates of the example in progress (the buffers may be longer: they only grow).
    len: usize,
    slot: Vec<usize>,
    u: Vec<f64>,
    w: Vec<f64>,
    g: Vec<f64>,
    n: Vec<f64>,
}

impl Scratchpad {
    /// Room for `len` coordinates. The buffers never shrink, so that a row longer than the one
    /// before does not refill them (every value is written by the gather anyway).
    fn set_len(&mut self, len: usize) {
        if self.u.len() < len {
            for v in [&mut self.u, &mut self.w, &mut self.g, &mut self.n] {
                v.resize(len, 0.0);
            }
            self.slot.resize(len, 0);
        }
        self.len = len;
    }

    /// The first two blocks' coordinates (`m` each) as [`Coords`].
    fn split(&mut self, m: usize) -> (Coords<'_>, Coords<'_>) {
        let (slot0, slot1) = self.slot[..2 * m].split_at_mut(m);
        let (u0, u1) = self.u[..2 * m].split_at_mut(m);
        let (w0, w1) = self.w[..2 * m].split_at_mut(m);
        let (g0, g1) = self.g[..2 * m].split_at_mut(m);
        let (n0, n1) = self.n[..2 * m].split_at_mut(m);
        (
            Coords {
                slot: slot0,
                u: u0,
                w: w0,
                g: g0,
                n: n0,
            },
            Coords {
                slot: slot1,
                u: u1,
                w: w1,
                g: g1,
                n: n1,
            },
        )
    }

    /// The coordinates of the example in progress: slots, u, and the gathered w, G, N.
    #[allow(clippy::type_complexity)]
    fn view(&self) -> (&[usize], &[f64], &[f64], &[f64], &[f64]) {
        let len = self.len;
        (&self.slot[..len], &self.u[..len], &self.w[..len], &self.g[..len], &self.n[..len])
    }
}

fma_builds! {
    /// The normalized rule's rates (M.2 step 1) of every coordinate of one example:
    /// `rates[c] = 1/(√G'_c N'_c)` with `G' = G + g²u²`, `N' = max(N, |u|)`. Returns
    /// `(Σ u² r, Σ u²/N'²)`, the latter as `Σ u² r² G'` (one division per coordinate).
    fn normalized_rates(g2: f64, u: &[f64], g: &[f64], n: &[f64], rates: &mut [f64]) -> (f64, f64) {
        // SAFETY (both): compiled for AVX2 (and FMA, unused) after detection; arrays need nothing.
        avx2: unsafe { normalized_rates_lanes::<std::arch::x86_64::__m256d>(g2, u, g, n, rates) },
        portable: unsafe { normalized_rates_lanes::<[f64; 4]>(g2, u, g, n, rates) },
    }
}

/// One coordinate of [`normalized_rates`]: `(r, u² r, u² r² G')`, in the order of operations
/// of the lane code (so that a tail element gets the bits a lane would give it).
#[inline(always)]
fn normalized_rate(g2: f64, u: f64, g: f64, n: f64) -> (f64, f64, f64) {
    let u2 = u * u;
    let g_new = g + g2 * u2;
    let a = u.abs();
    let n_new = if n > a { n } else { a };
    let r = 1.0 / (g_new.sqrt() * n_new);
    let dh = u2 * r;
    (r, dh, dh * r * g_new)
}

/// `((a0 + a1) + (a2 + a3))` of four lane sums plus the tail's contributions (element `i` of
/// the tail in lane `i`): the fixed summation order of every build.
#[inline(always)]
unsafe fn lane_sum<L: LaneMath>(acc: L, tail: &[f64]) -> f64 {
    let mut lanes = [0.0; 4];
    acc.store(&mut lanes);
    lanes.iter_mut().zip(tail).for_each(|(l, &t)| *l += t);
    (lanes[0] + lanes[1]) + (lanes[2] + lanes[3])
}

/// Four lanes (element i in lane i mod 4) in every build: no fused operations, so the rates and
/// sums are the same bits whatever the build.
///
/// # Safety
/// As for [`LaneMath`] (`L` has 4 lanes).
#[inline(always)]
unsafe fn normalized_rates_lanes<L: LaneMath>(g2: f64, u: &[f64], g: &[f64], n: &[f64], rates: &mut [f64]) -> (f64, f64) {
    debug_assert_eq!(L::N, 4);
    let len = u.len();
    let (g, n, rates) = (&g[..len], &n[..len], &mut rates[..len]);
    let whole = len - len % 4;
    let (g2v, one) = (L::splat(g2), L::splat(1.0));
    let (mut h, mut norm) = (L::zero(), L::zero());
    let mut i = 0;
    while i < whole {
        let uv = L::load(&u[i..]);
        let u2 = uv.mul(uv);
        let g_new = L::load(&g[i..]).add(g2v.mul(u2));
        let n_new = L::load(&n[i..]).max(uv.abs());
        let r = one.div(g_new.sqrt().mul(n_new));
        r.store(&mut rates[i..]);
        let dh = u2.mul(r);
        h = h.add(dh);
        norm = norm.add(dh.mul(r).mul(g_new));
        i += 4;
    }
    let (mut h_tail, mut norm_tail) = ([0.0; 4], [0.0; 4]);
    for i in whole..len {
        let (r, dh, dn) = normalized_rate(g2, u[i], g[i], n[i]);
        rates[i] = r;
        (h_tail[i - whole], norm_tail[i - whole]) = (dh, dn);
    }
    (lane_sum(h, &h_tail), lane_sum(norm, &norm_tail))
}

/// What phase two may write (M.5): the largest |w|, G and |u| before the update, `Σ |u r|`,
/// `Σ u²`, and whether every rate is finite.
struct WriteBounds {
    max_w: f64,
    max_g: f64,
    max_u: f64,
    sum_ur: f64,
    sum_u2: f64,
    rates_finite: bool,
}

fma_builds! {
    /// [`WriteBounds`] of the coordinates in the scratchpad (one vectorised pass).
    fn write_bounds(u: &[f64], rates: &[f64], w: &[f64], g: &[f64]) -> WriteBounds {
        // SAFETY (both): as for `normalized_rates`.
        avx2: unsafe { write_bounds_lanes::<std::arch::x86_64::__m256d>(u, rates, w, g) },
        portable: unsafe { write_bounds_lanes::<[f64; 4]>(u, rates, w, g) },
    }
}

/// # Safety
/// As for [`LaneMath`] (`L` has 4 lanes).
#[inline(always)]
unsafe fn write_bounds_lanes<L: LaneMath>(u: &[f64], rates: &[f64], w: &[f64], g: &[f64]) -> WriteBounds {
    debug_assert_eq!(L::N, 4);
    let len = u.len();
    let (rates, w, g) = (&rates[..len], &w[..len], &g[..len]);
    let whole = len - len % 4;
    let (mut max_w, mut max_g, mut max_u) = (L::zero(), L::zero(), L::zero());
    // `r * 0` is 0 for a finite rate and NaN otherwise, so the sum of them is NaN iff a rate
    // is not finite.
    let (mut sum_ur, mut sum_u2, mut nonfinite) = (L::zero(), L::zero(), L::zero());
    let mut i = 0;
    while i < whole {
        let (uv, rv) = (L::load(&u[i..]), L::load(&rates[i..]));
        max_w = max_w.max(L::load(&w[i..]).abs());
        max_g = max_g.max(L::load(&g[i..]));
        max_u = max_u.max(uv.abs());
        sum_ur = sum_ur.add(uv.mul(rv).abs());
        sum_u2 = sum_u2.add(uv.mul(uv));
        nonfinite = nonfinite.add(rv.mul(L::zero()));
        i += 4;
    }
    let mut lanes = [[0.0; 4]; 6];
    for (acc, out) in [max_w, max_g, max_u, sum_ur, sum_u2, nonfinite].into_iter().zip(&mut lanes) {
        acc.store(out);
    }
    let [mw, mg, mu, sur, su2, nf] = &mut lanes;
    for i in whole..len {
        let l = i - whole;
        (mw[l], mg[l], mu[l]) = (mw[l].max(w[i].abs()), mg[l].max(g[i]), mu[l].max(u[i].abs()));
        (sur[l], su2[l], nf[l]) = (sur[l] + (u[i] * rates[i]).abs(), su2[l] + u[i] * u[i], nf[l] + rates[i] * 0.0);
    }
    let max4 = |v: &[f64; 4]| v.iter().fold(0.0f64, |m, &x| m.max(x));
    let sum4 = |v: &[f64; 4]| (v[0] + v[1]) + (v[2] + v[3]);
    WriteBounds {
        max_w: max4(mw),
        max_g: max4(mg),
        max_u: max4(mu),
        sum_ur: sum4(sur),
        sum_u2: sum4(su2),
        rates_finite: sum4(nf) == 0.0,
    }
}

/// AROW's variances (M.2b) of every coordinate of one example, `Σ_c = 1/(1 + η D_c)` with the
/// stored `D_c = Σ u_c²` before this update (the prior variance is 1 and `r = 1/η`), and the
/// confidence `v = Σ_c Σ_c u_c²` (the change of the prediction per unit step).
fn arow_variances(eta: f64, u: &[f64], d: &[f64], rates: &mut [f64]) -> (f64, f64) {
    let mut v = 0.0;
    for ((rate, &u), &d) in rates.iter_mut().zip(u).zip(d) {
        *rate = 1.0 / (1.0 + eta * d);
        v += u * u * *rate;
    }
    (v, 0.0)
}

/// Multiplies the rates of the shared block's coordinates by `ρ = shared_rate` (M.8) and returns
/// the change of the sensitivity, `(ρ - 1) Σ u² r` over them. The normalizer `S` is not a rate
/// and stays as it was.
fn scale_shared_rates(shared_rate: f64, u: &[f64], rates: &mut [f64]) -> f64 {
    let mut h = 0.0;
    for (rate, &u) in rates.iter_mut().zip(u) {
        h += u * u * *rate;
        *rate *= shared_rate;
    }
    (shared_rate - 1.0) * h
}

/// The scratchpad's slices for the coordinates of one block (see [`Scratchpad`]).
struct Coords<'a> {
    slot: &'a mut [usize],
    u: &'a mut [f64],
    w: &'a mut [f64],
    g: &'a mut [f64],
    n: &'a mut [f64],
}

/// Gathers the coordinates of one block (`S` floats per slot, a constant so that the cell reads
/// compile to fixed offsets) and returns `Σ_j x̃_j w_r[j]` in entry order.
#[inline(always)]
fn gather_block<const S: usize>(
    entries: &[(usize, f64)],
    r: u32,
    b: f64,
    n_hashed: usize,
    block: Option<&[f32]>,
    mut c: Coords,
) -> f64 {
    let mut s = 0.0;
    for (i, &(j, v)) in entries.iter().enumerate() {
        s += v * gather_coord::<S>(slot_of(j, r, n_hashed) * S, b * v, block, &mut c, i);
    }
    s
}

/// One coordinate of [`gather_block`]: records the slot, `u = b v` and the slot's state, and
/// returns the slot's weight.
#[inline(always)]
fn gather_coord<const S: usize>(at: usize, uv: f64, block: Option<&[f32]>, c: &mut Coords, i: usize) -> f64 {
    c.slot[i] = at;
    c.u[i] = uv;
    let cell: [f32; S] = match block {
        Some(data) => data[at..at + S].try_into().expect("a slot holds S floats"),
        None => [0.0; S],
    };
    let w = f64::from(cell[0]);
    c.w[i] = w;
    c.g[i] = if S >= 2 { f64::from(cell[1 % S]) } else { 0.0 };
    c.n[i] = if S >= 3 { f64::from(cell[2 % S]) } else { 0.0 };
    w
}

/// [`gather_block`] for two blocks at once (each sum in entry order, so the same bits).
#[inline(always)]
fn gather_pair<const S: usize>(
    entries: &[(usize, f64)],
    seeds: (u32, u32),
    b: (f64, f64),
    n_hashed: usize,
    blocks: (Option<&[f32]>, Option<&[f32]>),
    mut c0: Coords,
    mut c1: Coords,
) -> (f64, f64) {
    let m = entries.len();
    assert!(c0.slot.len() >= m && c1.slot.len() >= m && c0.n.len() >= m && c1.n.len() >= m);
    let (mut s0, mut s1) = (0.0, 0.0);
    for (i, &(j, v)) in entries.iter().enumerate() {
        let (at0, at1) = if n_hashed == 0 {
            (j * S, j * S)
        } else {
            (slot_of(j, seeds.0, n_hashed) * S, slot_of(j, seeds.1, n_hashed) * S)
        };
        s0 += v * gather_coord::<S>(at0, b.0 * v, blocks.0, &mut c0, i);
        s1 += v * gather_coord::<S>(at1, b.1 * v, blocks.1, &mut c1, i);
    }
    (s0, s1)
}

/// Phase two for one block: each value is read into f64, computed there and rounded to f32 once.
#[inline(always)]
fn write_block<const S: usize>(data: &mut [f32], slot: &[usize], u: &[f64], rates: &[f64], g2: f64, scale: f64) {
    for ((&at, &u), &rate) in slot.iter().zip(u).zip(rates) {
        let cell = &mut data[at..at + S];
        let mut w = f64::from(cell[0]);
        if S >= 2 {
            cell[1 % S] = (f64::from(cell[1 % S]) + g2 * u * u) as f32;
        }
        if S >= 3 {
            let (a, n_old) = (u.abs(), f64::from(cell[2 % S]));
            if a > n_old {
                // As if the new scale had been known from the start.
                if n_old > 0.0 {
                    w *= n_old / a;
                }
                cell[2 % S] = a as f32;
            }
        }
        cell[0] = (w + scale * u * rate) as f32;
    }
}

/// The gathered coordinates of one block in the order of the scratchpad, for phase two.
struct WriteArgs<'a> {
    slot: &'a [usize],
    u: &'a [f64],
    w: &'a [f64],
    g: &'a [f64],
    n: &'a [f64],
    rates: &'a [f64],
    g2: f64,
    scale: f64,
}

fma_builds! {
    /// Phase two for one block whose coordinates have distinct slots (no hashing: a row's
    /// features are distinct, validated CSR indices), with `S` floats per slot: the new values
    /// are computed from the gathered state four coordinates at a time, as [`write_block`]
    /// computes them (the same operations in the same order, so the same bits), then stored.
    fn write_distinct(data: &mut [f32], stride: usize, args: &WriteArgs) {
        // SAFETY (both): as for `normalized_rates`.
        avx2: unsafe { write_distinct_stride::<std::arch::x86_64::__m256d>(data, stride, args) },
        portable: unsafe { write_distinct_stride::<[f64; 4]>(data, stride, args) },
    }
}

/// # Safety
/// As for [`LaneMath`] (`L` has 4 lanes).
#[inline(always)]
unsafe fn write_distinct_stride<L: LaneMath>(data: &mut [f32], stride: usize, args: &WriteArgs) {
    match stride {
        3 => write_distinct_lanes::<L, 3>(data, args),
        2 => write_distinct_lanes::<L, 2>(data, args),
        _ => write_distinct_lanes::<L, 1>(data, args),
    }
}

/// # Safety
/// As for [`LaneMath`] (`L` has 4 lanes).
#[inline(always)]
unsafe fn write_distinct_lanes<L: LaneMath, const S: usize>(data: &mut [f32], a: &WriteArgs) {
    debug_assert_eq!(L::N, 4);
    let len = a.slot.len();
    let (u, w, g, n, rates) = (&a.u[..len], &a.w[..len], &a.g[..len], &a.n[..len], &a.rates[..len]);
    let whole = len - len % 4;
    let (g2, scale, zero) = (L::splat(a.g2), L::splat(a.scale), L::zero());
    let mut i = 0;
    while i < whole {
        let uv = L::load(&u[i..]);
        let mut wv = L::load(&w[i..]);
        let (mut w_new, mut g_new, mut n_new) = ([0.0f32; 4], [0.0f32; 4], [0.0f32; 4]);
        if S >= 2 {
            L::load(&g[i..]).add(g2.mul(uv).mul(uv)).store_f32(&mut g_new);
        }
        if S >= 3 {
            // As if the new scale had been known from the start (when N grows from N > 0).
            let (abs, n_old) = (uv.abs(), L::load(&n[i..]));
            let rescaled = L::select_gt(abs, n_old, wv.mul(n_old.div(abs)), wv);
            wv = L::select_gt(n_old, zero, rescaled, wv);
            abs.max(n_old).store_f32(&mut n_new);
        }
        wv.add(scale.mul(uv).mul(L::load(&rates[i..]))).store_f32(&mut w_new);
        for l in 0..4 {
            let at = a.slot[i + l];
            let cell = &mut data[at..at + S];
            cell[0] = w_new[l];
            if S >= 2 {
                cell[1 % S] = g_new[l];
            }
            if S >= 3 {
                cell[2 % S] = n_new[l];
            }
        }
        i += 4;
    }
    // The state of a slot is in the block as gathered: the scalar rule gives the same bits.
    write_block::<S>(data, &a.slot[whole..], &u[whole..], &rates[whole..], a.g2, a.scale);
}

/// The factor `B` of `T` as per-task lists `(block, B[block, task])`, and the number of blocks.
fn factor_terms(tasks: &TaskKernel) -> (Vec<Vec<(u32, f64)>>, usize) {
    match *tasks {
        TaskKernel::Disconnected { k, scale } => ((0..k).map(|i| vec![(i as u32, scale.sqrt())]).collect(), k),
        // k = 1: T is 1 x 1, one block (the shared/per-task split would duplicate every feature).
        TaskKernel::Complete { k: 1, diag, .. } => (vec![vec![(0, diag.sqrt())]], 1),
        TaskKernel::Complete { k, diag, off } => {
            let own = (diag - off).max(0.0).sqrt();
            let shared = off.max(0.0).sqrt();
            let terms = (0..k)
                .map(|i| {
                    [(i as u32, own), (k as u32, shared)]
                        .into_iter()
                        .filter(|&(_, c)| c != 0.0)
                        .collect()
                })
                .collect();
            (terms, k + 1)
        }
        TaskKernel::Dense { k, ref t, .. } => {
            let mut terms = vec![Vec::new(); k];
            for members in tasks.component_members() {
                let m = members.len();
                let mut sub = vec![0.0; m * m];
                for (a, &i) in members.iter().enumerate() {
                    for (b, &j) in members.iter().enumerate() {
                        sub[a * m + b] = t[i * k + j];
                    }
                }
                let root = sym_sqrt(&SymMatrix { n: m, data: sub });
                for (b, &i) in members.iter().enumerate() {
                    terms[i] = members
                        .iter()
                        .enumerate()
                        .map(|(a, &s)| (s as u32, root.get(a, b)))
                        .filter(|&(_, c)| c != 0.0)
                        .collect();
                }
            }
            (terms, k)
        }
    }
}

/// The hash seed of the open-ended complete graph's shared block (see `MTLinear::hash_seed`).
pub const OPEN_SHARED_SEED: u32 = u32::MAX;

/// The seed block `r`'s slots are hashed with ([`slot_of`]): its index, except for the shared
/// block of the open-ended complete graph (`T_ii = 1`, `T_ij = 1/2`, k >= 2; a fixed-k
/// complete graph has `T_ii = 2/(k+1) < 1`), whose index k moves as tasks are added: it takes
/// [`OPEN_SHARED_SEED`], so that adding tasks moves the block without rehashing it.
#[inline]
fn hash_seed(tasks: &TaskKernel, r: u32) -> u32 {
    match *tasks {
        TaskKernel::Complete { k, diag, off } if k >= 2 && diag == 1.0 && off == 0.5 && r as usize == k => {
            OPEN_SHARED_SEED
        }
        _ => r,
    }
}

/// The key of the intercept among the coordinates of an example under hashing.
const INTERCEPT_KEY: usize = usize::MAX;

/// The slot of coordinate `key` in block `r`. Without hashing (`n_hashed = 0`) the key is the
/// feature index (the intercept's is `n_features`) and the slot. Under hashing, feature j is stored
/// in two slots, keys `2j` and `2j + 1`, each with value `x_j/√2` (so ‖x̃‖ is kept): a word that
/// collides with another in one slot rarely does in both. A key goes to one of the `n_hashed`
/// first slots by a 64-bit mix (MurmurHash3's finaliser) seeded by the block, so that collisions
/// in one block (say the shared one) are independent of those in the others, as VW's hash of a
/// crossed feature differs from the feature's own; the intercept (`INTERCEPT_KEY`) keeps the last
/// slot to itself.
#[inline]
pub fn slot_of(key: usize, block: u32, n_hashed: usize) -> usize {
    if n_hashed == 0 {
        return key;
    }
    if key == INTERCEPT_KEY {
        return n_hashed;
    }
    let mut k = (key as u64) ^ (u64::from(block)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    k ^= k >> 33;
    k = k.wrapping_mul(0xFF51_AFD7_ED55_8CCD);
    k ^= k >> 33;
    k = k.wrapping_mul(0xC4CE_B9FE_1A85_EC53);
    k ^= k >> 33;
    // Lemire's multiply-shift range reduction: uniform over [0, n_hashed) for any n_hashed.
    ((u128::from(k) * n_hashed as u128) >> 64) as usize
}

impl MTLinear {
    pub fn new(tasks: &TaskKernel, n_features: usize, params: MTLinearParams) -> Result<Self> {
        Self::build(&params, &Setting::over(tasks, None, n_features, false))
    }
}

impl Build for MTLinear {
    type Params = MTLinearParams;

    fn from_checked(params: &MTLinearParams, setting: &Setting) -> Result<Self> {
        let (tasks, n_features, params) = (setting.task_kernel()?, setting.n_features, *params);
        let n_tasks = tasks.n_tasks();
        let dim = n_features + usize::from(params.fit_intercept);
        // Under hashing the intercept keeps one slot of the 2^b to itself.
        let (width, n_hashed) = match params.hash_bits {
            Some(b) if (1usize << b) < dim => (1usize << b, (1usize << b) - usize::from(params.fit_intercept)),
            _ => (dim, 0),
        };
        // Per task: a block slot, its factor terms and its component (checked before the factor
        // is built, so an absurd n_tasks is an error, not an abort).
        let per_task = std::mem::size_of::<Option<Block>>() + std::mem::size_of::<Vec<(u32, f64)>>() + 16 + 4;
        Need::new("n_tasks", n_tasks, "MTLinear's per-task blocks and factor terms")
            .count::<u8>(&[n_tasks + 1, per_task])?;
        let (terms, n_blocks) = factor_terms(tasks);
        let component: Vec<u32> = (0..n_tasks).map(|i| tasks.component(i) as u32).collect();
        Ok(Self {
            n_tasks,
            n_features,
            params,
            tasks: tasks.clone(),
            width,
            n_hashed,
            terms,
            stats: vec![ComponentStats::default(); tasks.n_components()],
            component,
            blocks: vec![None; n_blocks],
            n_updates: 0,
            rates: Vec::new(),
            entries: Vec::new(),
            pad: Scratchpad::default(),
        })
    }
}

impl MTLinear {
    fn hash_seed(&self, r: u32) -> u32 {
        hash_seed(&self.tasks, r)
    }

    /// The position of the complete graph's shared block (block k, k >= 2) among `task`'s terms,
    /// the block whose rates `shared_rate` multiplies (M.8); None for every other graph.
    fn shared_term(&self, task: usize) -> Option<usize> {
        match self.tasks {
            TaskKernel::Complete { k, .. } if k >= 2 => self.terms[task].iter().position(|&(r, _)| r as usize == k),
            _ => None,
        }
    }

    /// Slots per weight block (at most `2^hash_bits`).
    pub fn width(&self) -> usize {
        self.width
    }

    pub fn n_blocks(&self) -> usize {
        self.blocks.len()
    }

    /// Bytes held by the allocated blocks (weights and per-coordinate statistics).
    pub fn memory_bytes(&self) -> usize {
        self.blocks.iter().flatten().map(Block::n_values).sum::<usize>() * std::mem::size_of::<f32>()
    }

    /// `<w_r, x̃>` for one block (`data` interleaves the weights with `stride - 1` statistics),
    /// summed term by term in the order of [`Self::gather`] (nonzero features, under hashing both
    /// half-value copies, then the intercept), so that `decision` reproduces `learn`'s scores.
    fn block_score(&self, data: &[f32], x: &Row, seed: u32) -> f64 {
        let (d, n_hashed, stride) = (self.n_features, self.n_hashed, self.params.rule.stride());
        let mut s = 0.0;
        let mut add = |j: usize, value: f64| {
            if value != 0.0 {
                // Not `s += a + b`: the gather adds the two copies one at a time.
                if n_hashed == 0 {
                    s += value * f64::from(data[j * stride]);
                } else {
                    let half = value * FRAC_1_SQRT_2;
                    s += half * f64::from(data[slot_of(2 * j, seed, n_hashed) * stride]);
                    s += half * f64::from(data[slot_of(2 * j + 1, seed, n_hashed) * stride]);
                }
            }
        };
        match *x {
            Row::Dense(v) => v.iter().enumerate().for_each(|(j, &value)| add(j, value)),
            Row::Sparse { indices, values } => indices
                .iter()
                .zip(values)
                .for_each(|(&j, &value)| add(j as usize, value)),
        }
        if self.params.fit_intercept {
            let key = if n_hashed == 0 { d } else { INTERCEPT_KEY };
            s += f64::from(data[slot_of(key, seed, n_hashed) * stride]);
        }
        s
    }

    /// The nonzero coordinates `(key, value)` of `x̃ = (x, 1)` (VW stores no zero features; keys
    /// as in [`slot_of`]). Gathered once per update so that the loops over blocks run without
    /// branches.
    fn gather_entries(&mut self, x: &Row) {
        self.entries.clear();
        match *x {
            Row::Dense(v) => {
                self.entries.resize(v.len(), (0, 0.0));
                let mut n = 0;
                for (j, &value) in v.iter().enumerate() {
                    // Branch-free compaction: dense rows often hold unpredictable zeros.
                    self.entries[n] = (j, value);
                    n += usize::from(value != 0.0);
                }
                self.entries.truncate(n);
            }
            Row::Sparse { indices, values } => self.entries.extend(
                indices
                    .iter()
                    .zip(values)
                    .filter(|&(_, &value)| value != 0.0)
                    .map(|(&j, &value)| (j as usize, value)),
            ),
        }
        if self.n_hashed > 0 {
            // Two half-weight copies of every feature (see `slot_of`).
            let n = self.entries.len();
            self.entries.resize(2 * n, (0, 0.0));
            for i in (0..n).rev() {
                let (j, value) = self.entries[i];
                self.entries[2 * i] = (2 * j, value * FRAC_1_SQRT_2);
                self.entries[2 * i + 1] = (2 * j + 1, value * FRAC_1_SQRT_2);
            }
        }
        if self.params.fit_intercept {
            let key = if self.n_hashed == 0 {
                self.n_features
            } else {
                INTERCEPT_KEY
            };
            self.entries.push((key, 1.0));
        }
    }

    /// One pass over the coordinates of `φ(x, task)`: records each one's slot, value `u` and the
    /// slot's `G` and `N` (zeros in a block not yet allocated) in the scratchpad, and returns the
    /// score `Σ_r B[r, task] Σ_j x̃_j w_r[j]`. The update then reads the scratchpad instead of the
    /// blocks, so an example's weights come from memory once (the write pass finds them in cache).
    fn gather(&mut self, x: &Row, task: usize) -> f64 {
        self.gather_entries(x);
        let n_coords = self.entries.len() * self.terms[task].len();
        let pad = &mut self.pad;
        pad.set_len(n_coords);
        let m = self.entries.len();
        if let [(r0, b0), (r1, b1)] = self.terms[task][..] {
            // Two blocks (the complete graph): one loop over the entries reads both, so the two
            // slots of an entry are fetched together and the two sums run side by side.
            let (coords0, coords1) = pad.split(m);
            let (seed0, seed1) = (hash_seed(&self.tasks, r0), hash_seed(&self.tasks, r1));
            let block = |r: u32| self.blocks[r as usize].as_ref().map(|bl| &*bl.data);
            let (entries, n_hashed) = (&self.entries[..], self.n_hashed);
            let (blocks, bs, seeds) = ((block(r0), block(r1)), (b0, b1), (seed0, seed1));
            let (s0, s1) = match self.params.rule.stride() {
                3 => gather_pair::<3>(entries, seeds, bs, n_hashed, blocks, coords0, coords1),
                2 => gather_pair::<2>(entries, seeds, bs, n_hashed, blocks, coords0, coords1),
                _ => gather_pair::<1>(entries, seeds, bs, n_hashed, blocks, coords0, coords1),
            };
            return 0.0 + b0 * s0 + b1 * s1;
        }
        let mut score = 0.0;
        for (term, &(r, b)) in self.terms[task].iter().enumerate() {
            let seed = hash_seed(&self.tasks, r);
            let block = self.blocks[r as usize].as_ref().map(|bl| &*bl.data);
            let span = term * m..(term + 1) * m;
            let coords = Coords {
                slot: &mut pad.slot[span.clone()],
                u: &mut pad.u[span.clone()],
                w: &mut pad.w[span.clone()],
                g: &mut pad.g[span.clone()],
                n: &mut pad.n[span],
            };
            let s = match self.params.rule.stride() {
                3 => gather_block::<3>(&self.entries, seed, b, self.n_hashed, block, coords),
                2 => gather_block::<2>(&self.entries, seed, b, self.n_hashed, block, coords),
                _ => gather_block::<1>(&self.entries, seed, b, self.n_hashed, block, coords),
            };
            score += b * s;
        }
        score
    }

    /// Phase one computes every rate and the step from the gathered state (see [`Self::gather`])
    /// without writing; phase two writes only if all of it is finite, so a refused update leaves
    /// the model unchanged.
    fn apply_update(&mut self, task: usize, y: f64, score: f64) -> Result<()> {
        let MTLinearParams {
            loss,
            rule,
            learning_rate,
            shared_rate,
            ..
        } = self.params;
        let shared = self.shared_term(task).filter(|_| shared_rate != 1.0);
        let c = self.component[task] as usize;
        let stats = self.stats[c];
        let t = stats.n_examples + 1.0;
        // Every loss here has ℓ > 0 exactly where ∂ℓ/∂p ≠ 0.
        let g = loss.derivative(y, score);
        // A derivative whose square underflows (|g| < 1.5e-154: a logistic margin beyond ~354)
        // teaches nothing in double precision, and would give a coordinate never updated the rate
        // 1/√0 (a NaN sensitivity): such an example counts as one without loss.
        if g * g < f64::MIN_POSITIVE {
            self.stats[c].n_examples = t;
            return Ok(());
        }
        // What each coordinate's second statistic accumulates per update: g²u² (AdaGrad's G) or,
        // for AROW, u² (its precision grows by u²/r whatever the loss, as in the paper).
        let g2 = if rule == UpdateRule::Arow { 1.0 } else { g * g };
        let stride = rule.stride();
        let (slot, u, ws, gs, ns) = self.pad.view();
        self.rates.resize(u.len(), 0.0);
        let (h, norm_x) = match rule {
            UpdateRule::Normalized => normalized_rates(g2, u, gs, ns, &mut self.rates),
            UpdateRule::Adagrad => {
                let mut h = 0.0;
                for ((rate, &u), &g_old) in self.rates.iter_mut().zip(u.iter()).zip(gs.iter()) {
                    *rate = 1.0 / (g_old + g2 * u * u).sqrt();
                    h += u * u * *rate;
                }
                (h, 0.0)
            }
            UpdateRule::Sgd => {
                let rate = 1.0 / t.sqrt();
                self.rates.fill(rate);
                (rate * u.iter().map(|u| u * u).sum::<f64>(), 0.0)
            }
            UpdateRule::Arow => arow_variances(learning_rate, u, gs, &mut self.rates),
        };
        // ρ ≠ 1 only (ρ = 1 is the rule above, bit for bit): the shared block's rates times ρ.
        let h = match shared {
            Some(term) => {
                let span = term * self.entries.len()..(term + 1) * self.entries.len();
                h + scale_shared_rates(shared_rate, &u[span.clone()], &mut self.rates[span])
            }
            None => h,
        };
        let (n_norm, sum_norm) = (stats.n_updates + 1.0, stats.sum_norm_x + norm_x);
        let multiplier = match rule {
            UpdateRule::Normalized => (n_norm / sum_norm).sqrt(),
            _ => 1.0,
        };
        let h = h * multiplier;
        if h == 0.0 {
            // x̃ = 0: nothing to learn from.
            self.stats[c].n_examples = t;
            return Ok(());
        }
        let scale = match rule {
            UpdateRule::Arow => loss.proximal_step(y, score, learning_rate, h),
            _ => loss.invariant_step(y, score, learning_rate, h) * multiplier,
        };
        let WriteBounds {
            max_w,
            max_g,
            max_u,
            sum_ur,
            sum_u2,
            rates_finite,
        } = write_bounds(u, &self.rates, ws, gs);
        if !(h.is_finite() && scale.is_finite() && rates_finite) {
            return Err(Error::Numerical(format!(
                "MTLinear: non-finite step (sensitivity {h}, step {scale}) on a task-{task} example; update refused"
            )));
        }
        // Every value written must fit f32. Bounds that hold even when coordinates collide in one
        // slot (each adds its own change): |w'| <= max |w| + Σ |Δw|, G' <= max G + g² Σ u²,
        // N' <= max |u| (rescaling only shrinks w).
        let bounds = [max_w + scale.abs() * sum_ur, max_g + g2 * sum_u2, max_u];
        if !bounds.iter().all(|&b| b < f64::from(f32::MAX)) {
            return Err(Error::Numerical(format!(
                "MTLinear: a weight or statistic would exceed single precision ({bounds:?}) on a task-{task} \
                 example; update refused"
            )));
        }
        // Phase two: coordinates in gather order, `n_entries` per block of the task's terms.
        let (width, n_entries) = (self.width, self.entries.len());
        // The blocks this example touches, allocated before anything is written (an allocation
        // failure leaves the model as it was; a zero block stands for no block).
        for &(r, _) in &self.terms[task] {
            if self.blocks[r as usize].is_none() {
                self.blocks[r as usize] = Some(Block::try_new(width, rule)?);
            }
        }
        for (term, &(r, _)) in self.terms[task].iter().enumerate() {
            let block = self.blocks[r as usize].as_mut().expect("allocated above");
            let span = term * n_entries..(term + 1) * n_entries;
            if self.n_hashed == 0 {
                let args = WriteArgs {
                    slot: &slot[span.clone()],
                    u: &u[span.clone()],
                    w: &ws[span.clone()],
                    g: &gs[span.clone()],
                    n: &ns[span.clone()],
                    rates: &self.rates[span],
                    g2,
                    scale,
                };
                write_distinct(&mut block.data, stride, &args);
                continue;
            }
            // Colliding coordinates share a slot: each reads what the previous one wrote.
            let (slot, u, rates) = (&slot[span.clone()], &u[span.clone()], &self.rates[span]);
            match stride {
                3 => write_block::<3>(&mut block.data, slot, u, rates, g2, scale),
                2 => write_block::<2>(&mut block.data, slot, u, rates, g2, scale),
                _ => write_block::<1>(&mut block.data, slot, u, rates, g2, scale),
            }
        }
        self.stats[c] = ComponentStats {
            n_examples: t,
            n_updates: n_norm,
            sum_norm_x: sum_norm,
        };
        self.n_updates += 1;
        Ok(())
    }

    /// All blocks as a `n_blocks x width` row-major matrix (zeros for blocks never written).
    pub fn block_weights(&self) -> Vec<f64> {
        let mut out = vec![0.0; self.blocks.len() * self.width];
        for (r, block) in self.blocks.iter().enumerate() {
            if let Some(b) = block {
                let stride = self.params.rule.stride();
                let row = &mut out[r * self.width..(r + 1) * self.width];
                row.iter_mut()
                    .zip(b.data.iter().step_by(stride))
                    .for_each(|(o, &w)| *o = f64::from(w));
            }
        }
        out
    }
}

impl MTLinear {
    /// Same hyper-parameters (task kernel, features, loss, rule, rate, intercept, hashing).
    pub fn same_settings(&self, other: &Self) -> bool {
        self.n_features == other.n_features && self.params == other.params && self.tasks.approx_eq(&other.tasks)
    }
}

impl CheckState for MTLinear {
    /// Everything `score` and `update` index or divide by: the factor's blocks exist, the slots
    /// fit the blocks, the component counters exist; values finite.
    fn check_state(&self) -> Result<()> {
        self.tasks.check_state()?;
        ensure(self.n_tasks == self.tasks.n_tasks(), || {
            "n_tasks differs from the task kernel".into()
        })?;
        param(self.params.check())?;
        ensure(self.n_features >= 1, || "n_features must be >= 1".into())?;
        check_counts("MTLinear", &[self.n_updates])?;
        let dim = self
            .n_features
            .checked_add(usize::from(self.params.fit_intercept))
            .ok_or_else(|| Error::State(format!("n_features = {} is out of range", self.n_features)))?;
        let (width, n_hashed) = match self.params.hash_bits {
            Some(b) if (1usize << b) < dim => (1usize << b, (1usize << b) - usize::from(self.params.fit_intercept)),
            _ => (dim, 0),
        };
        ensure((self.width, self.n_hashed) == (width, n_hashed), || {
            format!(
                "block width {} does not follow from the parameters ({width})",
                self.width
            )
        })?;
        check_len("MTLinear factor", self.terms.len(), self.n_tasks)?;
        check_len("MTLinear components", self.component.len(), self.n_tasks)?;
        let n_blocks = self.blocks.len();
        for terms in &self.terms {
            for &(r, b) in terms {
                ensure((r as usize) < n_blocks && b.abs() <= MAX_MAGNITUDE, || {
                    format!("factor entry ({r}, {b}) outside the {n_blocks} blocks or not finite")
                })?;
            }
        }
        ensure(self.component.iter().all(|&c| (c as usize) < self.stats.len()), || {
            "a task's component has no counters".into()
        })?;
        for st in &self.stats {
            let counters = [st.n_examples, st.n_updates, st.sum_norm_x];
            check_finite("MTLinear component counters", &counters)?;
            // Negative counters would turn the multiplier √(n/S) into NaN.
            ensure(counters.iter().all(|&v| v >= 0.0), || {
                format!("negative MTLinear component counters {counters:?}")
            })?;
        }
        let stride = self.params.rule.stride();
        let len = checked_size("an MTLinear block", width, stride)?;
        for block in self.blocks.iter().flatten() {
            check_len("an MTLinear block", block.data.len(), len)?;
            ensure(block.data.iter().all(|v| v.is_finite()), || {
                "an MTLinear block holds a value that is not finite".into()
            })?;
            // Σ g²u² and max |u| are never negative (a negative G makes a rate NaN).
            ensure(
                block
                    .data
                    .chunks_exact(stride)
                    .all(|cell| cell[1..].iter().all(|&v| v >= 0.0)),
                || "negative per-coordinate statistics in an MTLinear block".into(),
            )?;
        }
        Ok(())
    }
}

impl PartialEq for MTLinear {
    /// The model state (the scratch buffer of rates is not part of it).
    fn eq(&self, other: &Self) -> bool {
        self.n_tasks == other.n_tasks
            && self.n_features == other.n_features
            && self.params == other.params
            && self.terms == other.terms
            && self.stats == other.stats
            && self.blocks == other.blocks
            && self.n_updates == other.n_updates
    }
}

impl OnlineLearner for MTLinear {
    shape_fields!(grows);

    fn score(&self, x: Row, task: usize, _scratch: &mut Scratch) -> f64 {
        self.terms[task]
            .iter()
            .filter_map(|&(r, b)| {
                self.blocks[r as usize]
                    .as_ref()
                    .map(|bl| b * self.block_score(&bl.data, &x, self.hash_seed(r)))
            })
            .sum()
    }

    fn update(&mut self, x: Row, task: usize, y: f64, score: f64, _scratch: &mut Scratch) -> Result<()> {
        self.gather(&x, task);
        self.apply_update(task, y, score)
    }

    /// Starts loading the slots of the next example's coordinates (each a cache miss on a large
    /// vocabulary) while this one is learnt.
    fn prefetch(&self, x: Row, task: usize) {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            let (n_hashed, stride) = (self.n_hashed, self.params.rule.stride());
            let Row::Sparse { indices, values } = x else {
                return; // dense rows: few features, their slots stay in cache
            };
            // The row's values, which the gather reads first (its indices are read just below).
            for chunk in values.chunks(8) {
                // SAFETY: a prefetch is a hint on a valid address; it never faults.
                unsafe { _mm_prefetch::<_MM_HINT_T0>(chunk.as_ptr().cast()) };
            }
            let cell_hint = |data: &[f32], at: usize| {
                if let Some(cell) = data.get(at..at + stride) {
                    // SAFETY: prefetches are hints on valid addresses; they never fault. A cell
                    // that straddles two cache lines gets both.
                    unsafe {
                        _mm_prefetch::<_MM_HINT_T0>(cell.as_ptr().cast());
                        _mm_prefetch::<_MM_HINT_T0>(cell[stride - 1..].as_ptr().cast());
                    }
                }
            };
            if let (0, [(r0, _), (r1, _)]) = (n_hashed, &self.terms[task][..]) {
                // The complete graph without hashing: both blocks' cells of an entry together,
                // in the order the gather reads them.
                if let (Some(b0), Some(b1)) = (&self.blocks[*r0 as usize], &self.blocks[*r1 as usize]) {
                    for &j in indices {
                        cell_hint(&b0.data, j as usize * stride);
                        cell_hint(&b1.data, j as usize * stride);
                    }
                    return;
                }
            }
            for &(r, _) in &self.terms[task] {
                let Some(block) = self.blocks[r as usize].as_ref() else {
                    continue;
                };
                let hint = |key: usize| cell_hint(&block.data, slot_of(key, self.hash_seed(r), n_hashed) * stride);
                for &j in indices {
                    if n_hashed == 0 {
                        hint(j as usize);
                    } else {
                        hint(2 * j as usize);
                        hint(2 * j as usize + 1);
                    }
                }
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (x, task);
    }

    /// Score and update share one gathering pass over the example's slots.
    fn learn_one(&mut self, x: Row, task: usize, y: f64, _scratch: &mut Scratch) -> Result<f64> {
        let score = self.gather(&x, task);
        self.apply_update(task, y, score)?;
        Ok(score)
    }

    linear_counters!();

    fn diagnostics(&self) -> Vec<(&'static str, f64)> {
        vec![
            ("memory_bytes", self.memory_bytes() as f64),
            ("n_blocks", self.blocks.len() as f64),
            (
                "n_allocated_blocks",
                self.blocks.iter().filter(|b| b.is_some()).count() as f64,
            ),
            ("block_width", self.width as f64),
        ]
    }

    fn arrays(&self) -> Vec<(&'static str, Vec<usize>, Vec<f64>)> {
        vec![(
            "block_weights",
            vec![self.blocks.len(), self.width],
            self.block_weights(),
        )]
    }
}

impl MTLinear {
    /// Adds `n` tasks (open-ended task sets). Disconnected graph: `n` new components, each with
    /// its own (unallocated) block and counters. Complete graph (k >= 2): the new tasks join the
    /// component, the shared block moves to the new last index (`r = k + n`, M.1) and the new
    /// tasks' own blocks are unallocated (the open complete graph's shared block keeps its hash
    /// seed, [`OPEN_SHARED_SEED`]). Refused, leaving the model unchanged: a complete graph with
    /// k = 1 whose single block holds weights (M.1 uses one block for k = 1, which does not split
    /// into shared and own), and under hashing a fixed complete graph whose shared block holds
    /// weights (it is hashed with its index, which would change).
    fn grow_tasks(&mut self, n: usize) -> Result<()> {
        let mut tasks = self.tasks.clone();
        tasks.grow(n)?;
        let (k, new_k) = (self.n_tasks, tasks.n_tasks());
        let cannot = |why: &str| {
            Err(invalid(
                "n_tasks",
                format!("MTLinear cannot add tasks to this fitted model: {why}"),
            ))
        };
        let complete = matches!(tasks, TaskKernel::Complete { .. });
        if complete && k == 1 && self.blocks[0].is_some() {
            return cannot(
                "a one-task complete graph keeps one block, which does not split into shared and own blocks",
            );
        }
        if complete
            && k >= 2
            && self.n_hashed > 0
            && self.blocks[k].is_some()
            && self.hash_seed(k as u32) != OPEN_SHARED_SEED
        {
            return cannot(
                "under hashing the fixed complete graph's shared block is hashed with its index, which moves",
            );
        }
        let per_task = std::mem::size_of::<Option<Block>>() + std::mem::size_of::<Vec<(u32, f64)>>() + 16 + 4;
        Need::new("n_tasks", new_k, "MTLinear's per-task blocks and factor terms")
            .count::<u8>(&[new_k + 1, per_task])?;
        let (terms, n_blocks) = factor_terms(&tasks);
        let component: Vec<u32> = (0..new_k).map(|i| tasks.component(i) as u32).collect();
        let mut old = std::mem::take(&mut self.blocks).into_iter();
        let mut blocks: Vec<Option<Block>> = Vec::with_capacity(n_blocks);
        if complete && k == 1 {
            blocks.resize(n_blocks, None); // the single block was empty (checked above)
        } else {
            blocks.extend(old.by_ref().take(k));
            blocks.resize(blocks.len() + n, None);
            blocks.extend(old); // the complete graph's shared block, now at index new_k
        }
        debug_assert_eq!(blocks.len(), n_blocks);
        if !complete {
            self.stats.resize(self.stats.len() + n, ComponentStats::default());
        }
        self.blocks = blocks;
        self.terms = terms;
        self.component = component;
        self.n_tasks = new_k;
        self.tasks = tasks;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::Rows;
    use crate::learner::learn;
    use crate::learner::test_support::stream;

    fn labelled(n: usize, d: usize, k: usize, seed: u64) -> (Vec<f64>, Vec<f64>, Vec<i64>) {
        let sign = |task: usize| if task.is_multiple_of(2) { 1.0 } else { -0.5 };
        let (x, tasks, y) = stream(n, d, k, seed, |x, task, _| x[0] + sign(task) * x[1] > 0.1);
        (x, y, tasks)
    }

    fn params(loss: &str, rule: &str, hash_bits: Option<u32>) -> MTLinearParams {
        MTLinearParams::new(
            Loss::parse(loss).unwrap(),
            UpdateRule::parse(rule).unwrap(),
            0.5,
            true,
            hash_bits,
        )
        .unwrap()
    }

    #[test]
    fn logistic_gain_solves_the_flow() {
        for &m0 in &[-800.0, -30.0, -2.0, 0.0, 0.7, 5.0, 30.0, 800.0] {
            for &a in &[1e-12, 1e-3, 0.5, 3.0, 1e3, 1e8] {
                let delta = logistic_margin_gain(m0, a);
                assert!(delta >= 0.0 && delta.is_finite(), "m0={m0} a={a}: {delta}");
                if m0.abs() < 100.0 {
                    // (m0 + δ) + e^{m0+δ} = m0 + e^{m0} + a
                    let lhs = delta + m0.exp() * delta.exp_m1();
                    assert!((lhs - a).abs() <= 1e-12 * a.max(1.0), "m0={m0} a={a}: {lhs}");
                }
            }
        }
        // Small steps: the first-order (plain gradient) step.
        let d = logistic_margin_gain(0.3, 1e-9);
        assert!((d / (1e-9 * sigmoid(-0.3)) - 1.0).abs() < 1e-9);
    }

    #[test]
    fn logistic_proximal_gain_solves_its_equation() {
        for &m0 in &[-800.0, -30.0, -2.0, 0.0, 0.7, 5.0, 30.0, 800.0] {
            for &a in &[1e-12, 1e-3, 0.5, 3.0, 1e3, 1e8, 1e300] {
                let delta = logistic_proximal_gain(m0, a);
                assert!(delta >= 0.0 && delta.is_finite(), "m0={m0} a={a}: {delta}");
                if m0.abs() < 100.0 {
                    let lhs = delta * (1.0 + (m0 + delta).exp());
                    assert!((lhs - a).abs() <= 1e-12 * a, "m0={m0} a={a}: {lhs}");
                }
            }
        }
        // AROW's hinge step: the margin moves by v (1 - m)/(v + r), r = 1/η; none beyond margin 1.
        let (v, eta) = (0.8, 2.0);
        assert!((v * Loss::Hinge.proximal_step(1.0, 0.3, eta, v) - v * 0.7 / (v + 0.5)).abs() < 1e-15);
        assert_eq!(Loss::Hinge.proximal_step(-1.0, -1.5, eta, v), 0.0);
    }

    #[test]
    fn shared_rate_moves_the_shared_share_of_the_first_step() {
        // Complete graph k = 2, one task-0 logistic example x = (2, 0): each of the 4 coordinates
        // (own and shared, feature and intercept) has u² r = 2 under the normalized rule and
        // μ = 1/2, so h = 2 (1 + ρ); the shared block carries ρ/(1 + ρ) of the margin gain δ,
        // which is all task 1 sees. Graphs without a shared block ignore ρ.
        let tk = TaskKernel::complete(2).unwrap();
        for rho in [0.5, 1.0, 3.0] {
            let p = params("logistic", "normalized", None).with_shared_rate(rho).unwrap();
            let mut m = MTLinear::new(&tk, 2, p).unwrap();
            run(&mut m, &[2.0, 0.0], &[1.0], &[0], 2);
            let delta = logistic_margin_gain(0.0, 0.5 * 2.0 * (1.0 + rho));
            let mut scratch = Scratch::default();
            let own_and_shared = m.score(Row::Dense(&[2.0, 0.0]), 0, &mut scratch);
            let shared = m.score(Row::Dense(&[2.0, 0.0]), 1, &mut scratch);
            assert!((own_and_shared - delta).abs() < 1e-6 * delta, "{rho}: {own_and_shared} vs {delta}");
            assert!((shared - delta * rho / (1.0 + rho)).abs() < 1e-6 * delta, "{rho}: {shared}");
        }
        let (x, y, tasks) = labelled(200, 4, 3, 5);
        let tk = TaskKernel::disconnected(3).unwrap();
        let mut plain = MTLinear::new(&tk, 4, params("logistic", "normalized", None)).unwrap();
        let p = params("logistic", "normalized", None).with_shared_rate(3.0).unwrap();
        let mut rho = MTLinear::new(&tk, 4, p).unwrap();
        assert_eq!(run(&mut plain, &x, &y, &tasks, 4), run(&mut rho, &x, &y, &tasks, 4));
    }

    #[test]
    fn a_state_with_a_bad_shared_rate_is_refused() {
        let tk = TaskKernel::complete(2).unwrap();
        let mut m = MTLinear::new(&tk, 2, params("logistic", "normalized", None)).unwrap();
        assert!(m.check_state().is_ok());
        for rho in [0.0, -2.0, f64::NAN, f64::INFINITY] {
            m.params.shared_rate = rho;
            assert!(m.check_state().is_err(), "{rho}");
        }
    }

    #[test]
    fn hinge_and_squared_steps_do_not_overshoot() {
        // A huge rate reaches the hinge exactly, and the squared flow approaches the label.
        let s = Loss::Hinge.invariant_step(1.0, -2.0, 1e9, 4.0);
        assert!((-2.0 + 4.0 * s - 1.0).abs() < 1e-12);
        let s = Loss::Squared.invariant_step(-1.0, 3.0, 1e9, 2.0);
        assert!((3.0 + 2.0 * s + 1.0).abs() < 1e-12);
    }

    fn run(model: &mut MTLinear, x: &[f64], y: &[f64], tasks: &[i64], d: usize) -> Vec<f64> {
        let rows = Rows::dense(x, y.len(), d);
        learn(model, &rows, tasks, y).unwrap()
    }

    #[test]
    fn disconnected_equals_independent_learners() {
        for (rule, seed) in [("normalized", 1), ("arow", 4)] {
            let (n, d, k) = (300, 5, 3);
            let (x, y, tasks) = labelled(n, d, k, seed);
            let tk = TaskKernel::disconnected(k).unwrap();
            let mut joint = MTLinear::new(&tk, d, params("logistic", rule, None)).unwrap();
            let joint_scores = run(&mut joint, &x, &y, &tasks, d);
            let one = TaskKernel::disconnected(1).unwrap();
            for task in 0..k {
                let idx: Vec<usize> = (0..n).filter(|&t| tasks[t] == task as i64).collect();
                let xs: Vec<f64> = idx.iter().flat_map(|&t| x[t * d..(t + 1) * d].to_vec()).collect();
                let ys: Vec<f64> = idx.iter().map(|&t| y[t]).collect();
                let mut single = MTLinear::new(&one, d, params("logistic", rule, None)).unwrap();
                let s = run(&mut single, &xs, &ys, &vec![0; idx.len()], d);
                let expected: Vec<f64> = idx.iter().map(|&t| joint_scores[t]).collect();
                assert_eq!(s, expected, "{rule}");
            }
        }
    }

    #[test]
    fn hashing_with_enough_bits_equals_no_hashing() {
        let (n, d, k) = (200, 6, 4);
        let (x, y, tasks) = labelled(n, d, k, 2);
        let tk = TaskKernel::complete(k).unwrap();
        for rule in ["normalized", "adagrad", "sgd", "arow"] {
            let mut plain = MTLinear::new(&tk, d, params("hinge", rule, None)).unwrap();
            let mut hashed = MTLinear::new(&tk, d, params("hinge", rule, Some(3))).unwrap();
            assert_eq!(hashed.width(), 7);
            assert_eq!(run(&mut plain, &x, &y, &tasks, d), run(&mut hashed, &x, &y, &tasks, d));
            let mut small = MTLinear::new(&tk, d, params("hinge", rule, Some(2))).unwrap();
            run(&mut small, &x, &y, &tasks, d);
            assert_eq!(small.width(), 4);
            assert!(small.memory_bytes() <= small.n_blocks() * 4 * 3 * 8);
        }
    }

    #[test]
    fn learns_and_touches_only_its_blocks() {
        let (n, d, k) = (2000, 4, 4);
        let (x, y, tasks) = labelled(n, d, k, 3);
        let tk = TaskKernel::complete(k).unwrap();
        for rule in ["normalized", "arow"] {
            for loss in ["logistic", "hinge", "squared"] {
                let mut m = MTLinear::new(&tk, d, params(loss, rule, None)).unwrap();
                let scores = run(&mut m, &x, &y, &tasks, d);
                let late_errors = (n / 2..n).filter(|&t| (scores[t] >= 0.0) != (y[t] > 0.0)).count();
                assert!(late_errors < n / 10, "{rule} {loss}: {late_errors}");
            }
        }
        // Only task 2 seen: its block and the shared block exist.
        let mut m = MTLinear::new(&tk, d, params("logistic", "normalized", None)).unwrap();
        run(&mut m, &x[..d], &y[..1], &[2], d);
        assert_eq!(m.diagnostics()[2].1, 2.0);
        assert!(m.block_weights()[..2 * (d + 1)].iter().all(|&w| w == 0.0));
    }

    #[test]
    fn hashed_slots_stay_in_range_and_spare_the_intercept() {
        let n_hashed = 1000;
        let mut hits = vec![0usize; n_hashed + 1];
        for block in 0..3u32 {
            for key in 0..50_000 {
                let slot = slot_of(key, block, n_hashed);
                assert!(slot < n_hashed);
                hits[slot] += 1;
            }
            assert_eq!(slot_of(INTERCEPT_KEY, block, n_hashed), n_hashed);
        }
        // Roughly uniform: 150 expected per slot.
        assert!(hits[..n_hashed].iter().all(|&h| (60..300).contains(&h)));
        // Different blocks, different collisions.
        let same = (0..1000).filter(|&key| slot_of(key, 0, n_hashed) == slot_of(key, 1, n_hashed));
        assert!(same.count() < 20);
        assert_eq!(slot_of(77, 5, 0), 77);
    }

    /// Random coordinates of one update: u (some tiny, some negative), the gathered state
    /// (some N = 0, some N above |u|), rates, and distinct slots in a block of stride 3.
    #[allow(clippy::type_complexity)]
    fn random_coords(len: usize, seed: u64) -> (Vec<f64>, Vec<f64>, Vec<f64>, Vec<f64>, Vec<usize>, Vec<f32>) {
        let mut rng = crate::rng::SplitMix64::new(seed);
        let mut unit = || (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        let mut draw = |scale: f64| (unit() - 0.3) * scale;
        let u: Vec<f64> = (0..len).map(|i| draw(if i % 5 == 0 { 1e-3 } else { 2.0 })).collect();
        let n_slots = 2 * len + 3;
        let mut block = vec![0.0f32; 3 * n_slots];
        for (i, cell) in block.chunks_exact_mut(3).enumerate() {
            cell[0] = draw(3.0) as f32;
            cell[1] = draw(5.0).abs() as f32;
            cell[2] = if i % 3 == 0 { 0.0 } else { draw(2.0).abs() as f32 };
        }
        let slot: Vec<usize> = (0..len).map(|i| 3 * (2 * i + (i % 2))).collect();
        let cell = |c: usize| slot.iter().map(|&at| f64::from(block[at + c])).collect::<Vec<f64>>();
        (u, cell(0), cell(1), cell(2), slot, block)
    }

    /// The lane kernels give the bits of the scalar rule in every build (the AVX2 one where the
    /// CPU has it), whatever the tail length: the rates and sums in the 4-lane order, the bounds,
    /// and the vectorised write-back of distinct slots against the read-modify-write one.
    #[test]
    fn lane_kernels_match_the_scalar_rule_bit_for_bit() {
        type Portable = [f64; 4];
        for len in [0usize, 1, 3, 4, 5, 8, 11, 37] {
            let (u, w, g, n, slot, block) = random_coords(len, len as u64 + 7);
            let g2 = 0.37;
            // Scalar reference: element i in lane i mod 4, lanes summed pairwise.
            let (mut rates, mut h, mut norm) = (vec![0.0; len], [0.0; 4], [0.0; 4]);
            for i in 0..len {
                let (r, dh, dn) = normalized_rate(g2, u[i], g[i], n[i]);
                (rates[i], h[i % 4], norm[i % 4]) = (r, h[i % 4] + dh, norm[i % 4] + dn);
            }
            let expected = ((h[0] + h[1]) + (h[2] + h[3]), (norm[0] + norm[1]) + (norm[2] + norm[3]));
            let mut got = vec![0.0; len];
            // SAFETY: plain arrays need no CPU feature.
            let sums = unsafe { normalized_rates_lanes::<Portable>(g2, &u, &g, &n, &mut got) };
            assert_eq!((sums, &got), (expected, &rates), "len {len}");
            let bounds = unsafe { write_bounds_lanes::<Portable>(&u, &rates, &w, &g) };
            let max = |v: &[f64]| v.iter().fold(0.0f64, |m, &x| m.max(x));
            assert_eq!(bounds.max_w, max(&w.iter().map(|v| v.abs()).collect::<Vec<_>>()));
            assert_eq!((bounds.max_g, bounds.max_u), (max(&g), max(&u.iter().map(|v| v.abs()).collect::<Vec<_>>())));
            let sum_ur: f64 = u.iter().zip(&rates).map(|(u, r)| (u * r).abs()).sum();
            assert!((bounds.sum_ur - sum_ur).abs() <= 1e-12 * sum_ur && bounds.rates_finite);
            let mut bad = rates.clone();
            if len > 0 {
                bad[len - 1] = f64::INFINITY;
                assert!(!unsafe { write_bounds_lanes::<Portable>(&u, &bad, &w, &g) }.rates_finite);
            }
            for stride in [3usize, 2, 1] {
                // The same block laid out with `stride` floats per slot.
                let block: Vec<f32> = block.chunks_exact(3).flat_map(|c| c[..stride].to_vec()).collect();
                let slot: Vec<usize> = slot.iter().map(|&at| at / 3 * stride).collect();
                let mut scalar = block.clone();
                match stride {
                    3 => write_block::<3>(&mut scalar, &slot, &u, &rates, g2, -0.8),
                    2 => write_block::<2>(&mut scalar, &slot, &u, &rates, g2, -0.8),
                    _ => write_block::<1>(&mut scalar, &slot, &u, &rates, g2, -0.8),
                }
                let args = WriteArgs {
                    slot: &slot,
                    u: &u,
                    w: &w,
                    g: &g,
                    n: &n,
                    rates: &rates,
                    g2,
                    scale: -0.8,
                };
                let mut lanes = block.clone();
                unsafe { write_distinct_stride::<Portable>(&mut lanes, stride, &args) };
                assert_eq!(lanes, scalar, "len {len}, stride {stride}");
                #[cfg(target_arch = "x86_64")]
                if std::arch::is_x86_feature_detected!("avx2") {
                    #[target_feature(enable = "avx2")]
                    unsafe fn avx2(data: &mut [f32], stride: usize, args: &WriteArgs) -> (f64, f64, Vec<f64>) {
                        use std::arch::x86_64::__m256d;
                        write_distinct_stride::<__m256d>(data, stride, args);
                        let mut rates = vec![0.0; args.u.len()];
                        let sums = normalized_rates_lanes::<__m256d>(args.g2, args.u, args.g, args.n, &mut rates);
                        (sums.0, sums.1, rates)
                    }
                    let mut wide = block.clone();
                    // SAFETY: the CPU has AVX2 (checked above).
                    let (h, norm, wide_rates) = unsafe { avx2(&mut wide, stride, &args) };
                    assert_eq!((wide, (h, norm), wide_rates), (scalar, expected, rates.clone()));
                }
            }
        }
    }

    #[test]
    fn rejects_bad_parameters() {
        assert!(MTLinearParams::new(Loss::Logistic, UpdateRule::Sgd, 0.0, true, None).is_err());
        assert!(MTLinearParams::new(Loss::Logistic, UpdateRule::Sgd, f64::NAN, true, None).is_err());
        assert!(MTLinearParams::new(Loss::Logistic, UpdateRule::Sgd, 1.0, true, Some(0)).is_err());
        assert!(MTLinearParams::new(Loss::Logistic, UpdateRule::Sgd, 1.0, true, Some(32)).is_err());
        let ok = MTLinearParams::new(Loss::Logistic, UpdateRule::Sgd, 1.0, true, None).unwrap();
        for rho in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(ok.with_shared_rate(rho).is_err(), "{rho}");
        }
        assert_eq!(ok.with_shared_rate(2.5).unwrap().shared_rate, 2.5);
        assert!(Loss::parse("log").is_err());
        assert!(UpdateRule::parse("adam").is_err());
        let tk = TaskKernel::complete(2).unwrap();
        assert!(MTLinear::new(&tk, 0, params("logistic", "sgd", None)).is_err());
    }
}
