//! Hyper-parameters from Python: the learners' `XParams` derive `FromPyObject` (one dict item per
//! field); the option types they hold are read from their names with the engine's own `parse`, so
//! an unknown name gets the engine's message.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyMapping;

use super::convert::to_pyerr;
use crate::learner::{
    GlobalNorm, Loss, NoParams, PaVariant, Regularizer, RelationUpdate, RomcoTrigger, SvtRoute, Threshold, UpdateRule,
};

macro_rules! from_name {
    ($($t:ty),* $(,)?) => {$(
        impl<'a, 'py> FromPyObject<'a, 'py> for $t {
            type Error = PyErr;

            fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
                let name: String = obj.extract()?;
                <$t>::parse(&name).map_err(to_pyerr)
            }
        }
    )*};
}

from_name!(
    GlobalNorm,
    Loss,
    PaVariant,
    Regularizer,
    RelationUpdate,
    RomcoTrigger,
    SvtRoute,
    Threshold,
    UpdateRule
);

/// A learner without hyper-parameters takes an empty mapping.
impl<'a, 'py> FromPyObject<'a, 'py> for NoParams {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        let mapping = obj.cast::<PyMapping>()?;
        if mapping.len()? != 0 {
            return Err(PyValueError::new_err(format!(
                "this learner has no hyper-parameters, got {}",
                obj.repr()?
            )));
        }
        Ok(NoParams)
    }
}
