//! The binding's learners: from the one list of native learners (`learner_table!` in
//! src/learner/mod.rs, one line per learner: kind, variant, type, parameter type), [`learners!`]
//! generates the builder of the crate's [`AnyLearner`] from Python parameters. Adding a learner
//! adds nothing here.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use super::convert::guarded;
use crate::learner::{learner_table, Build};
use crate::model::estimator::Family;
pub(super) use crate::model::{AnyLearner, KINDS};

/// A parameter the derived extraction rejected: its `ValueError` (a bad option name, with the
/// engine's message) rather than the `TypeError` wrapping it; a wrong type stays a `TypeError`.
fn value_error_first(py: Python<'_>, err: PyErr) -> PyErr {
    match err.cause(py) {
        Some(cause) if cause.is_instance_of::<PyValueError>(py) => cause,
        _ => err,
    }
}

/// The binding's side of [`learner_table!`]: building any learner from Python parameters.
macro_rules! learners {
    ($($kind:literal => $variant:ident($ty:ident, $params:ident);)*) => {
        /// The learner `kind` with the hyper-parameters in the mapping `params` (one item per
        /// field of its parameter type), built for `setting`.
        pub(super) fn build(kind: &str, params: &Bound<'_, PyAny>, family: &Family) -> PyResult<AnyLearner> {
            match kind {
                $($kind => {
                    let params: crate::learner::$params = params.extract().map_err(|e| value_error_first(params.py(), e))?;
                    let setting = guarded(|| family.setting::<<crate::learner::$ty as Build>::Setting<'_>>())?;
                    Ok(AnyLearner::$variant(guarded(|| <crate::learner::$ty as Build>::build(&params, &setting))?))
                })*
                _ => Err(PyValueError::new_err(format!(
                    "unknown learner kind {kind:?}; the native learners are {KINDS:?}"
                ))),
            }
        }
    };
}

// The list itself, in its serialised order, is in src/learner/mod.rs.
learner_table!(learners);
