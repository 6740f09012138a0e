//! `omtl learn FILE` and `omtl predict FILE` in one native call each
//! ([`crate::io::driver`]): the file is read on its own thread and learned (or scored) on the
//! calling one with the GIL released; Python only parses the command line. The report goes to a
//! Python callable (so that it lands where `sys.stderr` points), the predictions to a file
//! written here. Ctrl-C is polled as in every long call ([`super::learners::signal_hook`]).

use std::cell::RefCell;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::rc::Rc;

use pyo3::exceptions::{PyKeyboardInterrupt, PyOSError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use super::convert::to_pyerr;
use super::io::ReadOptions;
use super::learners::{signal_hook, NativeLearner};
use super::registry::AnyLearner;
use crate::error::Error;
use crate::io::driver::{self, ChunkSink, StreamError, StreamLearner, TaskMap};
use crate::io::{Chunk, Format};
use crate::kernel::TaskKernel;
use crate::learner::{GraphSetting, OnlineLearner};
use crate::model::estimator::Family;

/// Writes each chunk's predicted labels to a file, one per line.
struct LabelFile(Option<BufWriter<File>>);

impl ChunkSink for LabelFile {
    fn chunk(&mut self, _chunk: &Chunk, _scores: &[f64], predicted: &[i64]) -> std::io::Result<()> {
        match &mut self.0 {
            Some(out) => driver::write_labels(out, predicted),
            None => Ok(()),
        }
    }
}

impl LabelFile {
    fn create(path: Option<&str>) -> PyResult<Self> {
        let file = path
            .map(|p| File::create(p).map(|f| BufWriter::with_capacity(1 << 20, f)))
            .transpose()
            .map_err(|e| PyOSError::new_err(e.to_string()))?;
        Ok(Self(file))
    }

    fn finish(&mut self) -> std::io::Result<()> {
        self.0.as_mut().map_or(Ok(()), Write::flush)
    }
}

/// A stream's error as Python sees it: the interrupt as the signal handler's exception, the
/// rest as one-line ValueErrors (OSError for the output).
fn stream_error(e: StreamError, raised: Option<PyErr>, build_error: Option<PyErr>) -> PyErr {
    if let Some(err) = build_error {
        return err;
    }
    match e {
        StreamError::Learn(Error::Interrupted { .. }) => {
            raised.unwrap_or_else(|| PyKeyboardInterrupt::new_err("interrupted"))
        }
        StreamError::Learn(e) => to_pyerr(e),
        StreamError::Write(e) => PyOSError::new_err(e.to_string()),
        StreamError::Read(e) => PyValueError::new_err(e.to_string()),
        StreamError::UnknownTask(m) => PyValueError::new_err(m),
    }
}

/// Learns the file `path` (read as `reading` says; its width and indexing from `n_features`
/// and `zero_based`, found by a pass over an svmlight file when `None`) with a new native learner `kind` (its parameters in the mapping
/// `params`) over the task graph `graph` (`"complete_open"` or `"disconnected"`), `passes`
/// times. Returns `(learner or None when the file had no example, summary dict)`. The report
/// lines go to `report(text)` (none when `quiet`); the predictions to `predictions` (a path).
#[pyfunction]
#[pyo3(signature = (path, reading, *, n_features, zero_based, kind, params, graph, passes, quiet, report, predictions))]
#[allow(clippy::too_many_arguments)]
pub fn learn_file(
    py: Python<'_>,
    path: String,
    reading: ReadOptions,
    n_features: Option<u64>,
    zero_based: Option<bool>,
    kind: String,
    params: Py<PyAny>,
    graph: &str,
    passes: usize,
    quiet: bool,
    report: Py<PyAny>,
    predictions: Option<String>,
) -> PyResult<(Option<NativeLearner>, Py<PyDict>)> {
    let mut opts = reading.options(1, false)?;
    let (open_complete, min_tasks) = match graph {
        "complete_open" => (true, 2),
        "disconnected" => (false, 1),
        other => {
            return Err(PyValueError::new_err(format!(
                "graph {other:?}: complete_open or disconnected"
            )))
        }
    };
    py.detach(|| driver::resolve_layout(&path, &mut opts, n_features, zero_based))
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    let mut sink = LabelFile::create(predictions.as_deref())?;
    let mut stream: StreamLearner<AnyLearner> = StreamLearner::new(None, TaskMap::default(), min_tasks);
    let outcome = py.detach(|| {
        let raised = Rc::new(RefCell::new(None));
        let build_error: RefCell<Option<PyErr>> = RefCell::new(None);
        let mut build = |n_tasks: usize, width: usize| -> crate::Result<AnyLearner> {
            let tasks = if open_complete {
                TaskKernel::complete_open(n_tasks)?
            } else {
                TaskKernel::disconnected(n_tasks)?
            };
            let family = Family::Graph(GraphSetting::new(&tasks, width));
            Python::attach(|py| super::registry::build(&kind, params.bind(py), &family)).map_err(|e| {
                let message = e.to_string();
                *build_error.borrow_mut() = Some(e);
                Error::InvalidParameter {
                    name: "params",
                    reason: message,
                }
            })
        };
        let mut write_report = |text: &str| -> std::io::Result<()> {
            Python::attach(|py| report.call1(py, (text,)).map(drop)).map_err(|e| std::io::Error::other(e.to_string()))
        };
        let result = crate::interrupt::with_hook(signal_hook(raised.clone()), || {
            let run = || -> Result<(), StreamError> {
                for _ in 0..passes {
                    stream.learn_file(&path, &mut opts, &mut build, quiet, &mut write_report, &mut sink)?;
                }
                Ok(())
            };
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(run))
        });
        let flushed = sink.finish();
        let raised = raised.borrow_mut().take();
        (result, flushed, raised, build_error.into_inner())
    });
    let (result, flushed, raised, build_error) = outcome;
    match result {
        Err(_) => {
            return Err(PyRuntimeError::new_err(
                "internal error in the omtl native core (a bug: please report it)",
            ))
        }
        Ok(Err(e)) => return Err(stream_error(e, raised, build_error)),
        Ok(Ok(())) => {}
    }
    flushed.map_err(|e| PyOSError::new_err(e.to_string()))?;
    let s = &stream.summary;
    let summary = PyDict::new(py);
    summary.set_item("n_seen", s.n_seen)?;
    summary.set_item("n_mistakes", s.n_mistakes)?;
    summary.set_item("seen_per_task", s.seen_per_task.clone())?;
    summary.set_item("task_labels", stream.tasks.labels().to_vec())?;
    summary.set_item("zero_one", s.zero_one)?;
    summary.set_item("n_skipped", s.n_skipped)?;
    summary.set_item("first_skipped", s.first_skipped.clone())?;
    summary.set_item("feature_columns", s.feature_columns.clone())?;
    summary.set_item(
        "zero_based",
        (opts.format == Format::Svmlight).then_some(opts.zero_based),
    )?;
    let width = stream.model.as_ref().map(|m| m.n_features());
    summary.set_item("n_features", width)?;
    Ok((stream.model.map(super::learners::wrap), summary.unbind()))
}

/// Hands each chunk's predicted labels, one per line, to a Python `write(text)` (so that they go
/// where `sys.stdout` points); the callable's exception is kept to be raised as it is.
struct PythonText<'a> {
    write: &'a Py<PyAny>,
    zero_one: bool,
    raised: Option<PyErr>,
    text: String,
}

impl ChunkSink for PythonText<'_> {
    fn chunk(&mut self, _chunk: &Chunk, _scores: &[f64], predicted: &[i64]) -> std::io::Result<()> {
        self.text.clear();
        for &p in predicted {
            self.text.push_str(match (p > 0, self.zero_one) {
                (true, _) => "1\n",
                (false, true) => "0\n",
                (false, false) => "-1\n",
            });
        }
        Python::attach(|py| self.write.call1(py, (self.text.as_str(),)).map(drop)).map_err(|e| {
            let message = e.to_string();
            self.raised = Some(e);
            std::io::Error::other(message)
        })
    }
}

/// Predicts every example of the file `path` with `model` (no update), reading it as `reading`
/// says, as
/// `omtl.datasets.iter_file` would with these options (the model's width, CSV columns); `task_names[i]` is the
/// file's name of model task `i`. The labels go to `write(text)` chunk by chunk, 0/1 when
/// `zero_one`, else -1/+1. Returns `(rows, rows with a label, of those predicted wrongly,
/// lines skipped, the first one's message)`.
#[pyfunction]
#[pyo3(signature = (model, path, reading, *, n_features, zero_based, task_names, zero_one, write))]
#[allow(clippy::too_many_arguments)]
pub fn predict_file(
    py: Python<'_>,
    model: &NativeLearner,
    path: String,
    reading: ReadOptions,
    n_features: Option<u64>,
    zero_based: Option<bool>,
    task_names: Vec<String>,
    zero_one: bool,
    write: Py<PyAny>,
) -> PyResult<(u64, u64, u64, u64, Option<String>)> {
    let mut opts = reading.options(1, false)?;
    py.detach(|| driver::resolve_layout(&path, &mut opts, n_features, zero_based))
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    let tasks = TaskMap::with_labels(task_names);
    let (result, raised, written) = model.with_model(py, |learner| {
        let raised = Rc::new(RefCell::new(None));
        let mut sink = PythonText {
            write: &write,
            zero_one,
            raised: None,
            text: String::new(),
        };
        let result = crate::interrupt::with_hook(signal_hook(raised.clone()), || {
            driver::predict_file(&*learner, &tasks, &path, &opts, &mut sink)
        });
        let raised = raised.borrow_mut().take();
        (result, raised, sink.raised)
    })?;
    match result {
        Ok(s) => Ok((s.n, s.labelled, s.mistakes, s.n_skipped, s.first_skipped)),
        Err(e) => Err(stream_error(e, raised, written)),
    }
}

/// Adds the stream calls to `omtl._native`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(learn_file, m)?)?;
    m.add_function(wrap_pyfunction!(predict_file, m)?)
}
