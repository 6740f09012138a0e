//! One Python class, `NativeLearner`, for every native learner: built by `NativeLearner.build(kind,
//! params, ...)` over the registry's enum ([`super::registry`]). The Python front end
//! (`omtl._base`) does label handling and validation; this layer checks again, releases the GIL
//! for the batch loop and serialises state for pickling and model files ([`crate::model::AnyLearner::to_bytes`]).

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::{Mutex, PoisonError, TryLockError};

use numpy::{IntoPyArray, PyArray1, PyArray2, PyArrayMethods, PyReadonlyArray1};
use pyo3::exceptions::{PyKeyboardInterrupt, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use super::convert::{guarded, slice1, to_pyerr, RowsArg};
use super::kernels::{NativeKernel, NativeTaskKernel};
use super::registry::AnyLearner;
use crate::data::Rows;
use crate::error::Error;
use crate::learner::{self, Build, CwCol, CwColParams, GraphSetting, KernelSetting, LinearSetting, OnlineLearner};
use crate::model::estimator::Family;
use crate::state::CheckState;

/// A native model. Every method runs under the model's lock, waited for with the GIL released
/// (a thread holding the lock may need the GIL to poll for signals), so concurrent calls on one
/// model run one after the other, and under the panic guard.
#[pyclass(module = "omtl._native", frozen)]
pub struct NativeLearner {
    inner: Mutex<AnyLearner>,
}

pub(super) fn wrap(inner: AnyLearner) -> NativeLearner {
    NativeLearner {
        inner: Mutex::new(inner),
    }
}

thread_local! {
    /// The models whose lock this thread holds: Python code run by the interrupt hook (a signal
    /// handler) could call one of them again, which would wait for itself forever.
    static HELD: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
}

/// Removes a model from [`HELD`] when its call ends, also by a panic.
struct Held(usize);

impl Drop for Held {
    fn drop(&mut self) {
        HELD.with(|h| {
            let mut held = h.borrow_mut();
            if let Some(i) = held.iter().rposition(|&k| k == self.0) {
                held.remove(i);
            }
        });
    }
}

/// The hook the engine polls during a long call: re-acquires the GIL and runs Python's signal
/// handlers; an exception they raise (KeyboardInterrupt for Ctrl-C) stops the call and is kept
/// in `raised` to be re-raised once the call has returned.
pub(super) fn signal_hook(raised: Rc<RefCell<Option<PyErr>>>) -> Box<dyn FnMut() -> bool> {
    Box::new(move || {
        Python::attach(|py| match py.check_signals() {
            Ok(()) => false,
            Err(e) => {
                *raised.borrow_mut() = Some(e);
                true
            }
        })
    })
}

impl NativeLearner {
    /// Runs `f` on the model with its lock held, the GIL released and panics caught. `f`'s own
    /// error is returned as is (the caller maps it).
    pub(super) fn with_model<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut AnyLearner) -> T + Send,
    ) -> PyResult<T> {
        let key = std::ptr::from_ref(self) as usize;
        if HELD.with(|h| h.borrow().contains(&key)) {
            return Err(PyRuntimeError::new_err(
                "this model is already in a call on this thread (called again from a signal handler?): \
                 it cannot be used until that call returns",
            ));
        }
        py.detach(|| {
            // A panic is caught below, inside the lock, so the lock is never poisoned by one; if
            // it were, the model is still the last consistent state a call left.
            let mut model = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
            HELD.with(|h| h.borrow_mut().push(key));
            let _held = Held(key);
            guarded(|| Ok(f(&mut model)))
        })
    }

    /// [`NativeLearner::with_model`] for a call that returns an engine result, mapped to Python.
    fn run<T: Send>(&self, py: Python<'_>, f: impl FnOnce(&mut AnyLearner) -> crate::Result<T> + Send) -> PyResult<T> {
        self.with_model(py, f)?.map_err(to_pyerr)
    }

    /// A long call that polls for signals (`learn`, `learn_rounds`, `decision`). Interrupted, it
    /// raises the signal handler's exception, carrying in `omtl_partial_scores` the pre-update
    /// scores of the rows learned before the interrupt (the engine keeps them).
    fn run_interruptible(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut AnyLearner) -> crate::Result<Vec<f64>> + Send,
    ) -> PyResult<Vec<f64>> {
        let (outcome, raised) = self.with_model(py, |model| {
            let raised = Rc::new(RefCell::new(None));
            let outcome = crate::interrupt::with_hook(signal_hook(raised.clone()), || f(model));
            let raised = raised.borrow_mut().take();
            (outcome, raised)
        })?;
        match outcome {
            Ok(scores) => Ok(scores),
            Err(Error::Interrupted { scores }) => {
                let err = raised.unwrap_or_else(|| PyKeyboardInterrupt::new_err("interrupted"));
                // A handler's exception that takes no attributes loses the partial count only.
                let _ = err.value(py).setattr("omtl_partial_scores", scores.into_pyarray(py));
                Err(err)
            }
            Err(e) => Err(to_pyerr(e)),
        }
    }
}

impl NativeLearner {
    /// Runs a short call on the model without releasing the GIL when its lock is free (one
    /// event: releasing and re-taking the GIL would cost more than the call); when another
    /// thread holds it, waits as [`NativeLearner::with_model`] does, with the GIL released.
    fn run_short<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut AnyLearner) -> crate::Result<T> + Send,
    ) -> PyResult<T> {
        let key = std::ptr::from_ref(self) as usize;
        if HELD.with(|h| h.borrow().contains(&key)) {
            return self.run(py, f); // raises the re-entry error
        }
        let mut model = match self.inner.try_lock() {
            Ok(model) => model,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => return self.run(py, f),
        };
        HELD.with(|h| h.borrow_mut().push(key));
        let _held = Held(key);
        guarded(|| f(&mut model))
    }

    /// Learns one event (a one-row batch, `n_new` tasks added first, atomically); its score.
    pub(super) fn event_learn(&self, py: Python<'_>, row: &Rows, task: i64, y: f64, n_new: usize) -> PyResult<f64> {
        let scores = self.run_short(py, |m| learner::learn_grown(m, n_new, row, &[task], &[y]))?;
        Ok(scores[0])
    }

    /// Learns a small batch (atomically); its pre-update scores.
    pub(super) fn small_learn(&self, py: Python<'_>, rows: &Rows, tasks: &[i64], y: &[f64]) -> PyResult<Vec<f64>> {
        self.run_short(py, |m| learner::learn(m, rows, tasks, y))
    }

    /// Scores a small batch (the model is unchanged).
    pub(super) fn small_decision(&self, py: Python<'_>, rows: &Rows, tasks: &[i64]) -> PyResult<Vec<f64>> {
        self.run_short(py, |m| learner::decision(m, rows, tasks))
    }

    /// Scores one event (as if `n_new` tasks had been added; the model is unchanged).
    pub(super) fn event_decision(&self, py: Python<'_>, row: &Rows, task: i64, n_new: usize) -> PyResult<f64> {
        let scores = self.run_short(py, |m| learner::decision_grown(m, n_new, row, &[task]))?;
        Ok(scores[0])
    }
}

impl NativeLearner {
    /// A call on a model that panics inside the guard (the `_testing.panic` hook).
    pub(super) fn panic_in_call(py: Python<'_>) -> PyResult<()> {
        let model = wrap(AnyLearner::CwCol(guarded(|| {
            CwCol::build(&CwColParams::default(), &LinearSetting::new(1, 1))
        })?));
        model.with_model(py, |_| panic!("a deliberate panic (test hook)"))
    }
}

#[pymethods]
impl NativeLearner {
    /// The learner `kind` (one of `omtl._native.LEARNER_KINDS`) with the hyper-parameters in the
    /// mapping `params`, for `n_features` features. A linear learner takes `n_tasks`; a kernel
    /// learner takes a `task_kernel` (which fixes the number of tasks) and a base `kernel`;
    /// MTLinear takes a `task_kernel`.
    #[staticmethod]
    #[pyo3(signature = (kind, params, *, n_features, sparse=false, n_tasks=None, task_kernel=None, kernel=None))]
    fn build(
        kind: &str,
        params: &Bound<'_, PyAny>,
        n_features: usize,
        sparse: bool,
        n_tasks: Option<usize>,
        task_kernel: Option<PyRef<'_, NativeTaskKernel>>,
        kernel: Option<PyRef<'_, NativeKernel>>,
    ) -> PyResult<Self> {
        let task_kernel = task_kernel.as_deref().map(|t| &t.inner);
        let kernel = kernel.map(|k| k.inner);
        let family = match (task_kernel, n_tasks, kernel) {
            (Some(tasks), Some(n), _) if n != tasks.n_tasks() => {
                return Err(PyValueError::new_err(format!(
                    "invalid parameter `n_tasks`: is {n} but the task kernel has {} tasks",
                    tasks.n_tasks()
                )))
            }
            (Some(task_kernel), _, Some(kernel)) => Family::Kernel(KernelSetting {
                task_kernel,
                kernel,
                n_features,
                sparse,
            }),
            (Some(task_kernel), _, None) => Family::Graph(GraphSetting::new(task_kernel, n_features)),
            (None, Some(n_tasks), _) => Family::Linear(LinearSetting {
                n_tasks,
                n_features,
                sparse,
            }),
            (None, None, _) => {
                return Err(PyValueError::new_err(
                    "NativeLearner.build needs n_tasks or a task_kernel",
                ))
            }
        };
        Ok(wrap(super::registry::build(kind, params, &family)?))
    }

    /// Recomputes the inverse Gram matrix of a Projectron from scratch (INV-Q2); a no-op for
    /// learners without one.
    fn force_rebuild(&self, py: Python<'_>) -> PyResult<()> {
        self.with_model(py, |model| model.rebuild_caches())
    }

    /// Whether some row of `x` has `K'(x, x) > R²` (MTFORG only): the front end warns before
    /// learning such a row, so that a warning turned into an error leaves the model unchanged.
    fn radius_exceeded(&self, py: Python<'_>, x: RowsArg<'_>) -> PyResult<bool> {
        let rows = x.view()?;
        self.run(py, |model| match model {
            AnyLearner::MTFORG(m) => {
                rows.validate()?;
                Ok((0..rows.len()).any(|t| m.exceeds_radius(&rows.row(t))))
            }
            _ => Err(crate::error::invalid(
                "radius",
                "radius_exceeded() is defined for MTFORG only",
            )),
        })
    }

    /// Learner-specific fitted arrays by name (copies).
    fn arrays<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (name, shape, data) in self.with_model(py, |m| m.arrays())? {
            d.set_item(name, data.into_pyarray(py).reshape(shape.as_slice())?)?;
        }
        Ok(d)
    }

    /// Protocol P2 over a batch (§1.2): rows with equal consecutive round ids form a round.
    /// Learners without a round rule flatten it (§1.3). Returns the pre-update scores. With
    /// `n_new > 0`, `n_new` tasks are added first, atomically with the batch (which may name them).
    #[pyo3(signature = (x, tasks, y, rounds, n_new=0))]
    fn learn_rounds<'py>(
        &self,
        py: Python<'py>,
        x: RowsArg<'py>,
        tasks: PyReadonlyArray1<'py, i64>,
        y: PyReadonlyArray1<'py, f64>,
        rounds: PyReadonlyArray1<'py, i64>,
        n_new: usize,
    ) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let rows = x.view()?;
        let (tasks, y, rounds) = (slice1(&tasks, "tasks")?, slice1(&y, "y")?, slice1(&rounds, "rounds")?);
        let scores = self.run_interruptible(py, |m| learner::learn_rounds_grown(m, n_new, &rows, tasks, y, rounds))?;
        Ok(scores.into_pyarray(py))
    }

    /// Adds `n` tasks with no examples (open-ended task sets); atomic.
    fn add_tasks(&self, py: Python<'_>, n: usize) -> PyResult<()> {
        self.run(py, |m| m.add_tasks(n))
    }

    /// ROMCO's `(U, V)`, each `n_features x n_tasks`.
    #[allow(clippy::type_complexity)]
    fn factors<'py>(&self, py: Python<'py>) -> PyResult<(Bound<'py, PyArray2<f64>>, Bound<'py, PyArray2<f64>>)> {
        let (shape, u, v) = self.run(py, |model| match model {
            AnyLearner::Romco(m) => Ok(([m.n_features(), m.n_tasks()], m.u_matrix(), m.v_matrix())),
            _ => Err(crate::error::invalid("model", "factors() is defined for ROMCO only")),
        })?;
        Ok((u.into_pyarray(py).reshape(shape)?, v.into_pyarray(py).reshape(shape)?))
    }

    /// Online protocol over a batch; returns the pre-update scores. Releases the GIL. With
    /// `n_new > 0`, `n_new` tasks are added first, atomically with the batch (which may name them).
    #[pyo3(signature = (x, tasks, y, n_new=0))]
    fn learn<'py>(
        &self,
        py: Python<'py>,
        x: RowsArg<'py>,
        tasks: PyReadonlyArray1<'py, i64>,
        y: PyReadonlyArray1<'py, f64>,
        n_new: usize,
    ) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let rows = x.view()?;
        let (tasks, y) = (slice1(&tasks, "tasks")?, slice1(&y, "y")?);
        let scores = self.run_interruptible(py, |m| learner::learn_grown(m, n_new, &rows, tasks, y))?;
        Ok(scores.into_pyarray(py))
    }

    /// Scores a batch without changing the model. Releases the GIL. With `n_new > 0`, scores as
    /// if `n_new` tasks with no examples had been added (the model is unchanged).
    #[pyo3(signature = (x, tasks, n_new=0))]
    fn decision<'py>(
        &self,
        py: Python<'py>,
        x: RowsArg<'py>,
        tasks: PyReadonlyArray1<'py, i64>,
        n_new: usize,
    ) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let rows = x.view()?;
        let tasks = slice1(&tasks, "tasks")?;
        let scores = self.run_interruptible(py, |m| learner::decision_grown(m, n_new, &rows, tasks))?;
        Ok(scores.into_pyarray(py))
    }

    #[getter]
    fn n_updates(&self, py: Python<'_>) -> PyResult<u64> {
        self.with_model(py, |m| m.n_updates())
    }

    #[getter]
    fn n_active(&self, py: Python<'_>) -> PyResult<usize> {
        self.with_model(py, |m| m.n_active())
    }

    #[getter]
    fn n_tasks(&self, py: Python<'_>) -> PyResult<usize> {
        self.with_model(py, |m| m.n_tasks())
    }

    #[getter]
    fn n_features(&self, py: Python<'_>) -> PyResult<usize> {
        self.with_model(py, |m| m.n_features())
    }

    fn diagnostics<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (name, value) in self.with_model(py, |m| m.diagnostics())? {
            d.set_item(name, value)?;
        }
        Ok(d)
    }

    /// The versioned, serialised state (for pickling and `omtl.save`).
    fn to_bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let bytes = self.run(py, |m| m.to_bytes())?;
        Ok(PyBytes::new(py, &bytes))
    }

    /// A learner from untrusted bytes: decoded within the payload's size, then every invariant
    /// checked ([`CheckState`]); anything else raises ValueError. Runs without the GIL.
    #[staticmethod]
    fn from_bytes(py: Python<'_>, state: &[u8]) -> PyResult<Self> {
        let inner = py.detach(|| guarded(|| AnyLearner::from_bytes(state)))?;
        Ok(wrap(inner))
    }

    /// The name of the native algorithm (one per constructor).
    #[getter]
    fn kind(&self, py: Python<'_>) -> PyResult<&'static str> {
        self.with_model(py, |m| m.kind())
    }

    /// True when `other` is the same algorithm with the same hyper-parameters (not the same
    /// fitted state): how a restored learner is matched with the estimator that holds it.
    fn same_settings(&self, py: Python<'_>, other: &NativeLearner) -> PyResult<bool> {
        if std::ptr::eq(self, other) {
            return Ok(true);
        }
        // The other's settings are copied out first: holding both locks at once could deadlock
        // against a call taking them in the other order.
        let theirs = other.with_model(py, |m| m.clone())?;
        self.with_model(py, |m| m.same_settings(&theirs))
    }

    /// Checks the invariants of the current state (what `from_bytes` checks); raises ValueError.
    fn check_state(&self, py: Python<'_>) -> PyResult<()> {
        self.run(py, |m| m.check_state())
    }
}
