//! MTBPRJ (Alg. 1): projection in the multitask RKHS, one weight per active example.

use super::*;

/// MTBPRJ (Cavallanti & Cesa-Bianchi, Alg. 1; §4.4): the budget Projectron projecting in the
/// multitask RKHS, one coefficient per stored example. Built with [`Build::build`] from
/// [`ProjectronParams`], a task kernel and a base kernel.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MTBPRJ {
    pub(super) kernel: BaseKernel,
    pub(super) tasks: TaskKernel,
    pub(super) n_features: usize,
    pub(super) params: ProjectronParams,
    pub(super) set: ActiveSet,
    pub(super) gram: InverseGram,
    pub(super) counters: Counters,
}

impl Build for MTBPRJ {
    type Params = ProjectronParams;
    type Setting<'a> = KernelSetting<'a>;

    fn from_checked(params: &Checked<ProjectronParams>, setting: &KernelSetting) -> Result<Self> {
        Ok(Self {
            kernel: setting.kernel,
            tasks: setting.task_kernel.clone(),
            n_features: setting.n_features,
            params: **params,
            set: ActiveSet::new(setting.n_features, setting.sparse),
            gram: InverseGram::new(params.budget.saturating_add(1)),
            counters: Counters::default(),
        })
    }
}

impl MTBPRJ {
    /// The stored examples.
    pub fn active_set(&self) -> &ActiveSet {
        &self.set
    }

    /// Number of mistakes absorbed by projection (the example was not stored).
    pub fn n_projections(&self) -> u64 {
        self.counters.n_projections
    }

    /// Number of stored examples removed to keep within the budget.
    pub fn n_evictions(&self) -> u64 {
        self.counters.n_evictions
    }

    /// `T[i_j, i_k] K'(x_j, x_k)` between two stored slots.
    pub fn gram_entry(&self, a: usize, b: usize) -> f64 {
        let t = self.tasks.get(self.set.task(a), self.set.task(b));
        if t == 0.0 {
            return 0.0;
        }
        t * self.set.rows().kernel_between(&self.kernel, a, b)
    }

    /// Coefficients β in insertion order.
    pub fn betas_in_order(&self) -> Vec<f64> {
        self.set.slots_in_order().map(|s| self.set.beta(s)).collect()
    }
}

impl MTBPRJ {
    /// Same hyper-parameters as `other`.
    pub fn same_settings(&self, other: &Self) -> bool {
        same_kernel_setting!(self, other) && self.params == other.params
    }
}

impl CheckState for MTBPRJ {
    fn check_state(&self) -> Result<()> {
        check_settings(&self.kernel, &self.tasks, self.n_features, &self.params)?;
        let last = self
            .set
            .check_state(&self.kernel, self.tasks.n_tasks(), self.n_features)?;
        let n = self.set.len();
        ensure(n <= self.params.budget, || {
            format!("{n} stored elements exceed the budget {}", self.params.budget)
        })?;
        self.gram.check_state(n, self.params.budget.saturating_add(1))?;
        self.counters.check_state(n, last)
    }
}

impl OnlineLearner for MTBPRJ {
    // Adding tasks grows only the task kernel: the dictionary's Gram entries
    // `T[i_a, i_b] K'(x_a, x_b)` keep their values under `TaskKernel::grow`.
    kernel_shape!(grows_task_kernel);

    fn rebuild_caches(&mut self) {
        self.gram.force_rebuild();
    }

    fn score(&self, x: Row, task: usize, scratch: &mut Scratch) -> f64 {
        // The kernel sums' vectorised path (no sparse index: a Projectron's set is small and
        // changes at every insertion).
        let q = Query::new(x, &self.kernel);
        weighted_score(&self.set, &NO_INDEX, &self.kernel, &self.tasks, &q, task, scratch)
    }

    // Scores made ahead; an update (which may change every coefficient) restarts the window
    // (the default `update_ahead`: every change of the model counts in `n_updates`).
    active_set_ahead!(self, &NO_INDEX, 1.0);

    /// Everything is computed and checked (finiteness, memory) before the first write.
    fn update(&mut self, x: Row, task: usize, y: f64, score: f64, scratch: &mut Scratch) -> Result<()> {
        if !is_update_mistake(y, score) {
            self.counters.n_seen += 1;
            return Ok(());
        }
        let q = Query::new(x, &self.kernel);
        let kz = self
            .set
            .multitask_kernel_row(&self.kernel, &self.tasks, &q, task, scratch);
        let kappa = self.tasks.get(task, task) * self.kernel.self_value(q.sq_norm);
        let mut alpha = Vec::with_capacity(kz.len());
        let d2 = self.gram.project(&kz, kappa, &mut alpha);
        let step = decide(&self.gram, &self.params, kappa, d2, &alpha, self.set.len())?;
        let time = self.counters.n_seen + 1;
        match step {
            Step::Project => {
                let beta = self.set.beta_mut();
                check_step_finite(beta.iter().zip(&alpha).map(|(b, a)| b + y * a), "projection")?;
                beta.iter_mut().zip(&alpha).for_each(|(b, a)| *b += y * a);
                self.counters.n_projections += 1;
            }
            Step::Insert => {
                self.gram.reserve(self.set.len() + 1, self.params.budget)?;
                self.counters.n_insertions += 1;
                self.set.push(x, task, y, time, y, &self.kernel);
                self.gram.append(&kz, kappa, &alpha, d2);
            }
            Step::Replace => {
                let n = self.set.len();
                // Leave-one-out scores of the enlarged set, old elements only (A-C3, A-C4).
                let r = argmin_oldest(&self.set, |j| {
                    removal_score(self.set.beta(j).abs(), self.gram.tentative_diag(&alpha, d2, j))
                });
                let mut col = Vec::with_capacity(n + 1);
                self.gram.tentative_column(&alpha, d2, r, &mut col);
                let beta_r = self.set.beta(r);
                let qrr = col[r];
                let folded: Vec<f64> = (0..n)
                    .map(|l| {
                        let b = self.set.beta(l);
                        if l != r {
                            b + beta_r * (-col[l] / qrr)
                        } else {
                            b
                        }
                    })
                    .collect();
                let beta_z = y + beta_r * (-col[n] / qrr);
                check_step_finite(folded.iter().copied().chain([beta_z]), "fold of the removed element")?;
                self.counters.n_insertions += 1;
                self.counters.n_evictions += 1;
                self.set.beta_mut().copy_from_slice(&folded);
                // Push first, then swap-remove r: the new element lands in slot r, as in the engine.
                self.set.push(x, task, y, time, beta_z, &self.kernel);
                let pos = position_of(&self.set, r);
                self.set.remove_at(pos);
                self.gram.append_and_remove(&kz, kappa, &alpha, d2, r);
            }
        }
        self.counters.n_seen += 1;
        self.counters.n_updates += 1;
        Ok(())
    }

    active_set_counters!(counters.n_updates, set);

    fn diagnostics(&self) -> Vec<(&'static str, f64)> {
        diagnostics(&self.counters, &self.gram)
    }

    /// Removes the tasks' stored examples with their rows and columns of the inverse Gram
    /// matrix (`InverseGram::remove_positions`: exact across components, a Schur complement
    /// within one). The projections their mistakes added to other stored coefficients stay.
    fn forget_tasks(&mut self, tasks: &[usize]) -> Result<usize> {
        crate::learner::check_forget(tasks, self.tasks.n_tasks())?;
        let Some(keep) = self.set.keep_mask(tasks) else {
            return Ok(0);
        };
        self.gram.remove_positions(&keep);
        let removed = self.set.retain_slots(&keep);
        self.counters.n_forgotten += removed as u64;
        Ok(removed)
    }
}
