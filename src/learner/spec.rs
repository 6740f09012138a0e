//! How a learner is specified and built: its hyper-parameters as one validated type
//! (`XParams::check`, as linfa's `ParamGuard`) and the shape of the problem ([`Setting`]), joined
//! by [`Build::build`]. The binding builds every learner through this one path.

use crate::error::{invalid, Result};
use crate::kernel::{BaseKernel, TaskKernel};

/// What a learner is built for besides its hyper-parameters: the number of tasks and features,
/// the row storage, and, for the kernel learners, the task kernel (which fixes the number of
/// tasks) and the base kernel.
#[derive(Debug, Clone, Copy)]
pub struct Setting<'a> {
    /// Number of tasks (>= 1; the task kernel's when one is given).
    pub n_tasks: usize,
    /// Number of features, the width of every row (>= 1).
    pub n_features: usize,
    /// Store rows sparse (a kernel learner's active set); a hint about the data, not a
    /// requirement: rows of either kind are accepted.
    pub sparse: bool,
    /// The task kernel, for the learners that take one.
    pub task_kernel: Option<&'a TaskKernel>,
    /// The base kernel, for the kernel learners.
    pub kernel: Option<BaseKernel>,
}

impl<'a> Setting<'a> {
    /// A linear learner's setting: `n_tasks` tasks, `n_features` features.
    pub fn new(n_tasks: usize, n_features: usize, sparse: bool) -> Self {
        Self {
            n_tasks,
            n_features,
            sparse,
            task_kernel: None,
            kernel: None,
        }
    }

    /// A setting over a task kernel (its number of tasks) and, for kernel learners, a base kernel.
    pub fn over(task_kernel: &'a TaskKernel, kernel: Option<BaseKernel>, n_features: usize, sparse: bool) -> Self {
        Self {
            n_tasks: task_kernel.n_tasks(),
            n_features,
            sparse,
            task_kernel: Some(task_kernel),
            kernel,
        }
    }

    /// The one dimension check every build runs first: at least one task and one feature, and a
    /// task kernel (when given) over exactly `n_tasks` tasks.
    pub fn check_dims(&self) -> Result<()> {
        if self.n_tasks == 0 {
            return Err(invalid("n_tasks", "must be >= 1"));
        }
        if self.n_features == 0 {
            return Err(invalid("n_features", "must be >= 1"));
        }
        match self.task_kernel {
            Some(t) if t.n_tasks() != self.n_tasks => Err(invalid(
                "n_tasks",
                format!("is {} but the task kernel has {} tasks", self.n_tasks, t.n_tasks()),
            )),
            _ => Ok(()),
        }
    }

    /// The task kernel of a learner that needs one.
    pub fn task_kernel(&self) -> Result<&'a TaskKernel> {
        self.task_kernel
            .ok_or_else(|| invalid("task_kernel", "this learner needs a task kernel"))
    }

    /// The base kernel of a kernel learner.
    pub fn kernel(&self) -> Result<BaseKernel> {
        self.kernel
            .ok_or_else(|| invalid("kernel", "this learner needs a base kernel"))
    }
}

/// A learner's hyper-parameter type (`XParams`): one check of every value, returning the
/// engine's error (linfa's `ParamGuard`).
pub trait ParamGuard {
    /// `Ok` when every value is in range, else the first [`Error::InvalidParameter`] found.
    ///
    /// [`Error::InvalidParameter`]: crate::Error::InvalidParameter
    fn check(&self) -> Result<()>;
}

/// A learner built from its hyper-parameters and a [`Setting`].
pub trait Build: Sized {
    /// The learner's hyper-parameter type (`XParams`).
    type Params: ParamGuard;

    /// Builds the learner from a checked setting and checked parameters.
    fn from_checked(params: &Self::Params, setting: &Setting) -> Result<Self>;

    /// The one entry point: checks the setting ([`Setting::check_dims`]), then the parameters
    /// ([`ParamGuard::check`]), then builds, so every learner checks in the same order.
    fn build(params: &Self::Params, setting: &Setting) -> Result<Self> {
        setting.check_dims()?;
        params.check()?;
        Self::from_checked(params, setting)
    }

    /// A kernel learner over `tasks` and `kernel`: [`Build::build`] with [`Setting::over`].
    fn with_kernels(
        tasks: &TaskKernel,
        kernel: BaseKernel,
        n_features: usize,
        sparse: bool,
        params: Self::Params,
    ) -> Result<Self> {
        Self::build(&params, &Setting::over(tasks, Some(kernel), n_features, sparse))
    }
}

/// The hyper-parameters of a learner that has none (MTPerceptron: its kernels are its setting).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct NoParams;

impl ParamGuard for NoParams {
    fn check(&self) -> Result<()> {
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
