//! Coupled models' shared state for Python (`omtl.shared_state`): the crate's
//! [`crate::learner::shared`] reports, combines and applies; this layer converts and dispatches.

use numpy::{IntoPyArray, PyArray1, PyReadonlyArray1};
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::{PyBytes, PyString};

use super::convert::guarded;
use super::learners::NativeLearner;
use crate::learner::shared::{combine, SharedChanges, SharedUpdate, WeightMix, SHARED_LAYOUT_VERSION};
use crate::model::{shard_of, Model, TaskRef};
use crate::model_file::{parse_label_form, Limits};

/// Starts recording the learner's changes to its shared state (ValueError for a learner that
/// keeps none in step).
#[pyfunction]
fn shared_track(py: Python<'_>, learner: &NativeLearner) -> PyResult<()> {
    learner.with_model(py, |m| guarded(|| m.track_shared()))?
}

/// The learner's changes to its shared state since its last sync, as bytes.
#[pyfunction]
fn shared_changes<'py>(py: Python<'py>, learner: &NativeLearner) -> PyResult<Bound<'py, PyBytes>> {
    let data = learner.with_model(py, |m| guarded(|| m.shared_changes()?.to_bytes()))??;
    Ok(PyBytes::new(py, &data))
}

/// The replicas' reports (bytes, one per replica, in a fixed order) combined into one update,
/// weights' changes added (`mix="sum"`) or averaged (`"mean"`).
#[pyfunction]
#[pyo3(signature = (reports, mix))]
fn shared_combine<'py>(py: Python<'py>, reports: Vec<PyBackedBytes>, mix: &str) -> PyResult<Bound<'py, PyBytes>> {
    let weights = guarded(|| WeightMix::parse(mix))?;
    let data = py.detach(|| {
        guarded(|| {
            let parts = reports
                .iter()
                .map(|r| SharedChanges::from_bytes(r))
                .collect::<crate::Result<Vec<_>>>()?;
            combine(&parts, weights)?.to_bytes()
        })
    })?;
    Ok(PyBytes::new(py, &data))
}

/// Brings the learner's shared state in step with an update (bytes); on error it is unchanged.
#[pyfunction]
fn shared_apply(py: Python<'_>, learner: &NativeLearner, update: &[u8]) -> PyResult<()> {
    learner.with_model(py, |m| {
        guarded(|| {
            let update = SharedUpdate::from_bytes(update)?;
            m.apply_shared(&update)
        })
    })?
}

fn limits(max_header: u64, max_dense_graph: u64) -> Limits {
    Limits {
        max_header,
        max_dense_graph,
    }
}

/// The model file of a replica that has learned nothing ([`Model::empty_replica`]) from the
/// model file of its estimator (fitted or not: its class and hyper-parameters).
#[pyfunction]
#[pyo3(signature = (data, n_features, label_mode, *, max_header, max_dense_graph))]
fn empty_replica<'py>(
    py: Python<'py>,
    data: &[u8],
    n_features: usize,
    label_mode: bool,
    max_header: u64,
    max_dense_graph: u64,
) -> PyResult<Bound<'py, PyBytes>> {
    let limits = limits(max_header, max_dense_graph);
    let out = py.detach(|| {
        guarded(|| {
            let model = Model::decode(data, &limits)?;
            Model::empty_replica(model.estimator(), n_features, label_mode)?.encode(&limits)
        })
    })?;
    Ok(PyBytes::new(py, &out))
}

/// One model file from the model files of replicas in step ([`Model::merge_replicas`]), its
/// predictions written in `label_form` (the header's JSON of a label form).
#[pyfunction]
#[pyo3(signature = (parts, label_form, *, max_header, max_dense_graph))]
fn merge_replicas<'py>(
    py: Python<'py>,
    parts: Vec<PyBackedBytes>,
    label_form: &str,
    max_header: u64,
    max_dense_graph: u64,
) -> PyResult<Bound<'py, PyBytes>> {
    let limits = limits(max_header, max_dense_graph);
    let out = py.detach(|| {
        guarded(|| {
            let form = parse_label_form(label_form)?;
            let models = parts
                .iter()
                .map(|p| Model::decode(p, &limits))
                .collect::<crate::Result<Vec<_>>>()?;
            Model::merge_replicas(&models, Some(form))?.encode(&limits)
        })
    })?;
    Ok(PyBytes::new(py, &out))
}

/// The shard of every task label among `n_shards` ([`shard_of`]): an int64 array, or a sequence
/// of str and int labels.
#[pyfunction]
fn shards_of<'py>(py: Python<'py>, labels: &Bound<'py, PyAny>, n_shards: usize) -> PyResult<Bound<'py, PyArray1<i64>>> {
    if n_shards == 0 {
        return Err(pyo3::exceptions::PyValueError::new_err("n_shards must be >= 1"));
    }
    if let Ok(ints) = labels.extract::<PyReadonlyArray1<'py, i64>>() {
        let ids = ints.as_slice()?;
        let out: Vec<i64> = py.detach(|| {
            ids.iter()
                .map(|&i| shard_of(TaskRef::Int(i), n_shards) as i64)
                .collect()
        });
        return Ok(out.into_pyarray(py));
    }
    let mut out = Vec::new();
    for item in labels.try_iter()? {
        let item = item?;
        let shard = if let Ok(s) = item.cast::<PyString>() {
            shard_of(TaskRef::Str(&s.to_cow()?), n_shards)
        } else if let Ok(i) = item.extract::<i64>() {
            shard_of(TaskRef::Int(i), n_shards)
        } else {
            return Err(pyo3::exceptions::PyTypeError::new_err(format!(
                "a task label is a str or an int, got {}",
                item.get_type().name()?
            )));
        };
        out.push(shard as i64);
    }
    Ok(out.into_pyarray(py))
}

/// Adds the shared-state functions and `SHARED_LAYOUT_VERSION`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(shared_track, m)?)?;
    m.add_function(wrap_pyfunction!(shared_changes, m)?)?;
    m.add_function(wrap_pyfunction!(shared_combine, m)?)?;
    m.add_function(wrap_pyfunction!(shared_apply, m)?)?;
    m.add_function(wrap_pyfunction!(empty_replica, m)?)?;
    m.add_function(wrap_pyfunction!(merge_replicas, m)?)?;
    m.add_function(wrap_pyfunction!(shards_of, m)?)?;
    m.add("SHARED_LAYOUT_VERSION", SHARED_LAYOUT_VERSION)?;
    Ok(())
}
