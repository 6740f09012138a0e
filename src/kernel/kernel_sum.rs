//! The score `sum_j c_j K'(x_j, q)`, `c_j = beta_j T[i_j, task]`, over an active set, by the
//! fastest path the storage allows (the hot loop of the kernel Perceptrons and budget learners):
//!
//! - dense rows, dense query: slots in chunks; the dot products of four stored rows at a time
//!   (the query's chunk loaded once), then the kernel's scalar map over the chunk. Under the
//!   complete graph up to [`MAX_WINDOW`] queries share the pass ([`weighted_scores`], the learn
//!   loop's scores made ahead), in blocks of four rows by up to four queries
//!   ([`crate::kernel::dense_dots`]), each query's numbers the same as alone. On x86-64 with
//!   AVX2 + FMA (detected at run time) both loops are compiled for those instructions and the
//!   rbf exponentials use a vectorisable exp (Cody-Waite reduction, degree-13 polynomial,
//!   relative error < 5e-16, tested), so a prediction is one matrix-vector product plus |S| vector
//!   exponentials. Elsewhere the same loops run with the baseline instruction set and `f64::exp`.
//! - sparse rows, sparse query, from `INDEX_FROM` stored rows on: an inverted index from feature
//!   to (slot, value) postings, so the cost is the number of (stored row, query) feature
//!   matches rather than |S| merge-joins or |S| gathers of every stored non-zero. Each dot product still adds its terms in ascending
//!   feature order, so the result is bit-identical to a gather.
//! - otherwise: [`crate::kernel::RowStore::for_each_kernel`].

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use serde::{Deserialize, Serialize};

use crate::data::Row;
use crate::kernel::dense_dots::{dots_block, Wide};
use crate::kernel::ActiveSet;
use crate::kernel::{BaseKernel, KernelKind, Query, RowStore, Scratch, TaskKernel};
use crate::linalg::simd::dot4_lanes;
use crate::simd::{dot4, fma_builds};

const CHUNK: usize = 64;

/// The most queries [`weighted_scores`] scores in one pass over the stored rows (MTRBP at B =
/// 1,000 on the School-sized stream: 8 ran 7% faster than 4, both ~1.5x faster than 1).
pub(crate) const MAX_WINDOW: usize = 8;

/// Active-set size from which scoring several queries per pass pays (below it the stored rows
/// stay in L1 and the pending scores' corrections would cost about as much as the pass).
const WINDOW_FROM: usize = 64;

/// How many rows a learner over `set` should score ahead in one pass (the learn loop's
/// lookahead, [`crate::learner::OnlineLearner::lookahead`]): [`MAX_WINDOW`] where
/// [`weighted_scores`] shares the pass (a dense store, the complete graph), else 1.
pub(crate) fn window_width(set: &ActiveSet, tasks: &TaskKernel) -> usize {
    let shared = matches!(tasks, TaskKernel::Complete { .. }) && set.rows().dense_data().is_some();
    if shared && set.len() >= WINDOW_FROM {
        MAX_WINDOW
    } else {
        1
    }
}

/// [`weighted_scores`] of rows (queries built here, [`MAX_WINDOW`] at a time).
#[allow(clippy::too_many_arguments)]
pub(crate) fn rows_scores(
    set: &ActiveSet,
    index: &SparseIndex,
    kernel: &BaseKernel,
    tasks: &TaskKernel,
    rows: &[Row],
    row_tasks: &[usize],
    out: &mut [f64],
    scratch: &mut Scratch,
) {
    for ((rs, ts), os) in rows
        .chunks(MAX_WINDOW)
        .zip(row_tasks.chunks(MAX_WINDOW))
        .zip(out.chunks_mut(MAX_WINDOW))
    {
        let mut qs = [Query {
            row: Row::Dense(&[]),
            sq_norm: 0.0,
            self_raw: 0.0,
        }; MAX_WINDOW];
        for (q, r) in qs.iter_mut().zip(rs) {
            *q = Query::new(*r, kernel);
        }
        weighted_scores(set, index, kernel, tasks, &qs[..rs.len()], ts, os, scratch);
    }
}

/// `sum_j beta_j T[i_j, task] K'(x_j, q)` over the elements in `task`'s component.
pub(crate) fn weighted_score(
    set: &ActiveSet,
    index: &SparseIndex,
    kernel: &BaseKernel,
    tasks: &TaskKernel,
    q: &Query,
    task: usize,
    scratch: &mut Scratch,
) -> f64 {
    if set.is_empty() {
        return 0.0;
    }
    match (q.row, set.rows().row(0)) {
        (Row::Dense(x), Row::Dense(_)) => {
            if let (TaskKernel::Complete { .. }, Some(_)) = (tasks, set.rows().dense_data()) {
                // One query through the lookahead's pass: the same numbers as in a window.
                let mut out = [0.0];
                weighted_scores(set, index, kernel, tasks, &[*q], &[task], &mut out, scratch);
                return out[0];
            }
            dense_score(set, kernel, tasks, x, q, task)
        }
        (Row::Sparse { indices, values }, Row::Sparse { .. }) if index.is_built() => {
            index.score(set, kernel, tasks, indices, values, q, task)
        }
        _ => generic_score(set, kernel, tasks, q, task, scratch),
    }
}

/// [`weighted_score`] of several queries (`out[j]` for `queries[j]` in task `query_tasks[j]`),
/// bit for bit. With a dense store, dense queries and the complete graph, up to [`MAX_WINDOW`]
/// queries share one pass over the stored rows (each stored row loaded once for all of them);
/// otherwise one query at a time.
#[allow(clippy::too_many_arguments)]
pub(crate) fn weighted_scores(
    set: &ActiveSet,
    index: &SparseIndex,
    kernel: &BaseKernel,
    tasks: &TaskKernel,
    queries: &[Query],
    query_tasks: &[usize],
    out: &mut [f64],
    scratch: &mut Scratch,
) {
    debug_assert!(query_tasks.len() == queries.len() && out.len() == queries.len());
    if let (TaskKernel::Complete { diag, off, .. }, Some(data), false) =
        (tasks, set.rows().dense_data(), set.is_empty())
    {
        let mut xs: [&[f64]; MAX_WINDOW] = [&[]; MAX_WINDOW];
        if queries.iter().all(|q| matches!(q.row, Row::Dense(_))) {
            for (qs, (ts, os)) in queries
                .chunks(MAX_WINDOW)
                .zip(query_tasks.chunks(MAX_WINDOW).zip(out.chunks_mut(MAX_WINDOW)))
            {
                let mut coefs = [CompleteGraph {
                    betas: set.betas(),
                    owners: set.task_ids(),
                    task: 0,
                    diag: *diag,
                    off: *off,
                }; MAX_WINDOW];
                for (c, &t) in coefs.iter_mut().zip(ts) {
                    c.task = t as u32;
                }
                for (x, q) in xs.iter_mut().zip(qs) {
                    if let Row::Dense(r) = q.row {
                        *x = r;
                    }
                }
                let n = qs.len();
                complete_scores(data, set.rows().sq_norms(), kernel, &xs[..n], qs, &coefs[..n], os);
            }
            return;
        }
    }
    for ((q, &t), o) in queries.iter().zip(query_tasks).zip(out.iter_mut()) {
        *o = weighted_score(set, index, kernel, tasks, q, t, scratch);
    }
}

fma_builds! {
    /// The complete graph's scores of up to [`MAX_WINDOW`] dense queries in one pass. Queries
    /// per dot block: 4 with AVX-512's 32 registers, 2 with AVX2's 16 (4 spills: 17% slower),
    /// 1 portable (2 spills SSE2's 16: 4% slower).
    fn complete_scores(data: &[f64], sqs: &[f64], kernel: &BaseKernel, xs: &[&[f64]], qs: &[Query], coefs: &[CompleteGraph], out: &mut [f64]) {
        avx512: all_slots_sums::<true, std::arch::x86_64::__m512d, 4, _>(data, sqs, kernel, xs, qs, coefs, out),
        avx2: all_slots_sums::<true, std::arch::x86_64::__m256d, 2, _>(data, sqs, kernel, xs, qs, coefs, out),
        portable: all_slots_sums::<false, [f64; 4], 1, _>(data, sqs, kernel, xs, qs, coefs, out),
    }
}

/// The same sum over any storage, one kernel value at a time
/// ([`crate::kernel::RowStore::for_each_kernel`]): the fallback, and the oracle of the tests.
pub(crate) fn generic_score(
    set: &ActiveSet,
    kernel: &BaseKernel,
    tasks: &TaskKernel,
    q: &Query,
    task: usize,
    scratch: &mut Scratch,
) -> f64 {
    let component = tasks.component(task);
    let (slot_tasks, beta) = (set.task_ids(), set.betas());
    let mut f = 0.0;
    set.rows().for_each_kernel(
        kernel,
        q,
        scratch,
        |slot| tasks.component(slot_tasks[slot] as usize) == component,
        |slot, kv| f += beta[slot] * tasks.get(slot_tasks[slot] as usize, task) * kv,
    );
    f
}

// ---- dense rows ---------------------------------------------------------------------------------

fma_builds! {
    /// The dense score; the AVX-512 build runs the same loops as the AVX2 one (256-bit dot
    /// products), with the kernel map, the exponentials and the weighted sum free to use 512-bit
    /// registers.
    fn dense_score(set: &ActiveSet, kernel: &BaseKernel, tasks: &TaskKernel, x: &[f64], q: &Query, task: usize) -> f64 {
        avx512: dense_score_generic::<true>(set, kernel, tasks, x, q, task),
        avx2: dense_score_generic::<true>(set, kernel, tasks, x, q, task),
        portable: dense_score_generic::<false>(set, kernel, tasks, x, q, task),
    }
}

/// `a * b + c`, fused when compiled for FMA.
#[inline(always)]
fn madd<const FMA: bool>(a: f64, b: f64, c: f64) -> f64 {
    if FMA {
        a.mul_add(b, c)
    } else {
        a * b + c
    }
}

/// `FAST = true` selects the AVX2 intrinsics and the polynomial exp: it is only instantiated
/// inside `dense_score_avx2`, after the CPU check.
#[inline(always)]
fn dense_score_generic<const FAST: bool>(
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
trait SlotCoefs {
    /// `out[j] = c_{s0 + j}` (a loop over plain slices, so that it vectorises).
    fn fill(&self, s0: usize, out: &mut [f64]);
}

/// `beta_j T[i_j, task]` for the complete graph (T = diag on the task, off elsewhere).
#[derive(Clone, Copy)]
struct CompleteGraph<'a> {
    betas: &'a [f64],
    owners: &'a [u32],
    task: u32,
    diag: f64,
    off: f64,
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
struct Plain<'a>(&'a [f64]);

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
fn all_slots_sums<const FAST: bool, W: Wide, const QG: usize, C: SlotCoefs>(
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
fn weighted_add(c: &[f64], v: &[f64], acc: &mut [f64; 4]) {
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
unsafe fn chunk_dots<W: Wide, const QG: usize>(
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
fn plain_sum<const FAST: bool, W: Wide>(
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
fn all_slots_kernel<const FAST: bool, W: Wide>(
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
fn kernel_map<const FAST: bool>(kernel: &BaseKernel, q: &Query, vals: &mut [f64; CHUNK], sq: &[f64]) {
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
fn dense_row(rows: &RowStore, slot: usize) -> &[f64] {
    match rows.row(slot) {
        Row::Dense(r) => r,
        Row::Sparse { .. } => &[],
    }
}

/// Up to CHUNK kept slots with their coefficient `beta_j T[i_j, task]` and squared norm.
struct Chunk {
    slots: [usize; CHUNK],
    coef: [f64; CHUNK],
    sq: [f64; CHUNK],
    vals: [f64; CHUNK],
}

/// `sum_j coef_j K'(x_j, q)` over the first `m` slots of the chunk.
#[inline(always)]
fn dense_chunk<const FAST: bool>(
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
fn dot4_dispatch<const FAST: bool>(rows: [&[f64]; 4], x: &[f64]) -> [f64; 4] {
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
fn exp_in_place<const FMA: bool>(v: &mut [f64]) {
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

// ---- sparse rows: an inverted index -------------------------------------------------------------

/// A multiplicative hash for feature ids (SipHash would cost more than the postings it finds).
#[derive(Default, Clone, Copy)]
pub(crate) struct FeatureHasher(u64);

impl Hasher for FeatureHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_u32(&mut self, i: u32) {
        self.0 = (u64::from(i) ^ 0x5851_F42D_4C95_7F2D).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

#[derive(Debug, Clone, Default)]
struct Posting {
    slots: Vec<u32>,
    values: Vec<f64>,
}

/// Active-set size from which a sparse store keeps an inverted index. Below it, keeping the
/// index up to date on every eviction costs more than the gathers it saves (measured on
/// text-like rows, where the most frequent terms occur in every row).
pub const INDEX_FROM: usize = 256;

/// Feature -> (slot, value) of every stored sparse row with that feature. A cache of the active
/// set's rows, built once the set reaches `from` elements and maintained from then on; not
/// serialised (rebuilt at the first update after unpickling; until then scores take the gather
/// path, which gives the same numbers) and ignored by `==`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SparseIndex {
    /// Whether the rows are stored sparse (else the index stays empty).
    enabled: bool,
    /// Build the index once the active set has this many elements.
    from: usize,
    #[serde(skip)]
    postings: HashMap<u32, Posting, BuildHasherDefault<FeatureHasher>>,
    #[serde(skip)]
    built: bool,
}

impl PartialEq for SparseIndex {
    fn eq(&self, _other: &Self) -> bool {
        true
    }
}

impl SparseIndex {
    /// An index that is never built (every score takes the row-store loop).
    pub const fn disabled() -> Self {
        Self {
            enabled: false,
            from: usize::MAX,
            postings: HashMap::with_hasher(BuildHasherDefault::new()),
            built: false,
        }
    }

    pub fn new(sparse: bool) -> Self {
        Self::with_threshold(sparse, INDEX_FROM)
    }

    pub fn with_threshold(sparse: bool, from: usize) -> Self {
        Self {
            enabled: sparse,
            from,
            postings: HashMap::default(),
            built: false,
        }
    }

    /// The index must agree with the representation of the rows it indexes (a restored one is
    /// never built: the postings are not serialised; a live one may be).
    pub(crate) fn check_state(&self, set: &ActiveSet) -> crate::Result<()> {
        crate::state::ensure(self.enabled == set.rows().is_sparse(), || {
            "the sparse index does not match the stored rows' representation".into()
        })
    }

    pub fn is_built(&self) -> bool {
        self.built
    }

    /// Builds the index if it is due and missing (call before changing the set).
    pub fn ensure(&mut self, set: &ActiveSet) {
        if self.built || !self.enabled || set.len() < self.from {
            return;
        }
        self.postings.clear();
        self.built = true;
        for slot in 0..set.len() {
            self.add(set, slot);
        }
    }

    /// Records the row at `slot` (call after pushing it).
    pub fn add(&mut self, set: &ActiveSet, slot: usize) {
        if !self.built {
            return;
        }
        if let Row::Sparse { indices, values } = set.rows().row(slot) {
            for (&j, &v) in indices.iter().zip(values) {
                let p = self.postings.entry(j).or_default();
                p.slots.push(slot as u32);
                p.values.push(v);
            }
        }
    }

    /// Forgets the row at `slot` and renames the last slot `last` to `slot`, mirroring the
    /// swap-remove [`ActiveSet::remove_at`] is about to do (call before it).
    pub fn remove(&mut self, set: &ActiveSet, slot: usize) {
        if !self.built {
            return;
        }
        let last = set.len() - 1;
        if let Row::Sparse { indices, .. } = set.rows().row(slot) {
            for j in indices {
                if let Some(p) = self.postings.get_mut(j) {
                    if let Some(pos) = p.slots.iter().position(|&s| s as usize == slot) {
                        p.slots.swap_remove(pos);
                        p.values.swap_remove(pos);
                    }
                    if p.slots.is_empty() {
                        self.postings.remove(j);
                    }
                }
            }
        }
        if last != slot {
            if let Row::Sparse { indices, .. } = set.rows().row(last) {
                for j in indices {
                    if let Some(p) = self.postings.get_mut(j) {
                        if let Some(pos) = p.slots.iter().position(|&s| s as usize == last) {
                            p.slots[pos] = slot as u32;
                        }
                    }
                }
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn score(
        &self,
        set: &ActiveSet,
        kernel: &BaseKernel,
        tasks: &TaskKernel,
        indices: &[u32],
        values: &[f64],
        q: &Query,
        task: usize,
    ) -> f64 {
        let mut dots = vec![0.0f64; set.len()];
        for (j, &v) in indices.iter().zip(values) {
            if let Some(p) = self.postings.get(j) {
                for (&s, &w) in p.slots.iter().zip(&p.values) {
                    dots[s as usize] += w * v;
                }
            }
        }
        let component = tasks.component(task);
        let rows = set.rows();
        let mut total = 0.0;
        for (slot, &dot) in dots.iter().enumerate() {
            let owner = set.task(slot);
            if tasks.component(owner) != component {
                continue;
            }
            let sq = rows.sq_norm(slot);
            let kv = kernel.from_dot(dot, sq, q.sq_norm, kernel.raw_self(sq), q.self_raw);
            total += set.beta(slot) * tasks.get(owner, task) * kv;
        }
        total
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SplitMix64;

    fn unif(rng: &mut SplitMix64) -> f64 {
        (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
    }

    fn kernels() -> Vec<BaseKernel> {
        vec![
            BaseKernel::linear(),
            BaseKernel::poly(3, 0.5, 1.0).unwrap(),
            BaseKernel::new(
                KernelKind::Poly {
                    degree: 2,
                    gamma: 1.0,
                    coef0: 0.5,
                },
                true,
            )
            .unwrap(),
            BaseKernel::rbf(0.7).unwrap(),
        ]
    }

    fn task_kernels(k: usize) -> Vec<TaskKernel> {
        vec![
            TaskKernel::complete(k).unwrap(),
            TaskKernel::disconnected(k).unwrap(),
            TaskKernel::from_edges(k, &[(0, 1, 1.0), (2, 3, 0.5)]).unwrap(),
        ]
    }

    /// Fills a set with `n` random rows (sparse ones with ~30% non-zeros) and random evictions.
    fn random_set(
        n: usize,
        d: usize,
        k: usize,
        sparse: bool,
        kernel: &BaseKernel,
        rng: &mut SplitMix64,
    ) -> (ActiveSet, SparseIndex) {
        let mut set = ActiveSet::new(d, sparse);
        let mut index = SparseIndex::with_threshold(sparse, 0);
        index.ensure(&set);
        assert_eq!(index.is_built(), sparse);
        let mut t = 0;
        while set.len() < n {
            t += 1;
            let (mut idx, mut val) = (Vec::new(), Vec::new());
            for j in 0..d as u32 {
                if !sparse || unif(rng) < -0.4 {
                    idx.push(j);
                    val.push(unif(rng));
                }
            }
            let dense: Vec<f64> = {
                let mut v = vec![0.0; d];
                idx.iter().zip(&val).for_each(|(&j, &x)| v[j as usize] = x);
                v
            };
            let row = if sparse {
                Row::Sparse {
                    indices: &idx,
                    values: &val,
                }
            } else {
                Row::Dense(&dense)
            };
            let task = rng.below(k as u64) as usize;
            let slot = set.push(row, task, 1.0, t, unif(rng), kernel);
            index.add(&set, slot);
            // Every third insertion also evicts a random element (exercises the slot moves).
            if t % 3 == 0 {
                let position = rng.below(set.len() as u64) as usize;
                index.remove(&set, set.slot_at(position));
                set.remove_at(position);
            }
        }
        (set, index)
    }

    #[test]
    fn fast_paths_match_the_row_store_loop() {
        let (d, k) = (9, 5);
        let mut rng = SplitMix64::new(11);
        let mut scratch = Scratch::default();
        for sparse in [false, true] {
            for kernel in kernels() {
                for n in [0, 1, 3, 4, 5, 63, 64, 65, 130] {
                    let (set, index) = random_set(n, d, k, sparse, &kernel, &mut rng);
                    let stale = SparseIndex::default();
                    for tasks in task_kernels(k) {
                        for _ in 0..4 {
                            let xq: Vec<f64> = (0..d)
                                .map(|_| if unif(&mut rng) < 0.0 { 0.0 } else { unif(&mut rng) })
                                .collect();
                            let (qi, qv): (Vec<u32>, Vec<f64>) = (0..d as u32)
                                .filter(|&j| xq[j as usize] != 0.0)
                                .map(|j| (j, xq[j as usize]))
                                .unzip();
                            let task = rng.below(k as u64) as usize;
                            for row in [
                                Row::Dense(&xq),
                                Row::Sparse {
                                    indices: &qi,
                                    values: &qv,
                                },
                            ] {
                                let q = Query::new(row, &kernel);
                                let expect = generic_score(&set, &kernel, &tasks, &q, task, &mut scratch);
                                let tol = 1e-12 * expect.abs().max(1.0);
                                let got = weighted_score(&set, &index, &kernel, &tasks, &q, task, &mut scratch);
                                assert!((got - expect).abs() <= tol, "{got} {expect}");
                                // Sparse rows without a built index: the row-store loop itself.
                                let plain = weighted_score(&set, &stale, &kernel, &tasks, &q, task, &mut scratch);
                                if sparse {
                                    assert_eq!(plain.to_bits(), expect.to_bits());
                                    if matches!(row, Row::Sparse { .. }) {
                                        // The index adds the same terms in the same order.
                                        assert_eq!(got.to_bits(), expect.to_bits());
                                    }
                                }
                                if let (Row::Dense(x), false) = (row, sparse) {
                                    let generic = dense_score_generic::<false>(&set, &kernel, &tasks, x, &q, task);
                                    assert!((generic - expect).abs() <= tol, "{generic} {expect}");
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn dense_kernel_rows_and_coefficient_sums_match_the_row_store_loop() {
        let (d, k) = (9, 3);
        let mut rng = SplitMix64::new(23);
        let mut scratch = Scratch::default();
        for kernel in kernels() {
            for n in [0, 1, 5, 64, 130] {
                let (set, _) = random_set(n, d, k, false, &kernel, &mut rng);
                let xq: Vec<f64> = (0..d).map(|_| unif(&mut rng)).collect();
                let q = Query::new(Row::Dense(&xq), &kernel);
                let mut want = vec![0.0; n];
                set.rows()
                    .for_each_kernel(&kernel, &q, &mut scratch, |_| true, |slot, kv| want[slot] = kv);
                let mut got = vec![f64::NAN; n];
                assert!(dense_kernel_row(set.rows(), &kernel, &q, &mut got));
                for (g, w) in got.iter().zip(&want) {
                    assert!((g - w).abs() <= 1e-12 * w.abs().max(1.0), "{g} {w}");
                }
                let coefs: Vec<f64> = (0..n).map(|_| unif(&mut rng)).collect();
                let sum: f64 = coefs.iter().zip(&want).map(|(c, w)| c * w).sum();
                let fast = dense_coef_sum(set.rows(), &kernel, &q, &coefs).unwrap();
                assert!((fast - sum).abs() <= 1e-12 * sum.abs().max(1.0), "{fast} {sum}");
            }
        }
        // A sparse store or query takes the row-store loop.
        let kernel = BaseKernel::rbf(0.5).unwrap();
        let (set, _) = random_set(10, d, k, true, &kernel, &mut rng);
        let xq = vec![0.5; d];
        let q = Query::new(Row::Dense(&xq), &kernel);
        assert!(!dense_kernel_row(set.rows(), &kernel, &q, &mut [0.0; 10]));
        assert!(dense_coef_sum(set.rows(), &kernel, &q, &[0.0; 10]).is_none());
    }

    #[test]
    fn a_rebuilt_index_equals_the_incremental_one() {
        let kernel = BaseKernel::poly(2, 1.0, 1.0).unwrap();
        let mut rng = SplitMix64::new(5);
        let (set, index) = random_set(80, 12, 3, true, &kernel, &mut rng);
        let mut rebuilt = SparseIndex {
            enabled: true,
            ..SparseIndex::default()
        };
        rebuilt.ensure(&set);
        assert!(rebuilt.is_built());
        let tasks = TaskKernel::complete(3).unwrap();
        let (qi, qv) = (vec![0u32, 3, 4, 7, 11], vec![0.5, -1.0, 2.0, 0.25, 1.0]);
        let q = Query::new(
            Row::Sparse {
                indices: &qi,
                values: &qv,
            },
            &kernel,
        );
        let mut scratch = Scratch::default();
        let a = weighted_score(&set, &index, &kernel, &tasks, &q, 1, &mut scratch);
        let b = weighted_score(&set, &rebuilt, &kernel, &tasks, &q, 1, &mut scratch);
        let c = generic_score(&set, &kernel, &tasks, &q, 1, &mut scratch);
        assert_eq!(a.to_bits(), b.to_bits());
        assert_eq!(a.to_bits(), c.to_bits());
    }

    #[test]
    fn polynomial_exp_is_accurate() {
        let mut worst: f64 = 0.0;
        for i in 0..200_000 {
            let x = -708.0 + 1417.0 * i as f64 / 200_000.0;
            let e = x.exp();
            for got in [exp_poly::<false>(x), exp_poly::<true>(x)] {
                worst = worst.max(((got - e) / e).abs());
            }
        }
        assert!(worst < 5e-16, "{worst:e}");
        assert_eq!(exp_poly::<false>(0.0), 1.0);
        assert_eq!(exp_poly::<false>(-800.0), 0.0);
    }
}
