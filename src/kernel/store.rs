//! Storage of the instances a kernel model keeps (its active set), with the cached squared
//! norms and self-kernels that turn a prediction into one pass of dot products.
//!
//! Rows live in compact slots `0..len`; removal is swap-remove, so the slots stay contiguous and
//! the dense case is a plain row-major matrix the dot-product loop streams through. The logical
//! (insertion) order of an active set is kept by its owner, not here.

use serde::{Deserialize, Serialize};

use crate::data::{gather_dot, Row};
use crate::error::Result;
use crate::kernel::BaseKernel;
use crate::simd::dot4;
use crate::state::{check_finite, check_len, checked_size, ensure};

/// Per-call scratch space: a dense buffer into which a sparse query is scattered once, so that
/// every sparse stored row is dotted with it by a gather instead of a merge-join.
#[derive(Debug, Default, Clone)]
pub struct Scratch {
    dense: Vec<f64>,
}

/// A query instance with the quantities every kernel evaluation against it needs.
#[derive(Debug, Clone, Copy)]
pub struct Query<'a> {
    /// The instance.
    pub row: Row<'a>,
    /// Its squared Euclidean norm.
    pub sq_norm: f64,
    /// Raw `K'(x, x)`, read only by normalised kernels.
    pub self_raw: f64,
}

impl<'a> Query<'a> {
    /// `row` with its squared norm and raw self-kernel under `kernel`.
    pub fn new(row: Row<'a>, kernel: &BaseKernel) -> Self {
        let sq_norm = row.sq_norm();
        Self {
            row,
            sq_norm,
            self_raw: kernel.raw_self(sq_norm),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
enum Storage {
    /// Row-major `len x n_features`.
    Dense(Vec<f64>),
    /// One sorted sparse vector per slot.
    Sparse(Vec<(Vec<u32>, Vec<f64>)>),
}

/// The instances a kernel model stores, in slots `0..len`, with their cached squared norms and
/// self-kernels; dense (one row-major matrix) or sparse (one sorted vector per slot).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RowStore {
    n_features: usize,
    storage: Storage,
    sq_norms: Vec<f64>,
    self_raw: Vec<f64>,
}

impl RowStore {
    /// An empty store; `sparse` chooses the representation (rows of the other kind are converted).
    pub fn new(n_features: usize, sparse: bool) -> Self {
        let storage = if sparse {
            Storage::Sparse(Vec::new())
        } else {
            Storage::Dense(Vec::new())
        };
        Self {
            n_features,
            storage,
            sq_norms: Vec::new(),
            self_raw: Vec::new(),
        }
    }

    /// Number of stored rows.
    pub fn len(&self) -> usize {
        self.sq_norms.len()
    }

    /// Whether no row is stored.
    pub fn is_empty(&self) -> bool {
        self.sq_norms.is_empty()
    }

    /// The width of every row.
    pub fn n_features(&self) -> usize {
        self.n_features
    }

    /// The squared norm of the row in `slot`.
    pub fn sq_norm(&self, slot: usize) -> f64 {
        self.sq_norms[slot]
    }

    /// Squared norms by slot.
    pub fn sq_norms(&self) -> &[f64] {
        &self.sq_norms
    }

    /// The row-major `len x n_features` matrix of a dense store (None for a sparse one).
    pub fn dense_data(&self) -> Option<&[f64]> {
        match &self.storage {
            Storage::Dense(data) => Some(data),
            Storage::Sparse(_) => None,
        }
    }

    /// Whether rows are stored sparse.
    pub fn is_sparse(&self) -> bool {
        matches!(self.storage, Storage::Sparse(_))
    }

    /// A restored store: `n_features` as its owner's, every row finite with sorted in-range
    /// indices, and the cached squared norms and self-kernels those of the rows.
    pub(crate) fn check_state(&self, kernel: &BaseKernel, n_features: usize) -> Result<()> {
        let (d, n) = (self.n_features, self.len());
        check_len("stored rows' n_features", d, n_features)?;
        check_len("stored self-kernels", self.self_raw.len(), n)?;
        match &self.storage {
            Storage::Dense(data) => {
                check_len("stored dense rows", data.len(), checked_size("stored rows", n, d)?)?;
                check_finite("stored dense rows", data)?;
            }
            Storage::Sparse(rows) => {
                check_len("stored sparse rows", rows.len(), n)?;
                for (slot, (idx, val)) in rows.iter().enumerate() {
                    check_len("a stored sparse row's values", val.len(), idx.len())?;
                    check_finite("a stored sparse row", val)?;
                    ensure(idx.windows(2).all(|w| w[0] < w[1]), || {
                        format!("stored sparse row {slot} has unsorted or repeated indices")
                    })?;
                    ensure(idx.last().is_none_or(|&j| (j as usize) < d), || {
                        format!("stored sparse row {slot} has an index >= n_features = {d}")
                    })?;
                }
            }
        }
        // The caches must be what `push` computed (up to the last bits of a different SIMD build).
        let close = |a: f64, b: f64| a == b || (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1e-300);
        for slot in 0..n {
            let sq = self.row(slot).sq_norm();
            ensure(close(self.sq_norms[slot], sq), || {
                format!(
                    "stored squared norm {slot} is {}, the row's is {sq}",
                    self.sq_norms[slot]
                )
            })?;
            let raw = kernel.raw_self(self.sq_norms[slot]);
            ensure(close(self.self_raw[slot], raw), || {
                format!("stored self-kernel {slot} is {}, expected {raw}", self.self_raw[slot])
            })?;
        }
        Ok(())
    }

    /// Appends a row at slot `len()` and returns that slot.
    pub fn push(&mut self, row: Row, kernel: &BaseKernel) -> usize {
        let d = self.n_features;
        match &mut self.storage {
            Storage::Dense(data) => {
                let start = data.len();
                data.resize(start + d, 0.0);
                row.for_each(|j, v| data[start + j] = v);
            }
            Storage::Sparse(rows) => {
                let mut idx = Vec::with_capacity(row.nnz());
                let mut val = Vec::with_capacity(row.nnz());
                row.for_each(|j, v| {
                    if v != 0.0 {
                        idx.push(j as u32);
                        val.push(v);
                    }
                });
                rows.push((idx, val));
            }
        }
        let sq = row.sq_norm();
        self.sq_norms.push(sq);
        self.self_raw.push(kernel.raw_self(sq));
        self.len() - 1
    }

    /// Removes `slot` by moving the last slot into it; returns the slot that moved (if any).
    pub fn swap_remove(&mut self, slot: usize) -> Option<usize> {
        let last = self.len() - 1;
        let d = self.n_features;
        match &mut self.storage {
            Storage::Dense(data) => {
                if slot != last {
                    data.copy_within(last * d..(last + 1) * d, slot * d);
                }
                data.truncate(last * d);
            }
            Storage::Sparse(rows) => {
                rows.swap_remove(slot);
            }
        }
        self.sq_norms.swap_remove(slot);
        self.self_raw.swap_remove(slot);
        (slot != last).then_some(last)
    }

    /// Keeps the slots with `keep[slot]`, in their order (slot `s` moves to the number of kept
    /// slots before it), and overwrites the freed room with zeros, so that no removed value stays
    /// in the store's memory. O(stored values).
    pub fn retain(&mut self, keep: &[bool]) {
        let d = self.n_features;
        let mut next = 0;
        match &mut self.storage {
            Storage::Dense(data) => {
                for (slot, &kept) in keep.iter().enumerate() {
                    if kept {
                        if slot != next {
                            data.copy_within(slot * d..(slot + 1) * d, next * d);
                        }
                        next += 1;
                    }
                }
                data[next * d..].fill(0.0);
                data.truncate(next * d);
            }
            Storage::Sparse(rows) => {
                for (slot, row) in rows.iter_mut().enumerate() {
                    if !keep[slot] {
                        row.1.fill(0.0);
                        row.0.fill(0);
                    }
                }
                super::active_set::retain_flagged(rows, keep);
            }
        }
        super::active_set::retain_flagged(&mut self.sq_norms, keep);
        super::active_set::retain_flagged(&mut self.self_raw, keep);
    }

    /// The stored row at `slot`.
    pub fn row(&self, slot: usize) -> Row<'_> {
        let d = self.n_features;
        match &self.storage {
            Storage::Dense(data) => Row::Dense(&data[slot * d..(slot + 1) * d]),
            Storage::Sparse(rows) => Row::Sparse {
                indices: &rows[slot].0,
                values: &rows[slot].1,
            },
        }
    }

    /// Calls `f(slot, K'(x_slot, q))` for every slot with `keep(slot)`.
    ///
    /// This is the hot loop of every kernel learner: one dot product per kept slot (a contiguous
    /// dense dot, a gather, or a gather from the scattered query), then the kernel's scalar map.
    pub fn for_each_kernel(
        &self,
        kernel: &BaseKernel,
        q: &Query,
        scratch: &mut Scratch,
        mut keep: impl FnMut(usize) -> bool,
        mut f: impl FnMut(usize, f64),
    ) {
        let d = self.n_features;
        let mut emit = |slot: usize, dot: f64| {
            let kv = kernel.from_dot(dot, self.sq_norms[slot], q.sq_norm, self.self_raw[slot], q.self_raw);
            f(slot, kv);
        };
        match (&self.storage, q.row) {
            (Storage::Dense(data), Row::Dense(x)) => {
                for (slot, stored) in data.chunks_exact(d.max(1)).enumerate().take(self.len()) {
                    if keep(slot) {
                        emit(slot, dot4(stored, x));
                    }
                }
            }
            (Storage::Dense(data), Row::Sparse { indices, values }) => {
                for (slot, stored) in data.chunks_exact(d.max(1)).enumerate().take(self.len()) {
                    if keep(slot) {
                        emit(slot, gather_dot(indices, values, stored));
                    }
                }
            }
            (Storage::Sparse(rows), Row::Dense(x)) => {
                for (slot, (idx, val)) in rows.iter().enumerate() {
                    if keep(slot) {
                        emit(slot, gather_dot(idx, val, x));
                    }
                }
            }
            (Storage::Sparse(rows), Row::Sparse { indices, values }) => {
                let buf = &mut scratch.dense;
                if buf.len() < d {
                    buf.resize(d, 0.0);
                }
                indices.iter().zip(values).for_each(|(&j, &v)| buf[j as usize] = v);
                for (slot, (idx, val)) in rows.iter().enumerate() {
                    if keep(slot) {
                        emit(slot, gather_dot(idx, val, buf));
                    }
                }
                // Clear only what was written: O(nnz), not O(d).
                indices.iter().for_each(|&j| buf[j as usize] = 0.0);
            }
        }
    }

    /// `K'(x_a, x_b)` between two stored rows.
    pub fn kernel_between(&self, kernel: &BaseKernel, a: usize, b: usize) -> f64 {
        let dot = self.row(a).dot_row(&self.row(b));
        kernel.from_dot(
            dot,
            self.sq_norms[a],
            self.sq_norms[b],
            self.self_raw[a],
            self.self_raw[b],
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::KernelKind;

    #[test]
    fn dense_and_sparse_stores_give_the_same_kernel_rows() {
        let kernel = BaseKernel::new(
            KernelKind::Poly {
                degree: 2,
                gamma: 0.5,
                coef0: 1.0,
            },
            true,
        )
        .unwrap();
        let rows = [[0.0, 1.0, 2.0, 0.0], [3.0, 0.0, 0.0, 1.0], [0.5, 0.5, 0.0, 0.0]];
        let mut dense = RowStore::new(4, false);
        let mut sparse = RowStore::new(4, true);
        for r in &rows {
            dense.push(Row::Dense(r), &kernel);
            sparse.push(Row::Dense(r), &kernel);
        }
        dense.swap_remove(0);
        sparse.swap_remove(0);
        let q_dense = [1.0, 0.0, 2.0, 1.0];
        let q_sparse = Row::Sparse {
            indices: &[0, 2, 3],
            values: &[1.0, 2.0, 1.0],
        };
        let mut out = Vec::new();
        let mut scratch = Scratch::default();
        for store in [&dense, &sparse] {
            for q in [Row::Dense(&q_dense), q_sparse] {
                let mut vals = vec![0.0; store.len()];
                store.for_each_kernel(
                    &kernel,
                    &Query::new(q, &kernel),
                    &mut scratch,
                    |_| true,
                    |s, v| vals[s] = v,
                );
                out.push(vals);
            }
        }
        for v in &out[1..] {
            v.iter()
                .zip(&out[0])
                .for_each(|(a, b)| assert!((a - b).abs() < 1e-14 * b.abs().max(1.0)));
        }
        let direct = kernel.eval(&Row::Dense(&rows[2]), &Row::Dense(&q_dense));
        assert!((out[0][0] - direct).abs() < 1e-14);
    }
}
