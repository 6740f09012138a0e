//! The rows the solver reads: the caller's batch ([`Rows`], double precision) or the learner's
//! stored examples ([`F32Rows`], single precision, read in double precision).

use crate::data::Rows;
use crate::simd::dot4;

/// Rows the solver reads: `x_r . w` and `w += a x_r`.
pub trait RowSource {
    /// The number of features.
    fn n_cols(&self) -> usize;
    /// `x_r . w`.
    fn dot(&self, r: usize, w: &[f64]) -> f64;
    /// `w += a x_r`.
    fn axpy(&self, r: usize, a: f64, w: &mut [f64]);
}

impl RowSource for Rows<'_> {
    fn n_cols(&self) -> usize {
        Rows::n_cols(self)
    }

    #[inline]
    fn dot(&self, r: usize, w: &[f64]) -> f64 {
        self.row(r).dot(w)
    }

    #[inline]
    fn axpy(&self, r: usize, a: f64, w: &mut [f64]) {
        self.row(r).add_to(w, a)
    }
}

/// Stored examples in single precision (the learner's store), read in double precision.
pub enum F32Rows<'a> {
    /// Row-major `n_rows x n_cols`.
    Dense {
        /// The values, row after row.
        data: &'a [f32],
        /// The number of features.
        n_cols: usize,
    },
    /// Compressed sparse rows with canonical (sorted, duplicate-free) indices.
    Csr {
        /// Row `r` is `indptr[r]..indptr[r + 1]` of `indices` and `values`.
        indptr: &'a [i64],
        /// Column of each stored value.
        indices: &'a [u32],
        /// The stored values.
        values: &'a [f32],
        /// The number of features.
        n_cols: usize,
    },
}

impl RowSource for F32Rows<'_> {
    fn n_cols(&self) -> usize {
        match *self {
            F32Rows::Dense { n_cols, .. } | F32Rows::Csr { n_cols, .. } => n_cols,
        }
    }

    #[inline]
    fn dot(&self, r: usize, w: &[f64]) -> f64 {
        match *self {
            F32Rows::Dense { data, n_cols } => dot4(&data[r * n_cols..(r + 1) * n_cols], w),
            F32Rows::Csr {
                indptr,
                indices,
                values,
                ..
            } => {
                let (a, b) = (indptr[r] as usize, indptr[r + 1] as usize);
                indices[a..b]
                    .iter()
                    .zip(&values[a..b])
                    .map(|(&j, &v)| f64::from(v) * w[j as usize])
                    .sum()
            }
        }
    }

    #[inline]
    fn axpy(&self, r: usize, a: f64, w: &mut [f64]) {
        match *self {
            F32Rows::Dense { data, n_cols } => w
                .iter_mut()
                .zip(&data[r * n_cols..(r + 1) * n_cols])
                .for_each(|(wi, &x)| *wi += a * f64::from(x)),
            F32Rows::Csr {
                indptr,
                indices,
                values,
                ..
            } => {
                let (lo, hi) = (indptr[r] as usize, indptr[r + 1] as usize);
                for (&j, &v) in indices[lo..hi].iter().zip(&values[lo..hi]) {
                    w[j as usize] += a * f64::from(v);
                }
            }
        }
    }
}
