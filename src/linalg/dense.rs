//! Helpers for the small symmetric matrices of the crate (task kernels, Gram blocks).
//! Matrices are row-major `Vec<f64>` of size `n*n` at the API; nalgebra does the factorisations.

use nalgebra::DMatrix;

use crate::error::{Error, Result};

/// A square row-major matrix with its order (a task graph's interaction matrix or a task
/// kernel, as [`TaskKernel::from_interaction`](crate::kernel::TaskKernel::from_interaction) and
/// kin take it). Symmetry is checked by those who need it, not here.
#[derive(Debug, Clone, PartialEq)]
pub struct SymMatrix {
    /// The order (number of rows and of columns).
    pub n: usize,
    /// The entries, row-major, `n * n` of them.
    pub data: Vec<f64>,
}

impl SymMatrix {
    /// An `n x n` matrix over `data` (row-major); an error unless `data` has `n * n` entries.
    pub fn new(n: usize, data: Vec<f64>) -> Result<Self> {
        if data.len() != n * n {
            return Err(Error::InvalidTaskRelation(format!(
                "expected {n}x{n} = {} entries, got {}",
                n * n,
                data.len()
            )));
        }
        Ok(Self { n, data })
    }

    /// The `n x n` identity.
    pub fn identity(n: usize) -> Self {
        let mut data = vec![0.0; n * n];
        (0..n).for_each(|i| data[i * n + i] = 1.0);
        Self { n, data }
    }

    /// `M[i, j]`.
    #[inline]
    pub fn get(&self, i: usize, j: usize) -> f64 {
        self.data[i * self.n + j]
    }

    /// Largest absolute asymmetry `|M_ij - M_ji|`.
    pub fn asymmetry(&self) -> f64 {
        let n = self.n;
        let mut worst = 0.0f64;
        for i in 0..n {
            for j in 0..i {
                worst = worst.max((self.get(i, j) - self.get(j, i)).abs());
            }
        }
        worst
    }

    /// Largest absolute entry.
    pub fn max_abs(&self) -> f64 {
        self.data.iter().fold(0.0f64, |m, v| m.max(v.abs()))
    }

    fn to_nalgebra(&self) -> DMatrix<f64> {
        DMatrix::from_row_slice(self.n, self.n, &self.data)
    }

    fn from_nalgebra(m: &DMatrix<f64>) -> Self {
        let n = m.nrows();
        let mut data = vec![0.0; n * n];
        for i in 0..n {
            for j in 0..n {
                data[i * n + j] = m[(i, j)];
            }
        }
        Self { n, data }
    }
}

/// `M^{-1}` of a symmetric positive definite matrix by Cholesky; `None` if it is not SPD.
/// `out = Mᵀ` as row-major `d x k` for a column-major `d x k` matrix `M` (row `r` of `out` holds
/// the `k` entries of row `r` of `M`); `O(d k)`.
pub fn column_to_row_major(m: &[f64], d: usize, k: usize, out: &mut [f64]) {
    for (c, col) in m.chunks_exact(d).take(k).enumerate() {
        for (r, &v) in col.iter().enumerate() {
            out[r * k + c] = v;
        }
    }
}

pub fn cholesky_inverse(m: &SymMatrix) -> Option<SymMatrix> {
    let chol = m.to_nalgebra().cholesky()?;
    let inv = chol.inverse();
    let mut out = SymMatrix::from_nalgebra(&inv);
    symmetrize(&mut out);
    Some(out)
}

/// Iteration cap of the symmetric eigensolver (as `linalg::svt`).
pub const EIGEN_MAX_ITER: usize = 100_000;

/// Eigenvalues (ascending) and eigenvectors (columns, row-major `n x n`) of a symmetric matrix.
///
/// nalgebra's QR iteration is capped at `EIGEN_MAX_ITER` sweeps (its default has no cap and
/// need not end on NaN input); a matrix that does not converge gives NaN values and vectors,
/// which every caller treats as a failed (skipped or rejected) computation.
pub fn sym_eigen(m: &SymMatrix) -> (Vec<f64>, SymMatrix) {
    let n = m.n;
    let Some(eig) = nalgebra::SymmetricEigen::try_new(m.to_nalgebra(), f64::EPSILON, EIGEN_MAX_ITER) else {
        return (
            vec![f64::NAN; n],
            SymMatrix {
                n,
                data: vec![f64::NAN; n * n],
            },
        );
    };
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| eig.eigenvalues[a].total_cmp(&eig.eigenvalues[b]));
    let values = order.iter().map(|&a| eig.eigenvalues[a]).collect();
    let mut vectors = vec![0.0; n * n];
    for (col, &a) in order.iter().enumerate() {
        for row in 0..n {
            vectors[row * n + col] = eig.eigenvectors[(row, a)];
        }
    }
    (values, SymMatrix { n, data: vectors })
}

/// The symmetric PSD square root (negative eigenvalues from rounding are clamped to 0).
pub fn sym_sqrt(m: &SymMatrix) -> SymMatrix {
    let (values, vectors) = sym_eigen(m);
    let n = m.n;
    let mut out = vec![0.0; n * n];
    for (r, &lambda) in values.iter().enumerate() {
        let s = lambda.max(0.0).sqrt();
        for i in 0..n {
            let vi = vectors.get(i, r) * s;
            for j in 0..n {
                out[i * n + j] += vi * vectors.get(j, r);
            }
        }
    }
    let mut out = SymMatrix { n, data: out };
    symmetrize(&mut out);
    out
}

pub(crate) fn symmetrize(m: &mut SymMatrix) {
    let n = m.n;
    for i in 0..n {
        for j in 0..i {
            let v = 0.5 * (m.data[i * n + j] + m.data[j * n + i]);
            m.data[i * n + j] = v;
            m.data[j * n + i] = v;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inverse_and_sqrt() {
        let m = SymMatrix::new(2, vec![2.0, -1.0, -1.0, 2.0]).unwrap();
        let inv = cholesky_inverse(&m).unwrap();
        let expect = [2.0 / 3.0, 1.0 / 3.0, 1.0 / 3.0, 2.0 / 3.0];
        inv.data
            .iter()
            .zip(expect)
            .for_each(|(a, b)| assert!((a - b).abs() < 1e-14));
        let r = sym_sqrt(&m);
        let mut sq = [0.0; 4];
        for i in 0..2 {
            for j in 0..2 {
                sq[i * 2 + j] = (0..2).map(|l| r.get(i, l) * r.get(l, j)).sum();
            }
        }
        sq.iter().zip(&m.data).for_each(|(a, b)| assert!((a - b).abs() < 1e-13));
        assert!(cholesky_inverse(&SymMatrix::new(2, vec![1.0, 2.0, 2.0, 1.0]).unwrap()).is_none());
    }
}
