//! `omtl learn` and `omtl predict` in one native call each ([`crate::io::driver`]): Python
//! parses the command line into a dict and shows the summary; the model file is read, the file
//! streamed and learned (or scored), the outputs written and the model saved here, with the GIL
//! released. The report goes to a Python callable and standard output to Python's
//! `sys.stdout.write` (so that both land where Python's streams point); a Parquet table is read
//! by a Python callable (pandas). Ctrl-C is polled as in every long call
//! ([`super::learners::signal_hook`]).

use std::cell::RefCell;
use std::collections::HashMap;
use std::io::Write;
use std::rc::Rc;

use numpy::PyReadonlyArray1;
use pyo3::exceptions::{PyKeyboardInterrupt, PyOSError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use super::convert::to_pyerr;
use super::learners::signal_hook;
use crate::io::driver::{self, StreamError, TableColumns};
use crate::io::Chunk;

/// The command line's values, as `omtl.cli_learn` passes them (a dict).
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
struct Request {
    data: String,
    format: Option<String>,
    n_features: Option<u64>,
    zero_based: bool,
    task_namespace: Option<String>,
    task_tag: bool,
    task_column: Option<String>,
    label_column: Option<String>,
    skip_bad_lines: bool,
    max_line_bytes: Option<usize>,
    chunk_rows: usize,
    quiet: bool,
    predictions: Option<String>,
    raw_predictions: Option<String>,
    probabilities: bool,
}

impl From<Request> for driver::Reading {
    fn from(r: Request) -> Self {
        driver::Reading {
            data: r.data,
            format: r.format,
            n_features: r.n_features,
            zero_based: r.zero_based,
            task_namespace: r.task_namespace,
            task_tag: r.task_tag,
            task_column: r.task_column,
            label_column: r.label_column,
            skip_bad_lines: r.skip_bad_lines,
            max_line_bytes: r.max_line_bytes,
            chunk_rows: r.chunk_rows,
            quiet: r.quiet,
            predictions: r.predictions,
            raw_predictions: r.raw_predictions,
            probabilities: r.probabilities,
        }
    }
}

/// `omtl learn`'s own values.
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
struct LearnRequest {
    learner: Option<String>,
    params: Vec<String>,
    passes: usize,
    initial_model: Option<String>,
    save: Option<String>,
}

/// A Python callable taking one str (a stream's `write`, the report), its exception kept.
struct PyText {
    call: Py<PyAny>,
    raised: Rc<RefCell<Option<PyErr>>>,
}

impl PyText {
    fn send(&self, text: &str) -> std::io::Result<()> {
        Python::attach(|py| self.call.call1(py, (text,)).map(drop)).map_err(|e| {
            let message = e.to_string();
            self.raised.borrow_mut().get_or_insert(e);
            std::io::Error::other(message)
        })
    }
}

impl Write for PyText {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.send(&String::from_utf8_lossy(buf))?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A Parquet table as Python's reader returns it: `(indptr, indices, data, labels, tasks,
/// lines, feature_columns, n_skipped, first_skipped)`, read into one chunk.
fn table_chunk(py: Python<'_>, read: &Py<PyAny>, columns: &TableColumns) -> PyResult<Chunk> {
    type Table<'py> = (
        PyReadonlyArray1<'py, i64>,
        PyReadonlyArray1<'py, i64>,
        PyReadonlyArray1<'py, f64>,
        PyReadonlyArray1<'py, f64>,
        Vec<String>,
        PyReadonlyArray1<'py, i64>,
        Vec<String>,
        u64,
        Option<String>,
    );
    let got = read.call1(
        py,
        (
            columns.task.as_str(),
            columns.label.as_str(),
            columns.features.clone(),
            columns.require_labels,
            columns.skip_bad_lines,
        ),
    )?;
    let (indptr, indices, data, labels, tasks, lines, feature_columns, n_skipped, first_skipped): Table =
        got.extract(py)?;
    let as_u32 = |j: &i64| u32::try_from(*j).map_err(|_| PyValueError::new_err("a column index beyond 2^32"));
    let mut chunk = Chunk {
        indptr: indptr.as_slice()?.iter().map(|&p| p.max(0) as u64).collect(),
        indices: indices.as_slice()?.iter().map(as_u32).collect::<PyResult<_>>()?,
        data: data.as_slice()?.to_vec(),
        labels: labels.as_slice()?.to_vec(),
        lines: lines.as_slice()?.iter().map(|&l| l.max(0) as u64).collect(),
        feature_columns,
        n_skipped,
        first_skipped,
        ..Chunk::default()
    };
    let mut ids: HashMap<&str, u32> = HashMap::new();
    for name in &tasks {
        let next = ids.len() as u32;
        let id = *ids.entry(name.as_str()).or_insert_with(|| {
            chunk.new_tasks.push(name.clone());
            next
        });
        chunk.task_ids.push(id);
    }
    let n = chunk.labels.len();
    if chunk.indptr.len() != n + 1 || chunk.task_ids.len() != n || chunk.lines.len() != n {
        return Err(PyValueError::new_err("a table of rows of different lengths"));
    }
    Ok(chunk)
}

/// A command's error as Python sees it: the interrupt as the signal handler's exception, an
/// exception of a Python callable as it was raised, the rest as one-line ValueErrors (OSError
/// for an output).
fn command_error(e: StreamError, raised: Option<PyErr>) -> PyErr {
    if let Some(err) = raised {
        return err;
    }
    match e {
        _ if e.is_interrupt() => PyKeyboardInterrupt::new_err("interrupted"),
        StreamError::Learn(e) => to_pyerr(e),
        StreamError::Write(e) => PyOSError::new_err(e.to_string()),
        e => PyValueError::new_err(e.to_string()),
    }
}

/// Runs a command with the GIL released, Ctrl-C polled and panics caught; `run` gets the
/// report, standard output and the table reader as Rust callables.
fn run_command(
    py: Python<'_>,
    report: Option<Py<PyAny>>,
    write: Py<PyAny>,
    read_table: Option<Py<PyAny>>,
    run: impl FnOnce(
            &mut dyn FnMut(&str) -> std::io::Result<()>,
            Box<dyn Write + '_>,
            Option<&mut driver::TableReader>,
        ) -> Result<driver::Summary, StreamError>
        + Send,
) -> PyResult<Py<PyDict>> {
    let (result, raised) = py.detach(|| {
        let raised = Rc::new(RefCell::new(None));
        let hook_raised = Rc::new(RefCell::new(None));
        let report = report.map(|call| PyText {
            call,
            raised: raised.clone(),
        });
        let stdout = PyText {
            call: write,
            raised: raised.clone(),
        };
        let mut send_report = |text: &str| report.as_ref().map_or(Ok(()), |r| r.send(text));
        let mut read = |columns: &TableColumns| -> Result<Chunk, StreamError> {
            let read = read_table.as_ref().expect("a reader is passed with read_table");
            Python::attach(|py| table_chunk(py, read, columns)).map_err(|e| {
                let message = e.to_string();
                raised.borrow_mut().get_or_insert(e);
                StreamError::Refused(message)
            })
        };
        let reader: Option<&mut driver::TableReader> = if read_table.is_some() { Some(&mut read) } else { None };
        let result = crate::interrupt::with_hook(signal_hook(hook_raised.clone()), || {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                run(&mut send_report, Box::new(stdout), reader)
            }))
        });
        let raised = hook_raised.borrow_mut().take().or_else(|| raised.borrow_mut().take());
        (result, raised)
    });
    let summary = match result {
        Err(_) => {
            return Err(PyRuntimeError::new_err(
                "internal error in the omtl native core (a bug: please report it)",
            ))
        }
        Ok(Err(e)) => return Err(command_error(e, raised)),
        Ok(Ok(s)) => s,
    };
    let out = PyDict::new(py);
    out.set_item("n", summary.n)?;
    out.set_item("mistakes", summary.mistakes)?;
    out.set_item("labelled", summary.labelled)?;
    out.set_item("skipped", summary.skipped)?;
    out.set_item("first_skipped", summary.first_skipped)?;
    out.set_item("text", summary.text)?;
    Ok(out.unbind())
}

/// `omtl learn` (docs/cli.md): `request` holds the command line's values; the report lines go
/// to `report(text)`, standard output (`-p -`) to `write(text)`, a Parquet file is read by
/// `read_table(task_column, label_column, feature_columns, require_labels, skip_bad_lines)`.
/// Returns `{"n", "mistakes", "skipped", "first_skipped", "text"}` (`text`: the last lines).
#[pyfunction]
#[pyo3(signature = (request, *, report, write, read_table=None))]
pub fn learn_command(
    py: Python<'_>,
    request: &Bound<'_, PyDict>,
    report: Py<PyAny>,
    write: Py<PyAny>,
    read_table: Option<Py<PyAny>>,
) -> PyResult<Py<PyDict>> {
    let reading: Request = request.extract()?;
    let learn: LearnRequest = request.extract()?;
    let cmd = driver::Learn {
        reading: reading.into(),
        learner: learn.learner,
        params: learn.params,
        passes: learn.passes,
        initial_model: learn.initial_model,
        save: learn.save,
    };
    run_command(py, Some(report), write, read_table, |report, stdout, table| {
        driver::learn_command(&cmd, report, Some(stdout), table)
    })
}

/// `omtl predict`: as [`learn_command`], `request` naming the model file (`"model"`).
#[pyfunction]
#[pyo3(signature = (request, *, write, read_table=None))]
pub fn predict_command(
    py: Python<'_>,
    request: &Bound<'_, PyDict>,
    write: Py<PyAny>,
    read_table: Option<Py<PyAny>>,
) -> PyResult<Py<PyDict>> {
    let reading: Request = request.extract()?;
    let model: String = request
        .get_item("model")?
        .ok_or_else(|| PyValueError::new_err("no model"))?
        .extract()?;
    let cmd = driver::Predict {
        reading: reading.into(),
        model,
    };
    run_command(py, None, write, read_table, |_, stdout, table| {
        driver::predict_command(&cmd, Some(stdout), table)
    })
}

/// The format a file's extension names (`.gz` looked through), or None.
#[pyfunction]
pub fn data_format(path: &str) -> Option<&'static str> {
    crate::io::format_of_path(path)
}

/// Adds the commands to `omtl._native`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(learn_command, m)?)?;
    m.add_function(wrap_pyfunction!(predict_command, m)?)?;
    m.add_function(wrap_pyfunction!(data_format, m)?)
}
