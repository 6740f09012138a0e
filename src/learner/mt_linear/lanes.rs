//! MTLinear's per-example scratchpad and lane kernels: gathering a block's coordinates, the
//! normalized rates in four lanes (the same bits in every SIMD build) and the phase-two writes.

use super::*;

/// Per coordinate of the example in progress, in gather order (block by block of the task's
/// terms, then the example's entries): the offset of its slot in the block's data, its value u,
/// and the slot's w, G and N before the update.
#[derive(Debug, Clone, Default)]
pub(super) struct Scratchpad {
    /// Coordinates of the example in progress (the buffers may be longer: they only grow).
    pub(super) len: usize,
    pub(super) slot: Vec<usize>,
    pub(super) u: Vec<f64>,
    pub(super) w: Vec<f64>,
    pub(super) g: Vec<f64>,
    pub(super) n: Vec<f64>,
}

impl Scratchpad {
    /// Room for `len` coordinates. The buffers never shrink, so that a row longer than the one
    /// before does not refill them (every value is written by the gather anyway).
    pub(super) fn set_len(&mut self, len: usize) {
        if self.u.len() < len {
            for v in [&mut self.u, &mut self.w, &mut self.g, &mut self.n] {
                v.resize(len, 0.0);
            }
            self.slot.resize(len, 0);
        }
        self.len = len;
    }

    /// The first two blocks' coordinates (`m` each) as [`Coords`].
    pub(super) fn split(&mut self, m: usize) -> (Coords<'_>, Coords<'_>) {
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
    pub(super) fn view(&self) -> (&[usize], &[f64], &[f64], &[f64], &[f64]) {
        let len = self.len;
        (
            &self.slot[..len],
            &self.u[..len],
            &self.w[..len],
            &self.g[..len],
            &self.n[..len],
        )
    }
}

fma_builds! {
    /// The normalized rule's rates (M.2 step 1) of every coordinate of one example:
    /// `rates[c] = 1/(√G'_c N'_c)` with `G' = G + g²u²`, `N' = max(N, |u|)`. Returns
    /// `(Σ u² r, Σ u²/N'²)`, the latter as `Σ u² r² G'` (one division per coordinate).
    pub(super) fn normalized_rates(g2: f64, u: &[f64], g: &[f64], n: &[f64], rates: &mut [f64]) -> (f64, f64) {
        // SAFETY (both): compiled for AVX2 (and FMA, unused) after detection; arrays need nothing.
        avx2: unsafe { normalized_rates_lanes::<std::arch::x86_64::__m256d>(g2, u, g, n, rates) },
        portable: unsafe { normalized_rates_lanes::<[f64; 4]>(g2, u, g, n, rates) },
    }
}

/// One coordinate of [`normalized_rates`]: `(r, u² r, u² r² G')`, in the order of operations
/// of the lane code (so that a tail element gets the bits a lane would give it).
#[inline(always)]
pub(super) fn normalized_rate(g2: f64, u: f64, g: f64, n: f64) -> (f64, f64, f64) {
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
pub(super) unsafe fn lane_sum<L: LaneMath>(acc: L, tail: &[f64]) -> f64 {
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
pub(super) unsafe fn normalized_rates_lanes<L: LaneMath>(
    g2: f64,
    u: &[f64],
    g: &[f64],
    n: &[f64],
    rates: &mut [f64],
) -> (f64, f64) {
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
pub(super) struct WriteBounds {
    pub(super) max_w: f64,
    pub(super) max_g: f64,
    pub(super) max_u: f64,
    pub(super) sum_ur: f64,
    pub(super) sum_u2: f64,
    pub(super) rates_finite: bool,
}

fma_builds! {
    /// [`WriteBounds`] of the coordinates in the scratchpad (one vectorised pass).
    pub(super) fn write_bounds(u: &[f64], rates: &[f64], w: &[f64], g: &[f64]) -> WriteBounds {
        // SAFETY (both): as for `normalized_rates`.
        avx2: unsafe { write_bounds_lanes::<std::arch::x86_64::__m256d>(u, rates, w, g) },
        portable: unsafe { write_bounds_lanes::<[f64; 4]>(u, rates, w, g) },
    }
}

/// # Safety
/// As for [`LaneMath`] (`L` has 4 lanes).
#[inline(always)]
pub(super) unsafe fn write_bounds_lanes<L: LaneMath>(u: &[f64], rates: &[f64], w: &[f64], g: &[f64]) -> WriteBounds {
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
    for (acc, out) in [max_w, max_g, max_u, sum_ur, sum_u2, nonfinite]
        .into_iter()
        .zip(&mut lanes)
    {
        acc.store(out);
    }
    let [mw, mg, mu, sur, su2, nf] = &mut lanes;
    for i in whole..len {
        let l = i - whole;
        (mw[l], mg[l], mu[l]) = (mw[l].max(w[i].abs()), mg[l].max(g[i]), mu[l].max(u[i].abs()));
        (sur[l], su2[l], nf[l]) = (
            sur[l] + (u[i] * rates[i]).abs(),
            su2[l] + u[i] * u[i],
            nf[l] + rates[i] * 0.0,
        );
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
pub(super) fn arow_variances(eta: f64, u: &[f64], d: &[f64], rates: &mut [f64]) -> (f64, f64) {
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
pub(super) fn scale_shared_rates(shared_rate: f64, u: &[f64], rates: &mut [f64]) -> f64 {
    let mut h = 0.0;
    for (rate, &u) in rates.iter_mut().zip(u) {
        h += u * u * *rate;
        *rate *= shared_rate;
    }
    (shared_rate - 1.0) * h
}

/// The scratchpad's slices for the coordinates of one block (see [`Scratchpad`]).
pub(super) struct Coords<'a> {
    pub(super) slot: &'a mut [usize],
    pub(super) u: &'a mut [f64],
    pub(super) w: &'a mut [f64],
    pub(super) g: &'a mut [f64],
    pub(super) n: &'a mut [f64],
}

/// Where a block's cells are: the offset of `(block, key)` in the block's data.
#[derive(Clone, Copy)]
pub(super) enum Loc<'a> {
    /// A dense block: the key is the index.
    Direct,
    /// The hashed table of this many cells.
    Hashed(usize),
    /// The sparse map (its slab is the data): [`ABSENT`] for a pair without a cell.
    Sparse(&'a SparseCells),
}

impl Loc<'_> {
    #[inline(always)]
    pub(super) fn at<const S: usize>(self, r: u32, key: usize) -> usize {
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
pub(super) fn gather_block<const S: usize>(
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
pub(super) fn cell_at<const S: usize>(block: Option<&[f32]>, at: usize) -> [f32; S] {
    match block {
        Some(data) if at != ABSENT => data[at..at + S].try_into().expect("a slot holds S floats"),
        _ => [0.0; S],
    }
}

/// One coordinate of [`gather_block`]: records the slot, `u = b v` and the slot's state, and
/// returns the slot's weight.
#[inline(always)]
pub(super) fn gather_coord<const S: usize>(at: usize, uv: f64, block: Option<&[f32]>, c: &mut Coords, i: usize) -> f64 {
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
pub(super) fn gather_pair<const S: usize>(
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
pub(super) fn write_block<const S: usize>(
    data: &mut [f32],
    slot: &[usize],
    u: &[f64],
    rates: &[f64],
    g2: f64,
    scale: f64,
) {
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
pub(super) struct WriteArgs<'a> {
    pub(super) slot: &'a [usize],
    pub(super) u: &'a [f64],
    pub(super) w: &'a [f64],
    pub(super) g: &'a [f64],
    pub(super) n: &'a [f64],
    pub(super) rates: &'a [f64],
    pub(super) g2: f64,
    pub(super) scale: f64,
}

fma_builds! {
    /// Phase two for one block whose coordinates have distinct slots (no hashing: a row's
    /// features are distinct, validated CSR indices), with `S` floats per slot: the new values
    /// are computed from the gathered state four coordinates at a time, as [`write_block`]
    /// computes them (the same operations in the same order, so the same bits), then stored.
    pub(super) fn write_distinct(data: &mut [f32], stride: usize, args: &WriteArgs) {
        // SAFETY (both): as for `normalized_rates`.
        avx2: unsafe { write_distinct_stride::<std::arch::x86_64::__m256d>(data, stride, args) },
        portable: unsafe { write_distinct_stride::<[f64; 4]>(data, stride, args) },
    }
}

/// # Safety
/// As for [`LaneMath`] (`L` has 4 lanes).
#[inline(always)]
pub(super) unsafe fn write_distinct_stride<L: LaneMath>(data: &mut [f32], stride: usize, args: &WriteArgs) {
    match stride {
        3 => write_distinct_lanes::<L, 3>(data, args),
        2 => write_distinct_lanes::<L, 2>(data, args),
        _ => write_distinct_lanes::<L, 1>(data, args),
    }
}

/// # Safety
/// As for [`LaneMath`] (`L` has 4 lanes).
#[inline(always)]
pub(super) unsafe fn write_distinct_lanes<L: LaneMath, const S: usize>(data: &mut [f32], a: &WriteArgs) {
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
