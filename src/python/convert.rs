//! Conversions between NumPy arrays and the crate's borrowed views, and error mapping.

use numpy::{PyReadonlyArray1, PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;

use crate::data::Rows;
use crate::error::Error;

pyo3::create_exception!(
    _native,
    StateError,
    PyValueError,
    "A model state (a pickle or a model file) that cannot be restored: corrupted, hostile, or of \
     another layout version. A ValueError, as every restore failure was before it had its own kind."
);

/// The Python exception of an engine error: a state that cannot be restored is a `StateError`
/// (a `ValueError`); every other engine error (a bad parameter, input or numerical failure, a
/// size beyond memory) is a `ValueError`.
pub fn to_pyerr(e: Error) -> PyErr {
    match e {
        Error::State(_) => StateError::new_err(e.to_string()),
        _ => PyValueError::new_err(e.to_string()),
    }
}

/// Runs `f`, turning a Rust panic into a Python RuntimeError instead of an abort.
pub fn guarded<T>(f: impl FnOnce() -> crate::Result<T>) -> PyResult<T> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(result) => result.map_err(to_pyerr),
        Err(_) => Err(PyRuntimeError::new_err(
            "internal error in the omtl native core (a bug: please report it)",
        )),
    }
}

/// A batch from Python: a C-contiguous float64 matrix, or a canonical CSR as
/// `(indptr int64, indices uint32, data float64, n_cols)`.
#[derive(FromPyObject)]
pub enum RowsArg<'py> {
    Dense(PyReadonlyArray2<'py, f64>),
    Csr(
        (
            PyReadonlyArray1<'py, i64>,
            PyReadonlyArray1<'py, u32>,
            PyReadonlyArray1<'py, f64>,
            usize,
        ),
    ),
}

impl RowsArg<'_> {
    pub fn view(&self) -> PyResult<Rows<'_>> {
        match self {
            RowsArg::Dense(x) => {
                let (n_rows, n_cols) = (x.shape()[0], x.shape()[1]);
                let data = x
                    .as_slice()
                    .map_err(|_| PyValueError::new_err("X must be C-contiguous"))?;
                Ok(Rows::Dense { data, n_rows, n_cols })
            }
            RowsArg::Csr((indptr, indices, data, n_cols)) => Ok(Rows::Csr {
                indptr: slice1(indptr, "indptr")?,
                indices: slice1(indices, "indices")?,
                data: slice1(data, "data")?,
                n_cols: *n_cols,
            }),
        }
    }
}

pub fn slice1<'a, T: numpy::Element>(a: &'a PyReadonlyArray1<'_, T>, what: &str) -> PyResult<&'a [T]> {
    a.as_slice()
        .map_err(|_| PyValueError::new_err(format!("{what} must be contiguous")))
}

/// The permutation `omtl._rng.SplitMix64(seed).permutation(n)` computes, natively.
#[pyfunction]
pub fn splitmix64_permutation(seed: u64, n: usize) -> PyResult<Vec<usize>> {
    guarded(|| Ok(crate::rng::SplitMix64::new(seed).permutation(n)))
}
