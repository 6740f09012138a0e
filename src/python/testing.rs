//! Test-only hooks (`omtl._native._testing`): entry points into engine internals that the tests
//! check against the reference, and a deliberate panic. Not part of the package's interface.

use numpy::{IntoPyArray, PyArray1, PyReadonlyArray1, PyUntypedArrayMethods};
use pyo3::prelude::*;

use super::convert::{guarded, slice1, RowsArg};
use super::learners::NativeLearner;
use crate::learner::{self, GlobalNorm, Regularizer};

/// The `_testing` submodule.
pub fn module(py: Python<'_>) -> PyResult<Bound<'_, PyModule>> {
    let m = PyModule::new(py, "_testing")?;
    m.add_function(wrap_pyfunction!(batch_mtl_solve, &m)?)?;
    m.add_function(wrap_pyfunction!(omtl_tau, &m)?)?;
    m.add_function(wrap_pyfunction!(svt, &m)?)?;
    m.add_function(wrap_pyfunction!(panic, &m)?)?;
    m.add_function(wrap_pyfunction!(complete_graph_floor, &m)?)?;
    m.add_function(wrap_pyfunction!(event_floor_call, &m)?)?;
    m.add_function(wrap_pyfunction!(event_floor_row, &m)?)?;
    m.add_function(wrap_pyfunction!(event_floor_locked, &m)?)?;
    Ok(m)
}

/// Panics inside a model's call (a panic must reach Python as RuntimeError).
#[pyfunction]
fn panic(py: Python<'_>) -> PyResult<()> {
    NativeLearner::panic_in_call(py)
}

/// `(W, c, objective, n_iter, L)` of [`batch_mtl_solve`].
type SolveOutput<'py> = (Bound<'py, PyArray1<f64>>, Bound<'py, PyArray1<f64>>, f64, usize, f64);

/// The MTFL/TRML solver on one batch (for tests, INV-M1/M2): returns `(W (k x d), c, objective,
/// n_iter, final line-search L)` after an accelerated proximal gradient warm-started from `(w0, c0)`.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
#[pyo3(signature = (x, tasks, y, n_tasks, regularizer, rho, w0, c0, tol, max_iter))]
fn batch_mtl_solve<'py>(
    py: Python<'py>,
    x: RowsArg<'py>,
    tasks: PyReadonlyArray1<'py, i64>,
    y: PyReadonlyArray1<'py, f64>,
    n_tasks: usize,
    regularizer: &str,
    rho: f64,
    w0: PyReadonlyArray1<'py, f64>,
    c0: PyReadonlyArray1<'py, f64>,
    tol: f64,
    max_iter: usize,
) -> PyResult<SolveOutput<'py>> {
    let rows = x.view()?;
    let (tasks, y) = (slice1(&tasks, "tasks")?, slice1(&y, "y")?);
    let (w0, c0) = (slice1(&w0, "w0")?, slice1(&c0, "c0")?);
    let (w, c, report) = guarded(|| {
        crate::data::validate_batch(&rows, tasks, Some(y), n_tasks, rows.n_cols())?;
        let reg = Regularizer::parse(regularizer)?;
        if w0.len() != n_tasks * rows.n_cols() || c0.len() != n_tasks {
            return Err(crate::error::invalid(
                "w0",
                "w0 must hold n_tasks * n_features values and c0 n_tasks",
            ));
        }
        let t32: Vec<u32> = tasks.iter().map(|&t| t as u32).collect();
        let (mut w, mut c) = (w0.to_vec(), c0.to_vec());
        let opts = learner::SolverOptions { tol, max_iter };
        let report = learner::batch_mtl::solve(&rows, &t32, y, n_tasks, reg, rho, &mut w, &mut c, opts)?;
        Ok((w, c, report))
    })?;
    Ok((
        w.into_pyarray(py),
        c.into_pyarray(py),
        report.objective,
        report.n_iter,
        report.lipschitz,
    ))
}

/// OMTL's step sizes of one round (for tests, INV-O3): `tau` for losses and squared norms.
#[pyfunction]
#[pyo3(signature = (losses, sq_norms, c, global_norm, explicit=false))]
fn omtl_tau(losses: Vec<f64>, sq_norms: Vec<f64>, c: f64, global_norm: &str, explicit: bool) -> PyResult<Vec<f64>> {
    guarded(|| {
        let norm = GlobalNorm::parse(global_norm)?;
        if losses.len() != sq_norms.len() {
            return Err(crate::error::invalid(
                "sq_norms",
                "losses and sq_norms must have the same length",
            ));
        }
        if losses.iter().chain(&sq_norms).any(|v| !v.is_finite() || *v < 0.0) || !(c > 0.0 && c.is_finite()) {
            return Err(crate::error::invalid(
                "losses",
                "losses, sq_norms must be finite and >= 0, C finite and > 0",
            ));
        }
        Ok(learner::omtl_tau(&losses, &sq_norms, c, norm, explicit))
    })
}

/// Test hook for the singular value thresholding routes of ALGORITHMS.md §5.5: returns
/// `SVT_theta(M)` for a `d x k` matrix by `route` ("gram" = (b), "qr" = (a) as ROMCO runs it,
/// "explicit" = the literal (a) with Q formed), or None when route (b) declines (θ < 1e-6 σ_max).
#[pyfunction]
fn svt<'py>(
    py: Python<'py>,
    m: numpy::PyReadonlyArray2<'py, f64>,
    theta: f64,
    route: &str,
) -> PyResult<Option<Bound<'py, numpy::PyArray2<f64>>>> {
    use crate::linalg::svt;
    use numpy::PyArrayMethods;
    let (d, k) = (m.shape()[0], m.shape()[1]);
    let a = m.as_array();
    let mut col = vec![0.0; d * k];
    for c in 0..k {
        for r in 0..d {
            col[c * d + r] = a[(r, c)];
        }
    }
    let out = guarded(|| {
        Ok(match route {
            "gram" => svt::gram_route(&svt::gram(&col, d, k), k, theta).map(|s| {
                svt::right_multiply_in_place(&mut col, d, k, &s.pi);
                col
            }),
            "qr" => svt::qr_route(&col, d, k, theta).map(|s| {
                svt::right_multiply_in_place(&mut col, d, k, &s.pi);
                col
            }),
            "explicit" => svt::svt_explicit(&col, d, k, theta).map(|(u, _)| u),
            other => return Err(crate::error::invalid("route", format!("unknown route {other:?}"))),
        })
    })?;
    match out {
        None => Ok(None),
        Some(u) => {
            let mut row = vec![0.0; d * k];
            for c in 0..k {
                for r in 0..d {
                    row[r * k + c] = u[c * d + r];
                }
            }
            Ok(Some(row.into_pyarray(py).reshape([d, k])?))
        }
    }
}

/// [`crate::floors::complete_graph_pass`]: `(seconds, checksum)` of the memory floor of one pass
/// on the complete graph's feature map (for `benches/compare_vw.py`).
#[pyfunction]
#[pyo3(signature = (x, tasks, n_tasks, stride=3))]
fn complete_graph_floor(
    py: Python<'_>,
    x: RowsArg<'_>,
    tasks: PyReadonlyArray1<'_, i64>,
    n_tasks: usize,
    stride: usize,
) -> PyResult<(f64, f64)> {
    let rows = x.view()?;
    let tasks = slice1(&tasks, "tasks")?;
    py.detach(|| guarded(|| crate::floors::complete_graph_pass(&rows, tasks, n_tasks, stride)))
}

/// The floor of a per-event call (for `benches/event_floors.py`): a function taking `learn_event`'s
/// arguments and doing nothing with them.
#[pyfunction]
#[pyo3(signature = (model, x, y, task, skip=None))]
fn event_floor_call(
    model: &Bound<'_, PyAny>,
    x: &Bound<'_, PyAny>,
    y: &Bound<'_, PyAny>,
    task: &Bound<'_, PyAny>,
    skip: Option<Bound<'_, PyAny>>,
) -> f64 {
    let _ = (model, x, y, task, skip);
    0.0
}

/// The floor of a per-event call that reads a NumPy row: the sum of a 1-D float64 array.
#[pyfunction]
fn event_floor_row(x: &Bound<'_, PyAny>) -> PyResult<f64> {
    use numpy::PyArrayMethods;
    let a = x.cast::<PyArray1<f64>>()?;
    // SAFETY: the GIL is held and no Python code runs while the values are read.
    let sum = match unsafe { a.as_slice() } {
        Ok(s) => s.iter().sum(),
        Err(_) => a.to_vec()?.iter().sum(),
    };
    Ok(sum)
}

/// The floor of a call that takes the model's lock as `learn_event` does (its `__dict__`, the
/// lock's `acquire` and `release`) and does nothing else.
#[pyfunction]
#[pyo3(signature = (model, x, y, task, skip=None))]
fn event_floor_locked(
    model: &Bound<'_, PyAny>,
    x: &Bound<'_, PyAny>,
    y: &Bound<'_, PyAny>,
    task: &Bound<'_, PyAny>,
    skip: Option<Bound<'_, PyAny>>,
) -> PyResult<f64> {
    let _ = (x, y, task, skip);
    let (_dict, _lock) = super::events::locked_dict(model)?;
    Ok(0.0)
}
