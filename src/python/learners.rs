//! One Python class, `NativeLearner`, for every native learner: an enum over the crate's
//! learners, built by one static constructor per algorithm. The Python front end
//! (`omtl._base`) does label handling and validation; this layer checks again, releases the GIL
//! for the batch loop and serialises state for pickling.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::{Mutex, PoisonError};

use numpy::{IntoPyArray, PyArray1, PyArray2, PyArrayMethods, PyReadonlyArray1};
use pyo3::exceptions::{PyKeyboardInterrupt, PyRuntimeError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use serde::{Deserialize, Serialize};

use super::convert::{guarded, slice1, to_pyerr, RowsArg};
use super::kernels::{NativeKernel, NativeTaskKernel};
use crate::data::Row;
use crate::error::Error;
use crate::kernel::Scratch;
use crate::learner::{
    self, BatchMtl, CwCol, GlobalNorm, Loss, MTLinear, MTLinearParams, MTPerceptron, Omtl, Omtrl, OnlineLearner,
    PaVariant, PassiveAggressive, ProjectronParams, Regularizer, RelationUpdate, Romco, RomcoTrigger, SvtRoute,
    Threshold, UpdateRule, MTBPRJ, MTBPRJ2, MTFORG, MTRBP,
};
use crate::state::{self, CheckState};

/// Bumped whenever the serialised layout of a learner changes (4: ROMCO's row-side Gram
/// route for wide U holds the eigendecomposition of `D = UUᵀ`, its factored tall U holds
/// `Π` and `Π⁻¹` of `U = W Π`).
pub const STATE_VERSION: u32 = 4;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[allow(clippy::upper_case_acronyms)] // the papers' algorithm names
enum AnyLearner {
    MTPerceptron(MTPerceptron),
    Mtbprj(MTBPRJ),
    Mtbprj2(MTBPRJ2),
    CwCol(CwCol),
    Omtrl(Omtrl),
    Omtl(Omtl),
    BatchMtl(BatchMtl),
    Romco(Romco),
    PassiveAggressive(PassiveAggressive),
    MTRBP(MTRBP),
    MTFORG(MTFORG),
    MTLinear(MTLinear),
}

impl CheckState for AnyLearner {
    fn check_state(&self) -> crate::Result<()> {
        match self {
            AnyLearner::MTPerceptron(m) => m.check_state(),
            AnyLearner::Mtbprj(m) => m.check_state(),
            AnyLearner::Mtbprj2(m) => m.check_state(),
            AnyLearner::CwCol(m) => m.check_state(),
            AnyLearner::Omtrl(m) => m.check_state(),
            AnyLearner::Omtl(m) => m.check_state(),
            AnyLearner::BatchMtl(m) => m.check_state(),
            AnyLearner::Romco(m) => m.check_state(),
            AnyLearner::PassiveAggressive(m) => m.check_state(),
            AnyLearner::MTRBP(m) => m.check_state(),
            AnyLearner::MTFORG(m) => m.check_state(),
            AnyLearner::MTLinear(m) => m.check_state(),
        }
    }
}

/// The serialised state: the layout version, then the learner (the `(u32, AnyLearner)` tuple
/// earlier versions wrote, byte for byte).
#[derive(Serialize, Deserialize)]
struct VersionedState<L> {
    version: u32,
    learner: L,
}

impl CheckState for VersionedState<AnyLearner> {
    fn check_state(&self) -> crate::Result<()> {
        self.learner.check_state()
    }
}

/// Decodes and checks a state; the version is read first so that an old state gets a clear
/// message rather than a layout error.
fn decode_state(state: &[u8]) -> crate::Result<AnyLearner> {
    let head: [u8; 4] = state
        .get(..4)
        .and_then(|h| h.try_into().ok())
        .ok_or_else(|| Error::State(format!("a state needs at least 4 bytes, got {}", state.len())))?;
    let version = u32::from_le_bytes(head);
    if version != STATE_VERSION {
        return Err(Error::State(format!(
            "the model state has layout version {version}, this omtl reads version {STATE_VERSION}"
        )));
    }
    Ok(state::decode::<VersionedState<AnyLearner>>(state)?.learner)
}

impl AnyLearner {
    /// The name of the native algorithm (one per constructor).
    fn kind(&self) -> &'static str {
        match self {
            AnyLearner::MTPerceptron(_) => "mt_perceptron",
            AnyLearner::Mtbprj(_) => "mtbprj",
            AnyLearner::Mtbprj2(_) => "mtbprj2",
            AnyLearner::CwCol(_) => "cw_col",
            AnyLearner::Omtrl(_) => "omtrl",
            AnyLearner::Omtl(_) => "omtl",
            AnyLearner::BatchMtl(_) => "batch_mtl",
            AnyLearner::Romco(_) => "romco",
            AnyLearner::PassiveAggressive(_) => "passive_aggressive",
            AnyLearner::MTRBP(_) => "mt_rbp",
            AnyLearner::MTFORG(_) => "mt_forg",
            AnyLearner::MTLinear(_) => "mt_linear",
        }
    }

    /// Same algorithm and hyper-parameters (not the same fitted state).
    fn same_settings(&self, other: &AnyLearner) -> bool {
        use AnyLearner as A;
        match (self, other) {
            (A::MTPerceptron(a), A::MTPerceptron(b)) => a.same_settings(b),
            (A::Mtbprj(a), A::Mtbprj(b)) => a.same_settings(b),
            (A::Mtbprj2(a), A::Mtbprj2(b)) => a.same_settings(b),
            (A::CwCol(a), A::CwCol(b)) => a.same_settings(b),
            (A::Omtrl(a), A::Omtrl(b)) => a.same_settings(b),
            (A::Omtl(a), A::Omtl(b)) => a.same_settings(b),
            (A::BatchMtl(a), A::BatchMtl(b)) => a.same_settings(b),
            (A::Romco(a), A::Romco(b)) => a.same_settings(b),
            (A::PassiveAggressive(a), A::PassiveAggressive(b)) => a.same_settings(b),
            (A::MTRBP(a), A::MTRBP(b)) => a.same_settings(b),
            (A::MTFORG(a), A::MTFORG(b)) => a.same_settings(b),
            (A::MTLinear(a), A::MTLinear(b)) => a.same_settings(b),
            _ => false,
        }
    }

    fn get(&self) -> &(dyn OnlineLearner + Send + Sync) {
        match self {
            AnyLearner::MTPerceptron(m) => m,
            AnyLearner::Mtbprj(m) => m,
            AnyLearner::Mtbprj2(m) => m,
            AnyLearner::CwCol(m) => m,
            AnyLearner::Omtrl(m) => m,
            AnyLearner::Omtl(m) => m,
            AnyLearner::BatchMtl(m) => m,
            AnyLearner::Romco(m) => m,
            AnyLearner::PassiveAggressive(m) => m,
            AnyLearner::MTRBP(m) => m,
            AnyLearner::MTFORG(m) => m,
            AnyLearner::MTLinear(m) => m,
        }
    }

    fn get_mut(&mut self) -> &mut (dyn OnlineLearner + Send + Sync) {
        match self {
            AnyLearner::MTPerceptron(m) => m,
            AnyLearner::Mtbprj(m) => m,
            AnyLearner::Mtbprj2(m) => m,
            AnyLearner::CwCol(m) => m,
            AnyLearner::Omtrl(m) => m,
            AnyLearner::Omtl(m) => m,
            AnyLearner::BatchMtl(m) => m,
            AnyLearner::Romco(m) => m,
            AnyLearner::PassiveAggressive(m) => m,
            AnyLearner::MTRBP(m) => m,
            AnyLearner::MTFORG(m) => m,
            AnyLearner::MTLinear(m) => m,
        }
    }
}

/// The batch functions of the engine take any `OnlineLearner + Clone` (a multi-row batch runs
/// on a clone, for atomicity): the enum is one, by delegation.
// Every method delegates, the provided ones included: a default here would silently replace
// the learner's own (its base kernel for the row checks, its joint rounds).
impl OnlineLearner for AnyLearner {
    fn n_tasks(&self) -> usize {
        self.get().n_tasks()
    }
    fn n_features(&self) -> usize {
        self.get().n_features()
    }
    fn score(&self, x: Row, task: usize, scratch: &mut Scratch) -> f64 {
        self.get().score(x, task, scratch)
    }
    fn update(&mut self, x: Row, task: usize, y: f64, score: f64, scratch: &mut Scratch) -> crate::Result<()> {
        self.get_mut().update(x, task, y, score, scratch)
    }
    fn learn_one(&mut self, x: Row, task: usize, y: f64, scratch: &mut Scratch) -> crate::Result<f64> {
        self.get_mut().learn_one(x, task, y, scratch)
    }
    fn learn_round(
        &mut self,
        rows: &[Row],
        tasks: &[usize],
        y: &[f64],
        scores: &mut [f64],
        scratch: &mut Scratch,
    ) -> crate::Result<()> {
        self.get_mut().learn_round(rows, tasks, y, scores, scratch)
    }
    fn joint_rounds(&self) -> bool {
        self.get().joint_rounds()
    }
    fn base_kernel(&self) -> Option<&crate::kernel::BaseKernel> {
        self.get().base_kernel()
    }
    fn prefetch(&self, x: Row, task: usize) {
        self.get().prefetch(x, task)
    }
    fn n_updates(&self) -> u64 {
        self.get().n_updates()
    }
    fn n_active(&self) -> usize {
        self.get().n_active()
    }
    fn diagnostics(&self) -> Vec<(&'static str, f64)> {
        self.get().diagnostics()
    }
    fn arrays(&self) -> Vec<(&'static str, Vec<usize>, Vec<f64>)> {
        self.get().arrays()
    }
}

/// A native model. Every method runs under the model's lock, waited for with the GIL released
/// (a thread holding the lock may need the GIL to poll for signals), so concurrent calls on one
/// model run one after the other, and under the panic guard.
#[pyclass(module = "omtl._native", frozen)]
pub struct NativeLearner {
    inner: Mutex<AnyLearner>,
}

fn wrap(inner: AnyLearner) -> NativeLearner {
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
fn signal_hook(raised: Rc<RefCell<Option<PyErr>>>) -> Box<dyn FnMut() -> bool> {
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
    fn with_model<T: Send>(&self, py: Python<'_>, f: impl FnOnce(&mut AnyLearner) -> T + Send) -> PyResult<T> {
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

#[pymethods]
impl NativeLearner {
    /// The unbounded multitask kernel Perceptron (the battery is `task_kernel = disconnected`).
    #[staticmethod]
    fn mt_perceptron(
        task_kernel: &NativeTaskKernel,
        kernel: &NativeKernel,
        n_features: usize,
        sparse: bool,
    ) -> PyResult<Self> {
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
            MTRBP::new(
                task_kernel.inner.clone(),
                kernel.inner,
                n_features,
                sparse,
                budget,
                seed,
            )
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
            MTFORG::new(
                task_kernel.inner.clone(),
                kernel.inner,
                n_features,
                sparse,
                budget,
                radius,
            )
        })?;
        Ok(wrap(AnyLearner::MTFORG(m)))
    }

    /// The multitask budget Projectron MTBPRJ (ALGORITHMS.md §4.4).
    #[staticmethod]
    #[allow(clippy::too_many_arguments)]
    fn mtbprj(
        task_kernel: &NativeTaskKernel,
        kernel: &NativeKernel,
        n_features: usize,
        sparse: bool,
        budget: usize,
        eta: f64,
        threshold_on: &str,
    ) -> PyResult<Self> {
        let m = guarded(|| {
            let params = ProjectronParams::new(budget, eta, Threshold::parse(threshold_on)?)?;
            MTBPRJ::new(task_kernel.inner.clone(), kernel.inner, n_features, sparse, params)
        })?;
        Ok(wrap(AnyLearner::Mtbprj(m)))
    }

    /// MTBPRJ-2, projection in the base-kernel space with per-task weights (§4.5).
    #[staticmethod]
    #[allow(clippy::too_many_arguments)]
    fn mtbprj2(
        task_kernel: &NativeTaskKernel,
        kernel: &NativeKernel,
        n_features: usize,
        sparse: bool,
        budget: usize,
        eta: f64,
        threshold_on: &str,
        alg2_literal_line14: bool,
    ) -> PyResult<Self> {
        let m = guarded(|| {
            let params = ProjectronParams::new(budget, eta, Threshold::parse(threshold_on)?)?;
            MTBPRJ2::new(
                task_kernel.inner.clone(),
                kernel.inner,
                n_features,
                sparse,
                params,
                alg2_literal_line14,
            )
        })?;
        Ok(wrap(AnyLearner::Mtbprj2(m)))
    }

    /// Recomputes the inverse Gram matrix of a Projectron from scratch (INV-Q2); a no-op for
    /// learners without one.
    fn force_rebuild(&self, py: Python<'_>) -> PyResult<()> {
        self.with_model(py, |model| match model {
            AnyLearner::Mtbprj(m) => m.force_rebuild(),
            AnyLearner::Mtbprj2(m) => m.force_rebuild(),
            _ => {}
        })
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

    /// CW-COL (ALGORITHMS.md §6.4).
    #[staticmethod]
    fn cw_col(n_tasks: usize, n_features: usize, confidence: f64, a: f64, omega: f64) -> PyResult<Self> {
        let m = guarded(|| CwCol::new(n_tasks, n_features, confidence, a, omega))?;
        Ok(wrap(AnyLearner::CwCol(m)))
    }

    /// OMTRL (§6.3); `relation_update` is "batch", "logdet" or "vonneumann".
    #[staticmethod]
    fn omtrl(n_tasks: usize, n_features: usize, relation_update: &str, eta: f64, epoch: u64) -> PyResult<Self> {
        let m = guarded(|| Omtrl::new(n_tasks, n_features, RelationUpdate::parse(relation_update)?, eta, epoch))?;
        Ok(wrap(AnyLearner::Omtrl(m)))
    }

    /// OMTL (§6.2); `global_norm` is "linf", "l1" or "l2".
    #[staticmethod]
    fn omtl(n_tasks: usize, n_features: usize, c: f64, global_norm: &str, explicit: bool) -> PyResult<Self> {
        let m = guarded(|| Omtl::new(n_tasks, n_features, c, GlobalNorm::parse(global_norm)?, explicit))?;
        Ok(wrap(AnyLearner::Omtl(m)))
    }

    /// MTFL (`regularizer="l21"`) or TRML (`"trace"`), retrained periodically (§6.5).
    #[staticmethod]
    fn batch_mtl(
        n_tasks: usize,
        n_features: usize,
        regularizer: &str,
        rho: f64,
        retrain_every: u64,
        sparse: bool,
    ) -> PyResult<Self> {
        let m = guarded(|| {
            BatchMtl::new(
                n_tasks,
                n_features,
                Regularizer::parse(regularizer)?,
                rho,
                retrain_every,
                sparse,
            )
        })?;
        Ok(wrap(AnyLearner::BatchMtl(m)))
    }

    /// Learner-specific fitted arrays by name (copies).
    fn arrays<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (name, shape, data) in self.with_model(py, |m| m.arrays())? {
            d.set_item(name, data.into_pyarray(py).reshape(shape.as_slice())?)?;
        }
        Ok(d)
    }

    /// ROMCO (§5): `update` is "loss" or "mistake"; `svt_route` ("auto", or "gram", "qr",
    /// "brand" for tests and benchmarks) selects the SVT implementation of §5.5.
    #[staticmethod]
    #[pyo3(signature = (n_tasks, n_features, *, eta1, eta2, lambda1, lambda2, update, svt_route="auto"))]
    #[allow(clippy::too_many_arguments)]
    fn romco(
        n_tasks: usize,
        n_features: usize,
        eta1: f64,
        eta2: f64,
        lambda1: f64,
        lambda2: f64,
        update: &str,
        svt_route: &str,
    ) -> PyResult<Self> {
        let m = guarded(|| {
            let route = SvtRoute::parse(svt_route)?;
            Ok(Romco::new(
                n_tasks,
                n_features,
                eta1,
                eta2,
                lambda1,
                lambda2,
                RomcoTrigger::parse(update)?,
            )?
            .with_route(route))
        })?;
        Ok(wrap(AnyLearner::Romco(m)))
    }

    /// PA-Global (`shared = true`) or PA-Unique (§6.1); `variant` is "pa", "pa1" or "pa2".
    #[staticmethod]
    #[pyo3(signature = (n_tasks, n_features, *, shared, c, variant))]
    fn passive_aggressive(n_tasks: usize, n_features: usize, shared: bool, c: f64, variant: &str) -> PyResult<Self> {
        let m = guarded(|| PassiveAggressive::new(n_tasks, n_features, shared, PaVariant::parse(variant)?, c))?;
        Ok(wrap(AnyLearner::PassiveAggressive(m)))
    }

    /// MTLinear: online linear learning on the task-graph feature map (docs/mt_linear.md);
    /// `loss` is "logistic", "hinge" or "squared", `update` "normalized", "adagrad" or "sgd".
    #[staticmethod]
    #[pyo3(signature = (task_kernel, n_features, *, loss, update, learning_rate, fit_intercept, hash_bits=None))]
    #[allow(clippy::too_many_arguments)]
    fn mt_linear(
        task_kernel: &NativeTaskKernel,
        n_features: usize,
        loss: &str,
        update: &str,
        learning_rate: f64,
        fit_intercept: bool,
        hash_bits: Option<u32>,
    ) -> PyResult<Self> {
        let m = guarded(|| {
            let params = MTLinearParams::new(
                Loss::parse(loss)?,
                UpdateRule::parse(update)?,
                learning_rate,
                fit_intercept,
                hash_bits,
            )?;
            MTLinear::new(&task_kernel.inner, n_features, params)
        })?;
        Ok(wrap(AnyLearner::MTLinear(m)))
    }

    /// Protocol P2 over a batch (§1.2): rows with equal consecutive round ids form a round.
    /// Learners without a round rule flatten it (§1.3). Returns the pre-update scores.
    fn learn_rounds<'py>(
        &self,
        py: Python<'py>,
        x: RowsArg<'py>,
        tasks: PyReadonlyArray1<'py, i64>,
        y: PyReadonlyArray1<'py, f64>,
        rounds: PyReadonlyArray1<'py, i64>,
    ) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let rows = x.view()?;
        let (tasks, y, rounds) = (slice1(&tasks, "tasks")?, slice1(&y, "y")?, slice1(&rounds, "rounds")?);
        let scores = self.run_interruptible(py, |m| learner::learn_rounds(m, &rows, tasks, y, rounds))?;
        Ok(scores.into_pyarray(py))
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

    /// Online protocol over a batch; returns the pre-update scores. Releases the GIL.
    fn learn<'py>(
        &self,
        py: Python<'py>,
        x: RowsArg<'py>,
        tasks: PyReadonlyArray1<'py, i64>,
        y: PyReadonlyArray1<'py, f64>,
    ) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let rows = x.view()?;
        let (tasks, y) = (slice1(&tasks, "tasks")?, slice1(&y, "y")?);
        let scores = self.run_interruptible(py, |m| learner::learn(m, &rows, tasks, y))?;
        Ok(scores.into_pyarray(py))
    }

    /// Scores a batch without changing the model. Releases the GIL.
    fn decision<'py>(
        &self,
        py: Python<'py>,
        x: RowsArg<'py>,
        tasks: PyReadonlyArray1<'py, i64>,
    ) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let rows = x.view()?;
        let tasks = slice1(&tasks, "tasks")?;
        let scores = self.run_interruptible(py, |m| learner::decision(m, &rows, tasks))?;
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
        let bytes = self.run(py, |m| {
            state::encode(&VersionedState {
                version: STATE_VERSION,
                learner: &*m,
            })
        })?;
        Ok(PyBytes::new(py, &bytes))
    }

    /// A learner from untrusted bytes: decoded within the payload's size, then every invariant
    /// checked ([`CheckState`]); anything else raises ValueError. Runs without the GIL.
    #[staticmethod]
    fn from_bytes(py: Python<'_>, state: &[u8]) -> PyResult<Self> {
        let inner = py.detach(|| guarded(|| decode_state(state)))?;
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

    /// Panics inside the guard (test hook: a panic must reach Python as RuntimeError).
    #[staticmethod]
    fn _panic_for_tests(py: Python<'_>) -> PyResult<()> {
        let model = wrap(AnyLearner::CwCol(guarded(|| CwCol::new(1, 1, 0.85, 1.0, 0.5))?));
        model.with_model(py, |_| panic!("a deliberate panic (test hook)"))
    }
}

/// `(W, c, objective, n_iter, L)` of [`batch_mtl_solve`].
type SolveOutput<'py> = (Bound<'py, PyArray1<f64>>, Bound<'py, PyArray1<f64>>, f64, usize, f64);

/// The MTFL/TRML solver on one batch (for tests, INV-M1/M2): returns `(W (k x d), c, objective,
/// n_iter, final line-search L)` after an accelerated proximal gradient warm-started from `(w0, c0)`.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
#[pyo3(signature = (x, tasks, y, n_tasks, regularizer, rho, w0, c0, tol, max_iter))]
pub fn batch_mtl_solve<'py>(
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
pub fn omtl_tau(losses: Vec<f64>, sq_norms: Vec<f64>, c: f64, global_norm: &str, explicit: bool) -> PyResult<Vec<f64>> {
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
