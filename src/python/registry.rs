//! The binding's learners: from the one list of native learners (`learner_table!` in
//! src/learner/mod.rs, one line per learner: kind, variant, type, parameter type), [`learners!`]
//! generates the [`AnyLearner`] enum, every dispatch over it, the tuple of kinds and the builder.
//! Adding a learner adds nothing here.
//!
//! The enum is serialised (pickles, model files): its variants keep the table's order.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use serde::{Deserialize, Serialize};

use super::convert::guarded;
use crate::learner::{learner_table, Build, OnlineLearner, Setting};
use crate::state::CheckState;

/// A parameter the derived extraction rejected: its `ValueError` (a bad option name, with the
/// engine's message) rather than the `TypeError` wrapping it; a wrong type stays a `TypeError`.
fn value_error_first(py: Python<'_>, err: PyErr) -> PyErr {
    match err.cause(py) {
        Some(cause) if cause.is_instance_of::<PyValueError>(py) => cause,
        _ => err,
    }
}

/// The binding's side of [`learner_table!`]: the enum over every learner and its dispatch.
macro_rules! learners {
    ($($vis:vis mod $module:ident { $($kind:literal => $variant:ident($ty:ident, $params:ident);)* })*) => {
        learners!(@flat $($($kind => $variant(crate::learner::$ty, crate::learner::$params);)*)*);
    };
    (@flat $($kind:literal => $variant:ident($ty:path, $params:path);)*) => {
        #[derive(Debug, Clone, Serialize, Deserialize)]
        #[allow(clippy::upper_case_acronyms)] // the papers' algorithm names
        pub(super) enum AnyLearner {
            $($variant($ty),)*
        }

        /// The kinds `NativeLearner.build` accepts, in registry order.
        pub(super) const KINDS: &[&str] = &[$($kind),*];

        impl AnyLearner {
            /// The learner `kind` with the hyper-parameters in the mapping `params` (one item per
            /// field of its parameter type), built for `setting`.
            pub(super) fn build(kind: &str, params: &Bound<'_, PyAny>, setting: &Setting) -> PyResult<Self> {
                match kind {
                    $($kind => {
                        let params: $params = params.extract().map_err(|e| value_error_first(params.py(), e))?;
                        Ok(AnyLearner::$variant(guarded(|| <$ty as Build>::build(&params, setting))?))
                    })*
                    _ => Err(PyValueError::new_err(format!(
                        "unknown learner kind {kind:?}; the native learners are {KINDS:?}"
                    ))),
                }
            }

            /// The name of the native algorithm (the kind it was built as).
            pub(super) fn kind(&self) -> &'static str {
                match self {
                    $(AnyLearner::$variant(_) => $kind,)*
                }
            }

            /// Same algorithm and hyper-parameters (not the same fitted state).
            pub(super) fn same_settings(&self, other: &AnyLearner) -> bool {
                match (self, other) {
                    $((AnyLearner::$variant(a), AnyLearner::$variant(b)) => a.same_settings(b),)*
                    _ => false,
                }
            }

            pub(super) fn get(&self) -> &(dyn OnlineLearner + Send + Sync) {
                match self {
                    $(AnyLearner::$variant(m) => m,)*
                }
            }

            pub(super) fn get_mut(&mut self) -> &mut (dyn OnlineLearner + Send + Sync) {
                match self {
                    $(AnyLearner::$variant(m) => m,)*
                }
            }
        }

        impl CheckState for AnyLearner {
            fn check_state(&self) -> crate::Result<()> {
                match self {
                    $(AnyLearner::$variant(m) => m.check_state(),)*
                }
            }
        }
    };
}

// The list itself, in its serialised order, is in src/learner/mod.rs.
learner_table!(learners);
