//! OMTRL: online multitask learning with a learned task relationship (Saha, Rai, Daumé III &
//! Venkatasubramanian, AISTATS 2011), ALGORITHMS.md §6.3 (our reading; initial coupling and
//! refresh schedule unverified, §8.3 A-B2).
//!
//! A multitask linear Perceptron: task `i` scores `w_i . x`; on an update-mistake of task `i`
//! every task `s` moves by `y (A^{-1})_{s i} x`. The coupling starts as the complete-graph kernel
//! `(I + 11')/(k+1)`. After a warm-up of `epoch` examples it is refreshed after every example from
//! `W' W` (`batch`: normalised matrix square root; `logdet`: `A^{-1} += eta sym(W'W)`;
//! `vonneumann`: `A <- exp(log A - eta sym(W'W))`). Cost: O(k nnz) per mistake plus
//! O(d k^2 + k^3) per refresh (`W'W` is recomputed only when `W` changed). A `batch` refresh
//! with `W` unchanged is skipped (same input, same coupling), and with `k > d` its square root
//! comes from the `d x d` side (`sqrt_gram_from_features`), O(k d^2 + d^3 + k^2 d).
//!
//! Deviation from the §6.3 table (our decision): after a `logdet` or `vonneumann` refresh,
//! `A^{-1}` is rescaled to unit trace, as `batch` is. Without it `A^{-1}` and `W` feed each other
//! (`A^{-1}` grows with `W'W`, each mistake adds `A^{-1}`-scaled steps to `W`) and overflow f64
//! within a few hundred examples at `eta = 1e-3`. A refresh whose result is not finite is
//! skipped and counted (`n_refresh_skipped`).

use serde::{Deserialize, Serialize};

use crate::alloc::Need;
use crate::data::Row;
use crate::error::{invalid, Error, Result};
use crate::kernel::Scratch;
use crate::learner::{check_nonnegative, is_update_mistake, Build, Checked, LinearSetting, OnlineLearner};
use crate::linalg::{sym_eigen, sym_sqrt, SymMatrix};
use crate::simd::dense_dot;
use crate::state::{check_counts, check_finite, check_len, checked_size, ensure, param, CheckState};

/// How OMTRL refreshes its task coupling `A^{-1}` from the weights `W` (§6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum RelationUpdate {
    /// `A^{-1} = (WᵀW)^{1/2} / tr((WᵀW)^{1/2})`.
    Batch,
    /// `A^{-1} += η sym(WᵀW)`.
    LogDet,
    /// `A = exp(log A - η sym(WᵀW))`.
    VonNeumann,
}

impl RelationUpdate {
    /// The rule named `"batch"`, `"logdet"` or `"vonneumann"`.
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

/// OMTRL (Saha et al., AISTATS 2011; §6.3): a multitask linear Perceptron whose task coupling
/// is learned from the weights. Built with [`Build::build`] from
/// [`OmtrlParams`].
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
    /// Whether `coupling` is the `batch` coupling of the current `W` (it depends on `W` alone,
    /// so a refresh with `W` unchanged would recompute the same matrix: it is skipped).
    batch_fresh: bool,
    n_seen: u64,
    n_updates: u64,
    n_refreshes: u64,
    /// Refreshes whose result was not finite (the coupling then stays as it was).
    n_refresh_skipped: u64,
}

learner_params! {
    /// OMTRL's hyper-parameters (§6.3); `Default` gives Python's `OMTRL()`.
    pub struct OmtrlParams {
        /// How the task coupling is learned. Default [`RelationUpdate::Batch`].
        pub relation_update: RelationUpdate,
        /// The step of the coupling update (>= 0). Default 1e-3.
        pub eta: f64,
        /// The warm-up: the coupling stays `(I + 11ᵀ)/(k+1)` for the first `epoch` examples and
        /// is refreshed after every example from then on. Default 1000.
        pub epoch: u64,
    }

    fn check(&self) -> Result<()> {
        check_nonnegative("eta", self.eta)
    }
}

impl Build for Omtrl {
    type Params = OmtrlParams;
    type Setting<'a> = LinearSetting;

    fn from_checked(params: &Checked<OmtrlParams>, setting: &LinearSetting) -> Result<Self> {
        let (n_tasks, n_features) = (setting.n_tasks, setting.n_features);
        let OmtrlParams {
            relation_update: update,
            eta,
            epoch,
        } = **params;
        let k = n_tasks;
        let square = Need::new(
            "n_tasks",
            k,
            "OMTRL's k x k coupling and Gram matrices (2 n_tasks² floats)",
        );
        square.count::<f64>(&[2, k, k])?;
        let mut coupling = square.filled(&[k, k], 1.0 / (k as f64 + 1.0))?;
        (0..k).for_each(|i| coupling[i * k + i] = 2.0 / (k as f64 + 1.0));
        Ok(Self {
            n_features,
            n_tasks,
            update,
            eta,
            epoch,
            weights: Need::new("n_tasks", k, "the weight matrix (n_tasks x n_features floats)")
                .filled(&[k, n_features], 0.0)?,
            coupling,
            gram: square.filled(&[k, k], 0.0)?,
            gram_dirty: false,
            batch_fresh: false,
            n_seen: 0,
            n_updates: 0,
            n_refreshes: 0,
            n_refresh_skipped: 0,
        })
    }
}

impl Omtrl {
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
                let v = dense_dot(&self.weights[i * d..(i + 1) * d], &self.weights[j * d..(j + 1) * d]);
                self.gram[i * k + j] = v;
                self.gram[j * k + i] = v;
            }
        }
        self.gram_dirty = false;
    }

    /// One refresh of the coupling from the current `W'W` (§6.3 table).
    fn refresh_coupling(&mut self) {
        let (k, d) = (self.n_tasks, self.n_features);
        if self.update == RelationUpdate::Batch {
            if self.batch_fresh {
                // The same W gives the same coupling: this refresh is already done.
                self.n_refreshes += 1;
                return;
            }
            if d < k {
                // More tasks than features: (W'W)^{1/2} from the d x d side, O(k d² + d³ + k² d)
                // instead of a k x k eigendecomposition.
                match sqrt_gram_from_features(&self.weights, k, d) {
                    Some(s) => self.accept_batch(s),
                    None => self.n_refresh_skipped += 1,
                }
                return;
            }
        }
        self.refresh_gram();
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
                self.accept_batch(sym_sqrt(&gram).data);
                return;
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

impl Omtrl {
    /// `batch`: `A^{-1} = (S + 1e-8 I) / tr(S + 1e-8 I)` for `S = (W'W)^{1/2}` (row-major).
    fn accept_batch(&mut self, mut s: Vec<f64>) {
        let k = self.n_tasks;
        (0..k).for_each(|i| s[i * k + i] += 1e-8);
        let trace: f64 = (0..k).map(|i| s[i * k + i]).sum();
        let next: Vec<f64> = s.iter().map(|v| v / trace).collect();
        if next.iter().all(|v| v.is_finite()) {
            self.coupling = next;
            symmetrize(&mut self.coupling, k);
            self.n_refreshes += 1;
            self.batch_fresh = true;
        } else {
            self.n_refresh_skipped += 1;
        }
    }
}

/// `(W'W)^{1/2}` (row-major `k x k`) for the task-major `k x d` weights `W'` (`w_i` = row `i`)
/// through the `d x d` matrix `M = W W' = U Λ U'`: `(W'W)^{1/2} = W' U Λ^{-1/2} U' W = Z'Z` with
/// `Z = Λ^{-1/4} U' W`. Eigenvalues at or below the numerical-rank threshold `d ε λ_max` count
/// as 0 (their directions add at most `sqrt(d ε λ_max)` to an entry; a `k x k` eigensolver
/// leaves noise of that size in the `k - d` null directions anyway). `None` if `M` is not finite
/// (only when the data overflow: an eigendecomposition of NaNs need not terminate).
fn sqrt_gram_from_features(weights: &[f64], k: usize, d: usize) -> Option<Vec<f64>> {
    let mut m = vec![0.0; d * d];
    for w in weights.chunks_exact(d).take(k) {
        for a in 0..d {
            let wa = w[a];
            for b in 0..=a {
                m[a * d + b] += wa * w[b];
            }
        }
    }
    for a in 0..d {
        for b in 0..a {
            m[b * d + a] = m[a * d + b];
        }
    }
    if !m.iter().all(|v| v.is_finite()) {
        return None;
    }
    let (values, vectors) = sym_eigen(&SymMatrix { n: d, data: m });
    let top = values.last().copied().unwrap_or(0.0).max(0.0);
    let floor = d as f64 * f64::EPSILON * top;
    // Z, row r = λ_r^{-1/4} u_r' W, for the kept eigenvalues only.
    let kept: Vec<usize> = (0..d).filter(|&r| values[r] > floor).collect();
    let mut z = vec![0.0; kept.len() * k];
    for (row, &r) in kept.iter().enumerate() {
        let scale = values[r].powf(-0.25);
        let u: Vec<f64> = (0..d).map(|a| vectors.get(a, r)).collect();
        for (i, w) in weights.chunks_exact(d).take(k).enumerate() {
            z[row * k + i] = scale * dense_dot(&u, w);
        }
    }
    let mut out = vec![0.0; k * k];
    for i in 0..k {
        for j in 0..=i {
            let v: f64 = (0..kept.len()).map(|row| z[row * k + i] * z[row * k + j]).sum();
            out[i * k + j] = v;
            out[j * k + i] = v;
        }
    }
    Some(out)
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
    same_settings_fields!(n_tasks, n_features, update, eta, epoch);
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
        let params = OmtrlParams {
            relation_update: self.update,
            eta: self.eta,
            epoch: self.epoch,
        };
        param(Self::build(&params, &LinearSetting::new(k, d)))?;
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
    shape_fields!();

    fn score(&self, x: Row, task: usize, _scratch: &mut Scratch) -> f64 {
        let d = self.n_features;
        x.dot(&self.weights[task * d..(task + 1) * d])
    }

    fn update(&mut self, x: Row, task: usize, y: f64, score: f64, _scratch: &mut Scratch) -> Result<()> {
        let (k, d) = (self.n_tasks, self.n_features);
        if is_update_mistake(y, score) {
            for s in 0..k {
                let c = self.coupling[s * k + task];
                if c != 0.0 && !x.axpy_stays_finite(&self.weights[s * d..(s + 1) * d], y * c) {
                    return Err(Error::Numerical(format!(
                        "OMTRL update overflows the weights of task {s} (coupling {c:e})"
                    )));
                }
            }
        }
        self.n_seen += 1;
        if is_update_mistake(y, score) {
            self.n_updates += 1;
            for s in 0..k {
                let c = self.coupling[s * k + task];
                if c != 0.0 {
                    x.add_to(&mut self.weights[s * d..(s + 1) * d], y * c);
                }
            }
            self.gram_dirty = true;
            self.batch_fresh = false;
        }
        if self.n_seen >= self.epoch {
            self.refresh_coupling();
        }
        Ok(())
    }

    linear_counters!();

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
    use crate::learner::{learn, test_support};
    use crate::learner::{KernelSetting, NoParams};
    use crate::rng::SplitMix64;

    #[test]
    fn the_feature_side_square_root_matches_the_task_side_one() {
        let mut rng = SplitMix64::new(17);
        for &(k, d, rank) in &[(9, 3, 3), (12, 4, 2), (7, 6, 6), (5, 2, 0)] {
            // Weights of rank `rank` (rows = tasks), so some eigenvalues of W W' are exactly 0.
            let basis: Vec<f64> = (0..rank * d)
                .map(|_| (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64 - 0.5)
                .collect();
            let mut w = vec![0.0; k * d];
            for i in 0..k {
                for r in 0..rank {
                    let c = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64 - 0.5;
                    for a in 0..d {
                        w[i * d + a] += c * basis[r * d + a];
                    }
                }
            }
            let gram: Vec<f64> = (0..k * k)
                .map(|ij| dense_dot(&w[(ij / k) * d..(ij / k + 1) * d], &w[(ij % k) * d..(ij % k + 1) * d]))
                .collect();
            let want = sym_sqrt(&SymMatrix { n: k, data: gram });
            let got = sqrt_gram_from_features(&w, k, d).unwrap();
            let scale = want.data.iter().fold(0.0f64, |m, v| m.max(v.abs())).max(1e-300);
            for (g, e) in got.iter().zip(&want.data) {
                // The task-side root carries ~sqrt(eps) noise in its null directions.
                assert!((g - e).abs() <= 1e-6 * scale + 1e-12, "k={k} d={d}: {g} vs {e}");
            }
            assert!((0..k).all(|i| (0..k).all(|j| got[i * k + j] == got[j * k + i])));
        }
        let mut bad = vec![0.0; 6];
        bad[1] = f64::INFINITY;
        assert!(sqrt_gram_from_features(&bad, 3, 2).is_none());
    }

    fn stream(n: usize, d: usize, k: usize) -> (Vec<f64>, Vec<i64>, Vec<f64>) {
        test_support::stream(n, d, k, 5, |x, _, _| x[0] + 0.5 * x[2] > 0.0)
    }

    #[test]
    fn couplings_stay_symmetric_positive_definite() {
        let (n, d, k) = (400, 6, 4);
        let (x, tasks, y) = stream(n, d, k);
        let rows = Rows::dense(&x, n, d);
        for update in [
            RelationUpdate::Batch,
            RelationUpdate::LogDet,
            RelationUpdate::VonNeumann,
        ] {
            let mut m = Omtrl::build(
                &OmtrlParams {
                    relation_update: update,
                    eta: 1e-3,
                    epoch: 100,
                },
                &LinearSetting::new(k, d),
            )
            .unwrap();
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
        let rows = Rows::dense(&x, n, d);
        let mut a = Omtrl::build(
            &OmtrlParams {
                relation_update: RelationUpdate::LogDet,
                eta: 1e-3,
                epoch: 10_000,
            },
            &LinearSetting::new(k, d),
        )
        .unwrap();
        let mut b = MTPerceptron::build(
            &NoParams,
            &KernelSetting::new(&TaskKernel::complete(k).unwrap(), BaseKernel::linear(), d),
        )
        .unwrap();
        let sa = learn(&mut a, &rows, &tasks, &y).unwrap();
        let sb = learn(&mut b, &rows, &tasks, &y).unwrap();
        for (p, q) in sa.iter().zip(&sb) {
            assert!((p - q).abs() <= 1e-9 * q.abs().max(1.0));
        }
        assert!(Omtrl::build(
            &OmtrlParams {
                relation_update: RelationUpdate::Batch,
                eta: -1.0,
                epoch: 0
            },
            &LinearSetting::new(k, d)
        )
        .is_err());
        assert!(RelationUpdate::parse("nope").is_err());
    }
}
