//! The primal form of the multitask linear Perceptron (ALGORITHMS.md §3.3): per-task weight
//! blocks instead of an active set, so an example costs O(nnz) however many mistakes were made.
//!
//! Blocks are allocated on a task's first update. For the closed-form task kernels the update
//! touches one block (plus one shared block for the complete graph); for a general T it touches
//! the blocks of the task's component.

use serde::{Deserialize, Serialize};

use crate::data::Row;
use crate::error::Result;
use crate::kernel::TaskKernel;
use crate::state::{check_finite, check_len, ensure};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinearWeights {
    n_features: usize,
    /// Cosine-normalised linear kernel: work with x / ||x||.
    normalize: bool,
    /// Disconnected/complete: the raw sum `u_s = sum y x` of task s's updates.
    /// Dense T: the full block `w_s = sum_i T[s,i] u_i`.
    blocks: Vec<Option<Vec<f64>>>,
    /// Complete graph only: `sum_s u_s`.
    shared: Option<Vec<f64>>,
    /// Dense T only: the members of each component.
    members: Vec<Vec<usize>>,
}

impl LinearWeights {
    pub fn new(n_features: usize, normalize: bool, tasks: &TaskKernel) -> Self {
        let members = match tasks {
            TaskKernel::Dense { .. } => tasks.component_members(),
            _ => Vec::new(),
        };
        Self {
            n_features,
            normalize,
            blocks: vec![None; tasks.n_tasks()],
            shared: None,
            members,
        }
    }

    /// A restored primal model of `n_features` features on `tasks` with kernel normalisation
    /// `normalize`: one optional finite block of length d per task, a shared block only for the
    /// complete graph, and the component members of a dense T.
    pub(crate) fn check_state(&self, tasks: &TaskKernel, n_features: usize, normalize: bool) -> Result<()> {
        check_len("primal weights' n_features", self.n_features, n_features)?;
        ensure(self.normalize == normalize, || {
            "the primal weights' normalisation differs from the kernel's".into()
        })?;
        check_len("primal weight blocks", self.blocks.len(), tasks.n_tasks())?;
        for block in self.blocks.iter().chain(std::iter::once(&self.shared)).flatten() {
            check_len("a primal weight block", block.len(), n_features)?;
            check_finite("a primal weight block", block)?;
        }
        ensure(
            self.shared.is_none() || matches!(tasks, TaskKernel::Complete { .. }),
            || "a shared primal block without the complete graph".into(),
        )?;
        let members = match tasks {
            TaskKernel::Dense { .. } => tasks.component_members(),
            _ => Vec::new(),
        };
        ensure(self.members == members, || {
            "the primal weights' component members differ from the task kernel's".into()
        })
    }

    fn input_scale(&self, x: &Row) -> f64 {
        if self.normalize {
            let n = x.sq_norm();
            if n > 0.0 {
                1.0 / n.sqrt()
            } else {
                0.0
            }
        } else {
            1.0
        }
    }

    fn block_dot(&self, task: usize, x: &Row) -> f64 {
        self.blocks[task].as_ref().map_or(0.0, |w| x.dot(w))
    }

    pub fn score(&self, tasks: &TaskKernel, x: Row, task: usize) -> f64 {
        let raw = match tasks {
            TaskKernel::Disconnected { scale, .. } => scale * self.block_dot(task, &x),
            TaskKernel::Complete { diag, off, .. } => {
                (diag - off) * self.block_dot(task, &x) + off * self.shared.as_ref().map_or(0.0, |w| x.dot(w))
            }
            TaskKernel::Dense { .. } => self.block_dot(task, &x),
        };
        raw * self.input_scale(&x)
    }

    /// Adds `y * K([x, task], ·)` to the model.
    pub fn add(&mut self, tasks: &TaskKernel, x: Row, task: usize, y: f64) {
        let step = y * self.input_scale(&x);
        let d = self.n_features;
        match tasks {
            TaskKernel::Disconnected { .. } | TaskKernel::Complete { .. } => {
                x.add_to(self.blocks[task].get_or_insert_with(|| vec![0.0; d]), step);
                if matches!(tasks, TaskKernel::Complete { .. }) {
                    x.add_to(self.shared.get_or_insert_with(|| vec![0.0; d]), step);
                }
            }
            TaskKernel::Dense { .. } => {
                for &s in &self.members[tasks.component(task)] {
                    let t = tasks.get(s, task);
                    if t != 0.0 {
                        x.add_to(self.blocks[s].get_or_insert_with(|| vec![0.0; d]), step * t);
                    }
                }
            }
        }
    }

    /// Number of allocated weight blocks (the memory in use, in units of d floats).
    pub fn n_blocks(&self) -> usize {
        self.blocks.iter().filter(|b| b.is_some()).count() + usize::from(self.shared.is_some())
    }
}
