//! The one list of native learners. Each line of [`learners!`] names a learner's kind (the string
//! `NativeLearner.build` takes), its [`AnyLearner`] variant, its type and its parameter type; the
//! macro generates the enum, every dispatch over it, the tuple of kinds and the builder. Adding a
//! learner to the binding is adding one line here.
//!
//! The enum is serialised (pickles, model files): its variants keep their order, and a new
//! learner goes at the end.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use serde::{Deserialize, Serialize};

use super::convert::guarded;
use crate::learner::{
    BatchMtl, BatchMtlParams, Build, CwCol, CwColParams, MTBPRJ2Params, MTFORGParams, MTLinear, MTLinearParams,
    MTPerceptron, MTRBPParams, NoParams, Omtl, OmtlParams, Omtrl, OmtrlParams, OnlineLearner, PassiveAggressive,
    PassiveAggressiveParams, ProjectronParams, Romco, RomcoParams, Setting, MTBPRJ, MTBPRJ2, MTFORG, MTRBP,
};
use crate::state::CheckState;

/// A parameter the derived extraction rejected: its `ValueError` (a bad option name, with the
/// engine's message) rather than the `TypeError` wrapping it; a wrong type stays a `TypeError`.
fn value_error_first(py: Python<'_>, err: PyErr) -> PyErr {
    match err.cause(py) {
        Some(cause) if cause.is_instance_of::<PyValueError>(py) => cause,
        _ => err,
    }
}

macro_rules! learners {
    ($($kind:literal => $variant:ident($ty:ty, $params:ty);)*) => {
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

// The order is the serialised layout (since STATE_VERSION 3): append only.
learners! {
    "mt_perceptron" => MTPerceptron(MTPerceptron, NoParams);
    "mtbprj" => Mtbprj(MTBPRJ, ProjectronParams);
    "mtbprj2" => Mtbprj2(MTBPRJ2, MTBPRJ2Params);
    "cw_col" => CwCol(CwCol, CwColParams);
    "omtrl" => Omtrl(Omtrl, OmtrlParams);
    "omtl" => Omtl(Omtl, OmtlParams);
    "batch_mtl" => BatchMtl(BatchMtl, BatchMtlParams);
    "romco" => Romco(Romco, RomcoParams);
    "passive_aggressive" => PassiveAggressive(PassiveAggressive, PassiveAggressiveParams);
    "mt_rbp" => MTRBP(MTRBP, MTRBPParams);
    "mt_forg" => MTFORG(MTFORG, MTFORGParams);
    "mt_linear" => MTLinear(MTLinear, MTLinearParams);
}
