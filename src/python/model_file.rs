//! The model file for Python (`omtl.persistence`): the crate's [`crate::model_file`] reads,
//! checks and writes the bytes; this layer converts and dispatches only.

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use super::pending::{pending_store, pending_tuple, PendingTuple};

use super::convert::guarded;
use super::learners::{wrap, NativeLearner};
use crate::model::Model;
use crate::model_file::{self, Fitted, FrameLength, Limits};

fn limits(max_header: u64, max_dense_graph: u64) -> Limits {
    Limits {
        max_header,
        max_dense_graph,
    }
}

/// `(header JSON text, NativeLearner or None)` from a model file's bytes, everything checked
/// (framing, checksum, header, native state and their agreement); ValueError otherwise.
#[pyfunction]
#[pyo3(signature = (data, *, max_header, max_dense_graph))]
fn read_model_file(
    py: Python<'_>,
    data: &[u8],
    max_header: u64,
    max_dense_graph: u64,
) -> PyResult<(String, Option<NativeLearner>)> {
    let limits = limits(max_header, max_dense_graph);
    let (header, learner) = py.detach(|| {
        guarded(|| {
            let (head, _) = model_file::split(data, &limits)?;
            let model = Model::decode(data, &limits)?;
            Ok((String::from_utf8_lossy(head).into_owned(), model.learner().cloned()))
        })
    })?;
    Ok((header, learner.map(wrap)))
}

/// The header JSON text of a model file's bytes, framing, checksum and header checked (the
/// native state is not decoded).
#[pyfunction]
#[pyo3(signature = (data, *, max_header, max_dense_graph))]
fn read_model_header(data: &[u8], max_header: u64, max_dense_graph: u64) -> PyResult<String> {
    let limits = limits(max_header, max_dense_graph);
    guarded(|| {
        model_file::read_header(data, &limits)?;
        let (head, _) = model_file::split(data, &limits)?;
        Ok(String::from_utf8_lossy(head).into_owned())
    })
}

/// `(length, exact)`: how long the model file whose first bytes are `prefix` is, as far as they
/// tell (`exact` False: at least `length`, read up to there to learn more), its magic number,
/// version and lengths checked as soon as `prefix` holds them, and against `size` (the file's
/// length, when known); ValueError otherwise.
#[pyfunction]
#[pyo3(signature = (prefix, size, *, max_header, max_dense_graph))]
fn model_file_length(prefix: &[u8], size: Option<u64>, max_header: u64, max_dense_graph: u64) -> PyResult<(u64, bool)> {
    let limits = limits(max_header, max_dense_graph);
    guarded(|| {
        Ok(match model_file::frame_length(prefix, size, &limits)? {
            FrameLength::AtLeast(n) => (n, false),
            FrameLength::Exactly(n) => (n, true),
        })
    })
}

/// A model file's bytes from its header JSON text, native learner (None: unfitted) and pending
/// events (`omtl._delayed`'s store as `(events, (max_events, max_bytes, max_age), evicted,
/// expired)`), checked as a reader checks them; ValueError for a file the reader would refuse.
#[pyfunction]
#[pyo3(signature = (header, learner, *, max_header, max_dense_graph, pending=None))]
fn write_model_file<'py>(
    py: Python<'py>,
    header: &str,
    learner: Option<&NativeLearner>,
    max_header: u64,
    max_dense_graph: u64,
    pending: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyBytes>> {
    let limits = limits(max_header, max_dense_graph);
    let store = match pending {
        Some(p) => pending_store(p)?,
        None => Default::default(),
    };
    let data = match learner {
        Some(l) => l.with_model(py, |m| {
            guarded(|| model_file::encode_with_pending(header, Some(m), &store, &limits))
        })??,
        None => guarded(|| model_file::encode_with_pending(header, None, &store, &limits))?,
    };
    Ok(PyBytes::new(py, &data))
}

/// The pending events of a model file's bytes (checked as [`read_model_file`] checks the
/// file), in the form `write_model_file` takes; None for a file without them.
#[pyfunction]
#[pyo3(signature = (data, *, max_header, max_dense_graph))]
fn read_model_pending(
    py: Python<'_>,
    data: &[u8],
    max_header: u64,
    max_dense_graph: u64,
) -> PyResult<Option<PendingTuple>> {
    let limits = limits(max_header, max_dense_graph);
    let store = py.detach(|| guarded(|| Ok(Model::decode(data, &limits)?.pending_store().clone())))?;
    Ok((!store.is_empty() || store.info().evicted + store.info().expired > 0).then(|| pending_tuple(&store)))
}

/// Checks a fitted model's bookkeeping (the `fitted` JSON object of a header) against its native
/// learner, as reading a model file does; ValueError otherwise. `open_ended`: the estimator's
/// `n_tasks` is None.
#[pyfunction]
fn check_bookkeeping(py: Python<'_>, learner: &NativeLearner, fitted: &str, open_ended: bool) -> PyResult<()> {
    let fitted = guarded(|| Fitted::parse(fitted.as_bytes()))?;
    learner.with_model(py, |m| guarded(|| fitted.check_against(m, open_ended)))?
}

/// Adds the model-file functions, `MODEL_FILE_CLASSES` (class name -> learner kind) and
/// `CLASS_ALIASES` (alias -> class name): the estimator class table, which Python's lists derive from.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(read_model_file, m)?)?;
    m.add_function(wrap_pyfunction!(read_model_header, m)?)?;
    m.add_function(wrap_pyfunction!(model_file_length, m)?)?;
    m.add_function(wrap_pyfunction!(write_model_file, m)?)?;
    m.add_function(wrap_pyfunction!(read_model_pending, m)?)?;
    m.add_function(wrap_pyfunction!(check_bookkeeping, m)?)?;
    let classes = PyDict::new(m.py());
    for class in crate::model::estimator::classes() {
        classes.set_item(class.name, class.kind)?;
    }
    m.add("MODEL_FILE_CLASSES", classes)?;
    let aliases = PyDict::new(m.py());
    for (alias, class) in crate::model::estimator::ALIASES {
        aliases.set_item(alias, class)?;
    }
    m.add("CLASS_ALIASES", aliases)?;
    m.add("MODEL_FILE_MAGIC", PyBytes::new(m.py(), model_file::MAGIC))?;
    m.add("MODEL_FILE_VERSION", model_file::FORMAT_VERSION)?;
    Ok(())
}
