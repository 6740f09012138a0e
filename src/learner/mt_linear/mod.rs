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
//! Storage ([`store`]): with `hash_bits = b` one table of `2^b` cells shared by every block,
//! each (block, feature) hashed into it with the block as seed, so colliding coordinates share a
//! weight and its statistics. Without
//! hashing every coordinate has its own cell: dense blocks for a narrow feature space, a sparse
//! map of the (block, feature) pairs touched for a wide one. An undo journal
//! ([`store::Journal`]) makes a batch atomic at the cost of the cells it writes.
//!
//! The state is single precision (as VW's table), the arithmetic double (docs/mt_linear.md, M.5).

use serde::{Deserialize, Serialize};

mod store;

pub use store::{slot_of, DENSE_MAX_BYTES, DENSE_MAX_WIDTH};

use store::{dense_fits, CellAt, Journal, SparseCells, Store, ABSENT, INTERCEPT_KEY, SHARED};

use crate::alloc::Need;
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
    /// The task kernel the factor follows (closed forms: computed from it per example).
    tasks: TaskKernel,
    /// A general task kernel only: per task, the blocks it reads and writes with their factor
    /// entries `(r, B[r, i])`, B[r, i] ≠ 0, and its component (empty for the closed forms, whose
    /// entries are computed: nothing is stored per task).
    terms: Vec<Vec<(u32, f64)>>,
    component: Vec<u32>,
    /// Per connected component (one for the complete graph, one per task when disconnected).
    stats: Vec<ComponentStats>,
    store: Store,
    n_updates: u64,
    /// Undo log of the batch in progress ([`OnlineLearner::journal_begin`]).
    #[serde(skip)]
    journal: Journal,
    /// Per-coordinate rates of the update in progress (phase one to phase two).
    #[serde(skip)]
    rates: Vec<f64>,
    /// The nonzero entries `(key, value)` of the example being learnt.
    #[serde(skip)]
    entries: Vec<(usize, f64)>,
    /// Per coordinate of the update in progress: u and the slot's G and N before it.
    #[serde(skip)]
    pad: Scratchpad,
    /// The factor entries of the update in progress.
    #[serde(skip)]
    term_buf: Vec<(u32, f64)>,
}

/// The factor entries `(block, B[block, task])` of one task: computed for the closed forms, or
/// the stored list of a general task kernel.
enum Terms<'a> {
    Closed([(u32, f64); 2], usize),
    Stored(&'a [(u32, f64)]),
}

impl std::ops::Deref for Terms<'_> {
    type Target = [(u32, f64)];

    fn deref(&self) -> &[(u32, f64)] {
        match self {
            Terms::Closed(t, n) => &t[..*n],
            Terms::Stored(t) => t,
        }
    }
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

/// Where a block's cells are: the offset of `(block, key)` in the block's data.
#[derive(Clone, Copy)]
enum Loc<'a> {
    /// A dense block: the key is the index.
    Direct,
    /// The hashed table of this many cells.
    Hashed(usize),
    /// The sparse map (its slab is the data): [`ABSENT`] for a pair without a cell.
    Sparse(&'a SparseCells),
}

impl Loc<'_> {
    #[inline(always)]
    fn at<const S: usize>(self, r: u32, key: usize) -> usize {
        match self {
            Loc::Direct => key * S,
            Loc::Hashed(n) => slot_of(key as u64, r, n) * S,
            Loc::Sparse(cells) => cells.offset(r, key as u32),
        }
    }
}

/// Gathers the coordinates of one block (`S` floats per slot, a constant so that the cell reads
/// compile to fixed offsets) and returns `Σ_j x̃_j w_r[j]` in entry order.
#[inline(always)]
fn gather_block<const S: usize>(
    entries: &[(usize, f64)],
    r: u32,
    b: f64,
    loc: Loc,
    block: Option<&[f32]>,
    mut c: Coords,
) -> f64 {
    let mut s = 0.0;
    for (i, &(j, v)) in entries.iter().enumerate() {
        s += v * gather_coord::<S>(loc.at::<S>(r, j), b * v, block, &mut c, i);
    }
    s
}

/// The cell at `at` of `block` (zeros for a block not allocated or a pair without a cell).
#[inline(always)]
fn cell_at<const S: usize>(block: Option<&[f32]>, at: usize) -> [f32; S] {
    match block {
        Some(data) if at != ABSENT => data[at..at + S].try_into().expect("a slot holds S floats"),
        _ => [0.0; S],
    }
}

/// One coordinate of [`gather_block`]: records the slot, `u = b v` and the slot's state, and
/// returns the slot's weight.
#[inline(always)]
fn gather_coord<const S: usize>(at: usize, uv: f64, block: Option<&[f32]>, c: &mut Coords, i: usize) -> f64 {
    c.slot[i] = at;
    c.u[i] = uv;
    let cell: [f32; S] = cell_at::<S>(block, at);
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
    ids: (u32, u32),
    b: (f64, f64),
    loc: Loc,
    blocks: (Option<&[f32]>, Option<&[f32]>),
    mut c0: Coords,
    mut c1: Coords,
) -> (f64, f64) {
    let m = entries.len();
    assert!(c0.slot.len() >= m && c1.slot.len() >= m && c0.n.len() >= m && c1.n.len() >= m);
    let (mut s0, mut s1) = (0.0, 0.0);
    for (i, &(j, v)) in entries.iter().enumerate() {
        let (at0, at1) = (loc.at::<S>(ids.0, j), loc.at::<S>(ids.1, j));
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

/// A general task kernel's factor `B = T_c^{1/2}` per component, as per-task lists
/// `(block, B[block, task])` (exact zeros skipped); block ids are task indices.
fn dense_factor_terms(tasks: &TaskKernel) -> Vec<Vec<(u32, f64)>> {
    let TaskKernel::Dense { k, ref t, .. } = *tasks else {
        return Vec::new(); // the closed forms are computed per example (`MTLinear::terms`)
    };
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
    terms
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
        // Keys are u32 in the sparse map (the intercept's is n_features): feature indices are u32.
        if n_features >= u32::MAX as usize {
            return Err(invalid(
                "n_features",
                format!("MTLinear takes feature indices below 2^32 - 1, got n_features = {n_features}"),
            ));
        }
        let width = n_features + usize::from(params.fit_intercept);
        let dense_t = matches!(tasks, TaskKernel::Dense { .. });
        // Per task: a dense block slot; a general T's factor terms and component.
        let per_task = 16 + if dense_t { 24 + 4 } else { 0 };
        Need::new("n_tasks", n_tasks, "MTLinear's per-task state").count::<u8>(&[n_tasks + 1, per_task])?;
        let component = if dense_t {
            (0..n_tasks).map(|i| tasks.component(i) as u32).collect()
        } else {
            Vec::new()
        };
        let n_blocks = match *tasks {
            TaskKernel::Complete { k, .. } if k >= 2 => k + 1,
            _ => n_tasks,
        };
        let store = Store::new(params.hash_bits, width, params.rule.stride(), n_tasks, n_blocks)?;
        Ok(Self {
            n_tasks,
            n_features,
            params,
            tasks: tasks.clone(),
            terms: dense_factor_terms(tasks),
            component,
            stats: vec![ComponentStats::default(); tasks.n_components()],
            store,
            n_updates: 0,
            journal: Journal::default(),
            rates: Vec::new(),
            entries: Vec::new(),
            pad: Scratchpad::default(),
            term_buf: Vec::new(),
        })
    }
}

impl MTLinear {
    /// `task`'s factor entries `(block, B[block, task])`, B ≠ 0 (M.1): the disconnected graph's
    /// own block; the complete graph's own block then the shared one ([`SHARED`]); one block for
    /// the one-task complete graph; a general kernel's stored list.
    #[inline]
    fn terms(&self, task: usize) -> Terms<'_> {
        let mut out = [(0u32, 0.0f64); 2];
        let mut n = 0;
        let mut push = |r: u32, b: f64| {
            if b != 0.0 {
                out[n] = (r, b);
                n += 1;
            }
        };
        match self.tasks {
            TaskKernel::Disconnected { scale, .. } => push(task as u32, scale.sqrt()),
            // k = 1: T is 1 x 1, one block (the shared/per-task split would duplicate every feature).
            TaskKernel::Complete { k: 1, diag, .. } => push(0, diag.sqrt()),
            TaskKernel::Complete { diag, off, .. } => {
                push(task as u32, (diag - off).max(0.0).sqrt());
                push(SHARED, off.max(0.0).sqrt());
            }
            TaskKernel::Dense { .. } => return Terms::Stored(&self.terms[task]),
        }
        Terms::Closed(out, n)
    }

    /// The component whose counters `task` uses.
    #[inline]
    fn component_of(&self, task: usize) -> usize {
        match self.tasks {
            TaskKernel::Complete { .. } => 0,
            TaskKernel::Disconnected { .. } => task,
            TaskKernel::Dense { .. } => self.component[task] as usize,
        }
    }

    /// The position of the complete graph's shared block among `task`'s terms, the block whose
    /// rates `shared_rate` multiplies (M.8); None for every other graph.
    fn shared_term(&self, task: usize) -> Option<usize> {
        self.terms(task).iter().position(|&(r, _)| r == SHARED)
    }

    /// Cells per block as the user sees them: `2^hash_bits` (one table shared by every block)
    /// or `n_features (+1)`.
    pub fn width(&self) -> usize {
        match self.store {
            Store::Hashed { bits, .. } => 1 << bits,
            _ => self.n_features + usize::from(self.params.fit_intercept),
        }
    }

    pub fn n_blocks(&self) -> usize {
        match self.tasks {
            TaskKernel::Complete { k, .. } if k >= 2 => k + 1,
            _ => self.n_tasks,
        }
    }

    /// Bytes allocated for the model's state: the cells (table, dense blocks, or sparse records
    /// with their index), the per-component counters and a general kernel's factor.
    pub fn memory_bytes(&self) -> usize {
        let stride = self.params.rule.stride();
        let terms: usize = self.terms.iter().map(|t| 24 + t.capacity() * 16).sum();
        self.store.memory_bytes(stride)
            + self.stats.capacity() * std::mem::size_of::<ComponentStats>()
            + self.component.capacity() * 4
            + terms
    }

    /// How the store finds block `r`'s cells, and its data.
    #[inline]
    fn block_view(&self, r: u32) -> (Loc<'_>, Option<&[f32]>) {
        match &self.store {
            Store::Hashed { bits, table } => (Loc::Hashed(1 << bits), table.as_deref()),
            Store::Dense { .. } => (Loc::Direct, self.store.dense_block(r)),
            Store::Sparse(cells) => (Loc::Sparse(cells), Some(cells.cells())),
        }
    }

    /// `<w_r, x̃>` for block `r`, summed term by term in the order of [`Self::gather`] (nonzero
    /// features, then the intercept), so that `decision` reproduces `learn`'s scores.
    fn block_score(&self, x: &Row, r: u32) -> f64 {
        let (loc, data) = self.block_view(r);
        if data.is_none() {
            return 0.0;
        }
        let stride = self.params.rule.stride();
        let hashed = matches!(loc, Loc::Hashed(_));
        let weight = |key: usize| {
            let at = match stride {
                3 => loc.at::<3>(r, key),
                2 => loc.at::<2>(r, key),
                _ => loc.at::<1>(r, key),
            };
            cell_at::<1>(data, at)[0]
        };
        let mut s = 0.0;
        let mut add = |j: usize, value: f64| {
            if value != 0.0 {
                s += value * f64::from(weight(j));
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
            let key = if hashed { INTERCEPT_KEY as usize } else { self.n_features };
            s += f64::from(weight(key));
        }
        s
    }

    /// The nonzero coordinates `(key, value)` of `x̃ = (x, 1)` (VW stores no zero features): the
    /// feature index, and for the intercept [`INTERCEPT_KEY`] under hashing, else `n_features`. Gathered once per update so
    /// that the loops over blocks run without branches.
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
        let hashed = matches!(self.store, Store::Hashed { .. });
        if self.params.fit_intercept {
            let key = if hashed { INTERCEPT_KEY as usize } else { self.n_features };
            self.entries.push((key, 1.0));
        }
    }

    /// One pass over the coordinates of `φ(x, task)`: records each one's slot, value `u` and the
    /// slot's `G` and `N` (zeros where no cell exists yet) in the scratchpad, and returns the
    /// score `Σ_r B[r, task] Σ_j x̃_j w_r[j]`. The update then reads the scratchpad instead of the
    /// cells, so an example's weights come from memory once (the write pass finds them in cache).
    fn gather(&mut self, x: &Row, task: usize) -> f64 {
        self.gather_entries(x);
        let mut pad = std::mem::take(&mut self.pad);
        let terms = self.terms(task);
        let n_coords = self.entries.len() * terms.len();
        pad.set_len(n_coords);
        let m = self.entries.len();
        let stride = self.params.rule.stride();
        let entries = &self.entries[..];
        if let [(r0, b0), (r1, b1)] = terms[..] {
            // Two blocks (the complete graph): one loop over the entries reads both, so the two
            // slots of an entry are fetched together and the two sums run side by side.
            let (coords0, coords1) = pad.split(m);
            let ((loc, d0), (_, d1)) = (self.block_view(r0), self.block_view(r1));
            let (blocks, bs, ids) = ((d0, d1), (b0, b1), (r0, r1));
            let (s0, s1) = match stride {
                3 => gather_pair::<3>(entries, ids, bs, loc, blocks, coords0, coords1),
                2 => gather_pair::<2>(entries, ids, bs, loc, blocks, coords0, coords1),
                _ => gather_pair::<1>(entries, ids, bs, loc, blocks, coords0, coords1),
            };
            self.pad = pad;
            return 0.0 + b0 * s0 + b1 * s1;
        }
        let mut score = 0.0;
        for (term, &(r, b)) in terms.iter().enumerate() {
            let (loc, block) = self.block_view(r);
            let span = term * m..(term + 1) * m;
            let coords = Coords {
                slot: &mut pad.slot[span.clone()],
                u: &mut pad.u[span.clone()],
                w: &mut pad.w[span.clone()],
                g: &mut pad.g[span.clone()],
                n: &mut pad.n[span],
            };
            let s = match stride {
                3 => gather_block::<3>(entries, r, b, loc, block, coords),
                2 => gather_block::<2>(entries, r, b, loc, block, coords),
                _ => gather_block::<1>(entries, r, b, loc, block, coords),
            };
            score += b * s;
        }
        self.pad = pad;
        score
    }

    /// Once the log of a journaled call would outgrow a copy of the model's cells, the model as
    /// it was at the start is kept instead: a copy of the model now, with the logged writes undone
    /// (O(model), once, in a call that has already written more than the model holds), and the
    /// call goes on without logging. So a journal costs at most about a copy of the model.
    fn bound_journal(&mut self) -> Result<()> {
        let entry = std::mem::size_of::<(CellAt, store::Cell)>();
        let log = self.journal.cells.len().saturating_mul(entry);
        // The model's size is counted once per call, and only past 1 MiB of log (it walks the
        // dense block slots, one per task).
        if !self.journal.logging() || log <= 1 << 20 {
            return Ok(());
        }
        if self.journal.limit == 0 {
            self.journal.limit = self.store.memory_bytes(self.params.rule.stride()).max(1 << 20);
        }
        if log <= self.journal.limit {
            return Ok(());
        }
        let journal = std::mem::take(&mut self.journal);
        let mut start = self.clone(); // its journal is empty: taken above
        start.journal = journal;
        start.journal_rollback();
        let mut journal = std::mem::take(&mut start.journal);
        journal.cells = Vec::new(); // its room is a copy's worth of memory: given back
        journal.active = true;
        journal.snapshot = Some(Box::new(start));
        self.journal = journal;
        Ok(())
    }

    /// Sets component `c`'s counters, logging the old ones when a batch is journaled.
    fn set_stats(&mut self, c: usize, stats: ComponentStats) -> Result<()> {
        if self.journal.logging() {
            Need::new("rows", self.journal.stats.len() + 1, "MTLinear's undo journal").reserve(&mut self.journal.stats, 1)?;
            let old = self.stats[c];
            self.journal.stats.push((c, [old.n_examples, old.n_updates, old.sum_norm_x]));
        }
        self.stats[c] = stats;
        Ok(())
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
        let c = self.component_of(task);
        let stats = self.stats[c];
        let t = stats.n_examples + 1.0;
        let seen = ComponentStats { n_examples: t, ..stats };
        // Every loss here has ℓ > 0 exactly where ∂ℓ/∂p ≠ 0.
        let g = loss.derivative(y, score);
        // A derivative whose square underflows (|g| < 1.5e-154: a logistic margin beyond ~354)
        // teaches nothing in double precision, and would give a coordinate never updated the rate
        // 1/√0 (a NaN sensitivity): such an example counts as one without loss.
        if g * g < f64::MIN_POSITIVE {
            return self.set_stats(c, seen);
        }
        // What each coordinate's second statistic accumulates per update: g²u² (AdaGrad's G) or,
        // for AROW, u² (its precision grows by u²/r whatever the loss, as in the paper).
        let g2 = if rule == UpdateRule::Arow { 1.0 } else { g * g };
        let (_, u, ws, gs, ns) = self.pad.view();
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
            return self.set_stats(c, seen);
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
        self.write_phase(task, g2, scale)?;
        self.set_stats(
            c,
            ComponentStats {
                n_examples: t,
                n_updates: n_norm,
                sum_norm_x: sum_norm,
            },
        )?;
        self.n_updates += 1;
        Ok(())
    }

    /// Phase two: allocates what the example needs (on `Err` nothing has changed), logs the
    /// cells' values when journaled, then writes the coordinates in gather order, `n_entries`
    /// per block of the task's terms.
    fn write_phase(&mut self, task: usize, g2: f64, scale: f64) -> Result<()> {
        let mut term_buf = std::mem::take(&mut self.term_buf);
        term_buf.clear();
        term_buf.extend_from_slice(&self.terms(task));
        let outcome = self.write_terms(&term_buf, g2, scale);
        self.term_buf = term_buf;
        outcome
    }

    fn write_terms(&mut self, terms: &[(u32, f64)], g2: f64, scale: f64) -> Result<()> {
        let stride = self.params.rule.stride();
        let n_entries = self.entries.len();
        let n_coords = n_entries * terms.len();
        self.bound_journal()?;
        self.journal.reserve_cells(n_coords)?;
        let journal = &mut self.journal;
        let pad = &mut self.pad;
        match &mut self.store {
            Store::Hashed { bits, table } => {
                if table.is_none() {
                    let n = 1usize << *bits;
                    *table = Some(Need::new("hash_bits", *bits as usize, "MTLinear's weight table").zeroed(&[n, stride])?);
                    journal.new_table |= journal.logging();
                }
                let data = table.as_mut().expect("allocated above");
                if journal.logging() && !journal.new_table {
                    for &at in &pad.slot[..n_coords] {
                        journal.cells.push((CellAt::Flat(at), read_cell(data, at, stride)));
                    }
                }
                // Colliding coordinates share a slot: each reads what the previous one wrote.
                let (slot, u) = (&pad.slot[..n_coords], &pad.u[..n_coords]);
                let rates = &self.rates[..n_coords];
                match stride {
                    3 => write_block::<3>(data, slot, u, rates, g2, scale),
                    2 => write_block::<2>(data, slot, u, rates, g2, scale),
                    _ => write_block::<1>(data, slot, u, rates, g2, scale),
                }
            }
            store @ Store::Dense { .. } => {
                // The blocks this example touches, allocated before anything is written.
                let width = self.n_features + usize::from(self.params.fit_intercept);
                let mut fresh = [false; 8];
                for (i, &(r, _)) in terms.iter().enumerate() {
                    if store.dense_block(r).is_none() {
                        let block = Need::new("n_features", width, "an MTLinear weight block").zeroed(&[width, stride])?;
                        if journal.logging() {
                            Need::new("rows", journal.new_blocks.len() + 1, "MTLinear's undo journal")
                                .reserve(&mut journal.new_blocks, 1)?;
                            journal.new_blocks.push(r);
                        }
                        *store.dense_slot(r) = Some(block);
                        if let Some(f) = fresh.get_mut(i) {
                            *f = true;
                        }
                    }
                }
                for (term, &(r, _)) in terms.iter().enumerate() {
                    let data = store.dense_block_mut(r).expect("allocated above");
                    let span = term * n_entries..(term + 1) * n_entries;
                    // A block allocated by this update is dropped on rollback: nothing to log.
                    if journal.logging() && !fresh.get(term).copied().unwrap_or(false) {
                        for &at in &pad.slot[span.clone()] {
                            journal.cells.push((CellAt::Block(r, at), read_cell(data, at, stride)));
                        }
                    }
                    let args = WriteArgs {
                        slot: &pad.slot[span.clone()],
                        u: &pad.u[span.clone()],
                        w: &pad.w[span.clone()],
                        g: &pad.g[span.clone()],
                        n: &pad.n[span.clone()],
                        rates: &self.rates[span],
                        g2,
                        scale,
                    };
                    write_distinct(data, stride, &args);
                }
            }
            Store::Sparse(cells) => {
                // Cells for the pairs that have none, created before anything is written (an
                // allocation failure removes those created so far).
                let before = cells.len();
                for (term, &(r, _)) in terms.iter().enumerate() {
                    for i in 0..n_entries {
                        let at = &mut pad.slot[term * n_entries + i];
                        if *at == ABSENT {
                            match cells.insert(r, self.entries[i].0 as u32) {
                                Ok(new) => *at = new,
                                Err(e) => {
                                    while cells.len() > before {
                                        cells.pop();
                                    }
                                    return Err(e);
                                }
                            }
                        }
                    }
                }
                let data = cells.cells_mut();
                if journal.logging() {
                    let existing = journal.sparse_len * stride;
                    for &at in &pad.slot[..n_coords] {
                        if at < existing {
                            journal.cells.push((CellAt::Flat(at), read_cell(data, at, stride)));
                        }
                    }
                }
                // Distinct pairs, distinct cells: one vectorised write over every block.
                let args = WriteArgs {
                    slot: &pad.slot[..n_coords],
                    u: &pad.u[..n_coords],
                    w: &pad.w[..n_coords],
                    g: &pad.g[..n_coords],
                    n: &pad.n[..n_coords],
                    rates: &self.rates[..n_coords],
                    g2,
                    scale,
                };
                write_distinct(data, stride, &args);
            }
        }
        Ok(())
    }

    /// All blocks as a `n_blocks x width` row-major matrix (own blocks by task, then the complete
    /// graph's shared block; zeros where nothing was written). None under hashing (the blocks
    /// share one table: [`Self::table_weights`]) or when larger than `max_values`.
    pub fn block_weights(&self, max_values: usize) -> Option<Vec<f64>> {
        let (n_blocks, width) = (self.n_blocks(), self.width());
        if n_blocks.checked_mul(width).is_none_or(|n| n > max_values) {
            return None;
        }
        let mut out = vec![0.0; n_blocks * width];
        let id = |row: usize| if row == self.n_tasks && n_blocks > self.n_tasks { SHARED } else { row as u32 };
        let stride = self.params.rule.stride();
        match &self.store {
            Store::Hashed { .. } => return None,
            Store::Dense { .. } => {
                for (row, chunk) in out.chunks_mut(width).enumerate() {
                    if let Some(data) = self.store.dense_block(id(row)) {
                        chunk.iter_mut().zip(data.iter().step_by(stride)).for_each(|(o, &w)| *o = f64::from(w));
                    }
                }
            }
            Store::Sparse(cells) => {
                for (&(r, key), cell) in cells.keys().iter().zip(cells.cells().chunks_exact(stride)) {
                    let row = if r == SHARED { self.n_tasks } else { r as usize };
                    out[row * width + key as usize] = f64::from(cell[0]);
                }
            }
        }
        Some(out)
    }
}

impl MTLinear {
    /// The weights of the hashed table (empty before the first update or without hashing).
    pub fn table_weights(&self) -> Vec<f64> {
        match &self.store {
            Store::Hashed { table: Some(t), .. } => {
                t.iter().step_by(self.params.rule.stride()).map(|&w| f64::from(w)).collect()
            }
            _ => Vec::new(),
        }
    }
}

/// The values of the cell at `at` (padded to three floats).
#[inline(always)]
fn read_cell(data: &[f32], at: usize, stride: usize) -> store::Cell {
    let mut cell = [0.0f32; 3];
    cell[..stride].copy_from_slice(&data[at..at + stride]);
    cell
}

impl MTLinear {
    /// Same hyper-parameters (task kernel, features, loss, rule, rate, intercept, hashing).
    pub fn same_settings(&self, other: &Self) -> bool {
        self.n_features == other.n_features && self.params == other.params && self.tasks.approx_eq(&other.tasks)
    }
}

impl CheckState for MTLinear {
    /// Everything `score` and `update` index or divide by: the factor's blocks exist, the cells
    /// fit the layout the parameters choose, the component counters exist; values finite.
    fn check_state(&self) -> Result<()> {
        self.tasks.check_state()?;
        ensure(self.n_tasks == self.tasks.n_tasks(), || {
            "n_tasks differs from the task kernel".into()
        })?;
        param(self.params.check())?;
        ensure((1..u32::MAX as usize).contains(&self.n_features), || {
            "n_features must be in [1, 2^32 - 1)".into()
        })?;
        check_counts("MTLinear", &[self.n_updates])?;
        let dense_t = matches!(self.tasks, TaskKernel::Dense { .. });
        let n_terms = if dense_t { self.n_tasks } else { 0 };
        check_len("MTLinear factor", self.terms.len(), n_terms)?;
        check_len("MTLinear components", self.component.len(), n_terms)?;
        check_len("MTLinear component counters", self.stats.len(), self.tasks.n_components())?;
        for terms in &self.terms {
            for &(r, b) in terms {
                ensure((r as usize) < self.n_tasks && b.abs() <= MAX_MAGNITUDE, || {
                    format!("factor entry ({r}, {b}) outside the {} blocks or too large", self.n_tasks)
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
        let width = self.n_features + usize::from(self.params.fit_intercept);
        let mut values: Vec<&[f32]> = Vec::new();
        match (&self.store, self.params.hash_bits) {
            (Store::Hashed { bits, table }, Some(b)) if *bits == b => {
                if let Some(t) = table {
                    check_len("MTLinear's weight table", t.len(), checked_size("the table", 1 << b, stride)?)?;
                    values.push(t);
                }
            }
            (Store::Dense { width: w, own, shared }, None) if *w == width && dense_fits(width, stride, self.n_blocks()) => {
                check_len("MTLinear's dense blocks", own.len(), self.n_tasks)?;
                ensure(shared.is_none() || self.n_blocks() > self.n_tasks, || {
                    "a shared MTLinear block without the complete graph".into()
                })?;
                let len = checked_size("an MTLinear block", width, stride)?;
                for block in own.iter().chain(std::iter::once(shared)).flatten() {
                    check_len("an MTLinear block", block.len(), len)?;
                    values.push(block);
                }
            }
            (Store::Sparse(cells), None) if width > DENSE_MAX_WIDTH => {
                let n_blocks = self.n_blocks();
                ensure(
                    cells.keys().iter().all(|&(r, key)| {
                        let block_ok = if r == SHARED { n_blocks > self.n_tasks } else { (r as usize) < self.n_tasks };
                        block_ok && (key as usize) < width
                    }),
                    || "a sparse MTLinear cell outside the blocks or the features".into(),
                )?;
                ensure(cells.cells().len() == cells.len() * stride, || "sparse MTLinear cells of the wrong size".into())?;
                values.push(cells.cells());
            }
            _ => return Err(Error::State("MTLinear's storage does not follow from its parameters".into())),
        }
        for data in values {
            ensure(data.iter().all(|v| v.is_finite()), || {
                "an MTLinear cell holds a value that is not finite".into()
            })?;
            // Σ g²u² and max |u| are never negative (a negative G makes a rate NaN).
            ensure(
                data.chunks_exact(stride).all(|cell| cell[1..].iter().all(|&v| v >= 0.0)),
                || "negative per-coordinate statistics in an MTLinear cell".into(),
            )?;
        }
        Ok(())
    }
}

impl PartialEq for MTLinear {
    /// The model state (scratch buffers and the journal are not part of it).
    fn eq(&self, other: &Self) -> bool {
        self.n_tasks == other.n_tasks
            && self.n_features == other.n_features
            && self.params == other.params
            && self.tasks == other.tasks
            && self.terms == other.terms
            && self.component == other.component
            && self.stats == other.stats
            && self.store == other.store
            && self.n_updates == other.n_updates
    }
}

impl OnlineLearner for MTLinear {
    shape_fields!(grows);

    fn score(&self, x: Row, task: usize, _scratch: &mut Scratch) -> f64 {
        self.terms(task).iter().map(|&(r, b)| b * self.block_score(&x, r)).sum()
    }

    fn update(&mut self, x: Row, task: usize, y: f64, score: f64, _scratch: &mut Scratch) -> Result<()> {
        self.gather(&x, task);
        self.apply_update(task, y, score)
    }

    /// Starts loading the cells of the next example's coordinates (each a cache miss on a large
    /// table) while this one is learnt.
    fn prefetch(&self, x: Row, task: usize) {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            let stride = self.params.rule.stride();
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
            for &(r, _) in self.terms(task).iter() {
                let (loc, Some(data)) = self.block_view(r) else {
                    continue;
                };
                for &j in indices {
                    match loc {
                        Loc::Direct => cell_hint(data, j as usize * stride),
                        Loc::Hashed(n) => cell_hint(data, slot_of(u64::from(j), r, n) * stride),
                        Loc::Sparse(_) => return, // the probe is the cost; nothing to hint cheaply
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
        let (layout, n_cells) = match &self.store {
            Store::Dense { own, shared, .. } => {
                let blocks = own.iter().chain(std::iter::once(shared)).flatten().count();
                (0.0, blocks * self.width())
            }
            Store::Sparse(cells) => (1.0, cells.len()),
            Store::Hashed { table, .. } => (2.0, table.as_ref().map_or(0, |_| self.width())),
        };
        vec![
            ("memory_bytes", self.memory_bytes() as f64),
            ("n_blocks", self.n_blocks() as f64),
            ("n_cells", n_cells as f64),
            ("block_width", self.width() as f64),
            ("storage", layout),
        ]
    }

    fn arrays(&self) -> Vec<(&'static str, Vec<usize>, Vec<f64>)> {
        let mut out = Vec::new();
        // A dense picture of the blocks only where it is small (2^24 values, 128 MB).
        if let Some(w) = self.block_weights(1 << 24) {
            out.push(("block_weights", vec![self.n_blocks(), self.width()], w));
        }
        if let Store::Hashed { table: Some(_), .. } = self.store {
            out.push(("table_weights", vec![self.width()], self.table_weights()));
        }
        out
    }

    fn journal_begin(&mut self) -> bool {
        let j = &mut self.journal;
        j.clear();
        j.active = true;
        j.n_updates = self.n_updates;
        j.n_tasks = self.n_tasks;
        j.n_stats = self.stats.len();
        j.sparse_len = match &self.store {
            Store::Sparse(cells) => cells.len(),
            _ => 0,
        };
        j.n_own = match &self.store {
            Store::Dense { own, .. } => own.len(),
            _ => 0,
        };
        true
    }

    fn journal_commit(&mut self) {
        self.journal.clear();
    }

    /// Undoes everything since [`OnlineLearner::journal_begin`]: the cells in reverse order of
    /// their writes, then what was allocated or added, then the counters. Its cost is the
    /// journal's length.
    fn journal_rollback(&mut self) {
        let mut j = std::mem::take(&mut self.journal);
        if !j.active {
            self.journal = j;
            return;
        }
        if let Some(start) = j.snapshot.take() {
            *self = *start;
            j.clear();
            self.journal = j;
            return;
        }
        let stride = self.params.rule.stride();
        let mut cells = &j.cells[..];
        if let Some(old) = j.old_store.take() {
            // Tasks added by the call made the layout sparse: the dense store comes back, and only
            // the writes logged before the conversion concern it.
            self.store = old;
            cells = &j.cells[..j.cells_at_convert];
        }
        for &(at, cell) in cells.iter().rev() {
            let data: &mut [f32] = match (&mut self.store, at) {
                (Store::Hashed { table: Some(t), .. }, CellAt::Flat(_)) => t,
                (Store::Sparse(cells), CellAt::Flat(_)) => cells.cells_mut(),
                (store @ Store::Dense { .. }, CellAt::Block(r, _)) => match store.dense_block_mut(r) {
                    Some(b) => b,
                    None => continue,
                },
                _ => continue,
            };
            let (CellAt::Flat(offset) | CellAt::Block(_, offset)) = at;
            data[offset..offset + stride].copy_from_slice(&cell[..stride]);
        }
        match &mut self.store {
            Store::Hashed { table, .. } if j.new_table => *table = None,
            Store::Sparse(cells) => {
                while cells.len() > j.sparse_len {
                    cells.pop();
                }
            }
            store @ Store::Dense { .. } => {
                for &r in &j.new_blocks {
                    *store.dense_slot(r) = None;
                }
                if let Store::Dense { own, .. } = store {
                    own.truncate(j.n_own);
                }
            }
            _ => {}
        }
        for &(c, [n_examples, n_updates, sum_norm_x]) in j.stats.iter().rev() {
            if let Some(st) = self.stats.get_mut(c) {
                *st = ComponentStats {
                    n_examples,
                    n_updates,
                    sum_norm_x,
                };
            }
        }
        self.stats.truncate(j.n_stats);
        if let Some(tasks) = j.tasks.take() {
            self.tasks = tasks;
        }
        self.n_tasks = j.n_tasks;
        self.n_updates = j.n_updates;
        j.clear();
        self.journal = j;
    }

    fn scores_new_tasks(&self) -> bool {
        // A new task scores with empty own blocks: the shared block alone on the open complete
        // graph (k >= 2), nothing when disconnected. A one-task complete graph changes its factor
        // when it grows.
        match self.tasks {
            TaskKernel::Disconnected { .. } => true,
            TaskKernel::Complete { k, .. } => k >= 2,
            TaskKernel::Dense { .. } => false,
        }
    }
}

impl MTLinear {
    /// Adds `n` tasks (open-ended task sets) in place, in O(n) amortised: the disconnected graph
    /// gets `n` new components (counters); the complete graph's new tasks join its component,
    /// with own blocks not yet written, while the shared block keeps its id (and hash seed), so
    /// nothing learned changes (M.1). Refused, leaving the model unchanged: a complete graph with
    /// k = 1 whose single block holds weights (M.1 uses one block for k = 1, which does not split
    /// into shared and own). Journaled when a batch is.
    fn grow_tasks(&mut self, n: usize) -> Result<()> {
        let mut tasks = self.tasks.clone();
        tasks.grow(n)?;
        let (k, new_k) = (self.n_tasks, tasks.n_tasks());
        let complete = matches!(tasks, TaskKernel::Complete { .. });
        if complete && k == 1 && self.n_updates > 0 && self.has_cells() {
            return Err(invalid(
                "n_tasks",
                "MTLinear cannot add tasks to this fitted model: a one-task complete graph keeps one block, \
                 which does not split into shared and own blocks",
            ));
        }
        let need = Need::new("n_tasks", new_k, "MTLinear's per-task state");
        if !complete {
            need.reserve(&mut self.stats, n)?;
        }
        let stride = self.params.rule.stride();
        let width = self.n_features + usize::from(self.params.fit_intercept);
        let new_blocks = if complete && new_k >= 2 { new_k + 1 } else { new_k };
        let sparse = match &self.store {
            // Too many tasks for dense blocks of this width: the cells move to the sparse map
            // (once; the dense store is kept until the journal ends).
            Store::Dense { .. } if !dense_fits(width, stride, new_blocks) => Some(self.store.to_sparse(stride)?),
            _ => None,
        };
        if let (None, Store::Dense { own, .. }) = (&sparse, &mut self.store) {
            need.reserve(own, n)?;
        }
        // Nothing below fails.
        if self.journal.logging() && self.journal.tasks.is_none() {
            self.journal.tasks = Some(self.tasks.clone());
        }
        if !complete {
            self.stats.resize(self.stats.len() + n, ComponentStats::default());
        }
        if let Some(cells) = sparse {
            let dense = std::mem::replace(&mut self.store, Store::Sparse(cells));
            if self.journal.logging() {
                self.journal.old_store = Some(dense);
                self.journal.cells_at_convert = self.journal.cells.len();
                self.journal.sparse_len = 0; // every sparse cell is new: dropped with the store
            }
        }
        if let Store::Dense { own, .. } = &mut self.store {
            own.resize_with(own.len() + n, || None);
        }
        self.n_tasks = new_k;
        self.tasks = tasks;
        Ok(())
    }

    /// Whether any cell was written.
    fn has_cells(&self) -> bool {
        match &self.store {
            Store::Hashed { table, .. } => table.is_some(),
            Store::Dense { own, shared, .. } => own.iter().chain(std::iter::once(shared)).any(Option::is_some),
            Store::Sparse(cells) => cells.len() > 0,
        }
    }
}

#[cfg(test)]
mod tests;
