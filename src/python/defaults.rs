//! The engine's default hyper-parameters seen from Python, for the test that holds them equal to
//! the Python classes' defaults (tests/test_rust_defaults.py): `_native._testing.
//! differs_from_default(kind, params)` reads `params` as `NativeLearner.build` does and compares
//! it with the kind's `Default`.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::learner::learner_table;

/// The comparison for every kind of [`learner_table!`].
macro_rules! default_comparison {
    ($($kind:literal => $variant:ident($ty:ident, $params:ident);)*) => {
        /// `None` when `params` (a mapping, as `NativeLearner.build` takes) reads as the default
        /// parameters of learner `kind`; otherwise both, as the engine prints them.
        #[pyfunction]
        fn differs_from_default(kind: &str, params: &Bound<'_, PyAny>) -> PyResult<Option<String>> {
            match kind {
                $($kind => {
                    let given: crate::learner::$params = params.extract()?;
                    let default = <crate::learner::$params as Default>::default();
                    Ok((given != default).then(|| format!("given {given:?}, default {default:?}")))
                })*
                _ => Err(PyValueError::new_err(format!("unknown learner kind {kind:?}"))),
            }
        }
    };
}

learner_table!(default_comparison);

/// Adds [`differs_from_default`] to the test-only submodule `_testing` of `native`.
pub fn register(native: &Bound<'_, PyModule>) -> PyResult<()> {
    let testing = native.getattr("_testing")?;
    testing.setattr("differs_from_default", wrap_pyfunction!(differs_from_default, native)?)
}
