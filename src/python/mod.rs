//! The Python binding (`omtl._native`): converts and validates at the boundary, holds no
//! algorithm. Enabled by the `python` cargo feature, which maturin turns on.

mod convert;
mod kernels;
mod learners;

use pyo3::prelude::*;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<kernels::NativeKernel>()?;
    m.add_class::<kernels::NativeTaskKernel>()?;
    m.add_class::<learners::NativeLearner>()?;
    m.add_function(wrap_pyfunction!(convert::splitmix64_permutation, m)?)?;
    m.add_function(wrap_pyfunction!(learners::batch_mtl_solve, m)?)?;
    m.add_function(wrap_pyfunction!(learners::omtl_tau, m)?)?;
    m.add_function(wrap_pyfunction!(convert::_svt_for_tests, m)?)?;
    m.add("STATE_VERSION", learners::STATE_VERSION)?;
    Ok(())
}
