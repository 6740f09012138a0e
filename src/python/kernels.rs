//! Python classes for the base kernel and the task kernel.

use numpy::{IntoPyArray, PyArray1, PyArray2, PyArrayMethods, PyReadonlyArray2, PyUntypedArrayMethods};
use std::cell::RefCell;
use std::rc::Rc;

use pyo3::prelude::*;

use super::convert::{guarded, RowsArg};
use crate::kernel::{scale_gamma as engine_scale_gamma, BaseKernel, KernelKind, TaskKernel};
use crate::linalg::SymMatrix;

#[pyclass(module = "omtl._native", frozen)]
#[derive(Clone)]
pub struct NativeKernel {
    pub inner: BaseKernel,
}

#[pymethods]
impl NativeKernel {
    #[new]
    #[pyo3(signature = (name, *, gamma, degree, coef0, normalize))]
    fn new(name: &str, gamma: f64, degree: u32, coef0: f64, normalize: bool) -> PyResult<Self> {
        guarded(|| Self::build(name, gamma, degree, coef0, normalize))
    }

    /// The kernel matrix `K'(a_r, b_c)` between two batches.
    fn matrix<'py>(&self, py: Python<'py>, a: RowsArg<'py>, b: RowsArg<'py>) -> PyResult<Bound<'py, PyArray2<f64>>> {
        let (ra, rb) = (a.view()?, b.view()?);
        let values = guarded(|| {
            ra.validate()?;
            rb.validate()?;
            let mut out = Vec::with_capacity(ra.len() * rb.len());
            for r in 0..ra.len() {
                for c in 0..rb.len() {
                    out.push(self.inner.eval(&ra.row(r), &rb.row(c)));
                }
            }
            Ok(out)
        })?;
        values.into_pyarray(py).reshape([ra.len(), rb.len()])
    }
}

impl NativeKernel {
    fn build(name: &str, gamma: f64, degree: u32, coef0: f64, normalize: bool) -> crate::Result<Self> {
        let kind = match name {
            "linear" => KernelKind::Linear,
            "poly" => KernelKind::Poly { degree, gamma, coef0 },
            "rbf" => KernelKind::Rbf { gamma },
            other => {
                return Err(crate::error::invalid(
                    "kernel",
                    format!("unknown kernel {other:?}; expected 'linear', 'poly' or 'rbf'"),
                ))
            }
        };
        Ok(Self {
            inner: BaseKernel::new(kind, normalize)?,
        })
    }
}

#[pyclass(module = "omtl._native", frozen)]
#[derive(Clone)]
pub struct NativeTaskKernel {
    pub inner: TaskKernel,
}

fn matrix_arg(m: &PyReadonlyArray2<'_, f64>) -> PyResult<SymMatrix> {
    let shape = m.shape();
    if shape[0] != shape[1] {
        return Err(pyo3::exceptions::PyValueError::new_err(format!(
            "expected a square matrix, got {}x{}",
            shape[0], shape[1]
        )));
    }
    guarded(|| SymMatrix::new(shape[0], m.as_array().iter().copied().collect()))
}

/// A task kernel from a constructor of the engine, its error mapped to Python's.
fn built(make: impl FnOnce() -> crate::Result<TaskKernel>) -> PyResult<NativeTaskKernel> {
    Ok(NativeTaskKernel { inner: guarded(make)? })
}

/// [`built`] for a factorisation that can take long (a graph's task kernel): the engine polls
/// for signals, and an interrupt raises the signal handler's exception (KeyboardInterrupt).
fn built_interruptible(
    py: Python<'_>,
    make: impl FnOnce() -> crate::Result<TaskKernel> + Send,
) -> PyResult<NativeTaskKernel> {
    // The GIL is released while the engine works; the hook takes it to run the signal handlers.
    py.detach(|| {
        let raised: Rc<RefCell<Option<PyErr>>> = Rc::new(RefCell::new(None));
        let hook_raised = raised.clone();
        let hook = Box::new(move || {
            Python::attach(|py| match py.check_signals() {
                Ok(()) => false,
                Err(e) => {
                    *hook_raised.borrow_mut() = Some(e);
                    true
                }
            })
        });
        match crate::interrupt::with_hook(hook, || guarded(make)) {
            Err(_) if raised.borrow().is_some() => Err(raised.borrow_mut().take().expect("checked")),
            other => Ok(NativeTaskKernel { inner: other? }),
        }
    })
}

#[pymethods]
impl NativeTaskKernel {
    #[staticmethod]
    fn complete(k: usize) -> PyResult<Self> {
        built(|| TaskKernel::complete(k))
    }

    /// The open-ended complete graph: `T_ii = 1`, `T_ij = 1/2` whatever k.
    #[staticmethod]
    fn complete_open(k: usize) -> PyResult<Self> {
        built(|| TaskKernel::complete_open(k))
    }

    #[staticmethod]
    fn disconnected(k: usize) -> PyResult<Self> {
        built(|| TaskKernel::disconnected(k))
    }

    #[staticmethod]
    fn from_edges(py: Python<'_>, k: usize, edges: Vec<(usize, usize, f64)>) -> PyResult<Self> {
        built_interruptible(py, || TaskKernel::from_edges(k, &edges))
    }

    #[staticmethod]
    fn laplacian_pinv(py: Python<'_>, k: usize, edges: Vec<(usize, usize, f64)>) -> PyResult<Self> {
        built_interruptible(py, || TaskKernel::laplacian_pinv(k, &edges))
    }

    #[staticmethod]
    fn from_interaction(a: PyReadonlyArray2<'_, f64>) -> PyResult<Self> {
        let m = matrix_arg(&a)?;
        built(|| TaskKernel::from_interaction(m))
    }

    #[staticmethod]
    fn from_psd_plus_identity(a: PyReadonlyArray2<'_, f64>) -> PyResult<Self> {
        let m = matrix_arg(&a)?;
        built(|| TaskKernel::from_psd_plus_identity(m))
    }

    #[staticmethod]
    fn from_task_kernel(t: PyReadonlyArray2<'_, f64>) -> PyResult<Self> {
        let m = matrix_arg(&t)?;
        built(|| TaskKernel::from_task_kernel(m))
    }

    #[getter]
    fn n_tasks(&self) -> PyResult<usize> {
        guarded(|| Ok(self.inner.n_tasks()))
    }

    fn get(&self, i: usize, j: usize) -> PyResult<f64> {
        let k = self.inner.n_tasks();
        if i >= k || j >= k {
            return Err(pyo3::exceptions::PyIndexError::new_err(format!(
                "task index out of range [0, {k})"
            )));
        }
        guarded(|| Ok(self.inner.get(i, j)))
    }

    fn c_g(&self, radius: f64) -> PyResult<f64> {
        guarded(|| Ok(self.inner.c_g(radius)))
    }

    fn max_diag(&self) -> PyResult<f64> {
        guarded(|| Ok(self.inner.max_diag()))
    }

    fn to_dense<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray2<f64>>> {
        let m = guarded(|| Ok(self.inner.to_dense()))?;
        m.data.into_pyarray(py).reshape([m.n, m.n])
    }

    fn components<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray1<i64>>> {
        let ids = guarded(|| {
            Ok((0..self.inner.n_tasks())
                .map(|i| self.inner.component(i) as i64)
                .collect::<Vec<_>>())
        })?;
        Ok(ids.into_pyarray(py))
    }

    fn scaled(&self, c: f64) -> PyResult<Self> {
        Ok(Self {
            inner: guarded(|| self.inner.scaled(c))?,
        })
    }
}

/// `gamma="scale"` of a first batch: the engine's [`crate::kernel::scale_gamma`].
#[pyfunction]
pub fn scale_gamma(x: RowsArg<'_>) -> PyResult<f64> {
    let rows = x.view()?;
    guarded(|| Ok(engine_scale_gamma(&rows)))
}
