//! The file readers of [`crate::io`] for Python (`omtl.datasets.iter_file`): a reader thread
//! parses chunks while Python learns from the previous one; waiting for a chunk releases the
//! GIL and stays interruptible (Ctrl-C).

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Mutex;
use std::time::Duration;

use numpy::IntoPyArray;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use super::learners::signal_hook;
use crate::io::{self, Chunk, Format, Options, ReadError, Reader};

type Chunks = Receiver<Result<Chunk, ReadError>>;

/// Chunks of a data file, read on a thread of their own (at most two chunks ahead).
#[pyclass(module = "omtl._native")]
pub struct NativeFileReader {
    rx: Mutex<Option<Chunks>>,
}

fn value_error(e: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(e.to_string())
}

/// How to read a file, as `omtl._file_formats.native_reading` writes it (a dict): the options
/// the file readers of the binding take (`NativeFileReader`).
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
struct ReadOptions {
    format: String,
    chunk_rows: usize,
    chunk_bytes: usize,
    max_line_bytes: usize,
    skip_bad_lines: bool,
    vw_task_namespace: Option<String>,
    csv_task_column: String,
    csv_label_column: String,
    csv_feature_columns: Option<Vec<String>>,
    require_labels: bool,
}

impl ReadOptions {
    /// The engine's [`Options`] for a file of `n_features` columns (0-based or not).
    fn options(self, n_features: u64, zero_based: bool) -> PyResult<Options> {
        let mut opts = Options::new(Format::parse(&self.format).map_err(value_error)?, n_features);
        opts.chunk_rows = self.chunk_rows;
        opts.chunk_bytes = self.chunk_bytes;
        opts.max_line_bytes = self.max_line_bytes;
        opts.skip_bad_lines = self.skip_bad_lines;
        opts.zero_based = zero_based;
        opts.vw_task_namespace = self.vw_task_namespace;
        opts.csv_task_column = self.csv_task_column;
        opts.csv_label_column = self.csv_label_column;
        opts.csv_feature_columns = self.csv_feature_columns;
        opts.require_labels = self.require_labels;
        Ok(opts)
    }
}

#[pymethods]
impl NativeFileReader {
    #[new]
    fn new(py: Python<'_>, path: String, reading: ReadOptions, n_features: u64, zero_based: bool) -> PyResult<Self> {
        let opts = reading.options(n_features, zero_based)?;
        // Opening reads the first block (gzip detection): without the GIL, a pipe may be slow.
        let reader = py.detach(|| Reader::open(&path, opts)).map_err(value_error)?;
        let (rx, _thread) = io::spawn(reader, 1); // the thread ends when rx is dropped
        Ok(Self {
            rx: Mutex::new(Some(rx)),
        })
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// `(indptr, indices, data, labels, task_ids, new_tasks, lines, n_skipped, first_skipped,
    /// bytes_read, feature_columns)`; indices and indptr int32 when the width allows, else int64.
    fn __next__(&self, py: Python<'_>) -> PyResult<Option<Py<PyTuple>>> {
        let mut guard = self.rx.lock().map_err(|_| PyRuntimeError::new_err("reader poisoned"))?;
        let Some(mut rx) = guard.take() else { return Ok(None) };
        let item = loop {
            let (back, got) = py.detach(move || {
                let got = rx.recv_timeout(Duration::from_millis(100));
                (rx, got)
            });
            rx = back;
            match got {
                Ok(item) => break item,
                Err(RecvTimeoutError::Timeout) => {
                    if let Err(e) = py.check_signals() {
                        *guard = Some(rx);
                        return Err(e);
                    }
                }
                Err(RecvTimeoutError::Disconnected) => return Ok(None),
            }
        };
        let chunk = match item {
            Ok(c) => c,
            Err(e) => return Err(value_error(e)), // the receiver is dropped: the reader is done
        };
        *guard = Some(rx);
        drop(guard);
        chunk_tuple(py, chunk).map(Some)
    }
}

/// `values` converted element by element into a new NumPy array.
fn array_of<T, U: numpy::Element>(py: Python<'_>, values: Vec<T>, convert: impl Fn(T) -> U) -> Py<PyAny> {
    values
        .into_iter()
        .map(convert)
        .collect::<Vec<U>>()
        .into_pyarray(py)
        .into_any()
        .unbind()
}

fn chunk_tuple(py: Python<'_>, c: Chunk) -> PyResult<Py<PyTuple>> {
    let narrow =
        c.indices.iter().all(|&j| j <= i32::MAX as u32) && c.indptr.last().is_none_or(|&n| n <= i32::MAX as u64);
    let (indptr, indices) = if narrow {
        (
            array_of(py, c.indptr, |v| v as i32),
            array_of(py, c.indices, |v| v as i32),
        )
    } else {
        (array_of(py, c.indptr, |v| v as i64), array_of(py, c.indices, i64::from))
    };
    let task_ids: Vec<i64> = c.task_ids.into_iter().map(i64::from).collect();
    let items: Vec<Py<PyAny>> = vec![
        indptr,
        indices,
        c.data.into_pyarray(py).into_any().unbind(),
        c.labels.into_pyarray(py).into_any().unbind(),
        task_ids.into_pyarray(py).into_any().unbind(),
        c.new_tasks.into_pyobject(py)?.into_any().unbind(),
        c.lines.into_pyarray(py).into_any().unbind(),
        c.n_skipped.into_pyobject(py)?.into_any().unbind(),
        c.first_skipped.into_pyobject(py)?.into_any().unbind(),
        c.bytes_read.into_pyobject(py)?.into_any().unbind(),
        c.feature_columns.into_pyobject(py)?.into_any().unbind(),
    ];
    Ok(PyTuple::new(py, items)?.unbind())
}

/// `(largest index or None, whether an index 0 appears, the qid tasks in order)` of an svmlight
/// file (not a stream, which the pass would consume); Ctrl-C stops the pass.
#[pyfunction]
pub fn scan_svmlight(
    py: Python<'_>,
    path: String,
    max_line_bytes: usize,
) -> PyResult<(Option<u64>, bool, Vec<String>)> {
    let (scan, raised) = py.detach(|| {
        let raised = Rc::new(RefCell::new(None));
        let scan =
            crate::interrupt::with_hook(signal_hook(raised.clone()), || io::scan_svmlight(&path, max_line_bytes));
        let raised = raised.borrow_mut().take();
        (scan, raised)
    });
    if let Some(interrupt) = raised {
        return Err(interrupt);
    }
    let scan = scan.map_err(value_error)?;
    Ok((scan.max_index, scan.has_zero, scan.tasks))
}

/// The engine's limits the readers apply: (widest feature space, default line cap).
#[pyfunction]
pub fn reader_limits() -> (u64, usize) {
    (io::MAX_COLUMNS, io::DEFAULT_MAX_LINE_BYTES)
}

/// Adds the readers to `omtl._native`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<NativeFileReader>()?;
    m.add_function(wrap_pyfunction!(scan_svmlight, m)?)?;
    m.add_function(wrap_pyfunction!(reader_limits, m)?)
}
