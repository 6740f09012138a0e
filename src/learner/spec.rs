//! How a learner is specified and built: its hyper-parameters as one validated type
//! (`XParams::check` returns them [`Checked`], as linfa's `ParamGuard`: only checked parameters
//! build a learner) and the shape of the problem, typed per learner family ([`LinearSetting`],
//! [`GraphSetting`], [`KernelSetting`]), joined by [`Build::build`].
//!
//! ```
//! use omtl::kernel::{BaseKernel, TaskKernel};
//! use omtl::learner::{Build, GraphSetting, KernelSetting, LinearSetting, MTLinear, MTLinearParams};
//! use omtl::learner::{MTRBPParams, ParamGuard, PassiveAggressive, PassiveAggressiveParams, MTRBP};
//!
//! let graph = TaskKernel::complete(3)?;
//! let linear = MTLinear::build(&MTLinearParams::default(), &GraphSetting::new(&graph, 10))?;
//! let rbf = KernelSetting::new(&graph, BaseKernel::rbf(0.5)?, 10);
//! let budget = MTRBP::build(&MTRBPParams { budget: 100, seed: 1 }, &rbf)?;
//! let pa = PassiveAggressive::build(&PassiveAggressiveParams::default(), &LinearSetting::new(3, 10))?;
//! assert!(MTRBPParams { budget: 0, seed: 1 }.check().is_err()); // a budget is at least 1
//! # Ok::<(), omtl::Error>(())
//! ```

use std::ops::Deref;

use crate::error::{invalid, Result};
use crate::kernel::{BaseKernel, TaskKernel};

/// What every learner family's setting gives: the number of tasks and features, and the one
/// dimension check every build runs first.
pub trait Dims {
    /// Number of tasks (>= 1).
    fn n_tasks(&self) -> usize;
    /// Number of features, the width of every row (>= 1).
    fn n_features(&self) -> usize;

    /// At least one task and one feature.
    fn check_dims(&self) -> Result<()> {
        if self.n_tasks() == 0 {
            return Err(invalid("n_tasks", "must be >= 1"));
        }
        if self.n_features() == 0 {
            return Err(invalid("n_features", "must be >= 1"));
        }
        Ok(())
    }
}

/// The setting of a linear learner (CW-COL, PA, OMTL, OMTRL, ROMCO, MTFL/TRML): tasks and
/// features, and whether rows will mostly be sparse (a hint for a learner that stores them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinearSetting {
    /// Number of tasks.
    pub n_tasks: usize,
    /// Number of features.
    pub n_features: usize,
    /// Store rows sparse (a hint about the data, not a requirement).
    pub sparse: bool,
}

impl LinearSetting {
    /// `n_tasks` tasks of `n_features` features, rows stored dense.
    pub fn new(n_tasks: usize, n_features: usize) -> Self {
        Self {
            n_tasks,
            n_features,
            sparse: false,
        }
    }
}

/// The setting of a learner over a task graph (MTLinear): the task kernel fixes the tasks.
#[derive(Debug, Clone, Copy)]
pub struct GraphSetting<'a> {
    /// The task kernel T.
    pub task_kernel: &'a TaskKernel,
    /// Number of features.
    pub n_features: usize,
}

impl<'a> GraphSetting<'a> {
    /// Over `task_kernel`, `n_features` features.
    pub fn new(task_kernel: &'a TaskKernel, n_features: usize) -> Self {
        Self {
            task_kernel,
            n_features,
        }
    }
}

/// The setting of a kernel learner (the Perceptrons, the budget learners, the Projectrons): a
/// task kernel, a base kernel, the features, and how the active set stores rows.
#[derive(Debug, Clone, Copy)]
pub struct KernelSetting<'a> {
    /// The task kernel T.
    pub task_kernel: &'a TaskKernel,
    /// The base kernel K'.
    pub kernel: BaseKernel,
    /// Number of features.
    pub n_features: usize,
    /// Store the active set's rows sparse (a hint about the data, not a requirement).
    pub sparse: bool,
}

impl<'a> KernelSetting<'a> {
    /// Over `task_kernel` and `kernel`, `n_features` features, rows stored dense.
    pub fn new(task_kernel: &'a TaskKernel, kernel: BaseKernel, n_features: usize) -> Self {
        Self {
            task_kernel,
            kernel,
            n_features,
            sparse: false,
        }
    }
}

impl Dims for LinearSetting {
    fn n_tasks(&self) -> usize {
        self.n_tasks
    }
    fn n_features(&self) -> usize {
        self.n_features
    }
}

impl Dims for GraphSetting<'_> {
    fn n_tasks(&self) -> usize {
        self.task_kernel.n_tasks()
    }
    fn n_features(&self) -> usize {
        self.n_features
    }
}

impl Dims for KernelSetting<'_> {
    fn n_tasks(&self) -> usize {
        self.task_kernel.n_tasks()
    }
    fn n_features(&self) -> usize {
        self.n_features
    }
}

/// Hyper-parameters that passed their [`ParamGuard::check`]: the only form [`Build`] builds
/// from. Reads as the parameters (`Deref`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Checked<P>(P);

impl<P> Deref for Checked<P> {
    type Target = P;

    fn deref(&self) -> &P {
        &self.0
    }
}

impl<P> Checked<P> {
    /// The parameters.
    pub fn into_inner(self) -> P {
        self.0
    }
}

/// A learner's hyper-parameter type (`XParams`): one check of every value (linfa's
/// `ParamGuard`), returning the engine's error.
pub trait ParamGuard: Clone {
    /// `Ok` when every value is in range, else the first [`Error::InvalidParameter`] found.
    ///
    /// [`Error::InvalidParameter`]: crate::Error::InvalidParameter
    fn check_ref(&self) -> Result<()>;

    /// The parameters, checked.
    fn check(&self) -> Result<Checked<Self>> {
        self.check_ref()?;
        Ok(Checked(self.clone()))
    }
}

/// A learner built from its hyper-parameters and the setting of its family.
pub trait Build: Sized {
    /// The learner's hyper-parameter type (`XParams`).
    type Params: ParamGuard;
    /// The learner family's setting ([`LinearSetting`], [`GraphSetting`] or [`KernelSetting`]).
    type Setting<'a>: Dims;

    /// Builds the learner from checked parameters and a setting whose dimensions were checked.
    fn from_checked(params: &Checked<Self::Params>, setting: &Self::Setting<'_>) -> Result<Self>;

    /// The one entry point: checks the setting's dimensions ([`Dims::check_dims`]), then the
    /// parameters ([`ParamGuard::check`]), then builds, so every learner checks in the same order.
    fn build(params: &Self::Params, setting: &Self::Setting<'_>) -> Result<Self> {
        setting.check_dims()?;
        Self::from_checked(&params.check()?, setting)
    }
}

/// The hyper-parameters of a learner that has none (MTPerceptron: its kernels are its setting).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct NoParams;

impl ParamGuard for NoParams {
    fn check_ref(&self) -> Result<()> {
        Ok(())
    }
}

// The rules of the hyper-parameters' values, one wording each. They are the one place the
// ranges are checked: the Python classes check only that a value has the field's type (and fits
// it), and the reference twins are validated by the same build (DECISIONS.md, "Hyper-parameter
// rules in one place").

/// A step size or penalty weight `name`: a finite number >= 0.
pub fn check_nonnegative(name: &'static str, value: f64) -> Result<()> {
    if !(value >= 0.0 && value.is_finite()) {
        return Err(invalid(name, format!("must be a finite number >= 0, got {value}")));
    }
    Ok(())
}

/// A rate, scale or aggressiveness `name` (C, a radius, a learning rate): a finite number > 0.
pub fn check_positive(name: &'static str, value: f64) -> Result<()> {
    if !(value.is_finite() && value > 0.0) {
        return Err(invalid(name, format!("must be a finite number > 0, got {value}")));
    }
    Ok(())
}

/// A count `name` (a budget, a period): at least 1.
pub fn check_at_least_one(name: &'static str, value: u64) -> Result<()> {
    if value == 0 {
        return Err(invalid(name, format!("must be >= 1, got {value}")));
    }
    Ok(())
}

/// A number `name` in `[low, high]`, or in `(low, high)` when `open`.
pub fn check_within(name: &'static str, value: f64, low: f64, high: f64, open: bool) -> Result<()> {
    let inside = if open {
        value > low && value < high
    } else {
        value >= low && value <= high
    };
    if !inside {
        let (l, r) = if open { ('(', ')') } else { ('[', ']') };
        return Err(invalid(name, format!("must lie in {l}{low}, {high}{r}, got {value}")));
    }
    Ok(())
}

/// The aggressiveness C of the PA-style learners (PA, OMTL).
pub fn check_c(c: f64) -> Result<()> {
    check_positive("C", c)
}
