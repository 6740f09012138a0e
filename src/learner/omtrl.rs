//! OMTRL: online multitask learning with a learned task relationship (Saha, Rai, Daumé III &
//! Venkatasubramanian, AISTATS 2011), ALGORITHMS.md §6.3 (our reading; initial coupling and
//! refresh schedule unverified, §8.3 A-B2).
//!
//! A multitask linear Perceptron: task `i` scores `w_i . x`; on an update-mistake of task `i`
//! every task `s` moves by `y (A^{-1})_{s i} x`. The coupling starts as the complete-graph kernel
//! `(I + 11')/(k+1)`. After a warm-up of `epoch` examples it is refreshed after every example from
//! `W' W` (`batch`: normalised matrix square root; `logdet`: `A^{-1} += eta sym(W'W)`;
//! `vonneumann`: `A <- exp(log A - eta sym(W'W))`). Cost: O(k nnz) per mistake plus
//! O(d k^2 + k^3) per refresh (`W'W` is recomputed only when `W` changed).
//!
//! Deviation from the §6.3 table (our decision): after a `logdet` or `vonneumann` refresh,
//! `A^{-1}` is rescaled to unit trace, as `batch` is. Without it `A^{-1}` and `W` feed each other
//! (`A^{-1}` grows with `W'W`, each mistake adds `A^{-1}`-scaled steps to `W`) and overflow f64
//! within a few hundred examples at `eta = 1e-3`. A refresh whose result is not finite is
//! skipped and counted (`n_refresh_skipped`).

use serde::{Deserialize, Serialize};

use crate::data::{dot_dense, Row};
use crate::error::{invalid, Result};
use crate::kernel::Scratch;
use crate::learner::{is_update_mistake, OnlineLearner};
use crate::linalg::{sym_eigen, sym_sqrt, SymMatrix};
use crate::state::{check_counts, check_finite, check_len, checked_size, ensure, param, CheckState};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum RelationUpdate {
    Batch,
    LogDet,
    VonNeumann,
}

impl RelationUpdate {
    pub fn parse(name: &str) -> Result<Self> {
        match name {
            "batch" => Ok(Self::Batch),
            "logdet" => Ok(Self::LogDet),
            "vonneumann" => Ok(Self::VonNeumann),
            other => Err(invalid(
                "relation_update",
                format!("expected 'batch', 'logdet' or 'vonneumann', got {other:?}"),
            )),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Omtrl {
    n_features: usize,
    n_tasks: usize,
    update: RelationUpdate,
    eta: f64,
    epoch: u64,
    /// Task-major: `w_i = weights[i*d..(i+1)*d]`.
    weights: Vec<f64>,
    /// The coupling `A^{-1}`, `k x k` row-major (symmetric).
    coupling: Vec<f64>,
    /// `W'W`, valid when `!gram_dirty`.
    gram: Vec<f64>,
    gram_dirty: bool,
    n_seen: u64,
    n_updates: u64,
    n_refreshes: u64,
    /// Refreshes whose result was not finite (the coupling then stays as it was).
    n_refresh_skipped: u64,
}

impl Omtrl {
    pub fn new(n_tasks: usize, n_features: usize, update: RelationUpdate, eta: f64, epoch: u64) -> Result<Self> {
        if n_tasks == 0 {
            return Err(invalid("n_tasks", "must be >= 1"));
        }
        if n_features == 0 {
            return Err(invalid("n_features", "must be >= 1"));
        }
        if !(eta >= 0.0 && eta.is_finite()) {
            return Err(invalid("eta", format!("must be a finite number >= 0, got {eta}")));
        }
        let k = n_tasks;
        let mut coupling = vec![1.0 / (k as f64 + 1.0); k * k];
        (0..k).for_each(|i| coupling[i * k + i] = 2.0 / (k as f64 + 1.0));
        Ok(Self {
            n_features,
            n_tasks,
            update,
            eta,
            epoch,
            weights: vec![0.0; k * n_features],
            coupling,
            gram: vec![0.0; k * k],
            gram_dirty: false,
            n_seen: 0,
            n_updates: 0,
            n_refreshes: 0,
            n_refresh_skipped: 0,
        })
    }

    /// The current coupling `A^{-1}` (row-major `k x k`).
    pub fn coupling(&self) -> &[f64] {
        &self.coupling
    }

    fn refresh_gram(&mut self) {
        if !self.gram_dirty {
            return;
        }
        let (k, d) = (self.n_tasks, self.n_features);
        for i in 0..k {
            for j in 0..=i {
                let v = dot_dense(&self.weights[i * d..(i + 1) * d], &self.weights[j * d..(j + 1) * d]);
                self.gram[i * k + j] = v;
                self.gram[j * k + i] = v;
            }
        }
        self.gram_dirty = false;
    }

    /// One refresh of the coupling from the current `W'W` (§6.3 table).
    fn refresh_coupling(&mut self) {
        self.refresh_gram();
        let k = self.n_tasks;
        // Only reachable when the data overflow: an eigendecomposition of NaNs need not terminate.
        if !self.gram.iter().all(|v| v.is_finite()) {
            self.n_refresh_skipped += 1;
            return;
        }
        let gram = SymMatrix {
            n: k,
            data: self.gram.clone(),
        };
        let next = match self.update {
            RelationUpdate::Batch => {
                let mut s = sym_sqrt(&gram);
                (0..k).for_each(|i| s.data[i * k + i] += 1e-8);
                let trace: f64 = (0..k).map(|i| s.data[i * k + i]).sum();
                s.data.iter().map(|v| v / trace).collect()
            }
            RelationUpdate::LogDet => {
                let sum: Vec<f64> = self
                    .coupling
                    .iter()
                    .zip(&gram.data)
                    .map(|(a, g)| a + self.eta * g)
                    .collect();
                unit_trace(sum, k)
            }
            RelationUpdate::VonNeumann => {
                // A^{-1} <- exp(log A^{-1} + eta sym(W'W)), then unit trace. The exponential is
                // shifted by the largest eigenvalue, which the normalisation cancels.
                let log = spectral(
                    &SymMatrix {
                        n: k,
                        data: self.coupling.clone(),
                    },
                    |l| l.max(f64::MIN_POSITIVE).ln(),
                );
                let arg = SymMatrix {
                    n: k,
                    data: log.iter().zip(&gram.data).map(|(a, g)| a + self.eta * g).collect(),
                };
                let top = sym_eigen(&arg).0.last().copied().unwrap_or(0.0);
                unit_trace(spectral(&arg, |l| (l - top).exp()), k)
            }
        };
        if next.iter().all(|v| v.is_finite()) {
            self.coupling = next;
            symmetrize(&mut self.coupling, k);
            self.n_refreshes += 1;
        } else {
            self.n_refresh_skipped += 1;
        }
    }
}

/// `M / tr(M)`.
fn unit_trace(mut m: Vec<f64>, k: usize) -> Vec<f64> {
    let trace: f64 = (0..k).map(|i| m[i * k + i]).sum();
    m.iter_mut().for_each(|v| *v /= trace);
    m
}

/// `f(M)` of a symmetric matrix through its eigendecomposition (row-major result).
fn spectral(m: &SymMatrix, f: impl Fn(f64) -> f64) -> Vec<f64> {
    let n = m.n;
    let (values, vectors) = sym_eigen(m);
    let mut out = vec![0.0; n * n];
    for (r, &lambda) in values.iter().enumerate() {
        let fl = f(lambda);
        for i in 0..n {
            let vi = vectors.get(i, r) * fl;
            for j in 0..n {
                out[i * n + j] += vi * vectors.get(j, r);
            }
        }
    }
    symmetrize(&mut out, n);
    out
}

fn symmetrize(m: &mut [f64], n: usize) {
    for i in 0..n {
        for j in 0..i {
            let v = 0.5 * (m[i * n + j] + m[j * n + i]);
            m[i * n + j] = v;
            m[j * n + i] = v;
        }
    }
}

impl Omtrl {
    /// Same hyper-parameters as `other`.
    pub fn same_settings(&self, other: &Self) -> bool {
        (self.n_tasks, self.n_features, self.update, self.eta, self.epoch)
            == (other.n_tasks, other.n_features, other.update, other.eta, other.epoch)
    }
}

impl CheckState for Omtrl {
    fn check_state(&self) -> Result<()> {
        let (k, d) = (self.n_tasks, self.n_features);
        // Lengths first: they bound the sizes by the payload before `new` allocates.
        check_len(
            "OMTRL weights",
            self.weights.len(),
            checked_size("OMTRL weights", k, d)?,
        )?;
        check_len(
            "OMTRL coupling",
            self.coupling.len(),
            checked_size("OMTRL coupling", k, k)?,
        )?;
        param(Self::new(k, d, self.update, self.eta, self.epoch))?;
        check_len("OMTRL Gram matrix", self.gram.len(), k * k)?;
        check_finite("OMTRL weights", &self.weights)?;
        check_counts(
            "OMTRL",
            &[self.n_seen, self.n_updates, self.n_refreshes, self.n_refresh_skipped],
        )?;
        // The refresh eigendecomposes the coupling: it must be finite and symmetric.
        check_finite("OMTRL coupling", &self.coupling)?;
        check_finite("OMTRL Gram matrix", &self.gram)?;
        let symmetric = (0..k).all(|i| (0..i).all(|j| self.coupling[i * k + j] == self.coupling[j * k + i]));
        ensure(symmetric, || "the OMTRL coupling is not symmetric".into())?;
        ensure(
            self.n_updates <= self.n_seen && self.n_refreshes.saturating_add(self.n_refresh_skipped) <= self.n_seen,
            || "OMTRL counters are inconsistent".into(),
        )
    }
}

impl OnlineLearner for Omtrl {
    fn n_tasks(&self) -> usize {
        self.n_tasks
    }

    fn n_features(&self) -> usize {
        self.n_features
    }

    fn score(&self, x: Row, task: usize, _scratch: &mut Scratch) -> f64 {
        let d = self.n_features;
        x.dot(&self.weights[task * d..(task + 1) * d])
    }

    fn update(&mut self, x: Row, task: usize, y: f64, score: f64, _scratch: &mut Scratch) -> Result<()> {
        self.n_seen += 1;
        let (k, d) = (self.n_tasks, self.n_features);
        if is_update_mistake(y, score) {
            self.n_updates += 1;
            for s in 0..k {
                let c = self.coupling[s * k + task];
                if c != 0.0 {
                    x.add_to(&mut self.weights[s * d..(s + 1) * d], y * c);
                }
            }
            self.gram_dirty = true;
        }
        if self.n_seen >= self.epoch {
            self.refresh_coupling();
        }
        Ok(())
    }

    fn n_updates(&self) -> u64 {
        self.n_updates
    }

    fn n_active(&self) -> usize {
        self.n_updates as usize
    }

    fn diagnostics(&self) -> Vec<(&'static str, f64)> {
        vec![
            ("n_refreshes", self.n_refreshes as f64),
            ("n_refresh_skipped", self.n_refresh_skipped as f64),
            ("epoch", self.epoch as f64),
        ]
    }

    fn arrays(&self) -> Vec<(&'static str, Vec<usize>, Vec<f64>)> {
        let (k, d) = (self.n_tasks, self.n_features);
        vec![
            ("task_kernel", vec![k, k], self.coupling.clone()),
            ("coef", vec![k, d], self.weights.clone()),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::Rows;
    use crate::learner::learn;
    use crate::rng::SplitMix64;

    fn stream(n: usize, d: usize, k: usize) -> (Vec<f64>, Vec<i64>, Vec<f64>) {
        let mut rng = SplitMix64::new(5);
        let x: Vec<f64> = (0..n * d)
            .map(|_| (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0)
            .collect();
        let tasks: Vec<i64> = (0..n).map(|t| (t % k) as i64).collect();
        let y: Vec<f64> = (0..n)
            .map(|t| if x[t * d] + 0.5 * x[t * d + 2] > 0.0 { 1.0 } else { -1.0 })
            .collect();
        (x, tasks, y)
    }

    #[test]
    fn couplings_stay_symmetric_positive_definite() {
        let (n, d, k) = (400, 6, 4);
        let (x, tasks, y) = stream(n, d, k);
        let rows = Rows::Dense {
            data: &x,
            n_rows: n,
            n_cols: d,
        };
        for update in [
            RelationUpdate::Batch,
            RelationUpdate::LogDet,
            RelationUpdate::VonNeumann,
        ] {
            let mut m = Omtrl::new(k, d, update, 1e-3, 100).unwrap();
            learn(&mut m, &rows, &tasks, &y).unwrap();
            assert_eq!((m.n_refreshes, m.n_refresh_skipped), (301, 0));
            let (values, _) = sym_eigen(&SymMatrix {
                n: k,
                data: m.coupling.clone(),
            });
            assert!(values[0] > 0.0, "{update:?}: {values:?}");
            {
                let trace: f64 = (0..k).map(|i| m.coupling[i * k + i]).sum();
                assert!((trace - 1.0).abs() < 1e-12);
            }
        }
    }

    #[test]
    fn before_the_warm_up_it_is_the_complete_graph_perceptron() {
        use crate::kernel::{BaseKernel, TaskKernel};
        use crate::learner::MTPerceptron;
        let (n, d, k) = (300, 5, 3);
        let (x, tasks, y) = stream(n, d, k);
        let rows = Rows::Dense {
            data: &x,
            n_rows: n,
            n_cols: d,
        };
        let mut a = Omtrl::new(k, d, RelationUpdate::LogDet, 1e-3, 10_000).unwrap();
        let mut b = MTPerceptron::new(TaskKernel::complete(k).unwrap(), BaseKernel::linear(), d, false).unwrap();
        let sa = learn(&mut a, &rows, &tasks, &y).unwrap();
        let sb = learn(&mut b, &rows, &tasks, &y).unwrap();
        for (p, q) in sa.iter().zip(&sb) {
            assert!((p - q).abs() <= 1e-9 * q.abs().max(1.0));
        }
        assert!(Omtrl::new(k, d, RelationUpdate::Batch, -1.0, 0).is_err());
        assert!(RelationUpdate::parse("nope").is_err());
    }
}
