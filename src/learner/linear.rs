//! The primal form of the multitask linear Perceptron (ALGORITHMS.md §3.3): per-task weight
//! blocks instead of an active set, so an example costs O(nnz) however many mistakes were made.
//!
//! Blocks are allocated on a task's first update. For the closed-form task kernels the update
//! touches one block (plus one shared block for the complete graph); for a general T it touches
//! the blocks of the task's component.

use serde::{Deserialize, Serialize};

use crate::alloc::Need;
use crate::data::Row;
use crate::error::{Error, Result};
use crate::kernel::TaskKernel;
use crate::learner::undo::{SlotJournal, TryCopy};
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
    /// Undo of the blocks a journaled call writes (see [`SlotJournal`]).
    #[serde(skip)]
    pub(crate) journal: SlotJournal<Option<Vec<f64>>>,
}

impl LinearWeights {
    pub fn new(n_features: usize, normalize: bool, tasks: &TaskKernel) -> Result<Self> {
        let members = match tasks {
            TaskKernel::Dense { .. } => tasks.component_members(),
            _ => Vec::new(),
        };
        let k = tasks.n_tasks();
        Self::check_vectors(k, n_features)?;
        Ok(Self {
            n_features,
            normalize,
            blocks: Need::new("n_tasks", k, "the per-task weight slots").filled(&[k], None)?,
            shared: None,
            members,
            journal: SlotJournal::default(),
        })
    }

    /// The blocks an update of `task` writes with their scale factors (`None`: the shared block).
    fn targets(&self, tasks: &TaskKernel, task: usize) -> Vec<(Option<usize>, f64)> {
        match tasks {
            TaskKernel::Disconnected { .. } => vec![(Some(task), 1.0)],
            TaskKernel::Complete { .. } => vec![(Some(task), 1.0), (None, 1.0)],
            TaskKernel::Dense { .. } => self.members[tasks.component(task)]
                .iter()
                .map(|&s| (Some(s), tasks.get(s, task)))
                .filter(|&(_, t)| t != 0.0)
                .collect(),
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

    /// `n` more (empty) task slots, for a task kernel grown by [`TaskKernel::grow`] (closed
    /// forms only: a dense kernel does not grow). On `Err` nothing has changed.
    pub fn grow(&mut self, n: usize) -> Result<()> {
        let new_k = self.blocks.len().saturating_add(n);
        Self::check_vectors(new_k, self.n_features)?;
        Need::new("n_tasks", new_k, "the per-task weight slots").append_empty(&mut self.blocks, n)?;
        Ok(())
    }

    /// Removes the last `n` task slots, added by [`LinearWeights::grow`] and still empty.
    pub fn shrink(&mut self, n: usize) {
        debug_assert!(self.blocks.iter().rev().take(n).all(Option::is_none));
        self.blocks.truncate(self.blocks.len().saturating_sub(n));
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

    /// Adds `y * K([x, task], ·)` to the model. Every target block is checked (the sum stays
    /// finite) and allocated before the first write, so on `Err` nothing has changed.
    pub fn add(&mut self, tasks: &TaskKernel, x: Row, task: usize, y: f64) -> Result<()> {
        let step = y * self.input_scale(&x);
        let d = self.n_features;
        let targets = self.targets(tasks, task);
        for &(block, t) in &targets {
            let w = match block {
                Some(s) => self.blocks[s].as_deref(),
                None => self.shared.as_deref(),
            };
            let finite = match w {
                Some(w) => x.axpy_stays_finite(w, step * t),
                None => (step * t).is_finite(), // a fresh zero block receives step t x
            };
            if !finite {
                return Err(Error::Numerical(format!(
                    "Perceptron update overflows the weights (step {:e})",
                    step * t
                )));
            }
        }
        for &(block, _) in &targets {
            match block {
                Some(s) => self.journal.touch(&self.blocks, s)?,
                None => {
                    let shared = &self.shared;
                    self.journal.touch_shared(|| shared.try_copy())?;
                }
            }
        }
        let need = Need::new("n_features", d, "a task's weight vector");
        let mut fresh = Vec::new();
        for &(block, _) in &targets {
            let missing = match block {
                Some(s) => self.blocks[s].is_none(),
                None => self.shared.is_none(),
            };
            if missing {
                fresh.push((block, need.filled(&[d], 0.0)?));
            }
        }
        for (block, w) in fresh {
            match block {
                Some(s) => self.blocks[s] = Some(w),
                None => self.shared = Some(w),
            }
        }
        for (block, t) in targets {
            let w = match block {
                Some(s) => self.blocks[s].as_mut(),
                None => self.shared.as_mut(),
            };
            x.add_to(w.expect("allocated above"), step * t);
        }
        Ok(())
    }

    /// Takes the tasks' sums `u_t` out of the model: their blocks go, and the complete graph's
    /// shared sum loses them (up to rounding). A general T's blocks mix every task's sums
    /// (`w_s = Σ_i T[s,i] u_i`, the `u_i` not kept): refused there. On `Err` nothing changed.
    pub fn forget(&mut self, tasks: &TaskKernel, forget: &[usize]) -> Result<()> {
        if matches!(tasks, TaskKernel::Dense { .. }) {
            return Err(crate::error::invalid(
                "tasks",
                "the linear-kernel Perceptron on a general task graph keeps only the mixed blocks                  sum_i T[s,i] u_i, from which one task's examples cannot be taken out; a non-linear kernel                  keeps its examples and can forget them",
            ));
        }
        for &t in forget {
            if let (Some(u), Some(shared)) = (self.blocks[t].as_ref(), self.shared.as_mut()) {
                shared.iter_mut().zip(u).for_each(|(s, v)| *s -= v);
            }
            if let Some(mut u) = self.blocks[t].take() {
                u.fill(0.0);
            }
        }
        Ok(())
    }

    /// Starts the journal of the blocks ([`SlotJournal`]).
    pub(crate) fn journal_begin(&mut self) {
        self.journal.begin(self.blocks.len());
    }

    /// Undoes the journaled writes and the slots added.
    pub(crate) fn journal_rollback(&mut self) {
        if self.journal.is_active() {
            if let Some(shared) = self.journal.rollback(&mut self.blocks) {
                self.shared = shared;
            }
        }
    }

    /// Refuses `n_tasks` per-task vectors of `n_features` doubles that could not all fit in memory.
    pub fn check_vectors(n_tasks: usize, n_features: usize) -> Result<()> {
        Need::new(
            "n_tasks",
            n_tasks,
            "the primal per-task weight vectors (n_tasks x n_features doubles once every task has updated)",
        )
        .count::<f64>(&[n_tasks, n_features])
        .map(drop)
    }
}
