//! Small batches (`learn`, `partial_fit`, `decision_function` on up to 64 dense or CSR rows of a fitted
//! native model whose task ids and labels it knows) in one call of the binding: X, y and the
//! task ids are checked here, the counters updated in place, as the batch path would, so that a
//! 10-row call costs a few microseconds besides the learner's work. Anything else (a new label,
//! a pair of classes, a sparse matrix, an error to report) returns `None` and the Python batch
//! path takes the call, validating and raising as it does.

use numpy::{IntoPyArray, PyArray1, PyArray2, PyArrayMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyInt, PyList, PyString, PyTuple};

use super::events::{fitted, is_numpy_bool, locked_dict, required, Fitted};
use crate::data::Rows;

/// The largest batch [`learn_small`] and [`decision_small`] take: their rows run without
/// releasing the GIL or polling for signals, so a batch stays short.
const SMALL_BATCH: usize = 64;

/// A small batch's task indices, or `None` when one of them needs the batch path (a new label,
/// an id out of range, anything unusual: the batch path raises or grows).
fn small_tasks(
    task_set: &Bound<'_, PyAny>,
    tasks: &Bound<'_, PyAny>,
    n: usize,
    k: usize,
) -> PyResult<Option<Vec<i64>>> {
    let py = task_set.py();
    let labels = Some(task_set.getattr(intern!(py, "labels"))?).filter(|l| !l.is_none());
    if let Some(_labels) = labels {
        let index = task_set.getattr(intern!(py, "index"))?.cast_into::<PyDict>()?;
        let one = |t: &Bound<'_, PyAny>| -> PyResult<Option<i64>> {
            if t.is_instance_of::<PyBool>() || is_numpy_bool(t)? {
                return Ok(None);
            }
            match index.get_item(t) {
                Ok(Some(i)) => Ok(Some(i.extract()?)),
                _ => Ok(None),
            }
        };
        if !(tasks.is_instance_of::<PyList>()
            || tasks.is_instance_of::<PyTuple>()
            || tasks.cast::<PyUntypedArray>().is_ok())
        {
            return Ok(if tasks.is_none() {
                None
            } else {
                one(tasks)?.map(|i| vec![i; n])
            });
        }
        if tasks.len()? != n || tasks.cast::<PyUntypedArray>().is_ok_and(|a| a.ndim() != 1) {
            return Ok(None);
        }
        let mut out = Vec::with_capacity(n);
        for t in tasks.try_iter()? {
            match one(&t?)? {
                Some(i) => out.push(i),
                None => return Ok(None),
            }
        }
        return Ok(Some(out));
    }
    let in_range = |i: i64| i >= 0 && (i as u64) < k as u64;
    if tasks.is_none() {
        return Ok((k == 1).then(|| vec![0; n]));
    }
    if let Ok(a) = tasks.cast::<PyArray1<i64>>() {
        // SAFETY: the GIL is held; no Python code runs while the ids are copied.
        let ids = match unsafe { a.as_slice() } {
            Ok(s) => s.to_vec(),
            Err(_) => return Ok(None),
        };
        return Ok((ids.len() == n && ids.iter().all(|&i| in_range(i))).then_some(ids));
    }
    if tasks.is_exact_instance_of::<PyInt>() {
        return Ok(tasks.extract::<i64>().ok().filter(|&i| in_range(i)).map(|i| vec![i; n]));
    }
    Ok(None)
}

/// A small batch's labels as ±1 and their form, or `None` for the batch path (a pair of
/// classes, a non-standard dtype, a bad label: the batch path reads or refuses them).
fn small_labels(y: &Bound<'_, PyAny>, n: usize) -> PyResult<Option<(Vec<f64>, &'static str)>> {
    let values: Vec<f64> = if let Ok(a) = y.cast::<PyArray1<f64>>() {
        a.readonly().as_array().to_vec()
    } else if let Ok(a) = y.cast::<PyArray1<i64>>() {
        a.readonly().as_array().iter().map(|&v| v as f64).collect()
    } else if let Ok(a) = y.cast::<PyArray1<bool>>() {
        // strided arrays too (`y[::2]`), read through their strides
        let v: Vec<f64> = a
            .readonly()
            .as_array()
            .iter()
            .map(|&b| if b { 1.0 } else { -1.0 })
            .collect();
        return Ok((v.len() == n).then_some((v, "bool")));
    } else {
        return Ok(None);
    };
    if values.len() != n {
        return Ok(None);
    }
    if values.iter().all(|&v| v == 1.0 || v == -1.0) {
        Ok(Some((values, "pm1")))
    } else if values.iter().all(|&v| v == 1.0 || v == 0.0) {
        Ok(Some((
            values.into_iter().map(|v| if v == 1.0 { 1.0 } else { -1.0 }).collect(),
            "01",
        )))
    } else {
        Ok(None)
    }
}

/// A small batch: a dense matrix (a slice of the caller's array) or a canonical CSR (copied).
enum SmallRows<'a> {
    Dense(&'a [f64], usize),
    Csr(Vec<i64>, Vec<u32>, Vec<f64>),
}

impl SmallRows<'_> {
    fn len(&self) -> usize {
        match self {
            SmallRows::Dense(_, n) => *n,
            SmallRows::Csr(indptr, ..) => indptr.len() - 1,
        }
    }

    fn values(&self) -> &[f64] {
        match self {
            SmallRows::Dense(data, _) => data,
            SmallRows::Csr(.., data) => data,
        }
    }

    fn rows(&self, n_cols: usize) -> Rows<'_> {
        match self {
            SmallRows::Dense(data, n) => Rows::dense(data, *n, n_cols),
            SmallRows::Csr(indptr, indices, data) => Rows::Csr {
                indptr,
                indices,
                data,
                n_cols,
            },
        }
    }
}

fn int_vec(a: &Bound<'_, PyAny>) -> Option<Vec<i64>> {
    if let Ok(a) = a.cast::<PyArray1<i32>>() {
        Some(a.to_vec().ok()?.into_iter().map(i64::from).collect())
    } else {
        a.cast::<PyArray1<i64>>().ok()?.to_vec().ok()
    }
}

/// A small batch of `n_features` columns, or `None` for the batch path: a C-contiguous float64
/// matrix, or `(indptr, indices, data, n_cols)` of a CSR matrix whose rows have strictly
/// increasing indices (anything else the batch path converts or refuses).
fn small_rows<'a>(x: &'a Bound<'_, PyAny>, n_features: usize) -> Option<SmallRows<'a>> {
    if let Ok(a) = x.cast::<PyArray2<f64>>() {
        let shape = a.shape();
        if shape[0] == 0 || shape[0] > SMALL_BATCH || shape[1] != n_features {
            return None;
        }
        // SAFETY: the GIL is held for the whole call (the rows are not read with it released),
        // so no Python code writes into the array meanwhile.
        let data = unsafe { a.as_slice() }.ok()?;
        return Some(SmallRows::Dense(data, shape[0]));
    }
    let parts = x.cast::<PyTuple>().ok().filter(|t| t.len() == 4)?;
    if parts.get_item(3).ok()?.extract::<usize>().ok()? != n_features {
        return None;
    }
    let indptr = int_vec(&parts.get_item(0).ok()?)?;
    let indices: Vec<u32> = int_vec(&parts.get_item(1).ok()?)?
        .into_iter()
        .map(|i| u32::try_from(i).ok().filter(|&i| (i as usize) < n_features))
        .collect::<Option<_>>()?;
    let data = parts.get_item(2).ok()?.cast::<PyArray1<f64>>().ok()?.to_vec().ok()?;
    let n = indptr.len().checked_sub(1)?;
    if n == 0 || n > SMALL_BATCH || indptr[0] != 0 || indptr[n] as usize != indices.len() || data.len() != indices.len()
    {
        return None;
    }
    for r in 0..n {
        let (a, b) = (usize::try_from(indptr[r]).ok()?, usize::try_from(indptr[r + 1]).ok()?);
        if a > b || b > indices.len() || indices[a..b].windows(2).any(|w| w[0] >= w[1]) {
            return None;
        }
    }
    Some(SmallRows::Csr(indptr, indices, data))
}

fn has_feature_names(dict: &Bound<'_, PyDict>) -> PyResult<bool> {
    Ok(dict
        .get_item(intern!(dict.py(), "feature_names_in_"))?
        .is_some_and(|v| !v.is_none()))
}

/// What both small paths read first, in order: the fitted state, the small batch, and its task
/// ids. `None` (the batch path takes the call) when the model is not fitted, `x` is not a small
/// batch, the model has feature names, `declines` says so, or the task ids are not all known.
#[allow(clippy::type_complexity)]
fn small_batch<'py, 'x>(
    model: &Bound<'py, PyAny>,
    dict: &Bound<'py, PyDict>,
    x: &'x Bound<'py, PyAny>,
    tasks: &Bound<'py, PyAny>,
    declines: impl FnOnce() -> PyResult<bool>,
) -> PyResult<Option<(Fitted<'py>, SmallRows<'x>, Vec<i64>)>> {
    let Some(state) = fitted(model, dict)? else {
        return Ok(None);
    };
    let Some(batch) = small_rows(x, state.n_features_in) else {
        return Ok(None);
    };
    if has_feature_names(dict)? || declines()? {
        return Ok(None);
    }
    let Some(task_ids) = small_tasks(&state.tasks, tasks, batch.len(), state.n_engine_tasks)? else {
        return Ok(None);
    };
    Ok(Some((state, batch, task_ids)))
}

/// Refuses a small batch holding NaN or infinity (as the batch path's validation does).
fn check_finite(batch: &SmallRows) -> PyResult<()> {
    if batch.values().iter().any(|v| !v.is_finite()) {
        return Err(PyValueError::new_err("X contains NaN or infinity"));
    }
    Ok(())
}

/// `learn`/`partial_fit` of a small dense batch on a fitted native model whose task ids and
/// labels it knows (at most [`SMALL_BATCH`] rows): the pre-update scores and the label form, with
/// the bookkeeping done, as the batch path would. `None`: the batch path takes the call (which
/// then validates and raises, grows or converts as it does).
#[pyfunction]
#[allow(clippy::type_complexity)]
pub fn learn_small<'py>(
    model: &Bound<'py, PyAny>,
    x: &Bound<'py, PyAny>,
    y: &Bound<'py, PyAny>,
    tasks: &Bound<'py, PyAny>,
) -> PyResult<Option<(Bound<'py, PyArray1<f64>>, Bound<'py, PyAny>)>> {
    let py = model.py();
    let (dict, _lock) = locked_dict(model)?;
    // Labels of a tuple form (two classes of other values) take the batch path.
    let tuple_labels = || {
        Ok(dict
            .get_item(intern!(py, "_label_form"))?
            .is_some_and(|f| f.cast::<PyTuple>().is_ok()))
    };
    let Some((state, batch, task_ids)) = small_batch(model, &dict, x, tasks, tuple_labels)? else {
        return Ok(None);
    };
    let n = batch.len();
    let Some((y_pm1, form)) = small_labels(y, n)? else {
        return Ok(None);
    };
    check_finite(&batch)?;
    let rows = batch.rows(state.n_features_in);
    let scores = state.learner.get().small_learn(py, &rows, &task_ids, &y_pm1)?;
    let seen = state.tasks.getattr(intern!(py, "counts"))?;
    let counts = seen.cast::<PyArray1<i64>>()?;
    for &t in &task_ids {
        // SAFETY: the GIL is held; every id is below the number of tasks (checked above).
        unsafe { *counts.uget_mut([t as usize]) += 1 };
    }
    let mistakes = scores
        .iter()
        .zip(&y_pm1)
        .filter(|(&s, &y)| (if s >= 0.0 { 1.0 } else { -1.0 }) != y)
        .count();
    let n_seen = required(&dict, intern!(py, "n_seen_"))?;
    dict.set_item(intern!(py, "n_seen_"), n_seen.add(n)?)?;
    let n_mistakes = required(&dict, intern!(py, "n_mistakes_"))?;
    dict.set_item(intern!(py, "n_mistakes_"), n_mistakes.add(mistakes)?)?;
    let form = PyString::new(py, form).into_any();
    dict.set_item(intern!(py, "_label_form"), &form)?;
    Ok(Some((scores.into_pyarray(py), form)))
}

/// `decision_function` of a small dense batch on a fitted native model whose task ids it knows;
/// `None`: the batch path takes the call.
#[pyfunction]
pub fn decision_small<'py>(
    model: &Bound<'py, PyAny>,
    x: &Bound<'py, PyAny>,
    tasks: &Bound<'py, PyAny>,
) -> PyResult<Option<Bound<'py, PyArray1<f64>>>> {
    let py = model.py();
    let (dict, _lock) = locked_dict(model)?;
    let Some((state, batch, task_ids)) = small_batch(model, &dict, x, tasks, || Ok(false))? else {
        return Ok(None);
    };
    check_finite(&batch)?;
    let rows = batch.rows(state.n_features_in);
    Ok(Some(
        state
            .learner
            .get()
            .small_decision(py, &rows, &task_ids)?
            .into_pyarray(py),
    ))
}
