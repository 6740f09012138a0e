//! Small dense linear algebra on top of nalgebra (pure Rust, so the wheel needs no system BLAS),
//! and the incremental inverse Gram matrix of the budget Projectrons (§4.3).

pub mod brand;
mod dense;
pub mod eigen_update;
mod inverse_gram;
pub(crate) mod jacobi;
mod spd_inverse;
// The SIMD kernels live below `data` (src/simd/); the old path stays for the linalg code.
pub(crate) use crate::simd;
pub mod svt;

pub(crate) use dense::symmetrize as dense_symmetrize;
pub use dense::{cholesky_inverse, column_to_row_major, sym_eigen, sym_sqrt, SymMatrix};
pub use inverse_gram::InverseGram;
pub(crate) use spd_inverse::spd_inverse_in_place;
