//! Passive-Aggressive baselines (Crammer, Dekel, Keshet, Shalev-Shwartz & Singer, JMLR 2006;
//! ALGORITHMS.md §6.1, A-R9).
//!
//! Linear models scored `w·x`; after each example with hinge loss `ℓ = max(0, 1 - y w·x) > 0`
//! the weights move by `w += τ y x`, with `τ = ℓ/||x||²` (PA), `min(C, ℓ/||x||²)` (PA-I, the
//! default) or `ℓ/(||x||² + 1/(2C))` (PA-II), and `τ = 0` when `x = 0`. PA-Global keeps one `w`
//! for all tasks (task ids ignored); PA-Unique keeps one `w_i` per task, allocated on the task's
//! first update. O(nnz) per example.

use serde::{Deserialize, Serialize};

use crate::alloc::Need;
use crate::data::Row;
use crate::error::{invalid, Error, Result};
use crate::kernel::Scratch;
use crate::learner::shared::{
    check_maps, dense_applied, dense_changes, not_in_step, not_tracking, Mix, Replica, SharedChanges, SharedLayout,
    SharedUpdate,
};
use crate::learner::undo::SlotJournal;
use crate::learner::{check_c, Build, Checked, LinearSetting, OnlineLearner};
use crate::state::{check_counts, check_finite, check_len, param, CheckState};

/// The Passive-Aggressive step rule (§6.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum PaVariant {
    /// PA: `τ = ℓ / ||x||²`.
    Pa,
    /// PA-I: `τ = min(C, ℓ / ||x||²)`.
    Pa1,
    /// PA-II: `τ = ℓ / (||x||² + 1/(2C))`.
    Pa2,
}

impl PaVariant {
    /// The variant named `"pa"`, `"pa1"` or `"pa2"`.
    pub fn parse(name: &str) -> Result<Self> {
        match name {
            "pa" => Ok(Self::Pa),
            "pa1" => Ok(Self::Pa1),
            "pa2" => Ok(Self::Pa2),
            other => Err(invalid(
                "variant",
                format!("expected 'pa', 'pa1' or 'pa2', got {other:?}"),
            )),
        }
    }

    /// The step size `τ` for hinge loss `loss > 0` and `sq_norm = ||x||²`.
    pub fn step(self, loss: f64, sq_norm: f64, c: f64) -> f64 {
        if sq_norm <= 0.0 {
            return 0.0;
        }
        match self {
            Self::Pa => loss / sq_norm,
            Self::Pa1 => c.min(loss / sq_norm),
            Self::Pa2 => loss / (sq_norm + 0.5 / c),
        }
    }
}

/// The Passive-Aggressive baselines (Crammer et al., JMLR 2006; §6.1): PA-Unique (one linear
/// model per task) or PA-Global (one model for all tasks). Built with
/// [`Build::build`] from [`PassiveAggressiveParams`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PassiveAggressive {
    n_tasks: usize,
    n_features: usize,
    /// PA-Global (one shared w) rather than PA-Unique (one w per task).
    global: bool,
    variant: PaVariant,
    c: f64,
    weights: Vec<Option<Vec<f64>>>,
    n_updates: u64,
    #[serde(skip)]
    journal: SlotJournal<Option<Vec<f64>>>,
    /// PA-Global as a replica: its `w` at the last sync ([`crate::learner::shared`]).
    #[serde(skip)]
    shared_base: Option<Vec<Vec<f64>>>,
}

learner_params! {
    /// The Passive-Aggressive learners' hyper-parameters (§6.1); `Default` gives Python's
    /// `PAUnique()`.
    pub struct PassiveAggressiveParams {
        /// PA-Global (one model for all tasks) rather than PA-Unique. Default `false`.
        pub shared: bool,
        /// The aggressiveness C (> 0; Python's `C`). Default 1.
        #[cfg_attr(feature = "python", pyo3(item("C")))]
        pub c: f64,
        /// The step rule. Default [`PaVariant::Pa1`].
        pub variant: PaVariant,
    }

    fn check(&self) -> Result<()> {
        check_c(self.c)
    }
}

impl Build for PassiveAggressive {
    type Params = PassiveAggressiveParams;
    type Setting<'a> = LinearSetting;

    fn from_checked(params: &Checked<PassiveAggressiveParams>, setting: &LinearSetting) -> Result<Self> {
        let (n_tasks, n_features) = (setting.n_tasks, setting.n_features);
        let PassiveAggressiveParams {
            shared: global,
            c,
            variant,
        } = **params;
        let n_blocks = if global { 1 } else { n_tasks };
        check_vectors(n_blocks, n_features)?;
        Ok(Self {
            n_tasks,
            n_features,
            global,
            variant,
            c,
            weights: Need::new("n_tasks", n_tasks, "the per-task weight slots").filled(&[n_blocks], None)?,
            n_updates: 0,
            journal: SlotJournal::default(),
            shared_base: None,
        })
    }
}

/// Refuses a model whose per-task vectors (allocated on each task's first update) could not all
/// fit in memory: PA-Unique keeps a dense vector of `n_features` per task.
fn check_vectors(n_blocks: usize, n_features: usize) -> Result<()> {
    Need::new(
        "n_tasks",
        n_blocks,
        "PA's per-task weight vectors (n_tasks x n_features doubles once every task has updated)",
    )
    .count::<f64>(&[n_blocks, n_features])
    .map(drop)
}

impl PassiveAggressive {
    fn block(&self, task: usize) -> usize {
        if self.global {
            0
        } else {
            task
        }
    }

    /// The weight vector used for `task` (zeros before its first update).
    pub fn weights(&self, task: usize) -> Vec<f64> {
        self.weights[self.block(task)]
            .clone()
            .unwrap_or_else(|| vec![0.0; self.n_features])
    }
}

impl PassiveAggressive {
    same_settings_fields!(n_tasks, n_features, global, variant, c);
}

impl CheckState for PassiveAggressive {
    fn check_state(&self) -> Result<()> {
        check_counts("PA", &[self.n_updates])?;
        let n_blocks = if self.global { 1 } else { self.n_tasks };
        // The length first: it bounds n_tasks by the payload before `new` allocates.
        check_len("PA weight blocks", self.weights.len(), n_blocks)?;
        let params = PassiveAggressiveParams {
            shared: self.global,
            c: self.c,
            variant: self.variant,
        };
        param(Self::build(&params, &LinearSetting::new(self.n_tasks, self.n_features)))?;
        for w in self.weights.iter().flatten() {
            check_len("a PA weight vector", w.len(), self.n_features)?;
            check_finite("a PA weight vector", w)?;
        }
        Ok(())
    }
}

impl OnlineLearner for PassiveAggressive {
    shape_fields!(grows);

    fn score(&self, x: Row, task: usize, _scratch: &mut Scratch) -> f64 {
        // A task id past the slots is a task not added yet (`decision_grown`): no weights.
        match self.weights.get(self.block(task)) {
            Some(Some(w)) => x.dot(w),
            _ => 0.0,
        }
    }

    fn update(&mut self, x: Row, task: usize, y: f64, score: f64, _scratch: &mut Scratch) -> Result<()> {
        let loss = 1.0 - y * score;
        if loss <= 0.0 {
            return Ok(());
        }
        let sq_norm = x.sq_norm();
        let tau = self.variant.step(loss, sq_norm, self.c);
        if !tau.is_finite() {
            return Err(Error::Numerical(format!(
                "PA step tau is not finite (tau = {tau}, loss {loss}, squared row norm {sq_norm:e}, C = {})",
                self.c
            )));
        }
        if tau <= 0.0 {
            return Ok(());
        }
        let d = self.n_features;
        let b = self.block(task);
        self.journal.touch(&self.weights, b)?;
        if let Some(w) = &self.weights[b] {
            if !x.axpy_stays_finite(w, tau * y) {
                return Err(Error::Numerical(format!(
                    "PA update overflows: w + tau y x is not finite (tau = {tau:e})"
                )));
            }
        }
        if self.weights[b].is_none() {
            let block = Need::new("n_features", d, "a task's weight vector").filled(&[d], 0.0)?;
            // A fresh block is zero, so it holds tau y x, finite since tau and x are.
            self.weights[b] = Some(block);
        }
        let w = self.weights[b].as_mut().expect("allocated above");
        x.add_to(w, tau * y);
        self.n_updates += 1;
        Ok(())
    }

    linear_counters!();

    fn journal_begin(&mut self) -> bool {
        self.journal.begin(self.weights.len());
        self.journal.counts = [self.n_updates, self.n_tasks as u64, 0, 0];
        true
    }

    fn journal_commit(&mut self) {
        self.journal.commit();
    }

    fn journal_rollback(&mut self) {
        if self.journal.is_active() {
            let [n_updates, n_tasks, ..] = self.journal.counts;
            (self.n_updates, self.n_tasks) = (n_updates, n_tasks as usize);
            let _ = self.journal.rollback(&mut self.weights);
        }
    }

    fn scores_new_tasks(&self) -> bool {
        true // a new task has no weights (PA-Unique) or shares the one w (PA-Global)
    }

    /// PA-Unique drops the tasks' weight vectors (a forgotten task is a task never updated, and
    /// the others are untouched: exact). PA-Global's one vector is shared by every task and
    /// keeps their influence. No example is stored.
    fn forget_tasks(&mut self, tasks: &[usize]) -> Result<usize> {
        super::check_forget(tasks, self.n_tasks)?;
        if !self.global {
            tasks.iter().for_each(|&t| self.weights[t] = None);
        }
        Ok(0)
    }
}

impl PassiveAggressive {
    /// Adds `n` tasks: PA-Unique gets `n` empty weight slots, PA-Global (one `w` for all
    /// tasks) only a larger range of valid task ids. Atomic.
    fn grow_tasks(&mut self, n: usize) -> Result<()> {
        let new_k = super::grown_n_tasks(self.n_tasks, n)?;
        if !self.global {
            check_vectors(new_k, self.n_features)?;
            Need::new("n_tasks", new_k, "the per-task weight slots").append_empty(&mut self.weights, n)?;
        }
        self.n_tasks = new_k;
        Ok(())
    }

    /// Undoes [`PassiveAggressive::grow_tasks`] of the last `n` tasks, which were not updated.
    fn shrink_tasks(&mut self, n: usize) {
        self.n_tasks -= n;
        if !self.global {
            debug_assert!(self.weights[self.n_tasks..].iter().all(Option::is_none));
            self.weights.truncate(self.n_tasks);
        }
    }
}

/// PA-Global as a replica of a coupled model: its one `w` is the shared state, combined as
/// weights. PA-Unique shares nothing.
impl Replica for PassiveAggressive {
    fn shared_layout(&self) -> Result<SharedLayout> {
        if !self.global {
            return Err(invalid(
                "shared",
                "PA-Unique keeps one model per task: it shares no state between tasks",
            ));
        }
        Ok(SharedLayout {
            kind: "passive_aggressive".into(),
            settings: format!(
                "global variant={:?} C={} n_features={}",
                self.variant, self.c, self.n_features
            ),
            space: self.n_features as u64,
            columns: vec![Mix::Weight],
            single: false,
            scalars: Vec::new(),
        })
    }

    fn track_shared(&mut self) -> Result<()> {
        self.shared_layout()?;
        self.shared_base = Some(vec![self.weights(0)]);
        Ok(())
    }

    fn shared_changes(&self) -> Result<SharedChanges> {
        let layout = self.shared_layout()?;
        let base = self.shared_base.as_ref().ok_or_else(not_tracking)?;
        Ok(dense_changes(layout, base, &[&self.weights(0)]))
    }

    fn apply_shared(&mut self, update: &SharedUpdate) -> Result<()> {
        if update.layout != self.shared_layout()? {
            return Err(invalid("update", "a shared-state update of another model"));
        }
        let base = self.shared_base.as_ref().ok_or_else(not_tracking)?;
        let mut w = self.weights(0);
        for (j, values) in dense_applied(update, base, &[&w]) {
            w[j] = values[0];
        }
        if !w.iter().all(|v| v.is_finite()) {
            return Err(Error::Numerical(
                "PA-Global: the combined weights are not finite".into(),
            ));
        }
        if self.weights[0].is_some() || !update.positions.is_empty() {
            self.weights[0] = Some(w.clone());
        }
        self.shared_base = Some(vec![w]);
        Ok(())
    }

    fn merge_replicas(parts: &[&Self], maps: &[Vec<Option<usize>>], n_tasks: usize) -> Result<Self> {
        check_maps(parts.len(), maps, n_tasks)?;
        let first = parts[0];
        first.shared_layout()?;
        for p in parts {
            if p.shared_layout()? != first.shared_layout()? {
                return Err(invalid("parts", "replicas of different models"));
            }
            if p.weights[0] != first.weights[0] {
                return Err(not_in_step("weights"));
            }
        }
        let params = PassiveAggressiveParams {
            shared: true,
            c: first.c,
            variant: first.variant,
        };
        let mut merged = Self::build(&params, &LinearSetting::new(n_tasks, first.n_features))?;
        merged.weights[0] = first.weights[0].clone();
        merged.n_updates = parts.iter().map(|p| p.n_updates).sum();
        Ok(merged)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::Rows;
    use crate::learner::learn;
    use crate::rng::SplitMix64;
    use crate::simd::dense_dot;

    fn stream(n: usize, d: usize, seed: u64) -> (Vec<f64>, Vec<f64>) {
        let mut rng = SplitMix64::new(seed);
        let mut unif = || (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0;
        let x: Vec<f64> = (0..n * d).map(|_| unif()).collect();
        let y = (0..n)
            .map(|t| if x[t * d] - 0.5 * x[t * d + 1] > 0.1 { 1.0 } else { -1.0 })
            .collect();
        (x, y)
    }

    /// INV-A2: after a PA update, `y w·x = 1`.
    #[test]
    fn pa_update_reaches_unit_margin() {
        let (n, d) = (200, 4);
        let (x, y) = stream(n, d, 1);
        let mut m = PassiveAggressive::build(
            &PassiveAggressiveParams {
                shared: false,
                c: 1.0,
                variant: PaVariant::Pa,
            },
            &LinearSetting::new(1, d),
        )
        .unwrap();
        let mut scratch = Scratch::default();
        for t in 0..n {
            let row = Row::Dense(&x[t * d..(t + 1) * d]);
            let f = m.learn_one(row, 0, y[t], &mut scratch).unwrap();
            if 1.0 - y[t] * f > 0.0 {
                let after = y[t] * dense_dot(&m.weights(0), &x[t * d..(t + 1) * d]);
                assert!((after - 1.0).abs() < 1e-9, "{after}");
            }
        }
    }

    /// INV-A1 (global with k=1 = unique) and INV-A3 (PA-I with a large C = PA).
    #[test]
    fn reductions() {
        let (n, d) = (300, 5);
        let (x, y) = stream(n, d, 2);
        let rows = Rows::dense(&x, n, d);
        let tasks = vec![0i64; n];
        let mut g = PassiveAggressive::build(
            &PassiveAggressiveParams {
                shared: true,
                c: 1.0,
                variant: PaVariant::Pa1,
            },
            &LinearSetting::new(1, d),
        )
        .unwrap();
        let mut u = PassiveAggressive::build(
            &PassiveAggressiveParams {
                shared: false,
                c: 1.0,
                variant: PaVariant::Pa1,
            },
            &LinearSetting::new(1, d),
        )
        .unwrap();
        assert_eq!(
            learn(&mut g, &rows, &tasks, &y).unwrap(),
            learn(&mut u, &rows, &tasks, &y).unwrap()
        );
        let mut pa = PassiveAggressive::build(
            &PassiveAggressiveParams {
                shared: false,
                c: 1.0,
                variant: PaVariant::Pa,
            },
            &LinearSetting::new(1, d),
        )
        .unwrap();
        let mut pa1 = PassiveAggressive::build(
            &PassiveAggressiveParams {
                shared: false,
                c: 1e9,
                variant: PaVariant::Pa1,
            },
            &LinearSetting::new(1, d),
        )
        .unwrap();
        assert_eq!(
            learn(&mut pa, &rows, &tasks, &y).unwrap(),
            learn(&mut pa1, &rows, &tasks, &y).unwrap()
        );
        assert!(PassiveAggressive::build(
            &PassiveAggressiveParams {
                shared: false,
                c: 0.0,
                variant: PaVariant::Pa1
            },
            &LinearSetting::new(1, d)
        )
        .is_err());
        assert!(PaVariant::parse("pa3").is_err());
    }

    #[test]
    fn zero_rows_do_not_update() {
        let mut m = PassiveAggressive::build(
            &PassiveAggressiveParams {
                shared: false,
                c: 1.0,
                variant: PaVariant::Pa2,
            },
            &LinearSetting::new(2, 3),
        )
        .unwrap();
        let zero = [0.0; 3];
        m.learn_one(Row::Dense(&zero), 1, 1.0, &mut Scratch::default()).unwrap();
        assert_eq!(m.n_updates(), 0);
    }
}
