//! Kernels: the base kernel K', the task kernel T, and their product, the multitask kernel
//! `K([x,i],[x',j]) = T_ij K'(x,x')` (ALGORITHMS.md §2.4), plus the storage kernel models keep.

mod active_set;
mod base;
mod dense_dots;
pub(crate) mod kernel_sum;
mod store;
mod task;

pub(crate) use active_set::retain_flagged;
pub use active_set::ActiveSet;
pub use base::{scale_gamma, BaseKernel, KernelKind};
pub(crate) use kernel_sum::SparseIndex;
pub use store::{Query, RowStore, Scratch};
pub use task::TaskKernel;
// The dense symmetric matrix a task relation is given in (TaskKernel::from_interaction and kin).
pub use crate::linalg::SymMatrix;

use crate::data::Row;

/// The multitask kernel `K([x,i],[x',j]) = T_ij K'(x,x')`.
pub fn multitask_kernel(base: &BaseKernel, tasks: &TaskKernel, x: &Row, i: usize, x2: &Row, j: usize) -> f64 {
    let t = tasks.get(i, j);
    if t == 0.0 {
        return 0.0;
    }
    t * base.eval(x, x2)
}
