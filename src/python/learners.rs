//! One Python class, `NativeLearner`, for every native learner: an enum over the crate's
//! learners, built by one static constructor per algorithm. The Python front end
//! (`omtl._base`) does label handling and validation; this layer checks again, releases the GIL
//! for the batch loop and serialises state for pickling.

use numpy::{IntoPyArray, PyArray1, PyArray2, PyArrayMethods, PyReadonlyArray1};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use serde::{Deserialize, Serialize};

use super::convert::{guarded, slice1, RowsArg};
use super::kernels::{NativeKernel, NativeTaskKernel};
use crate::error::Error;
use crate::learner::{
    self, BatchMtl, CwCol, GlobalNorm, Loss, MTLinear, MTLinearParams, MTPerceptron, Omtl, Omtrl, OnlineLearner,
    PaVariant, PassiveAggressive, ProjectronParams, Regularizer, RelationUpdate, Romco, RomcoTrigger, SvtRoute,
    Threshold, UpdateRule, MTBPRJ, MTBPRJ2, MTFORG, MTRBP,
};
use crate::state::{self, CheckState};

/// Bumped whenever the serialised layout of a learner changes.
pub const STATE_VERSION: u32 = 3;

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
    fn force_rebuild(&mut self) {
        match &mut self.inner {
            AnyLearner::Mtbprj(m) => m.force_rebuild(),
            AnyLearner::Mtbprj2(m) => m.force_rebuild(),
            _ => {}
        }
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
        for (name, shape, data) in self.inner.get().arrays() {
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
        &mut self,
        py: Python<'py>,
        x: RowsArg<'py>,
        tasks: PyReadonlyArray1<'py, i64>,
        y: PyReadonlyArray1<'py, f64>,
        rounds: PyReadonlyArray1<'py, i64>,
    ) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let rows = x.view()?;
        let (tasks, y, rounds) = (slice1(&tasks, "tasks")?, slice1(&y, "y")?, slice1(&rounds, "rounds")?);
        let model = self.inner.get_mut();
        let scores = py.detach(|| guarded(|| learner::learn_rounds(model, &rows, tasks, y, rounds)))?;
        Ok(scores.into_pyarray(py))
    }

    /// ROMCO's `(U, V)`, each `n_features x n_tasks`.
    #[allow(clippy::type_complexity)]
    fn factors<'py>(&self, py: Python<'py>) -> PyResult<(Bound<'py, PyArray2<f64>>, Bound<'py, PyArray2<f64>>)> {
        match &self.inner {
            AnyLearner::Romco(m) => {
                let shape = [m.n_features(), m.n_tasks()];
                Ok((
                    m.u_matrix().into_pyarray(py).reshape(shape)?,
                    m.v_matrix().into_pyarray(py).reshape(shape)?,
                ))
            }
            _ => Err(PyValueError::new_err("factors() is defined for ROMCO only")),
        }
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
    fn decision<'py>(
        &self,
        py: Python<'py>,
        x: RowsArg<'py>,
        tasks: PyReadonlyArray1<'py, i64>,
    ) -> PyResult<Bound<'py, PyArray1<f64>>> {
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

    /// The versioned, serialised state (for pickling and `omtl.save`).
    fn to_bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let bytes = guarded(|| {
            state::encode(&VersionedState {
                version: STATE_VERSION,
                learner: &self.inner,
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
    fn kind(&self) -> &'static str {
        match &self.inner {
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

    /// True when `other` is the same algorithm with the same hyper-parameters (not the same
    /// fitted state): how a restored learner is matched with the estimator that holds it.
    fn same_settings(&self, other: &NativeLearner) -> bool {
        use AnyLearner as A;
        match (&self.inner, &other.inner) {
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

    /// Checks the invariants of the current state (what `from_bytes` checks); raises ValueError.
    fn check_state(&self) -> PyResult<()> {
        guarded(|| self.inner.check_state())
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
        let report = learner::batch_mtl::solve(&rows, &t32, y, n_tasks, reg, rho, &mut w, &mut c, opts);
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
