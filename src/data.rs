//! Borrowed views of the input: one instance (`Row`) and a batch of instances (`Rows`),
//! dense row-major or CSR, plus the validation every batch call runs before touching a model.

use crate::error::{Error, Result};
use crate::simd::{dense_axpy, dense_dot, dot4, first_non_finite};

/// A value a row stores: `f64` (the caller's input) or `f32` (BatchMtl's stored examples, which
/// halve the memory and the data each solver pass streams). Every product widens the stored value
/// to `f64` first, so the arithmetic is double precision either way.
pub trait Value: Copy + Into<f64> {
    /// `<a, b>` over dense slices: the kernel of `simd::dense_dot` (the same order of operations),
    /// at the caller's vector width.
    #[inline]
    fn dense_dot(a: &[Self], b: &[f64]) -> f64 {
        dot4(a, b)
    }

    /// `y += alpha a` over dense slices.
    #[inline]
    fn dense_axpy(alpha: f64, a: &[Self], y: &mut [f64]) {
        y.iter_mut().zip(a).for_each(|(yi, &x)| *yi += alpha * x.into());
    }
}

/// The input: the dispatching kernels (the widest build the processor runs).
impl Value for f64 {
    #[inline]
    fn dense_dot(a: &[f64], b: &[f64]) -> f64 {
        dense_dot(a, b)
    }

    #[inline]
    fn dense_axpy(alpha: f64, a: &[f64], y: &mut [f64]) {
        dense_axpy(alpha, a, y)
    }
}

impl Value for f32 {}

/// One instance: a dense slice or a sparse vector with strictly increasing indices, of `f64`
/// values unless said otherwise ([`Value`]).
#[derive(Debug, Clone, Copy)]
pub enum Row<'a, T = f64> {
    /// Every feature's value, in order.
    Dense(&'a [T]),
    /// The non-zero values and their features.
    Sparse {
        /// Strictly increasing feature indices.
        indices: &'a [u32],
        /// The value of each index.
        values: &'a [T],
    },
}

impl<T: Value> Row<'_, T> {
    /// Number of stored entries.
    pub fn nnz(&self) -> usize {
        match *self {
            Row::Dense(v) => v.len(),
            Row::Sparse { values, .. } => values.len(),
        }
    }

    /// Calls `f(index, value)` for every stored entry.
    #[inline]
    pub fn for_each(&self, mut f: impl FnMut(usize, f64)) {
        match *self {
            Row::Dense(v) => v.iter().enumerate().for_each(|(j, &x)| f(j, x.into())),
            Row::Sparse { indices, values } => indices.iter().zip(values).for_each(|(&j, &x)| f(j as usize, x.into())),
        }
    }

    /// `<self, w>` for a dense `w` of the full dimension.
    #[inline]
    pub fn dot(&self, w: &[f64]) -> f64 {
        match *self {
            Row::Dense(v) => T::dense_dot(v, w),
            Row::Sparse { indices, values } => gather_dot(indices, values, w),
        }
    }

    /// `w += scale * self` for a dense `w` of the full dimension.
    #[inline]
    pub fn add_to(&self, w: &mut [f64], scale: f64) {
        match *self {
            Row::Dense(v) => T::dense_axpy(scale, v, w),
            Row::Sparse { indices, values } => {
                for (&j, &v) in indices.iter().zip(values) {
                    w[j as usize] += scale * v.into();
                }
            }
        }
    }
}

impl Row<'_> {
    /// Squared Euclidean norm.
    pub fn sq_norm(&self) -> f64 {
        let values = match *self {
            Row::Dense(v) => v,
            Row::Sparse { values, .. } => values,
        };
        dense_dot(values, values)
    }

    /// Whether `w + scale * self` is finite in every entry `self` touches (`w` finite): the check
    /// an update runs before it writes, so that an overflow is refused rather than absorbed.
    pub fn axpy_stays_finite(&self, w: &[f64], scale: f64) -> bool {
        if !scale.is_finite() {
            return false;
        }
        match *self {
            // `0 * t` is 0 for a finite t and NaN otherwise: one branch-free pass.
            Row::Dense(v) => w.iter().zip(v).map(|(&wi, &vi)| 0.0 * (wi + scale * vi)).sum::<f64>() == 0.0,
            Row::Sparse { indices, values } => indices
                .iter()
                .zip(values)
                .all(|(&j, &v)| (w[j as usize] + scale * v).is_finite()),
        }
    }

    /// `<self, other>` for any pair of representations (merge-join for sparse·sparse).
    pub fn dot_row(&self, other: &Row) -> f64 {
        match (*self, *other) {
            (Row::Dense(a), Row::Dense(b)) => dense_dot(a, b),
            (Row::Dense(a), Row::Sparse { indices, values }) | (Row::Sparse { indices, values }, Row::Dense(a)) => {
                gather_dot(indices, values, a)
            }
            (
                Row::Sparse {
                    indices: ia,
                    values: va,
                },
                Row::Sparse {
                    indices: ib,
                    values: vb,
                },
            ) => {
                let (mut p, mut q, mut acc) = (0, 0, 0.0);
                while p < ia.len() && q < ib.len() {
                    match ia[p].cmp(&ib[q]) {
                        std::cmp::Ordering::Less => p += 1,
                        std::cmp::Ordering::Greater => q += 1,
                        std::cmp::Ordering::Equal => {
                            acc += va[p] * vb[q];
                            p += 1;
                            q += 1;
                        }
                    }
                }
                acc
            }
        }
    }
}

/// `<x, dense>` for the sparse `x` of `indices` and `values`.
#[inline]
pub fn gather_dot<T: Value>(indices: &[u32], values: &[T], dense: &[f64]) -> f64 {
    indices
        .iter()
        .zip(values)
        .map(|(&j, &v)| v.into() * dense[j as usize])
        .sum()
}

/// A batch of instances, of `f64` values unless said otherwise ([`Value`]).
#[derive(Debug, Clone, Copy)]
pub enum Rows<'a, T = f64> {
    /// Row-major `n_rows x n_cols`.
    Dense {
        /// The values, row after row.
        data: &'a [T],
        /// The number of rows.
        n_rows: usize,
        /// The number of features.
        n_cols: usize,
    },
    /// Compressed sparse rows with canonical (sorted, duplicate-free) indices.
    Csr {
        /// Row `r` is `indptr[r]..indptr[r + 1]` of `indices` and `data`.
        indptr: &'a [i64],
        /// The feature of each stored value.
        indices: &'a [u32],
        /// The stored values.
        data: &'a [T],
        /// The number of features.
        n_cols: usize,
    },
}

impl<'a, T: Value> Rows<'a, T> {
    /// A dense row-major batch of `n_rows x n_cols` over `data`.
    pub fn dense(data: &'a [T], n_rows: usize, n_cols: usize) -> Self {
        Rows::Dense { data, n_rows, n_cols }
    }

    /// Rows `a..b` of the batch (`a <= b <= len`). A CSR slice needs its own `indptr` starting at
    /// 0, which is written into `buf`.
    pub fn range(&self, a: usize, b: usize, buf: &'a mut Vec<i64>) -> Rows<'a, T> {
        let n_cols = self.n_cols();
        match *self {
            Rows::Dense { data, .. } => Rows::dense(&data[a * n_cols..b * n_cols], b - a, n_cols),
            Rows::Csr {
                indptr, indices, data, ..
            } => {
                let (lo, hi) = (indptr[a] as usize, indptr[b] as usize);
                *buf = indptr[a..=b].iter().map(|p| p - indptr[a]).collect();
                let (indices, data) = (&indices[lo..hi], &data[lo..hi]);
                Rows::Csr {
                    indptr: buf,
                    indices,
                    data,
                    n_cols,
                }
            }
        }
    }

    /// The number of rows.
    pub fn len(&self) -> usize {
        match *self {
            Rows::Dense { n_rows, .. } => n_rows,
            Rows::Csr { indptr, .. } => indptr.len().saturating_sub(1),
        }
    }

    /// True when the batch has no row.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The number of features.
    pub fn n_cols(&self) -> usize {
        match *self {
            Rows::Dense { n_cols, .. } | Rows::Csr { n_cols, .. } => n_cols,
        }
    }

    /// True for a CSR batch.
    pub fn is_sparse(&self) -> bool {
        matches!(self, Rows::Csr { .. })
    }

    /// Asks the processor to start loading row `i` into cache (dense rows only; a hint, no
    /// effect on results; nothing past the last row): the online loop touches each row once, so
    /// it otherwise waits on memory at the start of every row.
    #[inline]
    pub fn prefetch_row(&self, i: usize) {
        #[cfg(target_arch = "x86_64")]
        if let Rows::Dense { data, n_rows, n_cols } = *self {
            if i >= n_rows {
                return;
            }
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            let row = &data[i * n_cols..(i + 1) * n_cols];
            // One hint per 64-byte line (8 values).
            for chunk in row.chunks(8) {
                // SAFETY: prefetching is a hint on a valid address; it never faults.
                unsafe { _mm_prefetch::<_MM_HINT_T0>(chunk.as_ptr().cast()) };
            }
        }
    }

    /// Row `i`; call `validate` first (it checks the CSR structure this relies on).
    #[inline]
    pub fn row(&self, i: usize) -> Row<'a, T> {
        match *self {
            Rows::Dense { data, n_cols, .. } => Row::Dense(&data[i * n_cols..(i + 1) * n_cols]),
            Rows::Csr {
                indptr, indices, data, ..
            } => {
                let (a, b) = (indptr[i] as usize, indptr[i + 1] as usize);
                Row::Sparse {
                    indices: &indices[a..b],
                    values: &data[a..b],
                }
            }
        }
    }
}

impl Rows<'_> {
    /// Checks shape, CSR structure and finiteness, so that a model is never half-updated.
    pub fn validate(&self) -> Result<()> {
        self.validate_structure()?;
        self.scan_non_finite()
    }

    /// [`Rows::validate`] without the scan for NaN and infinity: lengths, and a CSR's pointers
    /// and indices, so that every row can be read.
    fn validate_structure(&self) -> Result<()> {
        match *self {
            Rows::Dense { data, n_rows, n_cols } => {
                if data.len() != n_rows * n_cols {
                    return Err(Error::LengthMismatch {
                        rows: n_rows,
                        what: "the dense buffer",
                        len: data.len(),
                    });
                }
            }
            Rows::Csr {
                indptr,
                indices,
                data,
                n_cols,
            } => {
                if indptr.is_empty() || indptr[0] != 0 || indices.len() != data.len() {
                    return Err(Error::MalformedSparse {
                        row: 0,
                        reason: "indptr/indices/data lengths disagree".into(),
                    });
                }
                for r in 0..indptr.len() - 1 {
                    let (a, b) = (indptr[r], indptr[r + 1]);
                    if a > b || b as usize > indices.len() {
                        return Err(Error::MalformedSparse {
                            row: r,
                            reason: format!("indptr goes from {a} to {b}"),
                        });
                    }
                    let idx = &indices[a as usize..b as usize];
                    if idx.windows(2).any(|w| w[0] >= w[1]) {
                        return Err(Error::MalformedSparse {
                            row: r,
                            reason: "indices are not strictly increasing".into(),
                        });
                    }
                    if let Some(&last) = idx.last() {
                        if last as usize >= n_cols {
                            return Err(Error::MalformedSparse {
                                row: r,
                                reason: format!("index {last} >= n_features {n_cols}"),
                            });
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// The first NaN or ±inf of a structurally valid batch, as an error naming its row.
    fn scan_non_finite(&self) -> Result<()> {
        match *self {
            Rows::Dense { data, n_cols, .. } => {
                if let Some(pos) = first_non_finite(data) {
                    return Err(Error::NonFinite {
                        row: pos / n_cols.max(1),
                        value: data[pos],
                    });
                }
            }
            Rows::Csr { indptr, data, .. } => {
                // The structure is sound, so the rows' values are exactly data[..indptr[n_rows]]:
                // one vectorised scan of them all, then the row of the first bad value.
                let stored = &data[..indptr[indptr.len() - 1] as usize];
                if let Some(pos) = first_non_finite(stored) {
                    return Err(Error::NonFinite {
                        row: indptr.partition_point(|&p| p <= pos as i64) - 1,
                        value: stored[pos],
                    });
                }
            }
        }
        Ok(())
    }
}

/// The largest norm of a row to be learned: far below the magnitude a model's state may hold
/// (`state::MAX_MAGNITUDE`, 1e150), so that stored rows and weights summed from them stay
/// within it and a learned model always saves and loads.
pub const MAX_ROW_NORM: f64 = 1e100;

/// What the learn-batch checks read of a base kernel ([`crate::kernel::BaseKernel`] implements
/// it): declared here, so that the input's checks do not depend on the kernels.
pub(crate) trait SelfKernel {
    /// `K'(x, x)` from the squared norm `‖x‖²`.
    fn self_value(&self, sq_norm: f64) -> f64;
    /// The kernel, as an error message names it.
    fn describe(&self) -> String;
}

/// The first row whose `‖x‖²` (or, with `kernel`, `K'(x, x)`) is not finite, or whose norm is
/// beyond [`MAX_ROW_NORM`], as an error
/// ([`validate_learn_batch`]).
fn row_scale_error<K: SelfKernel>(rows: &Rows, kernel: Option<&K>) -> Option<Error> {
    for r in 0..rows.len() {
        let sq = rows.row(r).sq_norm();
        if !sq.is_finite() {
            return Some(Error::RowOverflow {
                row: r,
                reason: format!("its squared norm ‖x‖² is {sq} (too large for double precision); rescale the data"),
            });
        }
        if sq > MAX_ROW_NORM * MAX_ROW_NORM {
            return Some(Error::RowOverflow {
                row: r,
                reason: format!(
                    "its norm ‖x‖ is {:e}, beyond the {MAX_ROW_NORM:e} a learned row may have (a model holds values \
                     up to 1e150, and stores rows or sums them into weights); rescale the data",
                    sq.sqrt()
                ),
            });
        }
        if let Some(k) = kernel {
            let kxx = k.self_value(sq);
            if !kxx.is_finite() {
                return Some(Error::RowOverflow {
                    row: r,
                    reason: format!(
                        "the kernel self-value K(x, x) is {kxx} (‖x‖² = {sq:e}, kernel {}); lower gamma, coef0 or degree, or rescale the data",
                        k.describe()
                    ),
                });
            }
        }
    }
    None
}

/// Validates a whole batch (rows, task ids, optional labels) against a model's dimensions.
pub(crate) fn validate_batch(
    rows: &Rows,
    tasks: &[i64],
    labels: Option<&[f64]>,
    n_tasks: usize,
    n_features: usize,
) -> Result<()> {
    rows.validate()?;
    validate_ids(rows, tasks, labels, n_tasks, n_features)
}

/// [`validate_batch`] for a batch to be learned, with the per-row scale checks: every row's
/// `‖x‖²` is finite and, for a kernel learner (`kernel`), so is the self-kernel `K'(x, x)`. By
/// Cauchy–Schwarz, `|K'(x, x')| ≤ sqrt(K'(x, x) K'(x', x'))`, so every kernel value between
/// checked rows is finite too: a row of entries near 1e155, or a polynomial kernel with a large
/// gamma/coef0, fails here rather than feeding inf into a model. `‖x‖²` is finite only if the row
/// holds no NaN or infinity, so the norms' pass stands in for the NaN scan, which runs only to
/// name the value when a norm is not finite. The errors are those (and in the order) of
/// `validate_batch` followed by the scale checks.
pub(crate) fn validate_learn_batch<K: SelfKernel>(
    rows: &Rows,
    tasks: &[i64],
    labels: &[f64],
    n_tasks: usize,
    n_features: usize,
    kernel: Option<&K>,
) -> Result<()> {
    rows.validate_structure()?;
    let scale = row_scale_error(rows, kernel);
    if scale.is_some() {
        rows.scan_non_finite()?;
    }
    validate_ids(rows, tasks, Some(labels), n_tasks, n_features)?;
    scale.map_or(Ok(()), Err)
}

/// The checks of [`validate_batch`] after the rows' own: width, task ids, labels.
fn validate_ids(rows: &Rows, tasks: &[i64], labels: Option<&[f64]>, n_tasks: usize, n_features: usize) -> Result<()> {
    if rows.n_cols() != n_features {
        return Err(Error::FeatureMismatch {
            expected: n_features,
            got: rows.n_cols(),
        });
    }
    if tasks.len() != rows.len() {
        return Err(Error::LengthMismatch {
            rows: rows.len(),
            what: "tasks",
            len: tasks.len(),
        });
    }
    if let Some((row, &task)) = tasks.iter().enumerate().find(|(_, &t)| t < 0 || t as usize >= n_tasks) {
        return Err(Error::UnknownTask { row, task, n_tasks });
    }
    if let Some(y) = labels {
        if y.len() != rows.len() {
            return Err(Error::LengthMismatch {
                rows: rows.len(),
                what: "y",
                len: y.len(),
            });
        }
        if let Some((row, &value)) = y.iter().enumerate().find(|(_, &v)| v != 1.0 && v != -1.0) {
            return Err(Error::InvalidLabel { row, value });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dense_and_sparse_dots_agree() {
        let a = [0.0, 1.5, 0.0, -2.0, 3.0];
        let b = [1.0, 2.0, 0.5, 0.0, -1.0];
        let sa = Row::Sparse {
            indices: &[1, 3, 4],
            values: &[1.5, -2.0, 3.0],
        };
        let sb = Row::Sparse {
            indices: &[0, 1, 2, 4],
            values: &[1.0, 2.0, 0.5, -1.0],
        };
        let expect = 3.0 - 3.0;
        assert_eq!(Row::Dense(&a).dot_row(&Row::Dense(&b)), expect);
        assert_eq!(sa.dot_row(&Row::Dense(&b)), expect);
        assert_eq!(sa.dot_row(&sb), expect);
    }

    #[test]
    fn first_non_finite_finds_the_exact_position_in_any_chunk() {
        assert_eq!(first_non_finite(&[]), None);
        let n = 3 * 4096 + 17; // chunk boundaries at 4096, 8192, 12288 and a ragged tail
        let clean: Vec<f64> = (0..n).map(|i| (i as f64 - 6000.0) * 1e300).collect();
        assert_eq!(first_non_finite(&clean), None);
        let extremes = [f64::MAX, f64::MIN, f64::MIN_POSITIVE, -0.0, 5e-324];
        assert_eq!(first_non_finite(&extremes), None);
        for &bad in &[f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -f64::NAN] {
            for &pos in &[0, 1, 4095, 4096, 8191, 8192, n - 17, n - 1] {
                let mut v = clean.clone();
                v[pos] = bad;
                if pos + 3 < n {
                    v[pos + 3] = f64::NAN; // a later bad value in the same chunk must not win
                }
                v[n - 1] = if pos == n - 1 { bad } else { f64::INFINITY };
                assert_eq!(first_non_finite(&v), Some(pos), "value {bad} at {pos}");
                // The dispatch above runs the AVX2 build where the CPU has it; this is the other.
                assert_eq!(
                    crate::simd::first_non_finite_kernel(&v),
                    Some(pos),
                    "baseline build, value {bad} at {pos}"
                );
            }
        }
    }

    #[test]
    fn non_finite_errors_name_the_row_and_the_value() {
        let mut data = vec![0.5; 5000 * 3];
        data[4097 * 3 + 2] = f64::NEG_INFINITY;
        let rows = Rows::dense(&data, 5000, 3);
        let err = rows.validate().unwrap_err();
        assert_eq!(
            err,
            Error::NonFinite {
                row: 4097,
                value: f64::NEG_INFINITY
            }
        );
        assert_eq!(err.to_string(), "X contains NaN or infinity: value -inf at row 4097");
        // CSR with empty rows around the bad value: row 3 holds data[1..3].
        let rows = Rows::Csr {
            indptr: &[0, 1, 1, 1, 3, 3],
            indices: &[0, 1, 2],
            data: &[1.0, 2.0, f64::INFINITY],
            n_cols: 3,
        };
        assert_eq!(
            rows.validate(),
            Err(Error::NonFinite {
                row: 3,
                value: f64::INFINITY
            })
        );
        // Values past indptr[n_rows] belong to no row and are not looked at.
        let rows = Rows::Csr {
            indptr: &[0, 1],
            indices: &[0, 1],
            data: &[1.0, f64::NAN],
            n_cols: 3,
        };
        assert!(rows.validate().is_ok());
    }

    #[test]
    fn validation_rejects_bad_batches() {
        let data = [1.0, f64::NAN];
        let rows = Rows::dense(&data, 1, 2);
        assert!(matches!(rows.validate(), Err(Error::NonFinite { .. })));
        let rows = Rows::Csr {
            indptr: &[0, 2],
            indices: &[3, 1],
            data: &[1.0, 1.0],
            n_cols: 5,
        };
        assert!(matches!(rows.validate(), Err(Error::MalformedSparse { .. })));
        let good = [1.0, 2.0];
        let rows = Rows::dense(&good, 1, 2);
        assert!(matches!(
            validate_batch(&rows, &[3], None, 2, 2),
            Err(Error::UnknownTask { .. })
        ));
        assert!(matches!(
            validate_batch(&rows, &[0], Some(&[0.0]), 2, 2),
            Err(Error::InvalidLabel { .. })
        ));
        assert!(validate_batch(&rows, &[1], Some(&[-1.0]), 2, 2).is_ok());
    }
}
