//! Unbounded kernel Perceptrons (ALGORITHMS.md §3).
//!
//! The multitask kernel Perceptron (Cavallanti, Cesa-Bianchi & Gentile, JMLR 2010; kernel of
//! Evgeniou, Micchelli & Pontil, JMLR 2005) scores `f_i(x) = sum_j beta_j T[i_j, i] K'(x_j, x)`
//! and, on an update-mistake `y f <= 0`, appends `([x, i], y)`. The Perceptron battery (k
//! independent kernel Perceptrons) is the same learner with T = I (INV-P2).
//! With the linear kernel the model is kept in primal form (§3.3): O(nnz) per example.

use serde::{Deserialize, Serialize};

use crate::data::Row;
use crate::error::Result;
use crate::kernel::kernel_sum::{rows_scores, weighted_score, window_width, SparseIndex};
use crate::kernel::{BaseKernel, KernelKind, Query, Scratch, TaskKernel};
use crate::learner::{
    is_update_mistake, score_each, ActiveSet, Ahead, Build, Checked, Dims, Event, KernelSetting, LinearWeights,
    NoParams, OnlineLearner,
};
use crate::state::{check_counts, ensure, CheckState};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
enum Model {
    Primal(LinearWeights),
    /// The active set and, for sparse rows, the inverted index the fast score path reads.
    Dual(ActiveSet, SparseIndex),
}

/// The multitask kernel Perceptron (Cavallanti, Cesa-Bianchi & Gentile, JMLR 2010; §3.3): no
/// budget, every update-mistake is stored. With the linear kernel the model is kept in primal
/// form (O(nnz) per example). Built with [`Build::build`] from a [`KernelSetting`]; no hyper-parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MTPerceptron {
    kernel: BaseKernel,
    tasks: TaskKernel,
    n_features: usize,
    model: Model,
    n_updates: u64,
    n_seen: u64,
}

impl MTPerceptron {
    /// The same learner always kept as an active set, also for the linear kernel (the oracle
    /// for the primal form).
    pub fn dual(setting: &KernelSetting) -> Result<Self> {
        setting.check_dims()?;
        Self::with_form(setting, false)
    }

    fn with_form(setting: &KernelSetting, primal: bool) -> Result<Self> {
        let (tasks, kernel) = (setting.task_kernel.clone(), setting.kernel);
        let (n_features, sparse) = (setting.n_features, setting.sparse);
        let model = if primal {
            Model::Primal(LinearWeights::new(n_features, kernel.normalize, &tasks)?)
        } else {
            Model::Dual(ActiveSet::new(n_features, sparse), SparseIndex::new(sparse))
        };
        Ok(Self {
            kernel,
            tasks,
            n_features,
            model,
            n_updates: 0,
            n_seen: 0,
        })
    }

    /// The task kernel T.
    pub fn task_kernel(&self) -> &TaskKernel {
        &self.tasks
    }

    /// Whether the model is kept as weight vectors (linear kernel) rather than an active set.
    pub fn is_primal(&self) -> bool {
        matches!(self.model, Model::Primal(_))
    }
}

impl Build for MTPerceptron {
    type Params = NoParams;
    type Setting<'a> = KernelSetting<'a>;

    fn from_checked(_: &Checked<NoParams>, setting: &KernelSetting) -> Result<Self> {
        Self::with_form(setting, matches!(setting.kernel.kind, KernelKind::Linear))
    }
}

impl MTPerceptron {
    /// Same hyper-parameters (kernel, task kernel, features, primal or dual form) as `other`.
    pub fn same_settings(&self, other: &Self) -> bool {
        same_kernel_setting!(self, other) && self.is_primal() == other.is_primal()
    }
}

impl CheckState for MTPerceptron {
    fn check_state(&self) -> Result<()> {
        self.kernel.check_state()?;
        self.tasks.check_state()?;
        ensure(self.n_features >= 1, || "n_features must be >= 1".into())?;
        check_counts("MTPerceptron", &[self.n_updates, self.n_seen])?;
        ensure(self.n_updates <= self.n_seen, || {
            "more updates than examples seen".into()
        })?;
        match &self.model {
            Model::Primal(w) => {
                ensure(matches!(self.kernel.kind, KernelKind::Linear), || {
                    "a primal model needs the linear kernel".into()
                })?;
                w.check_state(&self.tasks, self.n_features, self.kernel.normalize)
            }
            Model::Dual(set, index) => {
                let last = set.check_state(&self.kernel, self.tasks.n_tasks(), self.n_features)?;
                index.check_state(set)?;
                // Every update-mistake appends one element.
                ensure(set.len() as u64 == self.n_updates && last <= self.n_seen, || {
                    format!(
                        "{} stored elements for {} updates (times up to {last}, {} seen)",
                        set.len(),
                        self.n_updates,
                        self.n_seen
                    )
                })
            }
        }
    }
}

impl OnlineLearner for MTPerceptron {
    kernel_shape!(grows);

    fn score(&self, x: Row, task: usize, scratch: &mut Scratch) -> f64 {
        match &self.model {
            Model::Primal(w) => w.score(&self.tasks, x, task),
            Model::Dual(set, index) => {
                let q = Query::new(x, &self.kernel);
                weighted_score(set, index, &self.kernel, &self.tasks, &q, task, scratch)
            }
        }
    }

    fn update(&mut self, x: Row, task: usize, y: f64, score: f64, _scratch: &mut Scratch) -> Result<()> {
        self.update_with(x, task, y, score, &mut Ahead::none())
    }

    fn lookahead(&self) -> usize {
        match &self.model {
            Model::Primal(_) => 1,
            Model::Dual(set, _) => window_width(set, &self.tasks),
        }
    }

    fn score_ahead(&self, rows: &[Row], tasks: &[usize], out: &mut [f64], scratch: &mut Scratch) {
        match &self.model {
            Model::Dual(set, index) => rows_scores(set, index, &self.kernel, &self.tasks, rows, tasks, out, scratch),
            Model::Primal(_) => score_each(self, rows, tasks, out, scratch),
        }
    }

    fn update_ahead(&mut self, event: Event, ahead: &mut Ahead, _scratch: &mut Scratch) -> Result<bool> {
        let Event { x, task, y, score } = event;
        let dual = !self.is_primal();
        self.update_with(x, task, y, score, ahead)?;
        // The primal form's scores are not corrected: fresh unless it changed.
        Ok(dual || !is_update_mistake(y, score))
    }

    fn n_updates(&self) -> u64 {
        self.n_updates
    }

    fn n_active(&self) -> usize {
        match &self.model {
            Model::Primal(_) => self.n_updates as usize,
            Model::Dual(set, _) => set.len(),
        }
    }

    /// The primal form journals the blocks it writes; the dual form (an active set of every
    /// mistake) runs a batch on a copy.
    fn journal_begin(&mut self) -> bool {
        let Model::Primal(w) = &mut self.model else {
            return false;
        };
        w.journal_begin();
        w.journal.counts = [self.n_updates, self.n_seen, 0, 0];
        // The closed forms are a few numbers; a general kernel never grows.
        w.journal.kernel = (!matches!(self.tasks, TaskKernel::Dense { .. })).then(|| self.tasks.clone());
        true
    }

    fn journal_commit(&mut self) {
        if let Model::Primal(w) = &mut self.model {
            w.journal.commit();
        }
    }

    fn journal_rollback(&mut self) {
        if let Model::Primal(w) = &mut self.model {
            if !w.journal.is_active() {
                return;
            }
            let [n_updates, n_seen, ..] = w.journal.counts;
            (self.n_updates, self.n_seen) = (n_updates, n_seen);
            if let Some(tasks) = w.journal.kernel.take() {
                self.tasks = tasks;
            }
            w.journal_rollback();
        }
    }

    /// The dual form removes the tasks' stored examples (and rebuilds its index); on the
    /// disconnected graph the other tasks' scores are then those of the model learned without
    /// them, bit for bit. The primal form takes the tasks' sums out (see `LinearWeights::forget`).
    fn forget_tasks(&mut self, tasks: &[usize]) -> Result<usize> {
        crate::learner::check_forget(tasks, self.tasks.n_tasks())?;
        match &mut self.model {
            Model::Primal(w) => {
                w.forget(&self.tasks, tasks)?;
                Ok(0)
            }
            Model::Dual(set, index) => {
                let removed = set.remove_tasks(tasks);
                if removed > 0 {
                    index.reset();
                    self.n_updates -= removed as u64;
                }
                Ok(removed)
            }
        }
    }
}

impl MTPerceptron {
    /// The update; in dual form the new element's term enters the pending scores.
    fn update_with(&mut self, x: Row, task: usize, y: f64, score: f64, ahead: &mut Ahead) -> Result<()> {
        if is_update_mistake(y, score) {
            match &mut self.model {
                // Checks and allocates before it writes (on `Err` nothing has changed).
                Model::Primal(w) => w.add(&self.tasks, x, task, y)?,
                Model::Dual(set, index) => {
                    index.ensure(set);
                    let slot = set.push(x, task, y, self.n_seen + 1, y, &self.kernel);
                    index.add(set, slot);
                    ahead.add_term(&self.kernel, &self.tasks, x, task, y);
                }
            }
            self.n_updates += 1;
        }
        self.n_seen += 1;
        Ok(())
    }
}

impl MTPerceptron {
    /// Adds `n` tasks (open-ended task sets): the task kernel grows ([`TaskKernel::grow`]) and,
    /// in primal form, `n` empty weight slots are added; the stored examples keep their tasks.
    /// Atomic: on `Err` the model is unchanged.
    fn grow_tasks(&mut self, n: usize) -> Result<()> {
        let mut tasks = self.tasks.clone();
        tasks.grow(n)?;
        if let Model::Primal(w) = &mut self.model {
            w.grow(n)?;
        }
        self.tasks = tasks;
        Ok(())
    }

    /// Undoes [`MTPerceptron::grow_tasks`] of the last `n` tasks, which hold no example.
    fn shrink_tasks(&mut self, n: usize) {
        self.tasks.shrink(n);
        if let Model::Primal(w) = &mut self.model {
            w.shrink(n);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::Rows;
    use crate::learner::learn;
    use crate::learner::test_support::stream;

    fn random_stream(n: usize, d: usize, k: usize, seed: u64) -> (Vec<f64>, Vec<i64>, Vec<f64>) {
        stream(n, d, k, seed, |x, _, _| x[0] + 0.3 * x[1] > 0.0)
    }

    #[test]
    fn primal_equals_dual_for_the_linear_kernel() {
        let (n, d, k) = (600, 6, 4);
        let (x, tasks, y) = random_stream(n, d, k, 7);
        let rows = Rows::dense(&x, n, d);
        for tk in [
            TaskKernel::complete(k).unwrap(),
            TaskKernel::disconnected(k).unwrap(),
            TaskKernel::from_edges(k, &[(0, 1, 1.0), (1, 2, 0.5)]).unwrap(),
        ] {
            let mut primal =
                MTPerceptron::build(&NoParams, &KernelSetting::new(&tk.clone(), BaseKernel::linear(), d)).unwrap();
            let mut dual = MTPerceptron::dual(&KernelSetting::new(&tk, BaseKernel::linear(), d)).unwrap();
            assert!(primal.is_primal() && !dual.is_primal());
            let a = learn(&mut primal, &rows, &tasks, &y).unwrap();
            let b = learn(&mut dual, &rows, &tasks, &y).unwrap();
            for (p, q) in a.iter().zip(&b) {
                assert!((p - q).abs() <= 1e-9 * q.abs().max(1.0));
            }
            assert_eq!(primal.n_active(), dual.n_active());
        }
    }

    #[test]
    fn a_model_grown_task_by_task_equals_one_built_with_the_final_size() {
        let (n, d, k) = (300, 5, 4);
        let (x, mut tasks, y) = random_stream(n, d, k, 3);
        // Task t first appears at row 50 t.
        tasks
            .iter_mut()
            .enumerate()
            .for_each(|(r, t)| *t = (*t).min((r / 50) as i64));
        let open = |k| TaskKernel::complete_open(k).unwrap();
        for (kernel, dual) in [
            (BaseKernel::linear(), false),
            (BaseKernel::linear(), true),
            (BaseKernel::rbf(0.5).unwrap(), true),
        ] {
            for tk in [open(k), TaskKernel::disconnected(k).unwrap()] {
                let small = match tk {
                    TaskKernel::Complete { .. } => open(1),
                    _ => TaskKernel::disconnected(1).unwrap(),
                };
                let build = |t: TaskKernel| {
                    if dual {
                        MTPerceptron::dual(&KernelSetting::new(&t, kernel, d)).unwrap()
                    } else {
                        MTPerceptron::build(&NoParams, &KernelSetting::new(&t, kernel, d)).unwrap()
                    }
                };
                let (mut fixed, mut grown) = (build(tk), build(small));
                let all = Rows::Dense {
                    data: &x,
                    n_rows: n,
                    n_cols: d,
                };
                let expected = learn(&mut fixed, &all, &tasks, &y).unwrap();
                let mut got = Vec::new();
                for lo in (0..n).step_by(25) {
                    let hi = (lo + 25).min(n);
                    let part = Rows::Dense {
                        data: &x[lo * d..hi * d],
                        n_rows: hi - lo,
                        n_cols: d,
                    };
                    let need = tasks[lo..hi].iter().map(|&t| t as usize + 1).max().unwrap();
                    let n_new = need.saturating_sub(grown.n_tasks());
                    // A failing batch (a label out of {±1}) leaves neither rows nor new tasks.
                    let before = grown.clone();
                    let mut bad = y[lo..hi].to_vec();
                    *bad.last_mut().unwrap() = 0.5;
                    assert!(crate::learner::learn_grown(&mut grown, n_new, &part, &tasks[lo..hi], &bad).is_err());
                    assert_eq!(grown, before);
                    got.extend(
                        crate::learner::learn_grown(&mut grown, n_new, &part, &tasks[lo..hi], &y[lo..hi]).unwrap(),
                    );
                }
                assert_eq!(got, expected);
                assert_eq!(grown, fixed);
            }
        }
        // A general task graph does not grow.
        let mut dense = MTPerceptron::build(
            &NoParams,
            &KernelSetting::new(
                &TaskKernel::from_edges(2, &[(0, 1, 1.0)]).unwrap(),
                BaseKernel::linear(),
                d,
            ),
        )
        .unwrap();
        assert!(dense.add_tasks(1).is_err());
        assert_eq!(dense.n_tasks(), 2);
    }

    #[test]
    fn battery_is_the_disconnected_multitask_perceptron() {
        let (n, d, k) = (400, 5, 3);
        let (x, tasks, y) = random_stream(n, d, k, 11);
        let rows = Rows::dense(&x, n, d);
        let kernel = BaseKernel::rbf(0.5).unwrap();
        let mut battery = MTPerceptron::build(
            &NoParams,
            &KernelSetting::new(&TaskKernel::disconnected(k).unwrap(), kernel, d),
        )
        .unwrap();
        let mut single: Vec<MTPerceptron> = (0..k)
            .map(|_| {
                MTPerceptron::build(
                    &NoParams,
                    &KernelSetting::new(&TaskKernel::disconnected(1).unwrap(), kernel, d),
                )
                .unwrap()
            })
            .collect();
        let a = learn(&mut battery, &rows, &tasks, &y).unwrap();
        let mut scratch = Scratch::default();
        for t in 0..n {
            let i = tasks[t] as usize;
            let f = single[i].learn_one(rows.row(t), 0, y[t], &mut scratch).unwrap();
            assert!((f - a[t]).abs() < 1e-12);
        }
    }
}
