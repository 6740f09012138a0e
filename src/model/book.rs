//! A fitted model's bookkeeping besides its learner: the task labels, the examples seen per
//! task, the label form, the counters, and what the first batch fixed (the width, `gamma`).

use super::labels::LabelForm;
use super::tasks::{Labels, TaskId, TaskRef};
use crate::alloc::Need;
use crate::error::Result;

/// The bookkeeping of a fitted model. Its counts always have one entry per engine task, and
/// its labels (label mode) name at most that many tasks.
#[derive(Debug, Clone, PartialEq)]
pub struct Book {
    pub(super) n_features_in: usize,
    pub(super) labels: Option<Labels>,
    pub(super) counts: Vec<u64>,
    pub(super) label_form: LabelForm,
    pub(super) n_seen: u64,
    pub(super) n_mistakes: u64,
    pub(super) radius_warned: bool,
    pub(super) gamma_scale: Option<f64>,
    pub(super) feature_names_in: Option<Vec<String>>,
    /// Examples of forgotten tasks: counted in `n_seen`, no longer in any task's count.
    pub(super) n_forgotten: u64,
}

impl Book {
    /// The book of a model whose learner has `n_tasks` tasks and `n_features_in` features and
    /// has learned nothing; `labels`: tasks named by labels (label mode).
    pub(super) fn new(n_tasks: usize, n_features_in: usize, labels: Option<Labels>) -> Result<Self> {
        Ok(Book {
            n_features_in,
            labels,
            counts: Need::new("n_tasks", n_tasks, "the per-task example counts").filled(&[n_tasks], 0)?,
            label_form: LabelForm::PlusMinusOne,
            n_seen: 0,
            n_mistakes: 0,
            radius_warned: false,
            gamma_scale: None,
            feature_names_in: None,
            n_forgotten: 0,
        })
    }

    /// The book as a model file stores it, checked as one is read.
    #[allow(clippy::too_many_arguments)]
    pub fn from_parts(
        n_features_in: usize,
        task_labels: Option<&[TaskId]>,
        seen_per_task: Vec<u64>,
        label_form: LabelForm,
        n_seen: u64,
        n_mistakes: u64,
        radius_warned: bool,
        gamma_scale: Option<f64>,
        feature_names_in: Option<Vec<String>>,
    ) -> Result<Self> {
        let labels = task_labels
            .map(|l| Labels::from_ids(l.iter().map(TaskId::as_ref)))
            .transpose()?;
        Ok(Book {
            n_features_in,
            labels,
            counts: seen_per_task,
            label_form,
            n_seen,
            n_mistakes,
            radius_warned,
            gamma_scale,
            feature_names_in,
            n_forgotten: 0,
        })
    }

    /// The book with forgotten tasks: `free` (in label mode, the tasks whose labels were
    /// forgotten, free for new labels) and the `n_forgotten` examples they had learned (still
    /// counted in `n_seen`).
    pub fn with_forgotten(mut self, free: &[u64], n_forgotten: u64) -> Result<Self> {
        if !free.is_empty() {
            let Some(labels) = &self.labels else {
                return Err(crate::error::invalid(
                    "tasks",
                    "free tasks in a model whose tasks are numbered",
                ));
            };
            self.labels = Some(Labels::from_slots(labels.iter(), free)?);
        }
        self.n_forgotten = n_forgotten;
        Ok(self)
    }

    /// The number of features every row has.
    pub fn n_features_in(&self) -> usize {
        self.n_features_in
    }

    /// Examples learned.
    pub fn n_seen(&self) -> u64 {
        self.n_seen
    }

    /// Examples whose prediction before their update was wrong.
    pub fn n_mistakes(&self) -> u64 {
        self.n_mistakes
    }

    /// Examples learned per engine task.
    pub fn seen_per_task(&self) -> &[u64] {
        &self.counts
    }

    /// Examples learned per task of [`Book::task_ids`] (free tasks skipped).
    pub fn seen_per_id(&self) -> Vec<u64> {
        match &self.labels {
            Some(labels) => labels
                .slots()
                .filter(|(_, id)| id.is_some())
                .map(|(t, _)| self.counts[t as usize])
                .collect(),
            None => self.counts.clone(),
        }
    }

    /// Examples of forgotten tasks (counted in [`Book::n_seen`], in no task's count).
    pub fn n_forgotten(&self) -> u64 {
        self.n_forgotten
    }

    /// The free tasks (label mode: their labels forgotten), lowest first.
    pub fn free_tasks(&self) -> Vec<u64> {
        self.labels
            .as_ref()
            .map_or_else(Vec::new, |l| l.free().map(u64::from).collect())
    }

    /// The label form of the last labels learned (what predictions are written in).
    pub fn label_form(&self) -> &LabelForm {
        &self.label_form
    }

    /// The task labels in task order (label mode); `None`: tasks are numbered.
    pub fn labels(&self) -> Option<&Labels> {
        self.labels.as_ref()
    }

    /// The task ids in task order: the labels (label mode; free tasks skipped), else
    /// `0..n_tasks`.
    pub fn task_ids(&self) -> Vec<TaskId> {
        match &self.labels {
            Some(labels) => labels.iter().map(TaskRef::to_owned).collect(),
            None => (0..self.counts.len() as i64).map(TaskId::Int).collect(),
        }
    }

    /// MTFORG warned once that a row exceeded its radius.
    pub fn radius_warned(&self) -> bool {
        self.radius_warned
    }

    /// The value `gamma="scale"` took on the first batch.
    pub fn gamma_scale(&self) -> Option<f64> {
        self.gamma_scale
    }

    /// The column names of a data frame the model was fitted on.
    pub fn feature_names_in(&self) -> Option<&[String]> {
        self.feature_names_in.as_deref()
    }

    /// Bytes held by the book.
    pub fn memory_bytes(&self) -> usize {
        self.counts.capacity() * 8 + self.labels.as_ref().map_or(0, Labels::memory_bytes)
    }
}
