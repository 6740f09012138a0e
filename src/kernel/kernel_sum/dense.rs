//! The dense path of the kernel sums: slots in chunks, dot products of four stored rows at a
//! time against up to four queries ([`crate::kernel::dense_dots`]), then the kernel's map over the
//! chunk (a vectorisable exponential for rbf in the fused builds).

use super::{CHUNK, MAX_WINDOW};
use crate::data::Row;
use crate::kernel::dense_dots::{dots_block, Wide};
use crate::kernel::{ActiveSet, BaseKernel, KernelKind, Query, RowStore, TaskKernel};
use crate::linalg::simd::dot4_lanes;
use crate::simd::{dot4, fma_builds};

fma_builds! {
    /// The complete graph's scores of up to [`MAX_WINDOW`] dense queries in one pass. Queries
    /// per dot block: 4 with AVX-512's 32 registers, 2 with AVX2's 16 (4 spills: 17% slower),
    /// 1 portable (2 spills SSE2's 16: 4% slower).
    pub(super) fn complete_scores(data: &[f64], sqs: &[f64], kernel: &BaseKernel, xs: &[&[f64]], qs: &[Query], coefs: &[CompleteGraph], out: &mut [f64]) {
        avx512: all_slots_sums::<true, std::arch::x86_64::__m512d, 4, _>(data, sqs, kernel, xs, qs, coefs, out),
        avx2: all_slots_sums::<true, std::arch::x86_64::__m256d, 2, _>(data, sqs, kernel, xs, qs, coefs, out),
        portable: all_slots_sums::<false, [f64; 4], 1, _>(data, sqs, kernel, xs, qs, coefs, out),
    }
}

fma_builds! {
    /// The dense score; the AVX-512 build runs the same loops as the AVX2 one (256-bit dot
    /// products), with the kernel map, the exponentials and the weighted sum free to use 512-bit
    /// registers.
    pub(super) fn dense_score(set: &ActiveSet, kernel: &BaseKernel, tasks: &TaskKernel, x: &[f64], q: &Query, task: usize) -> f64 {
        avx512: dense_score_generic::<true>(set, kernel, tasks, x, q, task),
        avx2: dense_score_generic::<true>(set, kernel, tasks, x, q, task),
        portable: dense_score_generic::<false>(set, kernel, tasks, x, q, task),
    }
}

/// `a * b + c`, fused when compiled for FMA.
#[inline(always)]
pub(super) fn madd<const FMA: bool>(a: f64, b: f64, c: f64) -> f64 {
    if FMA {
        a.mul_add(b, c)
    } else {
        a * b + c
    }
}

/// `FAST = true` selects the AVX2 intrinsics and the polynomial exp: it is only instantiated
/// inside `dense_score_avx2`, after the CPU check.
#[inline(always)]
pub(super) fn dense_score_generic<const FAST: bool>(
    set: &ActiveSet,
    kernel: &BaseKernel,
    tasks: &TaskKernel,
    x: &[f64],
    q: &Query,
    task: usize,
) -> f64 {
    let rows = set.rows();
    let mut chunk = Chunk {
        slots: [0; CHUNK],
        coef: [0.0; CHUNK],
        sq: [0.0; CHUNK],
        vals: [0.0; CHUNK],
    };
    let mut total = 0.0;
    let mut m = 0;
    // (No closure here: closures are not compiled with the caller's target features.)
    macro_rules! keep {
        ($slot:expr, $coef:expr) => {
            chunk.slots[m] = $slot;
            chunk.coef[m] = $coef;
            chunk.sq[m] = rows.sq_norm($slot);
            m += 1;
            if m == CHUNK {
                total += dense_chunk::<FAST>(rows, kernel, x, q, &mut chunk, CHUNK);
                m = 0;
            }
        };
    }
    let component = tasks.component(task);
    for slot in 0..set.len() {
        let owner = set.task(slot);
        if tasks.component(owner) == component {
            keep!(slot, set.beta(slot) * tasks.get(owner, task));
        }
    }
    total + dense_chunk::<FAST>(rows, kernel, x, q, &mut chunk, m)
}

/// The coefficient `c_j` of every stored slot in a sum over all slots (a trait, not a closure,
/// so that it inlines into the caller's target-feature build).
pub(super) trait SlotCoefs {
    /// `out[j] = c_{s0 + j}` (a loop over plain slices, so that it vectorises).
    fn fill(&self, s0: usize, out: &mut [f64]);
}

/// `beta_j T[i_j, task]` for the complete graph (T = diag on the task, off elsewhere).
#[derive(Clone, Copy)]
pub(super) struct CompleteGraph<'a> {
    pub(super) betas: &'a [f64],
    pub(super) owners: &'a [u32],
    pub(super) task: u32,
    pub(super) diag: f64,
    pub(super) off: f64,
}

impl SlotCoefs for CompleteGraph<'_> {
    #[inline(always)]
    fn fill(&self, s0: usize, out: &mut [f64]) {
        let m = out.len();
        let (betas, owners) = (&self.betas[s0..s0 + m], &self.owners[s0..s0 + m]);
        // Locals and a select, not a field chosen by address (which compiles to a gather).
        let (task, diag, off) = (self.task, self.diag, self.off);
        for ((c, &b), &owner) in out.iter_mut().zip(betas).zip(owners) {
            let same = owner == task;
            *c = b * if same { diag } else { off };
        }
    }
}

/// Given coefficients by slot.
pub(super) struct Plain<'a>(&'a [f64]);

impl SlotCoefs for Plain<'_> {
    #[inline(always)]
    fn fill(&self, s0: usize, out: &mut [f64]) {
        let m = out.len();
        out.copy_from_slice(&self.0[s0..s0 + m]);
    }
}

/// `out[q] = sum_j coefs[q]_j K'(x_j, qs[q])` over every slot of a row-major dense store (`sqs`
/// holds a squared norm per slot) for up to [`MAX_WINDOW`] queries `xs` in one pass: per chunk of
/// stored rows the dot products of all queries (`QG` queries per block), then each query's kernel
/// map and weighted sum. Each query's numbers do not depend on the others (nor on `QG`).
#[inline(always)]
pub(super) fn all_slots_sums<const FAST: bool, W: Wide, const QG: usize, C: SlotCoefs>(
    data: &[f64],
    sqs: &[f64],
    kernel: &BaseKernel,
    xs: &[&[f64]],
    qs: &[Query],
    coefs: &[C],
    out: &mut [f64],
) {
    let nq = xs.len();
    assert!(nq <= MAX_WINDOW && qs.len() == nq && coefs.len() == nq && out.len() == nq);
    let d = xs.first().map_or(0, |x| x.len());
    let n = sqs.len();
    assert!(data.len() >= n * d && xs.iter().all(|x| x.len() == d));
    let mut vals = [[0.0f64; CHUNK]; MAX_WINDOW];
    let mut c = [0.0f64; CHUNK];
    let mut acc = [[0.0f64; 4]; MAX_WINDOW];
    let mut s0 = 0;
    while s0 < n {
        let m = CHUNK.min(n - s0);
        // SAFETY: the build's features were checked by the caller (`fma_builds!`); every row
        // and query is `d` long.
        unsafe { chunk_dots::<W, QG>(&data[s0 * d..(s0 + m) * d], d, m, xs, &mut vals) };
        for q in 0..nq {
            kernel_map::<FAST>(kernel, &qs[q], &mut vals[q], &sqs[s0..s0 + m]);
            coefs[q].fill(s0, &mut c[..m]);
            weighted_add(&c[..m], &vals[q][..m], &mut acc[q]);
        }
        s0 += m;
    }
    for (o, a) in out.iter_mut().zip(&acc) {
        *o = (a[0] + a[1]) + (a[2] + a[3]);
    }
}

/// `acc[j % 4] += c_j v_j` (four partial sums: no single dependency chain through the chunk).
#[inline(always)]
pub(super) fn weighted_add(c: &[f64], v: &[f64], acc: &mut [f64; 4]) {
    let m = c.len().min(v.len());
    let (c4, v4) = (c[..m].chunks_exact(4), v[..m].chunks_exact(4));
    let (ct, vt) = (c4.remainder(), v4.remainder());
    for (cc, vv) in c4.zip(v4) {
        for l in 0..4 {
            acc[l] += cc[l] * vv[l];
        }
    }
    for l in 0..ct.len() {
        acc[l] += ct[l] * vt[l];
    }
}

/// `vals[q][j] = <row j of block, xs[q]>` for the `m` rows of `block`: four rows at a time, each
/// against up to `QG` queries per [`dots_block`] (a short last block of rows repeats its last
/// row, computed and not stored).
///
/// # Safety
/// As for [`Wide`]: only inside a build compiled for `W`'s instructions.
#[inline(always)]
pub(super) unsafe fn chunk_dots<W: Wide, const QG: usize>(
    block: &[f64],
    d: usize,
    m: usize,
    xs: &[&[f64]],
    vals: &mut [[f64; CHUNK]; MAX_WINDOW],
) {
    let nq = xs.len();
    assert!(block.len() >= m * d && xs.iter().all(|x| x.len() >= d));
    let base = block.as_ptr();
    let mut xp = [std::ptr::null::<f64>(); MAX_WINDOW];
    for (p, x) in xp.iter_mut().zip(xs) {
        *p = x.as_ptr();
    }
    let mut p = 0;
    while p < m {
        let last = m - 1;
        let rows = [
            base.add(p * d),
            base.add((p + 1).min(last) * d),
            base.add((p + 2).min(last) * d),
            base.add((p + 3).min(last) * d),
        ];
        let mut q0 = 0;
        while q0 < nq {
            let g = (nq - q0).min(QG);
            macro_rules! group {
                ($n:literal) => {{
                    let mut qx = [std::ptr::null::<f64>(); $n];
                    qx.copy_from_slice(&xp[q0..q0 + $n]);
                    let res = dots_block::<W, $n>(rows, qx, d);
                    // All four lanes (a fixed-size store; past `m` they are finite and never read).
                    for (k, r) in res.iter().enumerate() {
                        vals[q0 + k][p..p + 4].copy_from_slice(r);
                    }
                }};
            }
            match g {
                1 => group!(1),
                2 => group!(2),
                3 => group!(3),
                _ => group!(4),
            }
            q0 += g.min(4);
        }
        p += 4;
    }
}

/// `sum_j coefs[j] K'(x_j, q)` over every slot of `rows` (one coefficient per slot) by the
/// vectorised path when the store and the query are dense; `None` otherwise (the caller then
/// uses the row-store loop).
pub(crate) fn dense_coef_sum(rows: &RowStore, kernel: &BaseKernel, q: &Query, coefs: &[f64]) -> Option<f64> {
    let (Some(data), Row::Dense(x)) = (rows.dense_data(), q.row) else {
        return None;
    };
    debug_assert!(coefs.len() >= rows.len());
    if rows.is_empty() {
        return Some(0.0);
    }
    Some(coef_sum(data, rows.sq_norms(), kernel, x, q, coefs))
}

/// One query's `sum_j coefs_j K'(x_j, q)` by the pass of [`all_slots_sums`].
#[inline(always)]
pub(super) fn plain_sum<const FAST: bool, W: Wide>(
    data: &[f64],
    sqs: &[f64],
    kernel: &BaseKernel,
    x: &[f64],
    q: &Query,
    coefs: &[f64],
) -> f64 {
    let mut out = [0.0];
    all_slots_sums::<FAST, W, 1, _>(
        data,
        sqs,
        kernel,
        &[x],
        std::slice::from_ref(q),
        &[Plain(coefs)],
        &mut out,
    );
    out[0]
}

fma_builds! {
    fn coef_sum(data: &[f64], sqs: &[f64], kernel: &BaseKernel, x: &[f64], q: &Query, coefs: &[f64]) -> f64 {
        avx512: plain_sum::<true, std::arch::x86_64::__m512d>(data, sqs, kernel, x, q, coefs),
        avx2: plain_sum::<true, std::arch::x86_64::__m256d>(data, sqs, kernel, x, q, coefs),
        portable: plain_sum::<false, [f64; 4]>(data, sqs, kernel, x, q, coefs),
    }
}

/// `out[j] = K'(x_j, q)` for every slot of a dense store and a dense query, by the vectorised
/// path (the kernel rows of the Projectrons' updates); false, with `out` untouched, otherwise.
pub(crate) fn dense_kernel_row(rows: &RowStore, kernel: &BaseKernel, q: &Query, out: &mut [f64]) -> bool {
    let (Some(data), Row::Dense(x)) = (rows.dense_data(), q.row) else {
        return false;
    };
    let out = &mut out[..rows.len()];
    kernel_row(data, rows.sq_norms(), kernel, x, q, out);
    true
}

fma_builds! {
    fn kernel_row(data: &[f64], sqs: &[f64], kernel: &BaseKernel, x: &[f64], q: &Query, out: &mut [f64]) {
        avx512: all_slots_kernel::<true, std::arch::x86_64::__m512d>(data, sqs, kernel, x, q, out),
        avx2: all_slots_kernel::<true, std::arch::x86_64::__m256d>(data, sqs, kernel, x, q, out),
        portable: all_slots_kernel::<false, [f64; 4]>(data, sqs, kernel, x, q, out),
    }
}

/// `out[j] = K'(x_j, q)` over every slot of a row-major dense store (the dot products as in
/// [`all_slots_sums`]).
#[inline(always)]
pub(super) fn all_slots_kernel<const FAST: bool, W: Wide>(
    data: &[f64],
    sqs: &[f64],
    kernel: &BaseKernel,
    x: &[f64],
    q: &Query,
    out: &mut [f64],
) {
    let d = x.len();
    let n = sqs.len();
    assert!(data.len() >= n * d && out.len() >= n);
    let mut vals = [[0.0f64; CHUNK]; MAX_WINDOW];
    let mut s0 = 0;
    while s0 < n {
        let m = CHUNK.min(n - s0);
        // SAFETY: the build's features were checked by the caller (`fma_builds!`).
        unsafe { chunk_dots::<W, 1>(&data[s0 * d..(s0 + m) * d], d, m, &[x], &mut vals) };
        kernel_map::<FAST>(kernel, q, &mut vals[0], &sqs[s0..s0 + m]);
        out[s0..s0 + m].copy_from_slice(&vals[0][..m]);
        s0 += m;
    }
}

/// Dot products -> kernel values for the first `sq.len()` entries of `vals`.
#[inline(always)]
pub(super) fn kernel_map<const FAST: bool>(kernel: &BaseKernel, q: &Query, vals: &mut [f64; CHUNK], sq: &[f64]) {
    let m = sq.len();
    match kernel.kind {
        KernelKind::Rbf { gamma } => {
            for (v, &s) in vals[..m].iter_mut().zip(sq) {
                *v = -gamma * (s + q.sq_norm - 2.0 * *v).max(0.0);
            }
            if FAST {
                // Whole 4-lane groups: the lanes past m hold finite leftovers, never read.
                let m4 = m.next_multiple_of(4).min(CHUNK);
                exp_in_place::<FAST>(&mut vals[..m4]);
            } else {
                for v in &mut vals[..m] {
                    *v = v.exp();
                }
            }
        }
        _ => {
            for (v, &s) in vals[..m].iter_mut().zip(sq) {
                *v = kernel.from_dot(*v, s, q.sq_norm, kernel.raw_self(s), q.self_raw);
            }
        }
    }
}

/// A stored dense row (empty for a sparse store, which never reaches the dense path).
#[inline(always)]
pub(super) fn dense_row(rows: &RowStore, slot: usize) -> &[f64] {
    match rows.row(slot) {
        Row::Dense(r) => r,
        Row::Sparse { .. } => &[],
    }
}

/// Up to CHUNK kept slots with their coefficient `beta_j T[i_j, task]` and squared norm.
pub(super) struct Chunk {
    slots: [usize; CHUNK],
    coef: [f64; CHUNK],
    sq: [f64; CHUNK],
    vals: [f64; CHUNK],
}

/// `sum_j coef_j K'(x_j, q)` over the first `m` slots of the chunk.
#[inline(always)]
pub(super) fn dense_chunk<const FAST: bool>(
    rows: &RowStore,
    kernel: &BaseKernel,
    x: &[f64],
    q: &Query,
    chunk: &mut Chunk,
    m: usize,
) -> f64 {
    let (slots, vals) = (&chunk.slots, &mut chunk.vals);
    let mut p = 0;
    while p + 4 <= m {
        let four = [
            dense_row(rows, slots[p]),
            dense_row(rows, slots[p + 1]),
            dense_row(rows, slots[p + 2]),
            dense_row(rows, slots[p + 3]),
        ];
        vals[p..p + 4].copy_from_slice(&dot4_dispatch::<FAST>(four, x));
        p += 4;
    }
    for j in p..m {
        vals[j] = dot4(dense_row(rows, slots[j]), x);
    }
    kernel_map::<FAST>(kernel, q, vals, &chunk.sq[..m]);
    // Four partial sums: no single dependency chain through the chunk.
    let mut acc = [0.0f64; 4];
    let mut j = 0;
    while j + 4 <= m {
        for l in 0..4 {
            acc[l] += chunk.coef[j + l] * vals[j + l];
        }
        j += 4;
    }
    for l in 0..m - j {
        acc[l] += chunk.coef[j + l] * vals[j + l];
    }
    (acc[0] + acc[1]) + (acc[2] + acc[3])
}

/// Four dot products with `x` (`simd::dot4_lanes`): 256-bit fused multiply-adds when `FAST`.
#[inline(always)]
pub(super) fn dot4_dispatch<const FAST: bool>(rows: [&[f64]; 4], x: &[f64]) -> [f64; 4] {
    #[cfg(target_arch = "x86_64")]
    {
        if FAST {
            // SAFETY: FAST is only instantiated inside `dense_score_avx2`, which runs after
            // AVX2 and FMA were detected.
            return unsafe { dot4_lanes::<std::arch::x86_64::__m256d>(rows, x) };
        }
    }
    // SAFETY: plain arrays need no CPU feature.
    unsafe { dot4_lanes::<[f64; 4]>(rows, x) }
}

/// `e^v` for every `v` (vectorisable: no branches, no table).
#[inline(always)]
pub(super) fn exp_in_place<const FMA: bool>(v: &mut [f64]) {
    for x in v.iter_mut() {
        *x = exp_poly::<FMA>(*x);
    }
}

/// `e^x` by Cody-Waite reduction `x = k ln2 + r`, |r| <= ln2/2, and the degree-13 Taylor
/// polynomial of `e^r` (truncation < 5e-18); `2^k` is added to the exponent bits directly.
/// Arguments below -708 give 0 (libm gives subnormals there).
#[inline(always)]
pub(crate) fn exp_poly<const FMA: bool>(x: f64) -> f64 {
    const SHIFT: f64 = 6_755_399_441_055_744.0; // 1.5 * 2^52: adding it rounds to an integer
    const LN2_HI: f64 = 0.693_147_180_369_123_8;
    const LN2_LO: f64 = 1.908_214_929_270_587_7e-10;
    const INV_FACT: [f64; 14] = [
        1.0,
        1.0,
        0.5,
        1.0 / 6.0,
        1.0 / 24.0,
        1.0 / 120.0,
        1.0 / 720.0,
        1.0 / 5040.0,
        1.0 / 40320.0,
        1.0 / 362_880.0,
        1.0 / 3_628_800.0,
        1.0 / 39_916_800.0,
        1.0 / 479_001_600.0,
        1.0 / 6_227_020_800.0,
    ];
    let xc = x.clamp(-708.0, 709.0);
    let t = madd::<FMA>(xc, std::f64::consts::LOG2_E, SHIFT);
    let k = t - SHIFT;
    let r = madd::<FMA>(-k, LN2_LO, madd::<FMA>(-k, LN2_HI, xc));
    let mut p = INV_FACT[13];
    for c in INV_FACT[..13].iter().rev() {
        p = madd::<FMA>(p, r, *c);
    }
    // The low bits of t hold k (two's complement): shift them into the exponent field.
    let scaled = f64::from_bits(p.to_bits().wrapping_add(t.to_bits() << 52));
    if x < -708.0 {
        0.0
    } else {
        scaled
    }
}
