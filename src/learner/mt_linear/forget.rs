//! Forgetting tasks: their own blocks' cells and counters go.

use std::collections::HashSet;

use super::*;

impl MTLinear {
    /// [`OnlineLearner::forget_tasks`]: the tasks' own blocks go (dense blocks dropped, sparse
    /// records removed) and, on the disconnected graph, their counters reset, so that each is a
    /// task never updated. On the disconnected graph with exact storage the other tasks are
    /// untouched (exact). The complete graph's shared block, and under hashing the one table
    /// every block shares, keep the tasks' influence. A general task graph spreads each example
    /// over the blocks of its component, from which one task's share cannot be taken out: refused.
    pub(super) fn forget(&mut self, tasks: &[usize]) -> Result<usize> {
        crate::learner::check_forget(tasks, self.n_tasks)?;
        if matches!(self.tasks, TaskKernel::Dense { .. }) {
            return Err(invalid(
                "tasks",
                "MTLinear on a general task graph spreads every example over the blocks of its task's component, \
                 from which one task's share cannot be taken out; the disconnected and complete graphs can forget",
            ));
        }
        if matches!(self.tasks, TaskKernel::Complete { k: 1, .. }) {
            return Err(invalid(
                "tasks",
                "a one-task complete graph keeps one block, which is its shared block: nothing is the task's own",
            ));
        }
        self.journal.clear();
        if let Store::Sparse(cells) = &mut self.store {
            if self.budget.is_some() {
                cells.enable_chains(self.n_tasks)?;
            }
        }
        for &t in tasks {
            if matches!(self.tasks, TaskKernel::Disconnected { .. }) {
                self.stats[t] = ComponentStats::default();
            }
        }
        match &mut self.store {
            Store::Dense { own, .. } => {
                for &t in tasks {
                    if let Some(mut block) = own[t].take() {
                        block.fill(0.0);
                    }
                }
            }
            Store::Sparse(_) if self.budget.is_some() => self.forget_users(tasks)?,
            Store::Sparse(cells) => {
                let blocks: HashSet<u32> = tasks.iter().map(|&t| t as u32).collect();
                cells.remove_blocks(&blocks);
            }
            Store::Hashed { .. } => {}
        }
        Ok(0)
    }
}
