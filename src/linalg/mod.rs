//! Small dense linear algebra on top of nalgebra (pure Rust, so the wheel needs no system BLAS).

mod dense;
pub mod simd;
pub mod svt;

pub use dense::{cholesky_inverse, sym_eigen, sym_sqrt, SymMatrix};
pub(crate) use dense::symmetrize as dense_symmetrize;
