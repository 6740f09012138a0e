//! OMTL: online multitask learning with a shared loss (Dekel, Long & Singer, COLT 2006; JMLR
//! 2007), ALGORITHMS.md §6.2 (the reading of ROMCO's "OMTL", §8.2 A-R8).
//!
//! One linear `w_i` per task. In a round (protocol P2) every present task suffers a hinge loss
//! `l_i = max(0, 1 - y_i w_i.x_i)`; the losses are combined by an absolute norm and the joint
//! implicit update `w_i += tau_i y_i x_i` takes the `tau >= 0` that maximises
//! `sum tau_i l_i - 1/2 sum tau_i^2 |x_i|^2` subject to `|tau|_* <= C` (dual norm):
//! `l1` -> `tau_i <= C` (PA-I per task), `linf` -> `sum tau_i <= C` (a water-filling threshold),
//! `l2` -> `|tau|_2 <= C` (a scalar root). The `explicit` variant takes `tau = C v` for the
//! maximiser `v` of `v.l` over the dual unit ball. On singleton rounds (protocol P1) every
//! implicit variant is PA-I (INV-O2).

use serde::{Deserialize, Serialize};

use crate::alloc::Need;
use crate::data::Row;
use crate::error::{invalid, Error, Result};
use crate::kernel::Scratch;
use crate::learner::undo::{try_copy_slice, SlotJournal};
use crate::learner::{check_c, Build, Checked, LinearSetting, OnlineLearner, Round};
use crate::state::{check_counts, check_finite, check_len, checked_size, ensure, param, CheckState};

/// The absolute norm that combines a round's hinge losses into OMTL's global loss (§6.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum GlobalNorm {
    /// The sum of the losses (PA-I per task).
    L1,
    /// The Euclidean norm of the losses.
    L2,
    /// The largest loss.
    LInf,
}

impl GlobalNorm {
    /// The norm named `"l1"`, `"l2"` or `"linf"`.
    pub fn parse(name: &str) -> Result<Self> {
        match name {
            "l1" => Ok(Self::L1),
            "l2" => Ok(Self::L2),
            "linf" => Ok(Self::LInf),
            other => Err(invalid(
                "global_norm",
                format!("expected 'linf', 'l1' or 'l2', got {other:?}"),
            )),
        }
    }
}

/// The step sizes `tau` of one OMTL round (§6.2) for losses `l_i >= 0` and squared norms
/// `n_i = |x_i|^2`. Entries with `l_i = 0` or `n_i = 0` get 0 (and, in the explicit variant,
/// take no part in the choice of `v`). Ties of the explicit `linf` rule go to the lowest index.
pub fn omtl_tau(losses: &[f64], sq_norms: &[f64], c: f64, norm: GlobalNorm, explicit: bool) -> Vec<f64> {
    let m = losses.len();
    let active: Vec<usize> = (0..m).filter(|&i| losses[i] > 0.0 && sq_norms[i] > 0.0).collect();
    let mut tau = vec![0.0; m];
    if active.is_empty() {
        return tau;
    }
    if explicit {
        match norm {
            GlobalNorm::L1 => active.iter().for_each(|&i| tau[i] = c),
            GlobalNorm::LInf => {
                let mut best = active[0];
                for &i in &active[1..] {
                    if losses[i] > losses[best] {
                        best = i;
                    }
                }
                tau[best] = c;
            }
            GlobalNorm::L2 => {
                let norm2 = active.iter().map(|&i| losses[i] * losses[i]).sum::<f64>().sqrt();
                active.iter().for_each(|&i| tau[i] = c * losses[i] / norm2);
            }
        }
        return tau;
    }
    match norm {
        GlobalNorm::L1 => active.iter().for_each(|&i| tau[i] = (losses[i] / sq_norms[i]).min(c)),
        GlobalNorm::LInf => {
            // Free steps l_i/n_i when they fit (an overflow to inf does not fit).
            let free: f64 = active.iter().map(|&i| losses[i] / sq_norms[i]).sum();
            if free <= c {
                active.iter().for_each(|&i| tau[i] = losses[i] / sq_norms[i]);
            } else {
                linf_water_filling(losses, sq_norms, c, &active, &mut tau);
            }
        }
        GlobalNorm::L2 => {
            let norm_at = |theta: f64| {
                active
                    .iter()
                    .map(|&i| (losses[i] / (sq_norms[i] + theta)).powi(2))
                    .sum::<f64>()
                    .sqrt()
            };
            if norm_at(0.0) <= c {
                active.iter().for_each(|&i| tau[i] = losses[i] / sq_norms[i]);
            } else {
                // |tau(theta)| is decreasing; |tau(theta)| <= |l| / theta gives the upper bracket.
                let (mut lo, mut hi) = (
                    0.0f64,
                    active.iter().map(|&i| losses[i] * losses[i]).sum::<f64>().sqrt() / c,
                );
                for _ in 0..200 {
                    let mid = 0.5 * (lo + hi);
                    if norm_at(mid) > c {
                        lo = mid;
                    } else {
                        hi = mid;
                    }
                    if hi - lo <= 1e-13 * hi {
                        break;
                    }
                }
                // hi is feasible (|tau(hi)| <= C).
                active.iter().for_each(|&i| tau[i] = losses[i] / (sq_norms[i] + hi));
            }
        }
    }
    tau
}

/// The capped `linf` step: `tau_i = max(0, l_i - theta)/n_i` with `sum tau_i = C`, i.e. the
/// threshold `theta` where `g(theta) = sum_i (l_i - theta)_+ / n_i` crosses C.
///
/// Written to stay finite when some `n_i` is tiny (`1/n_i` overflows, e.g. a row of norm 1e-160):
/// the piece is found by comparing `g` at the breakpoints (`g(l_next) >= C`, an overflow to inf
/// reading correctly as "larger"), and the steps are formed relative to the member `r` of the
/// piece with the smallest norm, `tau_r = (C - sum_j (l_j - l_r)/n_j) / sum_j (n_r/n_j)`, where
/// `n_r/n_j <= 1`; no `1/n` and no `l - theta` cancellation appear. A singleton round gives
/// `tau = C` exactly (PA-I, INV-O2).
fn linf_water_filling(losses: &[f64], sq_norms: &[f64], c: f64, active: &[usize], tau: &mut [f64]) {
    let mut order = active.to_vec();
    order.sort_by(|&a, &b| losses[b].total_cmp(&losses[a]).then(a.cmp(&b)));
    let mut len = order.len();
    for r in 0..order.len() {
        let next = order.get(r + 1).map_or(0.0, |&j| losses[j]);
        let g_next: f64 = order[..=r].iter().map(|&i| (losses[i] - next) / sq_norms[i]).sum();
        if g_next >= c {
            len = r + 1;
            break;
        }
    }
    let piece = &order[..len];
    let r = *piece
        .iter()
        .min_by(|&&a, &&b| sq_norms[a].total_cmp(&sq_norms[b]).then(a.cmp(&b)))
        .expect("the piece is never empty");
    let (lr, nr) = (losses[r], sq_norms[r]);
    let spread: f64 = piece.iter().map(|&j| (losses[j] - lr) / sq_norms[j]).sum();
    let weight: f64 = piece.iter().map(|&j| nr / sq_norms[j]).sum();
    let tau_r = (c - spread) / weight;
    for &j in piece {
        tau[j] = if j == r {
            tau_r
        } else {
            tau_r * (nr / sq_norms[j]) + (losses[j] - lr) / sq_norms[j]
        }
        .max(0.0);
    }
}

/// OMTL (Dekel, Long & Singer, COLT 2006; §6.2): one linear model per task, updated jointly per
/// round (protocol P2) with a shared loss. Built with [`Build::build`] from
/// [`OmtlParams`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Omtl {
    n_features: usize,
    n_tasks: usize,
    c: f64,
    norm: GlobalNorm,
    explicit: bool,
    /// Task-major: `w_i = weights[i*d..(i+1)*d]`.
    weights: Vec<f64>,
    n_updates: u64,
    n_rounds: u64,
    #[serde(skip)]
    journal: SlotJournal<Vec<f64>>,
}

learner_params! {
    /// OMTL's hyper-parameters (§6.2); `Default` gives Python's `OMTL()`.
    pub struct OmtlParams {
        /// The aggressiveness C (> 0; Python's `C`). Default 1.
        #[cfg_attr(feature = "python", pyo3(item("C")))]
        pub c: f64,
        /// The absolute norm of the joint update. Default [`GlobalNorm::LInf`].
        pub global_norm: GlobalNorm,
        /// The explicit rather than the implicit update. Default `false`.
        pub explicit: bool,
    }

    fn check(&self) -> Result<()> {
        check_c(self.c)
    }
}

impl Build for Omtl {
    type Params = OmtlParams;
    type Setting<'a> = LinearSetting;

    fn from_checked(params: &Checked<OmtlParams>, setting: &LinearSetting) -> Result<Self> {
        let (n_tasks, n_features) = (setting.n_tasks, setting.n_features);
        let OmtlParams {
            c,
            global_norm: norm,
            explicit,
        } = **params;
        Ok(Self {
            n_features,
            n_tasks,
            c,
            norm,
            explicit,
            weights: Need::new(
                "n_tasks",
                n_tasks,
                "the task weight vectors (n_tasks x n_features floats)",
            )
            .filled(&[n_tasks, n_features], 0.0)?,
            n_updates: 0,
            n_rounds: 0,
            journal: SlotJournal::default(),
        })
    }
}

impl Omtl {
    fn w(&self, task: usize) -> &[f64] {
        &self.weights[task * self.n_features..(task + 1) * self.n_features]
    }

    /// The joint update of one round whose rows (of distinct tasks) were scored `scores` by the
    /// current model (§1.2 step 3).
    pub fn update_round(&mut self, rows: &[Row], tasks: &[usize], y: &[f64], scores: &[f64]) -> Result<()> {
        let losses: Vec<f64> = scores.iter().zip(y).map(|(s, y)| (1.0 - y * s).max(0.0)).collect();
        let norms: Vec<f64> = rows.iter().map(|r| r.sq_norm()).collect();
        let tau = omtl_tau(&losses, &norms, self.c, self.norm, self.explicit);
        let d = self.n_features;
        // Everything is checked before anything is written.
        for (r, row) in rows.iter().enumerate() {
            let w = &self.weights[tasks[r] * d..(tasks[r] + 1) * d];
            if !tau[r].is_finite() || (tau[r] > 0.0 && !row.axpy_stays_finite(w, tau[r] * y[r])) {
                return Err(Error::Numerical(format!(
                    "OMTL step is not finite or overflows the weights (tau = {:e}, loss {}, squared row norm {:e}, C = {})",
                    tau[r], losses[r], norms[r], self.c
                )));
            }
        }
        for (r, _) in rows.iter().enumerate() {
            if tau[r] > 0.0 {
                let (t, weights) = (tasks[r], &self.weights);
                self.journal
                    .touch_with(t, || try_copy_slice(&weights[t * d..(t + 1) * d]))?;
            }
        }
        self.n_rounds += 1;
        for (r, row) in rows.iter().enumerate() {
            if tau[r] > 0.0 {
                self.n_updates += 1;
                row.add_to(&mut self.weights[tasks[r] * d..(tasks[r] + 1) * d], tau[r] * y[r]);
            }
        }
        Ok(())
    }
}

impl Omtl {
    same_settings_fields!(n_tasks, n_features, c, norm, explicit);
}

impl CheckState for Omtl {
    fn check_state(&self) -> Result<()> {
        // Lengths first: they bound the sizes by the payload before `new` allocates.
        check_len(
            "OMTL weights",
            self.weights.len(),
            checked_size("OMTL weights", self.n_tasks, self.n_features)?,
        )?;
        let params = OmtlParams {
            c: self.c,
            global_norm: self.norm,
            explicit: self.explicit,
        };
        param(Self::build(&params, &LinearSetting::new(self.n_tasks, self.n_features)))?;
        check_finite("OMTL weights", &self.weights)?;
        check_counts("OMTL", &[self.n_updates, self.n_rounds])?;
        // A round updates each of its (distinct) tasks at most once.
        ensure(
            self.n_rounds
                .checked_mul(self.n_tasks as u64)
                .is_none_or(|most| self.n_updates <= most),
            || "OMTL has more updates than its rounds allow".into(),
        )
    }
}

impl OnlineLearner for Omtl {
    shape_fields!(grows);

    fn score(&self, x: Row, task: usize, _scratch: &mut Scratch) -> f64 {
        x.dot(self.w(task))
    }

    fn joint_rounds(&self) -> bool {
        true
    }

    /// Protocol P2: every row of the round is scored with the same model, then one joint update.
    fn learn_round(&mut self, round: Round, scores: &mut [f64], scratch: &mut Scratch) -> Result<()> {
        let Round { rows, tasks, y } = round;
        self.score_round(round, scores, scratch);
        self.update_round(rows, tasks, y, scores)
    }

    /// A singleton round (§1.3).
    fn update(&mut self, x: Row, task: usize, y: f64, score: f64, _scratch: &mut Scratch) -> Result<()> {
        self.update_round(&[x], &[task], &[y], &[score])
    }

    linear_counters!();

    fn diagnostics(&self) -> Vec<(&'static str, f64)> {
        vec![("n_rounds", self.n_rounds as f64)]
    }

    fn arrays(&self) -> Vec<(&'static str, Vec<usize>, Vec<f64>)> {
        vec![("coef", vec![self.n_tasks, self.n_features], self.weights.clone())]
    }

    fn journal_begin(&mut self) -> bool {
        self.journal.begin(self.n_tasks);
        self.journal.counts = [self.n_updates, self.n_rounds, self.n_tasks as u64, 0];
        true
    }

    fn journal_commit(&mut self) {
        self.journal.commit();
    }

    /// The rows of the tasks the call updated come back, and the tasks it added go.
    fn journal_rollback(&mut self) {
        if !self.journal.is_active() {
            return;
        }
        let [n_updates, n_rounds, n_tasks, _] = self.journal.counts;
        let d = self.n_features;
        (self.n_updates, self.n_rounds, self.n_tasks) = (n_updates, n_rounds, n_tasks as usize);
        self.weights.truncate(self.n_tasks * d);
        let weights = &mut self.weights;
        let _ = self
            .journal
            .rollback_with(|t, old| weights[t * d..(t + 1) * d].copy_from_slice(&old));
    }

    /// Sets the tasks' `w_i` to 0, a task that has not appeared yet. A task's `w_i` moves with
    /// its own examples only, so the others keep exactly what they learned; only the step sizes
    /// of rounds shared with a forgotten task depended on its losses. No example is stored.
    fn forget_tasks(&mut self, tasks: &[usize]) -> Result<usize> {
        super::check_forget(tasks, self.n_tasks)?;
        let d = self.n_features;
        tasks.iter().for_each(|&t| self.weights[t * d..(t + 1) * d].fill(0.0));
        Ok(0)
    }
}

impl Omtl {
    /// Adds `n` tasks with `w = 0` (open-ended task sets): a round involves only the tasks
    /// present in it, so a new task is exactly a task that has not appeared yet. Atomic.
    fn grow_tasks(&mut self, n: usize) -> Result<()> {
        let new_k = super::grown_n_tasks(self.n_tasks, n)?;
        let need = Need::new(
            "n_tasks",
            new_k,
            "the task weight vectors (n_tasks x n_features floats)",
        );
        need.count::<f64>(&[new_k, self.n_features])?;
        let extra = need.count::<f64>(&[n, self.n_features])?;
        // Amortised: a call adding one task does not reallocate the k x d weights each time.
        need.reserve(&mut self.weights, extra)?;
        self.weights.resize(self.weights.len() + extra, 0.0);
        self.n_tasks = new_k;
        Ok(())
    }

    /// Undoes [`Omtl::grow_tasks`] of the last `n` tasks, which were not updated (`w = 0`).
    fn shrink_tasks(&mut self, n: usize) {
        self.n_tasks -= n;
        self.weights.truncate(self.n_tasks * self.n_features);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On a row of norm 1e-160 (‖x‖² subnormal) a naive water-filling forms inf/inf and writes
    /// -inf weights; every implicit variant takes exactly tau = C there (INV-O2).
    #[test]
    fn tiny_norm_singletons_take_exactly_c() {
        for norm in [GlobalNorm::L1, GlobalNorm::L2, GlobalNorm::LInf] {
            for sq in [1e-320, 5e-324, 1e-300] {
                let tau = omtl_tau(&[1.0], &[sq], 0.7, norm, false);
                assert!(tau[0].is_finite(), "{norm:?} {sq}");
                if norm != GlobalNorm::L2 {
                    assert_eq!(tau[0], 0.7, "{norm:?} {sq}");
                } else {
                    assert!((tau[0] - 0.7).abs() <= 1e-12, "{norm:?} {sq}: {}", tau[0]);
                }
            }
        }
        // A round mixing a tiny row with ordinary ones: finite, sum tau = C, non-negative.
        let tau = omtl_tau(&[1.0, 2.0, 0.5], &[1e-320, 1.0, 4.0], 1.0, GlobalNorm::LInf, false);
        assert!(tau.iter().all(|t| t.is_finite() && *t >= 0.0), "{tau:?}");
        assert!((tau.iter().sum::<f64>() - 1.0).abs() < 1e-12, "{tau:?}");
        let mut m = Omtl::build(
            &OmtlParams {
                c: 1.0,
                global_norm: GlobalNorm::LInf,
                explicit: false,
            },
            &LinearSetting::new(1, 2),
        )
        .unwrap();
        let x = [1e-160, 0.0];
        m.update(Row::Dense(&x), 0, -1.0, 0.0, &mut Scratch::default()).unwrap();
        assert_eq!(m.weights, vec![-1e-160, 0.0]);
    }

    #[test]
    fn linf_water_filling_satisfies_kkt() {
        let losses = [1.5, 0.2, 0.9, 0.0, 2.0];
        let norms = [1.0, 0.5, 2.0, 1.0, 4.0];
        let c = 0.6;
        let tau = omtl_tau(&losses, &norms, c, GlobalNorm::LInf, false);
        let sum: f64 = tau.iter().sum();
        assert!((sum - c).abs() < 1e-12, "{tau:?}");
        // A common threshold theta: tau_i = max(0, (l_i - theta)/n_i).
        let theta = losses[0] - tau[0] * norms[0];
        assert!(theta > 0.0);
        for i in 0..5 {
            let expect = if losses[i] > 0.0 {
                ((losses[i] - theta) / norms[i]).max(0.0)
            } else {
                0.0
            };
            assert!((tau[i] - expect).abs() < 1e-12, "{i}: {tau:?}");
        }
        // Loose budget: the unconstrained PA steps.
        let tau = omtl_tau(&losses, &norms, 100.0, GlobalNorm::LInf, false);
        assert!((tau[0] - 1.5).abs() < 1e-15 && (tau[4] - 0.5).abs() < 1e-15);
    }

    #[test]
    fn l2_hits_the_ball_and_singletons_are_pa1() {
        let losses = [1.0, 2.0, 0.5];
        let norms = [1.0, 1.0, 2.0];
        let tau = omtl_tau(&losses, &norms, 1.0, GlobalNorm::L2, false);
        let n2: f64 = tau.iter().map(|t| t * t).sum::<f64>().sqrt();
        assert!((n2 - 1.0).abs() < 1e-11 && n2 <= 1.0, "{tau:?}");
        for norm in [GlobalNorm::L1, GlobalNorm::L2, GlobalNorm::LInf] {
            for (l, n) in [(0.3, 1.0), (3.0, 0.5), (0.0, 1.0), (1.0, 0.0)] {
                let t = omtl_tau(&[l], &[n], 1.0, norm, false)[0];
                let pa1 = if l > 0.0 && n > 0.0 { (l / n).min(1.0) } else { 0.0 };
                assert!((t - pa1).abs() < 1e-12, "{norm:?} {l} {n}: {t} vs {pa1}");
            }
        }
    }

    #[test]
    fn explicit_linf_updates_the_first_largest_loss() {
        let tau = omtl_tau(&[0.5, 2.0, 2.0, 1.0], &[1.0; 4], 0.7, GlobalNorm::LInf, true);
        assert_eq!(tau, vec![0.0, 0.7, 0.0, 0.0]);
        assert!(Omtl::build(
            &OmtlParams {
                c: 0.0,
                global_norm: GlobalNorm::L1,
                explicit: false
            },
            &LinearSetting::new(2, 3)
        )
        .is_err());
        assert!(GlobalNorm::parse("l3").is_err());
    }
}
