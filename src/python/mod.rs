//! The Python binding (`omtl._native`): converts and validates at the boundary, holds no
//! algorithm. Enabled by the `python` cargo feature, which maturin turns on.

mod convert;
mod defaults;
mod events;
mod io;
mod kernels;
mod learners;
mod model_file;
mod params;
mod pending;
mod registry;
#[cfg(feature = "serve")]
mod serve;
mod shared;
mod small;
mod stream;
mod testing;

use pyo3::prelude::*;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<kernels::NativeKernel>()?;
    m.add_class::<kernels::NativeTaskKernel>()?;
    m.add_class::<learners::NativeLearner>()?;
    m.add_function(wrap_pyfunction!(convert::splitmix64_permutation, m)?)?;
    m.add_function(wrap_pyfunction!(kernels::scale_gamma, m)?)?;
    m.add_function(wrap_pyfunction!(events::learn_event, m)?)?;
    m.add_function(wrap_pyfunction!(events::decision_event, m)?)?;
    m.add_function(wrap_pyfunction!(events::predict_event, m)?)?;
    m.add_function(wrap_pyfunction!(events::event_row, m)?)?;
    m.add_function(wrap_pyfunction!(events::hash_dicts, m)?)?;
    m.add_function(wrap_pyfunction!(small::learn_small, m)?)?;
    m.add_function(wrap_pyfunction!(small::decision_small, m)?)?;
    io::register(m)?;
    stream::register(m)?;
    model_file::register(m)?;
    #[cfg(feature = "serve")]
    serve::register(m)?;
    shared::register(m)?;
    m.add_function(wrap_pyfunction!(simd_level, m)?)?;
    m.add_function(wrap_pyfunction!(detected_simd_level, m)?)?;
    m.add("STATE_VERSION", crate::model::STATE_VERSION)?;
    m.add("StateError", m.py().get_type::<convert::StateError>())?;
    m.add("LEARNER_KINDS", pyo3::types::PyTuple::new(m.py(), registry::KINDS)?)?;
    // An attribute, not in __all__: test-only, not part of the interface.
    m.setattr("_testing", testing::module(m.py())?)?;
    defaults::register(m)?;
    Ok(())
}

/// The SIMD build the native kernels run: the CPU's widest, capped by `OMTL_SIMD`
/// (`"portable"`, `"avx2"` or `"avx512"`).
#[pyfunction]
fn simd_level() -> &'static str {
    crate::linalg::simd::level().name()
}

/// The widest SIMD build this CPU runs, whatever `OMTL_SIMD` says.
#[pyfunction]
fn detected_simd_level() -> &'static str {
    crate::linalg::simd::detected_level().name()
}
