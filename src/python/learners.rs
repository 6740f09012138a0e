//! One Python class, `NativeLearner`, for every native learner: an enum over the crate's
//! learners, built by one static constructor per algorithm. The Python front end
//! (`omtl._base`) does label handling and validation; this layer checks again, releases the GIL
//! for the batch loop and serialises state for pickling.

use numpy::{IntoPyArray, PyArray1, PyReadonlyArray1};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use serde::{Deserialize, Serialize};

use super::convert::{guarded, slice1, RowsArg};
use super::kernels::{NativeKernel, NativeTaskKernel};
use crate::learner::{self, MTPerceptron, OnlineLearner, MTFORG, MTRBP};

/// Bumped whenever the serialised layout of a learner changes.
pub const STATE_VERSION: u32 = 1;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[allow(clippy::upper_case_acronyms)] // the papers' algorithm names
enum AnyLearner {
    MTPerceptron(MTPerceptron),
    MTRBP(MTRBP),
    MTFORG(MTFORG),
}

impl AnyLearner {
    fn get(&self) -> &(dyn OnlineLearner + Send + Sync) {
        match self {
            AnyLearner::MTPerceptron(m) => m,
            AnyLearner::MTRBP(m) => m,
            AnyLearner::MTFORG(m) => m,
        }
    }

    fn get_mut(&mut self) -> &mut (dyn OnlineLearner + Send + Sync) {
        match self {
            AnyLearner::MTPerceptron(m) => m,
            AnyLearner::MTRBP(m) => m,
            AnyLearner::MTFORG(m) => m,
        }
    }
}

#[pyclass(module = "omtl._native")]
pub struct NativeLearner {
    inner: AnyLearner,
}

fn wrap(inner: AnyLearner) -> NativeLearner {
    NativeLearner { inner }
}

#[pymethods]
impl NativeLearner {
    /// The unbounded multitask kernel Perceptron (the battery is `task_kernel = disconnected`).
    #[staticmethod]
    fn mt_perceptron(task_kernel: &NativeTaskKernel, kernel: &NativeKernel, n_features: usize, sparse: bool) -> PyResult<Self> {
        let m = guarded(|| MTPerceptron::new(task_kernel.inner.clone(), kernel.inner, n_features, sparse))?;
        Ok(wrap(AnyLearner::MTPerceptron(m)))
    }

    /// The multitask Randomized Budget Perceptron (§4.1).
    #[staticmethod]
    fn mt_rbp(
        task_kernel: &NativeTaskKernel,
        kernel: &NativeKernel,
        n_features: usize,
        sparse: bool,
        budget: usize,
        seed: u64,
    ) -> PyResult<Self> {
        let m = guarded(|| {
            MTRBP::new(task_kernel.inner.clone(), kernel.inner, n_features, sparse, budget, seed)
        })?;
        Ok(wrap(AnyLearner::MTRBP(m)))
    }

    /// The multitask self-tuned Forgetron (§4.2).
    #[staticmethod]
    fn mt_forg(
        task_kernel: &NativeTaskKernel,
        kernel: &NativeKernel,
        n_features: usize,
        sparse: bool,
        budget: usize,
        radius: f64,
    ) -> PyResult<Self> {
        let m = guarded(|| {
            MTFORG::new(task_kernel.inner.clone(), kernel.inner, n_features, sparse, budget, radius)
        })?;
        Ok(wrap(AnyLearner::MTFORG(m)))
    }

    /// Online protocol over a batch; returns the pre-update scores. Releases the GIL.
    fn learn<'py>(
        &mut self,
        py: Python<'py>,
        x: RowsArg<'py>,
        tasks: PyReadonlyArray1<'py, i64>,
        y: PyReadonlyArray1<'py, f64>,
    ) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let rows = x.view()?;
        let (tasks, y) = (slice1(&tasks, "tasks")?, slice1(&y, "y")?);
        let model = self.inner.get_mut();
        let scores = py.detach(|| guarded(|| learner::learn(model, &rows, tasks, y)))?;
        Ok(scores.into_pyarray(py))
    }

    /// Scores a batch without changing the model. Releases the GIL.
    fn decision<'py>(&self, py: Python<'py>, x: RowsArg<'py>, tasks: PyReadonlyArray1<'py, i64>) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let rows = x.view()?;
        let tasks = slice1(&tasks, "tasks")?;
        let model = self.inner.get();
        let scores = py.detach(|| guarded(|| learner::decision(model, &rows, tasks)))?;
        Ok(scores.into_pyarray(py))
    }

    #[getter]
    fn n_updates(&self) -> u64 {
        self.inner.get().n_updates()
    }

    #[getter]
    fn n_active(&self) -> usize {
        self.inner.get().n_active()
    }

    #[getter]
    fn n_tasks(&self) -> usize {
        self.inner.get().n_tasks()
    }

    #[getter]
    fn n_features(&self) -> usize {
        self.inner.get().n_features()
    }

    fn diagnostics<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (name, value) in self.inner.get().diagnostics() {
            d.set_item(name, value)?;
        }
        Ok(d)
    }

    /// The versioned, serialised state (for pickling).
    fn to_bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let bytes = bincode::serialize(&(STATE_VERSION, &self.inner))
            .map_err(|e| PyValueError::new_err(format!("cannot serialise the model: {e}")))?;
        Ok(PyBytes::new(py, &bytes))
    }

    #[staticmethod]
    fn from_bytes(state: &[u8]) -> PyResult<Self> {
        let (version, inner): (u32, AnyLearner) = bincode::deserialize(state)
            .map_err(|e| PyValueError::new_err(format!("cannot restore the model state: {e}")))?;
        if version != STATE_VERSION {
            return Err(PyValueError::new_err(format!(
                "model state has version {version}, this omtl reads version {STATE_VERSION}"
            )));
        }
        Ok(wrap(inner))
    }
}
