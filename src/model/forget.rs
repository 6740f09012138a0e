//! Forgetting tasks ([`Model::forget`]): a user who leaves takes their label, counts, per-task
//! state and stored examples with them (docs/lifecycle.md says what each learner keeps).

use std::collections::HashSet;

use super::{Model, TaskRef};
use crate::error::{invalid, Error, Result};
use crate::learner::OnlineLearner;

/// What [`Model::forget`] removed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ForgetReport {
    /// The engine tasks forgotten, in the order named.
    pub tasks: Vec<usize>,
    /// The examples they had learned (their counts, gone from the book; still in `n_seen`).
    pub n_examples: u64,
    /// The stored examples the learner removed (the active set's, a batch learner's).
    pub n_stored: usize,
    /// The pending events (delayed labels) of the tasks that were dropped.
    pub n_pending: usize,
}

impl Model {
    /// Forgets the tasks `ids` (known labels, or integer ids in index mode; distinct): the
    /// learner removes their stored examples and resets their own state
    /// ([`OnlineLearner::forget_tasks`]), the book drops their counts and, in label mode, their
    /// labels, whose engine tasks become free for the next new labels, and their pending events
    /// (delayed labels) are dropped. A forgotten label
    /// that comes back is a new task with no examples. Atomic: on `Err` (an unknown id, a
    /// learner that cannot forget) nothing changed. Costs what it removes, plus the learner's
    /// re-derivation of its caches (docs/lifecycle.md).
    pub fn forget(&mut self, ids: &[TaskRef]) -> Result<ForgetReport> {
        let Some(fitted) = &mut self.fitted else {
            return Err(invalid("tasks", "forget: the model has learned nothing yet"));
        };
        let book = &fitted.book;
        let n_tasks = book.counts.len();
        let mut tasks = Vec::with_capacity(ids.len());
        let mut seen = HashSet::with_capacity(ids.len());
        for &id in ids {
            let task = match (&book.labels, id) {
                (Some(labels), _) => labels.get(id).map(|t| t as usize),
                (None, TaskRef::Int(i)) => usize::try_from(i).ok().filter(|&i| i < n_tasks),
                (None, TaskRef::Str(_)) => {
                    return Err(Error::WrongType {
                        name: "tasks",
                        reason: format!("this model's tasks are integer ids in [0, {n_tasks}), got {id}"),
                    })
                }
            };
            let Some(task) = task else {
                return Err(invalid("tasks", format!("forget: unknown task {id}")));
            };
            if !seen.insert(task) {
                return Err(invalid("tasks", format!("forget: task {id} is named twice")));
            }
            tasks.push(task);
        }
        let n_stored = fitted.learner.forget_tasks(&tasks)?;
        // Nothing below fails.
        let n_pending = self.pending.remove_tasks(ids);
        let Some(fitted) = &mut self.fitted else {
            unreachable!("fitted above")
        };
        let book = &mut fitted.book;
        let mut n_examples = 0;
        for &t in &tasks {
            n_examples += std::mem::take(&mut book.counts[t]);
            if let Some(labels) = &mut book.labels {
                labels.forget(t as u32);
            }
        }
        book.n_forgotten += n_examples;
        Ok(ForgetReport {
            tasks,
            n_examples,
            n_stored,
            n_pending,
        })
    }
}

#[cfg(test)]
mod tests;
