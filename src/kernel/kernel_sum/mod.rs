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
//!   to the stored rows holding it (a list of (slot, value) postings, or a dense column over the
//!   slots for a feature in at least an eighth of them), so the cost is the number of (stored
//!   row, query) feature matches rather than |S| merge-joins or |S| gathers of every stored
//!   non-zero. Each dot product still adds its terms in ascending feature order, so the result
//!   is bit-identical to a gather.
//! - otherwise: [`crate::kernel::RowStore::for_each_kernel`].

use crate::data::Row;
use crate::kernel::ActiveSet;
use crate::kernel::{BaseKernel, Query, Scratch, TaskKernel};

mod dense;
mod sparse_index;
#[cfg(test)]
mod tests;

use dense::{complete_scores, dense_score, CompleteGraph};
pub(crate) use dense::{dense_coef_sum, dense_kernel_row};
pub use sparse_index::SparseIndex;

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
        (Row::Sparse { indices, values }, Row::Sparse { .. }) if index.is_built() => index
            .score(set, kernel, tasks, indices, values, q, task)
            .unwrap_or_else(|| generic_score(set, kernel, tasks, q, task, scratch)),
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
